"""Records of log segment entries as Arrow record batches, without a Python object per record.

The columnar read path of the log (:meth:`storage.LogManager.read_arrow`, the Spark source's
partitions): :func:`entries_to_batches` turns ``(entry_id, data)`` pairs of one segment into
record batches of :data:`RECORD_SCHEMA`, one DLSN struct, txid, sequence id and value per user
record (control and end-of-stream records are not rows). It is the inverse of
:mod:`storage.formats.arrow_entries` (Arrow columns to entries) and gives the same rows as decoding every
entry with :func:`storage.formats.entry.decode_entry_columns`.

:class:`RecordColumns` accumulates rows entry by entry as numpy arrays. An uncompressed enveloped
entry that holds only user records (flags 0: no control, end-of-stream or record-set records) is
read in place: its 20-byte record headers (``metadata, txid, length``, big-endian) are located and
then decoded by numpy all at once. When every record has the first one's length the headers are one
strided view (no loop at all: the length fields are checked to chain exactly); otherwise one short
Python step per record follows the length fields to find them. Any other entry (LZ4, record sets,
control or end-of-stream records, malformed data, a boundary entry cut by a DLSN) goes through
:func:`storage.formats.entry.decode_entry_columns`, which also raises the errors.

The ``value`` column is built once per batch: the payloads are copied straight from the entry
buffers into one buffer (a strided 2-D copy for uniform entries; for others Arrow's ``take`` over a
binary array laid on the entry whose elements alternate headers and payloads).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from storage.formats.entry import HEADER_LENGTH, VERSION_ONE, EntryColumns, decode_entry_columns
from storage.formats.record import CONTROL, END_OF_STREAM, FLAGS_MASK, RECORD_HEADER_SIZE

__all__ = ["BATCH_ROWS", "DLSN_TYPE", "MAX_BATCH_BYTES", "RECORD_SCHEMA", "RecordColumns", "entries_to_batches"]

#: The DLSN of a row: a struct of its three parts (the field names of the Spark source's schema).
DLSN_TYPE = pa.struct([("lssn", pa.int64()), ("entry_id", pa.int64()), ("slot_id", pa.int64())])
_DLSN_FIELDS = list(DLSN_TYPE)

#: The schema of the batches of the columnar read path: one row per user record.
RECORD_SCHEMA = pa.schema(
    [
        pa.field("dlsn", DLSN_TYPE, nullable=False),
        pa.field("txid", pa.int64(), nullable=False),
        pa.field("sequence_id", pa.int64(), nullable=False),
        pa.field("value", pa.binary()),
    ]
)

#: Rows per batch (about: whole entries are never split across batches).
BATCH_ROWS = 10_000
#: A batch is cut once its buffers hold this many bytes (offsets are 32-bit).
MAX_BATCH_BYTES = 64 << 20

_NOT_USER = CONTROL | END_OF_STREAM
_ENVELOPE = struct.Struct(">Biii")
_LEN = struct.Struct(">i")
#: A record header: metadata (flags | position << 16), txid, payload length; big-endian, packed.
_HEADER = np.dtype([("meta", ">i8"), ("txid", ">i8"), ("len", ">i4")])
_CODEC_MASK = 0x3
_POS_MASK = 0xFFFFFFFF
_INT32_MAX = (1 << 31) - 1

#: Built on first use: ``pa.array`` imports pandas when it is installed (0.4 s), which a process that
#: never reads columns (the CLI, a Spark worker that only plans) should not pay at import.
_odd_cache: pa.Array | None = None


def _odd(n: int) -> pa.Array:
    """``[1, 3, ..., 2 n - 1]`` as int32 (a slice of a cached array)."""
    global _odd_cache
    if _odd_cache is None or len(_odd_cache) < n:
        size = max(n, 2 * (0 if _odd_cache is None else len(_odd_cache)), 1024)
        _odd_cache = pa.array(range(1, 2 * size, 2), pa.int32())
    return _odd_cache.slice(0, n)


def _position(metadata: int) -> int:
    p = (metadata >> 16) & _POS_MASK
    return p - (1 << 32) if p > _INT32_MAX else p


class _Values(NamedTuple):
    """Where the payloads of one entry's rows are: ``data[starts[i] : starts[i] + lens[i]]``."""

    data: bytes | memoryview
    starts: npt.NDArray[np.int64]
    lens: npt.NDArray[np.int64]
    #: > 0: uniform records, payload ``i`` at ``starts[0] + i * stride``; 0: payloads back to back
    #: (decoded rows); -1: scattered (plain entry of records of different sizes)
    stride: int


