"""A `spark-submit` job over a DistributedLog log: one batch report, then one streaming catch-up.

1. With ``--demo``, the log is created and filled with ``--records`` JSON events
   ``{"user": "user-K", "amount": A, "ts": epoch-ms}``, one per simulated second (txid = ts), unless it
   already holds records (a rerun reports on the same data).
2. Batch: ``spark.read.format("distributedlog")`` reads the whole log; the JSON payloads are parsed and
   two tables are printed: per user (events, total amount) and per minute of event time.
3. Streaming: ``spark.readStream.format("distributedlog")`` from the earliest record, at most
   ``--max-per-trigger`` records per micro-batch, runs once with ``Trigger.AvailableNow`` into the memory
   sink, and the rows it streamed are counted.

It ends with a checkable line ``JOB OK records=N users=U minutes=M streamed=N batches=B``.

Run it from the checkout, after ``make venv`` (or ``pip install .`` into ``.venv``)::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit examples/spark_submit_job.py \\
        --uri distributedlog-local:///tmp/dl-job --stream events --demo

``--properties-file conf/spark-defaults.conf`` (before the script) is optional: it keeps Spark local on
loopback with no UI and only warnings in the log. ``python examples/spark_submit_job.py ...`` works too.

Why ``PYSPARK_PYTHON``: ``.venv/bin/spark-submit`` is a shell script that first runs ``PYSPARK_PYTHON``,
else ``python3`` from ``PATH``, to find Spark, and Spark then starts this driver and its Python workers
with the same interpreter. Outside an activated virtualenv that ``python3`` is another interpreter
without pyspark, and spark-submit stops at once with "Could not find valid SPARK_HOME"; no properties
file can change that, as it is read later. With the virtualenv activated
(``. .venv/bin/activate && spark-submit examples/spark_submit_job.py ...``) no setting is needed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

import dl_spark
import storage

USERS = 7
SECOND_MS = 1000


def demo_event(i: int, start_ms: int) -> tuple[int, bytes]:
    """Demo event ``i`` as (txid, payload): one event per simulated second from ``start_ms``."""
    ts = start_ms + i * SECOND_MS
    payload = {"user": f"user-{i % USERS}", "amount": round(1 + (i % 10) * 0.5, 2), "ts": ts}
    return ts, json.dumps(payload).encode()


def fill_demo_log(uri: str, stream: str, records: int) -> int:
    """Create ``stream`` and append ``records`` demo events unless it already has records; returns
    how many records it holds."""
    with storage.open_namespace(uri) as ns:
        ns.create_log(stream, exist_ok=True)
        with ns.open_log(stream) as dlm:
            existing = dlm.record_count()
            if existing:
                print(f"demo log {stream!r} already holds {existing} records; not adding more")
                return existing
            # Whole minutes, so every minute of event time holds the same number of events.
            start_ms = (int(time.time() * 1000) // 60_000 - 60) * 60_000
            with dlm.open_writer() as w:
                w.write_bulk(storage.LogRecord(*demo_event(i, start_ms)) for i in range(records))
                last = w.flush()
            print(f"demo log {stream!r}: wrote {records} events, last DLSN {last}")
            return records


EVENT_SCHEMA = StructType(
    [StructField("user", StringType()), StructField("amount", DoubleType()), StructField("ts", LongType())]
)


def parse(df: DataFrame) -> DataFrame:
    """The log's rows -> (stream, txid, user, amount, ts); a payload that is not such JSON gives nulls."""
    parsed = sf.from_json(sf.col("value").cast("string"), EVENT_SCHEMA)
    return df.select("stream", "txid", parsed.alias("e")).select("stream", "txid", "e.*")


def spark_session(app_name: str) -> SparkSession:
    """The session: settings given to spark-submit (``--conf``, ``--properties-file``) apply."""
    spark = SparkSession.builder.appName(app_name).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def read_log(spark: SparkSession, uri: str, stream: str) -> DataFrame:
    """``spark.read.format("distributedlog")`` over the whole log.

    Spark finds the format by itself when its Python workers run this interpreter (PYSPARK_PYTHON, or
    an activated virtualenv). The worker that looks data sources up reads only the PYSPARK_PYTHON
    variable, though, so when a launch chose the interpreter with ``spark.pyspark.python`` alone the
    format is registered from the driver instead.
    """

    def load() -> DataFrame:
        return spark.read.format("distributedlog").option("uri", uri).option("streams", stream).load()

    try:
        return load()
    except Exception as e:
        if "DATA_SOURCE_NOT_FOUND" not in str(e):
            raise
        dl_spark.register(spark)
        return load()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="namespace URI, e.g. distributedlog-local:///tmp/dl")
    parser.add_argument("--stream", required=True, help="the log to read")
    parser.add_argument("--demo", action="store_true", help="create and fill the log with demo JSON events first")
    parser.add_argument("--records", type=int, default=600, help="demo events to write (default 600)")
    parser.add_argument("--max-per-trigger", type=int, default=250, help="streaming: records per micro-batch")
    args = parser.parse_args()

    if args.demo:
        fill_demo_log(args.uri, args.stream, args.records)

    spark = spark_session("distributedlog-spark-submit-job")
    try:
        # --- batch -------------------------------------------------------------------------
        events = parse(read_log(spark, args.uri, args.stream)).cache()
        records = events.count()
        per_user = (
            events.groupBy(sf.coalesce("user", sf.lit("(not JSON)")).alias("user"))
            .agg(sf.count("*").alias("events"), sf.round(sf.sum("amount"), 2).alias("amount"))
            .orderBy("user")
        )
        # Event time is the payload's ts (epoch ms), or the txid when the payload has none.
        minute = sf.window(sf.timestamp_millis(sf.coalesce("ts", "txid")), "1 minute").start
        per_minute = events.groupBy(minute.alias("minute")).agg(sf.count("*").alias("events")).orderBy("minute")
        print(f"batch: {records} records in log {args.stream!r}")
        per_user.show(50, truncate=False)
        per_minute.show(20, truncate=False)
        users = per_user.count()
        minutes = per_minute.count()
        events.unpersist()

        # --- streaming: catch up once with Trigger.AvailableNow -----------------------------
        stream_df = (
            spark.readStream.format("distributedlog")
            .option("uri", args.uri)
            .option("streams", args.stream)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", args.max_per_trigger)
            .load()
        )
        with tempfile.TemporaryDirectory(prefix="dl-job-checkpoint-") as tmp:
            query = (
                parse(stream_df)
                .writeStream.format("memory")
                .queryName("dl_job_events")
                .option("checkpointLocation", tmp)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
        streamed = spark.table("dl_job_events").count()
        print(f"streaming: {streamed} rows in {batches} micro-batches (Trigger.AvailableNow)")
    finally:
        spark.stop()

    # A writer may append between the two reads; the stream then sees more, never fewer.
    ok = records > 0 and streamed >= records
    print(
        "JOB",
        "OK" if ok else "MISMATCH",
        f"records={records}",
        f"users={users}",
        f"minutes={minutes}",
        f"streamed={streamed}",
        f"batches={batches}",
    )
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
