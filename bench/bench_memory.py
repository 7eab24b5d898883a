"""Memory benchmark: peak RSS of a reader, of the columnar reader and of a Spark task reading a whole
log, at 1x and 10x the log size (target: <= 256 MiB each, whatever the size).

Run::

    .venv/bin/python bench/bench_memory.py [--gib 2] [--scales 1,10] [--dir PATH]

For each scale, one log of ``gib * scale`` GiB of 1 KiB records (256 MiB segments) is written in an
embedded namespace, then each reader runs in a fresh Python process that reads the whole log once and
reports its peak resident set size (``VmHWM`` of ``/proc/self/status``) and the records it read:

* ``open_reader(DLSN.INITIAL)`` + ``read_bulk(10000, non_blocking=True)`` until the end;
* ``read_arrow()``, every batch dropped after counting its rows;
* a Spark batch query ``spark.read.format("distributedlog")`` ... ``.write.format("noop")`` in
  ``local[2]``: the figure is the largest peak RSS (``VmHWM``) of the Python worker processes that ran
  its tasks (read from ``/proc`` before the session stops; workers are reused across tasks, so each
  figure covers every task that worker ran). The JVM's heap is Spark's own and not counted.

Prints one markdown table. The baseline is the same process doing nothing but importing what the
reader imports (``storage``, ``pyarrow``), measured the same way.

Then a writer on a slow disk (``--slow-mbps``, default 16 MB/s: an ext4 on a loop device throttled by
the kernel, ``bench/_slowdisk.py``; needs root): a fresh process appends 1 KiB records with the async
writer as fast as it can, ``--slow-mib`` and 10x that many MiB in all, once with
``perWriterOutstandingWriteLimit`` (default 2,000: on ``OverCapacityError`` it waits for its oldest
write, then retries the rejected one, which was never queued) and once without a limit (it queues
every write and keeps its futures, as a producer that never waits would); peak RSS of each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# _common first: it puts the checkout on sys.path for `storage`
from _common import GIB, MIB, PAYLOAD, REPO, make_base, remove_base
from _slowdisk import slow_disk, unavailable

import storage

TARGET_MIB = 256
SEGMENT_BYTES = 256 * MIB
CHUNK = 10_000

#: scale, records, seconds to write, each reader's report
Row = tuple[int, int, float, dict[str, dict[str, object]]]

CHILD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
mode, uri = sys.argv[2], sys.argv[3]
import storage, pyarrow  # what every reader imports
count = 0
extra = {}
if mode == "reader":
    with storage.open_namespace(uri) as ns, ns.open_log("mem") as dlm, dlm.open_reader(storage.DLSN.INITIAL) as r:
        while True:
            recs = r.read_bulk(10000, non_blocking=True)
            if not recs:
                break
            count += len(recs)
elif mode == "arrow":
    with storage.open_namespace(uri) as ns, ns.open_log("mem") as dlm:
        for batch in dlm.read_arrow():
            count += batch.num_rows
elif mode == "spark":
    sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
    from _common import local_spark_session
    spark = local_spark_session("local[2]")
    df = spark.read.format("distributedlog").option("uri", uri).option("streams", "mem").load()
    count = df.count()
    df.write.format("noop").mode("overwrite").save()
    me = os.getpid()
    peaks = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if b"pyspark.daemon" not in b" ".join(cmd):
                continue
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        hwm = [line for line in status.splitlines() if line.startswith("VmHWM:")]
        if hwm:
            peaks.append(int(hwm[0].split()[1]))
    extra = {"worker_peaks_kib": sorted(peaks), "partitions": df.rdd.getNumPartitions()}
    spark.stop()
elif mode == "writer":
    import collections, time
    total, limit = int(sys.argv[4]), int(sys.argv[5])
    conf = {"perWriterOutstandingWriteLimit": limit, "outstandingWriteLimitDarkmode": False,
            "writerOutputBufferSize": 64 * 1024, "periodicFlushFrequencyMilliSeconds": 10}
    payload = bytes(range(256)) * 4
    pending = collections.deque()
    rejected = 0
    t0 = time.perf_counter()
    with storage.open_namespace(uri, conf) as ns, ns.open_log("slow") as dlm:
        w = dlm.open_async_writer()
        txid = 0
        while txid < total:
            rec = storage.LogRecord(txid + 1, payload)
            try:
                pending.append(w.write(rec))
            except storage.OverCapacityError:
                rejected += 1
                pending.popleft().result()  # wait for the oldest, then retry this one (it was not queued)
                continue
            txid += 1
            while pending and pending[0].done():
                pending.popleft().result()
        w.flush().result()
        for f in pending:
            f.result()
        pending.clear()
        w.close()
        count = dlm.record_count()
    extra = {"seconds": time.perf_counter() - t0, "rejected": rejected}
# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over fork and exec (a child of a large parent starts
# at the parent's peak), while VmHWM belongs to this process image
hwm = [line for line in open("/proc/self/status").read().splitlines() if line.startswith("VmHWM:")]
print(json.dumps({"count": count, "maxrss_kib": int(hwm[0].split()[1]), **extra}))
"""