#: Record start offsets in an entry, their headers (``_HEADER`` records) and the stride (> 0: uniform).
_Headers = tuple[npt.NDArray[np.int64], npt.NDArray[np.void], int]


def _concat(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    if not parts:
        return np.empty(0, np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _uniform_headers(data: bytes | memoryview, end: int) -> _Headers | None:
    """The record headers of a plain entry whose records all have the payload length of the first, read
    as one strided view (no loop); None when they do not."""
    (length,) = _LEN.unpack_from(data, HEADER_LENGTH + 16)
    if length < 0:
        return None
    stride = RECORD_HEADER_SIZE + length
    count, rest = divmod(end - HEADER_LENGTH, stride)
    if rest:
        return None
    headers = np.ndarray((count,), _HEADER, buffer=data, offset=HEADER_LENGTH, strides=(stride,))
    if not (headers["len"] == length).all():
        return None  # the chain of lengths leaves the predicted offsets somewhere
    return np.arange(HEADER_LENGTH, end, stride, dtype=np.int64), headers, stride


def _scanned_headers(data: bytes | memoryview, end: int) -> _Headers | None:
    """The record headers of a plain entry found by following the length fields (one small step per
    record), then gathered at once; None for a malformed chain."""
    starts = array("q")
    add = starts.append
    unpack = _LEN.unpack_from
    off = HEADER_LENGTH
    try:
        while off < end:
            add(off)
            (length,) = unpack(data, off + 16)
            if length < 0:
                return None
            off += RECORD_HEADER_SIZE + length
    except struct.error:  # a truncated header
        return None
    if off != end:
        return None
    at = np.frombuffer(starts, np.int64)
    raw = np.frombuffer(data, np.uint8)
    windows = np.lib.stride_tricks.as_strided(raw, (end - RECORD_HEADER_SIZE + 1, RECORD_HEADER_SIZE), (1, 1))
    headers = windows[at].view(_HEADER).reshape(-1)  # row i of windows: the 20 bytes at offset i
    return at, headers, -1


def _values_column(parts: list[_Values], n: int) -> pa.Array:
    """The binary column of the rows of ``parts``: their payloads copied once into one buffer."""
    lens = _concat([p.lens for p in parts])
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    at = 0
    for p in parts:
        size = int(p.lens.sum())
        if size == 0:
            continue
        if p.stride > 0:
            count = len(p.lens)
            width = size // count
            block = np.ndarray((count, width), np.uint8, buffer=p.data, offset=int(p.starts[0]), strides=(p.stride, 1))
            out[at : at + size].reshape(count, width)[...] = block
        elif p.stride == 0:
            out[at : at + size] = np.frombuffer(p.data, np.uint8, size, int(p.starts[0]) if len(p.starts) else 0)
        else:
            # gaps (envelope and record headers) and payloads alternate over the entry; take the payloads
            bounds = np.empty(2 * len(p.lens) + 1, np.int32)
            bounds[0] = 0
            bounds[1::2] = p.starts
            bounds[2::2] = p.starts + p.lens
            laid = pa.BinaryArray.from_buffers(
                pa.binary(), 2 * len(p.lens), [None, pa.py_buffer(bounds), pa.py_buffer(p.data)]
            )
            taken = laid.take(_odd(len(p.lens)))
            out[at : at + size] = np.frombuffer(taken.buffers()[2], np.uint8, size)
        at += size
    return pa.BinaryArray.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out)]
    )


