"""Cold storage benchmark: one completed log segment read from the cold store (S3 on Ceph's radosgw, through the
tiered segment store, its hot copy purged) vs from the hot store (RADOS) vs a raw ``pyarrow.fs`` read of the same
cold object; the Spark source over cold-only vs hot segments; offload throughput to radosgw vs to ``file://``;
all in one run.

Run::

    .venv/bin/python bench/bench_cold.py [--segment-mib 16] [--reps 5] [--spark-reps 3] [--offload-reps 3]
                                         [--no-spark] [--no-offload] [--master local[2]] [--dir PATH] [--verbose]

Starts a throw-away Ceph cluster (``tools/ceph_cluster.py``: 1 monitor, 3 BlueStore OSDs on loopback, pool
``segments`` size 3 / min_size 2, cephx) and its radosgw (``tools/ceph/rgw.py``: an S3 user and a bucket), and a
private ZooKeeper server (``tests/zk.py``). Binds two ZooKeeper namespaces whose segment store is RADOS (each its
own RADOS namespace): ``s3`` with the cold store ``s3://BUCKET/PREFIX?endpoint=<radosgw>`` and ``file`` with a
cold store directory on this disk. Records are 1 KiB; every measurement is repeated (``--reps``) after an untimed
warm-up, the median is reported, and each ratio is the median of the per-repetition ratios (the sides of a ratio
run back to back in one repetition, their order alternating).

Data: in the ``s3`` namespace, log ``seg`` gets two completed segments of ``--segment-mib`` MiB of records each (a
writer per segment); both are offloaded (``offload_log``), then ``purge_segments`` removes the hot copy of the
first (the newest completed segment always stays hot), so segment 1 lives only in cold and segment 2 in both (its
reads go to the hot store).

(1) One completed segment: the tiered store's ``read_entry_buffers`` over all its entries (cold: segment 1, its
    object reopened each time: a HEAD, the trailer and index reads, then one range read per 8 MiB of entries,
    every entry's CRC32C checked; also with the object left open; hot: segment 2 from RADOS), and ``read_arrow``
    of the segment's records (decoded into Arrow batches), each ÷ a raw ``pyarrow.fs.S3FileSystem`` read of
    segment 1's whole cold object (``open_input_file`` + ``read_at`` in 8 MiB ranges, the bytes only, the same
    client settings).
(2) ``spark.read.format("distributedlog")`` with ``startingTxId``/``endingTxId`` selecting segment 1 (cold only)
    vs segment 2 (hot), ``.count()``, one SparkSession (``dl_spark.spark_session``).
(3) ``offload_segment`` of one completed segment (read from RADOS, written as one object, read back and its
    SHA-256 compared, recorded in ZooKeeper) to radosgw vs to a ``file://`` directory; before each repetition the
    record and the object are removed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# _common first: it puts the checkout on sys.path for `storage`
from _common import KIB, MIB, RECORD_SIZE, fmt_rate, make_base, remove_base, yes_no
from bench_rados import Samples, Target, make_records, ratio_cells, start_cluster, stop_cluster, terminate_as_interrupt
from bench_zookeeper import start_zookeeper

import storage
from storage.cold.arrowfs import ArrowColdStore
from storage.formats.segment_metadata import LogSegmentMetadata
from storage.log.layout import LogMetadata
from storage.log.offload import offload_log, offload_segment
from storage.log.tiered import TieredSegmentStore
from storage.segstore.rados import RadosLocation

TARGET_COLD_RATIO = 0.7  # cold reads >= 0.7 of the raw pyarrow.fs read of the same bytes
RAW_CHUNK = 8 * MIB  # the cold reader's range size (storage.cold.segment_object.READ_CHUNK)
LOG = "seg"


def mb_s(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e6 if seconds > 0 else float("nan")


def fmt_mb(rate: float) -> str:
    return f"{rate:,.1f} MB/s"


# --- the namespaces -----------------------------------------------------------------------------
@dataclass
class BenchLog:
    """A log of the bench and its completed segments."""

    ns: storage.Namespace
    dlm: storage.LogManager
    segments: list[LogSegmentMetadata]

    @property
    def tiered(self) -> TieredSegmentStore:
        store = self.ns.segstore
        assert isinstance(store, TieredSegmentStore)
        return store

    def meta(self) -> LogMetadata:
        return LogMetadata(self.ns.metastore, self.ns.paths_of(LOG))

    def last_entry(self, seg: LogSegmentMetadata) -> int:
        return self.tiered.info(seg.ledger_id).last_entry_id


def write_segments(ns: storage.Namespace, count: int, per_segment: int) -> BenchLog:
    """``count`` completed segments of ``per_segment`` 1 KiB records each (txids 1, 2, ...; a writer per segment)."""
    dlm = ns.open_log(LOG)
    records = make_records(per_segment * count)
    for s in range(count):
        with dlm.open_async_writer() as aw:
            futures = [aw.write(rec) for rec in records[s * per_segment : (s + 1) * per_segment]]
            aw.flush().result()
            for f in futures:
                f.result()
    segments = dlm.log_segments()
    if len(segments) != count or any(seg.in_progress for seg in segments):
        raise RuntimeError(f"expected {count} completed segments, got {segments}")
    return BenchLog(ns, dlm, segments)


def bind(zk_root: str, tag: str, target: Target, cold: str, conf: dict[str, object]) -> storage.Namespace:
    location = RadosLocation(target.pool, target.conf, target.client_id, target.keyring, f"{target.namespace}-{tag}")
    uri = f"{zk_root}-{tag}"
    storage.bind_namespace(uri, segments=location.uri(), conf=conf, cold=cold)
    return storage.open_namespace(uri, conf)


# --- (1) reading one segment ------------------------------------------------------------------
def store_read(blog: BenchLog, seg: LogSegmentMetadata, last: int, reopen: bool) -> tuple[float, int]:
    """Seconds to read every entry of ``seg`` through the tiered store (``reopen``: its cold object reopened
    first, so the index is read again); payload bytes."""
    tiered = blog.tiered
    if reopen:
        tiered.cold_segment(seg.ledger_id).close()
    gc.collect()
    total = 0
    t0 = time.perf_counter()
    for _entry_id, data in tiered.read_entry_buffers(seg.ledger_id, 0, last):
        total += len(data)
    return time.perf_counter() - t0, total


def arrow_read(blog: BenchLog, seg: LogSegmentMetadata, records: int, reopen: bool) -> tuple[float, int]:
    """Seconds to read the segment's records with ``read_arrow`` (Arrow batches); the row count."""
    if reopen:
        blog.tiered.cold_segment(seg.ledger_id).close()
    gc.collect()
    t0 = time.perf_counter()
    rows = sum(b.num_rows for b in blog.dlm.read_arrow(storage.DLSN(seg.lssn, 0, 0), max_records=records))
    return time.perf_counter() - t0, rows


