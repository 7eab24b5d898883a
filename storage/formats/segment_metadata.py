"""Log segment metadata: what the metadata store keeps about each segment, and its text encoding.

A segment's znode (``<log root>/ledgers/<name>``) holds ASCII decimal fields joined by ``;``
(Apache DistributedLog ``LogSegmentMetadata.getFinalisedData``). ``vsc`` is the *versionStatusCount* long:

=========  ==============  =================================================================
bits       mask            content
=========  ==============  =================================================================
0-7        ``0xff``        metadata version (1..5)
8-15       ``0xff00``      status bits; ``status & 0x3`` is the truncation status
                           (0 active, 1 partially truncated, 2 truncated, 3 unknown)
16-27      ``0x0fff0000``  unused
28-31      ``0xf0000000``  region id (0..15)
32-63      (upper word)    record count, **only for completed segments** (a signed 32-bit int)
=========  ==============  =================================================================

Field lists per version (field count in parentheses; the count tells inprogress from completed):

=======  ======================================================  ==============================================
version  inprogress                                              completed
=======  ======================================================  ==============================================
1        ``1;ledgerId;firstTxId`` (3)                            ``vc;ledgerId;firstTxId;lastTxId;completionTime``
                                                                 (5) -- ``vc = 1 | count << 32``: status and
                                                                 region are not written
2        ``vsc;ledgerId;firstTxId;lssn`` (4)                     ``vsc;ledgerId;firstTxId;lastTxId;completionTime;
                                                                 lssn;lastEntryId;lastSlotId`` (8)
3, 4     ``vsc;ledgerId;firstTxId;lssn;minActiveEntryId;``       ``...;lastSlotId;minActiveEntryId;
         ``minActiveSlotId`` (6)                                 minActiveSlotId`` (10)
5        ``...;minActiveSlotId;startSequenceId`` (7)             ``...;minActiveSlotId;startSequenceId`` (11)
=======  ======================================================  ==============================================

Parsing rules (``parseData``): fields are split on ``;`` (trailing empty fields are dropped, as Java's
``String.split`` does) and are decimal longs (optional sign, ASCII digits). A version below 2 raises
:class:`~storage.errors.UnsupportedMetadataVersionError` unless ``skip_min_version_check``; a version above 5 (or 0)
always does. A V1 segment has no lssn (it reads as 0) and V1/V2 do not store the min-active DLSN (it reads as
``(lssn, 0, 0)``). Any other malformation raises :class:`~storage.errors.MetadataError`.

Segment znode names: ``inprogress_%018d`` / ``logrecs_%018d`` of the lssn (name version 1); legacy names
``inprogress_<firstTxId hex>``, ``logrecs_%018d_%018d`` (first/last txid) and
``logrecs_<first>_<last>_<lssn>_v<ver>l<ledger>_<region>`` are parsed too.

This module holds the value types (:class:`LogSegmentMetadata`, :class:`TruncationStatus`,
:class:`SegmentSlice`) and the ordering and sequence-id rules over segments; the text forms (znode data
and names) are encoded and decoded by :mod:`storage.formats._segment_codec`, whose public names are
re-exported here. Imports :mod:`storage.errors`, :mod:`storage.formats.dlsn`, :mod:`storage.formats.record`
and :mod:`storage.formats._segment_codec`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from storage.errors import IllegalStateError, InvalidArgumentError, UnexpectedError
from storage.formats import _segment_codec
from storage.formats._segment_codec import (
    COMPLETED_PREFIX,
    CURRENT_VERSION,
    INPROGRESS_PREFIX,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    OLDEST_SUPPORTED_VERSION,
    TRUNCATION_MASK,
    UNASSIGNED_LSSN,
    UNASSIGNED_SEQUENCE_ID,
    VERSION_V1_ORIGINAL,
    VERSION_V2_LEDGER_SEQNO,
    VERSION_V3_MIN_ACTIVE_DLSN,
    VERSION_V4_ENVELOPED_ENTRIES,
    VERSION_V5_SEQUENCE_ID,
    SegmentName,
    completed_name,
    inprogress_name,
    legacy_completed_name,
    legacy_inprogress_name,
    parse_segment_name,
    short,
    to_int64,
)
from storage.formats.dlsn import DLSN, _dlsn_unchecked
from storage.formats.record import INVALID_TXID

__all__ = [
    "COMPLETED_PREFIX",
    "CURRENT_VERSION",
    "INPROGRESS_PREFIX",
    "OLDEST_SUPPORTED_VERSION",
    "UNASSIGNED_LSSN",
    "UNASSIGNED_SEQUENCE_ID",
    "VERSION_V1_ORIGINAL",
    "VERSION_V2_LEDGER_SEQNO",
    "VERSION_V3_MIN_ACTIVE_DLSN",
    "VERSION_V4_ENVELOPED_ENTRIES",
    "VERSION_V5_SEQUENCE_ID",
    "LogSegmentMetadata",
    "SegmentName",
    "SegmentSlice",
    "TruncationStatus",
    "assign_start_sequence_ids",
    "compare_segments",
    "completed_name",
    "compute_start_sequence_id",
    "inprogress_name",
    "legacy_completed_name",
    "legacy_inprogress_name",
    "next_log_segment_sequence_number",
    "parse_segment_name",
    "segment_sort_key",
    "sort_segments",
]


class TruncationStatus(str, Enum):
    """Truncation status of a segment (``status & 0x3``); compares equal to its string value."""

    ACTIVE = "active"
    PARTIALLY_TRUNCATED = "partially_truncated"
    TRUNCATED = "truncated"
    #: Status bits 3: not written by DistributedLog; treated as neither active nor truncated.
    UNKNOWN = "unknown"

    @property
    def code(self) -> int:
        """The value stored in the status bits (0..3)."""
        return _TRUNCATION_CODES[self]

    @classmethod
    def from_code(cls, code: int) -> TruncationStatus:
        """The status for ``code & 0x3``."""
        return _TRUNCATION_BY_CODE[code & TRUNCATION_MASK]

    def __str__(self) -> str:
        return self.value


_TRUNCATION_CODES: dict[TruncationStatus, int] = {
    TruncationStatus.ACTIVE: 0,
    TruncationStatus.PARTIALLY_TRUNCATED: 1,
    TruncationStatus.TRUNCATED: 2,
    TruncationStatus.UNKNOWN: 3,
}
_TRUNCATION_BY_CODE: dict[int, TruncationStatus] = {v: k for k, v in _TRUNCATION_CODES.items()}

# Placeholder default for the DLSN fields: replaced in __post_init__ by DistributedLog's defaults.
_DERIVED: Final = _dlsn_unchecked(INT64_MIN, INT64_MIN, INT64_MIN)


def _check(value: object, name: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"log segment {name} must be an int, got {short(value)}")
    if not low <= value <= high:
        raise InvalidArgumentError(f"log segment {name} {value} is out of range [{low}, {high}]")


@dataclass(frozen=True, kw_only=True)
class LogSegmentMetadata:
    """Metadata of one log segment (immutable; every change makes a new instance).

    Defaults are DistributedLog's for a fresh inprogress segment: ``last_txid = INVALID_TXID``,
    ``last_dlsn = (lssn, -1, -1)``, ``min_active_dlsn = (lssn, 0, 0)``, ``start_sequence_id = -1`` (unassigned),
    ``status = 0`` (active), ``version = 5``. ``path`` (the znode path) does not take part in equality.

    Raises :class:`~storage.errors.InvalidArgumentError` on a wrong type or out-of-range value, or if ``last_dlsn`` /
    ``min_active_dlsn`` belong to another lssn.
    """

    lssn: int
    ledger_id: int
    first_txid: int
    last_txid: int = INVALID_TXID
    record_count: int = 0
    last_dlsn: DLSN = _DERIVED
    min_active_dlsn: DLSN = _DERIVED
    start_sequence_id: int = UNASSIGNED_SEQUENCE_ID
    status: int = 0
    in_progress: bool = True
    completion_time_ms: int = 0
    version: int = CURRENT_VERSION
    region_id: int = 0
    path: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for name in ("lssn", "ledger_id", "first_txid", "last_txid", "start_sequence_id", "completion_time_ms"):
            _check(getattr(self, name), name, INT64_MIN, INT64_MAX)
        _check(self.record_count, "record_count", INT32_MIN, INT32_MAX)
        _check(self.status, "status", 0, 0xFF)
        _check(self.version, "version", VERSION_V1_ORIGINAL, VERSION_V5_SEQUENCE_ID)
        _check(self.region_id, "region_id", 0, 0xF)
        if not isinstance(self.in_progress, bool):
            raise InvalidArgumentError(f"log segment in_progress must be a bool, got {short(self.in_progress)}")
        if not isinstance(self.path, str):
            raise InvalidArgumentError(f"log segment path must be a str, got {short(self.path)}")
        if self.last_dlsn is _DERIVED:
            object.__setattr__(self, "last_dlsn", DLSN(self.lssn, -1, -1))
        if self.min_active_dlsn is _DERIVED:
            object.__setattr__(self, "min_active_dlsn", DLSN(self.lssn, 0, 0))
        for name in ("last_dlsn", "min_active_dlsn"):
            value = getattr(self, name)
            if not isinstance(value, DLSN):
                raise InvalidArgumentError(f"log segment {name} must be a DLSN, got {short(value)}")
            if value.lssn != self.lssn:
                raise InvalidArgumentError(f"log segment {name} {value!r} is not in segment {self.lssn}")

    # ------------------------------------------------------------------ constructors and names
    @classmethod
    def new_inprogress(
        cls,
        *,
        lssn: int,
        ledger_id: int,
        first_txid: int,
        version: int = CURRENT_VERSION,
        region_id: int = 0,
        start_sequence_id: int = UNASSIGNED_SEQUENCE_ID,
        path: str = "",
    ) -> LogSegmentMetadata:
        """The metadata of a segment being started (inprogress, active, no records).

        Raises :class:`~storage.errors.InvalidArgumentError` on out-of-range values.
        """
        return cls(
            lssn=lssn,
            ledger_id=ledger_id,
            first_txid=first_txid,
            version=version,
            region_id=region_id,
            start_sequence_id=start_sequence_id,
            path=path,
        )

    @staticmethod
    def inprogress_name(lssn: int) -> str:
        """``inprogress_%018d`` of the lssn (see :func:`inprogress_name`)."""
        return inprogress_name(lssn)

    @staticmethod
    def completed_name(lssn: int) -> str:
        """``logrecs_%018d`` of the lssn (see :func:`completed_name`)."""
        return completed_name(lssn)

    @staticmethod
    def sort_key(segment: LogSegmentMetadata) -> Any:
        """Sort key of ``COMPARATOR`` order: ``sorted(segs, key=LogSegmentMetadata.sort_key)`` (see
        :func:`compare_segments`)."""
        return segment_sort_key(segment)

    # ------------------------------------------------------------------ derived values
    @property
    def first_dlsn(self) -> DLSN:
        """``(lssn, 0, 0)``."""
        return DLSN(self.lssn, 0, 0)

    @property
    def envelope_entries(self) -> bool:
        """True if entries carry the 13-byte envelope (version >= 4)."""
        return self.version >= VERSION_V4_ENVELOPED_ENTRIES

    @property
    def supports_sequence_id(self) -> bool:
        """True for version >= 5."""
        return self.version >= VERSION_V5_SEQUENCE_ID

    @property
    def supports_lssn(self) -> bool:
        """True for version >= 2 (V1 segments have no lssn)."""
        return self.version >= VERSION_V2_LEDGER_SEQNO

    @property
    def effective_start_sequence_id(self) -> int:
        """The stored start sequence id if version >= 5 and assigned, else ``Long.MIN_VALUE + (lssn << 32)`` (wrapping
        as Java longs do), so that segments of older versions give negative but increasing sequence ids."""
        if self.version >= VERSION_V5_SEQUENCE_ID and self.start_sequence_id != UNASSIGNED_SEQUENCE_ID:
            return self.start_sequence_id
        return to_int64(INT64_MIN + (self.lssn << 32))

    @property
    def truncation_status(self) -> TruncationStatus:
        """``status & 0x3`` as a :class:`TruncationStatus`."""
        return _TRUNCATION_BY_CODE[self.status & TRUNCATION_MASK]

    @property
    def is_truncated(self) -> bool:
        return self.status & TRUNCATION_MASK == 2

    @property
    def is_partially_truncated(self) -> bool:
        return self.status & TRUNCATION_MASK == 1

    @property
    def is_non_truncated(self) -> bool:
        return self.status & TRUNCATION_MASK == 0

    @property
    def znode_name(self) -> str:
        """The last component of :attr:`path`."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    # ------------------------------------------------------------------ mutations
    def complete(
        self,
        last_txid: int,
        record_count: int,
        last_entry_id: int,
        last_slot_id: int,
        completion_time_ms: int,
        start_sequence_id: int,
        path: str,
    ) -> LogSegmentMetadata:
        """The completed form of this inprogress segment (``completeLogSegment``).

        Raises :class:`~storage.errors.IllegalStateError` if the segment is already completed and
        :class:`~storage.errors.InvalidArgumentError` on out-of-range values.
        """
        if not self.in_progress:
            raise IllegalStateError(f"log segment {self.lssn} is already completed")
        for name, value in (("last_entry_id", last_entry_id), ("last_slot_id", last_slot_id)):
            _check(value, name, INT64_MIN, INT64_MAX)
        return dataclasses.replace(
            self,
            path=path,
            last_dlsn=DLSN(self.lssn, last_entry_id, last_slot_id),
            last_txid=last_txid,
            in_progress=False,
            completion_time_ms=completion_time_ms,
            record_count=record_count,
            start_sequence_id=start_sequence_id,
        )

    def with_truncation(
        self, status: TruncationStatus | str, min_active_dlsn: DLSN | None = None
    ) -> LogSegmentMetadata:
        """A copy with the truncation status (the low 2 status bits) replaced, and optionally the min-active DLSN.

        Raises :class:`~storage.errors.InvalidArgumentError` for an unknown status or a ``min_active_dlsn`` of
        another segment.
        """
        try:
            ts = TruncationStatus(status)
        except ValueError:
            raise InvalidArgumentError(f"unknown truncation status {short(status)}") from None
        if ts is TruncationStatus.UNKNOWN:
            raise InvalidArgumentError("cannot set the truncation status to 'unknown'")
        if min_active_dlsn is not None:
            if not isinstance(min_active_dlsn, DLSN):
                raise InvalidArgumentError(f"min_active_dlsn must be a DLSN, got {short(min_active_dlsn)}")
            if min_active_dlsn.lssn != self.lssn:
                raise InvalidArgumentError(
                    f"updating the min active DLSN of segment {self.lssn} with {min_active_dlsn!r} of another segment"
                )
        new_status = (self.status & ~TRUNCATION_MASK) | ts.code
        return dataclasses.replace(
            self,
            status=new_status,
            min_active_dlsn=self.min_active_dlsn if min_active_dlsn is None else min_active_dlsn,
        )

    def with_start_sequence_id(self, start_sequence_id: int) -> LogSegmentMetadata:
        """A copy with another stored start sequence id."""
        return dataclasses.replace(self, start_sequence_id=start_sequence_id)

    def with_lssn(self, lssn: int, path: str | None = None) -> LogSegmentMetadata:
        """A copy renumbered to ``lssn`` (``changeSequenceNumber``): the DLSN fields follow."""
        return dataclasses.replace(
            self,
            lssn=lssn,
            last_dlsn=DLSN(lssn, self.last_dlsn.entry_id, self.last_dlsn.slot_id),
            min_active_dlsn=DLSN(lssn, self.min_active_dlsn.entry_id, self.min_active_dlsn.slot_id),
            path=self.path if path is None else path,
        )

    # ------------------------------------------------------------------ text form
    def serialize(self, *, version: int | None = None, encode_region_id: bool = True) -> bytes:
        """The znode data (ASCII) for ``version`` (default: the segment's own version), per the module table
        (:func:`storage.formats._segment_codec.serialize`).

        ``encode_region_id=False`` writes region 0 (``encodeRegionIDInVersion=false``). Raises
        :class:`~storage.errors.InvalidArgumentError` for a version outside 1..5.
        """
        return _segment_codec.serialize(self, self.version if version is None else version, encode_region_id)

    @classmethod
    def parse(
        cls, path: str, data: bytes | bytearray | memoryview | str, skip_min_version_check: bool = False
    ) -> LogSegmentMetadata:
        """Parse znode data (``parseData``, :func:`storage.formats._segment_codec.parse`); ``path`` is the znode
        path kept in :attr:`path`.

        Raises :class:`~storage.errors.UnsupportedMetadataVersionError` for a version below 2 (unless
        ``skip_min_version_check``), above 5, or 0; :class:`~storage.errors.MetadataError` for anything else malformed.
        """
        return cls(**_segment_codec.parse(path, data, skip_min_version_check))


