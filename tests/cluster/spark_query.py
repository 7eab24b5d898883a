"""The Spark side of the cluster's Spark fault test (``tests/cluster/test_spark_faults.py``), run inside a
client host.

``python -m tests.cluster.spark_query run --uri URI --source IN --sink OUT --checkpoint DIR --conf JSON ...``
    The driver: a SparkSession (:func:`dl_spark.spark_session`, the settings in ``--conf``: the cluster's
    ``spark.master``, ``spark.driver.host``/``bindAddress``, and the test's own), then, once ``--executors``
    executors registered, a streaming query ``readStream.format("distributedlog")`` of log ``IN`` ->
    ``value = PREFIX || value`` -> ``writeStream.format("distributedlog")`` into log ``OUT`` (the exactly-once
    sink), ``processingTime`` trigger, checkpoint ``DIR``. Prints (flushed)::

        EXECUTORS <n> <host,host...> <monotonic>   whenever the set of executors' hosts changes
        STARTED <query id> <run id>
        RESTARTED <n> <cause> <error>               the query failed to start (cause ``connect-back``, see
                                                    CONNECT_BACK), or failed (cause ``failure``) and ``--restarts``
                                                    allows another run: started again from the checkpoint (as a
                                                    user's supervisor restarts a failed query)
        BATCH <batch id> <input rows> <monotonic> ms=<trigger execution ms>   each completed micro-batch
        DRAINING <IN's last DLSN>                    after SIGUSR1: the end the query must commit
        DRAINED <batch id> <OUT's committed offset>  the sink's last commit covers it
        STOPPED <batches> <rows> restarts=<n> failures=<n>   ``failures``: the restarts of cause ``failure``
        FAILED <exception>                          the query died (exit 1)

    SIGUSR1: drain (wait until the sink's last commit on ``OUT`` covers ``IN``'s last record as it is at the
    signal; stop the writers of ``IN`` first), then stop. SIGTERM: stop now.
``python -m tests.cluster.spark_query collect --uri URI --source IN --sink OUT --checkpoint DIR --history DIR``
    After the query stopped (and the writers of ``IN``): reads both logs whole and records them for the history
    checker: every ``IN`` record as the final read of ``IN`` (``rec.final_read``) and as sink input
    (``rec.input``), every ``OUT`` record as sink output (``rec.output``, the prefix
    removed, with the micro-batch that wrote it: its txid is that batch's ``batchTimestampMs`` from the
    checkpoint's ``offsets/<batch>``), and each committed batch's row count (``rec.sink_batch``: the ``IN``
    records between the previous batch's end offset and its own). Prints ``COLLECTED in=.. out=.. batches=..
    unprefixed=.. unbatched=.. last_commit_batch=.. last_commit_rows=.. uncovered_inputs=.. staged_left=..``
    (``staged_left``: staged ledgers neither published nor discarded, e.g. a killed task's not yet swept).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from dl_spark.commits import read_batch_info  # noqa: E402
from dl_spark.offsets import offset_to_dlsn  # noqa: E402
from storage.formats.dlsn import DLSN  # noqa: E402
from storage.log.staging import list_staged  # noqa: E402
from tests.cluster.clients import CLIENT_CONF, say  # noqa: E402
from tools.history_events import HistoryRecorder  # noqa: E402

#: What the query puts before every input value (so an output value maps back to its input value).
PREFIX = "out:"
#: Spark's error when a Python process it started on the driver did not connect back within its fixed 10 s
#: (``PythonWorkerFactory.createSimpleWorker``, not configurable). The source's runner process is started once, when
#: the query starts; on a 2-core machine running other suites (load 20+) its imports alone took more than 10 s once.
#: Before the first batch the driver then starts the query again on the same checkpoint (at most 3 times); later it
#: is a failure like any other.
CONNECT_BACK = "Python worker failed to connect back"
#: How often the driver starts the query again when it failed to start for CONNECT_BACK (before the first batch).
CONNECT_BACK_RESTARTS = 6


# ------------------------------------------------------------------------------------------------ the driver
def _executor_hosts(spark: Any) -> list[str]:
    """The hosts of the registered executors (block managers other than the driver's)."""
    sc = spark.sparkContext
    driver_host = sc.getConf().get("spark.driver.host")
    status = sc._jsc.sc().getExecutorMemoryStatus()
    it = status.keysIterator()
    hosts = []
    while it.hasNext():
        hosts.append(str(it.next()).rsplit(":", 1)[0])
    return sorted(h for h in hosts if h != driver_host)


def _committed_end(uri: str, sink: str, source: str) -> DLSN | None:
    import dl_spark

    commit = dl_spark.last_commit(uri, sink)
    offsets = (commit or {}).get("offsets")
    if not isinstance(offsets, dict) or source not in offsets:
        return None
    return offset_to_dlsn(offsets[source], source)


def run(args: argparse.Namespace) -> int:
    import dl_spark

    drain = threading.Event()
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: drain.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    conf: dict[str, str] = json.loads(args.conf)
    spark = dl_spark.spark_session(
        conf.get("spark.master", "local[2]"),
        app_name="dl-cluster-faults",
        host=conf.get("spark.driver.host", "127.0.0.1"),
        conf=conf,
        log_level=args.log_level,
    )
    # Task starts, ends and losses on stdout too (a task lost with its executor is logged at INFO only).
    jvm: Any = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.scheduler.TaskSetManager", jvm.org.apache.logging.log4j.Level.INFO
    )
    seen_hosts: list[str] | None = None

    def watch_executors() -> list[str]:
        nonlocal seen_hosts
        hosts = _executor_hosts(spark)
        if hosts != seen_hosts:
            seen_hosts = hosts
            say("EXECUTORS", len(hosts), ",".join(hosts) or "-", f"{time.monotonic():.3f}")
        return hosts

    deadline = time.monotonic() + args.executor_timeout
    while len(watch_executors()) < args.executors and time.monotonic() < deadline and not stop.is_set():
        time.sleep(0.2)

    def start() -> Any:
        df = (
            spark.readStream.format("distributedlog")
            .option("uri", args.uri)
            .option("streams", args.source)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", str(args.max_per_trigger))
            .option("maxRecordsPerPartition", str(args.max_per_partition))
            .option("minPartitions", str(args.min_partitions))
            .load()
        )
        out = df.selectExpr(f"concat('{PREFIX}', CAST(value AS STRING)) AS value")
        q = (
            out.writeStream.format("distributedlog")
            .option("uri", args.uri)
            .option("stream", args.sink)
            .option("checkpointLocation", args.checkpoint)
            .trigger(processingTime=args.trigger)
            .start()
        )
        say("STARTED", q.id, q.runId)
        return q

    query = start()
    restarts = failures = 0
    batches: set[int] = set()
    rows = 0
    target: DLSN | None = None
    status = 0
    try:
        while not stop.is_set():
            for p in query.recentProgress:
                bid = int(p["batchId"])
                if bid not in batches and "addBatch" in (p.get("durationMs") or {}):  # it ran (not a no-data event)
                    batches.add(bid)
                    rows += int(p["numInputRows"])
                    ms = p.get("durationMs") or {}
                    say(
                        "BATCH",
                        bid,
                        int(p["numInputRows"]),
                        f"{time.monotonic():.3f}",
                        f"ms={ms.get('triggerExecution')}",
                    )
            if not query.isActive:
                error = str(query.exception()).replace("\n", " ")
                connect_back = not batches and CONNECT_BACK in error
                if (connect_back and restarts - failures < CONNECT_BACK_RESTARTS) or failures < args.restarts:
                    if not connect_back:
                        failures += 1
                    restarts += 1
                    say("RESTARTED", restarts, "connect-back" if connect_back else "failure", error[:300])
                    time.sleep(2)
                    query = start()
                    continue
                say("FAILED", error[:2000])
                status = 1
                break
            watch_executors()
            if drain.is_set():
                if target is None:
                    with storage.open_namespace(args.uri, CLIENT_CONF) as ns:
                        target = ns.open_log(args.source).last_dlsn()
                    say("DRAINING", target)
                end = _committed_end(args.uri, args.sink, args.source)
                if end is not None and end > target:
                    say("DRAINED", (dl_spark.last_commit(args.uri, args.sink) or {}).get("batchId"), end)
                    break
            time.sleep(0.2)
    finally:
        if query.isActive:
            query.stop()
        say("STOPPED", len(batches), rows, f"restarts={restarts}", f"failures={failures}")
        spark.stop()
    return status