def raw_read(fs: Any, path: str) -> tuple[float, int]:
    """Seconds to open ``path`` with ``pyarrow.fs`` and read it whole in :data:`RAW_CHUNK` ranges; its bytes."""
    gc.collect()
    t0 = time.perf_counter()
    f = fs.open_input_file(path)
    try:
        size = int(f.size())
        offset = 0
        while offset < size:
            offset += len(f.read_at(min(RAW_CHUNK, size - offset), offset))
    finally:
        f.close()
    return time.perf_counter() - t0, offset


@dataclass
class ReadFigures:
    records: int  # records of one segment
    data_bytes: int  # entry bytes of one segment
    object_bytes: int  # size of the cold object
    s: Samples  # seconds per row, and ratios


def bench_read(blog: BenchLog, records: int, gw_fs: Any, reps: int) -> ReadFigures:
    cold_seg, hot_seg = blog.segments[0], blog.segments[1]
    tiered = blog.tiered
    where = (tiered.where(cold_seg.ledger_id), tiered.where(hot_seg.ledger_id))
    if where != ("cold", "both"):
        raise RuntimeError(f"segment 1 should be cold only and segment 2 hot (and cold), found {where}")
    rec = tiered.index.get(cold_seg.ledger_id)
    assert rec is not None
    cold_store = tiered.cold
    assert isinstance(cold_store, ArrowColdStore)
    path = f"{cold_store.location.root}/{rec.key}"
    last_cold, last_hot = blog.last_entry(cold_seg), blog.last_entry(hot_seg)
    rows: dict[str, Callable[[], tuple[float, int]]] = {
        "cold": lambda: store_read(blog, cold_seg, last_cold, True),
        "cold_open": lambda: store_read(blog, cold_seg, last_cold, False),
        "hot": lambda: store_read(blog, hot_seg, last_hot, False),
        "raw": lambda: raw_read(gw_fs, path),
        "cold_arrow": lambda: arrow_read(blog, cold_seg, records, True),
        "hot_arrow": lambda: arrow_read(blog, hot_seg, records, False),
    }
    expected = {
        "cold": rec.data_bytes,
        "cold_open": rec.data_bytes,
        "hot": rec.data_bytes,
        "raw": rec.size,
        "cold_arrow": records,
    }
    expected["hot_arrow"] = records
    for fn in rows.values():  # warm-up, and a check of what each row reads
        fn()
    s = Samples()
    order = list(rows)
    for rep in range(reps):
        seconds: dict[str, float] = {}
        for key in order if rep % 2 == 0 else reversed(order):
            secs, amount = rows[key]()
            if key != "hot" and amount != expected[key]:
                raise RuntimeError(f"row {key} read {amount}, expected {expected[key]}")
            seconds[key] = secs
            s.add(key, secs)
        s.add("cold_ratio", seconds["raw"] / seconds["cold"])  # the same segment: rate ratio = time ratio
        s.add("cold_open_ratio", seconds["raw"] / seconds["cold_open"])
        s.add("cold_open_vs_hot", seconds["hot"] / seconds["cold_open"])
        s.add("cold_arrow_ratio", seconds["raw"] / seconds["cold_arrow"])
        s.add("hot_ratio", seconds["raw"] / seconds["hot"])
        s.add("hot_arrow_ratio", seconds["raw"] / seconds["hot_arrow"])
        s.add("cold_vs_hot", seconds["hot"] / seconds["cold"])
        s.add("cold_vs_hot_arrow", seconds["hot_arrow"] / seconds["cold_arrow"])
    return ReadFigures(records, rec.data_bytes, rec.size, s)


