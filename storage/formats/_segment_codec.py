"""The text forms of log segment metadata: a segment znode's data (fields per version) and its name.

The layouts are documented in :mod:`storage.formats.segment_metadata`, which holds the value type
(:class:`~storage.formats.segment_metadata.LogSegmentMetadata`) and re-exports the public names of this
module. :func:`serialize` reads a segment through the :class:`Fields` protocol; :func:`parse` returns the
constructor arguments of one (:class:`Parsed`).

Imports :mod:`storage.errors` and :mod:`storage.formats.dlsn`; not :mod:`storage.formats.segment_metadata`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Protocol, TypedDict

from storage.errors import InvalidArgumentError, MetadataError, UnsupportedMetadataVersionError
from storage.formats.dlsn import DLSN, _dlsn_unchecked

__all__ = [
    "COMPLETED_PREFIX",
    "CURRENT_VERSION",
    "INPROGRESS_PREFIX",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "OLDEST_SUPPORTED_VERSION",
    "TRUNCATION_MASK",
    "UNASSIGNED_LSSN",
    "UNASSIGNED_SEQUENCE_ID",
    "VERSION_V1_ORIGINAL",
    "VERSION_V2_LEDGER_SEQNO",
    "VERSION_V3_MIN_ACTIVE_DLSN",
    "VERSION_V4_ENVELOPED_ENTRIES",
    "VERSION_V5_SEQUENCE_ID",
    "Fields",
    "Parsed",
    "SegmentName",
    "completed_name",
    "inprogress_name",
    "legacy_completed_name",
    "legacy_inprogress_name",
    "parse",
    "parse_long",
    "parse_segment_name",
    "serialize",
    "short",
    "to_int64",
]

VERSION_V1_ORIGINAL: Final = 1
VERSION_V2_LEDGER_SEQNO: Final = 2
VERSION_V3_MIN_ACTIVE_DLSN: Final = 3
VERSION_V4_ENVELOPED_ENTRIES: Final = 4
VERSION_V5_SEQUENCE_ID: Final = 5
#: The version new segments are written with by default (``ledgerMetadataLayoutVersion``).
CURRENT_VERSION: Final = VERSION_V5_SEQUENCE_ID
#: The oldest version read without ``skip_min_version_check``.
OLDEST_SUPPORTED_VERSION: Final = VERSION_V2_LEDGER_SEQNO
#: ``startSequenceId`` of a segment that has none.
UNASSIGNED_SEQUENCE_ID: Final = -1
#: lssn of a V1 segment (which has none).
UNASSIGNED_LSSN: Final = 0

INPROGRESS_PREFIX: Final = "inprogress"
COMPLETED_PREFIX: Final = "logrecs"

_VERSION_MASK = 0xFF
_STATUS_SHIFT = 8
_STATUS_MASK = 0xFF00
_REGION_SHIFT = 28
_REGION_MASK = 0xF0000000
_COUNT_SHIFT = 32
#: The truncation status bits of ``status``.
TRUNCATION_MASK: Final = 0x3

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
_LONG = re.compile(r"([+-]?)0*([0-9]+)", re.ASCII)
_HEX = re.compile(r"[0-9a-f]{1,16}", re.ASCII)


def to_int64(value: int) -> int:
    """``value`` wrapped to a Java long."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value > INT64_MAX else value


def _to_int32(value: int) -> int:
    value &= (1 << 32) - 1
    return value - (1 << 32) if value > INT32_MAX else value


