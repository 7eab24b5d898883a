"""Metadata benchmark: the embedded namespace (SQLite metadata) and a ZooKeeper namespace side by
side in one run, on the same disk and the same segment store (ledger files).

Run::

    .venv/bin/python bench/bench_zookeeper.py [--records N] [--small-reps 40] [--reps 5]
                                              [--zk-force-sync yes|no] [--dir PATH]

Starts a private ZooKeeper server on a free loopback port (``tests/zk.py``, Debian's package),
binds ``distributedlog://127.0.0.1:<port>/bench-<uuid>`` to a segment directory with
``storage.bind_namespace`` and opens an embedded namespace ``distributedlog-local:///...`` next to
it. Prints one markdown table and a note on methodology. Records are 1 KiB.

Rows (each small operation repeated ``--small-reps`` times per backend after one untimed warm-up,
the two backends alternating, median and p90 reported):

(1) Roll: a sync writer with ``writerOutputBufferSize`` 0, ``logSegmentRollingMinutes`` 0 and
    ``maxLogSegmentBytes`` 1, so every record after a segment's first one rolls. Each timed
    ``w.write(record)`` completes the current segment (seal the ledger, complete its metadata)
    and starts the next one (new ledger, allocation and in-progress metadata) before buffering
    the record; an untimed ``w.flush()`` after every write keeps earlier data out of the timing.
(2) ``dlm.open_writer()`` (ownership lock + recovery) on a log with 5 completed segments, closed
    cleanly every time (close untimed); and on a log whose previous writer wrote 10 records,
    flushed and was aborted, so each open also recovers one in-progress segment (fence its
    ledger, read its last record, complete its metadata).
(3) ``dlm.open_reader(txid)`` + the first ``read_next()`` at a random transaction id of a log of
    20 segments x 1,000 records (same txids for both backends; close untimed; page cache warm).
(4) Async-writer throughput, ``writerOutputBufferSize`` 64 KiB, N records, every future waited
    for: with no rolling (``maxLogSegmentBytes`` 1 GiB) and with a roll every 4 MiB. Repeated
    ``--reps`` times, each repetition running both backends back to back (order alternating);
    the ratio is the median of the per-repetition ratios ZooKeeper / embedded.
"""

from __future__ import annotations

import argparse
import gc
import logging
import random
import sys
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# _common first: it puts the checkout on sys.path for `storage`
from _common import (
    GIB,
    MIB,
    PAYLOAD,
    fmt_rate,
    make_base,
    median,
    percentile,
    remove_base,
    timed_async_writes,
    yes_no,
)
from _common import writer_conf as conf

import storage

TARGET_THROUGHPUT_RATIO = 0.9

OPEN_SEGMENTS = 5  # completed segments of the log in (2)
RECOVER_RECORDS = 10  # records in the in-progress segment each open in (2) recovers
READ_SEGMENTS = 20
READ_PER_SEGMENT = 1000
ROLL_EVERY = 4 * MIB

BACKENDS = ("embedded", "zookeeper")

Sampler = Generator[float, None, None]


# --- helpers --------------------------------------------------------------------------------
def record(txid: int) -> storage.LogRecord:
    return storage.LogRecord(txid, PAYLOAD)


class Backend:
    """One namespace and a counter for fresh log names (every log is deleted after use)."""

    def __init__(self, name: str, uri: str, ns: storage.Namespace) -> None:
        self.name = name
        self.uri = uri
        self.ns = ns
        self._n = 0

    def fresh_log(self, tag: str) -> str:
        self._n += 1
        return f"{tag}-{self._n}"

    def drop(self, log_name: str) -> None:
        try:
            self.ns.delete_log(log_name)
        except storage.DLError as e:
            print(f"warning: could not delete {self.name} log {log_name!r}: {e}", file=sys.stderr)

    def close(self) -> None:
        self.ns.close()


