"""LogRecordSet: many application payloads batched into the payload of one record, and the compression codecs.

A record set is written as the payload of one :class:`~storage.formats.record.LogRecord` carrying the
:data:`~storage.formats.record.RECORD_SET` flag. Its layout (Apache DistributedLog ``LogRecordSet``), big-endian:

======  ====  ===========================================================================================
offset  size  field
======  ====  ===========================================================================================
0       4     metadata int: ``metadata & 0xF000`` is the version and must be ``0x1000``; ``metadata & 0x3`` is
              the compression codec (0 none, 1 LZ4)
4       4     number of members (int)
8       4     decompressed data length (int)
12      4     compressed (stored) data length (int); equal to the decompressed length for codec none
16      L     data: for each member ``[int len][len bytes]``; compressed as one raw LZ4 block if codec is LZ4
======  ====  ===========================================================================================

``HEADER_LEN = 16``; an empty set is just the header with count 0 (written with codec none, since LZ4 cannot
compress empty input). A member longer than :data:`~storage.formats.record.MAX_LOGRECORD_SIZE` is rejected with
:class:`~storage.errors.LogRecordTooLongError`, leaving the writer unchanged.

Read side (``EnvelopedRecordSetReader``): expanding a record-set record with DLSN ``(l, e, s)``, txid ``t`` and
position ``p`` gives member ``i`` the DLSN ``(l, e, s + i)``, txid ``t``, position ``p + i`` and flags 0.

Compression codecs (``CompressionCodec.Type``): NONE = 0, LZ4 = 1 (the raw LZ4 *block* format, no frame, no stored
size: the reader is given the exact decompressed size), UNKNOWN = -1 for any other configuration string.

Errors: malformed set bytes raise :class:`~storage.errors.CorruptedEntryError` (its message starts with
``record set:`` and names the fault); bad arguments raise :class:`~storage.errors.InvalidArgumentError`. Writers
check a whole set with :func:`validate_record_set` before storing it, so no reader meets a set it cannot decode.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, Final

import lz4.block

from storage.errors import CorruptedEntryError, InvalidArgumentError, LogRecordTooLongError
from storage.formats.dlsn import DLSN, _dlsn_unchecked
from storage.formats.record import (
    MAX_LOGRECORD_SIZE,
    RECORD_SET,
    LogRecord,
    LogRecordWithDLSN,
    _record_unchecked,
    as_view,
    record_set_count,
)

__all__ = [
    "HEADER_LEN",
    "CompressionCodec",
    "RecordSetWriter",
    "codec_from_name",
    "compress",
    "decode_record_set",
    "decompress",
    "encode_record_set",
    "expand_record_set",
    "member_dlsns",
    "validate_record_set",
]


class CompressionCodec(IntEnum):
    """Compression codec codes as stored in envelopes and record sets (``CompressionCodec.Type``)."""

    UNKNOWN = -1
    NONE = 0
    LZ4 = 1


#: Mask of the codec bits in an envelope's flags and a record set's metadata.
CODEC_MASK: Final = 0x3


def codec_from_name(name: str) -> CompressionCodec:
    """Map a ``compressionType`` string to a codec: ``"none"`` -> NONE, ``"lz4"`` -> LZ4, anything else -> UNKNOWN.

    Matching is exact, as in ``CompressionUtils.stringToType``; the configuration layer decides what to do with
    UNKNOWN (DistributedLog falls back to no compression).
    """
    if name == "lz4":
        return CompressionCodec.LZ4
    if name == "none":
        return CompressionCodec.NONE
    return CompressionCodec.UNKNOWN


_WRITABLE = {0: CompressionCodec.NONE, 1: CompressionCodec.LZ4}


def _codec(codec: Any) -> CompressionCodec:
    if type(codec) is not bool:  # fast path: a valid int or CompressionCodec (called per entry)
        try:
            known = _WRITABLE.get(codec)
        except TypeError:
            known = None
        if known is not None:
            return known
    try:
        value = CompressionCodec(codec)
    except (ValueError, TypeError):
        raise InvalidArgumentError(f"unknown compression codec {codec!r}") from None
    if value is CompressionCodec.UNKNOWN:
        raise InvalidArgumentError("compression codec UNKNOWN cannot be used to write data")
    return value


def compress(data: bytes | bytearray | memoryview, codec: int) -> bytes:
    """Compress ``data`` with ``codec`` (NONE returns it unchanged; LZ4 gives a raw block with no stored size).

    Raises :class:`~storage.errors.InvalidArgumentError` for an unknown codec or LZ4 on empty input (LZ4 cannot
    compress an empty buffer in DistributedLog either).
    """
    c = _codec(codec)
    if c is CompressionCodec.NONE:
        return bytes(data)
    if len(data) == 0:
        raise InvalidArgumentError("LZ4 cannot compress an empty buffer")
    out: bytes = lz4.block.compress(data, store_size=False)
    return out


#: An LZ4 block expands at most ~255x; larger claims are rejected before allocating memory.
_LZ4_MAX_RATIO = 255
_LZ4_SLACK = 64


def decompress(
    data: bytes | bytearray | memoryview,
    codec: int,
    decompressed_size: int,
    error: type[CorruptedEntryError] = CorruptedEntryError,
) -> bytes:
    """Decompress ``data`` to exactly ``decompressed_size`` bytes.

    Raises ``error`` (a :class:`~storage.errors.CorruptedEntryError`) on an unknown codec code, a size mismatch, an
    implausible size or undecodable LZ4 data.
    """
    if codec == CompressionCodec.NONE:
        if len(data) != decompressed_size:
            raise error(f"inconsistent data length for uncompressed data: {decompressed_size} != {len(data)}")
        return bytes(data)
    if codec != CompressionCodec.LZ4:
        raise error(f"unknown compression codec {codec}")
    if decompressed_size < 0 or decompressed_size > len(data) * _LZ4_MAX_RATIO + _LZ4_SLACK:
        raise error(f"implausible decompressed size {decompressed_size} for {len(data)} bytes of LZ4 data")
    if decompressed_size == 0:
        # lz4.block rejects a zero-sized destination for most inputs; the empty block is a single 0 token byte.
        if bytes(data) in (b"", b"\x00"):
            return b""
        raise error("LZ4 data does not decode to an empty buffer")
    try:
        out: bytes = lz4.block.decompress(data, uncompressed_size=decompressed_size)
    except Exception as exc:  # lz4.block.LZ4BlockError, MemoryError, ValueError
        raise error(f"corrupt LZ4 data: {exc}") from None
    if len(out) != decompressed_size:
        raise error(f"LZ4 data decoded to {len(out)} bytes, expected {decompressed_size}")
    return bytes(out)


# --- layout -------------------------------------------------------------------------------
#: Size of the record-set header.
HEADER_LEN: Final = 16
_VERSION = 0x1000
_HEADER = struct.Struct(">iiii")
_LEN = struct.Struct(">i")


class RecordSetWriter:
    """Builds the payload of one record-set record (``EnvelopedRecordSetWriter``).

    ``num_bytes`` starts at 16 (the header) and grows by ``4 + len(payload)`` per member. Member ``i`` of a set
    written at slot ``s`` of entry ``(l, e)`` gets the DLSN ``(l, e, s + i)``.
    """

    __slots__ = ("_codec", "_count", "_data")

    def __init__(self, codec: int = CompressionCodec.NONE) -> None:
        """Raises :class:`~storage.errors.InvalidArgumentError` for an unknown codec."""
        self._codec = _codec(codec)
        self._data = bytearray()
        self._count = 0

    @property
    def codec(self) -> CompressionCodec:
        """The codec used by :meth:`to_bytes`."""
        return self._codec

    @property
    def num_records(self) -> int:
        """Number of members written so far."""
        return self._count

    @property
    def num_bytes(self) -> int:
        """Uncompressed size of the set so far: 16 + sum(4 + len(member))."""
        return HEADER_LEN + len(self._data)

    def write(self, payload: bytes | bytearray | memoryview) -> None:
        """Append one member.

        Raises :class:`~storage.errors.LogRecordTooLongError` if it is longer than ``MAX_LOGRECORD_SIZE`` and
        :class:`~storage.errors.InvalidArgumentError` if it is not bytes-like; the set is unchanged in both cases.
        """
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"record set member must be bytes-like, got {type(payload).__name__}")
        view = as_view(payload)
        size = len(view)
        if size > MAX_LOGRECORD_SIZE:
            raise LogRecordTooLongError(f"log record of size {size} written when only {MAX_LOGRECORD_SIZE} is allowed")
        self._data += _LEN.pack(size)
        self._data += view
        self._count += 1

    def to_bytes(self) -> bytes:
        """The serialized set (header + data, compressed with the writer's codec; empty sets use codec none)."""
        data = bytes(self._data)
        codec = self._codec if data else CompressionCodec.NONE
        stored = compress(data, codec)
        header = _HEADER.pack(_VERSION | (int(codec) & CODEC_MASK), self._count, len(data), len(stored))
        return header + stored

    def to_record(self, txid: int) -> LogRecord:
        """A :class:`~storage.formats.record.LogRecord` with the RECORD_SET flag whose payload is :meth:`to_bytes`."""
        return LogRecord(txid, self.to_bytes(), flags=RECORD_SET)


def encode_record_set(payloads: Sequence[bytes]) -> bytes:
    """The uncompressed record set of ``payloads`` in one pass (what :class:`RecordSetWriter` builds member by
    member; for callers that already hold every member, checked).

    Raises :class:`~storage.errors.LogRecordTooLongError` for a member longer than ``MAX_LOGRECORD_SIZE``.
    """
    pack = _LEN.pack
    parts: list[bytes] = []
    append = parts.append
    size = 0
    for p in payloads:
        n = len(p)
        if n > MAX_LOGRECORD_SIZE:
            raise LogRecordTooLongError(f"log record of size {n} written when only {MAX_LOGRECORD_SIZE} is allowed")
        append(pack(n))
        append(p)
        size += 4 + n
    return _HEADER.pack(_VERSION | int(CompressionCodec.NONE), len(payloads), size, size) + b"".join(parts)


def member_dlsns(first: DLSN, count: int) -> list[DLSN]:
    """The DLSNs of the ``count`` members of a record set whose first member is at ``first``: ``(l, e, s + i)``."""
    lssn, entry_id, slot = first.lssn, first.entry_id, first.slot_id
    return [_dlsn_unchecked(lssn, entry_id, slot + i) for i in range(count)]


_NO_LIMIT: Final = 1 << 31  # above any member length (an int)


def decode_record_set(payload: bytes | bytearray | memoryview) -> list[bytes]:
    """The member payloads of a serialized record set, in order.

    Raises :class:`~storage.errors.CorruptedEntryError` for every fault :func:`validate_record_set` names except a
    member longer than ``MAX_LOGRECORD_SIZE`` (readers accept what is stored).
    """
    members: list[bytes] = []
    _walk_record_set(payload, members, _NO_LIMIT)
    return members


def validate_record_set(payload: bytes | bytearray | memoryview) -> int:
    """Check a whole serialized record set as a reader decodes it and return its member count.

    Checked: the header (16 bytes, version ``0x1000``, a known codec, no negative field), the stored length against
    the bytes present, the data (codec none: stored length equal to the declared decompressed length; LZ4: the block
    decompresses to exactly the declared length), every member's length (fits in the data, at most
    ``MAX_LOGRECORD_SIZE``), and that the members are exactly the declared count with no trailing bytes. Member
    payloads are not copied: only their lengths are read.

    Raises:
        CorruptedEntryError: the set is malformed; the message (``"record set: ..."``) names the one fault found.
    """
    return _walk_record_set(payload, None, MAX_LOGRECORD_SIZE)


def _walk_record_set(payload: bytes | bytearray | memoryview, members: list[bytes] | None, limit: int) -> int:
    """The decoder of :func:`decode_record_set` and :func:`validate_record_set`: checks ``payload`` and returns its
    member count; appends each member's payload to ``members`` unless it is None. A member longer than ``limit``
    is a fault. Raises :class:`~storage.errors.CorruptedEntryError`."""
    view = as_view(payload)
    if len(view) < HEADER_LEN:
        raise CorruptedEntryError(f"record set: {len(view)} bytes, shorter than the {HEADER_LEN}-byte header")
    count = record_set_count(view)  # version and member count
    metadata, _count, original_len, stored_len = _HEADER.unpack_from(view, 0)
    codec = metadata & CODEC_MASK
    if codec not in _WRITABLE:
        raise CorruptedEntryError(f"record set: unknown compression codec {codec}")
    if original_len < 0 or stored_len < 0:
        raise CorruptedEntryError(
            f"record set: header declares a negative data length (decompressed {original_len}, stored {stored_len})"
        )
    if stored_len != len(view) - HEADER_LEN:
        raise CorruptedEntryError(
            f"record set: header declares {stored_len} stored bytes, {len(view) - HEADER_LEN} present"
        )
    if codec == CompressionCodec.NONE:
        if original_len != stored_len:
            raise CorruptedEntryError(
                f"record set: uncompressed data of {stored_len} bytes, header declares {original_len} decompressed"
            )
        data = view[HEADER_LEN:]
    else:
        try:
            data = memoryview(decompress(view[HEADER_LEN:], codec, original_len))
        except CorruptedEntryError as e:
            raise CorruptedEntryError(
                f"record set: LZ4 block does not decompress to the declared {original_len} bytes: {e}"
            ) from None
    end = len(data)
    off = 0
    unpack = _LEN.unpack_from
    append = None if members is None else members.append
    for i in range(count):  # stops at the first fault, so a huge declared count costs nothing
        if end - off < 4:
            stray = f" and {end - off} stray bytes" if off != end else ""
            raise CorruptedEntryError(f"record set: header declares {count} members, body holds {i}{stray}")
        (size,) = unpack(data, off)
        off += 4
        if size < 0 or size > end - off or size > limit:
            raise CorruptedEntryError(_member_fault(i, size, end - off))
        if append is not None:
            append(data[off : off + size].tobytes())
        off += size
    if off != end:
        raise CorruptedEntryError(f"record set: {end - off} trailing bytes after the {count} declared members")
    return count


def _member_fault(index: int, size: int, left: int) -> str:
    if size < 0:
        return f"record set: member {index} has a negative length {size}"
    if size > left:
        return f"record set: member {index} declares {size} bytes, only {left} left in the body"
    return f"record set: member {index} is {size} bytes, over MAX_LOGRECORD_SIZE {MAX_LOGRECORD_SIZE}"


def expand_record_set(record: LogRecordWithDLSN) -> list[LogRecordWithDLSN]:
    """Expand a record-set record into its members (``LogRecordSet.of(record)``).

    Member ``i`` gets DLSN ``(l, e, slot + i)``, the set's txid, position ``position + i``, flags 0 and the set's
    start sequence id. Raises :class:`~storage.errors.InvalidArgumentError` if ``record`` is not a record set and
    :class:`~storage.errors.CorruptedEntryError` if its payload is malformed.
    """
    if not isinstance(record, LogRecordWithDLSN) or not record.is_record_set:
        raise InvalidArgumentError("record is not a record set")
    members = decode_record_set(record.payload)
    d = record.dlsn
    lssn, entry_id, slot = d.lssn, d.entry_id, d.slot_id
    txid = record.txid
    position = record.position_within_segment
    start = record.start_sequence_id_of_segment
    return [
        _record_unchecked(txid, m, 0, position + i, _dlsn_unchecked(lssn, entry_id, slot + i), start)
        for i, m in enumerate(members)
    ]
