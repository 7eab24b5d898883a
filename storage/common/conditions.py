"""Conditions and events that cost little while nobody waits on them.

A ``threading.Condition`` makes its queue of waiting threads (a ``collections.deque``, about 600 bytes) when it is
made, and keeps two bound methods of its lock (five of an RLock). An owned stream of the write proxy holds about ten
conditions and events (its writer's, its ledger's, its futures', its own), and most are never waited on while the
stream is idle: at 10,000 streams the empty queues alone take about 60 MB. :class:`LeanCondition` makes its queue
at its first ``wait`` and keeps it from then on (a condition waited on once is likely to be waited on again); until
then, notifying it does nothing, as notifying a condition nobody waits on. It reaches its lock's methods through
methods of its class instead of keeping them. :class:`LeanEvent` is a ``threading.Event`` over a LeanCondition.

Both rely on ``threading.Condition`` keeping its waiters in its ``_waiters`` attribute and adding to it only in
``wait``, and calling its lock's ``_release_save``, ``_acquire_restore`` and ``_is_owned`` through its own, as
CPython has done since Python 3.2 (``Event`` keeps its condition in ``_cond``);
``tests/storage/test_conditions.py`` checks the behaviour.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

__all__ = ["LeanCondition", "LeanEvent"]

#: What a LeanCondition's ``_waiters`` reads as before its first wait: empty, and with no ``append`` (a wait that
#: reached it would fail loudly instead of never being woken).
_NO_WAITERS: tuple[()] = ()
_RLOCK = type(threading.RLock())


class LeanCondition(threading.Condition):
    """A ``threading.Condition`` whose queue of waiting threads is made by its first ``wait`` (see the module
    docstring). Used as ``threading.Condition``: same arguments, same methods."""

    _lock: threading.Lock | threading.RLock
    _queue: collections.deque[Any] | None

    def __init__(self, lock: threading.Lock | threading.RLock | None = None) -> None:
        # not threading.Condition.__init__: it would make the queue and keep up to five bound methods of the lock,
        # which the methods below reach instead; every instance has the same two attributes
        self._lock = threading.RLock() if lock is None else lock
        self._queue = None

    @property
    def _waiters(self) -> Any:
        queue = self._queue
        return _NO_WAITERS if queue is None else queue

    @_waiters.setter
    def _waiters(self, queue: Any) -> None:
        self._queue = queue if queue else None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    # What threading.Condition.wait calls around its sleep: an RLock's own versions (they let go of every level
    # of a re-entered lock, and take them back); for a plain lock, a release and an acquire.
    def _release_save(self) -> Any:
        lock = self._lock
        if type(lock) is _RLOCK:
            return lock._release_save()  # type: ignore[union-attr,attr-defined]
        lock.release()
        return None

    def _acquire_restore(self, state: Any) -> None:
        lock = self._lock
        if type(lock) is _RLOCK:
            lock._acquire_restore(state)  # type: ignore[union-attr,attr-defined]
        else:
            lock.acquire()

    def _is_owned(self) -> bool:
        lock = self._lock
        if type(lock) is _RLOCK:
            return bool(lock._is_owned())  # type: ignore[union-attr,attr-defined]
        if lock.acquire(False):  # a plain lock knows no owner: held by someone, so taken to be the caller
            lock.release()
            return False
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """As ``threading.Condition.wait`` (the caller holds the lock, so the queue is made under it)."""
        if self._queue is None:
            self._queue = collections.deque()
        return super().wait(timeout)

    def _at_fork_reinit(self) -> None:
        self._lock._at_fork_reinit()  # type: ignore[union-attr,attr-defined]
        self._queue = None


class LeanEvent(threading.Event):
    """A ``threading.Event`` over a :class:`LeanCondition`."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = LeanCondition(threading.Lock())
