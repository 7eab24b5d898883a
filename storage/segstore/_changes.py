"""Change notification shared by the segment stores: per-ledger generations, waiters, callbacks.

A store's change source (the local store's inotify or polling thread, the RADOS store's watch on
its notify object) reports "these ledgers may have changed" to a :class:`ChangeHub`; the hub bumps
each ledger's generation, wakes waiters and calls the registered callbacks. Waiters compare
generations, so no change between "read the LAC" and "wait" is lost; when the source may have
lost events, every generation changes at once. Notifications may be spurious.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from storage.segstore.base import LedgerInfo

_log = logging.getLogger(__name__)


class ChangeHub:
    """Generations, waiters and callbacks of one store's ledgers (thread-safe)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._gens: dict[int, int] = {}
        self._epoch = 0  # bumped when events were lost: every generation changes
        self._callbacks: dict[int, Callable[[int], None]] = {}
        self._next_token = 0
        self._stopped = False

    @property
    def recheck_interval(self) -> float:
        """How long a waiter may sleep before re-reading state on its own (lost events, polling)."""
        return 1.0

    def generation(self, ledger_id: int) -> int:
        """A number that changes whenever ledger ``ledger_id`` may have changed."""
        with self._cond:
            return self._epoch + self._gens.get(ledger_id, 0)

    def wait_change(self, ledger_id: int, generation: int, timeout: float) -> None:
        """Block until :meth:`generation` differs from ``generation``, the hub stops, or ``timeout`` passes."""

        def moved() -> bool:
            return self._stopped or self._epoch + self._gens.get(ledger_id, 0) != generation

        with self._cond:
            self._cond.wait_for(moved, timeout)

    def add_callback(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Register ``callback(ledger_id)``; returns the function that unregisters it."""
        with self._cond:
            token = self._next_token
            self._next_token += 1
            self._callbacks[token] = callback

        def cancel() -> None:
            with self._cond:
                self._callbacks.pop(token, None)

        return cancel

    def changed(self, ids: Iterable[int], lost: bool = False) -> None:
        """Ledgers ``ids`` may have changed (``lost``: and others too, events were lost)."""
        ids = sorted(set(ids))
        with self._cond:
            if lost:
                self._epoch += 1
            for lid in ids:
                self._gens[lid] = self._gens.get(lid, 0) + 1
            self._cond.notify_all()
            callbacks = list(self._callbacks.values())
        for lid in ids:
            for callback in callbacks:
                try:
                    callback(lid)
                except Exception:
                    _log.exception("segment store watch callback failed for ledger %d", lid)

    def stop(self) -> None:
        """Wake every waiter for good (the store is closing)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def wait_for_lac(
        self,
        info: Callable[[int], LedgerInfo],
        check_open: Callable[[], None],
        ledger_id: int,
        known_lac: int,
        timeout_s: float,
    ) -> int:
        """The long poll of :meth:`SegmentStore.wait_for_lac`: ``info(ledger_id)`` until its LAC
        passes ``known_lac`` or the ledger is sealed, waking on changes and re-checking every
        :attr:`recheck_interval`; ``check_open()`` after each wait (raises once the store closed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            generation = self.generation(ledger_id)
            current = info(ledger_id)
            if current.closed or current.fenced or current.last_entry_id > known_lac:
                return current.last_entry_id
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return current.last_entry_id
            self.wait_change(ledger_id, generation, min(remaining, self.recheck_interval))
            check_open()
