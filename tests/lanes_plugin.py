"""The pytest plugin of :mod:`tools.lanes` (loaded with ``-p tests.lanes_plugin`` in every lane it starts).

Heavy tests one at a time across lanes
    A test marked ``@pytest.mark.heavy`` starts whole Spark applications of its own (JVMs, executors, a Python
    daemon per data source stage) or runs a long fault schedule on the simulated cluster. Two of them side by side
    on CI's two cores make everything else crawl: Spark waits only 10 s (a constant in its PythonWorkerFactory,
    not a setting) for a new Python worker to connect back, and one CI run lost four Spark tests to that while
    two heavy tests of two lanes ran together. So a heavy test first takes an exclusive ``flock`` on the file named
    by ``DL_TEST_HEAVY_LOCK`` (set by tools.lanes; without it, as in a plain ``pytest`` run, nothing is locked).
    The lock is taken around the whole test protocol, outside pytest-timeout's timer: the time spent waiting is
    not the test's. A wait longer than a second says which test of which lane holds the lock.

Heavy tests first or last
    A lane runs its heavy tests first or last (``DL_TEST_HEAVY_ORDER``, set by tools.lanes), each group in the
    order pytest collected it: the heavy tests of a lane that runs them first meet the light tests of one that runs
    them last, so the lock is seldom waited for.

When a failure happened
    At the end, one ``WHEN`` line per failed test: minutes into the lane when it started and how long it ran, so a
    CI log read from its tail shows which failures ran together.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Generator
from typing import Any

import pytest

from tools.lanes import LANE_ENV, LOCK_ENV, ORDER_ENV

_started = time.monotonic()
_waited: list[float] = []
_heavy_runs: list[float] = []
_failed: dict[str, tuple[float, float]] = {}
_began = _started  # when the running test's protocol began (one test at a time per session)


def _say(config: pytest.Config, text: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(text)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order = os.environ.get(ORDER_ENV)
    if order in ("first", "last"):
        heavy_rank = 0 if order == "first" else 1
        items.sort(key=lambda item: heavy_rank if item.get_closest_marker("heavy") else 1 - heavy_rank)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    global _began
    _began = time.monotonic()
    path = os.environ.get(LOCK_ENV)
    if not path or item.get_closest_marker("heavy") is None:
        yield
        return
    lane = os.environ.get(LANE_ENV, "?")
    with open(path, "a+") as f:
        asked = time.monotonic()
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            for _ in range(10):  # the holder writes its name just after it got the lock
                f.seek(0)
                holder = f.read().strip()
                if holder:
                    break
                time.sleep(0.1)
            holder = holder or "another lane's heavy test"
            _say(item.config, f"\n[heavy] {item.nodeid} waits for the heavy-test lock, held by {holder}")
            fcntl.flock(f, fcntl.LOCK_EX)
        got = time.monotonic()
        _waited.append(got - asked)
        if got - asked > 1.0:
            _say(item.config, f"[heavy] {item.nodeid} got the lock after {got - asked:.0f}s")
        f.seek(0)
        f.truncate()
        f.write(f"{item.nodeid} (lane {lane})")
        f.flush()
        try:
            yield
        finally:
            _heavy_runs.append(time.monotonic() - got)
            f.seek(0)
            f.truncate()
            f.flush()
            fcntl.flock(f, fcntl.LOCK_UN)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed and report.nodeid not in _failed:
        _failed[report.nodeid] = (_began - _started, time.monotonic() - _began)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _heavy_runs:
        terminalreporter.write_line(
            f"heavy tests: {len(_heavy_runs)} ran {sum(_heavy_runs) / 60:.1f} min holding the lock, "
            f"waited {sum(_waited) / 60:.1f} min for it (longest wait {max(_waited):.0f}s)"
        )
    for nodeid, (at, took) in _failed.items():
        terminalreporter.write_line(f"WHEN {nodeid} failed: started {at / 60:.1f} min into the lane, ran {took:.0f}s")
