"""Positioning benchmark: how the cost of opening a reader grows with the log, by DLSN and by txid.

Run::

    .venv/bin/python bench/bench_positioning.py [--segments 10] [--per-segment 1000] [--scales 1,10,100]
                                                [--samples 30] [--backends embedded,zookeeper] [--dir PATH]

For each backend (the embedded namespace, and a private ZooKeeper server bound to ledger files) and
each scale ``k``, one log of ``k * segments`` segments of ``per-segment`` records (100-byte payloads,
txid = 2 * record number, so half the txids fall between records) is written, and the page cache is
warmed by one full read. Then, for ``--samples`` random records (seeded, the same draws for every
backend), each measurement is timed from the call to the first record in hand (opens untimed where
they are not the measurement; every record returned is checked):

* ``open_reader(DLSN)`` + ``read_next()`` at the record's DLSN;
* ``open_reader(txid)`` + ``read_next()`` at a txid just below the record's (the record is the first
  at or above it);
* ``read_arrow(DLSN, max_records=1)`` (the columnar path);
* the segment list alone (``log_segments()``: the metadata read every open starts with).

Prints one markdown table: medians in milliseconds, and each figure at 10x and 100x as a multiple of
its 1x figure. O(1) shows as ~1x at every scale, O(log n) as a small constant added per 10x, O(n) as
~10x and ~100x.
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# _common first: it puts the checkout on sys.path for `storage`
from _common import make_base, median, remove_base

import storage
from storage import DLSN, LogRecord

PAYLOAD = bytes(range(100))
CONF: dict[str, object] = {
    "writerOutputBufferSize": 16 * 1024,
    "logSegmentRollingMinutes": 0,
    "maxLogSegmentBytes": 1 << 30,
    "readAheadWaitTime": 10,
}


@dataclass
class Scale:
    k: int
    segments: int
    records: int
    write_s: float
    times_ms: dict[str, list[float]] = field(default_factory=dict)


def write_log(dlm: storage.LogManager, segments: int, per_segment: int) -> list[tuple[int, DLSN]]:
    """``segments`` completed segments of ``per_segment`` records; the (txid, DLSN) of every record."""
    out: list[tuple[int, DLSN]] = []
    t = 0
    for _ in range(segments):
        w = dlm.open_async_writer()
        try:
            futs = []
            for _ in range(per_segment):
                t += 2
                futs.append((t, w.write(LogRecord(t, PAYLOAD))))
            w.flush()
            out.extend((txid, f.result()) for txid, f in futs)
        finally:
            w.close()
    return out


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def measure(dlm: storage.LogManager, sample: list[tuple[int, DLSN]], times: dict[str, list[float]]) -> None:
    def by_dlsn(txid: int, dlsn: DLSN) -> None:
        with dlm.open_reader(dlsn) as r:
            rec = r.read_next()
        if rec is None or rec.dlsn != dlsn:
            raise RuntimeError(f"open_reader({dlsn}) returned {rec}")

    def by_txid(txid: int, dlsn: DLSN) -> None:
        with dlm.open_reader(txid - 1) as r:
            rec = r.read_next()
        if rec is None or rec.txid != txid or rec.dlsn != dlsn:
            raise RuntimeError(f"open_reader({txid - 1}) returned {rec}")

    def arrow(txid: int, dlsn: DLSN) -> None:
        batches = list(dlm.read_arrow(dlsn, max_records=1))
        if sum(b.num_rows for b in batches) != 1 or batches[0].column("txid")[0].as_py() != txid:
            raise RuntimeError(f"read_arrow({dlsn}) returned {batches}")

    for txid, dlsn in sample:
        for name, fn in (("dlsn", by_dlsn), ("txid", by_txid), ("arrow", arrow)):
            times.setdefault(name, []).append(timed(functools.partial(fn, txid, dlsn)))
        times.setdefault("segments", []).append(timed(dlm.log_segments))


def run_backend(uri: str, scales: Sequence[int], segments: int, per_segment: int, samples: int) -> list[Scale]:
    out = []
    with storage.open_namespace(uri, CONF) as ns:
        for k in scales:
            dlm = ns.open_log(f"pos-{k}")
            t0 = time.perf_counter()
            written = write_log(dlm, k * segments, per_segment)
            scale = Scale(k, k * segments, len(written), time.perf_counter() - t0)
            sum(b.num_rows for b in dlm.read_arrow())  # warm the page cache
            rng = random.Random(k)
            sample = [written[rng.randrange(len(written))] for _ in range(samples)]
            measure(dlm, sample[:3], {})  # warm-up: imports, connections
            measure(dlm, sample, scale.times_ms)
            out.append(scale)
            print(
                f"  {uri.split(':')[0]} x{k}: {scale.segments} segments, {scale.records:,} records "
                f"(written in {scale.write_s:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    return out


LABELS = {
    "dlsn": "`open_reader(DLSN)` + `read_next()`",
    "txid": "`open_reader(txid)` + `read_next()`",
    "arrow": "`read_arrow(DLSN, max_records=1)`",
    "segments": "segment list alone (`log_segments()`)",
}


def render(results: dict[str, list[Scale]], samples: int, seconds: float) -> str:
    first = next(iter(results.values()))
    head = " | ".join(f"x{s.k}: {s.segments:,} segs, {s.records:,} recs" for s in first)
    growth = " | ".join(f"x{s.k} ÷ x{first[0].k}" for s in first[1:])
    lines = [
        f"## Positioning: milliseconds from the call to the first record, median of {samples} random records",
        "",
        f"| backend | measurement | {head} | {growth} |",
        "|---|---|" + "---:|" * (len(first) + len(first) - 1),
    ]
    for backend, scales in results.items():
        for key, label in LABELS.items():
            ms = [median(s.times_ms[key]) for s in scales]
            cells = " | ".join(f"{m:.2f}" for m in ms)
            ratios = " | ".join(f"{m / ms[0]:.1f}x" for m in ms[1:])
            lines.append(f"| {backend} | {label} | {cells} | {ratios} |")
    lines += [
        "",
        f"Whole benchmark: {seconds:.0f} s. Methodology: one log per scale, written as completed segments of "
        "equal size (100-byte payloads, txids 2, 4, 6, ...), page cache warm; the same seeded random records "
        "for every backend; opens, first reads and closes in this process (close untimed except inside "
        "`with`); each measurement checks the record it got.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--segments", type=int, default=10, help="segments at scale 1 (default 10)")
    parser.add_argument("--per-segment", type=int, default=1000, help="records per segment (default 1,000)")
    parser.add_argument("--scales", default="1,10,100", help="log sizes as multiples (default 1,10,100)")
    parser.add_argument("--samples", type=int, default=30, help="random records per scale (default 30)")
    parser.add_argument("--backends", default="embedded,zookeeper", help="embedded and/or zookeeper")
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: under bench-data)")
    args = parser.parse_args(argv)
    scales = [int(s) for s in args.scales.split(",")]
    started = time.perf_counter()
    base, created = make_base("positioning", args.dir)
    results: dict[str, list[Scale]] = {}
    try:
        for backend in args.backends.split(","):
            if backend == "embedded":
                uri = f"distributedlog-local://{base / 'embedded'}"
                results["embedded"] = run_backend(uri, scales, args.segments, args.per_segment, args.samples)
            elif backend == "zookeeper":
                from bench_zookeeper import start_zookeeper

                server = start_zookeeper(base / "zk", force_sync=True)
                try:
                    uri = f"distributedlog://{server.hosts}/bench-{uuid.uuid4().hex[:8]}"
                    storage.bind_namespace(uri, segments=f"file://{base / 'zk-segments'}")
                    results["ZooKeeper"] = run_backend(uri, scales, args.segments, args.per_segment, args.samples)
                finally:
                    server.stop()
            else:
                raise SystemExit(f"unknown backend {backend!r}")
        print(render(results, args.samples, time.perf_counter() - started))
    finally:
        remove_base(base, created)
    return 0


if __name__ == "__main__":
    sys.exit(main())
