"""The writer of one RADOS ledger: guarded, pipelined, group-committed appends
(see :mod:`storage.segstore.rados` for the layout and the fencing protocol)."""

from __future__ import annotations

import errno
import time
from array import array
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from storage.common.stats import store_stats
from storage.errors import DLError
from storage.segstore import _ledgerfile as lf
from storage.segstore._queued import ABORTED, Batch, QueuedLedgerWriter, copy_error
from storage.segstore._rados_io import CLOSED, OPEN, Head, append_error, errno_of, head_oid, part_oid

#: Largest offset index kept in a closed ledger's head (8 bytes an entry); beyond it readers scan.
MAX_INDEX_BYTES = 16 << 20


_STATS = store_stats("rados")


class _Op:
    """One append operation in flight: its entries, their futures, and (once done) its result."""

    __slots__ = ("completion", "entries", "futs", "part", "rc", "sent")

    def __init__(self, entries: list[tuple[int, bytes]], futs: list[Future[int] | None], part: int) -> None:
        self.entries = entries
        self.futs = futs
        self.part = part
        self.rc: int | None = None
        self.completion: Any = None
        self.sent = time.perf_counter()


class RadosLedgerWriter(QueuedLedgerWriter):
    """Appends to one ledger's RADOS objects from a background thread.

    The thread takes what is queued (up to ``max_write_bytes``), encodes it as frames carrying
    the current LAC, and sends it as ONE write operation on the ledger's current data object:
    ``omap_cmp(state == "open") + append(frames)`` (the first operation on a new object is
    ``create(exclusive) + set state=open + append`` instead). Up to ``max_in_flight`` operations
    are outstanding; RADOS applies one client's operations on one object in the order sent, and
    completes an operation only once every replica of the acting set has it. Completions are
    reported strictly in entry order: futures resolve (or the ack listener is told once per run)
    only when the operation and every earlier one succeeded.

    After any failure (fenced -> ``WriterFencedError``; a timeout -> retriable
    ``SegmentStoreError`` whose outcome is unknown) the writer stops: every later entry fails,
    operations already in flight are reported failed whatever they return, and nothing is retried
    -- recovery (``fence``) decides where the ledger ends.

    Before an object would exceed ``max_object_bytes`` the writer drains its pipeline, registers
    the next part in the head (``omap_cmp(state == "open")`` again) and goes on in a new object.
    Queue, life cycle and reports: :class:`~storage.segstore._queued.QueuedLedgerWriter`.
    """

    _thread_name = "rados-ledger"

    def __init__(
        self,
        ioctx: Any,
        rados_mod: Any,
        ledger_id: int,
        *,
        max_object_bytes: int,
        max_write_bytes: int,
        max_in_flight: int,
        on_change: Callable[[int], None],
    ) -> None:
        super().__init__(ledger_id)
        self._ioctx = ioctx
        self._rados = rados_mod
        self._max_object = max_object_bytes
        self._max_write = max_write_bytes
        self._max_in_flight = max_in_flight
        self._on_change = on_change
        self._in_flight: deque[_Op] = deque()
        # the object being appended to (only the thread changes these)
        self._parts: list[int] = [0]
        self._ends: list[int] = []  # data end of each finished part
        self._part_bytes = 0
        self._part_created = False
        self._offsets = array("q")  # offset of each entry inside its part, for the closed index

    def _busy(self) -> bool:
        return bool(self._in_flight)

    def _take_in_flight(self) -> list[Batch]:
        batches: list[Batch] = [(op.entries, op.futs) for op in self._in_flight]
        self._in_flight.clear()
        return batches

    # --- the thread -----------------------------------------------------------------------------
    def _has_work(self) -> bool:
        """An operation finished (to report), or something queued and room in the pipeline (``_cond`` held)."""
        in_flight = self._in_flight
        if in_flight and in_flight[0].rc is not None:
            return True
        return bool(self._queue) and len(in_flight) < self._max_in_flight

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._wait_for_work(self._has_work):
                    return
                done: list[_Op] = []
                while self._in_flight and self._in_flight[0].rc is not None:
                    done.append(self._in_flight.popleft())
            if done:
                self._settle(done)
                continue
            self._send_next()

    def _settle(self, done: list[_Op]) -> None:
        """Report finished operations in order; the first failure becomes sticky."""
        with self._report_lock:
            for op in done:
                with self._cond:
                    if self._state == ABORTED:  # abort() reported everything
                        return
                    if op.rc == 0:
                        _STATS.observe("append", time.perf_counter() - op.sent, sum(len(d) for _, d in op.entries))
                    else:
                        _STATS.error("append")
                    if self._error is None and op.rc != 0:
                        self._error = append_error(op.rc or 0, self._ledger_id, op.part)
                    error = self._error
                    if error is None:
                        self._lac = op.entries[-1][0]
                    self._cond.notify_all()
                self._report(op.entries, op.futs, None if error is None else copy_error(error))
            if self._error is None:
                self._on_change(self._ledger_id)

    def _send_next(self) -> None:
        """Take a batch off the queue and send it (or fail it at once after an error); roll to a
        new data object first when the batch would not fit, once nothing is in flight."""
        with self._cond:
            if not self._queue:
                return
            # as much as fits in one operation and in what is left of the data object (an empty
            # object takes at least one entry, whatever its size)
            limit = min(self._max_write, self._max_object - self._part_bytes)
            size = 0
            n = 0
            for _, payload in self._queue:
                framed = len(payload) + lf.FRAME_HEADER_SIZE
                if size + framed > limit and (n or self._part_bytes):
                    break
                size += framed
                n += 1
            error = self._error
            if error is None and n == 0:  # the data object is full
                if self._in_flight:  # roll only with an empty pipeline: no entry may follow a hole
                    return
                roll_at = self._queue[0][0]
            else:
                if error is not None:  # failed: everything queued fails now, in order
                    n = len(self._queue)
                roll_at = None
                entries, self._queue = self._queue[:n], self._queue[n:]
                futs, self._queue_futs = self._queue_futs[:n], self._queue_futs[n:]
                op = _Op(entries, futs, len(self._parts) - 1)
                if error is None:  # in flight from here on, so that abort() reports it
                    self._in_flight.append(op)
                lac = self._lac
        if roll_at is not None:
            self._roll(roll_at)  # on failure the error is sticky: the next call fails the batch
            return
        if error is not None:
            with self._report_lock:
                self._report(op.entries, op.futs, copy_error(error))
            return
        buf, rel = lf.encode_frames(op.entries, lac)
        base = self._part_bytes
        self._offsets.extend(base + r for r in rel)
        self._part_bytes += len(buf)
        try:
            self._submit(op, buf)
        except Exception as exc:  # the binding refused to send: the op failed, nothing applied
            with self._cond:
                op.rc = -(errno_of(exc) or errno.EIO)
                self._cond.notify_all()

    def _submit(self, op: _Op, buf: bytes) -> None:
        rados = self._rados
        ioctx = self._ioctx
        write_op = ioctx.create_write_op()
        if not self._part_created:
            write_op.new(rados.LIBRADOS_CREATE_EXCLUSIVE)
            ioctx.set_omap(write_op, ("state",), (OPEN.encode(),))
            self._part_created = True
        else:
            write_op.omap_cmp("state", OPEN, rados.LIBRADOS_CMPXATTR_OP_EQ)
        write_op.append(buf)

        def done(completion: Any) -> None:
            rc = completion.get_return_value()
            ioctx.release_write_op(write_op)
            with self._cond:
                op.rc = rc
                self._cond.notify_all()

        self.sync_count += 1
        op.completion = ioctx.operate_aio_write_op(write_op, part_oid(self._ledger_id, op.part), oncomplete=done)

    def _roll(self, first_entry: int) -> None:
        """Register part ``len(parts)`` starting at ``first_entry`` in the head (guarded by the
        head being open); the next operation creates its object."""
        parts = [*self._parts, first_entry]
        head = Head(OPEN, tuple(parts))
        try:
            with self._rados.WriteOpCtx() as op:
                op.omap_cmp("state", OPEN, self._rados.LIBRADOS_CMPXATTR_OP_EQ)
                omap = head.omap()
                self._ioctx.set_omap(op, tuple(omap), tuple(omap.values()))
                self._ioctx.operate_write_op(op, head_oid(self._ledger_id))
        except Exception as exc:
            err = append_error(-(errno_of(exc) or errno.EIO), self._ledger_id, len(self._parts))
            with self._cond:
                if self._error is None:
                    self._error = err
            return
        self._ends.append(self._part_bytes)
        self._parts = parts
        self._part_bytes = 0
        self._part_created = False

    def _seal(self) -> int | DLError:
        """Seal as closed (``_cond`` held, nothing queued or in flight)."""
        if self._error is not None:
            return self._error
        last = self._next_id - 1
        ends = (*self._ends, self._part_bytes)
        indexed = 8 * len(self._offsets) <= MAX_INDEX_BYTES and last >= 0
        head = Head(CLOSED, tuple(self._parts), last, ends, indexed)
        rados = self._rados
        try:
            with rados.WriteOpCtx() as op:
                op.omap_cmp("state", OPEN, rados.LIBRADOS_CMPXATTR_OP_EQ)
                omap = head.omap()
                self._ioctx.set_omap(op, tuple(omap), tuple(omap.values()))
                if indexed:
                    op.write_full(lf.encode_index(self._offsets))
                self._ioctx.operate_write_op(op, head_oid(self._ledger_id))
        except Exception as exc:  # ECANCELED: fenced first; ETIMEDOUT: unknown, recovery decides
            return append_error(-(errno_of(exc) or errno.EIO), self._ledger_id, len(self._parts) - 1)
        self._lac = last
        self._on_change(self._ledger_id)
        return last
