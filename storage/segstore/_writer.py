"""The group-committing writer of one local ledger file (see :mod:`storage.segstore.local`)."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from array import array
from concurrent.futures import Future

from storage._futures import FutureGroup
from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    SegmentStoreError,
    WriteCancelledError,
    WriterFencedError,
)
from storage.segstore import _ledgerfile as lf
from storage.segstore._acks import MAX_ENTRY_SIZE, copy_error, entry_bytes, report_batch
from storage.segstore.base import NO_ENTRY, AckListener, LedgerWriter

log = logging.getLogger(__name__)

#: A batch taken from the queue: its entries and, for each, its future (None: append_nowait).
_Batch = tuple[list[tuple[int, bytes]], list[Future[int] | None]]

_OPEN, _CLOSING, _CLOSED, _ABORTED = "open", "closing", "closed", "aborted"


class LocalLedgerWriter(LedgerWriter):
    """Appends to one ledger file; a background thread group-commits queued entries.

    The thread takes everything queued, encodes it as one buffer, and under ``flock(LOCK_EX)``
    on the ledger file re-reads the header (fenced -> the batch fails with
    :class:`WriterFencedError`), writes at the end of the frames and ``fdatasync``\\ s, then
    reports the batch in entry-id order: futures of :meth:`append_async` resolve, and entries
    of :meth:`append_nowait` go to the ack listener in one call per run of such entries.
    ``sync_count`` counts those barriers.

    Reports are serialized by ``_report_lock`` (taken before ``_cond``): whoever takes a batch
    out of ``_in_flight`` under ``_cond`` -- the thread when the write finished, or
    :meth:`abort` -- reports it before releasing ``_report_lock``, so reports never overtake
    each other and no entry is reported twice.
    """

    def __init__(self, ledger_id: int, fd: int, path: str) -> None:
        self._futures = FutureGroup()  # cheap futures resolved a batch at a time
        self._ledger_id = ledger_id
        self._fd = fd
        self._path = path
        self._cond = threading.Condition(threading.Lock())
        self._report_lock = threading.RLock()  # re-entrant: a listener may call abort()
        # queued entries (entry id, data), and for each its future (None: append_nowait)
        self._queue: list[tuple[int, bytes]] = []
        self._queue_futs: list[Future[int] | None] = []
        self._listener: AckListener | None = None
        self._state = _OPEN
        self._error: DLError | None = None  # sticky: every later append fails like this
        self._in_flight: _Batch | None = None  # the batch being written, until reported
        self._next_id = 0
        self._lac = NO_ENTRY
        self._bytes = 0
        self._end = lf.HEADER_SIZE  # where the next frame goes
        self._offsets = array("q")  # frame offsets of written entries, for the sealed index
        self._close_result: int | DLError | None = None
        self._thread: threading.Thread | None = None
        #: Number of durability barriers (fdatasync calls) issued for appends so far.
        self.sync_count = 0

    # --- LedgerWriter ---------------------------------------------------------------------
    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def bytes_written(self) -> int:
        return self._bytes

    def append_async(self, data: bytes) -> Future[int]:
        """Queue ``data`` as the next entry (see :meth:`LedgerWriter.append_async`).

        Raises:
            AlreadyClosedError: the writer was closed or aborted.
            InvalidArgumentError: ``data`` is not bytes-like or exceeds ``MAX_ENTRY_SIZE``.
        """
        payload = entry_bytes(data)
        fut: Future[int] = self._futures.new()
        with self._cond:
            if self._state != _OPEN:
                raise AlreadyClosedError(f"writer of ledger {self._ledger_id} is {self._state}")
            if self._error is not None:
                fut.set_exception(copy_error(self._error))
                return fut
            self._enqueue(payload, fut)
            self._bytes += len(payload)
        return fut

    def set_ack_listener(self, listener: AckListener) -> None:
        """See :meth:`LedgerWriter.set_ack_listener`: the listener is called once per run of
        :meth:`append_nowait` entries in each group commit."""
        self._listener = listener

    def append_nowait(self, data: bytes) -> None:
        """Queue ``data`` as the next entry; the ack listener learns its outcome (see
        :meth:`LedgerWriter.append_nowait`). If the writer already failed, the entry is
        queued anyway and reported failed, in order, by the commit thread.

        Raises:
            AlreadyClosedError: the writer was closed or aborted.
            InvalidArgumentError: no listener was set, or ``data`` is not bytes-like or
                exceeds ``MAX_ENTRY_SIZE``.
        """
        payload = data if type(data) is bytes and len(data) <= MAX_ENTRY_SIZE else entry_bytes(data)
        if self._listener is None:
            raise InvalidArgumentError("append_nowait needs an ack listener (set_ack_listener)")
        with self._cond:  # _enqueue inlined: this runs once per entry
            if self._state != _OPEN:
                raise AlreadyClosedError(f"writer of ledger {self._ledger_id} is {self._state}")
            queue = self._queue
            queue.append((self._next_id, payload))
            self._queue_futs.append(None)
            self._next_id += 1
            if self._error is None:
                self._bytes += len(payload)
            if self._thread is None:
                self._start_thread()
            if len(queue) == 1:
                self._cond.notify_all()

    def _enqueue(self, payload: bytes, fut: Future[int] | None) -> None:
        """Queue one entry (``_cond`` held, state open) and wake the commit thread."""
        queue = self._queue
        queue.append((self._next_id, payload))
        self._queue_futs.append(fut)
        self._next_id += 1
        if self._thread is None:
            self._start_thread()
        if len(queue) == 1:  # the thread waits only on an empty queue; close() on the thread
            self._cond.notify_all()

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"ledger-{self._ledger_id}-writer", daemon=True)
        self._thread.start()

    def close(self) -> int:
        """Wait for outstanding appends, seal the ledger as closed, return its last entry id.

        A second call returns the same result.

        Raises:
            WriterFencedError: the ledger was fenced before it could be sealed.
            SegmentStoreError: an append or the sealing failed with an I/O error.
            AlreadyClosedError: the writer was aborted.
        """
        with self._cond:
            if self._state == _ABORTED:
                raise AlreadyClosedError(f"writer of ledger {self._ledger_id} was aborted")
            if self._state == _OPEN:
                self._state = _CLOSING
                self._cond.notify_all()
            while self._close_result is None and (self._queue or self._in_flight):
                self._cond.wait()
            if self._state == _ABORTED:
                raise AlreadyClosedError(f"writer of ledger {self._ledger_id} was aborted")
            if self._close_result is None:
                self._close_result = self._seal()
                self._state = _CLOSED
            result = self._close_result
        self._join()
        if isinstance(result, DLError):
            raise copy_error(result)
        return result

    def abort(self) -> None:
        """Stop without sealing: every pending append (queued, or in a batch being written)
        fails with ``WriteCancelledError`` at once; an entry of a batch already being written
        may still become durable. Waits for that batch to finish, then releases the file.
        Idempotent; a no-op after close."""
        with self._report_lock:
            with self._cond:
                if self._state in (_CLOSED, _ABORTED):
                    return
                self._state = _ABORTED
                batches = [b for b in (self._in_flight, (self._queue, self._queue_futs)) if b is not None and b[0]]
                self._in_flight = None
                self._queue = []
                self._queue_futs = []
                self._cond.notify_all()
            err = WriteCancelledError(f"writer of ledger {self._ledger_id} aborted")
            for entries, futs in batches:
                self._report(entries, futs, err)
        self._join()
        with self._cond:
            self._close_fd()

    # --- internals ------------------------------------------------------------------------
    def _join(self) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and self._state == _OPEN:
                    self._cond.wait()
                if not self._queue:
                    return
                entries, self._queue = self._queue, []
                futs, self._queue_futs = self._queue_futs, []
                batch = self._in_flight = (entries, futs)
                lac = self._lac
                error = self._error
            if error is None:
                try:
                    self._write_batch(entries, lac)
                except DLError as exc:
                    error = exc
                except Exception as exc:  # never leave futures hanging on a bug
                    error = SegmentStoreError(f"ledger {self._ledger_id}: append failed: {exc!r}")
                    error.__cause__ = exc
            with self._report_lock:
                with self._cond:
                    if error is None:
                        self._lac = entries[-1][0]
                    elif self._error is None:
                        self._error = error
                    mine = self._in_flight is batch  # else abort() took (and reported) it
                    self._in_flight = None
                    self._cond.notify_all()
                if mine:
                    self._report(entries, futs, None if error is None else copy_error(error))

    def _report(self, entries: list[tuple[int, bytes]], futs: list[Future[int] | None], exc: DLError | None) -> None:
        """Resolve futures / call the listener for ``entries``, in order (``_report_lock`` held)."""
        report_batch(self._ledger_id, entries, futs, exc, self._listener, self._futures)

    def _write_batch(self, entries: list[tuple[int, bytes]], lac: int) -> None:
        buf, rel = lf.encode_frames(entries, lac)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                self._check_open()
                lf.pwrite_all(self._fd, buf, self._end)
                os.fdatasync(self._fd)
                self.sync_count += 1
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        except OSError as exc:
            raise SegmentStoreError(f"ledger {self._ledger_id}: append failed: {exc}") from exc
        self._offsets.extend(self._end + r for r in rel)
        self._end += len(buf)

    def _check_open(self) -> lf.Header:
        header = lf.read_header(self._fd)
        if header is None:
            raise SegmentStoreError(f"ledger {self._ledger_id}: damaged header in {self._path}")
        if header.sealed:
            raise WriterFencedError(f"ledger {self._ledger_id} was fenced")
        return header

    def _seal(self) -> int | DLError:
        """Seal as closed (called once, with ``_cond`` held and nothing in flight)."""
        try:
            if self._error is not None:
                return self._error
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                try:
                    header = self._check_open()
                    last = self._next_id - 1
                    closed = lf.Header(header.ledger_id, lf.STATE_CLOSED, last, self._end, self._end)
                    lf.seal(self._fd, closed, self._offsets, self._end)
                finally:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
            except OSError as exc:
                err = SegmentStoreError(f"ledger {self._ledger_id}: close failed: {exc}")
                err.__cause__ = exc
                return err
            self._lac = last
            return last
        except DLError as exc:
            return exc
        finally:
            self._close_fd()
