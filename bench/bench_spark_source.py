"""Spark source benchmark: the same N 1 KiB records as a log, as JSON-lines files and as parquet,
each read with ``readStream`` + ``Trigger.AvailableNow`` into the ``noop`` sink, in one run.

Every query is run once untimed (JVM code paths, Python workers), then ``--reps`` times; medians
are reported. Two rates per source:

* whole query: rows / seconds from ``start()`` until ``awaitTermination()`` returns (query start-up
  included: for a Python data source PySpark starts a fresh Python process per query to host the
  stream reader);
* micro-batch: rows / the micro-batches' ``triggerExecution`` time (planning and reading the
  data; what a long-running stream sustains).

A trivial Python streaming source (one row) is timed the same way, showing the start-up cost any
Python data source pays per query; and a *ceiling* source, a Python data source that yields pre-built
Arrow batches of the same rows without reading any storage: the most PySpark's Python data-source path
carries on this machine (this source's rates are also given as a fraction of it, same partitions).
Also reported: this source's rates as ``minPartitions`` goes
1 -> 2 -> 4. Target: this source / Spark's JSON source >= 1.0.

    .venv/bin/python bench/bench_spark_source.py --records 200000 [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_spark_session  # noqa: E402

import storage  # noqa: E402

PAYLOAD = 1024
TARGET = 1.0


def write_log(uri: str, n: int) -> None:
    with (
        storage.open_namespace(uri, {"maxLogSegmentBytes": 1 << 40, "writerOutputBufferSize": 256 * 1024}) as ns,
        ns.open_log("bench").open_writer() as w,
    ):
        chunk = 5000
        for base in range(0, n, chunk):
            recs = [
                storage.LogRecord(base + i, (b"%010d" % (base + i)) * (PAYLOAD // 10) + b"x" * (PAYLOAD % 10))
                for i in range(min(chunk, n - base))
            ]
            w.write_bulk(recs)
            w.flush()


def write_json(path: Path, n: int, files: int = 8) -> None:
    path.mkdir(parents=True)
    per = (n + files - 1) // files
    for f in range(files):
        with open(path / f"part-{f:03d}.json", "w") as out:
            for i in range(f * per, min(n, (f + 1) * per)):
                value = f"{i:010d}" * (PAYLOAD // 10) + "x" * (PAYLOAD % 10)
                out.write(json.dumps({"stream": "bench", "txid": i, "sequence_id": i, "value": value}) + "\n")


def ceiling_source() -> type:
    """A Python streaming data source that yields pre-built Arrow batches of the same rows as the log
    (this source's schema, 10,000 rows per batch, the same number of partitions as asked with
    ``minPartitions``), reading no storage: the most PySpark's Python data-source path carries here."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from dl_spark.reading import ARROW_SCHEMA, SCHEMA

    cache: dict[tuple[int, int], pa.RecordBatch] = {}

    def batch(first: int, count: int) -> pa.RecordBatch:
        hit = cache.get((first, count))
        if hit is None:
            ids = np.arange(first, first + count, dtype=np.int64)
            pad = b"x" * (PAYLOAD % 10)
            data = b"".join((b"%010d" % i) * (PAYLOAD // 10) + pad for i in range(first, first + count))
            offsets = np.arange(0, (count + 1) * PAYLOAD, PAYLOAD, dtype=np.int32)
            value = pa.BinaryArray.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
            dlsn = pa.StructArray.from_arrays(
                [pa.array(np.ones(count, np.int64)), pa.array(ids), pa.array(np.zeros(count, np.int64))],
                fields=list(ARROW_SCHEMA.field("dlsn").type),
            )
            hit = pa.RecordBatch.from_arrays(
                [pa.array(["bench"] * count, pa.string()), dlsn, pa.array(ids), pa.array(ids), value],
                schema=ARROW_SCHEMA,
            )
            cache[(first, count)] = hit
        return hit

    class CeilingReader(DataSourceStreamReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.n = int(options["rows"])
            self.parts = int(options.get("minPartitions", "1"))

        def initialOffset(self) -> dict[str, int]:
            return {"o": 0}

        def latestOffset(self) -> dict[str, int]:
            return {"o": self.n}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            lo, hi = start["o"], end["o"]
            step = -(-(hi - lo) // self.parts) if hi > lo else 0
            return [InputPartition((a, min(hi, a + step))) for a in range(lo, hi, step)] if step else []

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            a, b = partition.value
            for first in range(a, b, 10_000):
                yield batch(first, min(10_000, b - first))

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_arrow_ceiling"

        def schema(self) -> Any:
            return SCHEMA

        def streamReader(self, schema: Any) -> CeilingReader:
            return CeilingReader(dict(self.options))

    return CeilingSource


def run_stream(df: Any, ckpt: str) -> tuple[int, float, float]:
    """Rows, whole-query seconds and micro-batch (``triggerExecution``) seconds of one
    availableNow query into ``noop``."""
    t = time.perf_counter()
    q = df.writeStream.format("noop").option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    q.awaitTermination()
    elapsed = time.perf_counter() - t
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    trigger_s = sum(p["durationMs"]["triggerExecution"] for p in q.recentProgress) / 1000.0
    return rows, elapsed, trigger_s


def trivial_source() -> type:
    """A Python streaming data source of one row: what PySpark itself costs per query."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class OneRowReader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"o": 0}

        def latestOffset(self) -> dict[str, int]:
            return {"o": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(0)] if start["o"] < end["o"] else []

        def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
            yield (1,)

    class OneRowSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_one_row"

        def schema(self) -> str:
            return "x INT"

        def streamReader(self, schema: Any) -> OneRowReader:
            return OneRowReader()

    return OneRowSource


def measure(make_df: Callable[[], Any], work: Path, key: str, reps: int, n: int) -> dict[str, float]:
    """One untimed run, then ``reps`` timed ones: median rates and seconds."""
    run_stream(make_df(), str(work / f"ck-{key}-warm"))
    runs = []
    for i in range(reps):
        rows, elapsed, trigger_s = run_stream(make_df(), str(work / f"ck-{key}-{i}"))
        if n and rows != n:
            raise RuntimeError(f"{key}: {rows} rows, expected {n}")
        runs.append((elapsed, trigger_s))
    elapsed = statistics.median(r[0] for r in runs)
    trigger_s = statistics.median(r[1] for r in runs)
    return {"whole": n / elapsed if n else 0.0, "batch": n / trigger_s if n else 0.0, "s": elapsed, "ts": trigger_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--master", default="local[4]")
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir, deleted after)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-spark-"))
    n = args.records
    uri = f"distributedlog-local://{work / 'ns'}"
    t = time.perf_counter()
    write_log(uri, n)
    write_json(work / "json", n)
    print(f"wrote {n} records of {PAYLOAD} B as a log and as JSON lines in {time.perf_counter() - t:.1f}s", flush=True)

    from pyspark.sql.types import LongType, StringType, StructField, StructType

    spark = local_spark_session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(trivial_source())
    spark.dataSource.register(ceiling_source())
    json_schema = StructType(
        [
            StructField("stream", StringType()),
            StructField("txid", LongType()),
            StructField("sequence_id", LongType()),
            StructField("value", StringType()),
        ]
    )
    spark.read.schema(json_schema).json(str(work / "json")).write.parquet(str(work / "parquet"))

    def dl(min_partitions: int) -> Callable[[], Any]:
        def make() -> Any:
            r = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "bench")
            return r.option("startingOffsets", "earliest").option("minPartitions", str(min_partitions)).load()

        return make

    results: dict[str, dict[str, float]] = {}
    results["json"] = measure(
        lambda: spark.readStream.schema(json_schema).json(str(work / "json")), work, "json", args.reps, n
    )
    results["parquet"] = measure(
        lambda: spark.readStream.schema(json_schema).parquet(str(work / "parquet")), work, "pq", args.reps, n
    )
    for mp in (1, 2, 4):
        results[f"dl-{mp}"] = measure(dl(mp), work, f"dl-{mp}", args.reps, n)

    def ceiling(parts: int) -> Callable[[], Any]:
        def make() -> Any:
            r = spark.readStream.format("bench_arrow_ceiling").option("rows", str(n))
            return r.option("minPartitions", str(parts)).load()

        return make

    for mp in (1, 2, 4):
        results[f"ceiling-{mp}"] = measure(ceiling(mp), work, f"ceiling-{mp}", args.reps, n)
    trivial = measure(lambda: spark.readStream.format("bench_one_row").load(), work, "one-row", args.reps, 0)
    spark.stop()

    js, pq = results["json"], results["parquet"]
    print()
    print(
        f"N = {n:,} records of {PAYLOAD} B, {args.master}, readStream + availableNow into noop, "
        f"median of {args.reps} (after one untimed run each)\n"
    )
    print(
        "| source | whole query: rows/s | vs JSON | vs parquet | vs ceiling | micro-batches: rows/s | vs JSON "
        "| vs parquet | vs ceiling |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    labels = [("json", "JSON lines (Spark built-in)"), ("parquet", "parquet (Spark built-in)")]
    labels += [(f"ceiling-{mp}", f"ceiling: pre-built Arrow batches, {mp} partition(s)") for mp in (1, 2, 4)]
    labels += [(f"dl-{mp}", f"distributedlog, minPartitions={mp}") for mp in (1, 2, 4)]
    for key, label in labels:
        r = results[key]
        cl = results["ceiling-" + key.split("-")[1]] if "-" in key else None
        vs_w = f"{r['whole'] / cl['whole']:.2f}" if cl else "-"
        vs_b = f"{r['batch'] / cl['batch']:.2f}" if cl else "-"
        print(
            f"| {label} | {r['whole']:,.0f} | {r['whole'] / js['whole']:.2f} | {r['whole'] / pq['whole']:.2f} | {vs_w}"
            f" | {r['batch']:,.0f} | {r['batch'] / js['batch']:.2f} | {r['batch'] / pq['batch']:.2f} | {vs_b} |"
        )
    best_whole = max(results[f"dl-{mp}"]["whole"] for mp in (1, 2, 4)) / js["whole"]
    best_batch = max(results[f"dl-{mp}"]["batch"] for mp in (1, 2, 4)) / js["batch"]
    print(
        f"\nA one-row Python streaming source takes {trivial['s']:.2f} s per query "
        f"({trivial['ts']:.2f} s of it in its micro-batch): PySpark's start-up cost for any Python source."
    )
    print(
        f"Best distributedlog / JSON: whole query {best_whole:.2f}, micro-batches {best_batch:.2f} "
        f"(target >= {TARGET}: whole query {'met' if best_whole >= TARGET else 'missed'}, "
        f"micro-batches {'met' if best_batch >= TARGET else 'missed'})."
    )
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
