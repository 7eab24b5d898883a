"""Byte-level codecs of the local segment store: ledger header, frames, offset index, id counter.

The layout is documented field by field in :mod:`storage.segstore.local`. Functions here do
plain I/O on file descriptors and raise ``OSError`` or return ``None`` for bad bytes; the
store translates both into :mod:`storage.errors` classes.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
import sys
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import crc32c as _crc32c_mod

from storage.common import durable
from storage.segstore._queued import MAX_ENTRY_SIZE


def _crc(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC32C without releasing the GIL (gil_release_mode=0): for entry-sized buffers the
    release costs far more than the hash, because getting the GIL back waits for busy threads."""
    return int(_crc32c_mod.crc32c(data, value, 0))


# --- ledger header ------------------------------------------------------------------------
HEADER_MAGIC = b"DLLG"
FORMAT_VERSION = 1
STATE_OPEN = 0
STATE_CLOSED = 1
STATE_FENCED = 2
_HEADER_FIELDS = struct.Struct(">4sHBxqqqq20x")  # 60 bytes, then the CRC32C (u32)
HEADER_SIZE = _HEADER_FIELDS.size + 4  # 64

#: How long fencing waits for a ledger file's lock held by another process's append (normally a few microseconds:
#: the header check and the write); only a holder frozen inside that window (SIGSTOP, a debugger) keeps it longer.
FENCE_LOCK_WAIT_S = 10.0
#: After this long, a wait for a ledger file's lock says which process holds it.
LOCK_WAIT_LOG_AFTER_S = 1.0

log = logging.getLogger("storage.segstore.local")


def lock_holders(fd: int) -> list[int]:
    """Process ids holding an ``flock`` on the open file ``fd`` (from ``/proc/locks``; empty where unknown)."""
    try:
        st = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device and fields[4].isdigit():
            pids.append(int(fields[4]))
    return pids


def lock_within(fd: int, what: str, timeout_s: float) -> None:
    """Take ``flock(LOCK_EX)`` on ``fd``, polling up to ``timeout_s``; a wait past :data:`LOCK_WAIT_LOG_AFTER_S`
    logs once which process holds it.

    Raises:
        TimeoutError: still held by another after ``timeout_s`` (the message names the holding processes).
        OSError: the lock call failed otherwise.
    """
    start = time.monotonic()
    delay = 0.0005
    logged = False
    while not durable.try_flock(fd):
        waited = time.monotonic() - start
        if waited >= timeout_s or (not logged and waited >= LOCK_WAIT_LOG_AFTER_S):
            holders = ", ".join(str(p) for p in lock_holders(fd)) or "unknown"
            message = f"{what} is locked by process {holders} (an append of a writer that is frozen or stuck)"
            if waited >= timeout_s:
                raise TimeoutError(f"{message} for {timeout_s:g}s")
            log.warning("waiting for %s; giving up after %gs", message, timeout_s)
            logged = True
        time.sleep(min(delay, max(0.0, timeout_s - waited)))
        delay = min(delay * 2, 0.05)


# --- frames -------------------------------------------------------------------------------
_FRAME_FIELDS = struct.Struct(">Iqq")  # length, entry id, lac: 20 bytes, covered by the CRC
FRAME_HEADER = struct.Struct(">IqqI")  # ... followed by the CRC32C: 24 bytes
FRAME_HEADER_SIZE = FRAME_HEADER.size

# --- offset index -------------------------------------------------------------------------
INDEX_MAGIC = b"DLIX"
_INDEX_HEAD = struct.Struct(">4sQ")  # magic, entry count; then count x i64 offsets, then CRC32C

# --- id counter ---------------------------------------------------------------------------
COUNTER_MAGIC = b"DLID"
_COUNTER = struct.Struct(">4sQI")  # magic, next ledger id, CRC32C of the first 12 bytes
FIRST_LEDGER_ID = 1

#: Bytes read per ``pread`` when scanning or bulk-reading frames.
CHUNK_SIZE = 4 * 1024 * 1024


