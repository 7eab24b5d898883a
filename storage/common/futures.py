"""Cheap ``concurrent.futures.Future`` objects for the records of one writer.

A write returns a :class:`concurrent.futures.Future`. A standard one builds a
``threading.Condition`` and two lists, and lives in an instance ``__dict__``: five objects the
garbage collector tracks, for every record. An application that keeps its futures (as
asynchronous writers do) then pays more for collector passes over them than for writing the
record. :class:`WriteFuture` is one tracked object:

* its state lives in ``__slots__``; the waiter and callback lists are made only when a waiter
  (``concurrent.futures.wait``/``as_completed``) or a callback is added;
* every future of a group shares the group's condition: a batch of futures (an acknowledged
  entry) is resolved under that lock, followed by one ``notify_all``; callbacks run after the
  lock is released;
* futures are created in the RUNNING state, so they cannot be cancelled (a write cannot be
  taken back once buffered), and a finished future never changes again, so ``done`` and
  ``result`` of a finished future read its state without taking the lock;
* because one condition serves many futures, a waiter may be woken for another future:
  ``result``/``exception`` keep waiting until *their* future is finished or the timeout has
  passed.

``Future``'s own methods (``add_done_callback``, ``set_result``, ``set_exception``, ``wait``,
``as_completed``) work unchanged: they reach the lists through the ``_waiters`` and
``_done_callbacks`` properties. This relies on the attribute names ``Future`` has used since
Python 3.2; ``tests/storage/test_futures.py`` checks the behaviour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, RUNNING
from typing import Any

from storage.common.conditions import LeanCondition


class WriteFuture(Future[Any]):
    """A future sharing its condition with its siblings (see the module docstring)."""

    __slots__ = ("_callback_list", "_condition", "_exception", "_result", "_state", "_waiter_list")

    _callback_list: list[Any] | None
    _condition: threading.Condition
    _exception: BaseException | None
    _result: Any
    _state: str
    _waiter_list: list[Any] | None

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]  # typeshed: a plain attribute
        lst = self._waiter_list
        if lst is None:
            lst = self._waiter_list = []
        return lst

    @property
    def _done_callbacks(self) -> list[Any]:
        lst = self._callback_list
        if lst is None:
            lst = self._callback_list = []
        return lst

    def _wait_finished(self, timeout: float | None) -> None:
        cond = self._condition
        deadline = None if timeout is None else time.monotonic() + timeout
        with cond:
            while self._state != FINISHED:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError()
                cond.wait(left)

    def done(self) -> bool:
        return self._state == FINISHED

    def result(self, timeout: float | None = None) -> Any:
        if self._state != FINISHED:
            self._wait_finished(timeout)
        if self._exception is not None:
            try:
                raise self._exception
            finally:
                self = None  # type: ignore[assignment]  # no exception -> traceback -> future cycle
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state != FINISHED:
            self._wait_finished(timeout)
        return self._exception


_new = WriteFuture.__new__


class FutureGroup:
    """Creates and resolves the futures of one writer; ``on_settled(n)`` (optional) is called after
    each :meth:`resolve` with how many futures it finished (outstanding-write accounting)."""

    __slots__ = ("_cond", "_on_settled")

    def __init__(self, on_settled: Callable[[int], None] | None = None) -> None:
        self._cond = LeanCondition()
        self._on_settled = on_settled

    def new(self) -> WriteFuture:
        """A new RUNNING future sharing this group's condition."""
        f = _new(WriteFuture)
        f._condition = self._cond
        f._state = RUNNING
        f._result = None
        f._exception = None
        f._waiter_list = None
        f._callback_list = None
        return f

    def resolve(
        self, futures: Sequence[Future[Any]], results: Sequence[Any] | None = None, exc: BaseException | None = None
    ) -> None:
        """Finish ``futures[i]`` with ``results[i]`` (or every one with ``exc``), then run callbacks.

        ``futures`` are this group's. Futures already finished are left alone. Callbacks run
        after the lock is released, in the order of ``futures``.
        """
        with_callbacks: list[WriteFuture] = []
        finished = 0
        with self._cond:
            f: Any
            if exc is not None:
                for f in futures:
                    if f._state == FINISHED:
                        continue
                    f._exception = exc
                    if f._waiter_list:
                        for w in f._waiter_list:
                            w.add_exception(f)
                    f._state = FINISHED
                    finished += 1
                    if f._callback_list:
                        with_callbacks.append(f)
            else:
                assert results is not None
                for f, result in zip(futures, results, strict=False):
                    if f._state == FINISHED:
                        continue
                    f._result = result
                    if f._waiter_list:
                        for w in f._waiter_list:
                            w.add_result(f)
                    f._state = FINISHED
                    finished += 1
                    if f._callback_list:
                        with_callbacks.append(f)
            if finished:
                self._cond.notify_all()
        if finished and self._on_settled is not None:
            self._on_settled(finished)
        for f in with_callbacks:
            f._invoke_callbacks()  # type: ignore[attr-defined]


class OutstandingWrites:
    """Writes issued and not yet settled, against a limit (``perWriterOutstandingWriteLimit`` of a
    writer, ``globalOutstandingWriteLimit`` of a namespace, which is the ``parent`` of its writers').

    :meth:`acquire` counts writes; over a limit it raises ``OverCapacityError`` unless ``darkmode``
    (DistributedLog's ``outstandingWriteLimitDarkmode``: count, never reject). :meth:`release` counts
    settled ones (acknowledged or failed). ``limit <= 0`` means no limit of its own.
    """

    __slots__ = ("_count", "_darkmode", "_key", "_limit", "_lock", "_name", "_parent", "over_limit")

    def __init__(
        self, limit: int, *, darkmode: bool, name: str, key: str, parent: OutstandingWrites | None = None
    ) -> None:
        self._limit = limit
        self._darkmode = darkmode
        self._name = name
        self._key = key
        self._parent = parent
        self._count = 0
        self._lock = threading.Lock()
        #: Writes that went over a limit (counted, also in darkmode).
        self.over_limit = 0

    @property
    def count(self) -> int:
        """Writes outstanding now."""
        return self._count

    def acquire(self, n: int = 1, *, check: bool = True) -> None:
        """Count ``n`` writes (``check=False``: never rejected, e.g. the end-of-stream record).

        Raises:
            OverCapacityError: ``n`` more would pass this or the parent's limit (not in darkmode).
        """
        from storage.errors import OverCapacityError

        with self._lock:
            if check and 0 < self._limit < self._count + n:
                self.over_limit += n
                if not self._darkmode:
                    raise OverCapacityError(
                        f"{self._name}: {self._count} writes outstanding, {n} more would pass {self._key}={self._limit}"
                    )
            if self._parent is not None:
                self._parent.acquire(n, check=check)
            self._count += n

    def release(self, n: int) -> None:
        """Count ``n`` writes settled."""
        with self._lock:
            self._count -= n
        if self._parent is not None:
            self._parent.release(n)