# --- samplers: generators that set up untimed and yield one timed sample (seconds) per step --
def roll_sampler(b: Backend) -> Sampler:
    name = b.fresh_log("roll")
    dlm = b.ns.open_log(name, conf=conf(writerOutputBufferSize=0, maxLogSegmentBytes=1))
    w = dlm.open_writer()
    try:
        txid = 1
        w.write(record(txid))  # starts the first segment
        w.flush()
        while True:
            txid += 1
            rec = record(txid)
            gc.collect()
            t0 = time.perf_counter()
            w.write(rec)  # completes the segment holding txid-1, starts one for txid
            dt = time.perf_counter() - t0
            w.flush()
            yield dt
    finally:
        w.close()
        segments = len(dlm.log_segments())
        if segments != txid:
            raise RuntimeError(f"{b.name}: expected {txid} segments (one per record), found {segments}")
        dlm.close()
        b.drop(name)


def open_clean_sampler(b: Backend) -> Sampler:
    name = b.fresh_log("open-clean")
    dlm = b.ns.open_log(name, conf=conf())
    txid = 0
    for _ in range(OPEN_SEGMENTS):
        with dlm.open_writer() as w:
            for _ in range(RECOVER_RECORDS):
                txid += 1
                w.write(record(txid))
    try:
        while True:
            gc.collect()
            t0 = time.perf_counter()
            w = dlm.open_writer()
            dt = time.perf_counter() - t0
            w.close()
            yield dt
    finally:
        segments = len(dlm.log_segments())
        if segments != OPEN_SEGMENTS:
            raise RuntimeError(f"{b.name}: expected {OPEN_SEGMENTS} segments, found {segments}")
        dlm.close()
        b.drop(name)


def _leave_in_progress(w: storage.LogWriter, first_txid: int) -> int:
    """Write, flush and abort: the segment stays in progress for the next owner to recover."""
    for i in range(RECOVER_RECORDS):
        w.write(record(first_txid + i))
    w.flush()
    w.abort()
    return first_txid + RECOVER_RECORDS


def open_recover_sampler(b: Backend) -> Sampler:
    name = b.fresh_log("open-recover")
    dlm = b.ns.open_log(name, conf=conf())
    txid = 1
    for _ in range(OPEN_SEGMENTS):
        with dlm.open_writer() as w:
            for _ in range(RECOVER_RECORDS):
                w.write(record(txid))
                txid += 1
    txid = _leave_in_progress(dlm.open_writer(), txid)
    opened = 0
    try:
        while True:
            gc.collect()
            t0 = time.perf_counter()
            w = dlm.open_writer()  # recovers the in-progress segment the last writer left
            dt = time.perf_counter() - t0
            opened += 1
            txid = _leave_in_progress(w, txid)
            yield dt
    finally:
        w = dlm.open_writer()
        w.close()
        segs = dlm.log_segments()
        expected = OPEN_SEGMENTS + opened + 1
        if len(segs) != expected or any(s.in_progress for s in segs) or dlm.last_txid() != txid - 1:
            raise RuntimeError(f"{b.name}: recovery left {len(segs)} segments (expected {expected})")
        dlm.close()
        b.drop(name)


def read_sampler(b: Backend, txids: Sequence[int]) -> Sampler:
    name = b.fresh_log("read")
    dlm = b.ns.open_log(name, conf=conf())
    txid = 0
    for _ in range(READ_SEGMENTS):
        with dlm.open_writer() as w:  # close completes the segment
            w.write_bulk([record(txid + i + 1) for i in range(READ_PER_SEGMENT)])
            txid += READ_PER_SEGMENT
    try:
        if len(dlm.log_segments()) != READ_SEGMENTS:
            raise RuntimeError(f"{b.name}: expected {READ_SEGMENTS} segments")
        warm = dlm.open_reader(storage.DLSN.INITIAL)  # page cache warm for every position
        try:
            while warm.read_bulk(10_000, non_blocking=True):
                pass
        finally:
            warm.close()
        for want in txids:
            gc.collect()
            t0 = time.perf_counter()
            r = dlm.open_reader(want)
            rec = r.read_next()
            dt = time.perf_counter() - t0
            r.close()
            if rec is None or rec.txid != want:
                raise RuntimeError(f"{b.name}: reader at txid {want} returned {rec!r}")
            yield dt
    finally:
        dlm.close()
        b.drop(name)


