"""The worker pool shared by the local ledgers' appends: bounded threads, every task run once, idle threads end,
a failing task does not stop its thread, and a forked child starts with an empty pool."""

from __future__ import annotations

import os
import threading
import time

import pytest

from storage.common.workers import WorkerPool
from tests.storage.observe import GENEROUS_S, wait_until


def test_tasks_run_once_each_on_at_most_max_threads() -> None:
    pool = WorkerPool("t-bound", 4, 0.05)
    release = threading.Event()
    running: list[str] = []
    done: list[int] = []
    mu = threading.Lock()

    def task(i: int) -> None:
        with mu:
            running.append(threading.current_thread().name)
        assert release.wait(GENEROUS_S)
        with mu:
            done.append(i)

    for i in range(20):
        pool.submit(lambda i=i: task(i))
    wait_until(lambda: len(running) == 4, "four tasks to start")
    time.sleep(0.1)
    assert len(running) == 4 and pool.threads == 4  # the other 16 wait for a thread
    release.set()
    wait_until(lambda: len(done) == 20, "every task to run")
    assert sorted(done) == list(range(20))
    assert set(running) <= {f"t-bound-{n}" for n in range(1, 5)}
    wait_until(lambda: pool.threads == 0, "the idle threads to end")


def test_an_idle_thread_is_reused_and_no_task_is_left_behind_by_racing_exits() -> None:
    pool = WorkerPool("t-race", 8, 0.0005)  # threads end almost at once: submits race with their exits
    counts = [0] * 2000
    mu = threading.Lock()

    def task(i: int) -> None:
        with mu:
            counts[i] += 1

    def submitter(lo: int) -> None:
        for i in range(lo, lo + 500):
            pool.submit(lambda i=i: task(i))
            if i % 50 == 0:
                time.sleep(0.001)

    threads = [threading.Thread(target=submitter, args=(k * 500,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until(lambda: sum(counts) == 2000, "every task to run")
    assert counts == [1] * 2000
    wait_until(lambda: pool.threads == 0, "the idle threads to end")


def test_a_failing_task_is_logged_and_the_thread_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    pool = WorkerPool("t-fail", 1, 0.05)
    ran = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    pool.submit(boom)
    pool.submit(ran.set)
    assert ran.wait(GENEROUS_S)
    assert "background task of t-fail failed" in caplog.text


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_starts_with_an_empty_pool() -> None:
    pool = WorkerPool("t-fork", 1, 5.0)
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(GENEROUS_S)

    pool.submit(hold)  # the parent's only thread is busy at the fork
    assert started.wait(GENEROUS_S)
    pid = os.fork()
    if pid == 0:  # the child: a task submitted here must run on a thread of the child's own
        ok = threading.Event()
        pool.submit(ok.set)
        os._exit(0 if ok.wait(10) else 1)
    release.set()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        WorkerPool("t-bad", 0, 1.0)
    with pytest.raises(ValueError):
        WorkerPool("t-bad", 1, -1.0)
