"""What every ledger writer does the same way: check entry payloads, and report a settled batch
of entries to its futures and its ack listener in entry-id order."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import cast

from storage._futures import FutureGroup
from storage.errors import DLError, InvalidArgumentError
from storage.segstore.base import AckListener

#: Largest payload of one entry (also a sanity bound when parsing frame lengths).
MAX_ENTRY_SIZE = 64 * 1024 * 1024

_log = logging.getLogger(__name__)


def entry_bytes(data: object) -> bytes:
    """``data`` as bytes, checked (no copy for bytes).

    Raises:
        InvalidArgumentError: not bytes-like, or larger than ``MAX_ENTRY_SIZE``.
    """
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"entry data must be bytes, not {type(data).__name__}")
        data = bytes(data)
    if len(data) > MAX_ENTRY_SIZE:
        raise InvalidArgumentError(f"entry of {len(data)} bytes exceeds {MAX_ENTRY_SIZE}")
    return data


def copy_error(err: DLError) -> DLError:
    """A fresh exception like ``err`` (one instance per future keeps tracebacks apart), with the
    same ``retriable`` flag and cause."""
    fresh = type(err)(str(err), retriable=err.retriable)
    fresh.__cause__ = err.__cause__
    return fresh


def report_batch(
    ledger_id: int,
    entries: list[tuple[int, bytes]],
    futs: list[Future[int] | None],
    exc: DLError | None,
    listener: AckListener | None,
    futures: FutureGroup,
) -> None:
    """Settle ``entries`` in order: resolve each run of futures at once (to its entry ids, or
    ``exc``), and tell ``listener`` once per run of ``None`` futures (``append_nowait`` entries).
    The caller serializes reports."""
    n = len(futs)
    i = 0
    while i < n:
        j = i + 1
        if futs[i] is None:
            while j < n and futs[j] is None:
                j += 1
            assert listener is not None
            try:
                listener(j - i, entries[j - 1][0], exc)
            except Exception:  # a listener must not raise; never let it stop the writer
                _log.exception("ack listener of ledger %s failed", ledger_id)
        else:
            while j < n and futs[j] is not None:
                j += 1
            run = cast("list[Future[int]]", futs[i:j])
            if exc is None:
                futures.resolve(run, [entry_id for entry_id, _ in entries[i:j]])
            else:
                futures.resolve(run, exc=exc)
        i = j