def interleave(samplers: dict[str, Sampler], reps: int) -> dict[str, list[float]]:
    """One warm-up step per sampler (discarded), then ``reps`` steps each, the backends
    alternating which goes first; every sampler is closed (its log deleted) at the end."""
    out: dict[str, list[float]] = {k: [] for k in samplers}
    keys = list(samplers)
    try:
        for k in keys:
            next(samplers[k])
        for i in range(reps):
            for k in keys if i % 2 == 0 else keys[::-1]:
                out[k].append(next(samplers[k]))
    finally:
        errors: list[BaseException] = []
        for s in samplers.values():
            try:
                s.close()
            except Exception as e:  # close every sampler, then report the first failure
                errors.append(e)
        if errors:
            raise errors[0]
    return out


@dataclass
class Latency:
    label: str
    samples_ms: dict[str, list[float]]

    def median_ms(self, backend: str) -> float:
        return median(self.samples_ms[backend])

    def p90_ms(self, backend: str) -> float:
        return percentile(self.samples_ms[backend], 0.90)

    @property
    def ratio(self) -> float:
        return self.median_ms("zookeeper") / self.median_ms("embedded")


def bench_latency(label: str, backends: dict[str, Backend], make: Callable[[Backend], Sampler], reps: int) -> Latency:
    print(f"{label} ...", file=sys.stderr, flush=True)
    secs = interleave({k: make(b) for k, b in backends.items()}, reps)
    return Latency(label, {k: [s * 1000.0 for s in v] for k, v in secs.items()})


# --- (4) throughput ---------------------------------------------------------------------------
def run_async_writer(b: Backend, records: Sequence[storage.LogRecord], max_bytes: int) -> tuple[float, int]:
    """Seconds to write ``records`` (every future resolved) and the number of segments made."""
    name = b.fresh_log("throughput")
    dlm = b.ns.open_log(name, conf=conf(maxLogSegmentBytes=max_bytes))
    try:
        aw = dlm.open_async_writer()
        seconds, _last = timed_async_writes(aw, records)
        aw.close()
        segments = len(dlm.log_segments())
        if dlm.last_txid() != records[-1].txid:
            raise RuntimeError(f"{b.name}: last txid {dlm.last_txid()}, expected {records[-1].txid}")
        return seconds, segments
    finally:
        dlm.close()
        b.drop(name)


@dataclass
class Throughput:
    label: str
    rates: dict[str, float]  # median records/s per backend
    segments: dict[str, float]  # median segments per run
    ratio: float  # median of per-repetition ZooKeeper / embedded
    target: float | None


def bench_throughput(
    label: str,
    backends: dict[str, Backend],
    records: Sequence[storage.LogRecord],
    max_bytes: int,
    reps: int,
    target: float | None,
) -> Throughput:
    print(f"{label} ...", file=sys.stderr, flush=True)
    n = len(records)
    rates: dict[str, list[float]] = {k: [] for k in backends}
    segs: dict[str, list[float]] = {k: [] for k in backends}
    ratios: list[float] = []
    keys = list(backends)
    for i in range(reps):
        this: dict[str, float] = {}
        for k in keys if i % 2 == 0 else keys[::-1]:
            seconds, segments = run_async_writer(backends[k], records, max_bytes)
            this[k] = n / seconds
            rates[k].append(n / seconds)
            segs[k].append(segments)
        ratios.append(this["zookeeper"] / this["embedded"])
    return Throughput(
        label,
        {k: median(v) for k, v in rates.items()},
        {k: median(v) for k, v in segs.items()},
        median(ratios),
        target,
    )


