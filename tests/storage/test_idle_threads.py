"""An open writer that is not written to holds no thread: the threads that append to ledgers (the local ledgers'
shared pool, a RADOS ledger's own thread) and the immediate-flush commit thread exit after a short idle time and
are started again by the next write, with nothing lost, reordered or left unpublished (local files and RADOS, real
stores)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

import storage
import storage.log.writer as log_writer
import storage.segstore._queued as queued
import storage.segstore._writer as local_writer
from storage import DLSN, LogRecord
from storage.errors import AlreadyClosedError
from storage.segstore.base import SegmentStore
from storage.segstore.local import LocalSegmentStore
from storage.segstore.rados import RadosLocation
from tests.storage.observe import GENEROUS_S, wait_until
from tests.storage.segstore._child import RADOS_TEST_MAX_OBJECT_BYTES

#: Thread names of a ledger writer (local files, RADOS).
LEDGER_THREADS = ("ledger-io-", "rados-ledger-")


@pytest.fixture(params=["embedded", "zookeeper-rados"])
def backend(request: pytest.FixtureRequest) -> str:
    """Local files (with the embedded metadata store) and RADOS (with ZooKeeper)."""
    return str(request.param)


@pytest.fixture
def short_idle(monkeypatch: pytest.MonkeyPatch) -> float:
    """Idle threads exit after 50 ms instead of seconds (the tests wait for it)."""
    monkeypatch.setattr(queued, "IDLE_THREAD_EXIT_S", 0.05)
    monkeypatch.setattr(log_writer, "IDLE_THREAD_EXIT_S", 0.05)
    monkeypatch.setattr(local_writer.LEDGER_IO, "idle_exit_s", 0.05)
    return 0.05


@pytest.fixture
def tiny_idle(monkeypatch: pytest.MonkeyPatch) -> float:
    """Idle threads exit after 1 ms: they come and go between writes, racing with them."""
    monkeypatch.setattr(queued, "IDLE_THREAD_EXIT_S", 0.001)
    monkeypatch.setattr(log_writer, "IDLE_THREAD_EXIT_S", 0.001)
    monkeypatch.setattr(local_writer.LEDGER_IO, "idle_exit_s", 0.001)
    return 0.001


def writer_threads(log_name: str, before: set[threading.Thread]) -> list[str]:
    """Names of the live ledger-writer and commit threads started since ``before`` was taken."""
    return [
        t.name
        for t in threading.enumerate()
        if t not in before and t.is_alive() and (t.name.startswith(LEDGER_THREADS) or t.name == f"dl-commit-{log_name}")
    ]


def wait_no_writer_threads(log_name: str, before: set[threading.Thread]) -> None:
    wait_until(lambda: not writer_threads(log_name, before), f"the writer threads of {log_name!r} to exit")


def read_n(dlm: storage.LogManager, n: int) -> list[storage.LogRecordWithDLSN]:
    """The first ``n`` records of the log, waiting for them to be published (fails if they never are); checks
    that a reader opened then sees exactly those, and nothing more."""
    r = dlm.open_async_reader(DLSN.INITIAL)
    try:
        got: list[storage.LogRecordWithDLSN] = []

        def all_read() -> bool:
            got.extend(r.read_bulk(n - len(got), timeout_s=0.1).result(GENEROUS_S))
            return len(got) >= n

        wait_until(all_read, f"{n} records visible", poll_s=0)
    finally:
        r.close()
    now: list[storage.LogRecordWithDLSN] = []
    with dlm.open_reader(DLSN.INITIAL) as sync:
        while batch := sync.read_bulk(1000, non_blocking=True):
            now.extend(batch)
    assert [x.dlsn for x in now] == [x.dlsn for x in got]
    return got


# --- the log writer ------------------------------------------------------------------------------------------------
def test_idle_writer_holds_no_thread_and_writes_again(ns: storage.Namespace, short_idle: float) -> None:
    name = "idle"
    dlm = ns.open_log(name, {"enableImmediateFlush": True})
    before = set(threading.enumerate())
    w = dlm.open_async_writer()
    first = w.write(LogRecord(1, b"one")).result(GENEROUS_S)
    assert first == DLSN(1, 0, 0)
    wait_no_writer_threads(name, before)

    tail = dlm.open_async_reader(DLSN.INITIAL)  # tailing: its next read waits for the second record
    assert tail.read_next().result(GENEROUS_S).dlsn == first
    pending = tail.read_next()
    second = w.write(LogRecord(2, b"two")).result(GENEROUS_S)
    assert second > first and second.lssn == 1
    rec = pending.result(GENEROUS_S)  # published by the commit thread started again for it
    assert (rec.dlsn, rec.txid, rec.payload) == (second, 2, b"two")
    tail.close()
    got = read_n(dlm, 2)  # a reader opened after the ack sees the last record: it was committed
    assert [(x.dlsn, x.txid, x.payload) for x in got] == [(first, 1, b"one"), (second, 2, b"two")]

    wait_no_writer_threads(name, before)
    third = w.write(LogRecord(3, b"three")).result(GENEROUS_S)
    assert third > second
    assert [x.dlsn for x in read_n(dlm, 3)] == [first, second, third]
    w.close()
    (seg,) = dlm.log_segments()
    assert (seg.in_progress, seg.record_count, seg.last_dlsn, seg.last_txid) == (False, 3, third, 3)
    wait_no_writer_threads(name, before)  # a commit thread that was busy at close ends right after it


def test_close_after_the_threads_exited(ns: storage.Namespace, short_idle: float) -> None:
    name = "close-idle"
    dlm = ns.open_log(name, {"enableImmediateFlush": True})
    before = set(threading.enumerate())
    w = dlm.open_async_writer()
    dlsns = [f.result(GENEROUS_S) for f in [w.write(LogRecord(t, b"%d" % t)) for t in range(1, 4)]]
    wait_no_writer_threads(name, before)
    w.close()
    assert not writer_threads(name, before)
    (seg,) = dlm.log_segments()
    assert (seg.in_progress, seg.record_count, seg.last_dlsn) == (False, 3, dlsns[-1])
    assert [x.dlsn for x in read_n(dlm, 3)] == dlsns
    with pytest.raises(AlreadyClosedError):
        w.write(LogRecord(4, b"4"))


def test_abort_after_the_threads_exited(ns: storage.Namespace, short_idle: float) -> None:
    name = "abort-idle"
    dlm = ns.open_log(name, {"enableImmediateFlush": True})
    before = set(threading.enumerate())
    w = dlm.open_async_writer()
    dlsns = [f.result(GENEROUS_S) for f in [w.write(LogRecord(t, b"%d" % t)) for t in range(1, 4)]]
    wait_no_writer_threads(name, before)
    w.abort()
    assert not writer_threads(name, before)
    (seg,) = dlm.log_segments()
    assert seg.in_progress  # left for the next owner to recover
    with pytest.raises(AlreadyClosedError):
        w.write(LogRecord(4, b"4"))
    w2 = dlm.open_async_writer()  # recovers the segment: every acknowledged record is in it
    assert w2.write(LogRecord(4, b"4")).result(GENEROUS_S).lssn == 2
    w2.close()
    got = read_n(dlm, 4)
    assert [x.dlsn for x in got[:3]] == dlsns
    assert [x.txid for x in got] == [1, 2, 3, 4]


def test_writes_racing_the_idle_exit_lose_nothing(ns: storage.Namespace, tiny_idle: float) -> None:
    name = "race"
    dlm = ns.open_log(name, {"enableImmediateFlush": True})
    w = dlm.open_async_writer()
    total, producers = 2000, 4
    lock = threading.Lock()
    next_txid = iter(range(1, total + 1))
    written: list[tuple[int, Future[DLSN]]] = []

    def produce(seed: int) -> None:
        rnd = random.Random(seed)
        for _ in range(total // producers):
            with lock:  # txids must not decrease: take one and write it in one step
                txid = next(next_txid)
                written.append((txid, w.write(LogRecord(txid, b"%d" % txid))))
            if rnd.random() < 0.2:  # now and then long enough for the threads to exit
                time.sleep(rnd.uniform(0, 0.004))

    threads = [threading.Thread(target=produce, args=(seed,)) for seed in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GENEROUS_S)
        assert not t.is_alive()
    assert [txid for txid, _ in written] == list(range(1, total + 1))
    dlsns = [f.result(GENEROUS_S) for _, f in written]
    assert dlsns == sorted(set(dlsns))  # each acknowledged, at its own position, in write order
    got = read_n(dlm, total)  # every record published (the last one by a commit), once, in order
    assert [x.dlsn for x in got] == dlsns
    assert [x.txid for x in got] == list(range(1, total + 1))
    assert [x.payload for x in got] == [b"%d" % t for t in range(1, total + 1)]
    w.close()
    assert sum(s.record_count for s in dlm.log_segments()) == total


# --- the ledger writer on its own ---------------------------------------------------------------------------------
@pytest.fixture(params=["local", "rados"])
def segstore(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SegmentStore]:
    s: SegmentStore
    if request.param == "rados":
        from storage.segstore.rados import RadosSegmentStore

        location: RadosLocation = request.getfixturevalue("rados_location")
        s = RadosSegmentStore(location, max_object_bytes=RADOS_TEST_MAX_OBJECT_BYTES)
    else:
        s = LocalSegmentStore(tmp_path / "segstore")
    try:
        yield s
    finally:
        s.close()


def ledger_threads(ledger_id: int) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.is_alive() and t.name in {f"{p}{ledger_id}" for p in LEDGER_THREADS}]


def wait_ledger_idle(ledger_id: int) -> None:
    wait_until(lambda: not ledger_threads(ledger_id), f"the thread of ledger {ledger_id} to exit")


def test_ledger_appends_racing_the_idle_exit(segstore: SegmentStore, tiny_idle: float) -> None:
    writer = segstore.create_ledger()
    reports: list[tuple[int, int, BaseException | None]] = []
    writer.set_ack_listener(lambda count, last, error: reports.append((count, last, error)))
    rnd = random.Random(7)
    futures: list[tuple[int, Future[int]]] = []
    total = 2000
    for i in range(total):
        if i % 2:
            writer.append_nowait(b"%d" % i)
        else:
            futures.append((i, writer.append_async(b"%d" % i)))
        if rnd.random() < 0.1:
            time.sleep(rnd.uniform(0, 0.003))
    assert [f.result(GENEROUS_S) for _, f in futures] == [i for i, _ in futures]
    wait_until(lambda: sum(c for c, _, _ in reports) == total // 2, "every append_nowait reported")
    ok: list[int] = []
    for count, last, error in list(reports):
        assert error is None
        ok.extend(range(last - count + 1, last + 1))
    assert ok == list(range(1, total, 2))
    assert writer.close() == total - 1
    assert [d for _, d in segstore.read_entries(writer.ledger_id, 0, total - 1)] == [b"%d" % i for i in range(total)]


@pytest.mark.parametrize("end", ["close", "abort"])
def test_ledger_close_or_abort_after_the_thread_exited(segstore: SegmentStore, short_idle: float, end: str) -> None:
    writer = segstore.create_ledger()
    assert not ledger_threads(writer.ledger_id)  # none before the first append
    assert [writer.append_async(b"%d" % i).result(GENEROUS_S) for i in range(3)] == [0, 1, 2]
    wait_ledger_idle(writer.ledger_id)
    assert writer.append_async(b"3").result(GENEROUS_S) == 3  # a new thread
    wait_ledger_idle(writer.ledger_id)
    finish: Callable[[], Any] = writer.close if end == "close" else writer.abort
    result = finish()
    assert not ledger_threads(writer.ledger_id)
    with pytest.raises(AlreadyClosedError):
        writer.append_async(b"4")
    if end == "close":
        assert result == 3
        assert writer.close() == 3  # again: the same result
        assert [d for _, d in segstore.read_entries(writer.ledger_id, 0, 3)] == [b"0", b"1", b"2", b"3"]
    else:
        writer.abort()  # idempotent
        assert segstore.fence(writer.ledger_id) == 3  # recovery finds every acknowledged entry
