"""Offsets of the source: JSON-serialisable dicts ``{"<log>": "lssn,entry,slot"}``.

Each value is the DLSN of the *next* record to read from that log: a starting offset is
inclusive, an ending offset exclusive. :func:`dlsn_to_offset` / :func:`offset_to_dlsn` are the one
pair of conversions; :func:`encode_offsets` / :func:`decode_offsets` apply them to whole dicts.
"""

from __future__ import annotations

from collections.abc import Mapping

from dl_spark.errors import SourceOptionError
from storage.errors import InvalidArgumentError
from storage.formats.dlsn import DLSN

__all__ = ["decode_offsets", "dlsn_to_offset", "encode_offsets", "offset_to_dlsn"]


def dlsn_to_offset(dlsn: DLSN) -> str:
    """The offset text of ``dlsn``: ``"lssn,entry,slot"``."""
    return f"{dlsn.lssn},{dlsn.entry_id},{dlsn.slot_id}"


def offset_to_dlsn(text: object, log: str = "?") -> DLSN:
    """The DLSN of an offset value ``"lssn,entry,slot"``.

    Raises:
        SourceOptionError: ``text`` is not of that form (the message names ``log``).
    """
    if not isinstance(text, str):
        raise SourceOptionError(f"offset of log {log!r} must be a string 'lssn,entry,slot', got {text!r}")
    try:
        dlsn = DLSN.parse(text)
    except InvalidArgumentError as e:
        raise SourceOptionError(f"offset of log {log!r}: {e}") from None
    if dlsn.lssn < 0 or dlsn.entry_id < -1 or dlsn.slot_id < -1:
        raise SourceOptionError(f"offset of log {log!r} is out of range: {text!r}")
    return dlsn


def encode_offsets(positions: Mapping[str, DLSN]) -> dict[str, str]:
    """``{log: DLSN}`` → the offset dict (keys sorted, so equal positions give equal JSON)."""
    return {log: dlsn_to_offset(positions[log]) for log in sorted(positions)}


def decode_offsets(offset: Mapping[str, object] | None) -> dict[str, DLSN]:
    """An offset dict → ``{log: DLSN}`` (None → ``{}``).

    Raises:
        SourceOptionError: not a dict of offset strings.
    """
    if offset is None:
        return {}
    if not isinstance(offset, Mapping):
        raise SourceOptionError(f"source offset must be a JSON object {{log: 'lssn,entry,slot'}}, got {offset!r}")
    return {str(log): offset_to_dlsn(v, str(log)) for log, v in offset.items()}
