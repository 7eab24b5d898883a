"""A Spark driver of its own with separate executor processes (``local-cluster[2,1,1024]``: two
executor JVMs, each with its own Python workers) reading a namespace with
``readStream.format("distributedlog")`` and ``Trigger.AvailableNow``.

Run by ``tests/spark/test_multi_executor.py`` (a SparkContext per process: a local-cluster driver
cannot share the test session's JVM)::

    python tests/spark/multi_executor_job.py URI RESULT_JSON [--master local-cluster[2,1,1024]]

It writes, with the storage API: log ``a`` (three completed segments), log ``b`` (two completed
segments and an in-progress one left by a writer process that exited without closing) and log
``c`` (an in-progress segment whose writer stays open in this process). Run 1 reads everything
readers can see; then ``c``'s writer appends more and closes, and run 2 resumes from the
checkpoint. Every row is collected on the driver by ``foreachBatch`` with the partition id and,
from a Python UDF evaluated in the same task, where the task ran: the executor id and executor JVM
pid (found by walking up the UDF worker's process ancestry to ``CoarseGrainedExecutorBackend``)
and the worker's pid. RESULT_JSON gets the rows of each run, the rows the storage core's reader
expected, and the driver's Python and JVM pids.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from examples.pipeline import spark_session  # noqa: E402
from tests.spark.helpers import CONF, append_in_process, log_rows, write_segments  # noqa: E402

LOGS = ["a", "b", "c"]
EXECUTORS = 2


def _payloads(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i:03d}".encode() for i in range(n)]


def _row_json(row: tuple) -> list:  # type: ignore[type-arg]
    stream, dlsn, txid, seq, value = row
    return [stream, list(dlsn), txid, seq, None if value is None else bytes(value).hex()]


def _where_udf():  # type: ignore[no-untyped-def]
    """A UDF giving (executor_id, executor_jvm_pid, worker_pid, partition, stage, attempt) of the
    task evaluating it."""
    from pyspark.sql import functions as sf
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("executor_id", StringType()),
            StructField("executor_jvm_pid", IntegerType()),
            StructField("worker_pid", IntegerType()),
            StructField("partition", IntegerType()),
            StructField("stage", IntegerType()),
            StructField("attempt", IntegerType()),
        ]
    )

    def where(_seq: int) -> tuple:  # type: ignore[type-arg]
        import os as _os

        from pyspark import TaskContext

        executor_id, jvm_pid = "?", -1
        pid = _os.getpid()
        for _ in range(8):  # worker -> pyspark.daemon -> executor JVM (CoarseGrainedExecutorBackend)
            try:
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().decode(errors="replace").split("\0")
            except (OSError, ValueError, IndexError):
                break
            if any(a.endswith("CoarseGrainedExecutorBackend") for a in args) and "--executor-id" in args:
                executor_id, jvm_pid = args[args.index("--executor-id") + 1], pid
                break
            if pid <= 1:
                break
        tc = TaskContext.get()
        return (
            executor_id,
            jvm_pid,
            _os.getpid(),
            tc.partitionId() if tc else -1,
            tc.stageId() if tc else -1,
            tc.attemptNumber() if tc else -1,
        )

    return sf.udf(where, schema, useArrow=False).asNondeterministic()


def _wait_for_executors(spark, n: int, timeout_s: float = 120) -> int:  # type: ignore[no-untyped-def]
    """Wait until ``n`` executors registered (so that the first batch's tasks spread over them)."""
    sc = spark.sparkContext._jsc.sc()
    deadline = time.monotonic() + timeout_s
    while True:
        registered = sc.getExecutorMemoryStatus().size() - 1  # minus the driver's block manager
        if registered >= n or time.monotonic() > deadline:
            return int(registered)
        time.sleep(0.2)


def _run(spark, uri: str, checkpoint: str, run: int, sink: list[dict]) -> int:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as sf

    df = (
        spark.readStream.format("distributedlog")
        .option("uri", uri)
        .option("streams", ",".join(LOGS))
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "120")  # several batches
        .option("maxRecordsPerPartition", "10")  # many tasks per batch: both executors get some
        .load()
    )
    where = _where_udf()
    out = df.select("*", sf.spark_partition_id().alias("spark_partition"), where("sequence_id").alias("w"))

    def collect(batch, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        for r in batch.collect():
            d = r["dlsn"]
            w = r["w"]
            sink.append(
                {
                    "run": run,
                    "batch": batch_id,
                    "row": _row_json(
                        (r["stream"], (d["lssn"], d["entry_id"], d["slot_id"]), r["txid"], r["sequence_id"], r["value"])
                    ),
                    "spark_partition": r["spark_partition"],
                    "executor_id": w["executor_id"],
                    "executor_jvm_pid": w["executor_jvm_pid"],
                    "worker_pid": w["worker_pid"],
                    "task_partition": w["partition"],
                    "stage": w["stage"],
                    "attempt": w["attempt"],
                }
            )

    q = out.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint).trigger(availableNow=True)
    query = q.start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    for p in query.recentProgress:
        print(
            f"PROGRESS run={run} batch={p.get('batchId')} rows={p.get('numInputRows')} ms={p.get('durationMs')}",
            flush=True,
        )
    return sum(1 for p in query.recentProgress if (p.get("numInputRows") or 0) > 0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("uri", help="namespace URI (a bound ZooKeeper namespace, e.g. on RADOS)")
    p.add_argument("result", help="where to write the JSON result")
    p.add_argument("--master", default=f"local-cluster[{EXECUTORS},1,1024]")
    p.add_argument("--checkpoint", help="checkpoint directory (default: a new temporary one)")
    args = p.parse_args(argv)
    uri = args.uri
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="dl-multi-executor-ckpt-")
    started = time.monotonic()

    write_segments(uri, "a", [_payloads("a0", 40), _payloads("a1", 25), _payloads("a2", 35)])
    txid = write_segments(uri, "b", [_payloads("b0", 30), _payloads("b1", 20)], txid=1000)
    append_in_process(uri, "b", _payloads("b-dead-writer", 15), txid=txid, close=False)  # stays in progress
    ns = storage.open_namespace(uri, CONF)
    live = ns.open_log("c").open_writer()  # in progress while run 1 reads it
    for i, payload in enumerate(_payloads("c-live", 25)):
        live.write(storage.LogRecord(5000 + i, payload))
    live.flush()
    expected_1 = [_row_json(r) for r in log_rows(uri, LOGS)]
    segments = {}
    for log in LOGS:
        segments[log] = [{"lssn": s.lssn, "in_progress": s.in_progress} for s in ns.open_log(log).log_segments()]

    data_seconds = time.monotonic() - started
    spark = spark_session(args.master)
    executors = _wait_for_executors(spark, EXECUTORS)
    startup_seconds = time.monotonic() - started - data_seconds
    driver_jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    spark_started = time.monotonic()
    sink: list[dict] = []
    batches_1 = _run(spark, uri, checkpoint, 1, sink)
    run_seconds = [time.monotonic() - spark_started]
    for i, payload in enumerate(_payloads("c-live-more", 12)):  # the in-progress segment grows, then closes
        live.write(storage.LogRecord(6000 + i, payload))
    live.flush()
    live.close()
    expected_all = [_row_json(r) for r in log_rows(uri, LOGS)]
    batches_2 = _run(spark, uri, checkpoint, 2, sink)  # resumes from the checkpoint
    run_seconds.append(time.monotonic() - spark_started - run_seconds[0])
    spark_seconds = time.monotonic() - spark_started
    spark.stop()
    ns.close()
    result = {
        "master": args.master,
        "driver_pid": os.getpid(),
        "driver_jvm_pid": driver_jvm_pid,
        "executors_registered": executors,
        "segments": segments,
        "expected_run1": expected_1,
        "expected_all": expected_all,
        "batches": [batches_1, batches_2],
        "rows": sink,
        "data_seconds": round(data_seconds, 1),
        "startup_seconds": round(startup_seconds, 1),
        "run_seconds": [round(x, 1) for x in run_seconds],
        "spark_seconds": round(spark_seconds, 1),
        "seconds": round(time.monotonic() - started, 1),
    }
    Path(args.result).write_text(json.dumps(result))
    by_executor: dict[str, int] = {}
    for r in sink:
        by_executor[r["executor_id"]] = by_executor.get(r["executor_id"], 0) + 1
    print(
        f"MULTI_EXECUTOR rows={len(sink)} expected={len(expected_all)} batches={batches_1}+{batches_2} "
        f"rows_by_executor={json.dumps(by_executor, sort_keys=True)} seconds={result['seconds']}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
