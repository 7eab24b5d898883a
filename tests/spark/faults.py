"""Fault injection for the exactly-once sink (seeded, reusable).

``run_kill_harness`` runs ``examples/pipeline.py`` (DistributedLog -> Spark -> DistributedLog) as
its own process group, SIGKILLs the whole group (driver, JVM, Python workers) at seeded random
moments, restarts it on the same checkpoint each time, while a producer thread appends input. At
``checkpoint_loss_at`` the checkpoint is also deleted, so that restart resumes from
``startingOffsets=committed:<output>``. A final ``Trigger.AvailableNow`` run catches up, then the
output is compared with the input: multiset equality and input order. By default the namespace
is an embedded one in the work directory and Spark runs ``local[2]``; ``uri`` runs it on a given
namespace (e.g. ZooKeeper + RADOS, bound beforehand) and ``master`` on another Spark master (e.g.
``local-cluster[2,1,1024]``: two executor JVMs, killed with the rest of the pipeline's processes).

``retry_scenario`` (``python -m tests.spark.faults retry URI CHECKPOINT``) runs a streaming query
on ``local[2,2]`` (a failed task is retried once) whose first attempt of partition 0 fails while
``write()`` is consuming its rows; it prints a JSON line with what the output log holds.

Command line::

    python -m tests.spark.faults kill --kills 20 --seed 7     # prints "FAULTS ... lost=0 duplicated=0"
    python -m tests.spark.faults kill --kills 4 --master 'local-cluster[2,1,1024]' \
        --uri distributedlog://127.0.0.1:2181/dl-faults --segments 'rados://POOL?conf=/etc/ceph/ceph.conf'
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from examples.pipeline import event_payload, read_log  # noqa: E402
from storage.log.staging import sweep  # noqa: E402

PIPELINE = ROOT / "examples" / "pipeline.py"


@dataclass
class HarnessResult:
    kills: int
    input: int
    output: int
    lost: int
    duplicated: int
    out_of_order: int
    orphans_swept: int
    seconds: float
    kill_delays: list[float] = field(default_factory=list)
    #: the startingOffsets the run after the checkpoint loss used ("committed:<output>" expected)
    resumed_with: str | None = None
    #: ledgers in the segment store that no segment references after the final sweep (leaks)
    leaked_ledgers: int = 0

    @property
    def ok(self) -> bool:
        clean = self.lost == 0 and self.duplicated == 0 and self.out_of_order == 0 and self.leaked_ledgers == 0
        return clean and self.output == self.input

    def line(self) -> str:
        return (
            f"FAULTS kills={self.kills} input={self.input} output={self.output} lost={self.lost} "
            f"duplicated={self.duplicated} out_of_order={self.out_of_order} orphans_swept={self.orphans_swept} "
            f"leaked_ledgers={self.leaked_ledgers} resumed_with={self.resumed_with} seconds={self.seconds:.0f}"
        )


class Producer(threading.Thread):
    """Appends events to the input log in small flushed bursts until stopped."""

    def __init__(self, uri: str, log: str, burst: int, pause_s: float, first_id: int = 0) -> None:
        super().__init__(daemon=True, name="producer")
        self.uri, self.log, self.burst, self.pause_s, self.first_id = uri, log, burst, pause_s, first_id
        self.stopping = threading.Event()
        self.count = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with storage.open_namespace(self.uri) as ns, ns.open_log(self.log).open_writer() as w:
                while not self.stopping.is_set():
                    for _ in range(self.burst):
                        w.write(storage.LogRecord(self.count + 1, event_payload(self.first_id + self.count)))
                        self.count += 1
                    w.flush()
                    self.stopping.wait(self.pause_s)
        except BaseException as e:
            self.error = e

    def stop(self) -> int:
        self.stopping.set()
        self.join(60)
        if self.error is not None:
            raise self.error
        return self.count


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _pipeline(
    uri: str, checkpoint: str, *extra: str, log_file: Path, master: str | None = None, max_per_trigger: int = 700
) -> subprocess.Popen[bytes]:
    with open(log_file, "ab") as out:
        cmd = [sys.executable, str(PIPELINE), "--uri", uri, "--checkpoint", checkpoint, "--no-producer"]
        if master is not None:
            cmd += ["--master", master]
        return subprocess.Popen(
            [*cmd, "--committed", "--max-per-trigger", str(max_per_trigger), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,  # its own process group: the JVM and Python workers die with it
        )


def _descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (from /proc; PySpark's daemons run in groups of their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the pipeline, its JVM and every Python worker at once (a machine crash)."""
    tree = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait for the group's stragglers (JVM, workers) to be gone
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def _wait_for(path: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"pipeline exited ({proc.returncode}) before {text!r}; see {path}")
        time.sleep(0.1)
    raise AssertionError(f"pipeline did not print {text!r} within {timeout_s}s; see {path}")


