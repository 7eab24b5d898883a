"""Filter pushdown for batch reads: which logs, segments and records a query's filters can match.

A batch read (``spark.read.format("distributedlog")``) with filters on ``stream``, ``txid``,
``sequence_id`` or ``dlsn`` plans only what can hold matching rows, when Spark pushes the filters
down (``spark.sql.python.filterPushdown.enabled``, off by default in PySpark 4.3):

* ``stream`` (``=``, ``IN``, ``LIKE 'prefix%'`` / ``startswith``) chooses the logs read;
* ``txid`` (``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``, ``BETWEEN``): transaction ids never decrease
  in a log, so ``lo <= txid <= hi`` is the DLSN range from the first record with txid >= lo to the
  first with txid >= hi + 1, found as ``open_reader(txid)`` finds its start (segment metadata picks
  the segment, a binary search over its entries the record: :mod:`storage.log.positioning`);
* ``sequence_id``: sequence ids are contiguous within a segment (its start sequence id + position
  - 1), so a range maps to exact positions of the segments it overlaps;
* ``dlsn`` (the whole struct compared with a struct literal, or ``dlsn.lssn``; ``dlsn.entry_id``
  when ``dlsn.lssn`` is pinned by ``=``, ``dlsn.slot_id`` when both are): exact DLSN ranges.

Every filter is turned into sets of half-open DLSN intervals per log, intersected with the read's
``[start, end)``; the partitions are the segment slices of the intervals left. A filter is taken
(not returned to Spark) only when the intervals hold exactly its rows; any other filter is returned
so Spark checks it on each row, which is why results are the same with pushdown on or off.

How PySpark 4.3 is driven (checked against its sources): a reader that overrides ``pushFilters``
fails every query with ``DATA_SOURCE_PUSHDOWN_DISABLED`` while the setting is off, and PySpark gives
a data source no way to read the setting. The data source therefore returns the pushdown reader
only when PySpark's pushdown worker asks for a reader (:func:`called_by_pushdown_worker`); the plain
planning worker, used when the setting is off or the query has no filter to push, gets the plain one.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from dl_spark.planning import LogInspector
from storage.errors import LogEmptyError
from storage.formats.dlsn import DLSN
from storage.formats.segment_metadata import LogSegmentMetadata, TruncationStatus
from storage.log import positioning

__all__ = [
    "MAX_POINTS",
    "IntRange",
    "Interval",
    "Pushdown",
    "called_by_pushdown_worker",
    "push_filters",
    "txid_position",
]

log = logging.getLogger(__name__)

#: PySpark's worker module that calls ``DataSource.reader`` and then ``pushFilters``.
PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"

#: ``IN`` lists longer than this prune by their least and greatest value only (and are returned to Spark).
MAX_POINTS = 256

#: A half-open DLSN interval ``[lo, hi)``.
Interval = tuple[DLSN, DLSN]

_INT64_MAX = (1 << 63) - 1


def called_by_pushdown_worker() -> bool:
    """True if the current call comes (through any number of frames) from PySpark's filter pushdown
    worker, the only caller that goes on to call ``pushFilters``."""
    frame = sys._getframe(1)
    while frame is not None:
        g = frame.f_globals
        spec = g.get("__spec__")
        if g.get("__name__") == PUSHDOWN_WORKER or getattr(spec, "name", None) == PUSHDOWN_WORKER:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


# --- integer constraints --------------------------------------------------------------------------
@dataclass(frozen=True)
class IntRange:
    """A conjunction of constraints on one integer column: ``lo <= x <= hi`` (None: unbounded) and,
    when ``points`` is set, ``x`` in ``points``. Plain values only (pickled to Spark's workers)."""

    lo: int | None = None
    hi: int | None = None
    points: tuple[int, ...] | None = None

    def at_least(self, v: int) -> IntRange:
        return replace(self, lo=v if self.lo is None else max(self.lo, v))

    def at_most(self, v: int) -> IntRange:
        return replace(self, hi=v if self.hi is None else min(self.hi, v))

    def within(self, values: Iterable[int]) -> IntRange:
        new = set(values)
        if self.points is not None:
            new &= set(self.points)
        return replace(self, points=tuple(sorted(new)))

    @property
    def constrained(self) -> bool:
        return self.lo is not None or self.hi is not None or self.points is not None

    def values(self) -> list[int] | None:
        """The allowed values when ``points`` is set (clipped to ``lo..hi``), else None."""
        if self.points is None:
            return None
        return [p for p in self.points if (self.lo is None or p >= self.lo) and (self.hi is None or p <= self.hi)]

    def single(self) -> int | None:
        """The one value allowed, if exactly one is."""
        vals = self.values()
        if vals is not None:
            return vals[0] if len(vals) == 1 else None
        if self.lo is not None and self.lo == self.hi:
            return self.lo
        return None

    def empty(self) -> bool:
        vals = self.values()
        if vals is not None:
            return not vals
        return self.lo is not None and self.hi is not None and self.lo > self.hi

    def spans(self) -> list[tuple[int | None, int | None]]:
        """The allowed values as inclusive spans ``(lo, hi)`` (None: unbounded), ascending."""
        vals = self.values()
        if vals is not None:
            return [(v, v) for v in vals]
        if self.empty():
            return []
        return [(self.lo, self.hi)]


# --- DLSN interval sets ---------------------------------------------------------------------------
def _normalize(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, non-empty, with overlapping or touching intervals merged."""
    out: list[Interval] = []
    for lo, hi in sorted(i for i in intervals if i[0] < i[1]):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return out


def txid_position(insp: LogInspector, txid: int, segments: Sequence[LogSegmentMetadata] | None = None) -> DLSN:
    """Where ``open_reader(txid)`` starts in ``insp``'s log (or among ``segments``, a suffix of its segments):
    the DLSN of the first record with txid >= ``txid`` (past the last record when there is none); the log's
    earliest position when there are no segments.

    Raises:
        CorruptedEntryError, SegmentStoreError: from the segment store.
    """
    try:
        return positioning.dlsn_for_txid(insp.store, list(insp.segments if segments is None else segments), txid)
    except LogEmptyError:
        return insp.earliest()


def _seg_end(insp: LogInspector, seg: LogSegmentMetadata) -> DLSN:
    """The offset just past the last visible record of ``seg``."""
    if not seg.in_progress:
        return DLSN(seg.lssn + 1, 0, 0)
    n = insp.count(seg)
    return DLSN(seg.lssn, 0, 0) if n == 0 else insp.locate(seg, n).next()


def _position_dlsn(insp: LogInspector, seg: LogSegmentMetadata, pos: int) -> DLSN:
    """The DLSN of user record ``pos`` of ``seg``; ``pos == count + 1`` gives the segment's end."""
    if pos == 1:
        return DLSN(seg.lssn, 0, 0)
    if pos > insp.count(seg):
        return _seg_end(insp, seg)
    return insp.locate(seg, pos)


@dataclass(frozen=True)
class Pushdown:
    """The filters a batch reader took (:func:`push_filters`), as constraints per column; plain values."""

    #: Logs allowed by ``stream = / IN`` (None: any).
    streams: tuple[str, ...] | None = None
    #: Prefixes every allowed log name starts with (``StringStartsWith``).
    prefixes: tuple[str, ...] = ()
    txid: IntRange = field(default_factory=IntRange)
    sequence_id: IntRange = field(default_factory=IntRange)
    lssn: IntRange = field(default_factory=IntRange)
    #: Used only when ``lssn`` allows a single value (see :func:`push_filters`).
    entry_id: IntRange = field(default_factory=IntRange)
    #: Used only when ``lssn`` and ``entry_id`` each allow a single value.
    slot_id: IntRange = field(default_factory=IntRange)
    #: Whole-struct ``dlsn`` constraints: ``dlsn_lo <= dlsn < dlsn_hi`` and, if set, dlsn in ``dlsn_points``.
    dlsn_lo: DLSN | None = None
    dlsn_hi: DLSN | None = None
    dlsn_points: tuple[DLSN, ...] | None = None

    def matches(self, name: str) -> bool:
        """True if log ``name`` may hold matching rows (its name passes the ``stream`` filters)."""
        if self.streams is not None and name not in self.streams:
            return False
        return all(name.startswith(p) for p in self.prefixes)

    # --- per log ------------------------------------------------------------------------------
    def ranges(self, insp: LogInspector, start: DLSN, end: DLSN) -> list[Interval]:
        """The parts of ``[start, end)`` of ``insp``'s log that can hold matching rows, as sorted disjoint
        half-open DLSN intervals (each holding exactly the matching rows when every filter was taken).

        Raises:
            CorruptedEntryError, SegmentStoreError: from the segment store (positioning reads entries).
        """
        current = [(start, end)] if start < end else []
        for make in (self._dlsn_intervals, self._txid_intervals, self._sequence_intervals):
            if not current:
                break
            got = make(insp, current[0][0], current[-1][1])
            if got is not None:
                current = _intersect(current, _normalize(got))
        return current

    def _dlsn_intervals(self, insp: LogInspector, start: DLSN, end: DLSN) -> list[Interval] | None:
        parts: list[list[Interval]] = []
        if self.dlsn_lo is not None or self.dlsn_hi is not None:
            parts.append([(self.dlsn_lo or start, self.dlsn_hi or end)])
        if self.dlsn_points is not None:
            parts.append([(d, d.next()) for d in self.dlsn_points])
        if self.lssn.constrained:
            parts.append(
                [
                    (DLSN(lo, 0, 0) if lo is not None else start, DLSN(hi + 1, 0, 0) if hi is not None else end)
                    for lo, hi in self.lssn.spans()
                ]
            )
            lssn = self.lssn.single()
            if lssn is not None and self.entry_id.constrained:
                parts.append(
                    [
                        (
                            DLSN(lssn, lo, 0) if lo is not None else DLSN(lssn, 0, 0),
                            DLSN(lssn, hi + 1, 0) if hi is not None else DLSN(lssn + 1, 0, 0),
                        )
                        for lo, hi in self.entry_id.spans()
                    ]
                )
                entry = self.entry_id.single()
                if entry is not None and self.slot_id.constrained:
                    parts.append(
                        [
                            (
                                DLSN(lssn, entry, lo) if lo is not None else DLSN(lssn, entry, 0),
                                DLSN(lssn, entry, hi + 1) if hi is not None else DLSN(lssn, entry + 1, 0),
                            )
                            for lo, hi in self.slot_id.spans()
                        ]
                    )
        if not parts:
            return None
        out = [(start, end)]
        for p in parts:
            out = _intersect(out, _normalize(p))
        return out

    def _txid_intervals(self, insp: LogInspector, start: DLSN, end: DLSN) -> list[Interval] | None:
        if not self.txid.constrained:
            return None
        # Only segments from ``start`` on: truncated ones before it are never read.
        segs = [s for s in insp.segments if s.lssn >= start.lssn and s.truncation_status != TruncationStatus.TRUNCATED]
        if not segs:
            return []
        out: list[Interval] = []
        for lo, hi in self.txid.spans():
            a = start if lo is None else txid_position(insp, lo, segs)
            b = end if hi is None or hi >= _INT64_MAX else txid_position(insp, hi + 1, segs)
            out.append((max(a, start), min(b, end)))
        return out

    def _sequence_intervals(self, insp: LogInspector, start: DLSN, end: DLSN) -> list[Interval] | None:
        if not self.sequence_id.constrained:
            return None
        spans = self.sequence_id.spans()
        out: list[Interval] = []
        for seg in insp.segments:
            if seg.lssn < start.lssn or seg.lssn > end.lssn or seg.truncation_status == TruncationStatus.TRUNCATED:
                continue
            n = insp.count(seg)
            first = seg.effective_start_sequence_id  # sequence id of position 1
            for lo, hi in spans:
                p_lo = 1 if lo is None else max(1, lo - first + 1)
                p_hi = n if hi is None else min(n, hi - first + 1)
                if p_lo <= p_hi:
                    out.append((_position_dlsn(insp, seg, p_lo), _position_dlsn(insp, seg, p_hi + 1)))
        return out


# --- pushFilters ----------------------------------------------------------------------------------
def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _dlsn(v: Any) -> DLSN | None:
    if not isinstance(v, dict) or set(v) != {"lssn", "entry_id", "slot_id"}:
        return None
    parts = [_int(v[k]) for k in ("lssn", "entry_id", "slot_id")]
    if any(p is None for p in parts):
        return None
    return DLSN(*parts)  # type: ignore[arg-type]


_INT_COLUMNS = {
    ("txid",): "txid",
    ("sequence_id",): "sequence_id",
    ("dlsn", "lssn"): "lssn",
    ("dlsn", "entry_id"): "entry_id",
    ("dlsn", "slot_id"): "slot_id",
}


def _apply_int(r: IntRange, f: Filter) -> IntRange | None:
    """``r`` narrowed by ``f`` (a comparison of an integer column with a literal); None if ``f`` is not one
    this module can apply exactly."""
    if isinstance(f, In):
        vals = [_int(v) for v in f.value]
        if not vals or any(v is None for v in vals) or len(vals) > MAX_POINTS:
            return None
        return r.within(v for v in vals if v is not None)
    v = _int(getattr(f, "value", None))
    if v is None:
        return None
    if isinstance(f, EqualTo | EqualNullSafe):
        return r.at_least(v).at_most(v)
    if isinstance(f, GreaterThan):
        return r.at_least(v + 1)
    if isinstance(f, GreaterThanOrEqual):
        return r.at_least(v)
    if isinstance(f, LessThan):
        return r.at_most(v - 1)
    if isinstance(f, LessThanOrEqual):
        return r.at_most(v)
    return None


def _apply_dlsn(p: Pushdown, f: Filter) -> Pushdown | None:
    if isinstance(f, In):
        ds = [_dlsn(v) for v in f.value]
        if not ds or any(d is None for d in ds) or len(ds) > MAX_POINTS:
            return None
        new = {d for d in ds if d is not None}
        if p.dlsn_points is not None:
            new &= set(p.dlsn_points)
        return replace(p, dlsn_points=tuple(sorted(new)))
    d = _dlsn(getattr(f, "value", None))
    if d is None:
        return None
    lo: DLSN | None = None  # the filter's own bounds, then intersected with what ``p`` has
    hi: DLSN | None = None
    if isinstance(f, EqualTo | EqualNullSafe):
        lo, hi = d, d.next()
    elif isinstance(f, GreaterThan):
        lo = d.next()
    elif isinstance(f, GreaterThanOrEqual):
        lo = d
    elif isinstance(f, LessThan):
        hi = d
    elif isinstance(f, LessThanOrEqual):
        hi = d.next()
    else:
        return None
    if p.dlsn_lo is not None:
        lo = p.dlsn_lo if lo is None else max(lo, p.dlsn_lo)
    if p.dlsn_hi is not None:
        hi = p.dlsn_hi if hi is None else min(hi, p.dlsn_hi)
    return replace(p, dlsn_lo=lo, dlsn_hi=hi)


def _apply_stream(p: Pushdown, f: Filter) -> Pushdown | None:
    if isinstance(f, StringStartsWith) and isinstance(f.value, str):
        return replace(p, prefixes=(*p.prefixes, f.value))
    if isinstance(f, In):
        names = list(f.value)
    elif isinstance(f, EqualTo | EqualNullSafe):
        names = [f.value]
    else:
        return None
    if not names or not all(isinstance(n, str) for n in names):
        return None
    allowed = set(names) if p.streams is None else set(names) & set(p.streams)
    return replace(p, streams=tuple(sorted(allowed)))


def _with(p: Pushdown, col: str, r: IntRange) -> Pushdown:
    """``p`` with integer column ``col``'s constraints replaced by ``r``."""
    if col == "txid":
        return replace(p, txid=r)
    if col == "sequence_id":
        return replace(p, sequence_id=r)
    if col == "lssn":
        return replace(p, lssn=r)
    if col == "entry_id":
        return replace(p, entry_id=r)
    assert col == "slot_id", col
    return replace(p, slot_id=r)


def push_filters(filters: Sequence[Filter]) -> tuple[Pushdown, list[Filter]]:
    """The constraints of the filters this source applies exactly, and the filters it does not (the
    same objects, for Spark to check on every row).

    Taken: ``=``, ``<=>``, ``<``, ``<=``, ``>``, ``>=`` and ``IN`` (up to :data:`MAX_POINTS` values) of
    ``txid``, ``sequence_id``, ``dlsn`` (struct literal) and ``dlsn.lssn`` with integer literals;
    ``dlsn.entry_id`` when ``dlsn.lssn`` is pinned to one value, ``dlsn.slot_id`` when ``dlsn.entry_id`` is
    too; ``stream`` ``=``, ``<=>``, ``IN`` and ``StringStartsWith``. Everything else (``NOT``, ``IS [NOT]
    NULL``, other string matches, comparisons with NULL or non-integers) is returned. Never raises."""
    p = Pushdown()
    rest: list[Filter] = []
    deferred: list[tuple[str, Filter]] = []
    for f in filters:
        attr = tuple(getattr(f, "attribute", ()))
        col = _INT_COLUMNS.get(attr)
        new: Pushdown | None = None
        if col in ("entry_id", "slot_id"):
            deferred.append((col, f))
            continue
        if col is not None:
            r = _apply_int(getattr(p, col), f)
            new = None if r is None else _with(p, col, r)
        elif attr == ("dlsn",):
            new = _apply_dlsn(p, f)
        elif attr == ("stream",):
            new = _apply_stream(p, f)
        if new is None:
            rest.append(f)
        else:
            p = new
    # entry_id / slot_id bound the DLSN only below a pinned lssn (and entry): otherwise Spark checks them.
    for col, f in sorted(deferred, key=lambda d: d[0]):  # every entry_id filter before any slot_id one
        pinned = p.lssn.single() is not None and (col == "entry_id" or p.entry_id.single() is not None)
        r = _apply_int(getattr(p, col), f) if pinned else None
        if r is None:
            rest.append(f)
        else:
            p = _with(p, col, r)
    log.debug("pushdown took %s, returned %s", p, rest)
    return p, rest