def short(value: object, limit: int = 120) -> str:
    """``repr(value)``, cut to ``limit`` characters (for messages)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_long(text: str) -> int | None:
    """``Long.parseLong`` restricted to ASCII digits; None if not a long."""
    m = _LONG.fullmatch(text)
    if m is None or len(m.group(2)) > 19:
        return None
    value = int(m.group(1) + m.group(2))
    return value if INT64_MIN <= value <= INT64_MAX else None


# --- znode data ------------------------------------------------------------------------------------
class Fields(Protocol):
    """The fields of a segment that its znode data holds."""

    @property
    def lssn(self) -> int: ...

    @property
    def ledger_id(self) -> int: ...

    @property
    def first_txid(self) -> int: ...

    @property
    def last_txid(self) -> int: ...

    @property
    def record_count(self) -> int: ...

    @property
    def last_dlsn(self) -> DLSN: ...

    @property
    def min_active_dlsn(self) -> DLSN: ...

    @property
    def start_sequence_id(self) -> int: ...

    @property
    def status(self) -> int: ...

    @property
    def in_progress(self) -> bool: ...

    @property
    def completion_time_ms(self) -> int: ...

    @property
    def region_id(self) -> int: ...


class Parsed(TypedDict, total=False):
    """The constructor arguments of a parsed segment (a missing DLSN field takes the default)."""

    lssn: int
    ledger_id: int
    first_txid: int
    last_txid: int
    completion_time_ms: int
    record_count: int
    in_progress: bool
    last_dlsn: DLSN
    min_active_dlsn: DLSN
    start_sequence_id: int
    version: int
    region_id: int
    status: int
    path: str


def serialize(seg: Fields, version: int, encode_region_id: bool) -> bytes:
    """The znode data (ASCII) of ``seg`` for ``version``; ``encode_region_id=False`` writes region 0.

    Raises:
        InvalidArgumentError: a version outside 1..5.
    """
    v = version
    if isinstance(v, bool) or not isinstance(v, int) or not VERSION_V1_ORIGINAL <= v <= VERSION_V5_SEQUENCE_ID:
        raise InvalidArgumentError(f"cannot serialize log segment metadata as version {short(v)}")
    count_bits = (seg.record_count & 0xFFFFFFFF) << _COUNT_SHIFT
    ld, ma = seg.last_dlsn, seg.min_active_dlsn
    if v == VERSION_V1_ORIGINAL:
        if seg.in_progress:
            fields: tuple[int, ...] = (v, seg.ledger_id, seg.first_txid)
        else:
            fields = (
                to_int64(v | count_bits),
                seg.ledger_id,
                seg.first_txid,
                seg.last_txid,
                seg.completion_time_ms,
            )
        return ";".join(map(str, fields)).encode("ascii")
    vsc = v | ((seg.status & 0xFF) << _STATUS_SHIFT)
    if encode_region_id:
        vsc |= (seg.region_id & 0xF) << _REGION_SHIFT
    if not seg.in_progress:
        vsc |= count_bits
    vsc = to_int64(vsc)
    if seg.in_progress:
        fields = (vsc, seg.ledger_id, seg.first_txid, seg.lssn)
        if v >= VERSION_V3_MIN_ACTIVE_DLSN:
            fields += (ma.entry_id, ma.slot_id)
    else:
        fields = (vsc, seg.ledger_id, seg.first_txid, seg.last_txid, seg.completion_time_ms, seg.lssn)
        fields += (ld.entry_id, ld.slot_id)
        if v >= VERSION_V3_MIN_ACTIVE_DLSN:
            fields += (ma.entry_id, ma.slot_id)
    if v >= VERSION_V5_SEQUENCE_ID:
        fields += (seg.start_sequence_id,)
    return ";".join(map(str, fields)).encode("ascii")


def parse(path: str, data: bytes | bytearray | memoryview | str, skip_min_version_check: bool = False) -> Parsed:
    """Parse znode data (``parseData``); ``path`` is the znode path (kept in the result).

    Raises:
        UnsupportedMetadataVersionError: a version below 2 (unless ``skip_min_version_check``), above 5,
            or 0.
        MetadataError: anything else malformed.
    """
    if isinstance(data, str):
        text = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        text = bytes(data).decode("utf-8", errors="replace")
    else:
        raise MetadataError(f"log segment metadata at {path!r} must be bytes, got {type(data).__name__}")
    if not isinstance(path, str):
        raise MetadataError(f"log segment metadata path must be a str, got {short(path)}")
    parts = text.split(";")
    while parts and parts[-1] == "" and len(parts) > 1:
        parts.pop()
    vsc = parse_long(parts[0])
    if vsc is None:
        raise MetadataError(f"invalid ledger entry at {path!r}: {short(text)}")
    version = vsc & _VERSION_MASK
    if version < OLDEST_SUPPORTED_VERSION and not skip_min_version_check:
        raise UnsupportedMetadataVersionError(
            f"ledger metadata version {version} is no longer supported at {path!r}: {short(text)}"
        )
    if version > CURRENT_VERSION or version == 0:
        raise UnsupportedMetadataVersionError(
            f"metadata version {version} at {path!r} is not supported (highest is {CURRENT_VERSION}): " + short(text)
        )
    numbers: list[int] = [vsc]
    for part in parts[1:]:
        value = parse_long(part)
        if value is None:
            raise MetadataError(f"invalid log segment metadata at {path!r}: {short(part)} is not a long")
        numbers.append(value)
    region = (vsc & _REGION_MASK) >> _REGION_SHIFT
    status = (vsc & _STATUS_MASK) >> _STATUS_SHIFT
    count = _to_int32(vsc >> _COUNT_SHIFT)
    n = len(numbers)
    if version == VERSION_V1_ORIGINAL:
        inprogress_len, completed_len = 3, 5
    elif version == VERSION_V2_LEDGER_SEQNO:
        inprogress_len, completed_len = 4, 8
    elif version <= VERSION_V4_ENVELOPED_ENTRIES:
        inprogress_len, completed_len = 6, 10
    else:
        inprogress_len, completed_len = 7, 11
    if n == inprogress_len:
        lssn = numbers[3] if version >= VERSION_V2_LEDGER_SEQNO else UNASSIGNED_LSSN
        parsed = Parsed(
            lssn=lssn,
            ledger_id=numbers[1],
            first_txid=numbers[2],
            start_sequence_id=numbers[6] if version >= VERSION_V5_SEQUENCE_ID else UNASSIGNED_SEQUENCE_ID,
            version=version,
            region_id=region,
            status=status,
            path=path,
        )
        if version >= VERSION_V3_MIN_ACTIVE_DLSN:
            parsed["min_active_dlsn"] = _dlsn_unchecked(lssn, numbers[4], numbers[5])
        return parsed
    if n == completed_len:
        if version == VERSION_V1_ORIGINAL:
            lssn = UNASSIGNED_LSSN
            last = _dlsn_unchecked(lssn, -1, -1)
        else:
            lssn = numbers[5]
            last = _dlsn_unchecked(lssn, numbers[6], numbers[7])
        parsed = Parsed(
            lssn=lssn,
            ledger_id=numbers[1],
            first_txid=numbers[2],
            last_txid=numbers[3],
            completion_time_ms=numbers[4],
            record_count=count,
            in_progress=False,
            last_dlsn=last,
            start_sequence_id=numbers[10] if version >= VERSION_V5_SEQUENCE_ID else UNASSIGNED_SEQUENCE_ID,
            version=version,
            region_id=region,
            status=status,
            path=path,
        )
        if version >= VERSION_V3_MIN_ACTIVE_DLSN:
            parsed["min_active_dlsn"] = _dlsn_unchecked(lssn, numbers[8], numbers[9])
        return parsed
    raise MetadataError(f"invalid log segment metadata at {path!r} ({n} fields for version {version}): {short(text)}")


# --- znode names -----------------------------------------------------------------------------------
def inprogress_name(lssn: int) -> str:
    """``inprogress_%018d`` of the lssn (name version 1)."""
    return f"{INPROGRESS_PREFIX}_{lssn:018d}"


def completed_name(lssn: int) -> str:
    """``logrecs_%018d`` of the lssn (name version 1)."""
    return f"{COMPLETED_PREFIX}_{lssn:018d}"


def legacy_inprogress_name(first_txid: int) -> str:
    """``inprogress_<first txid as unsigned lowercase hex>`` (name version 0)."""
    return f"{INPROGRESS_PREFIX}_{first_txid & ((1 << 64) - 1):x}"


def legacy_completed_name(first_txid: int, last_txid: int) -> str:
    """``logrecs_%018d_%018d`` of the first and last txids (name version 0)."""
    return f"{COMPLETED_PREFIX}_{first_txid:018d}_{last_txid:018d}"


@dataclass(frozen=True)
class SegmentName:
    """What a segment znode name says: ``lssn`` for name-version-1 names, txids for legacy names."""

    in_progress: bool
    lssn: int | None = None
    first_txid: int | None = None
    last_txid: int | None = None


def parse_segment_name(name: str) -> SegmentName:
    """Parse a segment znode name (current or legacy form, see :mod:`storage.formats.segment_metadata`).

    Raises :class:`~storage.errors.InvalidArgumentError` if ``name`` is not a segment name.
    """
    if not isinstance(name, str):
        raise InvalidArgumentError(f"segment name must be a str, got {short(name)}")
    prefix, sep, rest = name.partition("_")
    if sep and prefix == INPROGRESS_PREFIX:
        if len(rest) >= 17 and _LONG.fullmatch(rest):
            lssn = parse_long(rest)
            if lssn is not None:
                return SegmentName(in_progress=True, lssn=lssn)
        elif _HEX.fullmatch(rest):
            return SegmentName(in_progress=True, first_txid=to_int64(int(rest, 16)))
    elif sep and prefix == COMPLETED_PREFIX:
        parts = rest.split("_")
        if len(parts) == 1:
            lssn = parse_long(parts[0])
            if lssn is not None:
                return SegmentName(in_progress=False, lssn=lssn)
        elif len(parts) in (2, 5):
            numbers = [parse_long(p) for p in parts[: 2 if len(parts) == 2 else 3]]
            if all(n is not None for n in numbers):
                return SegmentName(
                    in_progress=False,
                    first_txid=numbers[0],
                    last_txid=numbers[1],
                    lssn=numbers[2] if len(numbers) == 3 else None,
                )
    raise InvalidArgumentError(f"not a log segment name: {short(name)}")