def write_log(uri: str, records: int) -> float:
    conf = {
        "writerOutputBufferSize": 256 * 1024,
        "maxLogSegmentBytes": SEGMENT_BYTES,
        "logSegmentRollingMinutes": 0,
        "periodicFlushFrequencyMilliSeconds": 0,
    }
    t0 = time.perf_counter()
    with storage.open_namespace(uri, conf) as ns, ns.open_log("mem") as dlm:
        w = dlm.open_async_writer()
        try:
            for start in range(1, records + 1, CHUNK):
                futs = w.write_bulk(
                    [storage.LogRecord(t, PAYLOAD) for t in range(start, min(start + CHUNK, records + 1))]
                )
                if start % (CHUNK * 20) == 1:
                    w.flush().result()  # keep at most ~20 chunks in flight
                    futs[-1].result()
            w.flush().result()
        finally:
            w.close()
    return time.perf_counter() - t0


def run_child(mode: str, uri: str, *args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(REPO), mode, uri, *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def mib(kib: object) -> float:
    return float(kib) / 1024.0  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--gib", type=float, default=2.0, help="log size at scale 1, GiB (default 2)")
    parser.add_argument("--scales", default="1,10", help="log sizes as multiples (default 1,10)")
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: under bench-data)")
    parser.add_argument("--slow-mbps", type=float, default=16.0, help="slow disk write speed, MB/s (default 16)")
    parser.add_argument("--slow-mib", type=int, default=32, help="the slow-disk writer's 1x, MiB (default 32)")
    parser.add_argument("--limit", type=int, default=2000, help="perWriterOutstandingWriteLimit (default 2000)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    base, created = make_base("memory", args.dir)
    rows: list[Row] = []
    try:
        baseline = run_child("none", f"distributedlog-local://{base / 'none'}")
        for k in (int(s) for s in args.scales.split(",")):
            uri = f"distributedlog-local://{base / f'x{k}'}"
            records = int(args.gib * k * GIB) // len(PAYLOAD)
            print(f"x{k}: writing {records:,} records ...", file=sys.stderr, flush=True)
            seconds = write_log(uri, records)
            got = {}
            for mode in ("reader", "arrow", "spark"):
                print(f"x{k}: {mode} ...", file=sys.stderr, flush=True)
                got[mode] = run_child(mode, uri)
                if got[mode]["count"] != records:
                    raise SystemExit(f"{mode} read {got[mode]['count']} records, expected {records}")
            rows.append((k, records, seconds, got))
            os.system(f"rm -rf {base / f'x{k}'}")  # free the disk before the next scale
        slow = slow_writer(args.slow_mib, args.slow_mbps, args.limit, base)
        print(render(args.gib, baseline, rows, time.perf_counter() - started))
        print()
        print(slow)
    finally:
        remove_base(base, created)
    return 0


def slow_writer(mib_1x: int, mbps: float, limit: int, base: Path) -> str:
    """The slow-disk writer's table (or why it could not run)."""
    why = unavailable()
    if why is not None:
        return f"Slow-disk writer: not run here ({why})."
    lines = [
        f"## Memory: a writer on a slow disk ({mbps:g} MB/s, ext4 on a throttled loop device), 1 KiB records",
        "",
        "| written | outstanding limit | peak RSS | seconds | MB/s | writes rejected (retried) |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    with slow_disk(mib_1x * 10 * 2 + 256, int(mbps * 1e6), base) as mount:
        for k in (1, 10):
            records = mib_1x * k * 1024
            for lim in (limit, -1):
                uri = f"distributedlog-local://{mount / f'ns-{k}-{lim}'}"
                print(f"slow disk: {mib_1x * k} MiB, limit {lim} ...", file=sys.stderr, flush=True)
                got = run_child("writer", uri, str(records), str(lim))
                if got["count"] != records:
                    raise SystemExit(f"slow writer wrote {got['count']} records, expected {records}")
                secs = float(got["seconds"])  # type: ignore[arg-type]
                label = f"{lim:,} (`perWriterOutstandingWriteLimit`)" if lim > 0 else "none"
                lines.append(
                    f"| {mib_1x * k} MiB (x{k}) | {label} | {mib(got['maxrss_kib']):.0f} MiB | {secs:.1f} "
                    f"| {records * 1024 / secs / 1e6:.1f} | {got['rejected']:,} |"
                )
                os.system(f"rm -rf {mount / f'ns-{k}-{lim}'}")
    return "\n".join(lines)


def render(
    gib: float,
    baseline: dict[str, object],
    rows: list[tuple[int, int, float, dict[str, dict[str, object]]]],
    seconds: float,
) -> str:
    lines = [
        f"## Memory: peak RSS reading a whole log (1 KiB records, {SEGMENT_BYTES // MIB} MiB segments)",
        "",
        "| log | records | object reader | read_arrow | Spark task (largest Python worker) | target | met |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    met = []
    for k, records, _, got in rows:
        spark_peak = max(got["spark"]["worker_peaks_kib"] or [0])  # type: ignore[type-var]
        peaks = [mib(got["reader"]["maxrss_kib"]), mib(got["arrow"]["maxrss_kib"]), mib(spark_peak)]
        ok = all(p <= TARGET_MIB for p in peaks)
        met.append(ok)
        lines.append(
            f"| {gib * k:g} GiB (x{k}) | {records:,} | {peaks[0]:.0f} MiB | {peaks[1]:.0f} MiB | {peaks[2]:.0f} MiB "
            f"({got['spark']['partitions']} partitions) | <= {TARGET_MIB} MiB each | {'yes' if ok else '**NO**'} |"
        )
    lines += [
        "",
        f"Baseline: a Python process that only imports `storage` and `pyarrow`: {mib(baseline['maxrss_kib']):.0f} MiB. "
        f"Targets met: {sum(met)}/{len(met)}. Whole benchmark: {seconds:.0f} s.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
