"""Run the test suite as a few pytest sessions ("lanes") side by side, and fail if any lane fails.

    python -m tools.lanes --lane cluster=tests/cluster --lane spark=tests/spark,tests/jvm --rest core [-- PYTEST ARGS]

Why: most of the suite's time is spent waiting (fsyncs, ZooKeeper sessions, fault windows, Spark micro-batch
triggers, process start-up), not computing, so two or three sessions share two cores well. The simulated
cluster's fault scenarios alone hold faults for minutes; run beside the rest, they do not add to it.

Each lane is one pytest session of its own, so each keeps the suite's rule of one SparkSession, one ZooKeeper
server, one Ceph cluster and one simulated cluster per session (the session fixtures start their servers on
free loopback ports, the simulated cluster picks a free id and subnet, and Ceph's stale-cluster sweep only removes
clusters whose monitor is gone: lanes never touch each other's servers). ``--rest NAME`` is the lane of every test
path no other lane names (``--ignore`` of theirs).

Every lane loads ``--plugin`` (tests/lanes_plugin.py): tests marked ``heavy`` (whole Spark applications of their
own, long fault schedules) take one lock shared by the lanes, so two of them never run side by side, and each
failure is reported with when it started in its lane (a ``WHEN`` line). The lanes of ``--heavy-first`` run their
heavy tests before the rest, the other lanes after: the heavy tests of one lane then meet the light tests of the
other, and lanes seldom wait for the lock.

What the simulated cluster's hosts run gets niceness 5 (``DLC_NICE``, unless set): its fault schedules keep two
cores saturated for minutes, and are built to tolerate pauses, while Spark gives a Python worker it starts for a
streaming query a fixed 10 s to connect back. Measured on 2 cores beside 16 spinning processes, such a worker's start
took 5.6-7.1 s with them at niceness 0 and 1.7-2.2 s with them at 5.

Every line a lane prints is echoed as it comes, prefixed with the lane's name; the full output of each lane is
also kept in ``--log-dir``. At the end one table: lane, exit status, pytest's summary line, wall time. The exit
status is the first failing lane's (0 when all passed).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.netsim.hosts import NICE_ENV

#: pytest's last line: ``818 passed, 2 skipped in 123.45s (0:02:03)``, ``no tests ran in 0.01s``...
_SUMMARY = re.compile(r"(\d+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)|no tests ran)\b.* in \d")
#: pytest's short test summary lines: ``FAILED tests/x.py::test_y - AssertionError: ...``, and the plugin's
#: ``WHEN tests/x.py::test_y failed: started 12.3 min into the lane, ran 45s``.
_FAILURE = re.compile(r"(FAILED|ERROR|WHEN) \S")
#: The lanes' plugin (tests/lanes_plugin.py): heavy tests one at a time across lanes, and when each failure ran.
PLUGIN = "tests.lanes_plugin"
#: What every lane's environment tells the plugin: the lock file the lanes share, and the lane's name.
LOCK_ENV = "DL_TEST_HEAVY_LOCK"
LANE_ENV = "DL_TEST_LANE"
#: When a lane runs its heavy tests: ``first`` (the lanes of ``--heavy-first``) or ``last`` (the others), so that
#: one lane's heavy tests run while the other runs its light ones instead of waiting for the lock.
ORDER_ENV = "DL_TEST_HEAVY_ORDER"
#: The niceness of what the simulated hosts run in the lanes (``tools.netsim.hosts.NICE_ENV``).
CLUSTER_NICE = 5


@dataclass
class Lane:
    """One pytest session: its name, the test paths it runs and the paths it ignores."""

    name: str
    paths: list[str]
    ignore: list[str] = field(default_factory=list)
    heavy_first: bool = False
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ended: float = 0.0
    summary: str = ""
    failures: list[str] = field(default_factory=list)

    def argv(self, extra: list[str], plugin: str | None = PLUGIN) -> list[str]:
        plugins = ["-p", plugin] if plugin else []
        return [sys.executable, "-m", "pytest", *plugins, *self.paths, *(f"--ignore={p}" for p in self.ignore), *extra]


def _parse_lane(spec: str) -> Lane:
    name, sep, paths = spec.partition("=")
    if not sep or not name or not paths:
        raise SystemExit(f"--lane {spec!r}: expected NAME=PATH[,PATH...]")
    return Lane(name, [p for p in paths.split(",") if p])


def _pump(lane: Lane, log: Path, lock: threading.Lock) -> None:
    """Copy the lane's output to its log as it comes (pytest's progress dots have no newline until a line is
    full: the log shows them at once), and echo each complete line, prefixed with the lane's name."""
    assert lane.proc is not None and lane.proc.stdout is not None
    width = 8
    fd = lane.proc.stdout.fileno()
    pending = b""
    with log.open("wb") as f:
        while chunk := os.read(fd, 65536):
            f.write(chunk)
            f.flush()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                _echo(lane, raw.decode(errors="replace"), width, lock)
        if pending:
            _echo(lane, pending.decode(errors="replace"), width, lock)
    lane.proc.wait()
    lane.ended = time.monotonic()


