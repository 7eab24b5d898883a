"""Waiting on what a test can observe instead of sleeping, and bounding an event instead of timing it.

The suite's rule: speed is measured in ``bench/``, never asserted in tests. Where a bound *is* the behaviour (a
call must return rather than hang, a timeout must fire), a test waits for the event with a generous bound
(:func:`finishes`, :func:`wait_until`) and asserts what happened and in which order; where a test needs another
thread or process to have reached a state (blocked on a lock, parked in a wait), it waits until that state can
be seen (:func:`wait_parked_in`, :func:`wait_flock_blocked`, :func:`flocks_held_by`) rather than sleeping and
hoping. Order is asserted between events the test can observe (:class:`Timeline`), never against a timer.

Shared by the storage and JVM tests; the check ``tests/test_no_timed_assertions.py`` keeps timed asserts out.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

__all__ = [
    "GENEROUS_S",
    "Timeline",
    "finishes",
    "flock_waiters",
    "flocks_held_by",
    "listening_addresses",
    "parked_in",
    "stopped",
    "wait_flock_blocked",
    "wait_parked_in",
    "wait_stopped",
    "wait_until",
]

#: How long a test waits for something that must happen (a call returning, a thread blocking): far beyond what
#: it takes on a loaded machine, so that only a real hang fails.
GENEROUS_S = 60.0

_T = TypeVar("_T")


def wait_until(cond: Callable[[], object], what: str, timeout_s: float = GENEROUS_S, poll_s: float = 0.01) -> None:
    """Poll ``cond`` until it is true; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not seen within {timeout_s:g} s")
        time.sleep(poll_s)


def finishes(fn: Callable[[], _T], what: str, timeout_s: float = GENEROUS_S) -> _T:
    """``fn()`` run on a daemon thread: its result, or its exception re-raised here; fails naming ``what``
    when it is still running after ``timeout_s`` (the thread is left behind: it is a hang)."""
    fut: Future[_T] = Future()

    def run() -> None:
        try:
            fut.set_result(fn())
        except BaseException as e:
            fut.set_exception(e)

    threading.Thread(target=run, name=f"finishes:{what}", daemon=True).start()
    try:
        exc = fut.exception(timeout=timeout_s)
    except TimeoutError:
        raise AssertionError(f"{what}: still running after {timeout_s:g} s") from None
    if exc is not None:
        raise exc
    return fut.result()


class Timeline(logging.Handler):
    """The order in which things happened: :meth:`mark` records an event; as a logging handler (see
    :meth:`logging_to`) every record at ``level`` or above is the event ``warning``. Tests assert the order of
    events they can observe (``["warning", "holder stopped", "acquired"]``), never against a timer: an event a
    timer marks would bound the others in time. :meth:`on` runs an action when an event is marked (on a thread
    of its own: the marking thread, e.g. one logging inside a wait, goes on at once)."""

    def __init__(self, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.events: list[str] = []
        self._lock = threading.Lock()
        self._actions: dict[str, list[Callable[[], object]]] = {}
        self._running: list[threading.Thread] = []
        self._errors: list[BaseException] = []

    def mark(self, event: str) -> None:
        with self._lock:
            self.events.append(event)
            actions = self._actions.pop(event, [])
            for action in actions:
                t = threading.Thread(target=self._run, args=(action,), name=f"timeline:{event}", daemon=True)
                self._running.append(t)
                t.start()

    def _run(self, action: Callable[[], object]) -> None:
        try:
            action()
        except BaseException as e:  # re-raised by join()
            self._errors.append(e)

    def emit(self, record: logging.LogRecord) -> None:
        self.mark("warning")

    def on(self, event: str, action: Callable[[], object]) -> None:
        """Run ``action()`` once, when ``event`` is next marked."""
        with self._lock:
            self._actions.setdefault(event, []).append(action)

    def join(self, timeout_s: float = GENEROUS_S) -> None:
        """Wait for the actions started so far to end, re-raising the first one's error; fails naming an action
        still running after ``timeout_s``."""
        for t in list(self._running):
            t.join(timeout_s)
            if t.is_alive():
                raise AssertionError(f"{t.name}: still running after {timeout_s:g} s")
        if self._errors:
            raise self._errors[0]

    @contextmanager
    def logging_to(self, logger: str) -> Iterator[Timeline]:
        """This timeline as a handler of ``logger`` for the block."""
        target = logging.getLogger(logger)
        target.addHandler(self)
        try:
            yield self
        finally:
            target.removeHandler(self)


# --- threads parked in a wait ---------------------------------------------------------------------
def parked_in(thread: threading.Thread, function: str, module_suffix: str = "") -> bool:
    """Whether ``thread`` is now inside ``function`` (defined in a file ending with ``module_suffix``),
    anywhere on its stack: e.g. blocked in a store's ``wait_change``."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == function and code.co_filename.endswith(module_suffix):
            return True
        frame = frame.f_back
    return False


def wait_parked_in(
    thread: threading.Thread, function: str, module_suffix: str = "", timeout_s: float = GENEROUS_S
) -> None:
    """Wait until ``thread`` is parked in ``function`` (see :func:`parked_in`); fails if it ends first."""

    def parked() -> bool:
        if not thread.is_alive():
            raise AssertionError(f"{thread.name} ended before it waited in {function}()")
        return parked_in(thread, function, module_suffix)

    wait_until(parked, f"{thread.name} waiting in {module_suffix or ''}:{function}()", timeout_s, poll_s=0.002)


# --- the kernel's view: file locks, listening sockets -------------------------------------------------
def flock_waiters(path: str | os.PathLike[str]) -> int:
    """How many ``flock`` calls are blocked on the file ``path`` now (the ``->`` lines of ``/proc/locks``)."""
    st = os.stat(path)
    wanted = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    count = 0
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] != "->" or fields[2] != "FLOCK":
            continue
        major, minor, inode = fields[6].split(":")
        if (int(major, 16), int(minor, 16), int(inode)) == wanted:
            count += 1
    return count


def flocks_held_by(pid: int) -> list[str]:
    """The files (``major:minor:inode``, as /proc/locks names them) on which process ``pid`` holds a ``flock``
    now (granted locks only, not waits)."""
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[4] == str(pid):
            held.append(fields[5])
    return held


def wait_flock_blocked(path: str | os.PathLike[str], n: int = 1, timeout_s: float = GENEROUS_S) -> None:
    """Wait until at least ``n`` ``flock`` calls are blocked on ``path`` (e.g. a ledger writer stalled)."""
    wait_until(lambda: flock_waiters(path) >= n, f"{n} flock waiter(s) on {path}", timeout_s, poll_s=0.002)


def stopped(pid: int) -> bool:
    """Whether every thread of process ``pid`` is stopped now (by SIGSTOP: state ``T``, or ``t`` under a tracer)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue  # a thread that just ended
    return bool(states) and all(state in ("T", "t") for state in states)


def wait_stopped(pid: int, timeout_s: float = GENEROUS_S) -> None:
    """Wait until every thread of process ``pid`` is stopped (a SIGSTOP is delivered asynchronously)."""
    wait_until(lambda: stopped(pid), f"process {pid} stopped", timeout_s, poll_s=0.002)


def listening_addresses(port: int) -> list[str]:
    """Local addresses of the TCP sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr, p = local.rsplit(":", 1)
            if state == "0A" and int(p, 16) == port:
                raw = bytes.fromhex(addr)
                if len(raw) == 4:
                    out.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:  # four little-endian 32-bit words
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    out.append(socket.inet_ntop(socket.AF_INET6, words))
    return out