# --- (2) the Spark source ---------------------------------------------------------------------
@dataclass
class SparkFigures:
    records: int
    start_s: float
    s: Samples


def bench_spark(uri: str, records: int, master: str, reps: int) -> SparkFigures:
    from _common import local_spark_session

    t0 = time.perf_counter()
    spark = local_spark_session(master)
    start_s = time.perf_counter() - t0

    def count(first_txid: int) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            df = (
                spark.read.format("distributedlog")
                .option("uri", uri)
                .option("streams", LOG)
                .option("startingTxId", first_txid)
                .option("endingTxId", first_txid + records)
                .load()
            )
            t = time.perf_counter()
            n = int(df.count())
            return time.perf_counter() - t, n

        return run

    rows = {"cold": count(1), "hot": count(records + 1)}
    s = Samples()
    try:
        for fn in rows.values():
            fn()
        for rep in range(reps):
            seconds: dict[str, float] = {}
            for key in rows if rep % 2 == 0 else reversed(list(rows)):
                secs, n = rows[key]()
                if n != records:
                    raise RuntimeError(f"spark read of the {key} segment counted {n} rows, expected {records}")
                seconds[key] = secs
                s.add(key, secs)
            s.add("cold_vs_hot", seconds["hot"] / seconds["cold"])
    finally:
        spark.stop()
    return SparkFigures(records, start_s, s)


