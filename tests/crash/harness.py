"""Machine crashes at seeded moments (tests/crash/crash_child.py writing, tools/crashfs.py forgetting), then the
history checker: every acknowledged record present once and in order after recovery, nothing invented.

One cycle: a fresh writer process opens the namespace on the crash file system (recovering every log the last
crash left), writes under load for a seeded while, is SIGKILLed with everything else that used the file system,
and the file system crashes (what was never fsynced is forgotten; half of the crashes keep a seeded torn prefix
of the unsynced bytes). After the last crash a fresh reader recovers and reads every log (the final read).

    python -m tests.crash.harness --cycles 2500 --seed 7      # the embedded default; prints "CRASH ... OK"
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import storage
from storage import DLSN
from tools.crashfs import CrashFS
from tools.history import check
from tools.history_events import History, HistoryRecorder


@dataclass
class CrashResult:
    points: int
    torn: int
    recovery_failures: int
    first_failure: str
    check_line: str
    ok_check: bool
    acked: int
    seconds: float
    faults: dict[str, int] = field(default_factory=dict)
    resumed: int = 0
    truncations: int = 0
    recovery_retries: int = 0  # reopens after a retriable error (each then recovered)

    @property
    def ok(self) -> bool:
        return self.ok_check and self.recovery_failures == 0 and self.points > 0

    def line(self, label: str) -> str:
        verdict = "OK" if self.ok else "FAILED"
        return (
            f"CRASH {label} points={self.points} torn={self.torn} acked={self.acked} "
            f"recovery_failures={self.recovery_failures}"
            + (f" recovery_retries={self.recovery_retries}" if self.recovery_retries else "")
            + (f" truncations={self.truncations}" if self.truncations else "")
            + "".join(f" {k}={v}" for k, v in sorted(self.faults.items()))
            + (f" resumed_after_fault={self.resumed}" if self.faults else "")
            + f" seconds={self.seconds:.0f} {verdict}\n  {self.check_line}"
            + (f"\n  first recovery failure: {self.first_failure}" if self.first_failure else "")
        )


#: Writers start as forks of a process that imported them already (a fresh interpreter would spend most of a
#: short cycle importing): the crash points per second double.
_FORKS = multiprocessing.get_context("forkserver")
#: Opens of one cycle's writers: a reopen follows a retriable error (a connection lost), as in an application.
RECOVERY_ATTEMPTS = 3
_FORKS.set_forkserver_preload(["storage", "tests.crash.crash_child", "tests.crash.sink_child"])


class _Lines:
    """The child's stdout: each line sent to the harness."""

    def __init__(self, conn: Connection) -> None:
        self.conn, self.buf = conn, ""

    def write(self, text: str) -> int:
        self.buf += text
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            self.conn.send(line)
        return len(text)

    def flush(self) -> None:
        pass


def _child_main(conn: Connection, module: str, argv: list[str], stderr_path: str) -> None:
    fd = os.open(stderr_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 2)
    sys.stdout = _Lines(conn)  # type: ignore[assignment]
    rc = importlib.import_module(module).run(argv)
    conn.send(json.dumps({"event": "exit", "rc": rc}))


class _Child:
    """A writer process (a fork of the preloaded server), its events read from a pipe."""

    def __init__(self, module: str, argv: list[str], stderr_path: Path) -> None:
        self.conn, child_conn = _FORKS.Pipe(duplex=False)
        self.proc = _FORKS.Process(target=_child_main, args=(child_conn, module, argv, str(stderr_path)))
        self.proc.start()
        child_conn.close()

    def first_event(self, timeout_s: float = 60) -> dict[str, object]:
        if self.conn.poll(timeout_s):
            try:
                return dict(json.loads(self.conn.recv()))
            except EOFError:
                pass
        return {"event": "recovery-failed", "error": f"the writer exited ({self.proc.exitcode}) or hung before opening"}

    def run_to_end(self, timeout_s: float) -> list[str]:
        events = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.conn.poll(max(0.0, deadline - time.monotonic())):
            try:
                events.append(self.conn.recv())
            except EOFError:
                break
        self.kill()
        return events

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(30)
        self.conn.close()


def _records(ns: storage.Namespace, name: str) -> Iterator[storage.LogRecordWithDLSN]:
    with ns.open_log(name).open_reader(DLSN.INITIAL) as r:
        while batch := r.read_bulk(5000, non_blocking=True):
            yield from batch


def final_read(uri: str, history_dir: Path, *, sink: bool = False) -> None:
    """Recover every log (a writer opened and closed) and record its records as the final read; for the sink,
    the input log's records as the sink's input and the output log's as its output."""
    with (
        HistoryRecorder(history_dir, "final") as rec,
        storage.open_namespace(uri, {"lockTimeoutSeconds": 30}, create=False) as ns,
    ):
        if sink:
            for x in _records(ns, "events"):
                rec.input("events", x.payload)
            for x in _records(ns, "out"):
                rec.output(x.payload)
            return
        for name in ns.list_logs():
            ns.open_log(name).open_writer().close()  # recovers the segment the last writer left in progress
            for x in _records(ns, name):
                rec.final_read(name, x.payload.split(b"|", 1)[0], x.dlsn, x.txid)


#: The disk faults a cycle may meet before its crash: (kind, fault settings).
DISK_FAULTS = ("full", "eio-write", "eio-fsync")


def _disk_fault(fs: CrashFS, kind: str, rng: random.Random) -> None:
    if kind == "full":
        fs.fault(enospc_after=rng.randint(0, 64 * 1024))  # full after a few more entries (a short write, maybe)
    elif kind == "eio-write":
        fs.fault(eio_write="")
    else:
        fs.fault(eio_fsync="")