# --- ordering --------------------------------------------------------------------------------------
def compare_segments(a: LogSegmentMetadata, b: LogSegmentMetadata) -> int:
    """``LogSegmentMetadata.COMPARATOR``: by first txid if either lssn is 0 (V1), else by lssn, and on equal lssn an
    inprogress segment sorts before a completed one. Returns -1, 0 or 1."""
    if a.lssn == UNASSIGNED_LSSN or b.lssn == UNASSIGNED_LSSN:
        return (a.first_txid > b.first_txid) - (a.first_txid < b.first_txid)
    if a.lssn != b.lssn:
        return -1 if a.lssn < b.lssn else 1
    if a.in_progress == b.in_progress:
        return 0
    return -1 if a.in_progress else 1


#: Sort key implementing :func:`compare_segments` (``sorted(segments, key=segment_sort_key)``).
segment_sort_key = functools.cmp_to_key(compare_segments)


def sort_segments(segments: Iterable[LogSegmentMetadata], *, descending: bool = False) -> list[LogSegmentMetadata]:
    """The segments in ``COMPARATOR`` order, or ``DESC_COMPARATOR`` order (its exact reverse) if ``descending``."""
    return sorted(segments, key=segment_sort_key, reverse=descending)


# --- sequence ids ----------------------------------------------------------------------------------
def compute_start_sequence_id(segments: Iterable[LogSegmentMetadata], segment: LogSegmentMetadata) -> int:
    """Start sequence id for completing ``segment`` (``DLUtils.computeStartSequenceId``); any order is accepted.

    Looks at the segment(s) with lssn ``segment.lssn - 1``: if one is inprogress raise
    :class:`~storage.errors.UnexpectedError`; if it is v5 the result is its effective start sequence id plus its
    record count; otherwise (none, or older) 0.
    """
    start = 0
    for prev in sort_segments(segments, descending=True):
        if prev.lssn >= segment.lssn:
            continue
        if prev.lssn < segment.lssn - 1:
            break
        if prev.in_progress:
            raise UnexpectedError(
                f"should not complete log segment {segment.lssn} since its previous log segment is still inprogress"
            )
        if prev.supports_sequence_id:
            start = prev.effective_start_sequence_id + prev.record_count
    return start