# --- report -----------------------------------------------------------------------------------
def render(
    args: argparse.Namespace,
    lats: list[Latency],
    tps: list[Throughput],
    zk_uri: str,
    zk_start_s: float,
    seconds: float,
) -> str:
    lines = [
        f"## Embedded (SQLite) vs ZooKeeper namespace: 1 KiB records; small operations median / p90 of "
        f"{args.small_reps}, throughput median of {args.reps} (N = {args.records:,})",
        "",
        "| measurement | embedded (`distributedlog-local://`) | ZooKeeper (`distributedlog://`) "
        "| ZooKeeper ÷ embedded | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for lat in lats:
        cells = [f"{lat.median_ms(k):.2f} ms (p90 {lat.p90_ms(k):.2f} ms)" for k in BACKENDS]
        lines.append(f"| {lat.label} | {cells[0]} | {cells[1]} | {lat.ratio:.2f}x time | - | - |")
    met: list[bool] = []
    for tp in tps:
        cells = [f"{fmt_rate(tp.rates[k])}, {tp.segments[k]:,.0f} segment(s)" for k in BACKENDS]
        if tp.target is None:
            target, ok = "- (informational)", "-"
        else:
            target, ok = f">= {tp.target:g}", yes_no(tp.ratio >= tp.target)
            met.append(tp.ratio >= tp.target)
        lines.append(f"| {tp.label} | {cells[0]} | {cells[1]} | {tp.ratio:.2f} | {target} | {ok} |")
    sync = "forceSync=yes (ZooKeeper's default)" if args.zk_force_sync == "yes" else "forceSync=no"
    lines += [
        "",
        f"Targets met: {sum(met)}/{len(met)}. Whole benchmark: {seconds:.0f} s "
        f"(ZooKeeper server start {zk_start_s:.1f} s).",
        "",
        "Methodology: one process, one disk; both namespaces use the same segment store (ledger files under "
        "the data directory), so they differ only in metadata: the embedded namespace commits each metadata "
        "transaction to SQLite in WAL mode with synchronous=FULL (one fsync per transaction), the ZooKeeper "
        f"namespace talks to a private standalone ZooKeeper server on loopback ({zk_uri}; {sync}, its data "
        "directory on the same disk; a JVM sharing this machine's CPUs). Every measurement uses a fresh log, "
        "deleted afterwards; setup, warm-up and cleanup are untimed. Small operations: after one untimed "
        "warm-up step per backend, the two backends alternate step by step (which goes first alternates "
        "too), each step timed with perf_counter around exactly the call named, after a gc.collect(); the "
        "table gives the median and the nearest-rank p90, and the ratio of the medians (above 1 = ZooKeeper "
        "slower). (1) Roll: sync writer, writerOutputBufferSize 0, logSegmentRollingMinutes 0, "
        "maxLogSegmentBytes 1; the timed call is `w.write(record)` of a record whose segment predecessor is "
        "already durable and committed (an untimed `w.flush()` follows every write), so it measures closing "
        "the segment (seal the ledger, write the completed segment's metadata) plus starting the next (new "
        "ledger, allocation and in-progress metadata, background TTL purge triggered) plus handing the record "
        "to the new ledger (its append is not waited for); the log grows by one segment per step. "
        f"(2) `dlm.open_writer()` (ownership lock + recovery; close untimed) on a log of {OPEN_SEGMENTS} "
        f"completed segments; and, for the recovery row, on a log whose previous writer wrote {RECOVER_RECORDS} "
        "records, flushed and aborted, so the open fences and completes that in-progress segment (the log "
        f"grows by one segment per step). (3) `dlm.open_reader(txid)` + first `read_next()` on a log of "
        f"{READ_SEGMENTS} segments x {READ_PER_SEGMENT:,} records (each closed writer completes one segment), "
        "page cache warmed by one full read; the txids are drawn at random (seeded) and are the same for "
        "both backends; the record returned is checked. (4) async writer, writerOutputBufferSize 64 KiB, no "
        "periodic or immediate flush: N `write()` calls, the final `flush()` and every future's resolution "
        "(records built beforehand; writer open/close untimed); the no-roll row keeps one segment "
        "(maxLogSegmentBytes 1 GiB), the rolling row sets maxLogSegmentBytes to "
        f"{ROLL_EVERY // MIB} MiB so the rolls (metadata transactions) are on the write path. Each repetition "
        "runs both backends back to back (order alternating); rates are medians, the ratio is the median of "
        "the per-repetition ratios ZooKeeper / embedded. MB/s counts 1 KiB of payload per record "
        "(1 MB = 10^6 bytes).",
    ]
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------
def start_zookeeper(workdir: Path, force_sync: bool) -> Any:
    """A private ZooKeeper server (``tests.zk.ZooKeeperServer``) with its data under ``workdir``."""
    from tests.zk import ZooKeeperServer, free_port

    server = ZooKeeperServer(workdir=workdir, port=free_port())
    if force_sync:  # the test harness turns ZooKeeper's fsync off; a benchmark keeps the default
        cfg = server.cfg_path.read_text()
        server.cfg_path.write_text(cfg.replace("forceSync=no", "forceSync=yes"))
    kazoo_log = logging.getLogger("kazoo")
    level = kazoo_log.level
    kazoo_log.setLevel(logging.CRITICAL)  # start() probes the port with a client until it answers
    try:
        server.start()
    finally:
        kazoo_log.setLevel(level)
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000, help="records for (4) (default 100,000)")
    parser.add_argument("--small-reps", type=int, default=40, help="repetitions of (1)-(3) (default 40)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of (4) (default 5)")
    parser.add_argument(
        "--zk-force-sync",
        choices=("yes", "no"),
        default="yes",
        help="ZooKeeper's forceSync (fsync of its transaction log); default yes, as ZooKeeper ships",
    )
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: under bench-data)")
    args = parser.parse_args(argv)
    if args.records < 1 or args.small_reps < 1 or args.reps < 1:
        parser.error("--records, --small-reps and --reps must be >= 1")

    base, created_parent = make_base("zookeeper", args.dir)
    started = time.perf_counter()
    server: Any = None
    backends: dict[str, Backend] = {}
    try:
        print(f"starting ZooKeeper ({base}) ...", file=sys.stderr, flush=True)
        try:
            server = start_zookeeper(base / "zk", args.zk_force_sync == "yes")
        except RuntimeError as e:
            print(f"error: cannot start ZooKeeper: {e}", file=sys.stderr)
            return 2
        zk_start_s = time.perf_counter() - started
        local_root = base / "embedded"
        backends["embedded"] = Backend(
            "embedded",
            f"distributedlog-local://{local_root}",
            storage.open_namespace(f"distributedlog-local://{local_root}"),
        )
        zk_uri = f"distributedlog://{server.hosts}/bench-{uuid.uuid4().hex[:12]}"
        storage.bind_namespace(zk_uri, segments=f"file://{base / 'zk-segments'}")
        backends["zookeeper"] = Backend("zookeeper", zk_uri, storage.open_namespace(zk_uri))

        reps = args.small_reps
        rng = random.Random(42)
        txids = [rng.randint(1, READ_SEGMENTS * READ_PER_SEGMENT) for _ in range(reps + 1)]
        lats = [
            bench_latency("(1) roll a segment: `w.write()` that rolls", backends, roll_sampler, reps),
            bench_latency(
                f"(2) `open_writer()`, {OPEN_SEGMENTS} completed segments, clean", backends, open_clean_sampler, reps
            ),
            bench_latency(
                "(2) `open_writer()` + recovery of 1 in-progress segment", backends, open_recover_sampler, reps
            ),
            bench_latency(
                f"(3) `open_reader(txid)` + first `read_next()`, {READ_SEGMENTS} x {READ_PER_SEGMENT:,} records",
                backends,
                lambda b: read_sampler(b, txids),
                reps,
            ),
        ]
        records = [record(i + 1) for i in range(args.records)]
        tps = [
            bench_throughput(
                "(4) async writer 64 KiB buffer, no rolling",
                backends,
                records,
                GIB,
                args.reps,
                TARGET_THROUGHPUT_RATIO,
            ),
            bench_throughput(
                f"(4) async writer 64 KiB buffer, roll every {ROLL_EVERY // MIB} MiB",
                backends,
                records,
                ROLL_EVERY,
                args.reps,
                None,
            ),
        ]
        print(render(args, lats, tps, zk_uri, zk_start_s, time.perf_counter() - started))
        return 0
    finally:
        for b in backends.values():
            try:
                b.close()
            except storage.DLError as e:
                print(f"warning: closing the {b.name} namespace: {e}", file=sys.stderr)
        if server is not None:
            server.stop()
        remove_base(base, created_parent)


if __name__ == "__main__":
    sys.exit(main())
