"""The ack-listener protocol of ``LedgerWriter`` (``set_ack_listener`` + ``append_nowait``):
the local writer's group-commit reports and the futures-based default of the interface."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from storage.errors import (
    AlreadyClosedError,
    InvalidArgumentError,
    TransmitError,
    WriteCancelledError,
    WriterFencedError,
)
from storage.segstore.base import NO_ENTRY, LedgerWriter, SegmentStore
from storage.segstore.local import LocalSegmentStore
from tests.storage.observe import wait_flock_blocked
from tests.storage.segstore.test_append_read import HeldLock

Report = tuple[int, int, "BaseException | None"]


class Recorder:
    """An ack listener that records its calls and checks they never overlap."""

    def __init__(self) -> None:
        self.reports: list[Report] = []
        self._busy = False
        self._cond = threading.Condition()

    def __call__(self, count: int, last_entry_id: int, error: BaseException | None) -> None:
        assert not self._busy, "reports overlap"
        self._busy = True
        with self._cond:
            self.reports.append((count, last_entry_id, error))
            self._cond.notify_all()
        self._busy = False

    def settled(self) -> int:
        with self._cond:
            return sum(c for c, _, _ in self.reports)

    def wait_settled(self, n: int, timeout: float = 30) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: sum(c for c, _, _ in self.reports) >= n, timeout)

    def ok_ids(self) -> list[int]:
        ids: list[int] = []
        for count, last, error in self.reports:
            if error is None:
                ids.extend(range(last - count + 1, last + 1))
        return ids


class FuturesOnly(LedgerWriter):
    """A ledger writer that implements only the abstract methods (uses the base defaults)."""

    def __init__(self, inner: LedgerWriter) -> None:
        self._inner = inner

    @property
    def ledger_id(self) -> int:
        return self._inner.ledger_id

    def append_async(self, data: bytes) -> Future[int]:
        return self._inner.append_async(data)

    @property
    def last_add_confirmed(self) -> int:
        return self._inner.last_add_confirmed

    @property
    def bytes_written(self) -> int:
        return self._inner.bytes_written

    def close(self) -> int:
        return self._inner.close()

    def abort(self) -> None:
        self._inner.abort()


@pytest.mark.parametrize("wrapped", [False, True], ids=["local", "base-default"])
def test_reports_every_entry_once_in_order(store: SegmentStore, wrapped: bool) -> None:
    local = store.create_ledger()
    writer: LedgerWriter = FuturesOnly(local) if wrapped else local
    rec = Recorder()
    writer.set_ack_listener(rec)
    for i in range(500):
        writer.append_nowait(b"%d" % i)
    rec.wait_settled(500)
    assert rec.ok_ids() == list(range(500))
    assert all(error is None for _, _, error in rec.reports)
    assert writer.last_add_confirmed == 499
    assert writer.close() == 499
    assert [d for _, d in store.read_entries(local.ledger_id, 0, 499)] == [b"%d" % i for i in range(500)]
    if not wrapped:
        assert len(rec.reports) == local.sync_count  # one report per group commit


def test_group_commit_reports_runs(local_store: LocalSegmentStore) -> None:
    store = local_store
    writer = store.create_ledger()
    rec = Recorder()
    writer.set_ack_listener(rec)
    writer.append_nowait(b"first")
    rec.wait_settled(1)
    path = store.ledger_path(writer.ledger_id)
    lock = HeldLock(path)
    try:
        writer.append_nowait(b"stalled")  # taken by the thread, which waits for the flock
        wait_flock_blocked(path)
        for i in range(10):
            writer.append_nowait(b"%d" % i)  # queued meanwhile: one batch
    finally:
        lock.release()
    rec.wait_settled(12)
    assert rec.reports[-1] == (10, 11, None)
    assert rec.ok_ids() == list(range(12))
    writer.close()


def test_mixed_with_append_async_keeps_order(store: SegmentStore) -> None:
    writer = store.create_ledger()
    rec = Recorder()
    writer.set_ack_listener(rec)
    futures = []
    for i in range(300):
        if i % 3 == 0:
            futures.append((i, writer.append_async(b"%d" % i)))
        else:
            writer.append_nowait(b"%d" % i)
    rec.wait_settled(200)
    assert [f.result(timeout=30) for _, f in futures] == [i for i, _ in futures]
    assert rec.ok_ids() == [i for i in range(300) if i % 3]
    assert writer.close() == 299


def test_nowait_needs_a_listener_and_an_open_writer(store: SegmentStore) -> None:
    writer = store.create_ledger()
    with pytest.raises(InvalidArgumentError):
        writer.append_nowait(b"x")
    with pytest.raises(InvalidArgumentError):
        FuturesOnly(writer).append_nowait(b"x")
    writer.set_ack_listener(Recorder())
    with pytest.raises(InvalidArgumentError):
        writer.append_nowait("text")  # type: ignore[arg-type]
    writer.close()
    with pytest.raises(AlreadyClosedError):
        writer.append_nowait(b"x")


@pytest.mark.parametrize("wrapped", [False, True], ids=["local", "base-default"])
def test_fenced_entries_fail_once_each(store: SegmentStore, wrapped: bool) -> None:
    local = store.create_ledger()
    writer: LedgerWriter = FuturesOnly(local) if wrapped else local
    rec = Recorder()
    writer.set_ack_listener(rec)
    writer.append_nowait(b"durable")
    rec.wait_settled(1)
    assert store.fence(local.ledger_id) == 0
    for _ in range(5):
        writer.append_nowait(b"late")
    rec.wait_settled(6)
    local.abort()  # stops the writer's thread: every report it was going to make is made
    assert rec.settled() == 6  # each entry once
    assert rec.ok_ids() == [0]
    failed = [(c, last, e) for c, last, e in rec.reports if e is not None]
    assert sum(c for c, _, _ in failed) == 5
    assert all(isinstance(e, WriterFencedError) for _, _, e in failed)
    if wrapped:
        assert all(last == NO_ENTRY for _, last, _ in failed)


def test_abort_reports_pending_as_cancelled(local_store: LocalSegmentStore) -> None:
    store = local_store
    writer = store.create_ledger()
    rec = Recorder()
    writer.set_ack_listener(rec)
    writer.append_nowait(b"kept")
    rec.wait_settled(1)
    path = store.ledger_path(writer.ledger_id)
    lock = HeldLock(path)
    try:
        writer.append_nowait(b"in flight")
        wait_flock_blocked(path)  # the thread took it and waits for the flock
        for _ in range(4):
            writer.append_nowait(b"queued")
        aborter = threading.Thread(target=writer.abort)
        aborter.start()
        rec.wait_settled(6)  # at once, while the batch in flight still waits for the flock
    finally:
        lock.release()
    aborter.join(30)
    assert not aborter.is_alive()  # abort() returned: the writer's thread is gone, nothing more is reported
    assert rec.settled() == 6  # the finished batch in flight is not reported again
    assert rec.reports[0] == (1, 0, None)
    assert [(c, last) for c, last, _ in rec.reports[1:]] == [(1, 1), (4, 5)]
    in_flight, queued = rec.reports[1][2], rec.reports[2][2]
    assert isinstance(in_flight, TransmitError) and in_flight.retriable  # may be durable: recovery decides
    assert "in flight" in str(in_flight) and "unknown" in str(in_flight)
    assert isinstance(queued, WriteCancelledError)  # never sent: certainly not written