# --- (3) offload --------------------------------------------------------------------------------
@dataclass
class OffloadFigures:
    object_bytes: dict[str, int]
    s: Samples


def offload_once(blog: BenchLog) -> tuple[float, int]:
    """Forget the offload of the log's last segment (record and object), then offload it again: seconds, bytes."""
    tiered, seg = blog.tiered, blog.segments[-1]
    rec = tiered.index.get(seg.ledger_id)
    if rec is not None:
        tiered.cold.delete(rec.key)
        tiered.index.forget(seg.ledger_id)
    meta = blog.meta()
    gc.collect()
    t0 = time.perf_counter()
    done = offload_segment(tiered, meta, seg)
    return time.perf_counter() - t0, done.size


def bench_offload(logs: dict[str, BenchLog], reps: int) -> OffloadFigures:
    sizes: dict[str, int] = {}
    for key, blog in logs.items():  # warm-up
        sizes[key] = offload_once(blog)[1]
    s = Samples()
    order = list(logs)
    for rep in range(reps):
        seconds: dict[str, float] = {}
        for key in order if rep % 2 == 0 else reversed(order):
            secs, size = offload_once(logs[key])
            seconds[key] = secs
            s.add(key, secs)
            s.add(f"{key}_mb_s", mb_s(size, secs))
        s.add("s3_vs_file", seconds["file"] / seconds["s3"])
    return OffloadFigures(sizes, s)


