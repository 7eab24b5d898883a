"""Log name validation, as DistributedLog's ``DLUtils.validateAndNormalizeName`` does it.

A leading ``/`` is stripped. A name may contain ``/`` (nested logs; missing parents are
created). It may not be empty, be reserved (start with ``.`` or ``<``), end with ``/``,
contain NUL, ``<``, ``>``, a space, ``//``, ``.`` or ``..`` path components, or characters
ZooKeeper refuses in paths (U+0001–U+001F, U+007F–U+009F, U+D800–U+F8FF, U+FFF0–U+FFFF).
"""

from __future__ import annotations

import re

from storage.errors import InvalidStreamNameError

_BAD_CHARS = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff<> ]")


def validate_log_name(name: object) -> str:
    """Return the normalized log name.

    Raises:
        InvalidStreamNameError: the name breaks one of the rules above (the message says which).
    """
    if not isinstance(name, str):
        raise InvalidStreamNameError(f"log name must be a string, got {type(name).__name__}")
    norm = name[1:] if name.startswith("/") else name
    if not norm:
        raise InvalidStreamNameError(f"invalid log name {name!r}: empty")
    if norm.startswith((".", "<")):
        raise InvalidStreamNameError(f"invalid log name {name!r}: names starting with '.' or '<' are reserved")
    if norm.endswith("/"):
        raise InvalidStreamNameError(f"invalid log name {name!r}: ends with '/'")
    if "//" in norm:
        raise InvalidStreamNameError(f"invalid log name {name!r}: contains '//'")
    bad = _BAD_CHARS.search(norm)
    if bad:
        raise InvalidStreamNameError(f"invalid log name {name!r}: character {bad.group()!r} is not allowed")
    for part in norm.split("/"):
        if part in (".", ".."):
            raise InvalidStreamNameError(f"invalid log name {name!r}: '.' and '..' path components are not allowed")
        if part.startswith((".", "<")):
            raise InvalidStreamNameError(f"invalid log name {name!r}: component {part!r} is reserved")
    return norm


def is_reserved(child: str) -> bool:
    """True for namespace children hidden from ``list_logs`` (``.allocation_pool``, ``<default>``...)."""
    return child.startswith((".", "<"))
