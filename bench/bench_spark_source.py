"""Spark source benchmark: the same N 1 KiB records as a log, as JSON-lines files and as parquet,
each read with ``readStream`` + ``Trigger.AvailableNow`` into the ``noop`` sink, in one run.

Prints a markdown table: rows/s of each, the ratio of this source to Spark's built-in JSON file
source (target >= 1.0) and to parquet, and this source's rows/s as ``minPartitions`` goes 1 -> 2 -> 4.

    .venv/bin/python bench/bench_spark_source.py --records 200000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_spark_session  # noqa: E402

import storage  # noqa: E402

PAYLOAD = 1024


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


def run_stream(df, ckpt: str) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    q = df.writeStream.format("noop").option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    q.awaitTermination()
    elapsed = time.perf_counter() - t
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    return rows / elapsed if elapsed > 0 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
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
    json_schema = StructType(
        [
            StructField("stream", StringType()),
            StructField("txid", LongType()),
            StructField("sequence_id", LongType()),
            StructField("value", StringType()),
        ]
    )
    spark.read.schema(json_schema).json(str(work / "json")).write.parquet(str(work / "parquet"))

    def dl(min_partitions: int):  # type: ignore[no-untyped-def]
        r = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "bench")
        return r.option("startingOffsets", "earliest").option("minPartitions", str(min_partitions)).load()

    # warm up the Python workers and the JVM once
    run_stream(dl(2), str(work / "ck-warm"))
    results: dict[str, float] = {}
    results["json"] = run_stream(spark.readStream.schema(json_schema).json(str(work / "json")), str(work / "ck-json"))
    results["parquet"] = run_stream(
        spark.readStream.schema(json_schema).parquet(str(work / "parquet")), str(work / "ck-pq")
    )
    for mp in (1, 2, 4):
        results[f"dl-{mp}"] = run_stream(dl(mp), str(work / f"ck-dl-{mp}"))
    spark.stop()
    best = max(results[f"dl-{mp}"] for mp in (1, 2, 4))
    default = results["dl-4"]
    print()
    print(f"N = {n} records of {PAYLOAD} B, {args.master}, readStream + availableNow into noop\n")
    print("| source | rows/s | vs JSON | vs parquet |")
    print("|---|---:|---:|---:|")
    for key, label in (("json", "JSON lines (Spark built-in)"), ("parquet", "parquet (Spark built-in)")):
        print(
            f"| {label} | {results[key]:,.0f} | {results[key] / results['json']:.2f} | "
            f"{results[key] / results['parquet']:.2f} |"
        )
    for mp in (1, 2, 4):
        r = results[f"dl-{mp}"]
        print(
            f"| distributedlog, minPartitions={mp} | {r:,.0f} | {r / results['json']:.2f} | "
            f"{r / results['parquet']:.2f} |"
        )
    print(
        f"\nbest distributedlog / JSON = {best / results['json']:.2f} "
        f"(minPartitions=4: {default / results['json']:.2f})"
    )
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