# --- the report ---------------------------------------------------------------------------------
@dataclass
class Report:
    args: argparse.Namespace
    read: ReadFigures
    spark: SparkFigures | None
    offload: OffloadFigures | None
    setup_s: float
    data_s: float
    seconds: float

    def render(self) -> str:
        r, s = self.read, self.read.s
        n = r.records

        def rec_rate(key: str) -> str:
            secs = s.med(key)
            return f"{n / secs:,.0f} rec/s ({mb_s(r.data_bytes, secs):,.1f} MB/s)"

        raw = s.med("raw")
        raw_cell = (
            f"{fmt_mb(mb_s(r.object_bytes, raw))} ({n / raw:,.0f} rec/s equivalent; "
            f"{r.object_bytes / MIB:.2f} MiB object, {s.med('raw') * 1000:,.0f} ms)"
        )
        met = s.med("cold_ratio") >= TARGET_COLD_RATIO
        out = [
            f"#### Cold storage: one {r.data_bytes / MIB:.1f} MiB segment ({n:,} records of 1 KiB), "
            f"radosgw S3 vs RADOS vs raw `pyarrow.fs`, medians of {self.args.reps}",
            "",
            "(1) Reading one completed segment (the cold one: hot copy purged; the hot one: RADOS)",
            "",
            "| measurement | cold (radosgw S3, tiered store) | hot (RADOS) | raw `pyarrow.fs` read of the cold object "
            "| cold ÷ raw | target | met | hot ÷ raw | cold ÷ hot |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| segment store `read_entry_buffers` (CRC32C checked) | {rec_rate('cold')} | {rec_rate('hot')} "
            f"| {raw_cell} | {ratio_cells(s.med('cold_ratio'), TARGET_COLD_RATIO)} | {s.med('hot_ratio'):.2f} "
            f"| {s.med('cold_vs_hot'):.2f} |",
            f"| the same, cold object left open (index cached: range reads only) | {rec_rate('cold_open')} "
            f"| the same as above | the same | {s.med('cold_open_ratio'):.2f} | - | - | - "
            f"| {s.med('cold_open_vs_hot'):.2f} |",
            f"| `read_arrow` of the segment (records decoded into Arrow) | {rec_rate('cold_arrow')} "
            f"| {rec_rate('hot_arrow')} | the same | {s.med('cold_arrow_ratio'):.2f} | - | - "
            f"| {s.med('hot_arrow_ratio'):.2f} | {s.med('cold_vs_hot_arrow'):.2f} |",
        ]
        if self.spark is not None:
            sp = self.spark
            out += [
                "",
                f'(2) Spark source, batch `spark.read.format("distributedlog")` + `startingTxId`/`endingTxId` '
                f"selecting one segment, `.count()`, `{self.args.master}`, medians of {self.args.spark_reps} "
                f"(SparkSession start {sp.start_s:.1f} s, untimed)",
                "",
                "| rows | cold-only segment | hot segment | cold ÷ hot |",
                "|---|---|---|---|",
                f"| {sp.records:,} | {fmt_rate(sp.records / sp.s.med('cold'))} ({sp.s.med('cold'):.2f} s) "
                f"| {fmt_rate(sp.records / sp.s.med('hot'))} ({sp.s.med('hot'):.2f} s) "
                f"| {sp.s.med('cold_vs_hot'):.2f} |",
            ]
        if self.offload is not None:
            of = self.offload
            out += [
                "",
                f"(3) Offload of one completed segment (read from RADOS, write, read back + SHA-256, record), "
                f"medians of {self.args.offload_reps}",
                "",
                "| cold store | object | time | throughput | radosgw ÷ file |",
                "|---|---|---|---|---|",
                f"| radosgw S3 | {of.object_bytes['s3'] / MIB:.2f} MiB | {of.s.med('s3'):.2f} s "
                f"| {fmt_mb(of.s.med('s3_mb_s'))} | {of.s.med('s3_vs_file'):.2f} |",
                f"| `file://` (this disk, fsync) | {of.object_bytes['file'] / MIB:.2f} MiB | {of.s.med('file'):.2f} s "
                f"| {fmt_mb(of.s.med('file_mb_s'))} | - |",
            ]
        out += [
            "",
            f"Target (cold reads >= {TARGET_COLD_RATIO:g} of the raw read) met: {yes_no(met)}. Whole benchmark: "
            f"{self.seconds:.0f} s (cluster, radosgw and ZooKeeper start {self.setup_s:.1f} s; writing and "
            f"offloading the data {self.data_s:.1f} s).",
            "",
            "Methodology: one process, one machine (the monitor, 3 OSDs, radosgw, ZooKeeper, Spark and this benchmark "
            "share its CPUs and disk). After an untimed warm-up of every row, each repetition runs every row back to "
            "back (order alternating); figures are medians, each ratio the median of the per-repetition ratios. The "
            "cold and raw rows read the same object (the raw one its index and trailer too, "
            f"{(r.object_bytes - r.data_bytes) / KIB:.0f} KiB more) with the same S3 client settings and 8 MiB "
            "ranges; the first cold row reopens the object each time (HEAD, trailer, index), as a reader arriving at "
            "a segment does, while the raw row opens it too (HEAD) but reads no trailer or index; the `read_arrow` "
            "cold row reopens it as well. MB/s counts entry bytes for store rows, object bytes for the raw row, "
            "1 KiB per record for Spark. radosgw keeps its data in the same 3-OSD cluster as the hot store, so cold "
            "and hot share the same disks and caches.",
        ]
        return "\n".join(out)


