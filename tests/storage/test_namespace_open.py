"""Opening a namespace only to read it (``open_namespace(uri, create=False)``) never creates one: a
missing namespace is one NamespaceNotFoundError naming where it was looked for, with nothing left
on disk or in ZooKeeper. The default (writers) still creates it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.client import KazooClient

import storage
from tests.zk import ZooKeeperServer


def test_embedded_missing_namespace_is_not_created(tmp_path: Path) -> None:
    for where, uri in [
        (tmp_path / "a" / "ns", f"distributedlog-local://{tmp_path / 'a' / 'ns'}"),
        (tmp_path / "plain", str(tmp_path / "plain")),
    ]:
        with pytest.raises(storage.NamespaceNotFoundError) as err:
            storage.open_namespace(uri, create=False)
        assert str(err.value) == (
            f"namespace {uri} does not exist (no metadata/metadata.db in {where}): check the URI; "
            "only writers create a namespace (dlog create, dlog write --create, the Spark sink)"
        )
        assert err.value.code == 510 and err.value.retriable is False
        assert isinstance(err.value, storage.DLError) and not isinstance(err.value, storage.LogNotFoundError)
        assert not where.exists() and not (tmp_path / "a").exists()

    # an existing directory that holds no namespace: refused, left as it was
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "readme.txt").write_text("hi")
    with pytest.raises(storage.NamespaceNotFoundError, match="docs"):
        storage.open_namespace(str(tmp_path / "docs"), create=False)
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == ["readme.txt"]

    # the default creates it (writers); then readers open it
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    with storage.open_namespace(uri) as ns:
        ns.create_log("x")
    with storage.open_namespace(uri, create=False) as ns:
        assert ns.list_logs() == ["x"]


def test_zookeeper_missing_namespace_is_not_created(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> None:
    path = f"{zk_chroot}/nested/ns"
    uri = f"distributedlog://{zk_server.hosts}{path}"
    with pytest.raises(storage.NamespaceNotFoundError) as err:
        storage.open_namespace(uri, {"zkSessionTimeoutSeconds": 4}, create=False)
    assert str(err.value) == (
        f"namespace {uri} does not exist (no ZooKeeper node {path} at {zk_server.hosts}): check the URI; "
        f"a new one is created and bound by `dlog --uri {uri} bind --segments file:///shared/abs/path`"
    )
    client = KazooClient(hosts=zk_server.hosts, timeout=10.0)
    client.start(timeout=30)
    try:
        assert client.exists(zk_chroot) is None  # not even the ancestors
        storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
        with storage.open_namespace(uri, create=False) as ns:
            assert ns.list_logs() == []
        # an existing path that is not bound: the binding error, as before
        client.create(f"{zk_chroot}/unbound", b"")
        with pytest.raises(storage.MetadataError, match="not bound"):
            storage.open_namespace(f"distributedlog://{zk_server.hosts}{zk_chroot}/unbound", create=False)
    finally:
        client.stop()
        client.close()