def restart_counts(lines: list[str]) -> dict[str, int]:
    """The driver's restarts from its output ``lines``: ``restarts`` and ``failures`` as its ``STOPPED`` line
    reports them (-1 before it stopped), and ``counted``/``counted_failures``: its ``RESTARTED`` lines (all, and
    those of cause ``failure``)."""
    restarted = [ln.split(" ", 3) for ln in lines if ln.startswith("RESTARTED ")]
    out = {"restarts": -1, "failures": -1, "counted": len(restarted)}
    out["counted_failures"] = sum(1 for r in restarted if len(r) > 2 and r[2] == "failure")
    for ln in lines:
        if ln.startswith("STOPPED "):
            for word in ln.split()[3:]:
                key, _, value = word.partition("=")
                if key in ("restarts", "failures"):
                    out[key] = int(value)
    return out


# ------------------------------------------------------------------------------------------------ collect
def _read_all(ns: Any, log: str) -> list[Any]:
    out: list[Any] = []
    with ns.open_log(log).open_reader(storage.DLSN.INITIAL) as r:
        while True:
            got = r.read_bulk(1000, non_blocking=True)
            if not got:
                return out
            out.extend(got)


def collect(args: argparse.Namespace) -> int:
    import dl_spark

    offsets_dir = Path(args.checkpoint) / "offsets"
    batch_ids = sorted(int(p.name) for p in offsets_dir.iterdir() if p.name.isdigit())
    if batch_ids and batch_ids[0] != 0:
        raise SystemExit(f"{offsets_dir} starts at batch {batch_ids[0]}: raise spark.sql.streaming.minBatchesToRetain")
    commit = dl_spark.last_commit(args.uri, args.sink) or {}
    raw_batch = commit.get("batchId")
    last_batch = raw_batch if isinstance(raw_batch, int) else -1
    ends: list[tuple[int, DLSN]] = []
    batch_of_ts: dict[int, int] = {}
    for bid in batch_ids:
        info = read_batch_info(args.checkpoint, bid)
        if info is None or bid > last_batch:
            continue  # planned but never published (nothing of it may be visible)
        flat = info.flat_offsets() or {}
        if args.source in flat:
            ends.append((bid, offset_to_dlsn(flat[args.source], args.source)))
        if info.timestamp_ms is not None:
            batch_of_ts[info.timestamp_ms] = bid
    with storage.open_namespace(args.uri, CLIENT_CONF) as ns:
        inputs = _read_all(ns, args.source)
        outputs = _read_all(ns, args.sink)
        staged = list_staged(ns)  # what tasks staged and no commit published or swept (a killed task's, ...)
    with HistoryRecorder(args.history, "spark-collect") as rec:
        counts: dict[int, int] = {}
        i = 0
        for bid, end in ends:  # batch b holds the input records in [end of b-1, end of b)
            n = 0
            while i < len(inputs) and inputs[i].dlsn < end:
                n += 1
                i += 1
            counts[bid] = n
        for x in inputs:  # the final read of the input log, and the sink's input
            rec.final_read(args.source, x.payload, x.dlsn, x.txid, seq=x.sequence_id)
            rec.input(args.source, x.payload, dlsn=x.dlsn)
        unprefixed = unbatched = 0
        for x in outputs:
            value = x.payload.decode("utf-8", "backslashreplace")
            if value.startswith(PREFIX):
                value = value[len(PREFIX) :]
            else:
                unprefixed += 1
            batch = batch_of_ts.get(x.txid)
            unbatched += batch is None
            rec.output(value, batch=batch, dlsn=x.dlsn)
        for bid, n in counts.items():
            if n:
                rec.sink_batch(bid, n)
    say(
        f"COLLECTED in={len(inputs)} out={len(outputs)} batches={sum(1 for n in counts.values() if n)} "
        f"unprefixed={unprefixed} unbatched={unbatched} last_commit_batch={last_batch} "
        f"last_commit_rows={commit.get('rows')} uncovered_inputs={len(inputs) - i} staged_left={len(staged)}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.cluster.spark_query")
    p.add_argument("program", choices=("run", "collect"))
    p.add_argument("--uri", required=True)
    p.add_argument("--source", default="in")
    p.add_argument("--sink", default="out")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--history", help="collect: the history directory")
    p.add_argument("--conf", default="{}", help="run: Spark settings (JSON object)")
    p.add_argument("--trigger", default="1 second")
    p.add_argument("--max-per-trigger", type=int, default=200)
    p.add_argument("--max-per-partition", type=int, default=100)
    p.add_argument("--min-partitions", type=int, default=2, help="run: tasks a batch at least (one per executor)")
    p.add_argument("--executors", type=int, default=0, help="run: wait for this many executors before starting")
    p.add_argument("--executor-timeout", type=float, default=120.0)
    p.add_argument("--log-level", default="WARN")
    p.add_argument("--restarts", type=int, default=0, help="run: restart a failed query this many times")
    args = p.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if args.program == "collect":
        if not args.history:
            p.error("collect needs --history")
        return collect(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
