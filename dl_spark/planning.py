"""Positions, record counts and segment-to-partition planning, from segment metadata and entries.

Every user record of a segment has a 1-based ``position_within_segment``; positions are contiguous
(a record set takes one per member). Control and end-of-stream records carry the position of the
last user record written before them, so *the position field of the last record of entry e is the
number of user records in entries 0..e* — one entry read answers "how many records up to here",
and a binary search over entries finds the entry of any position. Counts therefore come from
metadata (``record_count`` of a completed segment) and, for the in-progress segment, from its last
visible entry (the LAC): only what readers may see.

A :class:`LogInspector` is a snapshot of one log's segments during one planning call; it caches the
entries it decodes. Ranges are ``[start, end)`` of DLSNs (offsets); inside a segment they become
position ranges, which is what partitions carry, so ``maxRecordsPerPartition`` is exact and the same
``(start, end)`` always gives the same partitions (entries below the LAC never change).

Offsets this module produces are either the DLSN of an existing record, ``(lssn + 1, 0, 0)`` after a
completed segment, or ``last visible record + 1 slot`` at the tail of the in-progress segment: each is
a lower bound of the next record that never moves, so re-planning a batch later gives the same rows.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from dl_spark.errors import DataLossError
from storage.formats.dlsn import DLSN
from storage.formats.entry import decode_entry_columns
from storage.formats.record import CONTROL, END_OF_STREAM
from storage.formats.segment_metadata import LogSegmentMetadata, SegmentSlice, TruncationStatus
from storage.segstore.base import LedgerInfo, SegmentStore

__all__ = [
    "LogInspector",
    "PartitionSpec",
    "Slice",
    "allocate",
    "coalesce",
    "plan_partitions",
]

log = logging.getLogger(__name__)

_NOT_USER = CONTROL | END_OF_STREAM


@dataclass(frozen=True)
class Slice:
    """User records ``first_pos .. end_pos - 1`` of one segment; ``first_entry`` is a lower bound of
    the entry holding ``first_pos``."""

    seg: LogSegmentMetadata
    first_pos: int
    end_pos: int
    first_entry: int

    @property
    def size(self) -> int:
        return self.end_pos - self.first_pos


@dataclass(frozen=True)
class PartitionSpec:
    """One planned partition: a slice of one segment of log ``log`` (user records ``slice.first_pos..
    slice.last_pos``, inclusive, found in entries ``slice.first_entry..slice.last_entry``): exactly what
    :meth:`storage.LogManager.read_arrow_slice` reads."""

    log: str
    slice: SegmentSlice

    @property
    def size(self) -> int:
        """The number of user records in the partition."""
        return self.slice.last_pos - self.slice.first_pos + 1


class _Cols:
    __slots__ = ("flags", "positions", "slots")

    def __init__(self, positions: list[int], slots: list[int], flags: list[int]) -> None:
        self.positions = positions
        self.slots = slots
        self.flags = flags


class _EntryCache:
    """Decoded entries of one segment store, shared by every planning call of the process: an entry
    at or below its ledger's LAC never changes, and each trigger starts where the last one ended (its
    entry was read then). Bounded by the records held (the oldest dropped first)."""

    def __init__(self, max_records: int) -> None:
        self.max_records = max_records
        self._held = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, int], _Cols] = OrderedDict()

    def get(self, key: tuple[int, int]) -> _Cols | None:
        return self._entries.get(key)  # a plain read (atomic): eviction is by age of insertion

    def put(self, key: tuple[int, int], cols: _Cols) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = cols
            self._held += len(cols.positions) + 1
            while self._held > self.max_records and self._entries:
                _, old = self._entries.popitem(last=False)
                self._held -= len(old.positions) + 1


#: Records of decoded entries kept per segment store for planning (a few tens of MB at most).
ENTRY_CACHE_RECORDS = 500_000
_entry_caches: weakref.WeakKeyDictionary[SegmentStore, _EntryCache] = weakref.WeakKeyDictionary()
_entry_caches_lock = threading.Lock()


def _entry_cache(store: SegmentStore) -> _EntryCache:
    with _entry_caches_lock:
        got = _entry_caches.get(store)
        if got is None:
            got = _entry_caches[store] = _EntryCache(ENTRY_CACHE_RECORDS)
        return got


class LogInspector:
    """One log's segments as seen now, with the entry reads planning needs (cached: ledger states for
    this snapshot, decoded entries for the process)."""

    def __init__(self, name: str, segstore: SegmentStore, segments: Sequence[LogSegmentMetadata]) -> None:
        self.name = name
        self.store = segstore
        self.segments = list(segments)
        self._info: dict[int, LedgerInfo] = {}
        self._cols = _entry_cache(segstore)
        self._counts: dict[int, int] = {}

    # --- per segment ------------------------------------------------------------------------
    def info(self, seg: LogSegmentMetadata) -> LedgerInfo:
        """The ledger state of ``seg`` (cached for this snapshot).

        Raises:
            LedgerNotFoundError, SegmentStoreError.
        """
        got = self._info.get(seg.lssn)
        if got is None:
            got = self.store.info(seg.ledger_id)
            self._info[seg.lssn] = got
        return got

    def last_entry(self, seg: LogSegmentMetadata) -> int:
        """Last entry readers may see: the LAC of an in-progress segment, else its last entry."""
        return self.info(seg).last_entry_id

    def _entry(self, seg: LogSegmentMetadata, entry_id: int) -> _Cols:
        key = (seg.ledger_id, entry_id)
        got = self._cols.get(key)
        if got is None:
            data = self.store.read_entry(seg.ledger_id, entry_id)
            c = decode_entry_columns(data, envelope=seg.envelope_entries, include_control=True)
            got = _Cols(c.positions, c.slots, c.flags)
            self._cols.put(key, got)
        return got

    def users_through(self, seg: LogSegmentMetadata, entry_id: int) -> int:
        """Number of user records in entries ``0..entry_id`` of ``seg``."""
        e = entry_id
        while e >= 0:
            cols = self._entry(seg, e)
            if cols.positions:
                return max(cols.positions[-1], 0)
            e -= 1
        return 0

    def count(self, seg: LogSegmentMetadata) -> int:
        """User records readers may see in ``seg`` (metadata for a completed segment, the LAC entry
        for the in-progress one)."""
        if not seg.in_progress:
            return max(seg.record_count, 0)
        got = self._counts.get(seg.lssn)
        if got is None:
            last = self.last_entry(seg)
            got = self.users_through(seg, last) if last >= 0 else 0
            self._counts[seg.lssn] = got
        return got

    def bytes_per_record(self, seg: LogSegmentMetadata) -> float:
        """Average stored bytes per user record of ``seg`` (an estimate for ``maxBytesPerTrigger``)."""
        n = self.count(seg)
        if n <= 0:
            return 1.0
        return max(1.0, self.info(seg).length_bytes / n)

    def first_at_or_after(self, seg: LogSegmentMetadata, d: DLSN) -> tuple[int, int]:
        """``(position, entry lower bound)`` of the first visible user record of ``seg`` with
        DLSN >= ``d``; ``(count + 1, last entry + 1)`` when there is none (yet)."""
        n = self.count(seg)
        if d <= DLSN(seg.lssn, 0, 0):
            return 1, 0
        if d.lssn > seg.lssn or n == 0 or (not seg.in_progress and d > seg.last_dlsn):
            return n + 1, self.last_entry(seg) + 1
        last = self.last_entry(seg)
        e = max(d.entry_id, 0)
        while e <= last:
            cols = self._entry(seg, e)
            for pos, slot, flags in zip(cols.positions, cols.slots, cols.flags, strict=True):
                if not flags & _NOT_USER and (e > d.entry_id or slot >= d.slot_id):
                    return pos, e
            e += 1
        return n + 1, last + 1

    def locate(self, seg: LogSegmentMetadata, pos: int) -> DLSN:
        """The DLSN of user record ``pos`` (``1 <= pos <= count``) of ``seg``: a binary search over
        entries on "users through entry e >= pos".

        Raises:
            ValueError: ``pos`` is out of range (a bug of the caller).
        """
        if not 1 <= pos <= self.count(seg):
            raise ValueError(f"position {pos} outside 1..{self.count(seg)} of segment {seg.lssn}")
        lo, hi = 0, self.last_entry(seg)
        if pos == self.count(seg) and seg.in_progress:  # the tail: in the last entry with user records
            e = hi
            while e > 0 and not any(not f & _NOT_USER for f in self._entry(seg, e).flags):
                e -= 1
            lo = hi = e
        while lo < hi:
            mid = (lo + hi) // 2
            if self.users_through(seg, mid) >= pos:
                hi = mid
            else:
                lo = mid + 1
        cols = self._entry(seg, lo)
        for p, slot, flags in zip(cols.positions, cols.slots, cols.flags, strict=True):
            if p == pos and not flags & _NOT_USER:
                return DLSN(seg.lssn, lo, slot)
        raise ValueError(f"position {pos} not found in entry {lo} of segment {seg.lssn}")  # pragma: no cover

    # --- per log ----------------------------------------------------------------------------
    def earliest(self) -> DLSN:
        """The first readable position: past TRUNCATED segments, at ``minActiveDLSN`` of a partially
        truncated one (``(1, 0, 0)`` for a log without segments)."""
        if not self.segments:
            return DLSN.INITIAL
        for seg in self.segments:
            if seg.truncation_status == TruncationStatus.TRUNCATED:
                continue
            if seg.truncation_status == TruncationStatus.PARTIALLY_TRUNCATED:
                return max(seg.min_active_dlsn, DLSN(seg.lssn, 0, 0))
            return DLSN(seg.lssn, 0, 0)
        return DLSN(self.segments[-1].lssn + 1, 0, 0)

    def tail(self) -> DLSN | None:
        """The offset just past the last visible record (None: no segments). After a completed last
        segment it is ``(lssn + 1, 0, 0)``; in the in-progress one, the last visible record + 1 slot."""
        if not self.segments:
            return None
        seg = self.segments[-1]
        if not seg.in_progress:
            return DLSN(seg.lssn + 1, 0, 0)
        n = self.count(seg)
        if n == 0:
            return DLSN(seg.lssn, 0, 0)
        return self.locate(seg, n).next()

    def check_start(self, start: DLSN, *, fail_on_data_loss: bool) -> DLSN:
        """``start`` if its records are still readable, else the first readable position after it.

        Records at or after ``start`` that were truncated (a TRUNCATED segment, or before
        ``minActiveDLSN`` of a partially truncated one) or purged (their segment deleted) are lost.

        Raises:
            DataLossError: records were lost and ``fail_on_data_loss``; the message names the log,
                the position and what happened. (Without it, a warning is logged.)
        """
        segs = self.segments
        if not segs:
            return start
        eff = start
        lost: str | None = None
        first = segs[0]
        if eff.lssn < first.lssn:
            lost = f"was purged: log segments before {first.lssn} were deleted"
            eff = DLSN(first.lssn, 0, 0)
        for seg in segs:
            if seg.lssn < eff.lssn:
                continue
            if seg.truncation_status == TruncationStatus.TRUNCATED:
                if eff <= seg.last_dlsn and seg.record_count > 0 and lost is None:
                    lost = f"was truncated: log segment {seg.lssn} is truncated"
                eff = max(eff, DLSN(seg.lssn + 1, 0, 0))
                continue
            if seg.truncation_status == TruncationStatus.PARTIALLY_TRUNCATED and seg.min_active_dlsn > eff:
                skipped = self.first_at_or_after(seg, seg.min_active_dlsn)[0] - self.first_at_or_after(seg, eff)[0]
                if skipped > 0 and lost is None:
                    lost = f"was truncated: log segment {seg.lssn} starts at min active DLSN {seg.min_active_dlsn}"
                eff = seg.min_active_dlsn
            break
        if lost is not None:
            msg = f"log {self.name!r}: position {start} {lost}; the first readable position is {eff}"
            if fail_on_data_loss:
                raise DataLossError(
                    f"{msg}. Data was lost; set failOnDataLoss=false to continue from the first readable record"
                )
            log.warning("%s; skipping ahead (failOnDataLoss=false)", msg)
        return eff

    def slices(self, start: DLSN, end: DLSN) -> list[Slice]:
        """The records of ``[start, end)``, one :class:`Slice` per segment (empty ones left out)."""
        out: list[Slice] = []
        if end <= start:
            return out
        for seg in self.segments:
            if seg.lssn < start.lssn or seg.lssn > end.lssn:
                continue
            if seg.truncation_status == TruncationStatus.TRUNCATED:
                continue
            if seg.lssn == start.lssn:
                lo, lo_entry = self.first_at_or_after(seg, start)
            else:
                lo, lo_entry = 1, 0
            hi = self.first_at_or_after(seg, end)[0] if seg.lssn == end.lssn else self.count(seg) + 1
            if hi > lo:
                out.append(Slice(seg, lo, hi, lo_entry))
        return out

    def count_between(self, start: DLSN, end: DLSN) -> int:
        """Number of user records in ``[start, end)``."""
        return sum(s.size for s in self.slices(start, end))

    def offset_after(self, start: DLSN, end: DLSN, n: int) -> DLSN:
        """The end offset that admits the first ``n`` records of ``[start, end)``: the DLSN of the
        record after them (``end`` if there are no more than ``n``)."""
        for s in self.slices(start, end):
            if n < s.size:
                return self.locate(s.seg, s.first_pos + n)
            n -= s.size
        return end

    def rows_within_bytes(self, start: DLSN, end: DLSN, max_bytes: float) -> int:
        """How many records of ``[start, end)``, taken in order, fit in ``max_bytes`` (estimated
        from each segment's ledger size per record)."""
        rows = 0
        left = max_bytes
        for s in self.slices(start, end):
            per = self.bytes_per_record(s.seg)
            fit = min(s.size, int(left // per))
            rows += fit
            left -= fit * per
            if fit < s.size:
                break
        return rows

    def bytes_between(self, start: DLSN, end: DLSN) -> float:
        """Estimated stored bytes of ``[start, end)``."""
        return sum(s.size * self.bytes_per_record(s.seg) for s in self.slices(start, end))


def allocate(budget: int, backlogs: Sequence[int]) -> list[int]:
    """Split ``budget`` rows over logs in proportion to their backlogs (as Kafka's
    ``maxOffsetsPerTrigger``): every share <= its backlog, the shares sum to ``min(budget, total)``,
    leftovers go to the largest remainders (ties: the earlier log). Deterministic."""
    total = sum(backlogs)
    if total <= budget:
        return list(backlogs)
    shares = [budget * b // total for b in backlogs]
    rest = budget - sum(shares)
    order = sorted(range(len(backlogs)), key=lambda i: (-((budget * backlogs[i]) % total), i))
    while rest > 0:
        progressed = False
        for i in order:
            if rest == 0:
                break
            if shares[i] < backlogs[i]:
                shares[i] += 1
                rest -= 1
                progressed = True
        if not progressed:  # pragma: no cover - cannot happen while total > budget
            break
    return shares


def _split(size: int, parts: int) -> list[int]:
    """``size`` split into ``parts`` nearly equal positive pieces (larger ones first)."""
    parts = max(1, min(parts, size))
    base, extra = divmod(size, parts)
    return [base + 1 if i < extra else base for i in range(parts)]


def plan_partitions(
    inspectors: Sequence[tuple[LogInspector, Sequence[Slice]]],
    *,
    max_records_per_partition: int | None,
    min_partitions: int | None,
) -> list[PartitionSpec]:
    """Partitions for the given slices: one per (log, segment) slice, split so none holds more than
    ``max_records_per_partition`` records, and into at least ``min_partitions`` in all when there
    are that many records (larger slices get more pieces). Never merges slices. Deterministic."""
    flat = [(insp, s) for insp, slices in inspectors for s in slices]
    total = sum(s.size for _, s in flat)
    parts: list[int] = []
    for _, s in flat:
        p = 1 if max_records_per_partition is None else math.ceil(s.size / max_records_per_partition)
        if min_partitions and total > 0:
            p = max(p, math.ceil(s.size * min_partitions / total))
        parts.append(p)
    out: list[PartitionSpec] = []
    for (insp, s), p in zip(flat, parts, strict=True):
        seg = s.seg
        pos = s.first_pos
        first_entry = s.first_entry
        for piece in _split(s.size, p):
            last_pos = pos + piece - 1
            last_entry = insp.locate(seg, last_pos).entry_id
            if pos != s.first_pos:
                first_entry = insp.locate(seg, pos).entry_id
            out.append(
                PartitionSpec(
                    log=insp.name,
                    slice=SegmentSlice(
                        lssn=seg.lssn,
                        ledger_id=seg.ledger_id,
                        envelope=seg.envelope_entries,
                        start_sequence_id=seg.effective_start_sequence_id,
                        first_entry=min(first_entry, last_entry),
                        last_entry=last_entry,
                        first_pos=pos,
                        last_pos=last_pos,
                    ),
                )
            )
            pos = last_pos + 1
    return out


def coalesce(
    specs: Sequence[PartitionSpec],
    *,
    min_records_per_partition: int | None,
    max_partitions: int | None,
    max_records_per_partition: int | None = None,
) -> list[list[PartitionSpec]]:
    """Group planned slices into partitions: slices with fewer than ``min_records_per_partition``
    records are packed, across logs, in plan order, into groups of at least that many (the last group
    of a plan may hold fewer); then, while there are more than ``max_partitions`` groups, the size a
    group must reach grows. A group never exceeds ``max_records_per_partition`` when that is set (it
    wins over ``max_partitions``); larger slices keep a partition each. Every slice is in exactly one
    group, and within a log the groups keep the slices' order. Deterministic."""
    singles = [[s] for s in specs]
    if not specs or (min_records_per_partition is None and max_partitions is None):
        return singles
    total = sum(s.size for s in specs)
    target = min_records_per_partition or 1
    if max_partitions is not None:
        target = max(target, math.ceil(total / max_partitions))
    while True:
        groups = _pack(specs, target, max_records_per_partition)
        if max_partitions is None or len(groups) <= max_partitions or target >= total:
            return groups
        target = min(total, max(target + 1, math.ceil(target * 1.25)))


def _pack(specs: Sequence[PartitionSpec], target: int, cap: int | None) -> list[list[PartitionSpec]]:
    """Slices of ``target`` records or more alone; smaller ones packed in order until a group reaches
    ``target`` (or would pass ``cap``)."""
    out: list[list[PartitionSpec]] = []
    group: list[PartitionSpec] = []
    held = 0
    for s in specs:
        if s.size >= target:
            out.append([s])
            continue
        if group and cap is not None and held + s.size > cap:
            out.append(group)
            group, held = [], 0
        group.append(s)
        held += s.size
        if held >= target:
            out.append(group)
            group, held = [], 0
    if group:
        out.append(group)
    return out
