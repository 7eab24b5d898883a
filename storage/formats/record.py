"""Log records: the unit an application writes and reads, and their binary layout inside an entry payload.

Serialized layout of one record (Apache DistributedLog ``LogRecord.Writer``), big-endian two's complement:

======  ====  ====================================================================
offset  size  field
======  ====  ====================================================================
0       8     ``metadata`` (signed long), see below
8       8     ``txid`` (signed long)
16      4     payload length ``N`` (signed int); a negative value is a corrupt record
20      N     payload bytes
======  ====  ====================================================================

The persistent size of a record is ``20 + N``.

The ``metadata`` long:

=========  ======================  ==========================================================================
bits       mask                    meaning
=========  ======================  ==========================================================================
0          ``0x1``                 :data:`CONTROL`: a control record, invisible to applications
1          ``0x2``                 :data:`END_OF_STREAM`: the end-of-stream marker
2          ``0x4``                 :data:`RECORD_SET`: the payload is a serialized LogRecordSet
3-15       --                      unused flags (the low 16 bits are the flags, ``FLAGS_MASK = 0xffff``)
16-47      ``0x0000ffffffff0000``  ``position_within_segment`` (32-bit; the writer only writes values >= 0)
48-63      --                      unused
=========  ======================  ==========================================================================

A payload buffer (the content of an entry, after the envelope) is the plain concatenation of serialized records.
:func:`storage.formats.record_reader.read_records` reads it as ``LogRecord.Reader`` does: the record at index ``i``
(counting record-set members) gets the DLSN ``(lssn, entry_id, slot)`` with the slot counted from 0 by the reader,
never stored in the bytes.

Errors: constructing a record with a wrong type or an out-of-range value raises
:class:`~storage.errors.InvalidArgumentError`; malformed bytes raise :class:`~storage.errors.CorruptedEntryError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Final

from storage.errors import CorruptedEntryError, InvalidArgumentError
from storage.formats.dlsn import DLSN, _dlsn_unchecked

__all__ = [
    "CONTROL",
    "CONTROL_RECORD_CONTENT",
    "EMPTY_LOGSEGMENT_TX_ID",
    "END_OF_STREAM",
    "END_OF_STREAM_CONTENT",
    "FLAGS_MASK",
    "INVALID_TXID",
    "KEEPALIVE_RECORD_CONTENT",
    "MAX_LOGRECORDSET_SIZE",
    "MAX_LOGRECORD_SIZE",
    "MAX_TXID",
    "RECORD_HEADER_SIZE",
    "RECORD_SET",
    "LogRecord",
    "LogRecordWithDLSN",
    "as_view",
    "encode_record",
    "iter_raw_records",
    "make_control_record",
    "make_end_of_stream_record",
    "make_keepalive_record",
    "parse_records",
    "record_metadata",
    "record_set_count",
    "serialize_record",
]

# --- flags -------------------------------------------------------------------------------
#: Flag of a control record (commit / keep-alive); readers never return it to applications.
CONTROL: Final = 0x1
#: Flag of the end-of-stream record (not combined with CONTROL).
END_OF_STREAM: Final = 0x2
#: Flag of a record whose payload is a serialized LogRecordSet.
RECORD_SET: Final = 0x4
#: The low 16 bits of the metadata long are flags.
FLAGS_MASK: Final = 0xFFFF

_POSITION_SHIFT = 16
_POSITION_MASK = 0x0000FFFFFFFF0000

# --- sizes and well-known txids ----------------------------------------------------------------
#: Size of the fixed part of a serialized record (metadata + txid + length).
RECORD_HEADER_SIZE: Final = 20
#: Largest allowed persistent size (20 + payload) of one record: 1 MiB - 8 KiB.
MAX_LOGRECORD_SIZE: Final = 1024 * 1024 - 8 * 1024
#: Largest size of one entry buffer / record set: 1 MiB - 4 KiB.
MAX_LOGRECORDSET_SIZE: Final = 1024 * 1024 - 4 * 1024
#: The largest transaction id (``Long.MAX_VALUE``); reserved for the end-of-stream record.
MAX_TXID: Final = (1 << 63) - 1
#: "No transaction id" (the last txid of an inprogress segment).
INVALID_TXID: Final = -999
#: Transaction id used for empty log segments.
EMPTY_LOGSEGMENT_TX_ID: Final = -99

#: Payload of a commit (control) record.
CONTROL_RECORD_CONTENT: Final = b"control"
#: Payload of a keep-alive (control) record.
KEEPALIVE_RECORD_CONTENT: Final = b"keepalive"
#: Payload of the end-of-stream record.
END_OF_STREAM_CONTENT: Final = b"endOfStream"

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1

_HEADER = struct.Struct(">qqi")
_SET_HEADER = struct.Struct(">ii")  # metadata int, count int (the first 8 bytes of a LogRecordSet)
_SET_VERSION = 0x1000
_SET_VERSION_MASK = 0xF000


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_int(value: object, what: str, low: int, high: int) -> int:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"{what} must be an int, got {_short(value)}")
        value = int(value)
    if not low <= value <= high:
        raise InvalidArgumentError(f"{what} {value} is out of range [{low}, {high}]")
    return value


def _as_bytes(payload: object) -> bytes:
    if type(payload) is bytes:
        return payload
    if isinstance(payload, (bytes, bytearray)):
        return bytes(payload)
    if isinstance(payload, memoryview):
        return payload.tobytes()
    raise InvalidArgumentError(f"payload must be bytes, bytearray or memoryview, got {type(payload).__name__}")


def as_view(buf: object) -> memoryview:
    """A flat byte view (format ``B``) of a bytes-like object, without copying when possible.

    Raises :class:`~storage.errors.InvalidArgumentError` if ``buf`` does not support the buffer protocol.
    """
    if isinstance(buf, (bytes, bytearray)):
        return memoryview(buf)
    try:
        mv = memoryview(buf)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgumentError(f"expected bytes-like data, got {type(buf).__name__}") from None
    if mv.format != "B" or not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    return mv


def record_set_count(payload: bytes | bytearray | memoryview) -> int:
    """Number of members of a serialized LogRecordSet, read from its header (``LogRecordSet.numRecords``); the body
    is not looked at (:func:`storage.formats.recordset.validate_record_set` checks a whole set).

    Raises :class:`~storage.errors.CorruptedEntryError` if the payload is shorter than 8 bytes, its version is not
    ``0x1000`` or the count is negative.
    """
    payload = as_view(payload)
    if len(payload) < _SET_HEADER.size:
        raise CorruptedEntryError(f"record set: {len(payload)} bytes, too short for a header")
    metadata, count = _SET_HEADER.unpack_from(payload, 0)
    if metadata & _SET_VERSION_MASK != _SET_VERSION:
        raise CorruptedEntryError(
            f"record set: version mismatch: received {metadata & _SET_VERSION_MASK:#x}, required {_SET_VERSION:#x}"
        )
    if count < 0:
        raise CorruptedEntryError(f"record set: header declares a negative member count {count}")
    return int(count)


_new = object.__new__


class LogRecord:
    """A record: a transaction id and an opaque payload, plus flags and the position within its segment.

    ``LogRecord(txid, payload)`` is what applications write. ``txid`` must be an int that fits in a signed 64-bit
    integer (the writer additionally requires ``0 <= txid < MAX_TXID``); ``payload`` may be ``bytes``,
    ``bytearray`` or ``memoryview`` and is stored as ``bytes``. ``flags`` (0..0xffff) and
    ``position_within_segment`` (0..2**31-1) are set by the writer.

    Raises :class:`~storage.errors.InvalidArgumentError` on a wrong type or an out-of-range value.
    """

    __slots__ = ("flags", "payload", "position_within_segment", "txid")

    txid: int
    payload: bytes
    flags: int
    position_within_segment: int

    def __init__(
        self,
        txid: int,
        payload: bytes | bytearray | memoryview,
        *,
        flags: int = 0,
        position_within_segment: int = 0,
    ) -> None:
        self.txid = _check_int(txid, "txid", _INT64_MIN, _INT64_MAX)
        self.payload = _as_bytes(payload)
        self.flags = (
            flags if type(flags) is int and 0 <= flags <= FLAGS_MASK else _check_int(flags, "flags", 0, FLAGS_MASK)
        )
        self.position_within_segment = (
            position_within_segment
            if type(position_within_segment) is int and 0 <= position_within_segment <= _INT32_MAX
            else _check_int(position_within_segment, "position_within_segment", 0, _INT32_MAX)
        )

    # ------------------------------------------------------------------ predicates
    @property
    def is_control(self) -> bool:
        """True for control records (commit and keep-alive)."""
        return bool(self.flags & CONTROL)

    @property
    def is_end_of_stream(self) -> bool:
        """True for the end-of-stream record."""
        return bool(self.flags & END_OF_STREAM)

    @property
    def is_record_set(self) -> bool:
        """True if the payload is a serialized LogRecordSet."""
        return bool(self.flags & RECORD_SET)

    @property
    def persistent_size(self) -> int:
        """Serialized size: ``20 + len(payload)``."""
        return RECORD_HEADER_SIZE + len(self.payload)

    @property
    def metadata(self) -> int:
        """The metadata long: ``flags | position_within_segment << 16``."""
        return self.flags | (self.position_within_segment << _POSITION_SHIFT)

    @property
    def last_position_within_segment(self) -> int:
        """``position + members - 1`` for a record set, else ``position`` (also for an unparseable set)."""
        if self.flags & RECORD_SET:
            try:
                count = record_set_count(self.payload)
            except CorruptedEntryError:
                return self.position_within_segment
            return self.position_within_segment + count - 1
        return self.position_within_segment

    def with_position(self, position_within_segment: int) -> LogRecord:
        """A plain :class:`LogRecord` copy (same txid, payload, flags) with another position within the segment.

        Raises :class:`~storage.errors.InvalidArgumentError` if the position is outside 0..2**31-1.
        """
        if not (type(position_within_segment) is int and 0 <= position_within_segment <= _INT32_MAX):
            position_within_segment = _check_int(position_within_segment, "position_within_segment", 0, _INT32_MAX)
        r: LogRecord = _new(LogRecord)
        r.txid = self.txid
        r.payload = self.payload
        r.flags = self.flags
        r.position_within_segment = position_within_segment
        return r

    # ------------------------------------------------------------------ dunder
    def _key(self) -> tuple[Any, ...]:
        return (self.txid, self.payload, self.flags, self.position_within_segment)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, LogRecord)
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(txid={self.txid}, payload={_short(self.payload, 40)}, "
            f"flags={self.flags:#x}, position={self.position_within_segment})"
        )


class LogRecordWithDLSN(LogRecord):
    """A record as read back: adds its :class:`~storage.formats.dlsn.DLSN` and its segment's start sequence id.

    ``sequence_id = start_sequence_id_of_segment + position_within_segment - 1``.

    Raises :class:`~storage.errors.InvalidArgumentError` on a wrong type or an out-of-range value.
    """

    # ``dlsn`` is a property over ``_dlsn`` so that decoders can leave it to be built on first
    # use: they set ``_dlsn = None``, ``_entry = (lssn, entry_id)`` (one tuple shared by every
    # record of an entry) and ``_slot``. Readers that never look at a record's DLSN then make
    # one object per record instead of two (half the allocation and GC work).
    __slots__ = ("_dlsn", "_entry", "_slot", "start_sequence_id_of_segment")

    _dlsn: DLSN | None
    _entry: tuple[int, int]
    _slot: int
    start_sequence_id_of_segment: int

    def __init__(
        self,
        txid: int,
        payload: bytes | bytearray | memoryview,
        dlsn: DLSN,
        start_sequence_id_of_segment: int = 0,
        *,
        flags: int = 0,
        position_within_segment: int = 0,
    ) -> None:
        super().__init__(txid, payload, flags=flags, position_within_segment=position_within_segment)
        if not isinstance(dlsn, DLSN):
            raise InvalidArgumentError(f"dlsn must be a DLSN, got {_short(dlsn)}")
        self._dlsn = dlsn
        self.start_sequence_id_of_segment = _check_int(
            start_sequence_id_of_segment, "start_sequence_id_of_segment", _INT64_MIN, _INT64_MAX
        )

    @property
    def dlsn(self) -> DLSN:
        """The record's position ``(lssn, entry_id, slot)``."""
        d = self._dlsn
        if d is None:
            lssn, entry_id = self._entry
            d = self._dlsn = _dlsn_unchecked(lssn, entry_id, self._slot)
        return d

    @dlsn.setter
    def dlsn(self, value: DLSN) -> None:
        self._dlsn = value

    @property
    def sequence_id(self) -> int:
        """``start_sequence_id_of_segment + position_within_segment - 1``."""
        return self.start_sequence_id_of_segment + self.position_within_segment - 1

    def _key(self) -> tuple[Any, ...]:
        return (*super()._key(), self.dlsn, self.start_sequence_id_of_segment)

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        # the same state whether or not the DLSN was built yet
        return None, {
            "txid": self.txid,
            "payload": self.payload,
            "flags": self.flags,
            "position_within_segment": self.position_within_segment,
            "_dlsn": self.dlsn,
            "start_sequence_id_of_segment": self.start_sequence_id_of_segment,
        }

    def __repr__(self) -> str:
        return (
            f"LogRecordWithDLSN(dlsn={self.dlsn!r}, txid={self.txid}, payload={_short(self.payload, 40)}, "
            f"flags={self.flags:#x}, position={self.position_within_segment}, "
            f"start_sequence_id={self.start_sequence_id_of_segment})"
        )