# --- main ---------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--segment-mib", type=int, default=16, help="MiB of records per segment (default 16)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of (1) (default 5)")
    parser.add_argument("--spark-reps", type=int, default=3, help="repetitions of (2) (default 3)")
    parser.add_argument("--offload-reps", type=int, default=3, help="repetitions of (3) (default 3)")
    parser.add_argument("--no-spark", action="store_true", help="skip (2)")
    parser.add_argument("--no-offload", action="store_true", help="skip (3)")
    parser.add_argument("--master", default="local[2]", help="Spark master for (2) (default local[2])")
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: under bench-data)")
    parser.add_argument("--verbose", action="store_true", help="cluster start progress on stderr")
    args = parser.parse_args(argv)
    if min(args.segment_mib, args.reps, args.spark_reps, args.offload_reps) < 1:
        parser.error("--segment-mib and every --*reps must be >= 1")
    per_segment = args.segment_mib * MIB // RECORD_SIZE

    started = time.perf_counter()
    base, created_parent = make_base("cold", args.dir)
    cluster: Any = None
    server: Any = None
    opened: list[Callable[[], None]] = []  # closers, run in reverse
    with terminate_as_interrupt():
        try:
            print("starting a Ceph cluster (1 mon, 3 OSDs) and radosgw ...", file=sys.stderr, flush=True)
            cluster, target = start_cluster(args.verbose)
            gw = cluster.start_radosgw()
            # credentials for this process's namespaces and for Spark's Python workers (started from here)
            os.environ["AWS_ACCESS_KEY_ID"] = gw.access_key
            os.environ["AWS_SECRET_ACCESS_KEY"] = gw.secret_key
            print(f"starting ZooKeeper ({base}) ...", file=sys.stderr, flush=True)
            server = start_zookeeper(base / "zk", True)
            conf: dict[str, object] = {
                "offloadThresholdHours": -1,  # offload only when the bench says so
                "coldStoreAccessKey": gw.access_key,
                "coldStoreSecretKey": gw.secret_key,
                "writerOutputBufferSize": 64 * KIB,
                "maxLogSegmentBytes": 1 << 40,
                "logSegmentRollingMinutes": 0,
            }
            zk_root = f"distributedlog://{server.hosts}/bench-{uuid.uuid4().hex[:12]}"
            s3_ns = bind(zk_root, "s3", target, gw.cold_uri(f"bench-{uuid.uuid4().hex[:8]}"), conf)
            opened.append(s3_ns.close)
            file_ns: storage.Namespace | None = None
            if not args.no_offload:
                file_ns = bind(zk_root, "file", target, f"file://{base / 'cold'}", conf)
                opened.append(file_ns.close)
            setup_s = time.perf_counter() - started

            t_data = time.perf_counter()
            print(f"writing 2 segments of {args.segment_mib} MiB, offloading, purging ...", file=sys.stderr, flush=True)
            blog = write_segments(s3_ns, 2, per_segment)
            offload_log(blog.tiered, blog.meta())
            time.sleep(0.01)  # a purge timestamp must be in the past
            purged = blog.dlm.purge_segments(int(time.time() * 1000) - 1)
            if [p.lssn for p in purged] != [blog.segments[0].lssn]:
                raise RuntimeError(f"purge removed the hot copies of {purged}, expected segment 1 only")
            file_log = write_segments(file_ns, 1, per_segment) if file_ns is not None else None
            data_s = time.perf_counter() - t_data

            import pyarrow.fs as pafs

            gw_fs = pafs.S3FileSystem(
                access_key=gw.access_key,
                secret_key=gw.secret_key,
                endpoint_override=gw.endpoint,
                scheme="http",
                region="us-east-1",
                force_virtual_addressing=False,
            )
            print(f"(1) reading one segment x {args.reps} ...", file=sys.stderr, flush=True)
            read = bench_read(blog, per_segment, gw_fs, args.reps)
            spark = None
            if not args.no_spark:
                print(f"(2) Spark source x {args.spark_reps} ...", file=sys.stderr, flush=True)
                spark = bench_spark(f"{zk_root}-s3", per_segment, args.master, args.spark_reps)
            offload = None
            if file_log is not None:
                print(f"(3) offload x {args.offload_reps} ...", file=sys.stderr, flush=True)
                s3_log = BenchLog(s3_ns, blog.dlm, blog.segments[1:])
                offload = bench_offload({"s3": s3_log, "file": file_log}, args.offload_reps)
            report = Report(args, read, spark, offload, setup_s, data_s, time.perf_counter() - started)
            print(report.render())
            return 0
        finally:
            for close in reversed(opened):
                try:
                    close()
                except Exception as e:  # close everything, report what failed
                    print(f"warning: cleanup step failed: {e}", file=sys.stderr)
            if server is not None:
                with contextlib.suppress(Exception):
                    server.stop()
            if cluster is not None:
                stop_cluster(cluster)
            remove_base(base, created_parent)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted: cluster and ZooKeeper stopped, data removed", file=sys.stderr)
        sys.exit(130)
