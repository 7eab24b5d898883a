"""A Spark Real-Time Mode pipeline: log ``clicks`` copied to log ``clicks-rt`` record by record, exactly once.

The query is three lines (:mod:`dl_spark.realtime`)::

    spark = realtime.configure(SparkSession.builder.master("local[2]")).getOrCreate()
    source = realtime.read_stream(spark, uri, "clicks", startingOffsets="earliest")
    query = realtime.write_stream(source.where("length(value) > 0"), uri, "clicks-rt", checkpoint)

A producer thread appends ``--records`` clicks (each carrying its ``write()`` time) while the query runs. Each
record is in the output log milliseconds after its write, long before the 5 s batch ends; the example waits until
every click is there, stops the query and checks the output: every click once, in order, each output record's
transaction id the click's position in ``clicks``. Needs a JDK (the source's jars are built on first use).

Run: ``python examples/realtime_pipeline.py --uri distributedlog-local:///tmp/dl-rt``. The last line is
checkable: ``SUMMARY OK records=N ...``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

import storage


def produce(uri: str, records: int, rate: float) -> None:
    """Append clicks 1..records to ``clicks`` at ``rate`` a second; each payload starts with its write time (ns)."""
    conf: dict[str, object] = {"enableImmediateFlush": True, "writerOutputBufferSize": 0}
    with storage.open_namespace(uri, conf) as ns, ns.open_log("clicks") as dlm:
        writer = dlm.open_async_writer()
        start = time.monotonic()
        for i in range(1, records + 1):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
            writer.write(storage.LogRecord(i, b"%d click-%d" % (time.time_ns(), i)))
        writer.flush().result()
        writer.close()


def read_all(uri: str, log: str) -> list[storage.LogRecordWithDLSN]:
    """Every record of ``log`` readable now."""
    with storage.open_namespace(uri) as ns, ns.open_log(log).open_reader(storage.DLSN.INITIAL) as reader:
        out: list[storage.LogRecordWithDLSN] = []
        while batch := reader.read_bulk(1000, non_blocking=True):
            out += batch
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--uri", required=True, help="namespace URI, e.g. distributedlog-local:///tmp/dl-rt")
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0, help="clicks a second")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    from dl_spark import realtime

    os.environ.setdefault("DLOG_PYTHON", sys.executable)  # the gateway process of the source's JVM side
    with storage.open_namespace(args.uri) as ns:
        for log in ("clicks", "clicks-rt"):
            if not ns.log_exists(log):
                ns.create_log(log)
    checkpoint = tempfile.mkdtemp(prefix="dl-rt-checkpoint-")
    builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    spark = realtime.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    source = realtime.read_stream(spark, args.uri, "clicks", startingOffsets="earliest")
    query = realtime.write_stream(source.where("length(value) > 0"), args.uri, "clicks-rt", checkpoint)

    producer = threading.Thread(target=produce, args=(args.uri, args.records, args.rate), daemon=True)
    producer.start()
    deadline = time.monotonic() + 300  # against a hang only
    print(f"waiting for {args.records} clicks in clicks-rt ...", flush=True)
    seen: dict[int, int] = {}  # txid -> when it was first seen readable (ns)
    while len(seen) < args.records and time.monotonic() < deadline and query.exception() is None:
        now = time.time_ns()
        for r in read_all(args.uri, "clicks-rt"):
            seen.setdefault(r.txid, now)
        time.sleep(0.01)
    batches = len(query.recentProgress)
    query.stop()
    spark.stop()
    producer.join(60)

    source_records = read_all(args.uri, "clicks")
    output = read_all(args.uri, "clicks-rt")
    once_in_order = [bytes(r.payload) for r in output] == [bytes(r.payload) for r in source_records]
    positions = [r.txid for r in output] == [r.sequence_id for r in source_records]
    lags = [(seen[r.txid] - int(bytes(r.payload).split()[0])) / 1e6 for r in output if r.txid in seen]
    ok = once_in_order and positions and len(output) == args.records
    p50 = statistics.median(lags) if lags else float("nan")
    print(
        f"SUMMARY {'OK' if ok else 'FAILED'} records={len(output)} once_in_order={once_in_order} "
        f"txid_is_position={positions} batches_completed_meanwhile={batches} "
        f"write_to_readable_p50_ms={p50:.0f} (this example polls every 10 ms)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