def _record_unchecked(
    txid: int, payload: bytes, flags: int, position: int, dlsn: DLSN, start_sequence_id: int
) -> LogRecordWithDLSN:
    """Build a LogRecordWithDLSN without validation (decoders: values come from fixed-width fields)."""
    r: LogRecordWithDLSN = _new(LogRecordWithDLSN)
    r.txid = txid
    r.payload = payload
    r.flags = flags
    r.position_within_segment = position
    r._dlsn = dlsn
    r.start_sequence_id_of_segment = start_sequence_id
    return r


# --- factories ------------------------------------------------------------------------------
def make_control_record(txid: int, position_within_segment: int = 0) -> LogRecord:
    """A commit (control) record: payload ``b"control"``, flag CONTROL.

    ``txid`` is the writer's last txid; the position is the current user-record counter (not incremented).
    Raises :class:`~storage.errors.InvalidArgumentError` on out-of-range values.
    """
    return LogRecord(txid, CONTROL_RECORD_CONTENT, flags=CONTROL, position_within_segment=position_within_segment)


def make_keepalive_record(txid: int, position_within_segment: int = 0) -> LogRecord:
    """A keep-alive (control) record: payload ``b"keepalive"``, flag CONTROL.

    Raises :class:`~storage.errors.InvalidArgumentError` on out-of-range values.
    """
    return LogRecord(txid, KEEPALIVE_RECORD_CONTENT, flags=CONTROL, position_within_segment=position_within_segment)