class RecordColumns:
    """The user records of one log segment, accumulated entry by entry until :meth:`batch` is called."""

    __slots__ = ("_entries", "_lssn", "_metas", "_nbytes", "_rows", "_seq_base", "_slots", "_txids", "_values")

    def __init__(self, lssn: int, seq_base: int) -> None:
        """``seq_base``: the segment's start sequence id - 1 (a record's sequence id is ``seq_base +
        position``)."""
        self._lssn = lssn
        self._seq_base = seq_base
        self._reset()

    def _reset(self) -> None:
        self._rows = 0
        self._nbytes = 0  # payload bytes of the rows so far
        self._metas: list[np.ndarray] = []  # the record metadata long of each row (position in bits 16..47)
        self._txids: list[np.ndarray] = []
        self._entries: list[np.ndarray] = []
        self._slots: list[np.ndarray] = []
        self._values: list[_Values] = []

    @property
    def num_rows(self) -> int:
        return self._rows

    @property
    def num_bytes(self) -> int:
        return self._nbytes

    def add_plain_entry(self, entry_id: int, data: bytes | memoryview, lo: int, hi: int) -> int | None:
        """Add every record of an uncompressed enveloped entry of user records only, when all
        their positions are within ``lo..hi``; return the position of its last record.

        Returns None, having added nothing, for any other entry (compressed, malformed, with a
        control, end-of-stream or record-set record, empty, or partly outside ``lo..hi``): the
        caller decodes it and uses :meth:`add_rows`.
        """
        end = len(data)
        if end < HEADER_LENGTH + RECORD_HEADER_SIZE:
            return None
        version, codec, original_len, stored_len = _ENVELOPE.unpack_from(data, 0)
        n = end - HEADER_LENGTH
        if version != VERSION_ONE or codec & _CODEC_MASK or original_len != n or stored_len != n:
            return None
        heads = _uniform_headers(data, end)
        if heads is None:
            heads = _scanned_headers(data, end)
            if heads is None:
                return None
        starts, headers, width = heads
        metas = headers["meta"]
        if (metas & FLAGS_MASK).any():
            return None
        lens = headers["len"].astype(np.int64)
        first, last = _position(int(metas[0])), _position(int(metas[-1]))
        if first < lo or last > hi:
            return None
        count = len(lens)
        self._metas.append(metas.astype(np.int64))
        self._txids.append(headers["txid"].astype(np.int64))
        self._entries.append(np.full(count, entry_id, np.int64))
        self._slots.append(np.arange(count, dtype=np.int64))
        self._values.append(_Values(data, starts + RECORD_HEADER_SIZE, lens, width))
        self._rows += count
        self._nbytes += end
        return last

    def add_rows(self, entry_id: int, cols: EntryColumns, lo: int, hi: int) -> bool:
        """Add the user records of a decoded entry whose positions are within ``lo..hi`` (the rows
        ``read`` returns); True when a position past ``hi`` was seen (nothing after it is read)."""
        pos = cols.positions
        flags = cols.flags
        done = False
        if pos[0] >= lo and pos[-1] <= hi and not any(flags):
            rows: Sequence[int] = range(len(pos))
        else:
            keep = []
            for i, p in enumerate(pos):
                if p > hi:
                    done = True
                    break
                if p < lo or flags[i] & _NOT_USER:
                    continue
                keep.append(i)
            rows = keep
        if not rows:
            return done
        payloads = [cols.payloads[i] for i in rows]
        self._metas.append(np.array([(pos[i] & _POS_MASK) << 16 for i in rows], np.int64))
        self._txids.append(np.array([cols.txids[i] for i in rows], np.int64))
        self._entries.append(np.full(len(rows), entry_id, np.int64))
        self._slots.append(np.array([cols.slots[i] for i in rows], np.int64))
        lens = np.array([len(p) for p in payloads], np.int64)
        joined = b"".join(payloads)
        starts = np.concatenate(([0], np.cumsum(lens)[:-1])) if len(lens) else lens
        self._values.append(_Values(joined, starts, lens, 0))
        self._rows += len(rows)
        self._nbytes += len(joined)
        return done

    def batch(self) -> pa.RecordBatch:
        """The accumulated rows as a record batch of :data:`RECORD_SCHEMA`; starts a new batch."""
        n = self._rows
        values = _values_column(self._values, n)
        metas = _concat(self._metas)
        unsigned = (metas >> 16) & _POS_MASK
        positions = unsigned - ((unsigned >> 31) << 32)
        seq = positions + self._seq_base
        dlsn = pa.StructArray.from_arrays(
            [
                pa.repeat(pa.scalar(self._lssn, pa.int64()), n),
                pa.array(_concat(self._entries)),
                pa.array(_concat(self._slots)),
            ],
            fields=_DLSN_FIELDS,
        )
        txids = pa.array(_concat(self._txids))
        self._reset()
        return pa.RecordBatch.from_arrays([dlsn, txids, pa.array(seq), values], schema=RECORD_SCHEMA)


