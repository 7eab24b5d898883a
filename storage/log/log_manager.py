"""``LogManager``: one log of a namespace (DistributedLog's ``DistributedLogManager``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from storage.common.futures import OutstandingWrites
from storage.common.stats import reader_stats
from storage.config import Config
from storage.config.dynamic import DynamicConfig
from storage.errors import (
    AlreadyClosedError,
    InvalidArgumentError,
    LedgerNotFoundError,
    LogEmptyError,
    LogNotFoundError,
    NoNodeError,
)
from storage.formats.dlsn import DLSN
from storage.formats.entry import decode_entry
from storage.formats.record import MAX_TXID, LogRecordWithDLSN
from storage.formats.segment_metadata import LogSegmentMetadata, SegmentSlice
from storage.log import positioning, retention
from storage.log.context import LogContext
from storage.log.cursor import Cursor
from storage.log.layout import LogMetadata
from storage.log.reader import AsyncLogReader, LogReader
from storage.log.segment_cache import SegmentListCache
from storage.log.subscriptions import SubscriberLag, SubscriptionsStore
from storage.log.write_handler import WriteHandler, now_ms
from storage.log.writer import AsyncLogWriter, LogWriter

if TYPE_CHECKING:
    import pyarrow as pa

    from storage.metastore.base import OwnershipLock


class LogManager:
    """Writers, readers and queries of one log. A context manager; ``close()`` closes every
    writer and reader it opened."""

    def __init__(self, ns: LogContext, name: str, conf: Config, dynamic: DynamicConfig | None = None) -> None:
        self._ns = ns
        self.name = name
        self.conf = conf
        #: The log's dynamic configuration (files re-read on change), if the namespace has any.
        self.dynamic = dynamic
        self._meta = LogMetadata(
            ns.metastore, ns.paths_of(name), skip_min_version_check=bool(conf.get("ledgerMetadataSkipMinVersionCheck"))
        )
        self._segstore = ns.segstore
        self._segments = SegmentListCache(self._meta)
        self._closed = False
        self._lock = threading.Lock()
        self._open: list[AsyncLogWriter | LogReader | AsyncLogReader] = []

    # --- writers ------------------------------------------------------------------------
    def open_writer(self) -> LogWriter:
        """Open the (single) synchronous writer of this log; see :meth:`open_async_writer`."""
        return LogWriter(self.open_async_writer())

    def open_async_writer(self) -> AsyncLogWriter:
        """Take ownership of the log (creating it if ``createStreamIfNotExists``), recover any
        in-progress segment, and return the writer.

        Raises:
            OwnershipAcquireFailedError: another writer owns the log (after ``lockTimeoutSeconds``).
            LogNotFoundError: the log does not exist and ``createStreamIfNotExists`` is false.
            AlreadyClosedError:
            MetadataError:
            SegmentStoreError:
        """
        self._check_open()
        lock = None
        if self.conf.get("writeLockEnabled"):
            try:  # the lock first: its node exists when the log does, so the common case reads nothing more
                lock = self._take_lock()
            except NoNodeError:
                self._create_missing()
                lock = self._take_lock()
        elif not self._meta.exists():
            self._create_missing()
        conf = self.conf if self.dynamic is None else self.dynamic.current
        unsubscribe: Callable[[], None] | None = None

        def closed(w: object) -> None:
            if unsubscribe is not None:
                unsubscribe()
            self._forget(w)

        try:
            handler = WriteHandler(self._meta, self._segstore, conf, lock)
            writer = AsyncLogWriter(handler, conf, on_close=closed, outstanding=self._outstanding())
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        if self.dynamic is not None:  # later changes of the log's files apply to this running writer
            unsubscribe = self.dynamic.subscribe(writer.reconfigure)
            writer.reconfigure(self.dynamic.current)  # a change between the read above and subscribing
        self._remember(writer)
        return writer

    def _take_lock(self) -> OwnershipLock:
        """The log's write lock (waits up to ``lockTimeoutSeconds``). Raises NoNodeError when the log is missing."""
        return self._ns.metastore.lock(
            self._meta.paths.lock, self._ns.client_id, float(self.conf.get("lockTimeoutSeconds"))
        )

    def _create_missing(self) -> None:
        """Create this missing log if ``createStreamIfNotExists``; else raise LogNotFoundError."""
        if not self.conf.get("createStreamIfNotExists"):
            raise LogNotFoundError(f"log {self.name!r} does not exist")
        self._ns.create_log(self.name, exist_ok=True)

    def _outstanding(self) -> OutstandingWrites | None:
        """A new writer's outstanding-write counter (None: no per-writer or namespace limit)."""
        limit = int(self.conf.get("perWriterOutstandingWriteLimit"))
        parent = self._ns.outstanding
        if limit <= 0 and parent is None:
            return None
        return OutstandingWrites(
            limit,
            darkmode=bool(self.conf.get("outstandingWriteLimitDarkmode")),
            name=f"writer of {self.name!r}",
            key="perWriterOutstandingWriteLimit",
            parent=parent,
        )

    # --- readers ------------------------------------------------------------------------
    def open_reader(self, start: DLSN | int) -> LogReader:
        """A synchronous reader from ``start``: a DLSN, or an int = the first record with
        txid >= it.

        Raises:
            LogNotFoundError:
            InvalidArgumentError: bad start.
            AlreadyTruncatedTransactionError:
        """
        reader = LogReader(self._cursor(start), float(self.conf.get("readAheadWaitTime")) / 1000.0)
        self._remember(reader)
        return reader

    def open_async_reader(self, start: DLSN | int) -> AsyncLogReader:
        """An asynchronous reader from ``start`` (see :meth:`open_reader`)."""
        reader = AsyncLogReader(
            self._cursor(start),
            poll_s=max(0.05, float(self.conf.get("readLACLongPollTimeout")) / 1000.0),
            idle_error_ms=int(self.conf.get("readerIdleErrorThresholdMillis")),
        )
        self._remember(reader)
        return reader

    def _cursor(self, start: DLSN | int) -> Cursor:
        self._check_open()
        stats = reader_stats(self.name) if self.conf.get("enableStats") else None
        if isinstance(start, DLSN):
            self._meta.ensure_exists()
            cursor = Cursor(
                self._meta, self._segstore, self.conf, start, initial_segments=self._segments.get, stats=stats
            )
        else:
            _check_txid_start(start)
            try:
                dlsn = positioning.dlsn_for_txid(self._segstore, self.log_segments(), start)
            except LogEmptyError:
                dlsn = DLSN.INITIAL
            cursor = Cursor(
                self._meta,
                self._segstore,
                self.conf,
                dlsn,
                from_txid=start,
                initial_segments=self._segments.get,
                stats=stats,
            )
        if stats is not None:  # dlog_reader_records_behind, computed when scraped
            stats.track_behind(id(cursor), lambda: self.record_count(cursor.position))
        return cursor

    # --- columnar reads -----------------------------------------------------------------
    def read_arrow(
        self,
        start: DLSN | int = DLSN.INITIAL,
        end: DLSN | None = None,
        max_records: int | None = None,
        *,
        batch_rows: int | None = None,
    ) -> Generator[pa.RecordBatch, None, None]:
        """The user records from ``start`` (a DLSN, or an int: the first record with txid >= it) up to
        ``end`` (an exclusive DLSN; None: everything visible now), at most ``max_records``, as Arrow
        record batches of about ``batch_rows`` rows (default
        :data:`storage.formats.arrow_records.BATCH_ROWS`) with the columns of
        :data:`storage.formats.arrow_records.RECORD_SCHEMA`: ``dlsn`` (struct ``lssn, entry_id, slot_id``),
        ``txid``, ``sequence_id``, ``value`` — no Python object per record. Positioned as
        :meth:`open_reader` is; reads what readers can see now and ends there (it does not wait for
        more). The end of a stream ends the batches.

        Raises:
            InvalidArgumentError: a bad ``start``, ``end``, ``max_records`` or ``batch_rows``.
            LogNotFoundError, AlreadyTruncatedTransactionError, MetadataError: at once.
            CorruptedEntryError, SegmentStoreError: while iterating.
        """
        from storage.log.columnar import read_log

        self._check_open()
        if end is not None and not isinstance(end, DLSN):
            raise InvalidArgumentError(f"read_arrow end must be a DLSN or None, got {end!r}")
        if max_records is not None and (isinstance(max_records, bool) or not isinstance(max_records, int)):
            raise InvalidArgumentError(f"max_records must be an int or None, got {max_records!r}")
        if max_records is not None and max_records < 0:
            raise InvalidArgumentError(f"max_records must be >= 0, got {max_records}")
        rows = _check_batch_rows(batch_rows)
        segments = self.log_segments()
        if isinstance(start, DLSN):
            first = start
        else:
            _check_txid_start(start)
            try:
                first = positioning.dlsn_for_txid(self._segstore, segments, start)
            except LogEmptyError:
                first = DLSN.INITIAL
        return read_log(self._segstore, segments, self.conf, self.name, first, end, max_records, rows)

    def read_arrow_slice(
        self, part: SegmentSlice, *, batch_rows: int | None = None
    ) -> Generator[pa.RecordBatch, None, None]:
        """The records of one slice of one of this log's segments that a planner resolved (positions,
        entries, ledger), as :meth:`read_arrow`'s batches, with no metadata round trip: the Spark
        source reads its partitions this way.

        Raises:
            InvalidArgumentError: bad ``batch_rows``. While iterating: LedgerNotFoundError (the segment
                was purged since planning), CorruptedEntryError, SegmentStoreError.
        """
        from storage.log.columnar import read_slice

        self._check_open()
        return read_slice(self._segstore, part, _check_batch_rows(batch_rows))

    # --- queries ------------------------------------------------------------------------
    def log_segments(self) -> list[LogSegmentMetadata]:
        """Every segment, ascending by LSSN, with start sequence ids filled in as readers see them.

        Raises:
            LogNotFoundError:
            MetadataError:
        """
        self._check_open()
        return self._segments.get()

    def first_dlsn(self) -> DLSN:
        """DLSN of the first user record (ignores ``minActiveDLSN``, as DistributedLog does).

        Raises:
            LogEmptyError:
            LogNotFoundError:
        """
        return positioning.first_user_record(self._segstore, self.log_segments()).dlsn

    def last_record(self) -> LogRecordWithDLSN:
        """The last user record readers can see (end of stream excluded).

        Raises:
            LogEmptyError:
            LogNotFoundError:
        """
        rec = positioning.last_user_record(self._segstore, self.log_segments())
        if rec is None:
            raise LogEmptyError(f"log {self.name!r} has no user records")
        return rec

    def last_dlsn(self) -> DLSN:
        """DLSN of the last user record. Raises LogEmptyError, LogNotFoundError."""
        return self.last_record().dlsn

    def last_txid(self) -> int:
        """Transaction id of the last user record. Raises LogEmptyError, LogNotFoundError."""
        return self.last_record().txid

    def is_end_of_stream(self) -> bool:
        """True once the log was sealed with ``mark_end_of_stream``. Raises LogNotFoundError."""
        rec = positioning.last_user_record(self._segstore, self.log_segments(), include_eos=True)
        return rec is not None and rec.txid == MAX_TXID

    def record_count(self, start: DLSN = DLSN.INITIAL) -> int:
        """Number of user records from ``start`` (``getLogRecordCount``; like DistributedLog it
        counts truncated segments too, from their metadata).

        Raises:
            InvalidArgumentError:
            LogNotFoundError:
        """
        if not isinstance(start, DLSN):
            raise InvalidArgumentError(f"record_count start must be a DLSN, got {start!r}")
        total = 0
        for seg in self.log_segments():
            if seg.lssn < start.lssn:
                continue
            last_pos = seg.record_count
            if seg.in_progress:
                rec = positioning.last_user_record(self._segstore, [seg])
                last_pos = rec.last_position_within_segment if rec is not None else 0
            if seg.lssn == start.lssn:
                first = self._first_user_record_from(seg, start)
                total += 0 if first is None else last_pos + 1 - first.position_within_segment
            else:
                total += last_pos
        return total

    # --- subscribers --------------------------------------------------------------------
    def subscriptions(self) -> SubscriptionsStore:
        """DistributedLog's subscriptions store of this log: named positions (``get``, ``advance``,
        ``delete``, ``list``) kept in metadata at ``<log root>/subscribers/<id>``."""
        self._check_open()
        return SubscriptionsStore(self._ns.metastore, self._meta.paths)

    def subscriber_lag(self) -> list[SubscriberLag]:
        """Every subscriber's position with the records and bytes at or after it, by id.

        Raises:
            LogNotFoundError:
            MetadataError:
            SegmentStoreError:
        """
        out = []
        for sid, pos in self.subscriptions().list().items():
            records = self.record_count(pos) if pos >= DLSN.INITIAL else self.record_count()
            out.append(SubscriberLag(sid, pos, records, self._bytes_from(pos, records)))
        return out

    def _bytes_from(self, pos: DLSN, records: int) -> int:
        """Stored bytes of the records from ``pos`` (``records`` of them): whole segments after its
        segment, and its own segment's bytes pro rata by records."""
        total = 0
        later_records = 0
        own: LogSegmentMetadata | None = None
        for seg in self.log_segments():
            if seg.lssn < pos.lssn:
                continue
            if seg.lssn == pos.lssn:
                own = seg
                continue
            total += self._stored_bytes(seg)
        if own is not None:
            later_records = self.record_count(DLSN(pos.lssn + 1, 0, 0))
            in_own = records - later_records
            own_records = self.record_count(DLSN(pos.lssn, 0, 0))
            own_records -= later_records
            if own_records > 0 and in_own > 0:
                total += self._stored_bytes(own) * in_own // own_records
        return total

    def _stored_bytes(self, seg: LogSegmentMetadata) -> int:
        try:
            return self._segstore.info(seg.ledger_id).length_bytes
        except LedgerNotFoundError:  # purged or truncated away: nothing left to read there
            return 0

    def _first_user_record_from(self, seg: LogSegmentMetadata, start: DLSN) -> LogRecordWithDLSN | None:
        last = positioning.visible_last_entry(self._segstore, seg)
        if last < max(start.entry_id, 0):
            return None
        for entry_id, data in self._segstore.read_entries(seg.ledger_id, max(start.entry_id, 0), last):
            for r in decode_entry(
                data, seg.lssn, entry_id, seg.effective_start_sequence_id, envelope=seg.envelope_entries
            ):
                if not r.is_control and not r.is_end_of_stream and r.dlsn >= start:
                    return r
        return None

    def visible_last_entry(self, seg: LogSegmentMetadata) -> int:
        """The id of the last entry of ``seg`` readers can see (-1: none).

        Raises:
            SegmentStoreError:
            AlreadyClosedError:
        """
        self._check_open()
        return positioning.visible_last_entry(self._segstore, seg)

    def control_records(
        self, seg: LogSegmentMetadata, *, first_entry: int = 0, last_entry: int | None = None
    ) -> Generator[LogRecordWithDLSN, None, None]:
        """The control records of one segment (commits included), in order, up to what readers can see (or of
        its entries ``first_entry .. last_entry`` only): the markers of
        :meth:`storage.log.writer.AsyncLogWriter.write_marked` are read back this way. A truncated segment yields
        nothing.

        Raises:
            CorruptedEntryError:
            SegmentStoreError:
            AlreadyClosedError:
        """
        self._check_open()
        if seg.truncation_status == "truncated":
            return
        last = positioning.visible_last_entry(self._segstore, seg)
        if last_entry is not None:
            last = min(last, last_entry)
        if last < max(first_entry, 0):
            return
        for entry_id, data in self._segstore.read_entries(seg.ledger_id, max(first_entry, 0), last):
            for r in decode_entry(
                data, seg.lssn, entry_id, seg.effective_start_sequence_id, envelope=seg.envelope_entries
            ):
                if r.is_control:
                    yield r

    def purge_older_than(self, timestamp_ms: int) -> int:
        """Delete completed segments that completed before ``timestamp_ms`` (the newest
        completed segment is always kept, and so are the segments a subscriber still needs unless
        ``retentionIgnoresSubscribers``); returns how many were purged.

        Raises:
            InvalidArgumentError:
            LogNotFoundError:
        """
        return len(self.purge_segments(timestamp_ms))

    def purge_segments(self, timestamp_ms: int, *, dry_run: bool = False) -> list[LogSegmentMetadata]:
        """:meth:`purge_older_than`, returning the segments purged (or, with ``dry_run``, the ones
        that would be, deleting nothing).

        Raises:
            InvalidArgumentError:
            LogNotFoundError:
        """
        self._check_open()
        self._meta.ensure_exists()
        return retention.purge_older_than(
            self._meta, self._segstore, self.conf, timestamp_ms, now_ms=now_ms(), dry_run=dry_run
        )

    # --- lifecycle ----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"log manager of {self.name!r} is closed")
        self._ns.check_open()

    def _remember(self, h: AsyncLogWriter | LogReader | AsyncLogReader) -> None:
        with self._lock:
            self._open.append(h)

    def _forget(self, h: object) -> None:
        with self._lock:
            self._open = [x for x in self._open if x is not h]

    def close(self) -> None:
        """Close every writer and reader opened from this manager. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            handles, self._open = self._open, []
        for h in handles:
            h.close()
        self._ns.forget(self)

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["LogManager", "WriteHandler"]


def _check_txid_start(start: object) -> None:
    if isinstance(start, bool) or not isinstance(start, int):
        raise InvalidArgumentError(f"reader start must be a DLSN or an int txid, got {start!r}")
    if start < 0:
        raise InvalidArgumentError(f"reader start txid must be >= 0, got {start}")


def _check_batch_rows(batch_rows: int | None) -> int:
    """``batch_rows``, or the default when None."""
    if batch_rows is None:
        from storage.formats.arrow_records import BATCH_ROWS

        return BATCH_ROWS
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InvalidArgumentError(f"batch_rows must be an int >= 1, got {batch_rows!r}")
    return batch_rows
