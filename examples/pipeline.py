"""DistributedLog -> Spark Structured Streaming -> DistributedLog, exactly once, on the embedded
namespace (no server).

A producer process appends JSON events to the input log while a streaming query reads them
(``readStream.format("distributedlog")``), transforms them (parse JSON, upper-case the user,
compute cents) and writes them exactly once to the output log (``writeStream.format("distributedlog")``
with a checkpoint). Once the producer is done and the output caught up, the output log is read
back and checked: every input event exactly once, in input order::

    python examples/pipeline.py                      # the demo: prints "PIPELINE OK input=N output=N ..."
    python examples/pipeline.py --uri URI --checkpoint DIR --run-seconds 0 --no-producer
                                                     # just the query, until killed (tests/spark/faults.py)
    python examples/pipeline.py --uri URI --checkpoint DIR --catch-up --no-producer
                                                     # one Trigger.AvailableNow run, then exit

With ``--committed`` a run whose checkpoint is missing starts from the source positions the sink
recorded in the output log (``startingOffsets=committed:<output>``) instead of the earliest record.

On a Spark standalone cluster the executors connect back to the driver, at the address it advertises::

    python examples/pipeline.py --uri URI --checkpoint DIR --master spark://MASTER:7077 --driver-host 10.0.0.5

``--driver-host`` is that address (``spark.driver.host``; default 127.0.0.1, which only executors on this machine
reach); the driver also listens on it unless ``--driver-bind-address`` names another local address (behind NAT or
in a container: the address to listen on, while ``--driver-host`` is the one workers reach), on port
``--driver-port`` (default: a free one). The namespace must be one every worker reaches too (ZooKeeper, or a path
they all mount). With a master other than ``local[...]`` the run fails loudly instead of hanging when the executors
cannot reach the driver: if no executor has registered within ``--startup-timeout`` seconds of the start (default
180; with the producer, also: or no micro-batch has read a record by then), it prints ``PIPELINE FAILED: ...`` on
stderr, naming the driver address the executors were told (host and port) and how to fix it, and exits 3.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from storage.errors import EndOfStreamError  # noqa: E402

#: Exit code of a run whose executors never reached the driver (see :class:`StartupWatchdog`).
EXIT_STARTUP = 3


def emit(event: str, **fields: object) -> None:
    """One JSON line on stdout (the fault harness reads them)."""
    print(json.dumps({"event": event, **fields}), flush=True)


def event_payload(i: int) -> bytes:
    """Input event number ``i``."""
    return json.dumps({"id": i, "user": f"user-{i % 7}", "amount": round(i * 0.25, 2)}).encode()


def produce(uri: str, log: str, start: int, count: int, per_flush: int, pause_s: float) -> None:
    """Append events ``start .. start+count-1`` to ``log`` (txid = id + 1), ``per_flush`` at a time."""
    with storage.open_namespace(uri) as ns, ns.open_log(log).open_writer() as w:
        for first in range(start, start + count, per_flush):
            for i in range(first, min(first + per_flush, start + count)):
                w.write(storage.LogRecord(i + 1, event_payload(i)))
            w.flush()
            time.sleep(pause_s)


def read_log(uri: str, log: str) -> list[tuple[int, bytes]]:
    """Every (txid, payload) of ``log`` that readers can see now."""
    out: list[tuple[int, bytes]] = []
    with storage.open_namespace(uri) as ns:
        if not ns.log_exists(log):
            return out
        with ns.open_log(log).open_reader(storage.DLSN.INITIAL) as r:
            while True:
                try:
                    batch = r.read_bulk(5000, non_blocking=True)
                except EndOfStreamError:
                    break
                if not batch:
                    break
                out.extend((rec.txid, bytes(rec.payload)) for rec in batch)
    return out


def check_output(uri: str, input_log: str, output_log: str) -> dict[str, int]:
    """Compare the output with the input: counts, duplicates, missing, order violations."""
    inputs = [json.loads(p)["id"] for _, p in read_log(uri, input_log)]
    outputs = [json.loads(p)["id"] for _, p in read_log(uri, output_log)]
    seen = Counter(outputs)
    expected = Counter(inputs)
    duplicates = sum(n - 1 for n in seen.values() if n > 1) + sum(n for i, n in seen.items() if i not in expected)
    missing = sum(1 for i in expected if i not in seen)
    first_positions: dict[int, int] = {}
    for pos, i in enumerate(outputs):
        first_positions.setdefault(i, pos)
    ordered = [first_positions[i] for i in inputs if i in first_positions]
    out_of_order = sum(1 for a, b in itertools.pairwise(ordered) if b < a)
    return {
        "input": len(inputs),
        "output": len(outputs),
        "duplicates": duplicates,
        "missing": missing,
        "out_of_order": out_of_order,
    }


def spark_session(
    master: str, driver_host: str = "127.0.0.1", bind_address: str | None = None, driver_port: int | None = None
) -> Any:
    """A SparkSession whose Python workers run this interpreter and see this checkout
    (:func:`dl_spark.session.spark_session`). The driver advertises ``driver_host`` to the executors
    (``spark.driver.host``), listens on ``bind_address`` (default: ``driver_host``) and, if given, on port
    ``driver_port`` (``spark.driver.port``)."""
    from dl_spark.session import spark_session as make_session

    conf = {"spark.driver.memory": "1g", "spark.driver.host": driver_host}
    if driver_port is not None:
        conf["spark.driver.port"] = str(driver_port)
    return make_session(
        master,
        app_name="distributedlog-pipeline",
        host=bind_address or driver_host,
        pythonpath=[str(ROOT)],
        conf=conf,
    )


def free_port(host: str) -> int:
    """A TCP port free on ``host`` right now.

    Raises:
        OSError: ``host`` is no local address.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def is_local(master: str) -> bool:
    """True for ``local`` and ``local[...]``: executors in the driver's own JVM, nothing connects back to it."""
    return master == "local" or master.startswith("local[")


