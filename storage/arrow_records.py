"""Records of log segment entries as Arrow record batches, without a Python object per record.

The columnar read path of the log (:meth:`storage.LogManager.read_arrow`, the Spark source's
partitions): :func:`entries_to_batches` turns ``(entry_id, data)`` pairs of one segment into
record batches of :data:`RECORD_SCHEMA`, one DLSN struct, txid, sequence id and value per user
record (control and end-of-stream records are not rows). It is the inverse of
:mod:`storage.arrow_entries` (Arrow columns to entries) and gives the same rows as decoding every
entry with :func:`storage.entry.decode_entry_columns`.

:class:`RecordColumns` accumulates rows entry by entry. An uncompressed enveloped entry that holds
only user records (flags 0: no control, end-of-stream or record-set records) is scanned in place:
the loop reads each 20-byte record header once and records where the payload starts and ends, and
the payloads are later cut out of the entry bytes by Arrow (one ``take`` per batch), so no
``bytes`` object is made per record. Any other entry (LZ4, record sets, control or end-of-stream
records, malformed data, a boundary entry cut by a DLSN) goes through
:func:`storage.entry.decode_entry_columns`, which also raises the errors.

How the ``value`` column is made: the batch's buffers (entries, and payloads joined for the
decoded path) are joined into one buffer ``B``, and an Arrow binary array of ``2 n`` elements is
laid over it whose elements alternate "gap" and "payload": element ``2 i`` is everything between
payload ``i - 1`` and payload ``i`` (envelope and record headers; empty between decoded payloads),
element ``2 i + 1`` is payload ``i``. Taking the odd elements gives the column.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator
from itertools import repeat

import pyarrow as pa
import pyarrow.compute as pc

from storage.entry import HEADER_LENGTH, VERSION_ONE, EntryColumns, decode_entry_columns
from storage.record import CONTROL, END_OF_STREAM, FLAGS_MASK, RECORD_HEADER_SIZE

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
_RECORD = struct.Struct(">qqi")
_CODEC_MASK = 0x3
_POS_MASK = 0xFFFFFFFF
_INT32_MAX = (1 << 31) - 1

_odd_cache: pa.Array = pa.array([], pa.int32())


def _odd(n: int) -> pa.Array:
    """``[1, 3, ..., 2 n - 1]`` as int32 (a slice of a cached array)."""
    global _odd_cache
    if len(_odd_cache) < n:
        size = max(n, 2 * len(_odd_cache), 1024)
        _odd_cache = pa.array(range(1, 2 * size, 2), pa.int32())
    return _odd_cache.slice(0, n)


def _position(metadata: int) -> int:
    p = (metadata >> 16) & _POS_MASK
    return p - (1 << 32) if p > _INT32_MAX else p


class RecordColumns:
    """The user records of one log segment, accumulated entry by entry until :meth:`batch` is called."""

    __slots__ = (
        "_chunks",
        "_entries",
        "_lssn",
        "_metas",
        "_nbytes",
        "_offsets",
        "_seq_base",
        "_slots",
        "_txids",
    )

    def __init__(self, lssn: int, seq_base: int) -> None:
        """``seq_base``: the segment's start sequence id - 1 (a record's sequence id is ``seq_base +
        position``)."""
        self._lssn = lssn
        self._seq_base = seq_base
        self._reset()

    def _reset(self) -> None:
        self._chunks: list[bytes] = []
        self._nbytes = 0  # total length of _chunks
        self._offsets = array("i", [0])  # 2 n + 1 boundaries in the joined chunks (see the module doc)
        self._metas = array("q")  # the record metadata long of each row (its position is in bits 16..47)
        self._txids = array("q")
        self._entries = array("q")
        self._slots = array("q")

    @property
    def num_rows(self) -> int:
        return len(self._txids)

    @property
    def num_bytes(self) -> int:
        return self._nbytes

    def add_plain_entry(self, entry_id: int, data: bytes, lo: int, hi: int) -> int | None:
        """Add every record of an uncompressed enveloped entry of user records only, when all
        their positions are within ``lo..hi``; return the position of its last record.

        Returns None, having added nothing, for any other entry (compressed, malformed, with a
        control, end-of-stream or record-set record, empty, or partly outside ``lo..hi``): the
        caller decodes it and uses :meth:`add_rows`.
        """
        end = len(data)
        if end < HEADER_LENGTH:
            return None
        version, codec, original_len, stored_len = _ENVELOPE.unpack_from(data, 0)
        n = end - HEADER_LENGTH
        if version != VERSION_ONE or codec & _CODEC_MASK or original_len != n or stored_len != n or n == 0:
            return None
        offsets = self._offsets
        metas = self._metas
        txids = self._txids
        first = len(txids)
        add_offset = offsets.append
        add_meta = metas.append
        add_txid = txids.append
        unpack = _RECORD.unpack_from
        base = self._nbytes
        off = HEADER_LENGTH
        try:
            while off < end:
                metadata, txid, length = unpack(data, off)
                if metadata & FLAGS_MASK or length < 0:
                    break
                off += RECORD_HEADER_SIZE
                add_offset(base + off)
                off += length
                add_offset(base + off)
                add_meta(metadata)
                add_txid(txid)
        except struct.error:  # a truncated header
            off = -1
        if off == end:
            last = _position(metas[-1])
            if _position(metas[first]) >= lo and last <= hi:
                count = len(txids) - first
                self._entries.extend(repeat(entry_id, count))
                self._slots.extend(range(count))
                self._chunks.append(data)
                self._nbytes = base + end
                return last
        del offsets[2 * first + 1 :]
        del metas[first:]
        del txids[first:]
        return None

    def add_rows(self, entry_id: int, cols: EntryColumns, lo: int, hi: int) -> bool:
        """Add the user records of a decoded entry whose positions are within ``lo..hi`` (the rows
        ``read`` returns); True when a position past ``hi`` was seen (nothing after it is read)."""
        pos = cols.positions
        flags = cols.flags
        if pos[0] >= lo and pos[-1] <= hi and not any(flags):
            rows = range(len(pos))
            done = False
        else:
            keep = []
            done = False
            for i, p in enumerate(pos):
                if p > hi:
                    done = True
                    break
                if p < lo or flags[i] & _NOT_USER:
                    continue
                keep.append(i)
            rows = keep  # type: ignore[assignment]
        payloads = cols.payloads
        slots = cols.slots
        txids = cols.txids
        add_offset = self._offsets.append
        add_meta = self._metas.append
        add_txid = self._txids.append
        add_slot = self._slots.append
        at = self._nbytes
        parts = []
        for i in rows:
            payload = payloads[i]
            parts.append(payload)
            add_offset(at)  # an empty gap
            at += len(payload)
            add_offset(at)
            add_meta((pos[i] & _POS_MASK) << 16)
            add_txid(txids[i])
            add_slot(slots[i])
        self._entries.extend(repeat(entry_id, len(rows)))
        if parts:
            self._chunks.append(b"".join(parts))
            self._nbytes = at
        return done

    def batch(self) -> pa.RecordBatch:
        """The accumulated rows as a record batch of :data:`RECORD_SCHEMA`; starts a new batch."""
        n = len(self._txids)
        data = pa.py_buffer(b"".join(self._chunks))
        laid = pa.BinaryArray.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(self._offsets), data])
        taken = laid.take(_odd(n))
        _, value_offsets, value_data = taken.buffers()
        values = pa.BinaryArray.from_buffers(pa.binary(), n, [None, value_offsets, value_data])
        metas = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self._metas)])
        unsigned = pc.bit_wise_and(pc.shift_right(metas, 16), _POS_MASK)
        positions = pc.subtract(unsigned, pc.shift_left(pc.shift_right(unsigned, 31), 32))
        seq = pc.add(positions, pa.scalar(self._seq_base, pa.int64()))
        dlsn = pa.StructArray.from_arrays(
            [
                pa.repeat(pa.scalar(self._lssn, pa.int64()), n),
                pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self._entries)]),
                pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self._slots)]),
            ],
            fields=_DLSN_FIELDS,
        )
        txids = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self._txids)])
        self._reset()
        return pa.RecordBatch.from_arrays([dlsn, txids, seq, values], schema=RECORD_SCHEMA)


def _slots_below(cols: EntryColumns, end_slot: int) -> EntryColumns:
    """The rows of ``cols`` with ``slot < end_slot``."""
    k = 0
    while k < len(cols.slots) and cols.slots[k] < end_slot:
        k += 1
    return EntryColumns(cols.txids[:k], cols.payloads[:k], cols.slots[:k], cols.positions[:k], cols.flags[:k])


def entries_to_batches(
    entries: Iterable[tuple[int, bytes]],
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
        if envelope and not cut_start and not cut_end and type(data) is bytes:
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
