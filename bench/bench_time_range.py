"""Time-range read benchmark: a txid range holding 1% of a log of 200 segments, read by ``spark.read`` with
the filter pushed down (``spark.sql.python.filterPushdown.enabled``), with pushdown off (the whole log is
read and Spark filters the rows), with ``startingTxId`` / ``endingTxId``, and a full scan of the log.

Every query writes its rows into the ``noop`` sink (so every row is read), is run once untimed, then
``--reps`` times on a fresh DataFrame each; medians are reported. Target: the 1% range with
pushdown >= 20x faster than the full scan.

    .venv/bin/python bench/bench_time_range.py [--segments 200] [--per-segment 1000] [--reps 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import PAYLOAD, RECORD_SIZE, local_spark_session, writer_conf  # noqa: E402

import storage  # noqa: E402

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
TARGET = 20.0


def write_log(uri: str, segments: int, per_segment: int) -> None:
    """``segments`` completed segments of ``per_segment`` 1 KiB records; txid = record number."""
    with storage.open_namespace(uri, writer_conf(writerOutputBufferSize=256 * 1024)) as ns:
        dlm = ns.open_log("bench")
        for s in range(segments):
            with dlm.open_writer() as w:
                base = s * per_segment
                for i in range(0, per_segment, 500):
                    w.write_bulk([storage.LogRecord(base + k, PAYLOAD) for k in range(i, min(i + 500, per_segment))])
                w.flush()


def timed(spark: Any, make: Callable[[], Any], pushdown: bool, reps: int) -> tuple[float, int, int]:
    """Median seconds of ``make().write.format("noop")`` over ``reps`` runs (after one untimed run), the
    partitions planned and the rows read."""
    spark.conf.set(PUSHDOWN, "true" if pushdown else "false")
    times: list[float] = []
    parts = rows = 0
    for i in range(reps + 1):
        df = make()
        t = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        if i:
            times.append(time.perf_counter() - t)
    df = make()
    parts = df.rdd.getNumPartitions()
    rows = df.count()
    return statistics.median(times), parts, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segments", type=int, default=200)
    ap.add_argument("--per-segment", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--master", default="local[4]")
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir, deleted after)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-range-"))
    uri = f"distributedlog-local://{work / 'ns'}"
    n = args.segments * args.per_segment
    t = time.perf_counter()
    write_log(uri, args.segments, args.per_segment)
    print(f"wrote {n:,} records of {RECORD_SIZE} B in {args.segments} segments in {time.perf_counter() - t:.1f}s")

    # 1% of the records, starting in the middle of a segment (as a time range would)
    lo = n // 2 + args.per_segment // 2
    hi = lo + n // 100
    where = f"txid >= {lo} AND txid < {hi}"
    spark = local_spark_session(args.master)

    def read(**options: Any) -> Any:
        r = spark.read.format("distributedlog").option("uri", uri).option("streams", "bench")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    cases = [
        ("full scan (no filter)", lambda: read(), False),
        (f"`{where}`, pushdown off", lambda: read().where(where), False),
        (f"`{where}`, pushdown on", lambda: read().where(where), True),
        (f"startingTxId={lo}, endingTxId={hi}", lambda: read(startingTxId=lo, endingTxId=hi), False),
    ]
    results = [(label, *timed(spark, make, on, args.reps)) for label, make, on in cases]
    spark.stop()

    full = results[0][1]
    print(
        f"\nN = {n:,} records of {RECORD_SIZE} B in {args.segments} segments, {args.master}, spark.read into noop, "
        f"median of {args.reps} (after one untimed run each)\n"
    )
    print("| read | partitions | rows | seconds | vs full scan |")
    print("|---|---:|---:|---:|---:|")
    for label, secs, parts, rows in results:
        print(f"| {label} | {parts} | {rows:,} | {secs:.2f} | {full / secs:.1f}x |")
    speedup = full / results[2][1]
    print(
        f"\n1% range with pushdown vs full scan: {speedup:.1f}x (target >= {TARGET:.0f}x: "
        f"{'met' if speedup >= TARGET else 'missed'})."
    )
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
