"""Metrics overhead: the async writer and the reader with ``enableStats`` on and off, side by side.

Run::

    .venv/bin/python bench/bench_stats.py [--records 100000] [--rounds 5]

Writes ``--records`` records of 1 KiB with the async writer of an embedded namespace (a fresh log per
run), at two output buffer sizes: 1 KiB (DistributedLog's default ``writerOutputBufferSize``: one entry
per record, the most metric updates per record) and 64 KiB; then reads the log back with
``read_bulk``. Rounds alternate on/off; medians. Target: the writer with stats ≥ 0.95 of without
(overhead ≤ 5 %).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

# _common first: it puts the checkout on sys.path for `storage`
from _common import KIB, PAYLOAD, timed_async_writes, writer_conf

import storage

TARGET = 0.95


def run_writer(base: Path, n: int, buffer: int, stats_on: bool, tag: str) -> tuple[float, float]:
    """(write rec/s, read rec/s) of one fresh log."""
    uri = f"distributedlog-local://{base / tag}"
    conf = writer_conf(writerOutputBufferSize=buffer, enableStats=stats_on)
    records = [storage.LogRecord(t, PAYLOAD) for t in range(1, n + 1)]
    with storage.open_namespace(uri, conf) as ns:
        ns.create_log("s")
        dlm = ns.open_log("s")
        w = dlm.open_async_writer()
        seconds, _last = timed_async_writes(w, records)
        w.close()
        t0 = time.perf_counter()
        got = 0
        with dlm.open_reader(storage.DLSN.INITIAL) as r:
            while True:
                recs = r.read_bulk(10_000, non_blocking=True)
                if not recs:
                    break
                got += len(recs)
        read_s = time.perf_counter() - t0
    assert got == n, (got, n)
    shutil.rmtree(base / tag, ignore_errors=True)
    return n / seconds, n / read_s


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="dl-bench-stats-"))
    rows = []
    try:
        for buffer in (1 * KIB, 64 * KIB):
            got: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
            run_writer(base, args.records // 10, buffer, True, "warm")
            for r in range(args.rounds):
                for on in (False, True) if r % 2 == 0 else (True, False):
                    got[on].append(run_writer(base, args.records, buffer, on, f"b{buffer}-r{r}-{on}"))
            med = {
                on: (statistics.median(w for w, _ in v), statistics.median(x for _, x in v)) for on, v in got.items()
            }
            rows.append((buffer, med))
            print(f"buffer {buffer}: {med}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"## Metrics overhead: {args.records:,} records of 1 KiB, embedded namespace, median of {args.rounds}\n")
    print(
        "| writerOutputBufferSize | writes/s, stats off | writes/s, stats on | on ÷ off "
        "| reads/s, off | reads/s, on | on ÷ off |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    met = []
    for buffer, med in rows:
        (w_off, r_off), (w_on, r_on) = med[False], med[True]
        met.append(w_on / w_off >= TARGET)
        print(
            f"| {buffer // KIB} KiB | {w_off:,.0f} | {w_on:,.0f} | {w_on / w_off:.3f} | {r_off:,.0f} | {r_on:,.0f} "
            f"| {r_on / r_off:.3f} |"
        )
    print(f"\nWriter target (stats on ≥ {TARGET} of off): {'met' if all(met) else 'MISSED'}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