@dataclass(frozen=True)
class Header:
    """The decoded fixed header of a ledger file."""

    ledger_id: int
    state: int
    last_entry_id: int
    data_end: int
    index_offset: int

    @property
    def sealed(self) -> bool:
        """Closed or fenced: the set of entries can no longer change."""
        return self.state != STATE_OPEN


def encode_header(h: Header) -> bytes:
    """The 64 header bytes of ``h``."""
    body = _HEADER_FIELDS.pack(
        HEADER_MAGIC, FORMAT_VERSION, h.state, h.ledger_id, h.last_entry_id, h.data_end, h.index_offset
    )
    return body + struct.pack(">I", _crc(body))


def decode_header(raw: bytes) -> Header | None:
    """Decode 64 header bytes; ``None`` if short, of the wrong magic/version, or failing the CRC."""
    if len(raw) < HEADER_SIZE:
        return None
    body = raw[: _HEADER_FIELDS.size]
    (crc,) = struct.unpack_from(">I", raw, _HEADER_FIELDS.size)
    if _crc(body) != crc:
        return None
    magic, version, state, lid, last, data_end, index_offset = _HEADER_FIELDS.unpack(body)
    if magic != HEADER_MAGIC or version != FORMAT_VERSION or state not in (STATE_OPEN, STATE_CLOSED, STATE_FENCED):
        return None
    return Header(lid, state, last, data_end, index_offset)


def read_header(fd: int) -> Header | None:
    """Read and decode the header of an open ledger file (``None`` if damaged or incomplete)."""
    return decode_header(os.pread(fd, HEADER_SIZE, 0))


