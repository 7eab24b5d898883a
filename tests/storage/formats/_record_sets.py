"""Malformed record sets, each with the one fault ``validate_record_set`` must name (shared by the format tests and
the writer tests)."""

from __future__ import annotations

import struct
from typing import NamedTuple

import lz4.block
import lz4.frame

from storage.formats.record import MAX_LOGRECORD_SIZE
from storage.formats.recordset import encode_record_set

_NONE, _LZ4 = 0x1000, 0x1001


class BadSet(NamedTuple):
    """A malformed set: its id, its bytes, the exact message of the fault, and whether a reader decodes it anyway
    (only a member longer than MAX_LOGRECORD_SIZE: readers accept what is stored, writers refuse it)."""

    id: str
    data: bytes
    message: str
    readable: bool = False

    def matches(self, text: str) -> bool:
        """``text`` is the message (messages ending ``": "`` are followed by the LZ4 library's own words)."""
        return text.startswith(self.message) if self.message.endswith(": ") else text == self.message


def _set(metadata: int, count: int, original: int, stored: bytes) -> bytes:
    return struct.pack(">iiii", metadata, count, original, len(stored)) + stored


def _body(members: list[bytes]) -> bytes:
    return encode_record_set(members)[16:]


def _lz4(count: int, body: bytes, original: int | None = None) -> bytes:
    return _set(_LZ4, count, len(body) if original is None else original, lz4.block.compress(body, store_size=False))


def malformed_record_sets() -> list[BadSet]:
    members = [bytes([65 + i]) * 1024 for i in range(4)]  # four 1 KiB members
    body = _body(members)  # 4 * (4 + 1024) = 4112 bytes
    block = lz4.block.compress(body, store_size=False)
    over = struct.pack(">i", MAX_LOGRECORD_SIZE + 1) + bytes(MAX_LOGRECORD_SIZE + 1)  # no writer builds it
    return [
        BadSet("short", b"\x00\x00\x10\x00", "record set: 4 bytes, shorter than the 16-byte header"),
        BadSet(
            "version",
            _set(0x2000, 0, 0, b""),
            "record set: version mismatch: received 0x2000, required 0x1000",
        ),
        BadSet("codec", _set(0x1002, 0, 0, b""), "record set: unknown compression codec 2"),
        BadSet("negative-count", _set(_NONE, -1, 0, b""), "record set: header declares a negative member count -1"),
        BadSet(
            "negative-length",
            struct.pack(">iiii", _NONE, 0, -1, -1),
            "record set: header declares a negative data length (decompressed -1, stored -1)",
        ),
        BadSet(
            "stored-length",
            struct.pack(">iiii", _NONE, 4, len(body), len(body) + 2) + body,
            "record set: header declares 4114 stored bytes, 4112 present",
        ),
        BadSet(
            "none-decompressed-length",
            _set(_NONE, 4, len(body) - 1, body),
            "record set: uncompressed data of 4112 bytes, header declares 4111 decompressed",
        ),
        BadSet(
            "lz4-frame-instead-of-block",
            _set(_LZ4, 4, len(body), lz4.frame.compress(body)),
            "record set: LZ4 block does not decompress to the declared 4112 bytes: corrupt LZ4 data: ",
        ),
        BadSet(
            "lz4-size-prefixed-block",
            _set(_LZ4, 4, len(body), lz4.block.compress(body, store_size=True)),
            "record set: LZ4 block does not decompress to the declared 4112 bytes: corrupt LZ4 data: ",
        ),
        BadSet(
            "lz4-decompressed-length-high",
            _set(_LZ4, 4, len(body) + 1, block),
            "record set: LZ4 block does not decompress to the declared 4113 bytes: LZ4 data decoded to 4112 bytes, "
            "expected 4113",
        ),
        BadSet(
            "lz4-decompressed-length-low",
            _set(_LZ4, 4, len(body) - 1, block),
            "record set: LZ4 block does not decompress to the declared 4111 bytes: corrupt LZ4 data: ",
        ),
        BadSet(
            "lz4-truncated-block",
            _set(_LZ4, 4, len(body), block[:-3]),
            "record set: LZ4 block does not decompress to the declared 4112 bytes: corrupt LZ4 data: ",
        ),
        BadSet("count-high", _set(_NONE, 5, len(body), body), "record set: header declares 5 members, body holds 4"),
        BadSet("lz4-count-high", _lz4(5, body), "record set: header declares 5 members, body holds 4"),
        BadSet(
            "count-low",
            _set(_NONE, 3, len(body), body),
            "record set: 1028 trailing bytes after the 3 declared members",
        ),
        BadSet("lz4-count-low", _lz4(3, body), "record set: 1028 trailing bytes after the 3 declared members"),
        BadSet(
            "trailing-bytes",
            _set(_NONE, 4, len(body) + 5, body + b"extra"),
            "record set: 5 trailing bytes after the 4 declared members",
        ),
        BadSet(
            "stray-bytes",
            _set(_NONE, 5, len(body) + 2, body + b"xy"),
            "record set: header declares 5 members, body holds 4 and 2 stray bytes",
        ),
        BadSet(
            "member-past-the-data",
            _set(_NONE, 4, len(body) - 10, body[:-10]),
            "record set: member 3 declares 1024 bytes, only 1014 left in the body",
        ),
        BadSet(
            "lz4-member-past-the-data",
            _lz4(4, body[:-10]),
            "record set: member 3 declares 1024 bytes, only 1014 left in the body",
        ),
        BadSet(
            "negative-member-length",
            _set(_NONE, 1, 4, struct.pack(">i", -1)),
            "record set: member 0 has a negative length -1",
        ),
        BadSet(
            "member-too-long",
            _lz4(1, over),
            f"record set: member 0 is {MAX_LOGRECORD_SIZE + 1} bytes, over MAX_LOGRECORD_SIZE {MAX_LOGRECORD_SIZE}",
            readable=True,
        ),
    ]
