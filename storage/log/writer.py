"""The public writers: :class:`AsyncLogWriter` (``BKAsyncLogWriter``) and :class:`LogWriter`
(``BKSyncLogWriter``).

One writer per log: opening one takes the log's write lock and recovers any in-progress
segment left behind. Records are buffered into entries (``writerOutputBufferSize``)
and become durable when their entry is appended; they become *visible* to readers once a
control record follows them (``flush()``, ``enableImmediateFlush``,
``periodicFlushFrequencyMilliSeconds``). Segments roll by time (``logSegmentRollingMinutes``
> 0) or else by size (``maxLogSegmentBytes``).

Ownership and ZooKeeper (as DistributedLog's writers, which keep writing to BookKeeper while
ZooKeeper is briefly away): a connection to ZooKeeper that is down for less than the session
timeout costs a writer nothing. Writes, flushes and the periodic and immediate commits go on and
are acknowledged; a roll, a truncation and ``close`` (which complete or start a segment in
ZooKeeper) wait for the reconnection, at most until the session times out, rather than fail (a
failed roll would leave the writer in error: its ledger closed, its segment not completed). Only
the session's end (expired, a new session, disconnected past the session timeout) or a fence ends
the writer's ownership: then writes raise ``LockingError`` (retriable: a reopened writer may take
the log again) or ``WriterFencedError``. That is safe because a writer that takes the log over fences the in-progress
ledger during its recovery: no append of the old writer succeeds after the fence, and everything it
acknowledged before is part of the recovered segment.

Deliberate differences from Apache DistributedLog, for safety:

* transaction ids must be non-decreasing across the whole log, also within a segment (DistributedLog
  only logs a decreasing txid inside a segment);
* a fenced writer stays fenced: every later write raises ``WriterFencedError`` (DistributedLog
  may try to start a new segment, which only a lock owner could do);
* a roll happens before the record that triggers it, so the new segment's first txid is that
  record's (DistributedLog's sync writer does the same; its async writer reuses the previous
  segment's last txid).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future

from storage.common.conditions import LeanCondition, LeanEvent
from storage.common.futures import OutstandingWrites
from storage.common.stats import WriterStats, writer_stats
from storage.config import Config
from storage.errors import (
    AlreadyClosedError,
    DLError,
    EndOfStreamError,
    InvalidArgumentError,
    LogRecordTooLongError,
    TransactionIdOutOfOrderError,
    WriterFencedError,
)
from storage.formats.dlsn import DLSN
from storage.formats.entry import codec_from_name
from storage.formats.record import (
    CONTROL,
    END_OF_STREAM,
    MAX_LOGRECORD_SIZE,
    MAX_TXID,
    RECORD_HEADER_SIZE,
    RECORD_SET,
    LogRecord,
)
from storage.log import retention
from storage.log.limits import WriteLimiter, WriteLimits
from storage.log.segment_writer import SegmentWriter, record_set_slots
from storage.log.write_handler import WriteHandler, now_ms

log = logging.getLogger(__name__)

_WRITER_FLAGS = CONTROL | END_OF_STREAM  # records only the writer itself writes
_MAX_PAYLOAD = MAX_LOGRECORD_SIZE - RECORD_HEADER_SIZE

#: Seconds the commit thread of ``enableImmediateFlush`` waits without a commit to do before it exits; the next
#: acknowledged write starts a new one. An open writer that is not written to then holds no thread.
IDLE_THREAD_EXIT_S = 2.0


def _done(value: object = None, exc: BaseException | None = None) -> Future:  # type: ignore[type-arg]
    f: Future = Future()  # type: ignore[type-arg]
    if exc is not None:
        f.set_exception(exc)
    else:
        f.set_result(value)
    return f


class AsyncLogWriter:
    """Writes records to one log; each write returns a future resolving to its DLSN."""

    # Slots: a write proxy holds one writer per owned stream, and an instance dict of these attributes costs
    # about 800 bytes more per stream (CPython did not share its keys across the proxy's writers).
    __slots__ = ("__weakref__", "_closed", "_codec", "_commit_cond", "_commit_wanted", "_committer", "_conf",
                 "_fenced", "_flush_interval_s", "_flusher", "_h", "_immediate", "_last_txid", "_lock", "_max_bytes",
                 "_on_close", "_purger", "_roll_minutes", "_seg", "_stop", "_stream_ended", "_threshold", "limiter",
                 "outstanding", "stats")  # fmt: skip

    def __init__(
        self,
        handler: WriteHandler,
        conf: Config,
        *,
        on_close: object = None,
        outstanding: OutstandingWrites | None = None,
    ) -> None:
        self._h = handler
        self._conf = conf
        #: Outstanding-write accounting (perWriterOutstandingWriteLimit / globalOutstandingWriteLimit).
        self.outstanding = outstanding
        self._lock = threading.RLock()
        self._seg: SegmentWriter | None = None
        self._closed = False
        self._stream_ended = False
        self._fenced: WriterFencedError | None = None
        self._on_close = on_close
        self._codec = codec_from_name(str(conf.get("compressionType")))
        self._threshold = int(conf.get("writerOutputBufferSize"))
        self._roll_minutes = float(conf.get("logSegmentRollingMinutes"))
        self._max_bytes = int(conf.get("maxLogSegmentBytes"))
        self._immediate = bool(conf.get("enableImmediateFlush"))
        limits = WriteLimits.from_conf(conf.get)
        #: rps/bps soft and hard write limits (None while none is set; see :mod:`storage.log.limits`).
        self.limiter: WriteLimiter | None = WriteLimiter(handler.name, limits) if limits.active else None
        #: This stream's stats in this process (None with ``enableStats=false``).
        self.stats: WriterStats | None = writer_stats(handler.name) if conf.get("enableStats") else None
        if self.stats is not None:
            self.stats.attach(self)
        self._purger = retention.TtlPurger(handler.meta, handler.segstore, conf)
        self._last_txid = handler.recover()
        self._stream_ended = self._last_txid == MAX_TXID  # sealed by an earlier writer
        self._stop = LeanEvent()
        # enableImmediateFlush: a commit is wanted (set from the ack path, see _want_commit) and the thread
        # doing them, if one runs; both under _commit_cond, never under _lock.
        self._commit_cond = LeanCondition(threading.Lock())
        self._commit_wanted = False
        self._committer: threading.Thread | None = None
        self._flusher: threading.Thread | None = None
        self._flush_interval_s = 0.0
        self._set_flush_frequency(int(conf.get("periodicFlushFrequencyMilliSeconds")))

    def _set_flush_frequency(self, freq_ms: int) -> None:
        """Flush every ``freq_ms / 2`` ms (as DistributedLog); 0 stops the flusher (``_lock`` held or init)."""
        self._flush_interval_s = freq_ms / 2000.0 if freq_ms > 0 else 0.0
        if freq_ms > 0 and (self._flusher is None or not self._flusher.is_alive()):
            self._flusher = threading.Thread(target=self._periodic_flush, name=f"dl-flush-{self._h.name}", daemon=True)
            self._flusher.start()

    def reconfigure(self, conf: Config) -> None:
        """Apply the dynamic keys of ``conf`` to this running writer (DistributedLog's dynamic
        configuration): the rps/bps write limits, ``writerOutputBufferSize``,
        ``periodicFlushFrequencyMilliSeconds`` and ``logSegmentRetentionHours``. Other keys apply
        when the log is next opened."""
        with self._lock:
            limits = WriteLimits.from_conf(conf.get)
            if not limits.active:
                self.limiter = None
            elif self.limiter is None:
                self.limiter = WriteLimiter(self._h.name, limits)
            else:
                self.limiter.reconfigure(limits)
            self._threshold = int(conf.get("writerOutputBufferSize"))
            if self._seg is not None:
                self._seg.set_transmit_threshold(self._threshold)
            self._set_flush_frequency(int(conf.get("periodicFlushFrequencyMilliSeconds")))
            self._purger.set_retention_hours(float(conf.get("logSegmentRetentionHours")))

    # --- public API -----------------------------------------------------------------------
    @property
    def stream_name(self) -> str:
        return self._h.name

    @property
    def last_txid(self) -> int:
        """The transaction id of the last record written (after recovery: the log's last; -1 for an empty log)."""
        return self._last_txid

    def ownership_held(self) -> bool:
        """False once the log's write lock is lost (session expired, released) or this writer was fenced or closed:
        nothing written from then on can be acknowledged. True without a lock (``writeLockEnabled=false``), and
        True while the connection to ZooKeeper is down for less than the session timeout (the writer keeps
        writing then; see the module docstring)."""
        if self._closed or self._fenced is not None:
            return False
        lock = self._h.lock
        return lock is None or lock.is_held()

    def write(self, record: LogRecord) -> Future[DLSN]:
        """Buffer a record; the future resolves to its DLSN once durable.

        Errors are raised at once for bad input and state (``TransactionIdOutOfOrderError``,
        ``LogRecordTooLongError``, ``EndOfStreamError``, ``AlreadyClosedError``,
        ``WriterFencedError``, ``LockingError``, ``InvalidArgumentError``, also for a record with
        the RECORD_SET flag whose payload is not a well-formed record set) and for a write over a
        hard rate limit or the outstanding-write limit (``OverCapacityError``: nothing of it was
        buffered); the future fails with ``WriterFencedError``/``TransmitError``/
        ``WriteCancelledError`` if the append does.
        """
        with self._lock:
            members = self._check_record(record)
            if self.outstanding is not None or self.limiter is not None:
                return self._write_counted([record], [members])[0]
            fut = self._segment_for(record.txid).write(record, members)
            self._last_txid = record.txid
            return fut

    def write_bulk(self, records: Iterable[LogRecord]) -> list[Future[DLSN]]:
        """Write several records in order; see :meth:`write`. Every record is checked, and the
        rate and outstanding-write limits admit the whole call, before any record is buffered:
        all of them or none (``OverCapacityError``)."""
        recs = list(records)
        with self._lock:
            last = self._last_txid
            members = []
            for r in recs:  # validate everything first: nothing half-written on bad input
                members.append(self._check_record(r, last_txid=last))
                last = r.txid
            return self._write_counted(recs, members)

    def write_marked(self, marker: bytes, records: Iterable[LogRecord]) -> list[Future[DLSN]]:
        """Write ``records`` (at least one) in ONE entry, right after a control record holding ``marker``: the
        marker and the records are durable together or not at all, and no reader sees the marker (it is a control
        record). The write proxy stores its idempotent producers' state this way; read the markers back with
        :meth:`storage.log.log_manager.LogManager.control_records`. Checks and limits as :meth:`write_bulk`.

        Raises:
            InvalidArgumentError: no records, or ``marker`` not bytes.
            LogRecordTooLongError: the group does not fit in one entry.
            DLError: the errors of :meth:`write`.
        """
        recs = list(records)
        if not recs or not isinstance(marker, bytes):
            raise InvalidArgumentError("write_marked needs a bytes marker and at least one record")
        with self._lock:
            last = self._last_txid
            members = []
            for r in recs:
                members.append(self._check_record(r, last_txid=last))
                last = r.txid
            counter = self.outstanding
            if counter is not None:
                counter.acquire(len(recs))
            try:
                if self.limiter is not None:
                    self.limiter.acquire(len(recs), sum(len(r.payload) for r in recs))
                seg = self._segment_for(recs[0].txid)
                futs = seg.write_group(LogRecord(recs[0].txid, marker, flags=CONTROL), recs, members)
            except BaseException:
                if counter is not None:
                    counter.release(len(recs))
                raise
            self._last_txid = recs[-1].txid
            return futs

    def _write_counted(self, recs: list[LogRecord], members: list[int]) -> list[Future[DLSN]]:
        """Admit ``recs`` (checked; ``members``: the slots of each, from :meth:`_check_record`) against the
        outstanding-write and rate limits, all or none, then buffer them (``_lock`` held). Raises
        OverCapacityError with nothing taken."""
        counter = self.outstanding
        if counter is not None:
            counter.acquire(len(recs))  # all or none (OverCapacityError)
        written = 0
        try:
            if self.limiter is not None and recs:
                self.limiter.acquire(len(recs), sum(len(r.payload) for r in recs))
            out = []
            for r, n in zip(recs, members, strict=True):
                out.append(self._segment_for(r.txid).write(r, n))
                self._last_txid = r.txid
                written += 1
            return out
        except BaseException:
            if counter is not None:
                counter.release(len(recs) - written)
            raise

    def flush(self) -> Future[DLSN]:
        """Transmit buffered records and commit them (make them visible); the future
        resolves to the DLSN of the last user record acknowledged (``DLSN.INVALID`` if none)."""
        t0 = time.perf_counter()
        try:
            return _done(self._flush_and_commit())
        except DLError as e:
            if self.stats is not None:
                self.stats.error(e)
            return _done(exc=e)
        finally:
            if self.stats is not None:
                self.stats.flush_latency.observe(time.perf_counter() - t0)

    def truncate(self, dlsn: DLSN) -> Future[bool]:
        """Mark everything before ``dlsn`` truncated (metadata only). While the connection to ZooKeeper is
        down (less than the session timeout), waits for it first. The future fails with
        ``InvalidArgumentError``/``IllegalStateError``/``LockingError`` (the lock is lost)/
        ``MetadataConnectionError`` (retriable: the connection failed under the truncation, which may or
        may not have been applied; the writer is unaffected and truncating again is safe)/``MetadataError``."""
        try:
            with self._lock:
                self._check_open()
                self._h.confirm_ownership(f"truncating log {self._h.name!r}")
                return _done(retention.truncate(self._h.meta, dlsn))
        except DLError as e:
            return _done(exc=e)

    def mark_end_of_stream(self) -> DLSN:
        """Seal the log with an end-of-stream record and commit it; later writes raise
        ``EndOfStreamError``. Calling it twice is fine.

        Raises:
            AlreadyClosedError:
            WriterFencedError:
            LockingError:
        """
        with self._lock:
            self._check_open()
            if self._stream_ended:
                return DLSN.INVALID
            if self._seg is None:
                self._start_segment(MAX_TXID, for_eos=True)
            assert self._seg is not None
            if self.outstanding is not None:
                self.outstanding.acquire(check=False)  # its future settles like a write's
            try:
                fut = self._seg.write_end_of_stream()
            except BaseException:
                if self.outstanding is not None:
                    self.outstanding.release(1)
                raise
            self._stream_ended = True
            self._flush_and_commit()
            return fut.result()

    def close(self) -> None:
        """Commit what is buffered, complete the segment and release ownership (while the connection to
        ZooKeeper is down, completing waits for it, at most until the session times out). Errors
        (e.g. the writer was fenced, the lock lost) are logged, not raised: the next owner recovers."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._seg is not None and self._fenced is None:
                    self._complete_current()
                    offloader = self._purger.offloader
                    if offloader is not None:  # offloadThresholdHours=0: the last segment too, before we go
                        offloader.offload_due_now(float(self._conf.get("coldStoreRequestTimeoutSeconds")))
            except DLError as e:
                log.warning("closing writer of %r: segment left for recovery: %s", self._h.name, e)
                if self._seg is not None:
                    self._seg.cancel_pending(e)
                    self._seg.ledger.abort()
            finally:
                self._shutdown()

    def abort(self) -> None:
        """Stop without completing the segment (it stays in progress for the next owner)."""
        with self._lock:
            if self._closed:
                return
            if self._seg is not None:
                self._seg.cancel_pending(AlreadyClosedError("writer aborted"))
                self._seg.ledger.abort()
            self._shutdown()

    def __enter__(self) -> AsyncLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ------------------------------------------------------------------------
    def _shutdown(self) -> None:
        self._closed = True
        self._stop.set()
        with self._commit_cond:
            self._commit_cond.notify_all()
        self._seg = None
        if self._h.lock is not None:
            self._h.lock.release()
        if self.stats is not None:
            self.stats.detach(self)
        if callable(self._on_close):
            self._on_close(self)

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"writer of {self._h.name!r} is closed")
        if self._fenced is not None:
            raise WriterFencedError(f"writer of {self._h.name!r} was fenced: {self._fenced}")

    def _check_record(self, record: object, *, last_txid: int | None = None) -> int:
        # Runs once per record: the common case is a few attribute reads and comparisons. Returns the
        # slots the record occupies (a record set's whole payload is checked: InvalidArgumentError).
        if self._closed or self._fenced is not None:
            self._check_open()
        if self._stream_ended:
            raise EndOfStreamError(f"log {self._h.name!r} was marked end of stream: no more writes")
        if type(record) is not LogRecord and not isinstance(record, LogRecord):
            raise InvalidArgumentError(f"write needs a storage.LogRecord, got {type(record).__name__}")
        if record.flags & _WRITER_FLAGS:
            raise InvalidArgumentError(
                "control and end-of-stream records are written by the writer, not the application"
            )
        txid = record.txid
        last = self._last_txid if last_txid is None else last_txid
        if type(txid) is not int or not 0 <= txid < MAX_TXID:
            raise TransactionIdOutOfOrderError(f"invalid transaction id {txid}", txid=txid, last_txid=last)
        if txid < last:
            raise TransactionIdOutOfOrderError(
                f"transaction id {txid} is below the last written {last} on log {self._h.name!r}",
                txid=txid,
                last_txid=last,
            )
        if len(record.payload) > _MAX_PAYLOAD:
            raise LogRecordTooLongError(
                f"record of {record.persistent_size} bytes exceeds MAX_LOGRECORD_SIZE {MAX_LOGRECORD_SIZE}"
            )
        self._h.check_ownership()  # LockingError once lost; a short ZooKeeper disconnect is no loss
        return record_set_slots(record.payload) if record.flags & RECORD_SET else 1

    def _segment_for(self, txid: int) -> SegmentWriter:
        seg = self._seg
        if seg is None:
            return self._start_segment(txid)
        if seg.error is not None:
            self._note_error(seg)
            seg.check_writable()
        if seg.num_user_records > 0 and self._should_roll(seg):
            self._complete_current()
            if self.stats is not None:
                self.stats.rolls += 1
            return self._start_segment(txid)
        return seg

    def _note_error(self, seg: SegmentWriter) -> None:
        if isinstance(seg.error, WriterFencedError) and self._fenced is None:
            self._fenced = seg.error

    def _should_roll(self, seg: SegmentWriter) -> bool:
        if self._roll_minutes > 0:
            return now_ms() - self._h.last_rollover_ms > self._roll_minutes * 60_000
        return seg.ledger.bytes_written > self._max_bytes

    def _start_segment(self, txid: int, *, for_eos: bool = False) -> SegmentWriter:
        meta, ledger = self._h.start_segment(txid, for_eos=for_eos)
        seg = SegmentWriter(
            meta,
            ledger,
            codec=self._codec,
            transmit_threshold=self._threshold,
            last_txid=txid,
            on_settled=self.outstanding.release if self.outstanding is not None else None,
            stats=self.stats,
        )
        if self._immediate:
            seg.on_data_acked.append(self._want_commit)
        self._seg = seg
        self._purger.trigger(now_ms(), self._h.known_segments)
        return seg

    def _want_commit(self) -> None:
        """Commit what was acknowledged (enableImmediateFlush). Called on the segment store's ack path, which must
        never wait for the writer lock: when the lock is free the commit record is queued right here (no thread
        hand-off; the ledger writes it after this report), else the commit thread is asked for it (started when
        none runs), which takes only ``_commit_cond``."""
        if self._lock.acquire(blocking=False):
            try:
                self._commit_if_needed()
            finally:
                self._lock.release()
            return
        with self._commit_cond:
            if self._stop.is_set():
                return
            self._commit_wanted = True
            if self._committer is not None:
                self._commit_cond.notify()
                return
            thread = threading.Thread(target=self._immediate_commits, name=f"dl-commit-{self._h.name}", daemon=True)
            try:
                thread.start()
            except RuntimeError as e:  # no thread to be had: the next acknowledged write tries again
                log.warning("immediate flush of %r: cannot start the commit thread: %s", self._h.name, e)
                return
            self._committer = thread

    def _next_commit(self) -> bool:
        """Wait for a commit to do (True), or until the writer stops or no commit was asked for during
        ``IDLE_THREAD_EXIT_S`` (False: the thread ends; after an idle exit ``_want_commit`` starts another).
        Both sides decide under ``_commit_cond``: a request is either taken here or finds no thread."""
        with self._commit_cond:
            idle_until: float | None = None
            while True:
                if self._stop.is_set():
                    return False
                if self._commit_wanted:
                    self._commit_wanted = False
                    return True
                now = time.monotonic()
                if idle_until is None:
                    idle_until = now + IDLE_THREAD_EXIT_S
                elif now >= idle_until:
                    self._committer = None
                    return False
                self._commit_cond.wait(idle_until - now)

    def _immediate_commits(self) -> None:
        # enableImmediateFlush: after data is acknowledged, publish it with a control record. An ack that
        # found the writer lock taken (its path must never wait for it) asks this thread instead, which
        # waits for the lock and coalesces such requests into commits.
        while self._next_commit():
            with self._lock:
                self._commit_if_needed()

    def _commit_if_needed(self) -> None:
        """Queue a commit record if acknowledged data is not yet published (``_lock`` held); an error is left for
        the next write or flush to raise."""
        try:
            seg = self._seg
            if seg is not None and not self._closed and seg.error is None and seg.needs_control():
                seg.write_control()
        except DLError as e:  # surfaced to the user by the next write/flush
            log.debug("immediate flush of %r: %s", self._h.name, e)

    def _flush_and_commit(self) -> DLSN:
        with self._lock:
            self._check_open()
            self._h.check_ownership()
            seg = self._seg
            if seg is None:
                return DLSN.INVALID
            try:
                seg.transmit()
                seg.wait_inflight()
                if seg.needs_control():
                    seg.write_control()
                    seg.wait_inflight()
            except WriterFencedError:
                self._note_error(seg)
                raise
            return seg.last_acked_user_dlsn

    def _complete_current(self) -> None:
        seg = self._seg
        assert seg is not None
        # a roll (or close) needs ZooKeeper: wait for it before sealing the ledger (LockingError if lost)
        self._h.confirm_ownership(f"completing log segment {seg.lssn} of {self._h.name!r}")
        self._flush_and_commit()
        seg.ledger.close()
        if seg.stream_ended:
            last_txid = MAX_TXID
        elif seg.num_user_records > 0:
            last_txid = seg.last_txid
        else:
            last_txid = seg.metadata.first_txid
        last = seg.last_acked_user_dlsn
        if last == DLSN.INVALID:
            last = DLSN(seg.lssn, -1, -1)
        self._h.complete_segment(seg.metadata, last_txid, seg.position, last)
        self._seg = None

    def _periodic_flush(self) -> None:
        while True:
            interval_s = self._flush_interval_s
            if interval_s <= 0 or self._stop.wait(interval_s):
                return  # switched off (dynamic configuration) or closed
            try:
                with self._lock:
                    seg = self._seg
                    if self._closed or seg is None or seg.error is not None:
                        continue
                    if seg.has_pending():
                        seg.transmit()
                    elif seg.needs_control():
                        seg.write_control()
            except DLError as e:  # surfaced to the user by the next write/flush
                log.debug("periodic flush of %r: %s", self._h.name, e)


class LogWriter:
    """The synchronous writer: ``write`` buffers, ``flush`` makes everything durable and visible."""

    def __init__(self, inner: AsyncLogWriter) -> None:
        self._w = inner
        self._futures: list[Future[DLSN]] = []
        self._acked_unflushed = False  # records acknowledged since the last flush were dropped from _futures

    def write(self, record: LogRecord) -> None:
        """Buffer a record. Raises as :meth:`AsyncLogWriter.write`."""
        self._futures.append(self._w.write(record))
        if len(self._futures) > 4096:
            kept = [f for f in self._futures if not f.done() or f.exception() is not None]
            self._acked_unflushed |= len(kept) < len(self._futures)
            self._futures = kept

    def write_bulk(self, records: Iterable[LogRecord]) -> None:
        """Buffer several records (all validated before any is buffered)."""
        self._futures.extend(self._w.write_bulk(records))

    def flush(self) -> DLSN:
        """Make everything written so far durable and visible; returns the DLSN of the last
        user record (``DLSN.INVALID`` if nothing was written).

        The error of a failed flush covers every record written since the last flush that returned: its
        ``outcome_unknown`` is True when any of them may be stored (acknowledged before the failure, or transmitted
        when it happened), False only when none is.

        Raises:
            WriterFencedError:
            TransmitError:
            WriteError:
            AlreadyClosedError:
            LockingError:
        """
        futures, self._futures = self._futures, []
        acked, self._acked_unflushed = self._acked_unflushed, False
        try:
            last = self._w.flush().result()
        except DLError as e:
            raise _flush_error(e, futures, acked) from e.__cause__
        for f in futures:
            exc = f.exception()
            if exc is not None:
                raise _flush_error(exc, futures, acked)
        return last

    def mark_end_of_stream(self) -> None:
        """Seal the log (end-of-stream record), then complete the segment."""
        self._w.mark_end_of_stream()
        with self._w._lock:
            if self._w._seg is not None:
                self._w._complete_current()

    def truncate(self, dlsn: DLSN) -> bool:
        """Mark everything before ``dlsn`` truncated; see :meth:`AsyncLogWriter.truncate`."""
        return self._w.truncate(dlsn).result()

    def close(self) -> None:
        """Flush, complete the segment and release ownership."""
        self._w.close()

    def abort(self) -> None:
        self._w.abort()

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _flush_error(error: BaseException, futures: list[Future[DLSN]], acked: bool) -> BaseException:
    """``error`` as the outcome of a whole sync batch: outcome unknown when any record of it may be stored
    (``acked``: some were acknowledged already)."""
    if not isinstance(error, DLError) or error.outcome_unknown:
        return error

    def may_be_stored(f: Future[DLSN]) -> bool:
        return not f.done() or f.exception() is None or bool(getattr(f.exception(), "outcome_unknown", False))

    if acked or any(may_be_stored(f) for f in futures):
        err = copy.copy(error)
        err.outcome_unknown = True
        return err
    return error