def _echo(lane: Lane, line: str, width: int, lock: threading.Lock) -> None:
    if _SUMMARY.search(line):
        lane.summary = line.strip("= ")
    if _FAILURE.match(line):
        lane.failures.append(line)
    with lock:
        sys.stdout.write(f"[{lane.name:<{width}}] {line}\n")
        sys.stdout.flush()


def run(lanes: list[Lane], extra: list[str], log_dir: Path, plugin: str | None = PLUGIN) -> int:
    """Start every lane, echo their output, wait for all; print the table; return the first failing status."""
    log_dir.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    pumps = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1", LOCK_ENV: str((log_dir / "heavy.lock").resolve())}
    env.setdefault(NICE_ENV, str(CLUSTER_NICE))
    for lane in lanes:
        lane.started = time.monotonic()
        lane.proc = subprocess.Popen(
            lane.argv(extra, plugin),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**env, LANE_ENV: lane.name, ORDER_ENV: "first" if lane.heavy_first else "last"},
        )
        t = threading.Thread(target=_pump, args=(lane, log_dir / f"{lane.name}.log", lock), daemon=True)
        t.start()
        pumps.append(t)
    status = 0
    try:
        for lane, pump in zip(lanes, pumps, strict=True):
            assert lane.proc is not None
            rc = lane.proc.wait()
            pump.join()
            if rc and not status:
                status = rc
    except KeyboardInterrupt:
        for lane in lanes:
            if lane.proc is not None and lane.proc.poll() is None:
                lane.proc.terminate()
        raise
    # every lane's failures again, together at the end: a lane that ended early printed its own long ago,
    # and a CI log is often read from its tail
    failures = [f"[{lane.name}] {line[:300]}" for lane in lanes for line in lane.failures]
    if failures:
        print("\nfailures of every lane:", *failures, sep="\n")
    print(f"\n{'lane':<10} {'status':>6} {'wall':>8}  summary (logs in {log_dir})")
    for lane in lanes:
        assert lane.proc is not None
        wall = lane.ended - lane.started
        print(f"{lane.name:<10} {lane.proc.returncode:>6} {wall / 60:>6.1f}m  {lane.summary}")
    return status


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args_in:
        i = args_in.index("--")
        args_in, extra = args_in[:i], args_in[i + 1 :]
    p = argparse.ArgumentParser(prog="python -m tools.lanes", description=__doc__.split("\n\n")[0])
    p.add_argument("--lane", action="append", default=[], metavar="NAME=PATH[,PATH...]", help="a lane of its own")
    p.add_argument("--rest", metavar="NAME", help="a lane running every test path the other lanes do not name")
    p.add_argument(
        "--heavy-first", action="append", default=[], metavar="NAME", help="a lane running its heavy tests first"
    )
    p.add_argument("--root", default="tests", help="the test root the rest lane runs (default: tests)")
    p.add_argument("--log-dir", default="build/test-lanes", help="where each lane's full output is kept")
    p.add_argument("--plugin", default=PLUGIN, help=f"pytest plugin of every lane (default: {PLUGIN}; '' for none)")
    args = p.parse_args(args_in)
    lanes = [_parse_lane(spec) for spec in args.lane]
    if args.rest:
        named = [path for lane in lanes for path in lane.paths]
        lanes.append(Lane(args.rest, [args.root], ignore=named))
    if not lanes:
        p.error("no lane: give --lane and/or --rest")
    for lane in lanes:
        lane.heavy_first = lane.name in args.heavy_first
    return run(lanes, extra, Path(args.log_dir), args.plugin or None)


if __name__ == "__main__":
    sys.exit(main())
