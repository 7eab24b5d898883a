"""Binding ZooKeeper namespaces to a Ceph RADOS segment store: the URI forms, what is stored, and
one clear error (with nothing bound) for an unreachable cluster, a missing pool or bad credentials."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import storage
from storage.segstore.rados import RadosLocation, RadosSegmentStore
from tests.ceph import CephCluster
from tests.cli.test_cli import parse_records
from tests.storage.observe import finishes
from tests.zk import ZooKeeperServer, free_port


def _root_data(server: ZooKeeperServer, chroot: str) -> bytes:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=server.hosts)
    zk.start(timeout=10)
    try:
        return zk.get(chroot)[0] if zk.exists(chroot) else b""
    finally:
        zk.stop()
        zk.close()


def _exists(server: ZooKeeperServer, path: str) -> bool:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=server.hosts)
    zk.start(timeout=10)
    try:
        return zk.exists(path) is not None
    finally:
        zk.stop()
        zk.close()


def test_bind_to_rados_and_use_it(
    zk_server: ZooKeeperServer, zk_chroot: str, ceph_cluster: CephCluster, rados_location: RadosLocation
) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    given = RadosLocation(rados_location.pool, rados_location.conf, rados_location.client_id, rados_location.keyring)
    storage.bind_namespace(uri, segments=given.uri())  # no namespace given: binding picks one
    stored = json.loads(_root_data(zk_server, zk_chroot))
    bound = RadosLocation.parse(stored["segments"])
    assert (bound.pool, bound.conf, bound.client_id, bound.keyring) == (
        given.pool,
        given.conf,
        given.client_id,
        given.keyring,
    )
    assert re.fullmatch(rf"dl\.{zk_chroot.strip('/')}\.[0-9a-f]{{8}}", bound.namespace), bound.namespace
    storage.bind_namespace(uri, segments=given.uri())  # the same location again: a no-op
    with pytest.raises(storage.MetadataError, match="already bound"):
        storage.bind_namespace(uri, segments="file:///tmp/elsewhere")
    with storage.open_namespace(uri) as ns:
        assert isinstance(ns.segstore, RadosSegmentStore)
        with ns.open_log("events").open_writer() as w:
            w.write(storage.LogRecord(1, b"on rados"))
            assert w.flush() == storage.DLSN(1, 0, 0)
        ledger = ns.open_log("events").log_segments()[0].ledger_id
    with RadosSegmentStore(bound) as direct:  # the data is in the bound RADOS namespace
        assert ledger in direct.list_ledgers()


@pytest.mark.parametrize("case", ["unreachable", "missing-pool", "bad-credentials", "bad-uri"])
def test_bad_rados_binding_is_one_clear_error_and_binds_nothing(
    case: str, zk_server: ZooKeeperServer, zk_chroot: str, rados_location: RadosLocation, tmp_path: Path
) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    loc = rados_location
    conf: dict[str, object] = {"radosConnectTimeoutSeconds": 2}
    if case == "unreachable":  # a monitor address where nothing listens
        text = Path(loc.conf).read_text()
        dead = re.sub(r"mon_host = .*", f"mon_host = [v2:127.0.0.1:{free_port()}]", text)
        (tmp_path / "dead.conf").write_text(dead)
        segments = RadosLocation(loc.pool, str(tmp_path / "dead.conf"), loc.client_id, loc.keyring).uri()
        expected, error = "cannot connect", storage.SegmentStoreError
    elif case == "missing-pool":
        segments = RadosLocation("no-such-pool", loc.conf, loc.client_id, loc.keyring).uri()
        expected, error = "pool 'no-such-pool' does not exist", storage.SegmentStoreError
    elif case == "bad-credentials":
        bad = tmp_path / "bad.keyring"
        bad.write_text(f"[client.{loc.client_id}]\n\tkey = AQBJ9yNnAAAAABAAAAAAAAAAAAAAAAAAAAAAAA==\n")
        segments = RadosLocation(loc.pool, loc.conf, loc.client_id, str(bad)).uri()
        expected, error = "refused the credentials", storage.SegmentStoreError
    else:
        segments = f"rados://{loc.pool}?conf=relative/ceph.conf"
        expected, error = "needs conf=/abs/path", storage.InvalidArgumentError
    with pytest.raises(error, match=expected) as info:
        # radosConnectTimeoutSeconds bounds the wait (librados alone waits 300 s): it ends, with generous slack
        finishes(lambda: storage.bind_namespace(uri, segments=segments, conf=conf), f"bind ({case})")
    print(f"{case}: {info.value}")
    if case == "unreachable":
        assert info.value.retriable
    assert not _exists(zk_server, zk_chroot), "a failed bind creates nothing"
    with pytest.raises(storage.NamespaceNotFoundError, match="does not exist"):
        storage.open_namespace(uri, create=False)


def test_dlog_bind_rados(zk_server: ZooKeeperServer, zk_chroot: str, rados_location: RadosLocation) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"

    def dlog(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dlog", "--uri", uri, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    bound = dlog("bind", "--segments", rados_location.uri())
    assert bound.returncode == 0, bound.stderr
    assert "rados://" in bound.stdout
    created = dlog("create", "clicks")
    assert created.returncode == 0, created.stderr
    wrote = dlog("write", "clicks", stdin="a\nb\nc\n")
    assert wrote.returncode == 0, wrote.stderr
    dumped = dlog("dump", "clicks")
    assert dumped.returncode == 0, dumped.stderr
    assert [payload for _, _, payload in parse_records(dumped.stdout)] == ["a", "b", "c"]
    missing = dlog("bind", "--segments", "rados://nope?conf=/etc/nope.conf")
    assert missing.returncode != 0 and "already bound" in missing.stderr and "Traceback" not in missing.stderr


def test_dlog_bind_that_fails_creates_nothing(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> None:
    """A bind refused by the segment store leaves no znode, and a bind to unreachable ZooKeeper makes no directory:
    afterwards every command says the namespace does not exist (not "not bound"), and a good bind then works."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"

    def dlog(*args: str, at: str = uri) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dlog", "--uri", at, *args], capture_output=True, text=True, timeout=120
        )

    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the segment directory would go")
    refused = dlog("bind", "--segments", f"file://{blocked}/segments")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert not _exists(zk_server, zk_chroot)
    listed = dlog("list")
    assert listed.returncode != 0 and "does not exist" in listed.stderr and "not bound" not in listed.stderr

    segments = tmp_path / "segments"
    dead = f"distributedlog://127.0.0.1:{free_port()}{zk_chroot}"
    quick = tmp_path / "quick.conf"
    quick.write_text("zkSessionTimeoutSeconds=2\n")
    unreachable = dlog("--conf", str(quick), "bind", "--segments", f"file://{segments}", at=dead)
    assert unreachable.returncode != 0 and "ZooKeeper" in unreachable.stderr, unreachable.stderr
    assert not segments.exists(), "a bind that cannot reach ZooKeeper makes no segment directory"

    bound = dlog("bind", "--segments", f"file://{segments}")
    assert bound.returncode == 0, bound.stderr
    assert json.loads(_root_data(zk_server, zk_chroot))["segments"] == f"file://{segments}"
    assert dlog("list").returncode == 0
