"""Spark sink benchmark: the same DataFrame of N 1 KiB rows, streamed (file source prepared here,
``Trigger.AvailableNow``) into this exactly-once sink and into Spark's parquet file sink, in one run.

Also a *ceiling*: a Python streaming sink that only consumes its input (Arrow batches), the most
PySpark's Python write path carries here. Prints a markdown table: rows/s of each and the ratios
distributedlog / parquet (target >= 1.0) and distributedlog / ceiling.

    .venv/bin/python bench/bench_spark_sink.py --records 200000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_spark_session  # noqa: E402

import storage  # noqa: E402

PAYLOAD = 1024


def ceiling_sink() -> type:
    """A Python streaming sink that consumes its input as Arrow batches (counting rows) and stores nothing:
    the most PySpark's Python data-source write path carries here."""
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

    class Counted(WriterCommitMessage):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class CeilingWriter(DataSourceStreamArrowWriter):
        def write(self, iterator: Iterator[pa.RecordBatch]) -> Counted:
            return Counted(sum(b.num_rows for b in iterator))

        def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            pass

        def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            pass

    class CeilingSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_consume_only"

        def schema(self) -> str:
            return "value BINARY"

        def streamWriter(self, schema, overwrite: bool) -> CeilingWriter:  # type: ignore[no-untyped-def]
            return CeilingWriter()

    return CeilingSink


def run_stream(writer, what: str) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Start ``writer`` (AvailableNow), wait; (rows/s, rows)."""
    t = time.perf_counter()
    q = writer.trigger(availableNow=True).start()
    q.awaitTermination()
    elapsed = time.perf_counter() - t
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    print(f"{what}: {rows} rows in {elapsed:.2f}s", flush=True)
    return (rows / elapsed if elapsed > 0 else 0.0), rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=4, help="input files (= partitions of the batch)")
    ap.add_argument("--master", default="local[4]")
    ap.add_argument("--rounds", type=int, default=3, help="measured runs of each sink (the median is reported)")
    ap.add_argument(
        "--payload",
        choices=["padded", "random"],
        default="padded",
        help="padded: a 10-digit id then 'x' padding (parquet compresses it to almost nothing); "
        "random: 1 KiB of random letters and digits (randstr; hardly compressible)",
    )
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir, deleted after)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-sink-"))
    n = args.records
    uri = f"distributedlog-local://{work / 'ns'}"

    from pyspark.sql import functions as sf

    spark = local_spark_session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ceiling_sink())

    # The input: N rows of a 1 KiB binary value, as parquet files (the streaming file source reads them).
    t = time.perf_counter()
    src_dir = work / "input"
    pad = "x" * (PAYLOAD - 10)
    rows = spark.range(0, n, numPartitions=args.files)
    if args.payload == "padded":
        value = sf.concat(sf.format_string("%010d", "id"), sf.lit(pad))
    else:
        value = sf.concat(sf.format_string("%010d", "id"), sf.expr(f"randstr({PAYLOAD - 10})"))
    rows.select(sf.encode(value, "utf-8").alias("value")).write.parquet(str(src_dir))
    schema = spark.read.parquet(str(src_dir)).schema
    print(f"prepared {n} rows of {PAYLOAD} B in {args.files} files in {time.perf_counter() - t:.1f}s", flush=True)

    def source():  # type: ignore[no-untyped-def]
        return spark.readStream.schema(schema).parquet(str(src_dir))

    def dl_writer(log: str, ckpt: str, codec: str = "none"):  # type: ignore[no-untyped-def]
        w = source().writeStream.format("distributedlog").option("uri", uri).option("stream", log)
        return w.option("checkpointLocation", ckpt).option("compressionType", codec)

    def pq_writer(path: str, ckpt: str):  # type: ignore[no-untyped-def]
        return source().writeStream.format("parquet").option("path", path).option("checkpointLocation", ckpt)

    def ceiling_writer(ckpt: str):  # type: ignore[no-untyped-def]
        return source().writeStream.format("bench_consume_only").option("checkpointLocation", ckpt)

    # warm up every path once (JVM code paths, Python workers), then 3 rounds of each, interleaved; medians
    run_stream(dl_writer("warm", str(work / "ck-warm-dl")), "warm-up distributedlog")
    run_stream(pq_writer(str(work / "warm-pq"), str(work / "ck-warm-pq")), "warm-up parquet")
    run_stream(ceiling_writer(str(work / "ck-warm-ceiling")), "warm-up ceiling")
    rates: dict[str, list[float]] = {"pq": [], "cl": [], "dl": [], "lz": []}
    for r in range(args.rounds):
        for key, writer in (
            ("pq", pq_writer(str(work / f"out-pq-{r}"), str(work / f"ck-pq-{r}"))),
            ("cl", ceiling_writer(str(work / f"ck-ceiling-{r}"))),
            ("dl", dl_writer(f"out-{r}", str(work / f"ck-dl-{r}"))),
            ("lz", dl_writer(f"out-lz4-{r}", str(work / f"ck-lz4-{r}"), "lz4")),
        ):
            rate, rows_seen = run_stream(writer, f"round {r + 1}: {key}")
            assert rows_seen == n, (key, rows_seen, n)
            rates[key].append(rate)
    pq, cl, dl, lz = (statistics.median(rates[k]) for k in ("pq", "cl", "dl", "lz"))
    spark.stop()
    with storage.open_namespace(uri) as ns:
        written = [ns.open_log(log).record_count() for log in ("out-0", "out-lz4-0")]
        stored = {
            log: sum(ns.segstore.info(s.ledger_id).length_bytes for s in ns.open_log(log).log_segments())
            for log in ("out-0", "out-lz4-0")
        }
    assert written == [n, n], (written, n)
    pq_bytes = sum(f.stat().st_size for f in (work / "out-pq-0").rglob("*.parquet"))

    print()
    print(
        f"N = {n} rows of {PAYLOAD} B ({args.payload} payload), {args.master}, {args.files} partitions, "
        f"writeStream + availableNow, median of {args.rounds}\n"
    )
    print("| sink | rows/s | MiB/s | vs parquet | vs ceiling | bytes stored |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, r, size in (
        ("parquet file sink (Spark built-in)", pq, f"{pq_bytes / (1 << 20):,.1f} MiB"),
        ("ceiling: a Python sink that only consumes its input", cl, "-"),
        ("distributedlog (exactly-once), compressionType=none", dl, f"{stored['out-0'] / (1 << 20):,.1f} MiB"),
        ("distributedlog (exactly-once), compressionType=lz4", lz, f"{stored['out-lz4-0'] / (1 << 20):,.1f} MiB"),
    ):
        print(f"| {label} | {r:,.0f} | {r * PAYLOAD / (1 << 20):,.1f} | {r / pq:.2f} | {r / cl:.2f} | {size} |")
    print(
        f"\ndistributedlog / parquet = {dl / pq:.2f} (none), {lz / pq:.2f} (lz4) (target >= 1.0); "
        f"distributedlog / ceiling = {dl / cl:.2f} (none), {lz / cl:.2f} (lz4) (target >= 0.9)"
    )
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
