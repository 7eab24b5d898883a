"""Java-properties text: parsing (``java.util.Properties.load``) and rendering keys and values."""

from __future__ import annotations

import re

from storage.errors import InvalidConfigError

_LINE_SPLIT = re.compile(r"\r\n|\r|\n")
_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _trailing_backslashes(text: str) -> int:
    return len(text) - len(text.rstrip("\\"))


def _unescape(text: str, source: str, lineno: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise InvalidConfigError(f"malformed \\uXXXX escape in {source}, line {lineno}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str, *, source: str = "<string>") -> list[tuple[str, str]]:
    """Parse Java-properties text into ``(key, value)`` pairs, in file order.

    Follows ``java.util.Properties.load``: ``key=value``, ``key: value`` or ``key value``; ``#`` and
    ``!`` comment lines; blank lines; a trailing backslash continues a line; ``\\t \\n \\r \\f \\uXXXX``
    escapes. Unlike Java (like DistributedLog's commons-configuration reader) trailing whitespace
    of a value is dropped unless escaped.
    """
    lines = _LINE_SPLIT.split(text)
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = _strip_trailing(lines[i]).lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _trailing_backslashes(line) % 2 == 1:  # continuation
            line = line[:-1]
            if i >= len(lines):
                break
            line += _strip_trailing(lines[i]).lstrip(_WS)
            i += 1
        key, value = _split_key_value(line)
        pairs.append((_unescape(key, source, lineno), _unescape(value, source, lineno)))
    return pairs


def _strip_trailing(raw: str) -> str:
    stripped = raw.rstrip(_WS)
    if len(stripped) < len(raw) and _trailing_backslashes(stripped) % 2 == 1:
        return stripped + raw[len(stripped)]  # the last backslash escapes a whitespace character
    return stripped


def _split_key_value(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        ch = line[j]
        if ch == "\\":
            j += 2
            continue
        if ch in "=:" or ch in _WS:
            break
        j += 1
    key = line[:j]
    rest = line[j:].lstrip(_WS)
    if rest and rest[0] in "=:" and (j >= len(line) or line[j] in _WS):
        rest = rest[1:].lstrip(_WS)
    elif j < len(line) and line[j] in "=:":
        rest = line[j + 1 :].lstrip(_WS)
    return key, rest


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    last = len(text) - 1
    for idx, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ch == " " and (is_key or idx == 0 or idx == last or text[idx + 1 :].strip(" ") == ""):
            out.append("\\ ")
        elif is_key and ch in "=:#!":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def _render_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return _escape(str(value), is_key=False)


def _ordered(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Last occurrence of a key wins (keys compared exactly, as in a properties file)."""
    out: dict[str, str] = {}
    for key, value in pairs:
        out.pop(key, None)
        out[key] = value
    return out
