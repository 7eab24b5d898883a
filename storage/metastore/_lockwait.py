"""Saying what a lock wait waits for: one WARNING, within a second, naming the lock and its holder.

A writer that opens a log whose write lock another process holds waits up to ``lockTimeoutSeconds`` (DistributedLog's
default: 30 s, or for ever when negative). Silence for that long looks like a hang, so both metadata stores' lock
waits go through :class:`LockWait`: once the wait has lasted :data:`WARN_AFTER_S`, it logs one WARNING such as
``waiting for lock /events/<default>/lock held by host:1234:ab12cd34; giving up after 30 s``, then nothing more.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["WARN_AFTER_S", "LockWait"]

#: How long a lock wait goes on before its WARNING.
WARN_AFTER_S = 0.5

log = logging.getLogger("storage.metastore.lock")


class LockWait:
    """One lock wait: call :meth:`waiting` on every retry; it warns once, after :data:`WARN_AFTER_S`."""

    def __init__(self, path: str, timeout_s: float) -> None:
        self._path = path
        self._timeout_s = timeout_s
        self._started = time.monotonic()
        self._warned = False

    def due_in(self) -> float | None:
        """Seconds until the WARNING is due (0 when it is), None once it was given: a waiter that sleeps on a
        watch caps its sleep by this, so the WARNING is not late."""
        if self._warned:
            return None
        return max(0.0, WARN_AFTER_S - (time.monotonic() - self._started))

    def waiting(self, holder: Callable[[], str | None]) -> None:
        """The lock is still held by another: warn if this wait has lasted long enough (``holder`` is called then
        only, to name the current holder, None if unknown)."""
        if self._warned or time.monotonic() - self._started < WARN_AFTER_S:
            return
        self._warned = True
        owner = holder()
        until = "waiting until it is released" if self._timeout_s < 0 else f"giving up after {self._timeout_s:g} s"
        log.warning(
            "waiting for lock %s held by %s; %s", self._path, owner if owner is not None else "an unknown holder", until
        )
