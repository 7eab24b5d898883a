"""DLSN, the DistributedLog Sequence Number: the position of one record in a log.

A DLSN is the triple ``(lssn, entry_id, slot_id)`` of signed 64-bit integers:

* ``lssn`` -- the log segment sequence number;
* ``entry_id`` -- the id of the entry (BookKeeper entry) inside that segment's ledger;
* ``slot_id`` -- the index of the record inside that entry.

DLSNs are ordered lexicographically on the triple with signed comparison (Apache DistributedLog's
``DLSN.compareTo``).

Binary layout (``DLSN.serializeBytes``), every integer big-endian two's complement:

======  ====  ===========================================
offset  size  field
======  ====  ===========================================
0       1     version byte: ``0`` (VERSION0) or ``1`` (VERSION1)
1       8     lssn (signed long)
9       8     entry_id (signed long)
17      8     slot_id (signed long)
======  ====  ===========================================

* Version 1 is exactly 25 bytes long and is the current form.
* Version 0 is exactly **200** bytes long: the 25 bytes above (with version byte ``0``) followed by 175 zero bytes.
  This reproduces a quirk of Apache DistributedLog, whose ``VERSION0_LEN`` counts bits instead of bytes.

String forms:

* :meth:`DLSN.serialize` -- standard base64 (``+/`` alphabet, ``=`` padding, no line breaks) of the version-1 bytes,
  e.g. ``AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==`` for ``(1,0,0)``. :meth:`DLSN.deserialize` is lenient like
  commons-codec: it accepts the standard and the URL-safe (``-_``) alphabets, skips characters outside them and stops at
  the first ``=``.
* ``str(dlsn)`` / :meth:`DLSN.parse` -- the CLI text form ``"lssn,entry_id,slot_id"``; :meth:`DLSN.parse` also accepts
  the literal ``InitialDLSN``.

Every malformed input raises :class:`~storage.errors.InvalidArgumentError`.
"""

from __future__ import annotations

import base64
import operator
import re
import struct
from dataclasses import dataclass
from typing import Any, ClassVar

from storage.errors import InvalidArgumentError

__all__ = ["DLSN", "VERSION0", "VERSION0_LEN", "VERSION1", "VERSION1_LEN"]

#: Serialization version 0 (the 200-byte quirk form).
VERSION0 = 0
#: Serialization version 1 (the current 25-byte form).
VERSION1 = 1
#: Length of a version-0 serialization (sic: DistributedLog counts bits, 3*64 + 8).
VERSION0_LEN = 200
#: Length of a version-1 serialization.
VERSION1_LEN = 25

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

_LAYOUT = struct.Struct(">Bqqq")
_V0_PADDING = bytes(VERSION0_LEN - VERSION1_LEN)

_NUMBER = re.compile(r"\s*([+-]?)0*([0-9]+)\s*", re.ASCII)

# commons-codec's decode table: standard and URL-safe alphabets; -1 = ignored character; -2 = padding.
_B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_DECODE: dict[str, int] = {c: i for i, c in enumerate(_B64_ALPHABET)}
_B64_DECODE["-"] = 62
_B64_DECODE["_"] = 63
_B64_ENCODE = _B64_ALPHABET.encode("ascii")


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_int64(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"DLSN {what} must be an int, got {_short(value)}")
    try:
        number = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"DLSN {what} must be an int, got {_short(value)}") from None
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise InvalidArgumentError(f"DLSN {what} {number} does not fit in a signed 64-bit integer")
    return int(number)


def _lenient_b64decode(text: str) -> bytes:
    """Decode base64 the way commons-codec 1.6 ``Base64.decodeBase64`` does.

    Characters outside both alphabets are skipped; the first ``=`` ends the input; a trailing group of 2 or 3
    characters yields 1 or 2 bytes; a trailing single character is dropped.
    """
    out = bytearray()
    acc = 0
    n = 0
    table = _B64_DECODE
    for ch in text:
        if ch == "=":
            break
        v = table.get(ch)
        if v is None:
            continue
        acc = (acc << 6) | v
        n += 1
        if n == 4:
            out += acc.to_bytes(3, "big")
            acc = 0
            n = 0
    if n == 2:
        out.append((acc >> 4) & 0xFF)
    elif n == 3:
        out += ((acc >> 2) & 0xFFFF).to_bytes(2, "big")
    return bytes(out)