def make_end_of_stream_record(position_within_segment: int = 0) -> LogRecord:
    """The end-of-stream record: txid ``MAX_TXID``, payload ``b"endOfStream"``, flag END_OF_STREAM only.

    Raises :class:`~storage.errors.InvalidArgumentError` on an out-of-range position.
    """
    return LogRecord(
        MAX_TXID, END_OF_STREAM_CONTENT, flags=END_OF_STREAM, position_within_segment=position_within_segment
    )


# --- serialization ----------------------------------------------------------------------------
def record_metadata(flags: int, position_within_segment: int) -> int:
    """The metadata long: ``flags | position << 16``.

    Raises :class:`~storage.errors.InvalidArgumentError` if flags is outside 0..0xffff or the position outside
    0..2**31-1.
    """
    if not (type(flags) is int and 0 <= flags <= FLAGS_MASK):
        flags = _check_int(flags, "flags", 0, FLAGS_MASK)
    if not (type(position_within_segment) is int and 0 <= position_within_segment <= _INT32_MAX):
        position_within_segment = _check_int(position_within_segment, "position_within_segment", 0, _INT32_MAX)
    return flags | (position_within_segment << _POSITION_SHIFT)


def encode_record(txid: int, payload: bytes, flags: int = 0, position_within_segment: int = 0) -> bytes:
    """Serialize one record from its fields (layout in the module docstring).

    Raises :class:`~storage.errors.InvalidArgumentError` on an out-of-range field or a non-bytes payload.
    """
    metadata = record_metadata(flags, position_within_segment)
    data = _as_bytes(payload)
    try:
        return _HEADER.pack(metadata, txid, len(data)) + data
    except struct.error as exc:
        raise InvalidArgumentError(f"cannot serialize record with txid {_short(txid)}: {exc}") from None


