"""The Spark side of the cluster's fault tests, seen from the test: the streaming query's driver as a client
process on a host (``tests/cluster/spark_query.py run``), what it prints (executors, batches), a worker host's
crash, and the collector that records both logs for the history checker.

Used by ``test_spark_faults.py`` (one kill, one partition) and by the random nemesis in ``test_faults.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
from pathlib import Path

from tests.cluster.scenario import ROOT, Client, Scenario
from tests.storage.observe import wait_until
from tools.cluster import Cluster
from tools.netsim.hosts import netns_pids


def start_driver(
    run: Scenario,
    host: str,
    checkpoint: Path,
    conf: dict[str, str],
    *args: str,
    source: str = "in",
    sink: str = "out",
) -> Client:
    """Start the streaming query's driver on ``host`` (``spark_query run``) with the cluster's driver settings and
    ``conf``; ``args`` go to ``spark_query`` as they are (``--restarts``, ``--trigger``...)."""
    c = run.cluster
    argv = [c.python, "-m", "tests.cluster.spark_query", "run", "--uri", run.uri, "--checkpoint", str(checkpoint)]
    argv += ["--source", source, "--sink", sink, "--conf", json.dumps({**c.spark_driver_conf(host), **conf}), *args]
    proc = c.popen(host, argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    return Client("spark-driver", proc, run.dir / "spark-driver.out")


def drain_and_collect(
    run: Scenario, driver: Client, host: str, checkpoint: Path, *, source: str = "in", sink: str = "out"
) -> dict[str, str]:
    """Drain the query (SIGUSR1: until the sink's last commit covers ``source``'s end; stop its writers first),
    wait for it to stop, then record both logs for the checker from ``host`` (``spark_query collect``: ``source``'s
    final read and the sink's input, ``sink`` as the sink's output). Returns the ``COLLECTED`` line's fields, plus
    ``drained`` (the ``DRAINED`` line). Raises AssertionError if the driver or the collector fails."""
    c = run.cluster
    driver.proc.send_signal(signal.SIGUSR1)
    drained = driver.wait_line("DRAINED", timeout=300)
    driver.wait_line("STOPPED", timeout=120)
    assert driver.stop(timeout=120) == 0, driver.lines[-15:]
    collected = c.run(
        host,
        [c.python, "-m", "tests.cluster.spark_query", "collect", "--uri", run.uri, "--checkpoint", str(checkpoint),
         "--source", source, "--sink", sink, "--history", str(run.history_dir)],
        cwd=ROOT,
        timeout=300,
    )  # fmt: skip
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    line = collected.stdout.strip().splitlines()[-1]
    print(line)
    return {**dict(kv.split("=", 1) for kv in line.split()[1:]), "drained": drained}


def batches(driver: Client) -> list[tuple[int, int, float]]:
    """``(batch id, rows, monotonic time completed)`` of every ``BATCH`` line so far."""
    out = []
    for ln in list(driver.lines):
        if ln.startswith("BATCH "):
            _, bid, rows, t = ln.split()[:4]
            out.append((int(bid), int(rows), float(t)))
    return out


def wait_batches(driver: Client, n: int, after: float, timeout: float) -> float:
    """Wait until ``n`` batches with rows completed after monotonic time ``after``; return the first's time."""
    done: list[float] = []

    def enough() -> bool:
        done[:] = [t for _, rows, t in batches(driver) if t > after and rows > 0]
        assert driver.proc.poll() is None, f"the driver exited: {driver.lines[-15:]}"
        return len(done) >= n

    wait_until(enough, f"{n} batches with rows (driver: {driver.lines[-15:]})", timeout, poll_s=0.2)
    return done[0]


def wait_executors(driver: Client, hosts: set[str], after: float, timeout: float) -> float:
    """Wait for an ``EXECUTORS`` line printed after ``after`` naming exactly ``hosts``; return its time."""
    seen: list[float] = []

    def found() -> bool:
        for ln in list(driver.lines):
            if ln.startswith("EXECUTORS "):
                _, _, names, t = ln.split()
                if float(t) > after and set(names.split(",")) == hosts:
                    seen.append(float(t))
                    return True
        assert driver.proc.poll() is None, f"the driver exited: {driver.lines[-15:]}"
        return False

    wait_until(found, f"executors on exactly {sorted(hosts)} (driver: {driver.lines[-15:]})", timeout, poll_s=0.2)
    return seen[0]


def kill_host(c: Cluster, host: str) -> int:
    """Every process of ``host`` SIGKILLed as one crash: all are frozen first (none sees another die), then the
    Spark Worker is killed through the harness (a recorded ``kill`` fault, which ``heal`` undoes by starting it),
    then the rest (its executor JVM and Python workers). Returns how many processes died."""
    ns = c.network.host(host).netns
    pids = netns_pids(ns)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    c.kill(f"spark-{host}")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not netns_pids(ns), f"every process on {host} gone", 30, poll_s=0.05)
    return len(pids)


def stall(done: list[tuple[int, int, float]], start: float, end: float) -> float:
    """The longest gap between consecutive batch completions that overlaps [start, end] (seconds)."""
    times = sorted([start, end, *(t for _, _, t in done)])
    return max((b - a for a, b in itertools.pairwise(times) if b >= start and a <= end), default=0.0)


def check_sink_counts(report: object, stats: dict[str, str]) -> None:
    """The exactly-once sink's checks: the checker's sink counts all 0, output equals input, every output record
    prefixed and tied to a committed batch, every input covered, no staged ledger left behind."""
    counts = report.counts  # type: ignore[attr-defined]
    for kind in ("sink_missing", "sink_duplicated", "sink_invented", "sink_partial", "sink_reordered"):
        assert counts[kind] == 0, report
    assert stats["in"] == stats["out"] and int(stats["in"]) > 0, stats
    assert stats["unprefixed"] == "0" and stats["unbatched"] == "0" and stats["uncovered_inputs"] == "0", stats
    assert stats["staged_left"] == "0", stats
