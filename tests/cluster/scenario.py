"""A fault scenario on the simulated cluster: client processes on hosts, faults recorded in the history, and one
checker line at the end.

    run = Scenario(cluster, uri, tmp_path)
    w = run.writer("client1", "events", "w1")               # python -m tests.cluster.clients writer, on client1
    w.wait_line("ACK")                                      # its stdout, as it comes
    with run.fault("partition", "client1 | zk"):            # recorded as a fault window of the history
        cluster.faults.partition([["client1"], ["zk1", "zk2", "zk3"]])
        ...
    cluster.heal()
    report = run.finish(["events"])                         # stop clients, final reads, check, print the line
    assert report.ok, report
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tools.cluster import Cluster
from tools.history import Report, availability, check
from tools.history_events import History, HistoryRecorder

ROOT = Path(__file__).resolve().parents[2]


class Client:
    """One client process on a host; its stdout lines are collected as they come."""

    def __init__(self, name: str, proc: subprocess.Popen[str], out: Path) -> None:
        self.name = name
        self.proc = proc
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._out = out
        self._thread = threading.Thread(target=self._pump, name=f"client-{name}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with open(self._out, "a") as f:
            for line in self.proc.stdout:
                f.write(line)
                f.flush()
                with self._cond:
                    self.lines.append(line.rstrip("\n"))
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_line(self, prefix: str, *, count: int = 1, timeout: float = 120.0) -> str:
        """The ``count``-th line starting with ``prefix`` (waits for it). Raises AssertionError on timeout or exit."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                hits = [ln for ln in self.lines if ln.startswith(prefix)]
                if len(hits) >= count:
                    return hits[count - 1]
                left = deadline - time.monotonic()
                assert left > 0, f"{self.name}: no {count}x {prefix!r} in {timeout}s; last lines: {self.lines[-8:]}"
                assert self.proc.poll() is None or self._thread.is_alive(), (
                    f"{self.name} exited ({self.proc.returncode}) before {prefix!r}: {self.lines[-8:]}"
                )
                self._cond.wait(min(left, 0.5))

    def acks(self) -> int:
        """The latest ``ACK n`` count it printed (0 before the first hundred)."""
        with self._cond:
            last = [ln for ln in self.lines if ln.startswith("ACK ")]
        return int(last[-1].split()[1]) if last else 0

    def errors(self) -> list[tuple[str, str, str]]:
        """``(class, retriable, message)`` of every ``ERROR`` line."""
        with self._cond:
            rows = [ln.split(" ", 3) for ln in self.lines if ln.startswith("ERROR ")]
        return [(r[1], r[2], r[3] if len(r) > 3 else "") for r in rows]

    def exited(self, timeout: float = 120.0) -> int:
        """Waits for the process to exit on its own and for the last of its output; returns the exit status.
        Raises subprocess.TimeoutExpired if it is still running after ``timeout``."""
        self.proc.wait(timeout)
        self._thread.join(30)  # its pipe is at EOF once the process (and what inherited the pipe) is gone
        return self.proc.returncode

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait (SIGKILL after ``timeout``); returns the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._thread.join(30)
        return self.proc.returncode

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        self._thread.join(30)


class Scenario:
    """Client processes of one test on the cluster, sharing one history directory."""

    def __init__(self, cluster: Cluster, uri: str, directory: Path) -> None:
        self.cluster = cluster
        self.uri = uri
        self.dir = directory
        self.history_dir = directory / "history"
        self.history_dir.mkdir(parents=True, exist_ok=True)
        self.rec = HistoryRecorder(self.history_dir, "test")
        self.clients: list[Client] = []
        self.history: History | None = None

    def start(self, host: str, program: str, name: str, *args: str) -> Client:
        argv = [self.cluster.python, "-m", "tests.cluster.clients", program, "--uri", self.uri]
        argv += ["--name", name, "--history", str(self.history_dir), *args]
        proc = self.cluster.popen(
            host, argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        client = Client(name, proc, self.dir / f"{name}.out")
        self.clients.append(client)
        return client

    def writer(self, host: str, log: str, name: str, *args: str) -> Client:
        return self.start(host, "writer", name, "--log", log, *args)

    def reader(self, host: str, log: str, name: str, *args: str) -> Client:
        return self.start(host, "reader", name, "--log", log, *args)

    @contextlib.contextmanager
    def fault(self, kind: str, detail: str = "") -> Iterator[None]:
        """A fault window of the history around the block (the block makes the fault; the window ends when
        the block does, or when :meth:`end_fault` is called)."""
        fid = self.rec.fault_start(kind, detail)
        try:
            yield
        finally:
            self.rec.fault_end(kind, detail, fault=fid)

    def finish(self, logs: Sequence[str], *, host: str | None = None, **check_args: Any) -> Report:
        """Stop every client, read each log whole from ``host`` as the final read, check the history and print
        its line (and the writes' availability per fault kind)."""
        for c in self.clients:
            c.stop()
        for log in logs:
            res = self.cluster.run(
                host or self.cluster.client_hosts[0],
                [
                    *(self.cluster.python, "-m", "tests.cluster.clients", "final", "--uri", self.uri, "--log", log),
                    *("--name", f"final-{log}", "--history", str(self.history_dir)),
                ],
                cwd=ROOT,
                timeout=300,
            )
            assert res.returncode == 0, f"final read of {log}: {res.stdout[-2000:]} {res.stderr[-2000:]}"
        self.rec.close()
        self.history = History.load(self.history_dir)
        report = check(self.history, **check_args)
        print(report.line())
        print(availability(self.history, "write").line())
        return report

    def _acked(
        self, start: float, end: float, *, by: str = "done", log: str | None = None
    ) -> list[tuple[float, float]]:
        """``(invoked, acknowledged)`` times of the acknowledged writes (of ``log``, or any) whose ``by`` time
        ("invoked" or "done") is in [start, end)."""
        assert self.history is not None
        return [
            (op.invoked, op.done)
            for op in self.history.ops
            if op.kind == "write"
            and op.outcome == "ok"
            and op.done is not None
            and start <= getattr(op, by) < end
            and (log is None or op.log == log)
        ]

    def write_latencies(self, start: float, end: float) -> list[float]:
        """Seconds from invoke to acknowledgement of the writes invoked in [start, end) (monotonic clock)."""
        return [done - invoked for invoked, done in self._acked(start, end, by="invoked")]

    def longest_gap(self, start: float, end: float, log: str | None = None) -> float:
        """The longest time in [start, end) without an acknowledgement (of ``log``, or any), in seconds."""
        points = [start, *sorted(done for _, done in self._acked(start, end, log=log)), end]
        return max(b - a for a, b in itertools.pairwise(points))

    def acked_between(self, start: float, end: float) -> int:
        """How many writes were acknowledged in [start, end)."""
        return len(self._acked(start, end))


def median_ms(xs: Sequence[float]) -> float:
    return statistics.median(xs) * 1000 if xs else float("nan")
