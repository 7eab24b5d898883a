"""The namespace's catalog (:class:`storage.log.catalog.LogCatalog`): the names and segment lists of many
logs, on ZooKeeper re-read only where a watch fired. Every answer must be as new as the call, through
changes by other processes, a ZooKeeper restart and a session expiry (watches are lost with a session:
the catalog must not keep answering from before)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import storage
from storage import LogRecord
from tests.zk import ZooKeeperServer, expire_session


def _write(ns: storage.Namespace, log: str, txid: int) -> None:
    with ns.open_log(log).open_writer() as w:
        w.write(LogRecord(txid, b"r%d" % txid))


def _lssns(cat: storage.log.catalog.LogCatalog, names: list[str]) -> dict[str, list[int]]:
    return {n: [s.lssn for s in segs] for n, segs in cat.segments(names).items()}


def _reads(ns: storage.Namespace) -> int:
    """ZooKeeper requests the catalog's store made so far (kazoo's request counter)."""
    return int(ns.metastore._client._connection._xid)  # type: ignore[attr-defined]


def test_catalog_follows_changes_by_another_process(ns_uri: str) -> None:
    """Two namespaces on one tree: everything the writer side does is seen by the reader's catalog at its
    next call, in either backend (the embedded one simply reads again)."""
    with storage.open_namespace(ns_uri) as reader, storage.open_namespace(ns_uri) as writer:
        cat = reader.catalog()
        assert cat.list_logs() == [] and cat.segments(["a"]) == {}
        for name in ("a", "b", "dir/c"):
            writer.create_log(name)
        assert cat.list_logs() == ["a", "b", "dir/c"]
        assert _lssns(cat, ["a", "b", "dir/c", "missing"]) == {"a": [], "b": [], "dir/c": []}
        _write(writer, "a", 1)
        assert _lssns(cat, ["a", "b"]) == {"a": [1], "b": []}
        _write(writer, "a", 2)
        _write(writer, "dir/c", 3)
        assert _lssns(cat, ["a", "dir/c"]) == {"a": [1, 2], "dir/c": [1]}
        segs = cat.segments(["a"])["a"]
        assert [s.start_sequence_id for s in segs] == [0, 1]  # as readers see them
        writer.delete_log("b")
        writer.create_log("dir/d")
        assert cat.list_logs() == ["a", "dir/c", "dir/d"]
        assert _lssns(cat, ["b"]) == {}
        writer.delete_log("dir/c")
        writer.delete_log("dir/d")
        writer.create_log("dir")  # a directory of logs becomes a log
        assert cat.list_logs() == ["a", "dir"]
        assert reader.list_logs() == ["a", "dir"]


def test_zookeeper_catalog_reads_only_what_changed(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    names = [f"s{i:03d}" for i in range(200)]
    with storage.open_namespace(uri) as reader, storage.open_namespace(uri) as writer:
        for n in names:
            writer.create_log(n)
        cat = reader.catalog()
        assert cat.list_logs() == names
        assert len(cat.segments(names)) == 200
        before = _reads(reader)
        assert len(cat.segments(names)) == 200 and cat.list_logs() == names
        idle = _reads(reader) - before
        assert idle <= 4  # a sync per call: nothing was read again
        _write(writer, "s007", 1)
        before = _reads(reader)
        assert _lssns(cat, names)["s007"] == [1]
        assert _reads(reader) - before <= 6  # sync, the changed log's children, its segments


@pytest.fixture
def zk_pair(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> Iterator[tuple[storage.Namespace, ...]]:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    conf = {"zkSessionTimeoutSeconds": 4}
    with storage.open_namespace(uri, conf) as reader, storage.open_namespace(uri, conf) as writer:
        yield reader, writer


def _wait_connected(ns: storage.Namespace, old_session: int | None = None) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        creds = ns.metastore.session_credentials()  # type: ignore[attr-defined]
        if creds is not None and creds[0] != old_session:
            return
        time.sleep(0.05)
    raise AssertionError("the store did not reconnect")


def test_catalog_after_session_expiry(zk_pair: tuple[storage.Namespace, ...], zk_server: ZooKeeperServer) -> None:
    """Watches die with their session: after the store's new session, changes made since are seen (the
    reconnect fired every pending watch), and so are changes made after it."""
    reader, writer = zk_pair
    writer.create_log("a")
    _write(writer, "a", 1)
    cat = reader.catalog()
    assert cat.list_logs() == ["a"] and _lssns(cat, ["a"]) == {"a": [1]}
    old = reader.metastore.session_credentials()[0]  # type: ignore[attr-defined]
    expire_session(reader.metastore, zk_server.hosts)
    _write(writer, "a", 2)
    writer.create_log("b")
    _wait_connected(reader, old)
    assert cat.list_logs() == ["a", "b"]
    assert _lssns(cat, ["a", "b"]) == {"a": [1, 2], "b": []}
    _write(writer, "b", 3)  # after the new session: watched again
    writer.create_log("c")
    assert _lssns(cat, ["a", "b"]) == {"a": [1, 2], "b": [1]}
    assert cat.list_logs() == ["a", "b", "c"]


def test_catalog_after_zookeeper_restart(zk_pair: tuple[storage.Namespace, ...], zk_server: ZooKeeperServer) -> None:
    """A restarted server has forgotten every watch (the session survives): changes after the reconnect are
    still seen."""
    reader, writer = zk_pair
    writer.create_log("a")
    cat = reader.catalog()
    assert cat.list_logs() == ["a"] and _lssns(cat, ["a"]) == {"a": []}
    zk_server.restart()
    _wait_connected(reader)
    _wait_connected(writer)
    _write(writer, "a", 1)
    writer.create_log("b")
    assert _lssns(cat, ["a"]) == {"a": [1]}
    assert cat.list_logs() == ["a", "b"]
