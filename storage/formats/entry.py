"""Entries: the unit appended to a segment's ledger, holding one or more serialized records.

Enveloped entry layout (segment metadata version >= 4; ``EnvelopedEntry``), big-endian:

======  ====  ===========================================================================================
offset  size  field
======  ====  ===========================================================================================
0       1     version byte; must be ``1`` (``VERSION_ONE``)
1       4     flags (int): bits 0-1 = compression codec (0 none, 1 LZ4); the other bits are unused (written 0,
              ignored on read)
5       4     decompressed payload length (int)
9       4     stored (compressed) payload length (int); equal to the decompressed length for codec none
13      L     payload: the concatenation of serialized records (:mod:`storage.formats.record`), compressed as one raw
              LZ4 block when the codec is LZ4
======  ====  ===========================================================================================

``HEADER_LENGTH = 13``. The data must be exactly ``13 + stored length`` bytes. An entry with an empty payload is
always written with codec none (LZ4 cannot compress an empty buffer); it decodes to no records.
Segments of metadata version < 4 store entries without the envelope: the payload alone (``envelope=False``).

No checksum is part of the format: integrity is the segment store's job.

Record DLSNs are not stored: a reader derives ``DLSN(lssn, entry_id, slot)`` from the (lssn, entry id) it read the
entry at and the record's index (see :func:`storage.formats.record_reader.read_records`).

Errors: a malformed envelope raises :class:`~storage.errors.InvalidEnvelopedEntryError`; malformed records raise
:class:`~storage.errors.CorruptedEntryError` (its parent); a record that is too large for the builder raises
:class:`~storage.errors.LogRecordTooLongError`; bad arguments raise :class:`~storage.errors.InvalidArgumentError`.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from storage.errors import CorruptedEntryError, InvalidArgumentError, InvalidEnvelopedEntryError, LogRecordTooLongError
from storage.formats.dlsn import DLSN
from storage.formats.record import (
    CONTROL,
    FLAGS_MASK,
    MAX_LOGRECORD_SIZE,
    RECORD_HEADER_SIZE,
    RECORD_SET,
    LogRecord,
    LogRecordWithDLSN,
    as_view,
    record_metadata,
    record_set_count,
)
from storage.formats.record_reader import _read_all, read_records
from storage.formats.recordset import (
    CODEC_MASK,
    CompressionCodec,
    _codec,
    codec_from_name,
    compress,
    decode_record_set,
    decompress,
)

__all__ = [
    "HEADER_LENGTH",
    "VERSION_ONE",
    "CompressionCodec",
    "EntryBuilder",
    "EntryColumns",
    "codec_from_name",
    "decode_entry",
    "decode_entry_columns",
    "unwrap_entry",
    "wrap_entry",
]

#: Size of the envelope header.
HEADER_LENGTH: Final = 13
#: The only envelope version.
VERSION_ONE: Final = 1

_ENVELOPE = struct.Struct(">Biii")
_RECORD = struct.Struct(">qqi")
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_POSITION_MASK = 0x0000FFFFFFFF0000
_INT32_MAX = (1 << 31) - 1


def wrap_entry(payload: bytes | bytearray | memoryview, codec: int = CompressionCodec.NONE) -> bytes:
    """Envelope a payload buffer (13-byte header + payload compressed with ``codec``; empty payloads use none).

    Raises :class:`~storage.errors.InvalidArgumentError` for an unknown codec.
    """
    data = payload if type(payload) is bytes or type(payload) is bytearray else bytes(payload)
    c = _codec(codec)  # validated even when unused
    if c is CompressionCodec.NONE or not data:
        # bytes + bytearray -> bytes: the payload is copied once, straight after the header
        return _ENVELOPE.pack(VERSION_ONE, CompressionCodec.NONE, len(data), len(data)) + data
    stored = compress(data, c)
    return _ENVELOPE.pack(VERSION_ONE, int(c) & CODEC_MASK, len(data), len(stored)) + stored


def unwrap_entry(data: bytes | bytearray | memoryview) -> bytes:
    """The (decompressed) payload buffer of an enveloped entry.

    Raises :class:`~storage.errors.InvalidEnvelopedEntryError` on a short header, a version other than 1, negative
    or inconsistent lengths, an unknown codec, or undecodable LZ4 data.
    """
    view = as_view(data)
    if len(view) < HEADER_LENGTH:
        raise InvalidEnvelopedEntryError(f"enveloped entry too short: {len(view)} bytes")
    version, flags, original_len, stored_len = _ENVELOPE.unpack_from(view, 0)
    if version != VERSION_ONE:
        raise InvalidEnvelopedEntryError(f"version mismatch while reading: received {version}, required {VERSION_ONE}")
    if original_len < 0 or stored_len < 0:
        raise InvalidEnvelopedEntryError(f"negative length in envelope: {original_len}/{stored_len}")
    if HEADER_LENGTH + stored_len != len(view):
        raise InvalidEnvelopedEntryError(
            f"envelope payload length {stored_len} does not match the {len(view) - HEADER_LENGTH} bytes present"
        )
    return decompress(view[HEADER_LENGTH:], flags & CODEC_MASK, original_len, InvalidEnvelopedEntryError)


def _plain_payload_end(data: bytes) -> int | None:
    """``len(data)`` if ``data`` is a well-formed enveloped entry stored uncompressed (its payload is
    ``data[13:]``), else None: compressed or malformed entries take :func:`unwrap_entry`, which raises."""
    if len(data) < HEADER_LENGTH:
        return None
    version, flags, original_len, stored_len = _ENVELOPE.unpack_from(data, 0)
    n = len(data) - HEADER_LENGTH
    if version != VERSION_ONE or flags & CODEC_MASK != CompressionCodec.NONE or original_len != n or stored_len != n:
        return None
    return len(data)


def _payload_of(data: bytes | bytearray | memoryview, envelope: bool) -> memoryview:
    if envelope:
        return memoryview(unwrap_entry(data))
    return as_view(data)


def decode_entry(
    data: bytes | bytearray | memoryview,
    lssn: int,
    entry_id: int,
    start_sequence_id: int,
    *,
    envelope: bool = True,
    deserialize_record_set: bool = True,
    skip_to: DLSN | None = None,
    skip_to_txid: int | None = None,
    skip_control: bool = True,
) -> list[LogRecordWithDLSN]:
    """Decode one entry read at ``(lssn, entry_id)`` into records (control and end-of-stream records included).

    ``envelope`` must be the segment's ``envelope_entries`` (metadata version >= 4). ``deserialize_record_set``,
    ``skip_to``, ``skip_to_txid`` and ``skip_control`` behave as in :func:`storage.formats.record_reader.read_records`.

    Raises :class:`~storage.errors.InvalidEnvelopedEntryError` / :class:`~storage.errors.CorruptedEntryError` on
    malformed data and :class:`~storage.errors.InvalidArgumentError` on bad arguments.
    """
    if (
        envelope
        and type(data) is bytes
        and skip_to is None
        and skip_to_txid is None
        and type(lssn) is int
        and type(entry_id) is int
        and type(start_sequence_id) is int
    ):
        # The reader's hot path: records decoded in place after a checked, uncompressed envelope.
        end = _plain_payload_end(data)
        if end is not None:
            return _read_all(data, HEADER_LENGTH, end, lssn, entry_id, start_sequence_id, deserialize_record_set)
    return read_records(
        _payload_of(data, envelope),
        lssn,
        entry_id,
        start_sequence_id,
        deserialize_record_set=deserialize_record_set,
        skip_to=skip_to,
        skip_to_txid=skip_to_txid,
        skip_control=skip_control,
    )


class EntryColumns(NamedTuple):
    """Parallel lists describing the records of one entry (see :func:`decode_entry_columns`)."""

    txids: list[int]
    payloads: list[bytes]
    slots: list[int]
    positions: list[int]
    flags: list[int]


def decode_entry_columns(
    data: bytes | bytearray | memoryview,
    *,
    envelope: bool = True,
    deserialize_record_set: bool = True,
    min_slot: int = 0,
    include_control: bool = True,
) -> EntryColumns:
    """Decode one entry into parallel lists, without building per-record objects (bulk readers).

    Row ``i`` describes one record: its txid, payload, slot (the DLSN is ``(lssn, entry_id, slot)``), position within
    the segment and flags. Record sets are expanded when ``deserialize_record_set`` (members: the set's txid, position
    ``p + i``, slot ``s + i``, flags 0); otherwise a set is one row and the next row's slot jumps by its member count.
    Rows with ``slot < min_slot`` are dropped (a set straddling ``min_slot`` is expanded, as ``skipTo(DLSN)`` does);
    ``include_control=False`` drops control records (end-of-stream records are kept: check ``flags``).

    Raises :class:`~storage.errors.InvalidEnvelopedEntryError` / :class:`~storage.errors.CorruptedEntryError` on
    malformed data.
    """
    buf = _payload_of(data, envelope)
    txids: list[int] = []
    payloads: list[bytes] = []
    slots: list[int] = []
    positions: list[int] = []
    flag_col: list[int] = []
    add_txid = txids.append
    add_payload = payloads.append
    add_slot = slots.append
    add_position = positions.append
    add_flags = flag_col.append
    unpack = _RECORD.unpack_from
    end = len(buf)
    off = 0
    slot = 0
    skip_flags = 0 if include_control else CONTROL
    while off < end:
        if end - off < RECORD_HEADER_SIZE:
            raise CorruptedEntryError(f"truncated record header at offset {off}: {end - off} bytes left")
        metadata, txid, length = unpack(buf, off)
        start = off + RECORD_HEADER_SIZE
        off = start + length
        if length < 0 or off > end:
            raise CorruptedEntryError(f"record at offset {start - RECORD_HEADER_SIZE} has an invalid length {length}")
        flags = metadata & FLAGS_MASK
        if flags & RECORD_SET:
            payload = buf[start:off]
            count = record_set_count(payload)
            if slot < min_slot and slot + count <= min_slot:
                slot += count
                continue
            position = (metadata & _POSITION_MASK) >> 16
            if position > _INT32_MAX:
                position -= 1 << 32
            if deserialize_record_set or slot < min_slot:
                members = decode_record_set(payload)
                first = min_slot - slot if slot < min_slot else 0
                for i in range(first, len(members)):
                    add_txid(txid)
                    add_payload(members[i])
                    add_slot(slot + i)
                    add_position(position + i)
                    add_flags(0)
            else:
                add_txid(txid)
                add_payload(payload.tobytes())
                add_slot(slot)
                add_position(position)
                add_flags(flags)
            slot += count
            continue
        if slot >= min_slot and not flags & skip_flags:
            position = (metadata & _POSITION_MASK) >> 16
            add_txid(txid)
            add_payload(buf[start:off].tobytes())
            add_slot(slot)
            add_position(position if position <= _INT32_MAX else position - (1 << 32))
            add_flags(flags)
        slot += 1
    return EntryColumns(txids, payloads, slots, positions, flag_col)


class EntryBuilder:
    """Accumulates records into one entry buffer (``EnvelopedEntryWriter``), as the segment writer does.

    Each :meth:`add` serializes the record with its current ``flags`` and ``position_within_segment`` and returns the
    first slot it occupies; a record set occupies as many slots as it has members. After transmitting the entry at
    ``(lssn, entry_id)`` the record added at slot ``s`` has the DLSN ``(lssn, entry_id, s)``.

    ``num_bytes`` is ``13 + serialized records`` for an enveloped entry (``envelope=True``), else the serialized
    records alone; the writer compares it with ``MAX_LOGRECORDSET_SIZE`` and ``writerOutputBufferSize``.
    """

    __slots__ = ("_buf", "_codec", "_envelope", "_has_user", "_max_txid", "_num_records", "_num_slots")

    def __init__(self, codec: int = CompressionCodec.NONE, *, envelope: bool = True) -> None:
        """Raises :class:`~storage.errors.InvalidArgumentError` for an unknown codec."""
        self._codec = _codec(codec)
        self._envelope = bool(envelope)
        self._buf = bytearray()
        self._num_records = 0
        self._num_slots = 0
        self._has_user = False
        self._max_txid = _INT64_MIN

    @property
    def num_records(self) -> int:
        """Number of :meth:`add` calls that succeeded (LogRecords in the buffer, a record set counting once)."""
        return self._num_records

    @property
    def num_slots(self) -> int:
        """Number of DLSN slots used (record-set members counted one by one; DistributedLog's ``getNumRecords``)."""
        return self._num_slots

    @property
    def num_bytes(self) -> int:
        """Uncompressed size of the entry so far: ``13 + serialized records`` (no 13 without envelope)."""
        return (HEADER_LENGTH if self._envelope else 0) + len(self._buf)

    @property
    def has_user_records(self) -> bool:
        """True if any non-control record was added."""
        return self._has_user

    @property
    def max_txid(self) -> int:
        """Largest txid added (``-2**63`` while empty)."""
        return self._max_txid

    @property
    def is_empty(self) -> bool:
        """True if no record was added."""
        return self._num_records == 0

    @property
    def last_slot(self) -> int:
        """Slot of the last record-set member or record added (``finalizeTransmit``): ``num_slots - 1``."""
        return self._num_slots - 1

    def add(self, record: LogRecord, position_within_segment: int | None = None) -> int:
        """Append ``record``; return the first slot it occupies.

        The record is serialized with ``position_within_segment`` if given (the writer's counter; the record itself is
        not changed), else with its own ``position_within_segment``.

        Raises :class:`~storage.errors.LogRecordTooLongError` if its persistent size exceeds ``MAX_LOGRECORD_SIZE``,
        :class:`~storage.errors.InvalidArgumentError` if it is not a LogRecord, holds out-of-range values or (with the
        RECORD_SET flag) its payload is not a valid record set. The buffer is unchanged on error.
        """
        if not isinstance(record, LogRecord):
            raise InvalidArgumentError(f"expected a LogRecord, got {type(record).__name__}")
        payload = record.payload
        size = RECORD_HEADER_SIZE + len(payload)
        if size > MAX_LOGRECORD_SIZE:
            raise LogRecordTooLongError(f"log record of size {size} written when only {MAX_LOGRECORD_SIZE} is allowed")
        flags = record.flags
        txid = record.txid
        position = record.position_within_segment if position_within_segment is None else position_within_segment
        if type(flags) is int and 0 <= flags <= FLAGS_MASK and type(position) is int and 0 <= position <= _INT32_MAX:
            metadata = flags | (position << 16)  # the common case, checked inline
        else:
            metadata = record_metadata(flags, position)  # raises InvalidArgumentError
        slots = 1
        if flags & RECORD_SET:
            try:
                slots = record_set_count(payload)
            except CorruptedEntryError as exc:
                raise InvalidArgumentError(f"record has the RECORD_SET flag but an invalid payload: {exc}") from None
        if type(txid) is not int or not _INT64_MIN <= txid <= _INT64_MAX:
            raise InvalidArgumentError(f"txid {txid!r} is not a signed 64-bit integer")
        if type(payload) is not bytes and not isinstance(payload, bytes):
            raise InvalidArgumentError(f"payload must be bytes, got {type(payload).__name__}")
        buf = self._buf
        buf += _RECORD.pack(metadata, txid, size - RECORD_HEADER_SIZE)
        buf += payload
        slot = self._num_slots
        self._num_slots = slot + slots
        self._num_records += 1
        if not flags & CONTROL:
            self._has_user = True
        if txid > self._max_txid:
            self._max_txid = txid
        return slot

    def clear(self) -> None:
        """Empty the builder for the next entry (same codec and envelope)."""
        self._buf = bytearray()
        self._num_records = 0
        self._num_slots = 0
        self._has_user = False
        self._max_txid = _INT64_MIN

    def payload_bytes(self) -> bytes:
        """The serialized records, without envelope or compression."""
        return bytes(self._buf)

    def to_bytes(self, codec: int | None = None) -> bytes:
        """The entry as stored: enveloped with ``codec`` (default: the builder's), or the bare records without envelope.

        Raises :class:`~storage.errors.InvalidArgumentError` for an unknown codec.
        """
        if not self._envelope:
            return bytes(self._buf)
        c = self._codec if codec is None else codec
        if c is CompressionCodec.NONE:  # the writer's default, per entry: skip the codec lookup
            n = len(self._buf)
            return _ENVELOPE.pack(VERSION_ONE, 0, n, n) + self._buf
        return wrap_entry(self._buf, _codec(c))
