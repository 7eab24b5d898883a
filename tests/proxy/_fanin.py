"""What the fan-in and failover tests share: producer processes (tests/proxy/_producer.py), the final read of every
stream into the history, and the history check (tools/history.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import storage
from tools.history import History, HistoryRecorder, Report, check

ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@dataclass
class Producer:
    name: str
    proc: subprocess.Popen[str]

    def finish(self, timeout: float = 180) -> dict[str, Any]:
        """Wait for the producer's exit and return its summary line (asserts exit 0)."""
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, f"producer {self.name} exited {self.proc.returncode}:\n{err[-3000:]}"
        summary: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return summary


def start_producer(
    name: str, history: Path, streams: Sequence[str], *, uri: str | None = None, proxies: Sequence[str] = (),
    count: int = 0, rate: float = 0.0, stop_file: Path | None = None, timeout_s: float = 60.0,
    payload_bytes: int = 0, extra: Sequence[str] = (),
) -> Producer:  # fmt: skip
    """Start ``python -m tests.proxy._producer`` (through the proxies of ``uri``, or the listed ``proxies``)."""
    cmd = [sys.executable, "-m", "tests.proxy._producer", "--name", name, "--history", str(history),
           "--streams", ",".join(streams), "--count", str(count), "--rate", str(rate),
           "--timeout", str(timeout_s)]  # fmt: skip
    cmd += ["--uri", uri] if uri else ["--proxies", ",".join(proxies)]
    if stop_file is not None:
        cmd += ["--stop-file", str(stop_file)]
    if payload_bytes:
        cmd += ["--payload-bytes", str(payload_bytes)]
    cmd += list(extra)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    producer = Producer(name, proc)
    _STARTED.append(producer)
    return producer


#: Producers started by this test, stopped by :func:`kill_leftover_producers` when it ends.
_STARTED: list[Producer] = []


def kill_leftover_producers() -> int:
    """SIGKILL the producers a test started and left running (it failed before they finished); how many were."""
    left = [p for p in _STARTED if p.proc.poll() is None]
    for p in left:
        p.proc.kill()
        p.proc.communicate()
    _STARTED.clear()
    return len(left)


def final_read(uri: str, streams: Sequence[str], history: Path) -> dict[str, int]:
    """Read every stream once to its end with the storage reader, as the history's final read; counts per stream."""
    counts: dict[str, int] = {}
    with HistoryRecorder(history, "final-reader") as rec, storage.open_namespace(uri, create=False) as ns:
        for stream in streams:
            counts[stream] = 0
            if not ns.log_exists(stream):
                continue
            with ns.open_log(stream) as dlm, dlm.open_reader(storage.DLSN.INITIAL) as reader:
                while True:
                    got = reader.read_bulk(1000, non_blocking=True)
                    if not got:
                        break
                    for r in got:
                        rec.final_read(stream, r.payload, r.dlsn, r.txid, seq=r.sequence_id)
                    counts[stream] += len(got)
    return counts


def check_history(history: Path) -> Report:
    """Check the recorded history (lost, duplicated, reordered, out of order per producer, ...) and print its line."""
    report = check(History.load(history))
    print(report.line())
    return report
