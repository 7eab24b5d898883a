"""Several writers into one log under SIGKILLs (seeded): the exactly-once sink with per-writer state.

``run_writers_harness`` runs ``queries`` copies of ``examples/pipeline.py`` at once, each reading its own input
log ``events-<q>`` (a producer thread appends events with ids ``q * ID_SPAN + n``) and writing the one output log
``enriched``, plus an idempotent ``df.write`` job (``tests/spark/writer_job.py``, ``writerId`` + ``writerVersion``)
writing ids from ``queries * ID_SPAN`` into the same log. At seeded moments one query (its driver JVM and Python
workers, the whole process group) is SIGKILLed and restarted on its checkpoint; at ``checkpoint_loss_at`` the
victim's checkpoint is deleted first, so it resumes from ``startingOffsets=committed:enriched`` although other
queries committed after it. The batch job is SIGKILLed once at a seeded moment, run again with the same version
(publishing its rows if the killed run had not), and once more at the end (skipped). Then the producers stop, the
queries' last runs read what is left (and are killed too), and the output is checked against the inputs: each id
exactly once, each input's ids in its order, no ledger of the namespace left unreferenced. One line of counts:
:meth:`WritersResult.line`.

Command line::

    python -m tests.spark.writers_faults --queries 3 --kills 12 --seed 5    # prints "WRITERS ... lost=0 ..."
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from examples.pipeline import read_log  # noqa: E402
from storage.log.staging import sweep  # noqa: E402
from tests.spark.faults import Producer, _env, _kill_group, _pipeline, _starting_offsets, _wait_for  # noqa: E402

JOB = ROOT / "tests" / "spark" / "writer_job.py"
ID_SPAN = 1_000_000
OUTPUT = "enriched"


@dataclass
class WritersResult:
    queries: int
    kills: int
    input: int
    output: int
    lost: int
    duplicated: int
    out_of_order: int
    leaked_ledgers: int
    resumed_with: str | None
    job_runs: int
    seconds: float

    @property
    def ok(self) -> bool:
        clean = self.lost == 0 and self.duplicated == 0 and self.out_of_order == 0 and self.leaked_ledgers == 0
        return clean and self.output == self.input > 0

    def line(self) -> str:
        return (
            f"WRITERS queries={self.queries} batch_job_runs={self.job_runs} kills={self.kills} input={self.input} "
            f"output={self.output} lost={self.lost} duplicated={self.duplicated} out_of_order={self.out_of_order} "
            f"leaked_ledgers={self.leaked_ledgers} resumed_with={self.resumed_with} seconds={self.seconds:.0f}"
        )


def _job(uri: str, first_id: int, count: int, version: int, log_file: Path) -> subprocess.Popen[bytes]:
    with open(log_file, "ab") as out:
        cmd = [sys.executable, str(JOB), uri, OUTPUT, str(first_id), str(count), "nightly", str(version)]
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)


def _ids(payloads: list[tuple[int, bytes]]) -> list[int]:
    return [int(json.loads(p)["id"]) for _, p in payloads]


def check(uri: str, inputs: dict[str, list[int]]) -> tuple[int, int, int, int, int]:
    """(input, output, lost, duplicated, out_of_order) of ``enriched`` against the ids of every input (a log's
    name, or the batch job's), each input's ids in its own order."""
    outputs = _ids(read_log(uri, OUTPUT))
    every = [i for ids in inputs.values() for i in ids]
    want, got = Counter(every), Counter(outputs)
    lost = sum((want - got).values())
    duplicated = sum((got - want).values())
    firsts: dict[int, int] = {}
    for pos, i in enumerate(outputs):
        firsts.setdefault(i, pos)
    out_of_order = 0
    for ids in inputs.values():
        order = [firsts[i] for i in ids if i in firsts]
        out_of_order += sum(1 for a, b in itertools.pairwise(order) if b < a)
    return len(every), len(outputs), lost, duplicated, out_of_order


def _wait_caught_up(
    uri: str, inputs: dict[str, list[int]], runs: dict[int, tuple[subprocess.Popen[bytes], Path]], timeout_s: float
) -> None:
    """Until the output holds every input id (the running queries read the rest), at most ``timeout_s``."""
    want = {i for ids in inputs.values() for i in ids}
    deadline = time.monotonic() + timeout_s
    while True:
        missing = len(want - set(_ids(read_log(uri, OUTPUT))))
        if missing == 0:
            return
        for q, (proc, run_log) in runs.items():
            if proc.poll() is not None:
                raise AssertionError(f"query {q} exited ({proc.returncode}) with {missing} ids missing; see {run_log}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{missing} input ids still missing from {OUTPUT} after {timeout_s:g}s")
        time.sleep(1.0)


def run_writers_harness(
    workdir: Path,
    *,
    queries: int = 2,
    kills: int = 3,
    seed: int = 11,
    checkpoint_loss_at: int | None = 1,
    job_rows: int = 3000,
    max_delay_s: float = 3.0,
    max_per_trigger: int = 300,
    burst: int = 10,
    final_job_run: bool = True,
    uri: str | None = None,
    report: object = print,
) -> WritersResult:
    """See the module docstring. ``uri``: the namespace (default: an embedded one in ``workdir``; give it one of
    its own: every unreferenced ledger of it counts as leaked). Each producer appends ``burst`` events every 0.2 s;
    the queries read at most ``max_per_trigger`` per batch. ``final_job_run``: run the batch job a third time at
    the end (always skipped)."""
    say = report if callable(report) else print
    rng = random.Random(seed)
    started = time.monotonic()
    uri = uri or f"distributedlog-local://{workdir / 'ns'}"
    logs = [f"events-{q}" for q in range(queries)]
    with storage.open_namespace(uri) as ns:
        for name in logs:
            ns.create_log(name, exist_ok=True)
    checkpoints = [str(workdir / f"checkpoint-{q}") for q in range(queries)]
    producers = [Producer(uri, name, burst, pause_s=0.2, first_id=q * ID_SPAN) for q, name in enumerate(logs)]
    for p in producers:
        p.start()
    runs: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
    starts = Counter[int]()

    def start(q: int) -> tuple[subprocess.Popen[bytes], Path]:
        run_log = workdir / f"q{q}-run-{starts[q]:02d}.log"
        starts[q] += 1
        proc = _pipeline(
            uri,
            checkpoints[q],
            "--run-seconds",
            "0",
            "--input",
            logs[q],
            log_file=run_log,
            max_per_trigger=max_per_trigger,
        )
        return proc, run_log

    first_job = queries * ID_SPAN
    job_log = workdir / "job.log"
    job_runs = 0
    resumed_with = None
    job: subprocess.Popen[bytes] | None = None
    try:
        for q in range(queries):
            runs[q] = start(q)
        # the batch job, killed once at a seeded moment (before or after its commit), beside the queries
        job = _job(uri, first_job, job_rows, 1, job_log)
        job_runs += 1
        _wait_for(job_log, '"event": "started"', job)
        time.sleep(rng.uniform(0.0, 8.0))
        _kill_group(job)
        say(f"batch job killed: its rows in {OUTPUT}: {sum(1 for i in _ids(read_log(uri, OUTPUT)) if i >= first_job)}")
        job = _job(uri, first_job, job_rows, 1, job_log)  # the killed job retried, same version, during the kills
        job_runs += 1
        for q in range(queries):
            _wait_for(runs[q][1], '"event": "started"', runs[q][0])
        for k in range(kills):
            q = rng.randrange(queries)
            proc, run_log = runs[q]
            if rng.random() < 0.7:  # after a batch went through; else maybe before its first commit
                _wait_for(run_log, '"event": "batch"', proc)
            delay = rng.uniform(0.0, max_delay_s)
            time.sleep(delay)
            if proc.poll() is not None:
                raise AssertionError(f"query {q} exited by itself ({proc.returncode}); see {run_log}")
            _kill_group(proc)
            lose = checkpoint_loss_at is not None and k == checkpoint_loss_at
            if lose:
                shutil.rmtree(checkpoints[q], ignore_errors=True)
            runs[q] = start(q)
            _wait_for(runs[q][1], '"event": "started"', runs[q][0])
            if lose:
                resumed_with = _starting_offsets(runs[q][1])
            say(f"kill {k + 1}/{kills}: query {q} after {delay:.1f}s{' (checkpoint lost)' if lose else ''}")
        produced = {name: p.stop() for name, p in zip(logs, producers, strict=True)}
        if job.wait(600) != 0:
            raise AssertionError(f"the retried batch job failed ({job.returncode}); see {job_log}")
        if final_job_run:
            job = _job(uri, first_job, job_rows, 1, job_log)  # once more: already in, skipped
            job_runs += 1
        inputs = {name: _ids(read_log(uri, name)) for name in logs}
        _wait_caught_up(uri, inputs, runs, timeout_s=600)  # the last runs read everything, then are killed too
        if final_job_run and job.wait(600) != 0:
            raise AssertionError(f"the last batch job run failed ({job.returncode}); see {job_log}")
    finally:
        for p in producers:
            p.stopping.set()
        for proc, _ in runs.values():
            _kill_group(proc)
        if job is not None and job.poll() is None:
            _kill_group(job)
    for name in logs:
        assert len(inputs[name]) == produced[name], (name, len(inputs[name]), produced[name])
    inputs["batch job"] = list(range(first_job, first_job + job_rows))
    with storage.open_namespace(uri) as ns:
        sweep(ns, older_than_ms=0)  # staged ledgers of killed tasks (never published)
        published = {s.ledger_id for name in ns.list_logs() for s in ns.open_log(name).log_segments()}
        leaked = len(set(ns.segstore.list_ledgers()) - published)
    n_in, n_out, lost, dup, disorder = check(uri, inputs)
    return WritersResult(
        queries, kills, n_in, n_out, lost, dup, disorder, leaked, resumed_with, job_runs, time.monotonic() - started
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="several writers into one log under SIGKILLs")
    p.add_argument("--queries", type=int, default=3)
    p.add_argument("--kills", type=int, default=12)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--checkpoint-loss-at", type=int, default=4, help="the kill after which the victim's checkpoint "
                   "is deleted (-1: never)")  # fmt: skip
    p.add_argument("--workdir")
    args = p.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="dl-writers-"))
    loss = None if args.checkpoint_loss_at < 0 else args.checkpoint_loss_at
    result = run_writers_harness(
        workdir, queries=args.queries, kills=args.kills, seed=args.seed, checkpoint_loss_at=loss
    )
    print(result.line())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