class StartupWatchdog:
    """Fails the run loudly when the executors of a cluster (any master but ``local[...]``) cannot reach the
    driver, instead of letting it wait for ever. Unless, within ``--startup-timeout`` seconds of :meth:`start`, the
    SparkSession has started, an executor has registered with the driver and (with ``need_batch``: the demo, with
    its producer) a micro-batch of :attr:`query` has read a record, it stops Spark's JVM and the ``producer`` (if
    any), prints ``PIPELINE FAILED: ...`` on stderr with the driver address the executors were told, and ends the
    process with exit code 3 (``os._exit``: the SparkSession may still be starting in the main thread). Once all of
    that happened it watches no more."""

    def __init__(self, args: argparse.Namespace, *, need_batch: bool) -> None:
        self.args = args
        self.need_batch = need_batch
        self.spark: Any = None
        self.producer: subprocess.Popen[bytes] | None = None
        self.query: Any = None
        self.executors = 0
        self._done = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="startup-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._done.set()

    def _run(self) -> None:
        deadline = time.monotonic() + self.args.startup_timeout
        while not self._done.wait(0.5):
            if self.spark is not None and self.executors <= 0:
                self.executors = self._count_executors()
                if self.executors > 0:
                    emit("executors", registered=self.executors, driver=self.driver_address())
            if self.executors > 0 and (not self.need_batch or self._read_records()):
                return
            if time.monotonic() >= deadline:
                self.fail()

    def _count_executors(self) -> int:
        try:  # the block managers registered with the driver, less the driver's own
            return int(self.spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1
        except Exception:  # the context is stopping, or its JVM went away
            return 0

    def _read_records(self) -> bool:
        """Whether a micro-batch of the query read records (the executors run its tasks)."""
        try:
            return self.query is not None and any(p.get("numInputRows", 0) > 0 for p in self.query.recentProgress)
        except Exception:  # the query is stopping
            return False

    def driver_address(self) -> str:
        """``HOST:PORT`` the executors were told to connect to the driver at."""
        port = str(self.args.driver_port)
        if self.spark is not None:
            try:
                port = str(self.spark.sparkContext.getConf().get("spark.driver.port", port))
            except Exception:
                pass
        return f"{self.args.driver_host}:{port}"

    def fail(self) -> None:
        args = self.args
        address = self.driver_address()
        within = f"within {args.startup_timeout:g} s"
        if self.executors <= 0:
            what = f"no executor registered with the driver {within}"
        else:
            what = f"{self.executors} executor(s) registered, but no micro-batch read a record {within}"
        state = "the SparkSession still starting" if self.spark is None else "the SparkSession started"
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        if gateway is not None and getattr(gateway, "proc", None) is not None:
            gateway.proc.kill()  # Spark's JVM (its shutdown would print its own errors after this message)
        if self.producer is not None and self.producer.poll() is None:
            self.producer.kill()
        emit("startup_failed", reason=what, driver=address, master=args.master)
        print(
            f"PIPELINE FAILED: {what} (master {args.master}, {state}). The executors were told to connect to the "
            f"driver at {address} (--driver-host {args.driver_host}, port {address.rsplit(':', 1)[1]}); the driver "
            f"listens on {args.driver_bind_address or args.driver_host}. If the workers cannot reach {address}, run "
            f"again with --driver-host set to an address of this machine they can reach (and --driver-bind-address "
            f"for the local address to listen on, behind NAT or in a container); a firewall between them must let "
            f"the workers connect to the driver's port (--driver-port) and to spark.driver.blockManager.port. The "
            f"executors' own errors are in the workers' work directories (<app id>/<executor id>/stderr).",
            file=sys.stderr,
            flush=True,
        )
        os._exit(EXIT_STARTUP)


def start_query(spark, args: argparse.Namespace, *, available_now: bool):  # type: ignore[no-untyped-def]
    """The pipeline's streaming query (not started twice on one checkpoint)."""
    from pyspark.sql import functions as sf
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    event = StructType(
        [StructField("id", LongType()), StructField("user", StringType()), StructField("amount", DoubleType())]
    )
    # Spark uses startingOffsets only while the checkpoint holds no offsets yet (a new or lost
    # checkpoint), so it is passed on every start: a run killed before its first batch was planned
    # must not fall back to "earliest".
    starting = "earliest"
    if args.committed:
        import dl_spark

        # another query may write to the same output: resume from a commit only if one holds this input's position
        commits = [dl_spark.last_commit(args.uri, args.output), *dl_spark.writer_commits(args.uri, args.output)]
        offsets = [c.get("offsets") for c in commits if c is not None]
        if any(isinstance(o, dict) and args.input in o for o in offsets):
            starting = f"committed:{args.output}"
    src = (
        spark.readStream.format("distributedlog")
        .option("uri", args.uri)
        .option("streams", args.input)
        .option("startingOffsets", starting)
        .option("maxRecordsPerTrigger", str(args.max_per_trigger))
        .option("minPartitions", "2")
        .load()
    )
    parsed = src.select(
        sf.from_json(sf.col("value").cast("string"), event).alias("e"),
        sf.concat_ws(",", "dlsn.lssn", "dlsn.entry_id", "dlsn.slot_id").alias("src_dlsn"),
    )
    out = parsed.select(
        sf.to_json(
            sf.struct(
                sf.col("e.id").alias("id"),
                sf.upper(sf.col("e.user")).alias("user"),
                sf.col("e.amount").alias("amount"),
                sf.round(sf.col("e.amount") * 100).cast("long").alias("amount_cents"),
                sf.col("src_dlsn"),
            )
        ).alias("value")
    )
    writer = (
        out.writeStream.format("distributedlog")
        .option("uri", args.uri)
        .option("stream", args.output)
        .option("checkpointLocation", args.checkpoint)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="500 milliseconds")
    emit("starting", startingOffsets=starting)
    return writer.start()


def run_pipeline(args: argparse.Namespace) -> int:
    watchdog = None
    if not is_local(args.master):
        if args.driver_port == 0:  # chosen now, so a failure can name it even before Spark has started
            args.driver_port = free_port(args.driver_bind_address or args.driver_host)
        watchdog = StartupWatchdog(args, need_batch=not args.no_producer and not args.catch_up)
        watchdog.start()
    spark = spark_session(
        args.master, args.driver_host, args.driver_bind_address, args.driver_port if args.driver_port else None
    )
    if watchdog is not None:
        watchdog.spark = spark
    producer = None
    if not args.no_producer:
        with storage.open_namespace(args.uri) as ns:
            ns.create_log(args.input, exist_ok=True)
        producer = subprocess.Popen(
            [sys.executable, __file__, "--uri", args.uri, "--produce", str(args.events), "--input", args.input],
            env={**os.environ},
        )
        if watchdog is not None:
            watchdog.producer = producer
    if args.catch_up:
        q = start_query(spark, args, available_now=True)
        q.awaitTermination()
        emit("caught_up")
        return 0
    q = start_query(spark, args, available_now=False)
    if watchdog is not None:
        watchdog.query = q
    emit("started", id=str(q.id), runId=str(q.runId))
    deadline = time.monotonic() + args.run_seconds if args.run_seconds > 0 else None
    try:
        if producer is None and deadline is None:
            last = None
            while q.isActive:  # until killed: one event per completed batch
                q.awaitTermination(0.2)
                progress = q.lastProgress or {}
                if progress.get("batchId") != last:
                    last = progress.get("batchId")
                    emit("batch", id=last, rows=progress.get("numInputRows"))
        while producer is not None:
            if q.exception() is not None:
                raise RuntimeError(str(q.exception()))
            if producer.poll() is not None:
                if producer.returncode != 0:
                    raise RuntimeError(f"producer failed with exit code {producer.returncode}")
                break
            time.sleep(0.5)
        if producer is not None:
            q.processAllAvailable()  # the producer is done: everything it wrote is in the output
        elif deadline is not None:
            while time.monotonic() < deadline and q.isActive:
                q.awaitTermination(max(0.1, min(5.0, deadline - time.monotonic())))
    finally:
        if watchdog is not None:
            watchdog.stop()
        q.stop()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    if producer is None:
        emit("stopped")
        return 0
    import dl_spark

    result = check_output(args.uri, args.input, args.output)
    commit = dl_spark.last_commit(args.uri, args.output) or {}
    ok = result["input"] == args.events and result["output"] == result["input"]
    ok = ok and result["duplicates"] == 0 and result["missing"] == 0 and result["out_of_order"] == 0
    print(f"last commit: batchId={commit.get('batchId')} offsets={json.dumps(commit.get('offsets'))}")
    for _, payload in read_log(args.uri, args.output)[:3]:
        print("output record:", payload.decode())
    status = "OK" if ok else "FAILED"
    print(
        f"PIPELINE {status} input={result['input']} output={result['output']} duplicates={result['duplicates']} "
        f"missing={result['missing']} out_of_order={result['out_of_order']}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--uri", help="namespace URI (default: an embedded namespace in a new temporary directory)")
    p.add_argument("--checkpoint", help="checkpoint directory (default: next to the namespace)")
    p.add_argument("--input", default="events", help="input log")
    p.add_argument("--output", default="enriched", help="output log")
    p.add_argument("--events", type=int, default=20000, help="events the producer appends")
    p.add_argument("--run-seconds", type=float, default=0, help="without a producer: stop after this long (0: never)")
    p.add_argument("--no-producer", action="store_true", help="do not start the producer (input written elsewhere)")
    p.add_argument("--catch-up", action="store_true", help="one Trigger.AvailableNow run, then exit")
    p.add_argument("--committed", action="store_true", help="no checkpoint: start from committed:<output>")
    p.add_argument("--max-per-trigger", type=int, default=5000, help="maxRecordsPerTrigger of the source")
    p.add_argument("--master", default="local[2]", help="Spark master (local[N], spark://HOST:PORT, ...)")
    p.add_argument(
        "--driver-host",
        default="127.0.0.1",
        help="address the executors connect to the driver at (spark.driver.host); on a cluster, an address of "
        "this machine every worker reaches",
    )
    p.add_argument(
        "--driver-bind-address",
        help="local address the driver listens on when it differs from --driver-host (NAT, containers)",
    )
    p.add_argument(
        "--driver-port",
        type=int,
        default=0,
        help="port the driver listens on (spark.driver.port; default 0: with a master other than local[...], a port "
        "free when the run starts)",
    )
    p.add_argument(
        "--startup-timeout",
        type=float,
        default=180.0,
        help="with a master other than local[...]: seconds from the start for an executor to register (and, with "
        "the producer, for a micro-batch to read records) before the run fails with exit code 3",
    )
    p.add_argument("--produce", type=int, metavar="N", help=argparse.SUPPRESS)  # the producer process
    args = p.parse_args(argv)
    if args.uri is None:
        base = Path(tempfile.mkdtemp(prefix="dl-pipeline-"))
        args.uri = f"distributedlog-local://{base / 'ns'}"
        args.checkpoint = args.checkpoint or str(base / "checkpoint")
        print(f"namespace {args.uri}")
    if args.produce is not None:
        produce(args.uri, args.input, 0, args.produce, per_flush=500, pause_s=0.05)
        return 0
    if args.checkpoint is None:
        p.error("--checkpoint is required with --uri")
    return run_pipeline(args)


if __name__ == "__main__":
    sys.exit(main())
