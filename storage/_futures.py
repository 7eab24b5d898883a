"""Cheap ``concurrent.futures.Future`` objects for the records of one writer.

A write returns a :class:`concurrent.futures.Future`. Building a standard one builds a
``threading.Condition`` (an ``RLock`` plus bookkeeping), which costs more than packing the
record itself. Here every future of a segment writer shares the writer's condition:

* futures are created in the RUNNING state, so they cannot be cancelled (a write cannot be
  taken back once buffered);
* a batch of futures (an acknowledged entry) is resolved under the shared lock, followed by
  one ``notify_all``; callbacks run after the lock is released;
* because one condition serves many futures, a waiter may be woken for another future:
  :class:`WriteFuture` overrides ``result``/``exception`` to keep waiting until *its* future
  is finished or the timeout has passed. ``add_done_callback``, ``wait`` and ``as_completed``
  work unchanged (they use ``_waiters``, not the condition).

This relies on the attributes ``Future`` has had since Python 3.2 (``_condition``,
``_state``, ``_result``, ``_exception``, ``_waiters``, ``_done_callbacks``);
``tests/storage/test_futures.py`` checks the behaviour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, RUNNING
from typing import Any


class WriteFuture(Future[Any]):
    """A future sharing its condition with its siblings (see the module docstring)."""

    def _wait_finished(self, timeout: float | None) -> None:
        cond: threading.Condition = self._condition  # type: ignore[attr-defined]
        deadline = None if timeout is None else time.monotonic() + timeout
        with cond:
            while self._state != FINISHED:  # type: ignore[attr-defined]
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError()
                cond.wait(left)

    def result(self, timeout: float | None = None) -> Any:
        self._wait_finished(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait_finished(timeout)
        return super().exception(0)


_new = WriteFuture.__new__


class FutureGroup:
    """Creates and resolves the futures of one writer."""

    __slots__ = ("_cond",)

    def __init__(self) -> None:
        self._cond = threading.Condition()

    def new(self) -> WriteFuture:
        """A new RUNNING future sharing this group's condition."""
        f = _new(WriteFuture)
        f.__dict__ = {  # the attributes Future.__init__ sets, without building a Condition
            "_condition": self._cond,
            "_state": RUNNING,
            "_result": None,
            "_exception": None,
            "_waiters": [],
            "_done_callbacks": [],
        }
        return f

    def resolve(
        self, futures: Sequence[Future[Any]], results: Sequence[Any] | None = None, exc: BaseException | None = None
    ) -> None:
        """Finish ``futures[i]`` with ``results[i]`` (or every one with ``exc``), then run callbacks.

        Futures already finished are left alone. Callbacks run after the lock is released, in
        the order of ``futures``.
        """
        with_callbacks: list[Future[Any]] = []
        finished = False
        with self._cond:
            if exc is not None:
                for f in futures:
                    if f._state == FINISHED:  # type: ignore[attr-defined]
                        continue
                    f._exception = exc  # type: ignore[attr-defined]
                    for w in f._waiters:  # type: ignore[attr-defined]
                        w.add_exception(f)
                    f._state = FINISHED  # type: ignore[attr-defined]
                    finished = True
                    if f._done_callbacks:  # type: ignore[attr-defined]
                        with_callbacks.append(f)
            else:
                assert results is not None
                for f, result in zip(futures, results, strict=False):
                    if f._state == FINISHED:  # type: ignore[attr-defined]
                        continue
                    f._result = result  # type: ignore[attr-defined]
                    if f._waiters:  # type: ignore[attr-defined]
                        for w in f._waiters:  # type: ignore[attr-defined]
                            w.add_result(f)
                    f._state = FINISHED  # type: ignore[attr-defined]
                    finished = True
                    if f._done_callbacks:  # type: ignore[attr-defined]
                        with_callbacks.append(f)
            if finished:
                self._cond.notify_all()
        for f in with_callbacks:
            f._invoke_callbacks()  # type: ignore[attr-defined]
