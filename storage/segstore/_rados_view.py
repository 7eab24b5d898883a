"""What one process knows of one RADOS ledger for reading: head record, frame offsets, LAC.

Views are cached by the store. An open ledger is scanned incrementally: only bytes of its data
objects past the last accepted frame are read and parsed (one ``stat`` tells whether the last
object grew). A closed ledger is loaded from the offset index in its head object; a fenced one
(no index) by scanning up to the data ends recorded in its head.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from collections.abc import Iterator
from typing import Any

from storage.errors import CorruptedEntryError, LedgerNotFoundError
from storage.segstore import _ledgerfile as lf
from storage.segstore._rados_io import CLOSED, OPEN, Head, errno_of, head_oid, part_oid, translate
from storage.segstore.base import NO_ENTRY, LedgerInfo


def read_head(ioctx: Any, rados_mod: Any, ledger_id: int) -> Head:
    """The head record of a ledger.

    Raises:
        LedgerNotFoundError: no such ledger. SegmentStoreError: I/O failure or a damaged record.
    """
    try:
        with rados_mod.ReadOpCtx() as op:
            it, _ = ioctx.get_omap_vals(op, "", "", 64)
            ioctx.operate_read_op(op, head_oid(ledger_id))
            omap = {k: bytes(v) for k, v in it}
    except rados_mod.ObjectNotFound:
        raise LedgerNotFoundError(f"ledger {ledger_id} does not exist") from None
    except rados_mod.Error as exc:
        raise translate(errno_of(exc), f"cannot read the head of ledger {ledger_id}", cause=exc) from None
    if not omap:
        raise LedgerNotFoundError(f"ledger {ledger_id} does not exist (empty head)")
    return Head.parse(ledger_id, omap)


def object_reader(ioctx: Any, rados_mod: Any, oid: str, ledger_id: int, *, missing_ok: bool = True) -> lf.ReadAt:
    """A :data:`~storage.segstore._ledgerfile.ReadAt` over one RADOS object; a missing object
    reads as empty, or raises ``LedgerNotFoundError`` unless ``missing_ok``."""

    def read(length: int, offset: int) -> bytes:
        try:
            return bytes(ioctx.read(oid, length, offset))
        except rados_mod.ObjectNotFound:
            if not missing_ok:
                raise LedgerNotFoundError(f"ledger {ledger_id} was deleted (object {oid} is gone)") from None
            return b""
        except rados_mod.Error as exc:
            raise translate(errno_of(exc), f"cannot read ledger {ledger_id} object {oid}", cause=exc) from None

    return read


class RadosReadView:
    """Read state of one RADOS ledger (thread-safe)."""

    def __init__(self, ioctx: Any, rados_mod: Any, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        self._ioctx = ioctx
        self._rados = rados_mod
        self._lock = threading.Lock()
        self._head: Head = Head(OPEN, (0,))
        self._offsets = array("q")  # offset of every accepted frame inside its part; only grows
        self._ends: list[int] = []  # data end of each part scanned to its end
        self._scan_part = 0  # the part being scanned
        self._scan_end = 0  # end of the last accepted frame in that part
        self._lac = NO_ENTRY
        self._length = 0

    def refresh(self) -> LedgerInfo:
        """Bring the view up to date with the cluster and describe the ledger.

        Raises:
            LedgerNotFoundError: the ledger was deleted.
            SegmentStoreError: I/O failure or a damaged head.
        """
        with self._lock:
            if not self._head.sealed:
                head = read_head(self._ioctx, self._rados, self.ledger_id)
                if head.sealed:
                    self._load_sealed(head)
                else:
                    self._head = head
                    self._scan_open()
            else:  # nothing can change but deletion: one stat of the head tells
                self._size(head_oid(self.ledger_id), missing_ok=False)
            head = self._head
            if head.sealed:
                return LedgerInfo(self.ledger_id, head.state == CLOSED, head.state != CLOSED, head.last, self._length)
            return LedgerInfo(self.ledger_id, False, False, self._lac, self._length)

    def _scan_open(self) -> None:
        parts = self._head.parts
        while True:
            i = self._scan_part
            oid = part_oid(self.ledger_id, i)
            size = self._size(oid)
            if size > self._scan_end:
                self._scan(i, size, trust_tail=False)
            if i + 1 >= len(parts) or len(self._offsets) != parts[i + 1]:
                break  # the last part (or a part short of entries: what follows is unreadable)
            self._ends.append(self._scan_end)
            self._scan_part, self._scan_end = i + 1, 0
        self._length = sum(self._ends) + self._scan_end

    def _scan(self, part: int, limit: int, *, trust_tail: bool) -> None:
        read = object_reader(self._ioctx, self._rados, part_oid(self.ledger_id, part), self.ledger_id)
        scan = lf.scan_frames(read, self._scan_end, len(self._offsets), limit, trust_tail=trust_tail)
        self._offsets.extend(scan.offsets)
        self._scan_end = scan.end
        if scan.lac is not None:
            self._lac = max(self._lac, min(scan.lac, len(self._offsets) - 2))

    def _size(self, oid: str, *, missing_ok: bool = True) -> int:
        try:
            size, _ = self._ioctx.stat(oid)
            return int(size)
        except self._rados.ObjectNotFound:
            if not missing_ok:
                raise LedgerNotFoundError(f"ledger {self.ledger_id} was deleted") from None
            return 0
        except self._rados.Error as exc:
            raise translate(errno_of(exc), f"cannot stat ledger {self.ledger_id} object {oid}", cause=exc) from None

    def _load_sealed(self, head: Head) -> None:
        count = head.last + 1
        offsets = None
        if head.indexed and count > 0:
            read = object_reader(self._ioctx, self._rados, head_oid(self.ledger_id), self.ledger_id)
            offsets = lf.read_index_from(read, 0, count)
        if offsets is not None:
            self._offsets = offsets
        else:  # scan what is left up to the recorded data ends; entries not found raise when read
            if len(self._offsets) > count:
                self._offsets = self._offsets[:count]
            while self._scan_part < len(head.parts) and len(self._offsets) < count:
                i = self._scan_part
                self._scan(i, head.ends[i], trust_tail=True)
                if i + 1 < len(head.parts):
                    self._scan_part, self._scan_end = i + 1, 0
                else:
                    break
        self._ends = list(head.ends)
        self._head = head
        self._length = sum(head.ends)

    # --- entries ----------------------------------------------------------------------------------
    def iter_entries(self, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Entries ``first..last`` (the caller checked they are visible), read in large chunks
        per data object; every frame is checked against its offset, entry id and checksum."""
        with self._lock:
            offsets = self._offsets
            parts = self._head.parts
            ends = list(self._ends)
            if not self._head.sealed:
                ends.append(self._scan_end)
        return self._iterate(offsets, parts, ends, first, last)

    def _iterate(
        self, offsets: array[int], parts: tuple[int, ...], ends: list[int], first: int, last: int
    ) -> Iterator[tuple[int, bytes]]:
        lid = self.ledger_id
        n = len(offsets)

        def part_of(i: int) -> int:
            return bisect.bisect_right(parts, i) - 1

        def end_of(i: int, part: int) -> int:
            if i + 1 < n and (part + 1 >= len(parts) or i + 1 < parts[part + 1]):
                return offsets[i + 1]
            return ends[part] if part < len(ends) else offsets[i]

        eid = first
        while eid <= last:
            if eid >= n:
                raise CorruptedEntryError(f"ledger {lid} entry {eid}: frame missing or unparsable")
            part = part_of(eid)
            start = offsets[eid]
            stop = eid
            limit = start + lf.CHUNK_SIZE
            part_last = parts[part + 1] - 1 if part + 1 < len(parts) else last
            while stop < min(last, part_last) and stop + 1 < n and end_of(stop + 1, part) <= limit:
                stop += 1
            read = object_reader(self._ioctx, self._rados, part_oid(lid, part), lid, missing_ok=False)
            buf = read(end_of(stop, part) - start, start)
            for i in range(eid, stop + 1):
                payload = lf.decode_frame(buf, offsets[i] - start, end_of(i, part) - offsets[i], i)
                if payload is None:
                    raise CorruptedEntryError(f"ledger {lid} entry {i}: checksum mismatch or malformed frame")
                yield i, payload
            eid = stop + 1