def assign_start_sequence_ids(
    segments: Iterable[LogSegmentMetadata], *, validate_lssn: bool = True
) -> list[LogSegmentMetadata]:
    """The read-side segment list (``PerStreamLogSegmentCache.getLogSegments``), ascending.

    * If ``validate_lssn`` (``logSegmentSequenceNumberValidationEnabled``), two adjacent segments of version >= 2 whose
      lssns are not consecutive (including an inprogress and a completed segment with the same lssn) raise
      :class:`~storage.errors.UnexpectedError` ("ledger sequence number gap").
    * Walking up, the start sequence id is carried as ``start + record_count`` over completed v5 segments (reset to
      unassigned by older ones); the first inprogress v5 segment gets the carried value (0 if unassigned). The walk
      stops at the first inprogress segment.
    """
    ordered = sort_segments(segments)
    if validate_lssn:
        for prev, seg in itertools.pairwise(ordered):
            if (
                prev.version >= VERSION_V2_LEDGER_SEQNO
                and seg.version >= VERSION_V2_LEDGER_SEQNO
                and prev.lssn + 1 != seg.lssn
            ):
                raise UnexpectedError(
                    f"found ledger sequence number gap between log segment {prev.lssn} and {seg.lssn}"
                )
    carried = UNASSIGNED_SEQUENCE_ID
    for i, seg in enumerate(ordered):
        if not seg.in_progress:
            if seg.supports_sequence_id:
                carried = seg.effective_start_sequence_id + seg.record_count
            else:
                carried = UNASSIGNED_SEQUENCE_ID
            continue
        if seg.supports_sequence_id:
            ordered[i] = seg.with_start_sequence_id(0 if carried == UNASSIGNED_SEQUENCE_ID else carried)
        break
    return ordered


def next_log_segment_sequence_number(segments: Sequence[LogSegmentMetadata], first_lssn: int = 1) -> int:
    """The lssn of the next segment (``DLUtils.nextLogSegmentSequenceNumber``); any order is accepted.

    Taking the segments newest first, find the first one of version >= 2 at index ``i``: the result is its lssn
    + ``i`` + 1. With no such segment it is ``first_lssn`` (``firstLogSegmentSequenceNumber``).
    """
    for i, seg in enumerate(sort_segments(segments, descending=True)):
        if seg.version >= VERSION_V2_LEDGER_SEQNO:
            return seg.lssn + i + 1
    return first_lssn


@dataclass(frozen=True)
class SegmentSlice:
    """User records at positions ``first_pos..last_pos`` (inclusive) of log segment ``lssn``, found in
    entries ``first_entry..last_entry`` of ledger ``ledger_id``; ``envelope`` and ``start_sequence_id``
    as in the segment's metadata (:attr:`LogSegmentMetadata.effective_start_sequence_id`)."""

    lssn: int
    ledger_id: int
    envelope: bool
    start_sequence_id: int
    first_entry: int
    last_entry: int
    first_pos: int
    last_pos: int
