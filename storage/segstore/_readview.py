"""What one process knows of one ledger file for reading: fd, state, frame offsets, LAC.

Views are cached by the store. An open ledger is scanned incrementally (only bytes past the
last accepted frame are parsed); a sealed one is loaded from its offset index. The file
descriptor is reference-counted: the cache holds one reference and every live iterator
another, so evicting a view never closes a descriptor under a reader.
"""

from __future__ import annotations

import fcntl
import os
import threading
from array import array
from collections.abc import Callable, Iterator
from typing import TypeVar

from storage.errors import CorruptedEntryError, LedgerNotFoundError, SegmentStoreError
from storage.segstore import _ledgerfile as lf
from storage.segstore.base import NO_ENTRY, LedgerInfo

_Payload = TypeVar("_Payload", bytes, memoryview)


class ReadView:
    """Read state of one ledger (thread-safe)."""

    def __init__(self, ledger_id: int, fd: int) -> None:
        self.ledger_id = ledger_id
        self._fd = fd
        self._refs = 1
        self._ref_lock = threading.Lock()
        self._lock = threading.Lock()
        self._state = lf.STATE_OPEN
        self._last = NO_ENTRY  # last entry id once sealed
        self._data_end = 0  # end of the frames once sealed
        self._offsets = array("q")  # offsets of accepted frames; only ever grows
        self._scanned_end = lf.HEADER_SIZE  # end of the last accepted frame
        self._lac = NO_ENTRY
        # which file this view reads (a ledger restored later is another one)
        self._file: tuple[int, int] | None = None
        try:
            st = os.fstat(fd)
            self._file = (st.st_dev, st.st_ino)
        except OSError:
            pass  # refresh reports it

    # --- reference counting ---------------------------------------------------------------
    def acquire(self) -> None:
        """Take a reference on the file descriptor (it must still be open)."""
        with self._ref_lock:
            assert self._refs > 0, "view already released"
            self._refs += 1

    def release(self) -> None:
        """Drop a reference; the last one closes the file descriptor."""
        with self._ref_lock:
            self._refs -= 1
            if self._refs:
                return
        os.close(self._fd)

    # --- state ----------------------------------------------------------------------------
    def adopt(self, old: ReadView) -> None:
        """Take over what ``old`` (an evicted view of the same ledger file) had learned: its frame
        offsets, LAC and state, so the next :meth:`refresh` parses only bytes written since. Nothing is
        taken from a view of another file (the ledger was deleted and written again)."""
        if old._file is None or old._file != self._file:
            return
        with old._lock:
            state, last, data_end = old._state, old._last, old._data_end
            offsets, scanned_end, lac = array("q", old._offsets), old._scanned_end, old._lac
        with self._lock:
            self._state, self._last, self._data_end = state, last, data_end
            self._offsets, self._scanned_end, self._lac = offsets, scanned_end, lac

    def refresh(self) -> LedgerInfo:
        """Bring the view up to date with the file and describe the ledger.

        Raises:
            LedgerNotFoundError: the file was deleted.
            SegmentStoreError: I/O failure or a damaged header.
        """
        lid = self.ledger_id
        try:
            with self._lock:
                st = os.fstat(self._fd)
                if st.st_nlink == 0:
                    raise LedgerNotFoundError(f"ledger {lid} was deleted")
                if self._state == lf.STATE_OPEN:
                    header = lf.read_header(self._fd) or self._read_header_locked()
                    if header.sealed:
                        self._load_sealed(header)
                    elif st.st_size > self._scanned_end:
                        read = lf.file_reader(self._fd)
                        scan = lf.scan_frames(read, self._scanned_end, len(self._offsets), st.st_size)
                        self._offsets.extend(scan.offsets)
                        self._scanned_end = scan.end
                        if scan.lac is not None:
                            self._lac = min(scan.lac, len(self._offsets) - 2)
                if self._state != lf.STATE_OPEN:
                    return LedgerInfo(
                        lid, self._state == lf.STATE_CLOSED, self._state == lf.STATE_FENCED, self._last, self._data_end
                    )
                return LedgerInfo(lid, False, False, self._lac, st.st_size)
        except OSError as exc:
            raise SegmentStoreError(f"cannot read ledger {lid}: {exc}") from exc

    def _read_header_locked(self) -> lf.Header:
        """Re-read a header that failed its checksum under a shared flock: it may have been
        caught half-rewritten by a concurrent seal, which holds the exclusive lock."""
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            header = lf.read_header(self._fd)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        if header is None:
            raise SegmentStoreError(f"ledger {self.ledger_id}: damaged header")
        return header

    def _load_sealed(self, header: lf.Header) -> None:
        count = header.last_entry_id + 1
        if len(self._offsets) < count:
            index = lf.read_index(self._fd, header.index_offset, count) if header.index_offset else None
            if index is not None:
                self._offsets = index
            else:  # no usable index: scan what is left; entries not found raise when read
                read = lf.file_reader(self._fd)
                scan = lf.scan_frames(read, self._scanned_end, len(self._offsets), header.data_end, trust_tail=True)
                self._offsets.extend(scan.offsets)
        elif len(self._offsets) > count:
            self._offsets = self._offsets[:count]
        self._last = header.last_entry_id
        self._data_end = header.data_end
        self._state = header.state

    # --- entries --------------------------------------------------------------------------
    def iter_entries(self, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Entries ``first..last`` (the caller checked they are visible), read in large
        chunks; every frame is checked against its offset, entry id and checksum."""
        with self._lock:
            offsets = self._offsets
            tail_end = self._data_end if self._state != lf.STATE_OPEN else self._scanned_end
        return self._iterate(offsets, tail_end, first, last, lf.decode_frame)

    def iter_entry_views(self, first: int, last: int) -> Iterator[tuple[int, memoryview]]:
        """As :meth:`iter_entries`, each entry a view into the chunk read (no copy per entry)."""
        with self._lock:
            offsets = self._offsets
            tail_end = self._data_end if self._state != lf.STATE_OPEN else self._scanned_end
        return self._iterate(offsets, tail_end, first, last, lf.frame_payload)

    def _iterate(
        self,
        offsets: array[int],
        tail_end: int,
        first: int,
        last: int,
        decode: Callable[[bytes, int, int, int], _Payload | None],
    ) -> Iterator[tuple[int, _Payload]]:
        lid = self.ledger_id
        n = len(offsets)

        def end_of(i: int) -> int:
            return offsets[i + 1] if i + 1 < n else tail_end

        eid = first
        while eid <= last:
            if eid >= n:
                raise CorruptedEntryError(f"ledger {lid} entry {eid}: frame missing or unparsable")
            start = offsets[eid]
            stop = eid
            limit = start + lf.CHUNK_SIZE
            while stop < last and stop + 1 < n and end_of(stop + 1) <= limit:
                stop += 1
            try:
                buf = os.pread(self._fd, end_of(stop) - start, start)
            except OSError as exc:
                raise SegmentStoreError(f"cannot read ledger {lid} entry {eid}: {exc}") from exc
            for i in range(eid, stop + 1):
                payload = decode(buf, offsets[i] - start, end_of(i) - offsets[i], i)
                if payload is None:
                    raise CorruptedEntryError(f"ledger {lid} entry {i}: checksum mismatch or malformed frame")
                yield i, payload
            eid = stop + 1
