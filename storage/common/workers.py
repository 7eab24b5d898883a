"""Threads shared by the background work of many writers.

A process with thousands of open logs should not hold a thread per log, nor start one in the path of a write.
A :class:`WorkerPool` runs submitted tasks on at most ``max_threads`` threads: a task goes to an idle thread when
there is one, else to a new thread while fewer than ``max_threads`` run, else it waits in order for the next free
thread. A thread that found nothing to do for ``idle_exit_s`` ends, so a quiet process holds none.

Tasks must not wait for one another (a task that waits for a later task of the same pool could wait for ever
when every thread is taken); the writers' tasks do their piece of work and return. Threads are daemon threads
(unlike :class:`concurrent.futures.ThreadPoolExecutor`'s, which the interpreter joins at exit): a write stuck on a
hung disk must not hold up the exit of the process.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)


class WorkerPool:
    """At most ``max_threads`` daemon threads named ``<name>-<n>`` running submitted tasks in submission order."""

    def __init__(self, name: str, max_threads: int, idle_exit_s: float) -> None:
        if max_threads < 1 or idle_exit_s < 0:
            raise ValueError(f"max_threads must be >= 1 and idle_exit_s >= 0, not {max_threads}, {idle_exit_s}")
        self._name = name
        self._max = max_threads
        self.idle_exit_s = idle_exit_s
        self._cond = threading.Condition(threading.Lock())
        self._tasks: deque[Callable[[], None]] = deque()
        self._threads = 0  # running threads
        self._idle = 0  # threads waiting for a task
        self._started = 0  # threads ever started (for their names)
        os.register_at_fork(after_in_child=functools.partial(_after_fork, weakref.ref(self)))

    def _forked(self) -> None:
        """In a forked child: only the forking thread exists there, so the pool starts empty (tasks queued in the
        parent stay the parent's; a lock held by another thread at the fork would never be released)."""
        self._cond = threading.Condition(threading.Lock())
        self._tasks = deque()
        self._threads = self._idle = 0

    @property
    def threads(self) -> int:
        """Threads running now."""
        with self._cond:
            return self._threads

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task()`` on a thread of the pool (its exceptions are logged, never raised).

        Raises:
            RuntimeError: a thread was needed and none could be started (the task is not queued).
        """
        with self._cond:
            self._tasks.append(task)
            if self._idle >= len(self._tasks):  # a waiting thread for every queued task, this one included
                self._cond.notify()
                return
            if self._threads >= self._max:
                return  # the next thread to finish its task takes it
            self._threads += 1
            self._started += 1
            number = self._started
        thread = threading.Thread(target=self._work, name=f"{self._name}-{number}", daemon=True)
        try:
            thread.start()
        except BaseException:
            with self._cond:
                self._threads -= 1
                self._tasks.remove(task)
            raise

    def _work(self) -> None:
        while True:
            with self._cond:
                deadline = time.monotonic() + self.idle_exit_s
                while not self._tasks:  # checked after every wake-up, a timed-out one too: no task is left behind
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._threads -= 1
                        return
                    self._idle += 1
                    try:
                        self._cond.wait(remaining)
                    finally:
                        self._idle -= 1
                task = self._tasks.popleft()
            try:
                task()
            except Exception:
                log.exception("background task of %s failed", self._name)


def _after_fork(ref: weakref.ref[WorkerPool]) -> None:
    pool = ref()
    if pool is not None:
        pool._forked()
