"""The group-committing writer of one local ledger file (see :mod:`storage.segstore.local`)."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from array import array

from storage.common.durable import os_error_detail
from storage.common.stats import store_stats
from storage.common.workers import WorkerPool
from storage.errors import (
    DLError,
    SegmentStoreError,
    WriterFencedError,
)
from storage.segstore import _ledgerfile as lf
from storage.segstore._queued import IDLE_THREAD_EXIT_S, Batch, QueuedLedgerWriter, copy_error

log = logging.getLogger(__name__)


_STATS = store_stats("local")

#: Threads that append to the local ledgers of this process, shared by all of them: a ledger with work takes a
#: thread for a turn (write and ``fdatasync`` what is queued, report it) and gives it back. Concurrent syncs of many
#: ledgers are what a journaling file system commits together; this many keep a disk busy without a thread per log.
LEDGER_IO_THREADS = 64

#: The pool of :data:`LEDGER_IO_THREADS` (an idle thread ends after ``IDLE_THREAD_EXIT_S``).
LEDGER_IO = WorkerPool("ledger-io", LEDGER_IO_THREADS, IDLE_THREAD_EXIT_S)


class LocalLedgerWriter(QueuedLedgerWriter):
    """Appends to one ledger file; a background thread group-commits queued entries.

    The thread takes everything queued, encodes it as one buffer, and under ``flock(LOCK_EX)``
    on the ledger file re-reads the header (fenced -> the batch fails with
    :class:`WriterFencedError`) and writes at the end of the frames; then it ``fdatasync``\\ s and
    reports the batch in entry-id order: futures of :meth:`append_async` resolve, and entries
    of :meth:`append_nowait` go to the ack listener in one call per run of such entries.
    ``sync_count`` counts those barriers. Queue, life cycle and reports: :class:`QueuedLedgerWriter`.

    A batch of only ``append_nowait(durable=False)`` entries is written without ``fdatasync``: the next
    synced batch (its ``fdatasync`` covers the whole file) or the seal makes it durable. Its entries never
    count as acknowledged in the LAC that later frames carry until then, and a failed write or sync cuts
    the file back to the end of the last *synced* batch, these entries included.
    """

    _thread_name = "ledger-writer"
    _pool = LEDGER_IO

    def __init__(self, ledger_id: int, fd: int, path: str) -> None:
        super().__init__(ledger_id)
        self._fd = fd
        self._path = path
        self._in_flight: Batch | None = None  # the batch being written, until reported
        self._end = lf.HEADER_SIZE  # where the next frame goes
        self._synced_end = lf.HEADER_SIZE  # end of the frames made durable by an fdatasync
        self._offsets = array("q")  # frame offsets of written entries, for the sealed index

    def _busy(self) -> bool:
        return self._in_flight is not None

    def _take_in_flight(self) -> list[Batch]:
        batch, self._in_flight = self._in_flight, None
        return [] if batch is None else [batch]

    def _release(self) -> None:
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _has_queued(self) -> bool:
        return bool(self._queue)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._wait_for_work(self._has_queued):
                    return
                entries, self._queue = self._queue, []
                futs, self._queue_futs = self._queue_futs, []
                durable, self._queue_durable = self._queue_durable, False
                batch = self._in_flight = (entries, futs)
                lac = self._lac
                error = self._error
            if error is None:
                t0 = time.perf_counter()
                try:
                    self._write_batch(entries, lac, durable)
                    _STATS.observe("append", time.perf_counter() - t0, sum(len(d) for _, d in entries))
                except DLError as exc:
                    _STATS.error("append")
                    error = exc
                except Exception as exc:  # never leave futures hanging on a bug
                    _STATS.error("append")
                    error = SegmentStoreError(f"ledger {self._ledger_id}: append failed: {exc!r}")
                    error.__cause__ = exc
            with self._report_lock:
                with self._cond:
                    if error is None:
                        if durable:  # this batch's fdatasync covered the unsynced ones before it too
                            self._lac = entries[-1][0]
                    elif self._error is None:
                        self._error = error
                    mine = self._in_flight is batch  # else abort() took (and reported) it
                    self._in_flight = None
                    self._cond.notify_all()
                if mine:
                    self._report(entries, futs, None if error is None else copy_error(error))

    def _write_batch(self, entries: list[tuple[int, bytes]], lac: int, durable: bool) -> None:
        buf, rel = lf.encode_frames(entries, lac)
        try:
            # The lock covers the fence check and the write only: a fence after it seals these frames (syncing them
            # itself), and the fdatasync below then makes them ours to acknowledge. A writer frozen while holding the
            # lock holds up the next owner's fence, so the lock is held for as little as that.
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                self._check_open()
                lf.pwrite_all(self._fd, buf, self._end)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            if durable:
                os.fdatasync(self._fd)
                self.sync_count += 1
        except OSError as exc:
            # Part of the batch may be on disk (a short write, a failed fdatasync): outcome unknown. The ledger is in
            # error from now on; a writer opened again later recovers it.
            self._discard_unsynced()
            raise SegmentStoreError(
                f"ledger {self._ledger_id}: append to {self._path} failed: {os_error_detail(exc, self._path)}",
                retriable=True,
                outcome_unknown=True,
            ) from exc
        self._offsets.extend(self._end + r for r in rel)
        self._end += len(buf)
        if durable:
            self._synced_end = self._end

    def _discard_unsynced(self) -> None:
        """After a failed write or fdatasync, cut the file back to the end of the last synced batch.

        A failed fdatasync may have dropped the batch's pages from the disk's future while leaving them readable
        in the page cache, and a later fdatasync reports success without writing them (Linux marks them clean).
        A writer recovering this ledger on the same machine would then read those frames, seal the ledger with
        them, and lose them at the next power cut. Cutting them off (and syncing the new size) keeps recovery to
        what is durable; if that fails too, the ledger stays in error and recovery meets whatever is on the disk.
        """
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                header = lf.read_header(self._fd)
                if header is not None and header.sealed:
                    return  # a fence sealed the ledger meanwhile: its seal decided which frames are in it
                os.ftruncate(self._fd, self._synced_end)
                os.fdatasync(self._fd)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        except OSError as exc:
            log.warning(
                "ledger %s: cannot cut %s back to its synced end %d: %s",
                self._ledger_id,
                self._path,
                self._synced_end,
                exc,
            )

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
                detail = os_error_detail(exc, self._path)
                err = SegmentStoreError(
                    f"ledger {self._ledger_id}: close of {self._path} failed: {detail}", retriable=True
                )
                err.__cause__ = exc
                return err
            self._lac = last
            return last
        except DLError as exc:
            return exc
        finally:
            self._close_fd()
