"""Segment store behaviour in one process, on every store kind: append/read, the LAC rule, group
commit, fencing, errors (plus what only the local store has: flock stalls, descriptor caching, inotify)."""

from __future__ import annotations

import fcntl
import inspect
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from storage.errors import (
    AlreadyClosedError,
    InvalidArgumentError,
    LedgerNotFoundError,
    SegmentStoreError,
    TransmitError,
    WriteCancelledError,
    WriterFencedError,
)
from storage.segstore.base import NO_ENTRY, LedgerWriter, SegmentStore
from storage.segstore.local import LocalSegmentStore
from tests.storage.observe import GENEROUS_S, wait_flock_blocked, wait_parked_in


class HeldLock:
    """Holds the ledger file's flock from another file description, stalling its writer."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def test_round_trip_in_order(store: SegmentStore, other: SegmentStore) -> None:
    writer = store.create_ledger()
    payloads = [b"", b"a", os.urandom(100_000), b"x" * 4097]
    assert [writer.append(p) for p in payloads] == [0, 1, 2, 3]
    assert writer.bytes_written == sum(map(len, payloads))
    assert writer.last_add_confirmed == 3
    assert writer.close() == 3
    for s in (store, other):
        assert list(s.read_entries(writer.ledger_id, 0, 3)) == list(enumerate(payloads))
        assert s.read_entry(writer.ledger_id, 2) == payloads[2]
        assert list(s.read_entries(writer.ledger_id, 1, 2)) == [(1, b"a"), (2, payloads[2])]


def test_lac_piggyback_rule(store: SegmentStore, other: SegmentStore) -> None:
    writer = store.create_ledger()
    lid = writer.ledger_id
    assert other.last_add_confirmed(lid) == NO_ENTRY
    writer.append(b"e0")
    # Entry 0 is durable, but no later frame says so yet.
    assert other.last_add_confirmed(lid) == NO_ENTRY
    with pytest.raises(InvalidArgumentError):
        other.read_entries(lid, 0, 0)
    writer.append(b"e1")
    assert other.last_add_confirmed(lid) == 0
    assert other.read_entry(lid, 0) == b"e0"
    with pytest.raises(InvalidArgumentError):
        other.read_entry(lid, 1)
    info = other.info(lid)
    assert (info.closed, info.fenced, info.last_entry_id) == (False, False, 0)
    assert writer.close() == 1
    info = other.info(lid)
    assert (info.closed, info.fenced, info.last_entry_id) == (True, False, 1)
    assert list(other.read_entries(lid, 0, 1)) == [(0, b"e0"), (1, b"e1")]
    with pytest.raises(InvalidArgumentError):
        other.read_entries(lid, 0, 2)


def test_group_commit_batches_and_resolves_in_order(local_store: LocalSegmentStore) -> None:
    store = local_store
    writer = store.create_ledger()
    resolved: list[int] = []
    lock = HeldLock(store.ledger_path(writer.ledger_id))  # stall the writer thread
    try:
        futures = [writer.append_async(b"%d" % i) for i in range(200)]
        for fut in futures:
            fut.add_done_callback(lambda f: resolved.append(f.result()))
        assert not any(f.done() for f in futures)  # nothing acknowledged before it is durable
    finally:
        lock.release()
    assert [f.result(timeout=30) for f in futures] == list(range(200))
    assert resolved == list(range(200))
    # The thread took at most one entry before stalling; everything else went in one batch.
    assert writer.sync_count <= 2
    writer.close()


def test_group_commit_from_many_threads(store: SegmentStore) -> None:
    writer = store.create_ledger()
    ids: queue.Queue[int] = queue.Queue()

    def worker() -> None:
        for _ in range(100):
            ids.put(writer.append(b"t"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = sorted(ids.get() for _ in range(800))
    assert got == list(range(800))
    assert writer.sync_count < 800
    assert writer.close() == 799
    assert [eid for eid, _ in store.read_entries(writer.ledger_id, 0, 799)] == list(range(800))


def test_big_ledger_reopens_from_index(store: SegmentStore, open_store: Callable[..., SegmentStore]) -> None:
    writer = store.create_ledger()
    payloads = [os.urandom(1 + i % 3000) for i in range(3000)]
    futures = [writer.append_async(p) for p in payloads]
    futures[-1].result()
    writer.close()
    with open_store() as fresh:
        assert fresh.info(writer.ledger_id).last_entry_id == 2999
        assert [d for _, d in fresh.read_entries(writer.ledger_id, 0, 2999)] == payloads
        assert fresh.read_entry(writer.ledger_id, 1234) == payloads[1234]


def test_fence_in_process(store: SegmentStore, other: SegmentStore) -> None:
    writer = store.create_ledger()
    for i in range(3):
        writer.append(b"%d" % i)
    assert other.fence(writer.ledger_id) == 2
    assert other.fence(writer.ledger_id) == 2  # idempotent
    with pytest.raises(WriterFencedError):
        writer.append(b"late")
    with pytest.raises(WriterFencedError):
        writer.append_async(b"later").result()
    with pytest.raises(WriterFencedError):
        writer.close()
    info = store.info(writer.ledger_id)
    assert (info.closed, info.fenced, info.last_entry_id) == (False, True, 2)
    assert [d for _, d in store.read_entries(writer.ledger_id, 0, 2)] == [b"0", b"1", b"2"]


def test_fence_closed_and_empty(store: SegmentStore) -> None:
    closed = store.create_ledger()
    closed.append(b"x")
    assert closed.close() == 0
    assert store.fence(closed.ledger_id) == 0
    assert store.info(closed.ledger_id).closed
    empty = store.create_ledger()
    assert store.fence(empty.ledger_id) == NO_ENTRY
    assert store.info(empty.ledger_id).last_entry_id == NO_ENTRY
    with pytest.raises(InvalidArgumentError):
        store.read_entries(empty.ledger_id, 0, 0)
    empty.abort()
    nothing = store.create_ledger()
    assert nothing.close() == NO_ENTRY


def test_abort_cancels_pending(local_store: LocalSegmentStore) -> None:
    store = local_store
    writer = store.create_ledger()
    writer.append(b"kept")
    path = store.ledger_path(writer.ledger_id)
    lock = HeldLock(path)
    futures = [writer.append_async(b"x")]  # taken by the writer thread, which blocks on the flock ...
    wait_flock_blocked(path)
    futures += [writer.append_async(b"x") for _ in range(4)]  # ... and these queue behind it
    aborter = threading.Thread(target=writer.abort)
    aborter.start()
    try:
        # the one in flight may still become durable (outcome unknown); the queued ones were never sent
        assert isinstance(futures[0].exception(timeout=30), TransmitError)
        for fut in futures[1:]:
            assert isinstance(fut.exception(timeout=30), WriteCancelledError)
    finally:
        lock.release()
        aborter.join(30)
    assert not aborter.is_alive()
    with pytest.raises(AlreadyClosedError):
        writer.append_async(b"y")
    with pytest.raises(AlreadyClosedError):
        writer.close()
    writer.abort()  # idempotent
    assert not store.info(writer.ledger_id).closed  # aborting does not seal
    # the batch in flight when aborted became durable once the flock let it through (recovery keeps it);
    # the queued ones never reached the file
    assert store.fence(writer.ledger_id) == 1
    assert [d for _, d in store.read_entries(writer.ledger_id, 0, 1)] == [b"kept", b"x"]


def test_closed_writer_rejects_appends(store: SegmentStore) -> None:
    writer = store.create_ledger()
    writer.append(b"a")
    assert writer.close() == 0
    assert writer.close() == 0  # same answer again
    with pytest.raises(AlreadyClosedError):
        writer.append(b"b")
    with pytest.raises(InvalidArgumentError):
        store.create_ledger().append_async("text")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.info(-1),
        lambda s: s.fence(-1),
        lambda s: s.delete_ledger(-1),
        lambda s: s.wait_for_lac(-1, 0, 0),
        lambda s: s.read_entries(-1, 0, 0),
        lambda s: s.read_entries(1, -1, 0),
        lambda s: s.read_entries(1, 3, 2),
        lambda s: s.read_entries(1, 0, 5),
        lambda s: s.wait_for_lac(1, 0, -1),
    ],
)
def test_bad_arguments(store: SegmentStore, call: object) -> None:
    writer = store.create_ledger()
    assert writer.ledger_id == 1
    writer.append(b"a")
    writer.close()
    with pytest.raises(InvalidArgumentError):
        call(store)  # type: ignore[operator]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.info(99),
        lambda s: s.fence(99),
        lambda s: s.read_entries(99, 0, 0),
        lambda s: s.wait_for_lac(99, 0, 1),
        lambda s: s.last_add_confirmed(99),
    ],
)
def test_missing_ledger(store: SegmentStore, call: object) -> None:
    with pytest.raises(LedgerNotFoundError):
        call(store)  # type: ignore[operator]


def test_delete_and_list(store: SegmentStore, other: SegmentStore) -> None:
    writers = [store.create_ledger() for _ in range(3)]
    for w in writers:
        w.append(b"x")
        w.close()
    ids = [w.ledger_id for w in writers]
    assert store.list_ledgers() == ids
    assert other.read_entry(ids[1], 0) == b"x"  # caches a file descriptor
    store.delete_ledger(ids[1])
    store.delete_ledger(ids[1])  # missing is fine
    store.delete_ledger(12345)
    assert other.list_ledgers() == [ids[0], ids[2]]
    with pytest.raises(LedgerNotFoundError):
        other.info(ids[1])
    with pytest.raises(LedgerNotFoundError):
        other.read_entries(ids[1], 0, 0)
    assert store.create_ledger().ledger_id > max(ids)


def test_iterator_survives_delete_and_eviction(store_root: Path) -> None:
    with LocalSegmentStore(store_root, max_open_files=1) as s:
        w = s.create_ledger()
        for i in range(10):
            w.append(b"%d" % i)
        w.close()
        it = s.read_entries(w.ledger_id, 0, 9)
        assert next(it) == (0, b"0")
        w2 = s.create_ledger()
        w2.close()
        s.info(w2.ledger_id)  # evicts the first view from the one-slot cache
        assert [d for _, d in it] == [b"%d" % i for i in range(1, 10)]


def test_closed_store_rejects_calls(open_store: Callable[..., SegmentStore]) -> None:
    s = open_store()
    writer = s.create_ledger()
    pending = writer.append_async(b"x")
    s.close()
    s.close()
    assert pending.done()  # resolved or cancelled by the abort in close
    for call in (s.create_ledger, s.list_ledgers, lambda: s.info(1), lambda: s.watch(print)):
        with pytest.raises(AlreadyClosedError):
            call()


def check_wait_for_lac_and_watch(s: SegmentStore) -> None:
    writer = s.create_ledger()
    lid = writer.ledger_id
    writer.append(b"0")
    changes: queue.Queue[int] = queue.Queue()
    cancel = s.watch(changes.put)
    assert s.wait_for_lac(lid, NO_ENTRY, 0) == NO_ENTRY  # times out at once
    result: Future[int] = Future()
    # a timeout far beyond the test's patience: the waiter returns because the append woke it
    waiter = threading.Thread(target=lambda: result.set_result(s.wait_for_lac(lid, NO_ENTRY, 10 * GENEROUS_S)))
    waiter.daemon = True
    waiter.start()
    wait_parked_in(waiter, "wait_change", "storage/segstore/_changes.py")  # waiting before the append
    assert not result.done()
    writer.append(b"1")
    assert result.result(timeout=GENEROUS_S) == 0
    waiter.join()
    assert changes.get(timeout=30) == lid
    cancel()
    writer.close()
    assert s.wait_for_lac(lid, 5, 30) == 1  # sealed: returns at once


def test_wait_for_lac_and_watch_in_process(store: SegmentStore) -> None:
    check_wait_for_lac_and_watch(store)


def test_wait_for_lac_and_watch_local_polling(store_root: Path) -> None:
    with LocalSegmentStore(store_root, use_inotify=False) as s:
        check_wait_for_lac_and_watch(s)


def _parameters(fn: object) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]  # type: ignore[arg-type]


def test_store_satisfies_interface(store: SegmentStore) -> None:
    """Each store kind, and its ledger writer, takes every call of the interface as the interface declares it
    (parameter names, kinds and defaults; properties stay properties): code written against ``SegmentStore``
    and ``LedgerWriter`` -- keyword arguments included -- runs on every kind. Python checks none of this."""
    writer = store.create_ledger()
    try:
        for interface, impl in ((SegmentStore, type(store)), (LedgerWriter, type(writer))):
            assert isinstance(store if interface is SegmentStore else writer, interface)
            checked = 0
            for name in dir(interface):
                if name.startswith("_"):
                    continue
                declared, actual = inspect.getattr_static(interface, name), inspect.getattr_static(impl, name)
                if isinstance(declared, property):
                    assert isinstance(actual, property), f"{impl.__name__}.{name} is not a property"
                elif callable(declared):
                    want, got = getattr(interface, name), getattr(impl, name)
                    assert _parameters(got) == _parameters(want), (
                        f"{impl.__name__}.{name}{inspect.signature(got)} is not "
                        f"{interface.__name__}.{name}{inspect.signature(want)}"
                    )
                else:
                    continue
                checked += 1
            assert checked >= 8, (interface.__name__, checked)
    finally:
        writer.abort()


def test_allocated_id_then_create(store: SegmentStore, other: SegmentStore) -> None:
    """An allocated id is never handed out again (nor by another process's store) and makes no
    file until the ledger is created with it; creating it twice fails."""
    lid = store.allocate_ledger_id()
    assert lid not in store.list_ledgers()
    fresh = other.create_ledger()
    assert fresh.ledger_id > lid
    w = store.create_ledger(lid)
    assert w.ledger_id == lid and lid in other.list_ledgers()
    w.append(b"x")
    w.close()
    with pytest.raises(SegmentStoreError, match="already exists"):
        store.create_ledger(lid)
    assert list(other.read_entries(lid, 0, 0)) == [(0, b"x")]
    fresh.close()
