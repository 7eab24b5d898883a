"""ZooKeeper-only behaviours: binding, real session expiry, ownership moving between writer
processes, and a ZooKeeper outage under a running writer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import storage
from storage import DLSN, LogRecord
from tests.storage.test_processes import Child
from tests.storage.test_writer_reader import read_all
from tests.zk import ZooKeeperServer, expire_session


@pytest.fixture(params=["file", "rados"])
def zk_uri(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A ZooKeeper namespace bound to local files or to a RADOS namespace of its own."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    if request.param == "rados":
        storage.bind_namespace(uri, segments=request.getfixturevalue("rados_location").uri())
    else:
        storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    yield uri


def wait_until(pred: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_unbound_namespace_and_binding(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    with pytest.raises(storage.MetadataError, match="bind"):
        storage.open_namespace(uri)
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'a'}")
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'a'}")  # same binding: fine
    with pytest.raises(storage.MetadataError, match="already bound"):
        storage.bind_namespace(uri, segments=f"file://{tmp_path / 'b'}")
    with pytest.raises(storage.InvalidArgumentError):
        storage.bind_namespace(uri, segments="relative/path")
    alias = uri.replace("distributedlog://", "distributedlog-zk://")
    with storage.open_namespace(alias) as ns:
        ns.create_log("x")
        assert ns.list_logs() == ["x"]
    with pytest.raises(storage.InvalidArgumentError):
        storage.open_namespace("distributedlog:///no-hosts")


def test_session_expiry_fences_the_old_writer(zk_uri: str, zk_server: ZooKeeperServer) -> None:
    conf = {"zkSessionTimeoutSeconds": 4, "lockTimeoutSeconds": 10, "writerOutputBufferSize": 0}
    ns_a = storage.open_namespace(zk_uri, conf)
    ns_b = storage.open_namespace(zk_uri, conf)
    try:
        old = ns_a.open_log("log").open_async_writer()
        acked = [old.write(LogRecord(t, b"a%d" % t)).result(10) for t in range(1, 11)]
        assert acked[-1] == DLSN(1, 9, 0)
        expire_session(ns_a.metastore, zk_server.hosts)
        # The old writer cannot acknowledge anything more...
        with pytest.raises(storage.LockingError):
            old.write(LogRecord(11, b"zombie")).result(10)
        with pytest.raises(storage.LockingError):
            old.flush().result(10)
        # ...a new writer takes over, fences and recovers segment 1, continues with segment 2.
        with ns_b.open_log("log").open_writer() as new:
            new.write(LogRecord(11, b"new"))
            assert new.flush() == DLSN(2, 0, 0)
        with pytest.raises(storage.LockingError):
            old.write(LogRecord(12, b"still a zombie"))
        old.close()
        recs = read_all(ns_b.open_log("log"))
        assert [r.txid for r in recs] == list(range(1, 12))
        assert [r.sequence_id for r in recs] == list(range(11))
    finally:
        ns_a.close()
        ns_b.close()


@pytest.mark.slow
def test_ownership_moves_between_writer_processes_10_cycles(zk_uri: str, subprocess_env: dict[str, str]) -> None:
    """Two writer processes contend for one log; the owner is SIGKILLed, the waiter takes over
    (after the dead owner's session expires), a fresh waiter lines up, ten times."""
    acked: list[int] = []
    procs: list[Child] = []
    try:
        current = Child(subprocess_env, "writer", zk_uri, "contended")
        procs.append(current)
        current.wait_for("open")
        for _cycle in range(10):
            waiting = Child(subprocess_env, "writer", zk_uri, "contended")  # blocks on the lock
            procs.append(waiting)
            while sum(1 for e in current.events if e["event"] == "ack") < 50:
                current.next_event()
            current.kill()
            acked += [int(e["txid"]) for e in current.events if e["event"] == "ack"]  # type: ignore[call-overload]
            opened = waiting.wait_for("open", timeout=60)
            assert int(opened["next_txid"]) > acked[-1]  # type: ignore[call-overload]
            current = waiting
        current.kill()
        acked += [int(e["txid"]) for e in current.events if e["event"] == "ack"]  # type: ignore[call-overload]
    finally:
        for p in procs:
            if p.proc.poll() is None:
                p.kill()
    with storage.open_namespace(zk_uri, {"lockTimeoutSeconds": 20}) as ns:
        dlm = ns.open_log("contended")
        dlm.open_writer().close()
        txids = [r.txid for r in read_all(dlm)]
    lost = set(acked) - set(txids)
    print(f"ownership cycles: 10, acked {len(acked)}, read {len(txids)}, lost {len(lost)}")
    assert not lost and len(txids) == len(set(txids)) and txids == sorted(txids)


def test_zookeeper_outage_under_a_running_writer(zk_uri: str, zk_server: ZooKeeperServer) -> None:
    """ZooKeeper stopped under a running writer, for less than the session (60 s here), costs the writer nothing: it
    goes on writing and acknowledging while the server is down (appends go to the segment store; a write used to
    fail with a retriable LockingError, "ownership cannot be confirmed"), and after the restart it goes on in the
    same session, the lock never lost; ``close`` (which completes the segment in ZooKeeper) works. Everything
    acknowledged is read back.

    Why this is safe: had the session expired at the server meanwhile and another writer taken the log over, that
    writer's recovery would have fenced this writer's in-progress ledger first, so none of its appends could succeed
    from then on, and everything acknowledged before would be in the recovered segment (tests/storage/test_zk_blip.py
    checks exactly that)."""
    # The session must outlive the outage (server stop, a JVM restart): on a loaded 2-core CI machine that once took
    # more than 30 s, and a session that expires loses ownership for good (as it must).
    conf: dict[str, object] = {"zkSessionTimeoutSeconds": 60, "lockTimeoutSeconds": 5, "writerOutputBufferSize": 0}
    with storage.open_namespace(zk_uri, conf) as ns:
        dlm = ns.open_log("outage")
        w = dlm.open_async_writer()
        lock = w._h.lock
        assert lock is not None
        acked = [t for t in range(1, 6) if w.write(LogRecord(t, b"v")).result(10)]
        zk_server.stop()
        try:
            for t in range(6, 26):  # no write fails while ZooKeeper is down
                w.write(LogRecord(t, b"v")).result(10)
                acked.append(t)
            assert w.flush().result(10) == DLSN(1, 24, 0)  # commits too
            assert w.ownership_held() and lock.is_held()
        finally:
            zk_server.start()
        for t in range(26, 46):
            w.write(LogRecord(t, b"v")).result(10)
            acked.append(t)
        assert w.ownership_held() and lock.is_held()  # same session: never lost, never re-acquired
        w.flush().result(10)
        w.close()
        txids = [r.txid for r in read_all(dlm)]
    assert txids == acked