def compare(uri: str, input_log: str, output_log: str) -> tuple[int, int, int, int, int]:
    """(input, output, lost, duplicated, out_of_order) of the output against the input."""
    inputs = [json.loads(p)["id"] for _, p in read_log(uri, input_log)]
    outputs = [json.loads(p)["id"] for _, p in read_log(uri, output_log)]
    want, got = Counter(inputs), Counter(outputs)
    lost = sum((want - got).values())
    duplicated = sum((got - want).values())
    firsts: dict[int, int] = {}
    for pos, i in enumerate(outputs):
        firsts.setdefault(i, pos)
    order = [firsts[i] for i in inputs if i in firsts]
    out_of_order = sum(1 for a, b in itertools.pairwise(order) if b < a)
    return len(inputs), len(outputs), lost, duplicated, out_of_order


def run_kill_harness(
    workdir: Path,
    *,
    kills: int = 20,
    seed: int = 20240501,
    min_delay_s: float = 0.0,
    max_delay_s: float = 4.0,
    early_kill_share: float = 0.3,
    checkpoint_loss_at: int | None = 10,
    report: object = print,
    uri: str | None = None,
    master: str | None = None,
    max_per_trigger: int = 700,
) -> HarnessResult:
    """SIGKILL the pipeline ``kills`` times at seeded random moments: a share ``early_kill_share``
    within ``max_delay_s`` of its query's start (often before its first commit), the others
    ``min_delay_s`` to ``max_delay_s`` after its first batch; see the module docstring.

    ``uri``: the namespace (default: an embedded one in ``workdir``); a ZooKeeper namespace must be
    bound to its segment store already. Its logs ``events`` and ``enriched`` are used, and every
    ledger of its segment store that no segment of any of its logs references counts as leaked, so
    give it a namespace (and, on RADOS, a RADOS namespace) of its own. ``master``: the Spark master
    of the pipeline (default: ``examples/pipeline.py``'s, ``local[2]``); ``max_per_trigger``: the
    source's ``maxRecordsPerTrigger`` in every run (the final catch-up too)."""
    say = report if callable(report) else print
    rng = random.Random(seed)
    started = time.monotonic()
    uri = uri or f"distributedlog-local://{workdir / 'ns'}"
    spark_opts: dict[str, Any] = {"master": master, "max_per_trigger": max_per_trigger}
    checkpoint = str(workdir / "checkpoint")
    log_file = workdir / "pipeline.log"
    with storage.open_namespace(uri) as ns:
        ns.create_log("events", exist_ok=True)
    producer = Producer(uri, "events", burst=50, pause_s=0.2)
    producer.start()
    delays: list[float] = []
    resumed_with = None
    try:
        for k in range(kills):
            if checkpoint_loss_at is not None and k == checkpoint_loss_at:
                shutil.rmtree(checkpoint, ignore_errors=True)  # restart from committed:<output>
            run_log = workdir / f"run-{k:02d}.log"
            proc = _pipeline(uri, checkpoint, "--run-seconds", "0", log_file=run_log, **spark_opts)
            _wait_for(run_log, '"event": "started"', proc)  # the JVM is up (its start takes ~8 s)
            if k == checkpoint_loss_at:
                resumed_with = _starting_offsets(run_log)
            if rng.random() < early_kill_share:  # while the run starts up (maybe before its first commit)
                delay = rng.uniform(0.0, max_delay_s)
            else:  # while it runs: after its first batch went through
                _wait_for(run_log, '"event": "batch"', proc)
                delay = rng.uniform(min_delay_s, max_delay_s)
            delays.append(round(delay, 2))
            time.sleep(delay)
            if proc.poll() is not None:
                raise AssertionError(f"pipeline exited by itself ({proc.returncode}); see {log_file}")
            _kill_group(proc)
            say(f"kill {k + 1}/{kills} after {delay:.1f}s: output={len(read_log(uri, 'enriched'))}")
    finally:
        produced = producer.stop()
    proc = _pipeline(uri, checkpoint, "--catch-up", log_file=log_file, **spark_opts)
    if proc.wait(600) != 0:
        raise AssertionError(f"final catch-up run failed ({proc.returncode}); see {log_file}")
    with storage.open_namespace(uri) as ns:
        orphans = sweep(ns, older_than_ms=0)  # staged ledgers of killed tasks (never published)
        published = {s.ledger_id for name in ns.list_logs() for s in ns.open_log(name).log_segments()}
        leaked = len(set(ns.segstore.list_ledgers()) - published)
    n_in, n_out, lost, dup, disorder = compare(uri, "events", "enriched")
    assert n_in == produced, (n_in, produced)
    seconds = time.monotonic() - started
    return HarnessResult(
        kills, n_in, n_out, lost, dup, disorder, len(orphans), seconds, delays, resumed_with, leaked_ledgers=leaked
    )


