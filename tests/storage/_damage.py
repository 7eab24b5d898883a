"""Damage the stored bytes of one entry, whatever the segment store (a test tool, not an API)."""

from __future__ import annotations

import struct

from storage.segstore.base import SegmentStore
from storage.segstore.local import LocalSegmentStore

#: Frame header: u32 payload length, i64 entry id, i64 lac, u32 crc32c (both stores).
_FRAME = struct.Struct(">IqqI")


def frame_payloads(data: bytes, start: int) -> list[tuple[int, int]]:
    """(payload offset, length) of every complete frame in ``data`` from ``start``."""
    out, off = [], start
    while off + _FRAME.size <= len(data):
        (length,) = struct.unpack_from(">I", data, off)
        if off + _FRAME.size + length > len(data):
            break
        out.append((off + _FRAME.size, length))
        off += _FRAME.size + length
    return out


def flip_payload_byte(store: SegmentStore, ledger_id: int, entry_id: int) -> None:
    """Flip one bit of the last payload byte of entry ``entry_id`` (in the ledger file, or in the
    RADOS data object that holds it, rewritten whole), as bit rot or a bad disk would."""
    if isinstance(store, LocalSegmentStore):
        path = store.ledger_path(ledger_id)
        with open(path, "rb") as f:
            data = f.read()
        pos, length = frame_payloads(data, 64)[entry_id]
        with open(path, "r+b") as f:
            f.seek(pos + length - 1)
            f.write(bytes([data[pos + length - 1] ^ 0x40]))
        return
    import bisect

    import rados

    from storage.segstore._rados_io import part_oid
    from storage.segstore._rados_view import read_head

    ioctx = store.ioctx  # type: ignore[attr-defined]
    parts = read_head(ioctx, rados, ledger_id).parts
    part = bisect.bisect_right(parts, entry_id) - 1
    oid = part_oid(ledger_id, part)
    size, _ = ioctx.stat(oid)
    data = bytearray(ioctx.read(oid, size, 0))
    pos, length = frame_payloads(bytes(data), 0)[entry_id - parts[part]]
    data[pos + length - 1] ^= 0x40
    ioctx.write_full(oid, bytes(data))