def write_header(fd: int, h: Header) -> None:
    """Overwrite the header in place (the caller holds the ledger's flock and syncs)."""
    pwrite_all(fd, encode_header(h), 0)


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """``pwrite`` until every byte is written (short writes are retried)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        if n <= 0:  # pragma: no cover - the kernel reports errors as OSError
            raise OSError("pwrite wrote nothing")
        view = view[n:]
        offset += n


# --- frames -------------------------------------------------------------------------------
def encode_frames(entries: list[tuple[int, bytes]], lac: int) -> tuple[bytes, list[int]]:
    """Encode ``(entry_id, payload)`` pairs as consecutive frames all carrying ``lac``.

    Returns the bytes and each frame's offset relative to the start of the returned buffer.
    """
    parts: list[bytes] = []
    rel: list[int] = []
    pos = 0
    fields = _FRAME_FIELDS.pack
    for entry_id, data in entries:
        head = fields(len(data), entry_id, lac)
        parts.append(head)
        parts.append(struct.pack(">I", _crc(data, _crc(head))))
        parts.append(data)
        rel.append(pos)
        pos += FRAME_HEADER_SIZE + len(data)
    return b"".join(parts), rel


def frame_payload(buf: bytes, rel: int, size: int, entry_id: int) -> memoryview | None:
    """A view of the payload of the frame of ``size`` bytes at ``buf[rel:]`` if it is entry
    ``entry_id`` and passes its checksum; else ``None``."""
    if size < FRAME_HEADER_SIZE or rel + size > len(buf):
        return None
    length, eid, _lac, crc = FRAME_HEADER.unpack_from(buf, rel)
    if eid != entry_id or length != size - FRAME_HEADER_SIZE:
        return None
    if not frame_ok(buf, rel, size, crc):
        return None
    return memoryview(buf)[rel + FRAME_HEADER_SIZE : rel + size]


def decode_frame(buf: bytes, rel: int, size: int, entry_id: int) -> bytes | None:
    """:func:`frame_payload` copied into its own ``bytes``."""
    payload = frame_payload(buf, rel, size, entry_id)
    return None if payload is None else payload.tobytes()


@dataclass
class ScanResult:
    """Frames found by :func:`scan_frames`."""

    offsets: array[int]  # start offset of each accepted frame, entry ids next_id, next_id + 1, ...
    end: int  # offset just past the last accepted frame (``start`` if none)
    lac: int | None  # lac field of the last frame that passed its checksum, None if none did


#: ``read(length, offset) -> bytes`` (``os.pread`` with its descriptor bound, or a RADOS object read);
#: a short result means the data ends there.
ReadAt = Callable[[int, int], bytes]


def file_reader(fd: int) -> ReadAt:
    """A :data:`ReadAt` over an open file descriptor."""
    return functools.partial(os.pread, fd)


def scan_frames(read: ReadAt, start: int, next_id: int, limit: int, *, trust_tail: bool = False) -> ScanResult:
    """Parse frames from ``start`` (expected to hold entry ``next_id``) up to ``limit``, reading
    with ``read`` (frames have the same layout in a ledger file and in a RADOS ledger object).

    A frame is *well-formed* if its header is complete, its entry id is the next one, its
    length is sane and it ends at or before ``limit``. Where a frame is not, the scan looks
    further on for a frame of the following entry that passes its checksum (see
    :func:`_resync`): if there is one, the bytes in between are the damaged frame of the
    missing entry; if not, the scan stops. A frame failing its checksum, or damaged, is
    accepted only if a later frame passes (damage in the middle, reported when read); at the
    end it is a torn tail and left out, unless ``trust_tail`` (the ledger is sealed at ``limit``).
    """
    offsets = array("q")
    pending: list[int] = []
    lac: int | None = None
    end = pos = start
    buf = b""
    buf_off = start
    while pos + FRAME_HEADER_SIZE <= limit:
        rel = pos - buf_off
        if rel < 0 or rel + FRAME_HEADER_SIZE > len(buf):
            buf, buf_off, rel = read(min(CHUNK_SIZE, limit - pos), pos), pos, 0
            if len(buf) < FRAME_HEADER_SIZE:
                break
        length, eid, frame_lac, crc = FRAME_HEADER.unpack_from(buf, rel)
        size = FRAME_HEADER_SIZE + length
        if eid == next_id and length <= MAX_ENTRY_SIZE and pos + size <= limit and rel + size > len(buf):
            buf, buf_off, rel = read(min(max(CHUNK_SIZE, size), limit - pos), pos), pos, 0
        if eid != next_id or length > MAX_ENTRY_SIZE or rel + size > len(buf):
            found = _resync(read, pos, next_id + 1, limit)
            if found is None:
                break
            pending.append(pos)  # the damaged frame of entry next_id, up to the next good frame
            pos = found
            next_id += 1
            continue
        if frame_ok(buf, rel, size, crc):
            offsets.extend(pending)
            pending.clear()
            offsets.append(pos)
            end = pos + size
            lac = frame_lac
        else:
            pending.append(pos)
        pos += size
        next_id += 1
    if trust_tail and pending:
        offsets.extend(pending)
        end = pos
    return ScanResult(offsets, end, lac)


def frame_ok(buf: bytes, rel: int, size: int, crc: int) -> bool:
    """Whether the frame of ``size`` bytes at ``buf[rel:]`` matches its checksum ``crc``."""
    mv = memoryview(buf)
    return _crc(mv[rel + FRAME_HEADER_SIZE : rel + size], _crc(mv[rel : rel + 20])) == crc


def _resync(read: ReadAt, pos: int, entry_id: int, limit: int) -> int | None:
    """The offset of the first frame of entry ``entry_id`` after ``pos`` (and before
    ``limit``) that passes its checksum, or ``None``. Used only where a frame is malformed:
    a torn tail has none, damage in the middle of a ledger has one."""
    needle = struct.pack(">q", entry_id)
    off = pos + 1
    while off + FRAME_HEADER_SIZE <= limit:
        chunk = read(min(CHUNK_SIZE, limit - off), off)
        if len(chunk) < FRAME_HEADER_SIZE:
            return None
        hit = chunk.find(needle, 4)
        while hit >= 0:
            cand = off + hit - 4
            head = read(FRAME_HEADER_SIZE, cand)
            if len(head) < FRAME_HEADER_SIZE:
                return None
            length, _, _, crc = FRAME_HEADER.unpack(head)
            if length <= MAX_ENTRY_SIZE and cand + FRAME_HEADER_SIZE + length <= limit:
                frame = read(FRAME_HEADER_SIZE + length, cand)
                if len(frame) == FRAME_HEADER_SIZE + length and frame_ok(frame, 0, len(frame), crc):
                    return cand
            hit = chunk.find(needle, hit + 1)
        if off + len(chunk) >= limit:
            return None
        off += len(chunk) - FRAME_HEADER_SIZE  # overlap: a header may straddle two chunks
    return None


# --- offset index -------------------------------------------------------------------------
def encode_index(offsets: array[int]) -> bytes:
    """The index block for frame ``offsets`` (one i64 per entry, big-endian)."""
    body = array("q", offsets)
    if sys.byteorder == "little":
        body.byteswap()
    block = _INDEX_HEAD.pack(INDEX_MAGIC, len(offsets)) + body.tobytes()
    return block + struct.pack(">I", _crc(block))


def read_index(fd: int, offset: int, count: int) -> array[int] | None:
    """Read the index block at ``offset`` of a file holding ``count`` entries; ``None`` if damaged."""
    return read_index_from(file_reader(fd), offset, count)


def read_index_from(read: ReadAt, offset: int, count: int) -> array[int] | None:
    """Read the index block at ``offset`` holding ``count`` entries; ``None`` if it is damaged."""
    size = _INDEX_HEAD.size + 8 * count + 4
    raw = read(size, offset)
    if len(raw) != size:
        return None
    magic, n = _INDEX_HEAD.unpack_from(raw, 0)
    (crc,) = struct.unpack_from(">I", raw, size - 4)
    if magic != INDEX_MAGIC or n != count or _crc(memoryview(raw)[: size - 4]) != crc:
        return None
    offsets = array("q")
    offsets.frombytes(raw[_INDEX_HEAD.size : size - 4])
    if sys.byteorder == "little":
        offsets.byteswap()
    return offsets


def seal(fd: int, h: Header, offsets: array[int], data_end: int) -> Header:
    """Seal a ledger whose frames end at ``data_end`` (caller holds the flock and checked the
    state): drop anything after the frames, write the index, sync, then write the sealed header
    (``h`` gives ledger id, state and last entry id) and sync again."""
    if os.fstat(fd).st_size != data_end:
        os.ftruncate(fd, data_end)
    pwrite_all(fd, encode_index(offsets), data_end)
    os.fdatasync(fd)
    sealed = Header(h.ledger_id, h.state, h.last_entry_id, data_end, data_end)
    write_header(fd, sealed)
    os.fdatasync(fd)
    return sealed


# --- id counter ---------------------------------------------------------------------------
def next_counter_value(raw: bytes) -> int | None:
    """The next id stored in the counter bytes; ``FIRST_LEDGER_ID`` if empty, ``None`` if damaged."""
    if not raw:
        return FIRST_LEDGER_ID
    if len(raw) != _COUNTER.size:
        return None
    magic, value, crc = _COUNTER.unpack(raw)
    if magic != COUNTER_MAGIC or _crc(raw[:12]) != crc:
        return None
    return int(value)


def encode_counter(value: int) -> bytes:
    """Counter bytes holding ``value`` as the next id to hand out."""
    body = struct.pack(">4sQ", COUNTER_MAGIC, value)
    return body + struct.pack(">I", _crc(body))


fsync_dir = durable.fsync_dir  # fsync a directory so that names created or renamed in it survive a crash


# --- file names ---------------------------------------------------------------------------
LEDGER_SUFFIX = ".ledger"


def ledger_file_name(ledger_id: int) -> str:
    """The file name of a ledger inside ``<root>/ledgers/``."""
    return f"{ledger_id:020d}{LEDGER_SUFFIX}"


def parse_ledger_file_name(name: str) -> int | None:
    """The ledger id of a ledger file name, ``None`` for any other name (temporary files)."""
    if not name.endswith(LEDGER_SUFFIX):
        return None
    stem = name[: -len(LEDGER_SUFFIX)]
    return int(stem) if stem.isdigit() and stem.isascii() else None