def _starting_offsets(run_log: Path) -> str | None:
    for line in run_log.read_text(errors="replace").splitlines():
        if line.startswith('{"event": "starting"'):
            return str(json.loads(line).get("startingOffsets"))
    return None


# --- a task that fails in write() on its first attempt -----------------------------------------
def retry_scenario(uri: str, checkpoint: str, marker: str, rows: int) -> dict[str, object]:
    """Input ``rows`` records in one log; a streaming query (local[2,2]) whose first attempt of
    partition 0 fails after write() has consumed part of its rows; returns what happened."""
    os.environ.update(_env())
    from examples.pipeline import spark_session

    spark = spark_session("local[2,2]")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")  # write() gets rows early
    from pyspark.sql import functions as sf
    from pyspark.sql.types import BinaryType

    with storage.open_namespace(uri) as ns, ns.open_log("in").open_writer() as w:
        for i in range(rows):
            w.write(storage.LogRecord(i + 1, b"row-%06d" % i))
        w.flush()

    fail_at = rows * 3 // 8  # three quarters into partition 0

    @sf.udf(BinaryType())  # type: ignore[misc]
    def flaky(value: bytes, seq: int) -> bytes:
        from pyspark import TaskContext

        tc = TaskContext.get()
        if tc is not None and tc.partitionId() == 0 and tc.attemptNumber() == 0 and seq == fail_at:
            Path(marker).write_text("failed once")
            raise RuntimeError("injected failure of the first attempt")
        return bytes(value)

    src = (
        spark.readStream.format("distributedlog")
        .option("uri", uri)
        .option("streams", "in")
        .option("startingOffsets", "earliest")
        .option("minPartitions", "2")
        .load()
    )
    q = (
        src.select(flaky("value", "sequence_id").alias("value"))
        .writeStream.format("distributedlog")
        .option("uri", uri)
        .option("stream", "out")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    out = read_log(uri, "out")
    with storage.open_namespace(uri) as ns:
        try:
            staged = ns.metastore.children("/.staging")
        except storage.DLError:
            staged = []
        ledgers = sorted(ns.segstore.list_ledgers())
        published = sorted(s.ledger_id for name in ("in", "out") for s in ns.open_log(name).log_segments())
    spark.stop()
    return {
        "failed_once": Path(marker).exists(),
        "rows": len(out),
        "distinct": len({p for _, p in out}),
        "in_order": [p for _, p in out] == [b"row-%06d" % i for i in range(rows)],
        "staged_left": len(staged),
        "ledgers": ledgers,
        "published": published,
        # ledger ids are never reused: an id missing from the published ones was staged, then discarded
        "discarded_ids": sorted(set(range(1, max(ledgers, default=0) + 1)) - set(ledgers)),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="fault injection for the distributedlog sink")
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("kill", help="SIGKILL the pipeline at random moments; check exactly once")
    k.add_argument("--kills", type=int, default=20)
    k.add_argument("--seed", type=int, default=20240501)
    k.add_argument("--workdir")
    k.add_argument("--master", help="Spark master of the pipeline (default: local[2]), e.g. local-cluster[2,1,1024]")
    k.add_argument("--uri", help="namespace (default: an embedded one in the work directory); give it one of its own")
    k.add_argument("--segments", help="first bind the ZooKeeper namespace --uri to this segment store (rados://...)")
    k.add_argument("--max-per-trigger", type=int, default=700, help="maxRecordsPerTrigger of the pipeline's source")
    k.add_argument(
        "--checkpoint-loss-at", type=int, default=10, help="delete the checkpoint before this start (-1: never)"
    )
    r = sub.add_parser("retry", help="a task failing in write() on its first attempt")
    r.add_argument("uri")
    r.add_argument("checkpoint")
    r.add_argument("marker")
    r.add_argument("--rows", type=int, default=40000)
    args = p.parse_args(argv)
    if args.cmd == "retry":
        print("RETRY " + json.dumps(retry_scenario(args.uri, args.checkpoint, args.marker, args.rows)), flush=True)
        return 0
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="dl-faults-"))
    if args.segments:
        if not args.uri:
            p.error("--segments needs --uri (a ZooKeeper namespace)")
        storage.bind_namespace(args.uri, segments=args.segments)
    loss_at = None if args.checkpoint_loss_at < 0 else args.checkpoint_loss_at
    result = run_kill_harness(
        workdir,
        kills=args.kills,
        seed=args.seed,
        checkpoint_loss_at=loss_at,
        uri=args.uri,
        master=args.master,
        max_per_trigger=args.max_per_trigger,
    )
    print(result.line())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
