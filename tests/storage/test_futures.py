"""The shared-condition write futures behave as ordinary concurrent.futures.Future objects."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, as_completed, wait

import pytest

from storage.common.futures import FutureGroup


def test_results_callbacks_wait_and_as_completed() -> None:
    g = FutureGroup()
    futures = [g.new() for _ in range(5)]
    assert all(isinstance(f, Future) and not f.done() and f.running() for f in futures)
    assert not futures[0].cancel()  # a buffered write cannot be taken back
    seen: list[int] = []
    futures[1].add_done_callback(lambda f: seen.append(f.result()))
    waiters: list[object] = []
    t = threading.Thread(target=lambda: waiters.append(futures[4].result(10)))
    t.start()
    with pytest.raises(TimeoutError):
        futures[4].result(0.01)
    g.resolve(futures[:2], [10, 11])  # wakes the waiter on futures[4], which must keep waiting
    done, pending = wait(futures, timeout=0.01, return_when=FIRST_COMPLETED)
    assert done == set(futures[:2]) and pending == set(futures[2:])
    assert seen == [11]
    g.resolve(futures[2:], [12, 13, 14])
    t.join(10)
    assert waiters == [14]
    assert sorted(f.result() for f in as_completed(futures, timeout=1)) == [10, 11, 12, 13, 14]


def test_exceptions_and_double_resolution() -> None:
    g = FutureGroup()
    a, b = g.new(), g.new()
    err = ValueError("boom")
    g.resolve([a, b], exc=err)
    assert a.exception() is err
    with pytest.raises(ValueError):
        b.result()
    g.resolve([a], [1])  # already finished: ignored
    assert a.exception() is err
    late: list[BaseException | None] = []
    a.add_done_callback(lambda f: late.append(f.exception()))
    assert late == [err]


def test_futures_are_single_objects_with_lazy_lists() -> None:
    """One garbage-collected object per future: no instance dict, no lists until needed."""
    g = FutureGroup()
    f = g.new()
    assert not hasattr(f, "__dict__") or not f.__dict__
    assert f._waiter_list is None and f._callback_list is None
    calls: list[int] = []
    f.add_done_callback(lambda fut: calls.append(fut.result()))
    assert f._callback_list is not None and len(f._callback_list) == 1
    assert not f.done()
    g.resolve([f], [7])
    assert f.done() and f.result() == 7 and f.exception() is None and calls == [7]
    e = g.new()
    g.resolve([e], exc=KeyError("k"))
    for _ in range(2):  # a finished future answers the same every time, without waiting
        with pytest.raises(KeyError):
            e.result(timeout=0)
    assert isinstance(e.exception(timeout=0), KeyError)