def run_crashes(
    fs: CrashFS,
    uri: str,
    history_dir: Path,
    *,
    cycles: int,
    seed: int,
    rotation: int = 1,
    max_run_s: float = 0.5,
    sink: bool = False,
    disk_faults: float = 0.0,
    fault_kinds: tuple[str, ...] = DISK_FAULTS,
    report: object = print,
) -> CrashResult:
    """``cycles`` machine crashes on ``fs`` of the namespace at ``uri`` (see the module docstring). With
    ``disk_faults`` (a probability), a cycle's disk first fills up or fails (EIO on writes or on fsyncs) for a
    seeded while, then recovers, and the writers go on (opening their writers again) before the crash."""
    say = report if callable(report) else print
    rng = random.Random(seed)
    rec = HistoryRecorder(history_dir, "nemesis")
    started = time.monotonic()
    torn = failures = resumed = retried = 0
    faults: Counter[str] = Counter()
    first_failure = ""
    stderr_path = history_dir / "writers.stderr"  # the writers' warnings (a segment in error...)
    for cycle in range(cycles):
        child_seed = str(rng.randrange(2**31))

        def _child(cycle: int = cycle, child_seed: str = child_seed) -> _Child:
            if sink:
                return _Child("tests.crash.sink_child", [uri, str(cycle), child_seed], stderr_path)
            argv = [uri, str(history_dir), str(cycle), child_seed, str(rotation)]
            return _Child("tests.crash.crash_child", argv, stderr_path)

        child = _child()
        try:
            ev = child.first_event()
            for _ in range(RECOVERY_ATTEMPTS - 1):
                if ev.get("event") == "ready" or not ev.get("retriable"):
                    break
                # a transient error (a ZooKeeper connection lost under load): the application opens again, as
                # the error's `retriable` tells it it may; a failure that persists still counts
                retried += 1
                say(f"cycle {cycle}: opening again after a retriable error: {ev.get('error')}")
                child.kill()
                child = _child()
                ev = child.first_event()
            if ev.get("event") != "ready":
                failures += 1
                if not first_failure:
                    first_failure = f"cycle {cycle}: {ev.get('error')}\n{ev.get('trace', '')}"
                    say(f"recovery failed at cycle {cycle}: {first_failure}")
            elif rng.random() < disk_faults:
                time.sleep(rng.uniform(0.0, max_run_s / 2))
                kind = rng.choice(fault_kinds)
                fault = rec.fault_start(kind)
                _disk_fault(fs, kind, rng)
                time.sleep(rng.uniform(0.05, 0.3))
                fs.fault()
                rec.fault_end(kind, fault=fault)
                faults[kind] += 1
                resumed += _wait_for_ack(history_dir, cycle, time.monotonic())  # the writers reopen, in this process
                time.sleep(rng.uniform(0.0, max_run_s))
            else:
                time.sleep(rng.uniform(0.0, max_run_s))
        finally:
            child.kill()
        tear = rng.random() < 0.5
        torn += tear
        fs.crash(rng.randrange(2**31), torn=tear)
        if (cycle + 1) % 50 == 0:
            say(f"{cycle + 1}/{cycles} crashes, {failures} recovery failures")
    if sink:  # the last run, not killed, publishes the rest of the input
        last = _Child("tests.crash.sink_child", [uri, str(cycles), str(rng.randrange(2**31))], stderr_path)
        events = last.run_to_end(600)
        if not any('"drained"' in e for e in events):
            failures += 1
            first_failure = first_failure or f"the last sink run: {events[-3:]}; see {stderr_path}"
    rec.close()
    try:
        final_read(uri, history_dir, sink=sink)
    except storage.DLError as e:
        failures += 1
        first_failure = first_failure or f"final read: {type(e).__name__}: {e}"
    history = History.load(history_dir)
    report_ = check(history)
    acked = sum(1 for op in history.ops if op.outcome == "ok")
    return CrashResult(
        cycles, torn, failures, first_failure, report_.line(), report_.ok, acked, time.monotonic() - started,
        dict(faults), resumed, sum(1 for e in history.events if e.ev == "truncated"), retried,
    )  # fmt: skip


def _wait_for_ack(history_dir: Path, cycle: int, since: float, timeout_s: float = 30.0) -> bool:
    """Whether the cycle's writer recorded an acknowledgement after ``since`` (its history file, on the real disk)
    within ``timeout_s``: the crash comes after the writers resumed, or after they failed to within that time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for path in history_dir.glob(f"cycle-{cycle}.*.jsonl"):
            for line in path.read_text(errors="replace").splitlines()[::-1]:
                if '"ev": "ok"' in line:
                    try:
                        if float(json.loads(line)["m"]) > since:
                            return True
                    except (ValueError, KeyError):
                        continue  # a line being written
                    break
        time.sleep(0.02)
    return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.crash.harness", description=__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=2500)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--disk-faults", type=float, default=0.0, help="probability of a disk fault per cycle")
    p.add_argument("--workdir", help="keep the file system's state, the history and the writers' stderr here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="crash-") as tmp:
        d = Path(args.workdir or tmp)
        (d / "history").mkdir(parents=True)
        with CrashFS(d / "state", d / "mnt") as fs:
            result = run_crashes(
                fs,
                f"distributedlog-local://{d / 'mnt' / 'ns'}",
                d / "history",
                cycles=args.cycles,
                seed=args.seed,
                disk_faults=args.disk_faults,
            )
    print(result.line("embedded"))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
