"""The read cursor shared by the sync and async readers (``ReadAheadEntryReader`` + readers).

A cursor holds the next DLSN to read and walks the log's segments in LSSN order:

* it is positioned by DLSN with DistributedLog's rules (truncated leading segments skipped,
  partially truncated ones entered at ``minActiveDLSN``, a truncated hole after the position
  → ``AlreadyTruncatedTransactionError`` unless ``ignoreTruncationStatus``);
* a completed segment is read to its last entry, an in-progress one only up to its LAC;
* control records are skipped; so are records before the start DLSN (slot granularity, for
  the sync reader too — DistributedLog's sync reader is entry-granular) and, when opened by
  txid, records below that txid;
* an end-of-stream record raises ``EndOfStreamError``, and keeps raising it;
* at the tail it sleeps on a change event set by the metadata store's watch (segments added,
  completed, truncated) and the segment store's watch (the LAC moved), not on a fixed timer.

Entries are pulled lazily from one ``read_entries`` iterator per segment range, so bulk scans
read large chunks while at most ``readAheadMaxRecords`` records are decoded ahead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from storage.common.stats import ReaderStats
from storage.config import Config
from storage.errors import AlreadyTruncatedTransactionError, DLError, EndOfStreamError, LogNotFoundError
from storage.formats.dlsn import DLSN
from storage.formats.entry import decode_entry
from storage.formats.record import CONTROL, END_OF_STREAM, LogRecordWithDLSN
from storage.formats.segment_metadata import LogSegmentMetadata, TruncationStatus, assign_start_sequence_ids
from storage.log.layout import LogMetadata
from storage.segstore.base import SegmentStore

log = logging.getLogger(__name__)


def check_allowed(seg: LogSegmentMetadata, start: DLSN, conf: Config, log_name: str) -> None:
    """``isAllowedToPosition`` (DistributedLog's check) for a segment that is not a leading one.

    Raises:
        AlreadyTruncatedTransactionError: the segment is truncated at or after ``start``.
    """
    if conf.get("ignoreTruncationStatus"):
        return
    if seg.truncation_status == TruncationStatus.TRUNCATED and seg.last_dlsn >= start:
        raise AlreadyTruncatedTransactionError(
            f"log {log_name!r}: position {start} lies in truncated log segment {seg.lssn}"
        )
    if seg.truncation_status == TruncationStatus.PARTIALLY_TRUNCATED and seg.min_active_dlsn > start:
        if conf.get("alertPositionOnTruncated"):
            log.warning("log %r: position %s is before min active DLSN %s", log_name, start, seg.min_active_dlsn)
        raise AlreadyTruncatedTransactionError(
            f"log {log_name!r}: position {start} was truncated (min active DLSN {seg.min_active_dlsn})"
        )


def position_segments(
    segments: list[LogSegmentMetadata], start: DLSN, conf: Config, log_name: str
) -> tuple[list[LogSegmentMetadata], DLSN]:
    """Position by DLSN over the ascending segment list: the segments to read and the start DLSN.

    Raises:
        AlreadyTruncatedTransactionError: ``start`` (or a later segment) lies in truncated data.
    """
    segs = [s for s in segments if s.lssn >= start.lssn]
    out: list[LogSegmentMetadata] = []
    leading = not conf.get("ignoreTruncationStatus")
    for s in segs:
        if leading:
            if s.truncation_status == TruncationStatus.TRUNCATED:
                continue
            if s.truncation_status == TruncationStatus.PARTIALLY_TRUNCATED and s.min_active_dlsn > start:
                start = s.min_active_dlsn
            leading = False
        check_allowed(s, start, conf, log_name)
        out.append(s)
    return out, start


class Cursor:
    """A positioned, tailing cursor over one log."""

    def __init__(
        self,
        meta: LogMetadata,
        segstore: SegmentStore,
        conf: Config,
        start: DLSN,
        *,
        from_txid: int | None = None,
        initial_segments: Callable[[], list[LogSegmentMetadata]] | None = None,
        stats: ReaderStats | None = None,
    ) -> None:
        """``initial_segments`` (optional) gives the segment list for the first positioning
        (:meth:`storage.log.segment_cache.SegmentListCache.get`, called after this cursor's watches are
        registered); later refreshes, on the cursor's own watch events, read the metadata directly.
        ``stats``: where records returned, entry bytes decoded and waits are counted."""
        self._meta = meta
        self._store = segstore
        self._conf = conf
        self._name = meta.paths.name
        self._start = start
        self._next = start  # next DLSN to return (records below it are skipped)
        self._from_txid = from_txid
        self._ahead = max(1, int(conf.get("readAheadMaxRecords")))
        self._deser_sets = bool(conf.get("deserializeRecordSetOnReads"))
        self._buffer: deque[LogRecordWithDLSN] = deque()
        self._eos: EndOfStreamError | None = None
        self._error: DLError | None = None  # a read error held back until the buffer drains
        self._segments: list[LogSegmentMetadata] = []
        self._seg: LogSegmentMetadata | None = None
        self._next_entry = 0
        self._iter: Iterator[tuple[int, bytes]] | None = None
        self._iter_limit = -1
        self._sealed_limit: tuple[int, int] | None = None  # (ledger id, last entry) of a sealed ledger
        self._meta_dirty = True
        self._initial_segments = initial_segments
        self._stats = stats
        self.changed = threading.Event()
        self._cancels: list[Callable[[], None]] = [
            meta.store.watch(meta.paths.ledgers, self._on_meta_change),
            segstore.watch(self._on_ledger_change),
        ]

    # --- notifications --------------------------------------------------------------------
    def _on_meta_change(self, _path: str) -> None:
        self._meta_dirty = True
        self.changed.set()

    def _on_ledger_change(self, ledger_id: int) -> None:
        seg = self._seg
        if seg is None or seg.ledger_id == ledger_id:
            self.changed.set()

    def close(self) -> None:
        if self._stats is not None:
            self._stats.track_behind(id(self), None)
        for c in self._cancels:
            c()
        self._cancels.clear()
        self._drop_iter()
        self.changed.set()

    # --- reading ----------------------------------------------------------------------------
    def poll(self, max_records: int) -> list[LogRecordWithDLSN]:
        """Return up to ``max_records`` records available now (no waiting), ``[]`` at the tail.

        Raises:
            EndOfStreamError, AlreadyTruncatedTransactionError, LogNotFoundError,
            CorruptedEntryError, SegmentStoreError, MetadataError.
        """
        out: list[LogRecordWithDLSN] = []
        while len(out) < max_records:
            if not self._buffer:
                err = self._eos or self._error
                if err is not None:
                    if out:
                        break
                    self._error = None
                    raise err
                if not self._fill():
                    break
                continue
            out.append(self._buffer.popleft())
        if self._stats is not None:
            self._stats.records += len(out)
        return out

    def wait(self, timeout_s: float) -> None:
        """Sleep until something may have changed (or the timeout)."""
        if self._stats is None:
            self.changed.wait(timeout_s)
        else:
            t0 = time.perf_counter()
            self.changed.wait(timeout_s)
            self._stats.wait.observe(time.perf_counter() - t0)
        self.changed.clear()

    def _fill(self) -> bool:
        """Decode more records into the buffer; False when nothing more is readable now."""
        while not self._buffer and self._eos is None:
            self.changed.clear()
            if self._meta_dirty or self._seg is None:
                self._refresh()
            seg = self._seg
            if seg is None:
                return False
            limit = self._visible_limit(seg)
            if self._next_entry <= limit:
                self._read_some(seg, limit)
                continue
            if seg.in_progress:
                if not self._meta_dirty:
                    return False
                continue  # it may have been completed meanwhile: refresh and look again
            if not self._advance_segment():
                return False
        return bool(self._buffer) or self._eos is not None

    def _visible_limit(self, seg: LogSegmentMetadata) -> int:
        """The last entry of ``seg`` readers may see. Asks the segment store only when what is
        known visible has been read (a round trip per ``readAheadMaxRecords`` records costs a
        replicated store dearly), and once per completed segment (its ledger is sealed)."""
        if self._iter is not None and self._next_entry <= self._iter_limit:
            return self._iter_limit  # entries known visible are still unread
        if seg.in_progress:
            return self._store.last_add_confirmed(seg.ledger_id)
        if self._sealed_limit is None or self._sealed_limit[0] != seg.ledger_id:
            self._sealed_limit = (seg.ledger_id, self._store.info(seg.ledger_id).last_entry_id)
        return self._sealed_limit[1]

    def _read_some(self, seg: LogSegmentMetadata, limit: int) -> None:
        if self._iter is None or self._iter_limit != limit:
            self._drop_iter()
            self._iter = self._store.read_entries(seg.ledger_id, self._next_entry, limit)
            self._iter_limit = limit
        try:
            self._decode_from_iter(seg)
        except DLError as e:
            self._drop_iter()
            if not self._buffer:
                raise
            self._error = e  # deliver the records before the bad entry first

    def _decode_from_iter(self, seg: LogSegmentMetadata) -> None:
        assert self._iter is not None
        start_seq = seg.effective_start_sequence_id
        lssn = seg.lssn
        envelope = seg.envelope_entries
        deser = self._deser_sets
        buffer = self._buffer
        add = buffer.append
        stats = self._stats
        for entry_id, data in self._iter:
            self._next_entry = entry_id + 1
            if stats is not None:
                stats.bytes += len(data)
            recs = decode_entry(data, lssn, entry_id, start_seq, envelope=envelope, deserialize_record_set=deser)
            nxt = self._next
            # Records of an entry after the one ``_next`` points into are all >= ``_next``: the
            # per-record DLSN comparison is needed only for (lssn, entry) <= _next's.
            before_next = lssn < nxt.lssn or (lssn == nxt.lssn and entry_id <= nxt.entry_id)
            if before_next or self._from_txid is not None:
                for r in recs:
                    if r.flags & CONTROL or r.dlsn < nxt:
                        continue
                    if r.flags & END_OF_STREAM:
                        self._eos = EndOfStreamError(f"log {self._name!r} reached end of stream at {r.dlsn}")
                        return
                    if self._from_txid is not None:
                        if r.txid < self._from_txid:
                            continue
                        self._from_txid = None
                    add(r)
            else:
                for r in recs:
                    flags = r.flags
                    if flags:
                        if flags & CONTROL:
                            continue
                        if flags & END_OF_STREAM:
                            self._eos = EndOfStreamError(f"log {self._name!r} reached end of stream at {r.dlsn}")
                            return
                    add(r)
            if buffer:
                self._next = buffer[-1].dlsn.next()
            if len(buffer) >= self._ahead:
                return
        self._drop_iter()

    def _drop_iter(self) -> None:
        it, self._iter = self._iter, None
        if it is not None and hasattr(it, "close"):
            it.close()

    def _advance_segment(self) -> bool:
        """Move past a fully read completed segment; False if the next one is not there yet."""
        assert self._seg is not None
        nxt = [s for s in self._segments if s.lssn > self._seg.lssn]
        if not nxt:
            self._refresh()
            nxt = [s for s in self._segments if self._seg is not None and s.lssn > self._seg.lssn]
            if not nxt:
                return False
        self._next = max(self._next, DLSN(nxt[0].lssn, 0, 0))
        check_allowed(nxt[0], self._next, self._conf, self._name)
        self._enter(nxt[0])
        return True

    def _refresh(self) -> None:
        self._meta_dirty = False
        first, self._initial_segments = self._initial_segments, None
        try:
            segments = first() if first is not None else assign_start_sequence_ids(self._meta.segments())
        except LogNotFoundError:
            raise LogNotFoundError(f"log {self._name!r} was deleted") from None
        self._segments = segments
        if self._seg is not None:
            same = [s for s in segments if s.lssn == self._seg.lssn]
            if same and not (same[0].in_progress and not self._seg.in_progress):
                if same[0] != self._seg or same[0].in_progress != self._seg.in_progress:
                    self._seg = same[0]
                    self._drop_iter()
                return
        readable, start = position_segments(segments, self._next, self._conf, self._name)
        self._next = max(self._next, start)
        if readable:
            self._enter(readable[0])

    def _enter(self, seg: LogSegmentMetadata) -> None:
        self._drop_iter()
        self._seg = seg
        self._next_entry = self._next.entry_id if self._next.lssn == seg.lssn else 0
        self._next_entry = max(self._next_entry, 0)

    @property
    def position(self) -> DLSN:
        """The DLSN of the next record this cursor will return (or a lower bound of it)."""
        return self._buffer[0].dlsn if self._buffer else self._next
