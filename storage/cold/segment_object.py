"""The cold object of one offloaded log segment: its entries, an index of their offsets, and a description.

The entries are the segment's ledger entries exactly as the segment store returns them (DistributedLog's
enveloped entries, :mod:`storage.formats.entry`), so every reader decodes a cold entry as a hot one. Layout
(integers big-endian)::

    offset            size       field
    0                 D          data: entry 0, entry 1, ... back to back
    D                 16 * N     index: per entry  u64 offset | u32 length | u32 CRC32C of the entry's bytes
    D + 16N           M          description: UTF-8 JSON {"format": 1, "log", "lssn", "ledger_id", "entries",
                                 "segment": the segment's metadata as stored (DistributedLog's v5 string)}
    D + 16N + M       40         trailer: magic "DLCOLD01" (8) | u64 index offset D | u32 entry count N |
                                 u64 description offset | u32 description length M |
                                 u32 CRC32C of index + description | u32 CRC32C of the trailer's first 36 bytes

A reader that starts mid-segment reads the object's tail once (up to :data:`TAIL_READ` bytes: the trailer, and in
all but very large segments the index and description too; a second range read only when they do not fit), then
only the byte range of the entries it wants (one range read per batch of up to :data:`READ_CHUNK` bytes).
Each entry's CRC32C is checked before it is returned: a damaged object raises
:class:`~storage.errors.CorruptedEntryError` at the damaged entry (a damaged trailer or index at the first read),
never wrong data. The SHA-256 of the whole object is recorded with the offload (checked when it is written).
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import crc32c as _crc32c_mod

from storage.cold.base import ColdStore, RangeReader
from storage.errors import CorruptedEntryError, InvalidArgumentError

__all__ = ["MAGIC", "READ_CHUNK", "ColdSegment", "SegmentObjectWriter"]

MAGIC = b"DLCOLD01"
FORMAT = 1
_TRAILER = struct.Struct(">8sQIQII")  # magic, index offset, entry count, description offset, description length, crc
_TRAILER_SIZE = _TRAILER.size + 4  # + the trailer's own CRC
_INDEX = struct.Struct(">QII")
#: Largest range read a cold reader issues for a run of entries.
READ_CHUNK = 8 * 1024 * 1024
#: How much of an object's end a reader fetches first: the trailer and, for up to ~65,000 entries, the index and
#: description in the same request (on S3 every round trip counts: trailer, then index, one after the other, cost
#: ~65 ms per segment on radosgw here; one speculative tail read saves one of them).
TAIL_READ = 1024 * 1024


def _crc(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    return int(_crc32c_mod.crc32c(data, value, 0))


class SegmentObjectWriter:
    """Builds a segment object from a stream of entries: :meth:`chunks` yields the bytes to upload."""

    def __init__(self, *, log: str, lssn: int, ledger_id: int, segment_metadata: bytes) -> None:
        self._desc = {
            "format": FORMAT,
            "log": log,
            "lssn": lssn,
            "ledger_id": ledger_id,
            "segment": segment_metadata.decode("utf-8", "replace"),
        }
        self.entries = 0
        self.data_bytes = 0

    def chunks(self, entries: Iterable[tuple[int, bytes | memoryview]]) -> Iterator[bytes | memoryview]:
        """The object's bytes for ``entries`` (``(entry_id, data)`` with ids 0, 1, 2, ... in order).

        Raises:
            InvalidArgumentError: entry ids are not 0, 1, 2, ...
        """
        index = bytearray()
        offset = 0
        for expected, (entry_id, data) in enumerate(entries):
            if entry_id != expected:
                raise InvalidArgumentError(f"segment object: entry {entry_id} where {expected} was expected")
            index += _INDEX.pack(offset, len(data), _crc(data))
            offset += len(data)
            yield data
        self.entries = len(index) // _INDEX.size
        self.data_bytes = offset
        desc = json.dumps({**self._desc, "entries": self.entries}, sort_keys=True).encode()
        yield bytes(index)
        yield desc
        head = _TRAILER.pack(MAGIC, offset, self.entries, offset + len(index), len(desc), _crc(desc, _crc(index)))
        yield head + struct.pack(">I", _crc(head))


@dataclass(frozen=True)
class _Index:
    offsets: list[int]
    lengths: list[int]
    crcs: list[int]
    description: dict[str, object]


class ColdSegment:
    """Range reads of the entries of one segment object (``key`` in ``store``). Thread-safe; opened lazily."""

    def __init__(self, store: ColdStore, key: str, *, ledger_id: int) -> None:
        self.store = store
        self.key = key
        self.ledger_id = ledger_id
        self._lock = threading.Lock()
        self._ranges: RangeReader | None = None
        self._index: _Index | None = None

    def _corrupt(self, what: str) -> CorruptedEntryError:
        return CorruptedEntryError(f"cold copy of ledger {self.ledger_id} ({self.key} in {self.store.uri}): {what}")

    def _open(self) -> tuple[RangeReader, _Index]:
        with self._lock:
            if self._ranges is not None and self._index is not None:
                return self._ranges, self._index
            ranges = self.store.open_ranges(self.key)
            try:
                index = self._read_index(ranges)
            except BaseException:
                ranges.close()
                raise
            self._ranges, self._index = ranges, index
            return ranges, index

    def _read_index(self, ranges: RangeReader) -> _Index:
        size = ranges.size
        if size < _TRAILER_SIZE:
            raise self._corrupt(f"object of {size} bytes is too short for a segment object")
        tail_len = min(size, TAIL_READ)
        tail = ranges.read(size - tail_len, tail_len)
        if len(tail) != tail_len:
            raise self._corrupt(f"short read of the object's last {tail_len} bytes")
        raw = tail[tail_len - _TRAILER_SIZE :]
        head, (crc,) = raw[: _TRAILER.size], struct.unpack_from(">I", raw, _TRAILER.size)
        if _crc(head) != crc:
            raise self._corrupt("trailer checksum mismatch")
        magic, index_off, count, desc_off, desc_len, meta_crc = _TRAILER.unpack(head)
        if magic != MAGIC or desc_off != index_off + count * _INDEX.size or desc_off + desc_len + _TRAILER_SIZE != size:
            raise self._corrupt("malformed trailer")
        tail_start = size - tail_len
        if index_off >= tail_start:  # the index and description came with the tail
            meta = tail[index_off - tail_start : desc_off + desc_len - tail_start]
        else:
            meta = ranges.read(index_off, desc_off + desc_len - index_off)
        if len(meta) != desc_off + desc_len - index_off or _crc(meta) != meta_crc:
            raise self._corrupt("index checksum mismatch")
        offsets, lengths, crcs = [], [], []
        for off, length, c in _INDEX.iter_unpack(meta[: count * _INDEX.size]):
            offsets.append(off)
            lengths.append(length)
            crcs.append(c)
        try:
            desc = json.loads(meta[count * _INDEX.size :].decode())
        except ValueError:
            raise self._corrupt("unreadable description") from None
        if not isinstance(desc, dict):
            raise self._corrupt("unreadable description")
        return _Index(offsets, lengths, crcs, desc)

    @property
    def last_entry_id(self) -> int:
        """Id of the last entry (``-1`` for an empty segment). Raises CorruptedEntryError, ColdStoreError."""
        return len(self._open()[1].offsets) - 1

    @property
    def data_bytes(self) -> int:
        """Bytes of entry data. Raises CorruptedEntryError, ColdStoreError."""
        index = self._open()[1]
        return sum(index.lengths)

    @property
    def description(self) -> dict[str, object]:
        """The object's description (log, lssn, ledger id, segment metadata). Raises as :attr:`last_entry_id`."""
        return dict(self._open()[1].description)

    def entries(self, first: int, last: int) -> Iterator[tuple[int, memoryview]]:
        """``(entry_id, data)`` for ``first..last`` inclusive, each checked against its CRC32C.

        Raises:
            InvalidArgumentError: the range is outside the segment.
            CorruptedEntryError: at the first entry whose bytes do not match (or a damaged index).
            ColdStoreError: a read failed (retriable for an outage).
        """
        ranges, index = self._open()
        n = len(index.offsets)
        if first < 0 or last >= n or first > last + 1:
            raise InvalidArgumentError(
                f"entries [{first}, {last}] of ledger {self.ledger_id} are outside its cold copy ({n} entries)"
            )
        e = first
        while e <= last:
            # one range read for a run of entries of up to READ_CHUNK bytes (at least one entry)
            start = index.offsets[e]
            end_e = e
            while end_e + 1 <= last and index.offsets[end_e + 1] + index.lengths[end_e + 1] - start <= READ_CHUNK:
                end_e += 1
            stop = index.offsets[end_e] + index.lengths[end_e]
            buf = memoryview(ranges.read(start, stop - start))
            if len(buf) != stop - start:
                raise self._corrupt(f"object ends inside entry {end_e} (read {len(buf)} of {stop - start} bytes)")
            for i in range(e, end_e + 1):
                lo = index.offsets[i] - start
                data = buf[lo : lo + index.lengths[i]]
                if _crc(data) != index.crcs[i]:
                    raise self._corrupt(f"entry {i} failed its checksum")
                yield i, data
            e = end_e + 1

    def close(self) -> None:
        with self._lock:
            if self._ranges is not None:
                self._ranges.close()
            self._ranges, self._index = None, None
