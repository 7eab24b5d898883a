"""Lean conditions and events behave as threading's, and make their waiter queue only when waited on."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from storage.common.conditions import LeanCondition, LeanEvent


def test_no_queue_until_a_wait_then_notify_wakes_waiters() -> None:
    cond = LeanCondition(threading.Lock())
    with cond:
        cond.notify()  # nobody waits: nothing happens, and no queue is made for it
        cond.notify_all()
    assert cond._queue is None
    woken: list[int] = []

    def waiter(i: int) -> None:
        with cond:
            assert cond.wait(30)
            woken.append(i)

    def waiting() -> int:
        with cond:  # a waiter is queued before it lets the lock go
            queue = cond._queue
            return 0 if queue is None else len(queue)

    threads = [threading.Thread(target=waiter, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while waiting() < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    with cond:
        cond.notify()
    while len(woken) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(woken) == 1 and waiting() == 2
    with cond:
        cond.notify_all()
    for t in threads:
        t.join(30)
    assert sorted(woken) == [0, 1, 2]
    assert cond._queue is not None and len(cond._queue) == 0


def test_wait_times_out_and_wait_for_and_rlock() -> None:
    cond = LeanCondition()  # an RLock, as threading.Condition()
    with cond, cond:  # re-entrant
        start = time.monotonic()
        assert not cond.wait(0.05)
        assert time.monotonic() - start >= 0.04
        assert cond.wait_for(lambda: True, 0.01)
        flag: list[bool] = []

        def raise_flag() -> None:
            with cond:
                flag.append(True)
                cond.notify_all()

        threading.Timer(0.05, raise_flag).start()
        assert cond.wait_for(lambda: bool(flag), 30)
    with pytest.raises(RuntimeError):
        cond.notify()  # not holding the lock: as threading.Condition
    plain = LeanCondition(threading.Lock())  # acquire and release reach the lock through the class
    assert plain.acquire(timeout=1)
    assert not plain.acquire(False) and not plain.acquire(True, 0.01)
    plain.release()
    assert plain.acquire(blocking=False)
    plain.release()


def test_event() -> None:
    ev = LeanEvent()
    assert not ev.is_set() and not ev.wait(0.01)
    threading.Timer(0.05, ev.set).start()
    assert ev.wait(30) and ev.is_set()
    ev.clear()
    assert not ev.wait(0)


def test_saves_memory() -> None:
    """The point of them: an idle condition costs no waiter queue."""
    plain, lean = threading.Condition(threading.Lock()), LeanCondition(threading.Lock())
    assert sys.getsizeof(plain._waiters) > 500  # type: ignore[attr-defined]
    assert lean._queue is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_usable_in_a_forked_child() -> None:
    cond, ev = LeanCondition(threading.Lock()), LeanEvent()
    pid = os.fork()
    if pid == 0:  # the child: both work on their own
        ok = True
        try:
            cond._at_fork_reinit()
            with cond:
                ok = not cond.wait(0.01)
            ev.set()
            ok = ok and ev.wait(1)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
