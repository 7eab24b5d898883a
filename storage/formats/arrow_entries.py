"""User records from Arrow columns to enveloped entries in bulk, without a Python object per record.

The bytes are exactly what :class:`storage.formats.entry.EntryBuilder` makes for the same records (flags 0,
positions counted from ``first_position``, codec none or LZ4): each record is the 20-byte header
``metadata (int64: flags | position << 16), txid (int64), length (int32)``, big-endian, then the
payload, and each entry is the 13-byte envelope ``version, flags, size, stored size`` then its records
(with LZ4, one raw LZ4 block of them: ``flags`` carries the codec).

How: the three header fields are built as whole big-endian buffers (``array`` + ``byteswap``), laid
out as fixed-width Arrow binary arrays, and joined element-wise with the payloads by
``pyarrow.compute.binary_join_element_wise``; the data buffer of the result is then the serialized
records back to back, and its offsets are the record boundaries where entries are cut.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

import lz4.block
import pyarrow as pa
import pyarrow.compute as pc

from storage.errors import InvalidArgumentError, LogRecordTooLongError, TransactionIdOutOfOrderError
from storage.formats.entry import HEADER_LENGTH, VERSION_ONE
from storage.formats.record import MAX_LOGRECORD_SIZE, MAX_TXID, RECORD_HEADER_SIZE
from storage.formats.recordset import CODEC_MASK, CompressionCodec, _codec

__all__ = ["EncodedEntry", "encode_entries"]

_ENVELOPE = struct.Struct(">Biii")
_INT32_MAX = (1 << 31) - 1
_BIG_ENDIAN = sys.byteorder == "big"


@dataclass(frozen=True)
class EncodedEntry:
    """One enveloped entry: its bytes and how many records it holds."""

    data: bytes
    records: int


def _fixed_width(data: bytes, width: int, n: int) -> pa.Array:
    offsets = array("i", range(0, width * n + 1, width))
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _big_endian(values: array) -> bytes:  # type: ignore[type-arg]
    if not _BIG_ENDIAN:
        values.byteswap()
    return values.tobytes()


def _values(arr: pa.Array, typecode: str) -> array:  # type: ignore[type-arg]
    """The values of a non-null fixed-width array as an ``array(typecode)`` of the same width (one copy)."""
    out = array(typecode)
    buf = arr.buffers()[1]
    assert buf is not None
    width = out.itemsize
    out.frombytes(memoryview(buf)[arr.offset * width : (arr.offset + len(arr)) * width])
    return out


def check_txids(txids: pa.Array | int, n: int, last_txid: int) -> tuple[int, int]:
    """``(first, last)`` txid of ``n`` records after ``last_txid``.

    Raises:
        TransactionIdOutOfOrderError: a txid is negative, ``MAX_TXID`` or more, below ``last_txid``
        or below the one before it. InvalidArgumentError: a null txid or a non-integral column.
    """
    if isinstance(txids, int):
        if txids < 0 or txids >= MAX_TXID or txids < last_txid:
            raise TransactionIdOutOfOrderError(f"txid {txids} after {last_txid}", txid=txids, last_txid=last_txid)
        return txids, txids
    if not pa.types.is_integer(txids.type) or txids.null_count:
        raise InvalidArgumentError(f"txids must be non-null integers, got {txids.type} with {txids.null_count} nulls")
    first, low, high, last = txids[0].as_py(), pc.min(txids).as_py(), pc.max(txids).as_py(), txids[n - 1].as_py()
    if low < 0 or high >= MAX_TXID:
        raise TransactionIdOutOfOrderError(f"txid out of range [0, {MAX_TXID}): {low}..{high}", txid=low)
    if first < last_txid:
        raise TransactionIdOutOfOrderError(f"txid {first} after {last_txid}", txid=first, last_txid=last_txid)
    drops = pc.less(txids.slice(1), txids.slice(0, n - 1)) if n > 1 else None
    if drops is not None and pc.any(drops).as_py():
        i = pc.index(drops, True).as_py()
        bad, before = txids[i + 1].as_py(), txids[i].as_py()
        raise TransactionIdOutOfOrderError(f"txid {bad} after {before}", txid=bad, last_txid=before)
    return first, last


def encode_entries(
    values: pa.Array,
    txids: pa.Array | int,
    first_position: int,
    max_entry_bytes: int,
    codec: int = CompressionCodec.NONE,
) -> Iterator[EncodedEntry]:
    """Enveloped entries of user records with payloads ``values`` (non-null binary), txids ``txids``
    (an int64 column or one txid for all; not checked here, see :func:`check_txids`) and positions
    ``first_position, first_position + 1, ...``; an entry holds records while their uncompressed size
    stays within ``max_entry_bytes`` (always at least one); with ``codec`` LZ4 each entry's records
    are stored as one LZ4 block (DistributedLog's ``compressionType=lz4``).

    Raises:
        InvalidArgumentError: null or non-binary values, a bad position, an unknown codec.
        LogRecordTooLongError: a record over ``MAX_LOGRECORD_SIZE``.
    """
    lz4_entries = _codec(codec) is CompressionCodec.LZ4
    n = len(values)
    if n == 0:
        return
    if values.null_count:
        raise InvalidArgumentError("record payloads must not be null")
    if pa.types.is_large_binary(values.type) or pa.types.is_string(values.type):
        values = values.cast(pa.binary())
    if not pa.types.is_binary(values.type):
        raise InvalidArgumentError(f"record payloads must be binary, got {values.type}")
    if first_position < 1 or first_position + n - 1 > _INT32_MAX:
        raise InvalidArgumentError(f"positions {first_position}..{first_position + n - 1} out of range")
    lengths = pc.binary_length(values)
    longest = pc.max(lengths).as_py()
    if longest + RECORD_HEADER_SIZE > MAX_LOGRECORD_SIZE:
        raise LogRecordTooLongError(
            f"log record of size {longest + RECORD_HEADER_SIZE} written when only {MAX_LOGRECORD_SIZE} is allowed"
        )
    meta = _big_endian(array("q", range(first_position << 16, (first_position + n) << 16, 1 << 16)))
    if isinstance(txids, int):
        tx = txids.to_bytes(8, "big", signed=True) * n
    else:
        tx = _big_endian(_values(txids.cast(pa.int64()), "q"))
    sizes = _big_endian(_values(lengths, "i"))
    records = pc.binary_join_element_wise(
        _fixed_width(meta, 8, n), _fixed_width(tx, 8, n), _fixed_width(sizes, 4, n), values, pa.scalar(b"", pa.binary())
    )
    offsets = array("i")
    offset_buf, data_buf = records.buffers()[1], records.buffers()[2]
    assert offset_buf is not None and data_buf is not None
    offsets.frombytes(memoryview(offset_buf)[: (n + 1) * 4])
    data = memoryview(data_buf)
    budget = max_entry_bytes - HEADER_LENGTH
    start = 0
    while start < n:
        end = max(start + 1, bisect_right(offsets, offsets[start] + budget, start + 1, n + 1) - 1)
        size = offsets[end] - offsets[start]
        body = data[offsets[start] : offsets[end]]
        if lz4_entries:  # size > 0: a record is at least its 20-byte header
            stored: bytes = lz4.block.compress(body, store_size=False)
            head = _ENVELOPE.pack(VERSION_ONE, int(CompressionCodec.LZ4) & CODEC_MASK, size, len(stored))
            yield EncodedEntry(head + stored, end - start)
        else:
            yield EncodedEntry(_ENVELOPE.pack(VERSION_ONE, 0, size, size) + body, end - start)
        start = end
