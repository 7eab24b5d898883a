"""SIGKILLs under a Real-Time Mode query with the exactly-once real-time sink, at seeded moments inside batches.

:func:`run` starts a driver process (``python -m tests.jvm.rt_kill driver WORK URI MASTER``: one SparkSession on
``MASTER``, ``local-cluster[2,1,1024]`` by default, two executor JVMs) running ``distributedlog-rt`` from log
``src`` into log ``out`` through :func:`dl_spark.realtime.write_stream`, 5 s batches, checkpoint ``WORK/ck``. A
producer thread appends to ``src`` the whole time. At seeded moments the harness SIGKILLs:

* the driver: its whole process group (the Python driver, its JVM and its executors, their gateways), then starts a
  new driver on the same checkpoint;
* an executor: the executor JVM that runs the query's task (the driver notes it from Spark's status store) once its
  gateway holds the lock of ``out`` (the embedded namespace's lock files record their holder's pid). Spark runs the
  lost task again on the other executor, from the batch's start (an executor's loss does not count as the task's
  failure); were the query to fail instead, the driver would start it again on the same checkpoint.

Each kill is aimed at a batch: batch 0 (the driver's first batch since it started the query: nothing committed
by it yet) or a later one, at a seeded delay inside it. At the end the producer stops, the driver runs until a batch
that ends at the tail of ``src`` is committed, and the history checker (:mod:`tools.history`) compares ``out`` with
``src``: every source record exactly once, in order (``sink_missing``, ``sink_duplicated``, ``sink_reordered``), and
each output record's transaction id is its source record's sequence id.

The driver writes what it does to ``WORK/driver.log``: ``START n`` when it starts the query (the n-th time),
``BATCH n id`` when batch ``id`` completed, ``FAILED n ...`` when the query failed, ``DONE`` at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from tests.spark.faults import _descendants, _kill_group  # noqa: E402
from tests.storage.test_writer_reader import read_all  # noqa: E402
from tools.history import History, HistoryRecorder, check  # noqa: E402

SRC, OUT = "src", "out"
TRIGGER = "5 seconds"
DEFAULT_MASTER = "local-cluster[2,1,1024]"


# --- the driver process --------------------------------------------------------------------------------------------
def _say(work: Path, line: str) -> None:
    with open(work / "driver.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _note_task_executors(spark: Any, work: Path) -> None:
    """Write the ids of the executors running a task of an active stage to ``WORK/task-executors`` (from Spark's
    status store, through the driver's JVM)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    stages = store.activeStages()
    ids = set()
    for i in range(stages.size()):
        stage = stages.apply(i)
        tasks = store.taskList(stage.stageId(), stage.attemptId(), 1000)
        for j in range(tasks.size()):
            task = tasks.apply(j)
            if task.status() == "RUNNING":
                ids.add(str(task.executorId()))
    tmp = work / "task-executors.tmp"
    tmp.write_text(" ".join(sorted(ids)))
    os.replace(tmp, work / "task-executors")


def driver(work: Path, uri: str, master: str) -> int:
    """Run the query until ``WORK/stop`` exists and a batch ending at ``src``'s tail is committed; start it again
    on the same checkpoint whenever it fails."""
    from dl_spark import realtime
    from dl_spark.session import spark_session
    from tests.jvm.test_realtime_source import _after_last, _committed_end

    os.environ["DLOG_PYTHON"] = sys.executable
    os.environ["DLOG_GATEWAY_QUIET"] = "1"
    jars = ",".join(str(p) for p in realtime.jar_paths())
    spark = spark_session(master, app_name="dl-rt-kill", pythonpath=[str(ROOT)], conf={"spark.jars": jars})
    starts = _starts(work)  # the query starts of the drivers before this one
    while True:
        starts += 1
        df = realtime.read_stream(spark, uri, SRC, startingOffsets="earliest")
        q = realtime.write_stream(df, uri, OUT, str(work / "ck"), trigger=TRIGGER)
        _say(work, f"START {starts}")
        seen: set[int] = set()
        while True:
            _note_task_executors(spark, work)
            for p in q.recentProgress:
                if p["batchId"] not in seen:
                    seen.add(p["batchId"])
                    _say(work, f"BATCH {starts} {p['batchId']}")
            exc = q.exception()
            if exc is not None:
                _say(work, f"FAILED {starts} {str(exc).splitlines()[0][:300]}")
                with contextlib.suppress(Exception):
                    q.stop()
                break
            if (work / "stop").exists() and _committed_end(q) == {SRC: _after_last(uri, SRC)}:
                q.stop()
                _say(work, "DONE")
                spark.stop()
                return 0
            time.sleep(0.2)


# --- the harness ---------------------------------------------------------------------------------------------------
class Producer(threading.Thread):
    """Appends ``r-<n>`` records to ``src`` at about ``rate`` a second (txid = n) until stopped."""

    def __init__(self, uri: str, rate: float = 100.0) -> None:
        super().__init__(daemon=True, name="rt-kill-producer")
        self.uri, self.rate = uri, rate
        self.stop = threading.Event()
        self.written = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conf: dict[str, object] = {"enableImmediateFlush": True, "writerOutputBufferSize": 0}
            with storage.open_namespace(self.uri, conf) as ns, ns.open_log(SRC) as dlm:
                w = dlm.open_async_writer()
                start = time.monotonic()
                while not self.stop.is_set():
                    self.written += 1
                    w.write(storage.LogRecord(self.written, b"r-%d" % self.written)).result(30)
                    delay = start + self.written / self.rate - time.monotonic()
                    if delay > 0:
                        self.stop.wait(delay)
                w.close()
        except BaseException as e:  # reported by the harness
            self.error = e


@dataclass
class KillResult:
    kills: list[str] = field(default_factory=list)
    starts: int = 0
    failed_queries: int = 0
    input: int = 0
    output: int = 0
    txid_mismatches: int = 0
    check_line: str = ""
    ok: bool = False
    seconds: float = 0.0

    def line(self) -> str:
        return (
            f"RTKILL kills={len(self.kills)} ({', '.join(self.kills)}) driver_starts={self.starts} "
            f"query_failures={self.failed_queries} input={self.input} output={self.output} "
            f"txid_mismatches={self.txid_mismatches} seconds={self.seconds:.0f} | {self.check_line}"
        )


def _driver_log(work: Path) -> list[str]:
    path = work / "driver.log"
    return path.read_text().splitlines() if path.exists() else []


def _start_driver(work: Path, uri: str, master: str, logs: list[Any]) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    out = open(work / f"driver-{len(logs)}.out", "wb")  # noqa: SIM115  # closed by the caller
    logs.append(out)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.jvm.rt_kill", "driver", str(work), uri, master],
        cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _lock_holders(ns_dir: Path) -> set[int]:
    """Pids of live processes that hold a lock of the embedded namespace (its lock files name their holder)."""
    held: set[int] = set()
    for lock in ns_dir.glob("**/*.locks/*.lock"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(json.loads(lock.read_text() or "{}").get("pid", 0))
            if pid and Path(f"/proc/{pid}").exists():
                held.add(pid)
    return held


def _task_executor(driver_pid: int, work: Path) -> int | None:
    """The executor JVM (a descendant of the driver) that runs the query's task now, as the driver last saw in
    Spark's status store, and whose gateway holds the output log's lock (the task's writer took the log)."""
    path = work / "task-executors"
    running = set(path.read_text().split()) if path.exists() else set()
    holders = _lock_holders(work / "ns")
    for pid in _descendants(driver_pid):
        args = _cmdline(pid).split()
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" not in args or "--executor-id" not in args:
            continue
        if args[args.index("--executor-id") + 1] in running and any(d in holders for d in _descendants(pid)):
            return pid
    return None


def _starts(work: Path) -> int:
    """How many times the driver processes started the query."""
    return len([x for x in _driver_log(work) if x.startswith("START")])


def _running_batch(work: Path) -> int:
    """The id of the batch running now: the one after the last committed (the checkpoint's ``commits``)."""
    commits = work / "ck" / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    return max(ids) + 1 if ids else 0


def _wait(what: str, cond: Any, proc: subprocess.Popen[bytes], timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if proc.poll() is not None:
            raise RuntimeError(f"the driver exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout_s:.0f} s")
        time.sleep(0.1)


def run(work: Path, plan: list[tuple[str, str]], seed: int, master: str = DEFAULT_MASTER) -> KillResult:
    """Run the query under the kills of ``plan`` (``("driver" | "executor", "batch0" | "later")`` each), at delays
    drawn from ``random.Random(seed)``; check the output. ``work`` holds the namespace, checkpoint and logs."""
    started = time.monotonic()
    rng = random.Random(seed)
    ns_dir = work / "ns"
    uri = f"distributedlog-local://{ns_dir}"
    with storage.open_namespace(uri) as ns:
        ns.create_log(SRC)
        ns.create_log(OUT)
    result = KillResult()
    producer = Producer(uri)
    producer.start()
    outs: list[Any] = []
    proc = _start_driver(work, uri, master, outs)
    try:
        expect = 1  # the number of the query start the next kill is aimed at
        for who, when in plan:
            _wait(f"the query's start number {expect}", lambda e=expect: _starts(work) >= e, proc)
            current = _starts(work)
            if when == "later":
                _wait("a batch of this start", lambda c=current: any(
                    x.startswith(f"BATCH {c} ") for x in _driver_log(work)), proc)  # fmt: skip
            # the query's task runs and its writer holds the output log: records flow in this batch
            _wait("the task's executor", lambda p=proc: _task_executor(p.pid, work) is not None, proc)
            time.sleep(rng.uniform(0.2, 2.0) if when == "batch0" else rng.uniform(0.5, 4.0))
            label = f"{who}@batch{_running_batch(work)}"
            if who == "driver":
                _kill_group(proc)
                result.kills.append(label)
                proc = _start_driver(work, uri, master, outs)
                expect = current + 1
                continue
            victim = _task_executor(proc.pid, work)
            if victim is None:  # the batch ended meanwhile and no task runs this instant: aim again
                _wait("the task's executor", lambda p=proc: _task_executor(p.pid, work) is not None, proc)
                victim = _task_executor(proc.pid, work)
                label = f"{who}@batch{_running_batch(work)}"
            assert victim is not None
            os.kill(victim, signal.SIGKILL)
            result.kills.append(label)
            # Spark runs the lost task again on another executor (an executor's loss is not the task's failure),
            # or the query fails and the driver starts it again
            _wait(
                "the query's task running again",
                lambda p=proc, v=victim, c=current: _starts(work) > c or _task_executor(p.pid, work) not in (None, v),
                proc,
            )
            expect = _starts(work)
        time.sleep(rng.uniform(2.0, 4.0))
        producer.stop.set()
        producer.join(60)
        if producer.error is not None:
            raise RuntimeError(f"the producer failed: {producer.error!r}")
        (work / "stop").touch()
        _wait("the driver's end (a batch committed at the tail of src)", lambda: proc.poll() is not None, proc, 300)
    finally:
        producer.stop.set()
        if proc.poll() is None:
            _kill_group(proc)
        for f in outs:
            f.close()
    lines = _driver_log(work)
    if "DONE" not in lines:
        raise RuntimeError(f"the driver did not finish: {lines[-5:]}")
    result.starts = _starts(work)
    result.failed_queries = len([x for x in lines if x.startswith("FAILED")])
    history_dir = work / "history"
    with HistoryRecorder(history_dir, "final") as rec, storage.open_namespace(uri) as ns:
        src = read_all(ns.open_log(SRC))
        out = read_all(ns.open_log(OUT))
        for r in src:
            rec.input(SRC, bytes(r.payload), dlsn=r.dlsn)
        for r in out:
            rec.output(bytes(r.payload), dlsn=r.dlsn)
    by_payload = {bytes(r.payload): r.sequence_id for r in src}
    result.txid_mismatches = sum(1 for r in out if by_payload.get(bytes(r.payload)) != r.txid)
    result.input, result.output = len(src), len(out)
    report = check(History.load(history_dir))
    result.check_line = report.line()
    result.ok = report.ok and result.txid_mismatches == 0 and result.input == result.output > 0
    result.seconds = time.monotonic() - started
    return result


def main(argv: list[str]) -> int:
    """``driver WORK URI MASTER`` (the driver process), or ``run WORK [SEED]`` (the harness, printing its line)."""
    if argv[0] == "driver":
        return driver(Path(argv[1]), argv[2], argv[3])
    work = Path(argv[1])
    seed = int(argv[2]) if len(argv) > 2 else 7
    plan = [("driver", "batch0"), ("executor", "batch0"), ("executor", "later"), ("driver", "later")]
    r = run(work, plan, seed)
    print(r.line())
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