def serialize_record(record: LogRecord) -> bytes:
    """Serialize ``record`` using its txid, payload, flags and position_within_segment.

    Raises :class:`~storage.errors.InvalidArgumentError` if the record holds out-of-range values.
    """
    if not isinstance(record, LogRecord):
        raise InvalidArgumentError(f"expected a LogRecord, got {_short(record)}")
    return encode_record(record.txid, record.payload, record.flags, record.position_within_segment)


# --- parsing ----------------------------------------------------------------------------------
def iter_raw_records(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(metadata, txid, payload)`` for each serialized record in a payload buffer, in order.

    Raises :class:`~storage.errors.CorruptedEntryError` on a truncated record or a negative payload length.
    """
    mv = as_view(buf)
    end = len(mv)
    off = 0
    unpack = _HEADER.unpack_from
    while off < end:
        if end - off < RECORD_HEADER_SIZE:
            raise CorruptedEntryError(f"truncated record header at offset {off}: {end - off} bytes left")
        metadata, txid, length = unpack(mv, off)
        off += RECORD_HEADER_SIZE
        if length < 0:
            raise CorruptedEntryError(f"record at offset {off - RECORD_HEADER_SIZE} has a negative length {length}")
        if length > end - off:
            raise CorruptedEntryError(
                f"truncated record at offset {off - RECORD_HEADER_SIZE}: length {length}, {end - off} bytes left"
            )
        yield metadata, txid, mv[off : off + length].tobytes()
        off += length


def _position_of(metadata: int) -> int:
    position = (metadata & _POSITION_MASK) >> _POSITION_SHIFT
    return position - (1 << 32) if position > _INT32_MAX else position  # Java casts to int


def parse_records(buf: bytes | bytearray | memoryview) -> list[LogRecord]:
    """Parse the records of a payload buffer as plain :class:`LogRecord` objects (no DLSNs, sets not expanded).

    Raises :class:`~storage.errors.CorruptedEntryError` on malformed bytes.
    """
    out: list[LogRecord] = []
    for metadata, txid, payload in iter_raw_records(buf):
        r: LogRecord = _new(LogRecord)
        r.txid = txid
        r.payload = payload
        r.flags = metadata & FLAGS_MASK
        r.position_within_segment = _position_of(metadata)
        out.append(r)
    return out