def _slots_below(cols: EntryColumns, end_slot: int) -> EntryColumns:
    """The rows of ``cols`` with ``slot < end_slot``."""
    k = 0
    while k < len(cols.slots) and cols.slots[k] < end_slot:
        k += 1
    return EntryColumns(cols.txids[:k], cols.payloads[:k], cols.slots[:k], cols.positions[:k], cols.flags[:k])


def entries_to_batches(
    entries: Iterable[tuple[int, bytes | memoryview]],
    *,
    lssn: int,
    start_sequence_id: int,
    envelope: bool,
    first_pos: int = -(1 << 31),
    last_pos: int = _INT32_MAX,
    first_slot: tuple[int, int] | None = None,
    end_slot: tuple[int, int] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The user records of ``entries`` (``(entry_id, data)`` of segment ``lssn``, in order) as record
    batches of :data:`RECORD_SCHEMA`, of about ``batch_rows`` rows (whole entries; fewer once a batch
    holds :data:`MAX_BATCH_BYTES`).

    Rows are limited to positions ``first_pos..last_pos`` (reading stops after the first entry whose
    last record is at or past ``last_pos``), and by DLSN: ``first_slot = (entry_id, slot)`` drops the
    records of that entry below ``slot``; ``end_slot = (entry_id, slot)`` keeps only the records of that
    entry below ``slot`` and stops there.

    Raises:
        InvalidEnvelopedEntryError, CorruptedEntryError: a malformed entry.
    """
    lo, hi = first_pos, last_pos
    rows = RecordColumns(lssn, start_sequence_id - 1)
    for entry_id, data in entries:
        cut_start = first_slot is not None and entry_id == first_slot[0] and first_slot[1] > 0
        cut_end = end_slot is not None and entry_id == end_slot[0]
        last = None
        if envelope and not cut_start and not cut_end:
            last = rows.add_plain_entry(entry_id, data, lo, hi)
        if last is None:
            min_slot = first_slot[1] if cut_start and first_slot is not None else 0
            cols = decode_entry_columns(data, envelope=envelope, include_control=False, min_slot=min_slot)
            if cut_end and end_slot is not None:
                cols = _slots_below(cols, end_slot[1])
            if cols.positions:
                done = rows.add_rows(entry_id, cols, lo, hi)
                last = cols.positions[-1]
            else:
                done = False
        else:
            done = False
        if rows.num_rows >= batch_rows or rows.num_bytes >= MAX_BATCH_BYTES:
            yield rows.batch()
        if done or cut_end or (last is not None and last >= hi):
            break
    if rows.num_rows:
        yield rows.batch()
