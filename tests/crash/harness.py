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
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import storage
from storage import DLSN
from tools.crashfs import CrashFS
from tools.history import check
from tools.history_events import History, HistoryRecorder

ROOT = Path(__file__).resolve().parents[2]


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

    @property
    def ok(self) -> bool:
        return self.ok_check and self.recovery_failures == 0 and self.points > 0

    def line(self, label: str) -> str:
        verdict = "OK" if self.ok else "FAILED"
        return (
            f"CRASH {label} points={self.points} torn={self.torn} acked={self.acked} "
            f"recovery_failures={self.recovery_failures} seconds={self.seconds:.0f} {verdict}\n  {self.check_line}"
            + (f"\n  first recovery failure: {self.first_failure}" if self.first_failure else "")
        )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _first_event(proc: subprocess.Popen[str], timeout_s: float = 60) -> dict[str, object]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            return dict(json.loads(line))
        if proc.poll() is not None:
            break
    return {"event": "recovery-failed", "error": f"the writer exited ({proc.returncode}) or hung before opening"}


def final_read(uri: str, history_dir: Path) -> int:
    """Recover every log (a writer opened and closed) and record its records as the final read."""
    rec = HistoryRecorder(history_dir, "final")
    n = 0
    with storage.open_namespace(uri, {"lockTimeoutSeconds": 30}, create=False) as ns:
        for name in ns.list_logs():
            log = ns.open_log(name)
            log.open_writer().close()
            with log.open_reader(DLSN.INITIAL) as r:
                while batch := r.read_bulk(5000, non_blocking=True):
                    for x in batch:
                        rec.final_read(name, x.payload, x.dlsn, x.txid)
                        n += 1
    rec.close()
    return n


def run_crashes(
    fs: CrashFS,
    uri: str,
    history_dir: Path,
    *,
    cycles: int,
    seed: int,
    rotation: int = 1,
    max_run_s: float = 0.5,
    report: object = print,
) -> CrashResult:
    """``cycles`` machine crashes on ``fs`` of the namespace at ``uri`` (see the module docstring)."""
    say = report if callable(report) else print
    rng = random.Random(seed)
    started = time.monotonic()
    torn = failures = 0
    first_failure = ""
    for cycle in range(cycles):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.crash.crash_child",
                uri,
                str(history_dir),
                str(cycle),
                str(rng.randrange(2**31)),
                str(rotation),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        try:
            ev = _first_event(proc)
            if ev.get("event") == "ready":
                time.sleep(rng.uniform(0.0, max_run_s))
            else:
                failures += 1
                first_failure = first_failure or f"cycle {cycle}: {ev.get('error')}\n{ev.get('trace', '')}"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        tear = rng.random() < 0.5
        torn += tear
        fs.crash(rng.randrange(2**31), torn=tear)
        if (cycle + 1) % 50 == 0:
            say(f"{cycle + 1}/{cycles} crashes, {failures} recovery failures")
    try:
        final_read(uri, history_dir)
    except storage.DLError as e:
        failures += 1
        first_failure = first_failure or f"final read: {type(e).__name__}: {e}"
    report_ = check(History.load(history_dir))
    acked = int(report_.line().split("acked=")[1].split()[0])
    return CrashResult(
        cycles, torn, failures, first_failure, report_.line(), report_.ok, acked, time.monotonic() - started
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.crash.harness", description=__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=2500)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="crash-") as d, CrashFS(Path(d) / "state", Path(d) / "mnt") as fs:
        (Path(d) / "history").mkdir()
        result = run_crashes(
            fs,
            f"distributedlog-local://{Path(d) / 'mnt' / 'ns'}",
            Path(d) / "history",
            cycles=args.cycles,
            seed=args.seed,
        )
    print(result.line("embedded"))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