def _plain(part: str) -> bool:
    """True for ASCII digits with an optional leading ``-``, short enough to fit in 64 bits whatever they are."""
    digits = part[1:] if part[:1] == "-" else part
    return 0 < len(digits) <= 18 and digits.isascii() and digits.isdigit()


@dataclass(frozen=True, order=True, slots=True, repr=False)
class DLSN:
    """A DistributedLog Sequence Number ``(lssn, entry_id, slot_id)``; immutable, hashable, ordered.

    Raises :class:`~storage.errors.InvalidArgumentError` when a field is not an int or does not fit in a signed
    64-bit integer.
    """

    lssn: int
    entry_id: int
    slot_id: int

    #: ``(1, 0, 0)``: the first possible record of a log.
    INITIAL: ClassVar[DLSN]
    #: ``(1, 0, -1)``: sorts just before :attr:`INITIAL`; the default commit position of a subscriber.
    NON_INCLUSIVE_LOWER_BOUND: ClassVar[DLSN]
    #: ``(0, -1, -1)``: "no DLSN" (returned for non-durable writes).
    INVALID: ClassVar[DLSN]

    def __post_init__(self) -> None:
        lssn, entry_id, slot_id = self.lssn, self.entry_id, self.slot_id
        if (
            type(lssn) is int
            and type(entry_id) is int
            and type(slot_id) is int
            and _INT64_MIN <= lssn <= _INT64_MAX
            and _INT64_MIN <= entry_id <= _INT64_MAX
            and _INT64_MIN <= slot_id <= _INT64_MAX
        ):
            return
        # Slow path: int subclasses / integer-likes are normalised to int; anything else is rejected.
        object.__setattr__(self, "lssn", _as_int64(lssn, "lssn"))
        object.__setattr__(self, "entry_id", _as_int64(entry_id, "entry_id"))
        object.__setattr__(self, "slot_id", _as_int64(slot_id, "slot_id"))

    # ------------------------------------------------------------------ text forms
    def __str__(self) -> str:
        return f"{self.lssn},{self.entry_id},{self.slot_id}"

    def __repr__(self) -> str:
        return f"DLSN({self.lssn},{self.entry_id},{self.slot_id})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (DLSN, (self.lssn, self.entry_id, self.slot_id))

    @classmethod
    def parse(cls, text: str) -> DLSN:
        """Parse the CLI text form ``"lssn,entry_id,slot_id"`` (whitespace around numbers allowed) or ``InitialDLSN``.

        Raises :class:`~storage.errors.InvalidArgumentError` if ``text`` is not a string of that form or a number does
        not fit in a signed 64-bit integer.
        """
        if not isinstance(text, str):
            raise InvalidArgumentError(f"DLSN text must be a str, got {_short(text)}")
        if text.strip() == "InitialDLSN":
            return DLSN.INITIAL
        parts = text.split(",")
        if len(parts) != 3:
            raise InvalidArgumentError(f"invalid DLSN {_short(text)}: expected 'lssn,entry_id,slot_id'")
        if all(_plain(x) for x in parts):  # the common form, as str(dlsn) writes it: no regex needed
            return _dlsn_unchecked(int(parts[0]), int(parts[1]), int(parts[2]))
        values: list[int] = []
        for part in parts:
            m = _NUMBER.fullmatch(part)
            if m is None:
                raise InvalidArgumentError(f"invalid DLSN {_short(text)}: {_short(part)} is not an integer")
            digits = m.group(2)
            value = int(m.group(1) + digits) if len(digits) <= 19 else _INT64_MAX + 1
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise InvalidArgumentError(
                    f"invalid DLSN {_short(text)}: {_short(part.strip())} does not fit in a signed 64-bit integer"
                )
            values.append(value)
        return _dlsn_unchecked(values[0], values[1], values[2])

    # ------------------------------------------------------------------ binary forms
    def to_bytes(self, version: int = VERSION1) -> bytes:
        """Serialize to the binary layout: 25 bytes for version 1, 200 bytes for version 0.

        Raises :class:`~storage.errors.InvalidArgumentError` for any other version.
        """
        if version == VERSION1:
            return _LAYOUT.pack(VERSION1, self.lssn, self.entry_id, self.slot_id)
        if version == VERSION0:
            return _LAYOUT.pack(VERSION0, self.lssn, self.entry_id, self.slot_id) + _V0_PADDING
        raise InvalidArgumentError(f"unknown DLSN serialization version {_short(version)}")

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> DLSN:
        """Parse the binary layout: version 0 needs exactly 200 bytes, version 1 exactly 25.

        Raises :class:`~storage.errors.InvalidArgumentError` on an unknown version or a wrong length.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"DLSN bytes must be bytes-like, got {_short(data)}")
        if isinstance(data, memoryview):
            data = data.tobytes()
        n = len(data)
        if n == 0:
            raise InvalidArgumentError("invalid DLSN bytes: empty input")
        version = data[0]
        if version == VERSION1:
            expected = VERSION1_LEN
        elif version == VERSION0:
            expected = VERSION0_LEN
        else:
            raise InvalidArgumentError(f"invalid DLSN bytes: unknown version {version}")
        if n != expected:
            raise InvalidArgumentError(
                f"invalid DLSN bytes: version {version} needs {expected} bytes, got {n} ({_short(bytes(data))})"
            )
        _, lssn, entry_id, slot_id = _LAYOUT.unpack_from(data, 0)
        return _dlsn_unchecked(lssn, entry_id, slot_id)

    def serialize(self) -> str:
        """Standard base64 (with ``=`` padding) of the version-1 bytes, as Apache DistributedLog stores it."""
        return base64.b64encode(_LAYOUT.pack(VERSION1, self.lssn, self.entry_id, self.slot_id)).decode("ascii")

    @classmethod
    def deserialize(cls, text: str | bytes) -> DLSN:
        """Parse the base64 form leniently (standard or URL-safe alphabet, invalid characters skipped).

        Raises :class:`~storage.errors.InvalidArgumentError` if the decoded bytes are not a valid DLSN serialization.
        """
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("latin-1")
        if not isinstance(text, str):
            raise InvalidArgumentError(f"serialized DLSN must be a str, got {_short(text)}")
        raw = _lenient_b64decode(text)
        try:
            return cls.from_bytes(raw)
        except InvalidArgumentError:
            raise InvalidArgumentError(f"invalid serialized DLSN {_short(text)}") from None

    # ------------------------------------------------------------------ navigation
    def next(self) -> DLSN:
        """``(lssn, entry_id, slot_id + 1)`` (``getNextDLSN``)."""
        return DLSN(self.lssn, self.entry_id, self.slot_id + 1)

    def position_on_next_segment(self) -> DLSN:
        """``(lssn + 1, 0, 0)`` (``positionOnTheNextLedger``)."""
        return DLSN(self.lssn + 1, 0, 0)


_new = object.__new__
_set_lssn = DLSN.__dict__["lssn"].__set__
_set_entry = DLSN.__dict__["entry_id"].__set__
_set_slot = DLSN.__dict__["slot_id"].__set__


def _dlsn_unchecked(lssn: int, entry_id: int, slot_id: int) -> DLSN:
    """Build a DLSN without validation (for decoders whose values come from 64-bit fields)."""
    d: DLSN = _new(DLSN)
    _set_lssn(d, lssn)
    _set_entry(d, entry_id)
    _set_slot(d, slot_id)
    return d


DLSN.INITIAL = DLSN(1, 0, 0)
DLSN.NON_INCLUSIVE_LOWER_BOUND = DLSN(1, 0, -1)
DLSN.INVALID = DLSN(0, -1, -1)
