"""Storage benchmark: the writer, acknowledgement latency and the reader, each side by side
with a plain-Python baseline measured in the same run on the same disk.

Run::

    .venv/bin/python bench/bench_storage.py [--records N] [--dir PATH] [--reps 3] [--profile]

Prints one markdown table and a note on methodology. Every figure uses 1 KiB records on one
log; every measurement is repeated (``--reps``, default 3) and the median is reported, with
each ratio the median of the per-repetition ratios (the writer and its baseline of one
repetition run back to back, so a disk that swings between runs affects both alike).

Rows:

(a) ``open_async_writer()`` with ``writerOutputBufferSize`` = 64 KiB and = 0: N records written,
    every future waited for. Baseline: ``os.write`` + ``os.fdatasync`` of the same bytes in as
    many fsyncs as the writer's group commit issued (read from the segment store's ledger
    writers, ``sync_count``), i.e. the same bytes per fsync.
(b) Per-record acknowledgement latency (``write()`` call to future resolution) with
    ``writerOutputBufferSize`` = 0, paced by a token bucket at half the rate (a) measured for
    that configuration. Context: the latency of one 1 KiB ``os.write`` + ``os.fdatasync``.
(c) Reading N records of completed segments with ``open_reader(DLSN.INITIAL)`` and
    ``read_bulk(10000, non_blocking=True)``; with ``read_arrow()`` (Arrow batches, the columnar
    path); the segment store's ``read_entries`` over the same ledgers; a plain ``f.read`` of the
    ledger files in 4 MiB chunks. All warm (page cache).

``--profile`` prints instead the top functions (cumulative time) of 20,000 async writes, for the
calling thread and for the segment store's commit thread.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import io
import math
import os
import pstats
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

# _common first: it puts the checkout on sys.path for `storage`
import _common
from _common import (
    KIB,
    MIB,
    PAYLOAD,
    RECORD_SIZE,
    arrow_read,
    fmt_bytes,
    fmt_rate,
    make_base,
    median,
    percentile,
    reader_read,
    remove_base,
    segstore_read,
    timed_async_writes,
    wait_all,
    yes_no,
)

import storage

READ_CHUNK = 4 * MIB
BULK = 10_000
LOG_NAME = "bench"

TARGET_WRITE_RATIO = 0.6
TARGET_P99_MS = 5.0
TARGET_READ_RATIO = 0.3
TARGET_ARROW_RATIO = 0.3


# --- helpers --------------------------------------------------------------------------------
def writer_conf(buffer_size: int) -> dict[str, object]:
    """One segment for the whole run, no periodic or immediate flush."""
    return _common.writer_conf(writerOutputBufferSize=buffer_size)


def make_records(n: int) -> list[storage.LogRecord]:
    return [storage.LogRecord(i + 1, PAYLOAD) for i in range(n)]


class Workspace:
    """Fresh directories under one base directory, each removed after use."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._n = 0

    def fresh(self, tag: str) -> Path:
        self._n += 1
        path = self.base / f"{tag}-{self._n}"
        path.mkdir(parents=True)
        return path


class BenchNamespace:
    """A namespace in a fresh directory that remembers every ledger writer the segment store
    creates (to read their ``sync_count``); ``close()`` deletes the directory."""

    def __init__(self, root: Path, on_ledger: Callable[[Any], None] | None = None) -> None:
        self.root = root
        self.ns = storage.open_namespace(str(root))
        self.ledgers: list[Any] = []
        store: Any = self.ns.segstore
        original = store.create_ledger

        def create_ledger(ledger_id: int | None = None) -> Any:
            ledger = original(ledger_id)
            self.ledgers.append(ledger)
            if on_ledger is not None:
                on_ledger(ledger)
            return ledger

        store.create_ledger = create_ledger

    def sync_count(self) -> int | None:
        """Durability barriers (fdatasync) issued for appends, or None if not observable."""
        counts = [getattr(ledger, "sync_count", None) for ledger in self.ledgers]
        if not counts or any(not isinstance(c, int) for c in counts):
            return None
        return sum(c for c in counts if isinstance(c, int))

    def ledger_files(self) -> list[Path]:
        return sorted((self.root / "segments" / "ledgers").glob("*.ledger"))

    def close(self) -> None:
        try:
            self.ns.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


# --- (a) writer throughput ------------------------------------------------------------------
@dataclass
class WriterRun:
    seconds: float
    fsyncs: int | None
    data_bytes: int  # bytes of ledger files on disk (frames, headers, index)
    entries: int

    def rate(self, n: int) -> float:
        return n / self.seconds


def run_async_writer(ws: Workspace, records: list[storage.LogRecord], buffer_size: int) -> WriterRun:
    bns = BenchNamespace(ws.fresh("writer"))
    try:
        dlm = bns.ns.open_log(LOG_NAME, conf=writer_conf(buffer_size))
        aw = dlm.open_async_writer()
        seconds, last = timed_async_writes(aw, records)
        fsyncs = bns.sync_count()
        aw.close()
        data_bytes = sum(p.stat().st_size for p in bns.ledger_files())
        return WriterRun(seconds, fsyncs, data_bytes, last.entry_id + 1)
    finally:
        bns.close()


def run_raw_write(ws: Workspace, total_bytes: int, fsyncs: int) -> float:
    """Seconds to append ``total_bytes`` to a new file with ``fsyncs`` write+fdatasync rounds."""
    fsyncs = max(1, fsyncs)
    chunk = total_bytes // fsyncs
    sizes = [chunk] * fsyncs
    sizes[-1] += total_bytes - chunk * fsyncs
    buf = memoryview(bytes(PAYLOAD * (max(sizes) // RECORD_SIZE + 1)))
    path = ws.fresh("raw") / "raw.dat"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        gc.collect()
        t0 = time.perf_counter()
        for size in sizes:
            done = 0
            while done < size:
                done += os.write(fd, buf[done:size])
            os.fdatasync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)
        shutil.rmtree(path.parent, ignore_errors=True)


@dataclass
class WriteResult:
    buffer_size: int
    writer_rate: float
    raw_rate: float  # raw appends at the bytes per fsync the writer's group commit reached
    ratio: float  # writer / raw_rate
    fsyncs: float
    bytes_per_fsync: float
    entries_per_fsync: float
    counted: bool  # fsyncs read from the ledger writers (else assumed one per buffer)
    raw_rate_at_buffer: float | None  # raw appends of writerOutputBufferSize bytes per fsync
    ratio_at_buffer: float | None  # writer / raw_rate_at_buffer: the row with the target


def bench_write(ws: Workspace, records: list[storage.LogRecord], buffer_size: int, reps: int) -> WriteResult:
    n = len(records)
    w_rates: list[float] = []
    r_rates: list[float] = []
    ratios: list[float] = []
    syncs: list[float] = []
    per_sync_bytes: list[float] = []
    per_sync_entries: list[float] = []
    at_buffer: list[float] = []
    ratios_at_buffer: list[float] = []
    counted = True
    for _ in range(reps):
        w = run_async_writer(ws, records, buffer_size)
        if w.fsyncs is None:
            counted = False
            fsyncs = max(1, math.ceil(n * RECORD_SIZE / max(buffer_size, RECORD_SIZE)))
        else:
            fsyncs = max(1, w.fsyncs)
        raw_s = run_raw_write(ws, w.data_bytes, fsyncs)
        w_rates.append(w.rate(n))
        r_rates.append(n / raw_s)
        ratios.append(w.rate(n) / (n / raw_s))
        syncs.append(fsyncs)
        per_sync_bytes.append(w.data_bytes / fsyncs)
        per_sync_entries.append(w.entries / fsyncs)
        if buffer_size > 0:
            raw_at_buffer = n / run_raw_write(ws, w.data_bytes, math.ceil(w.data_bytes / buffer_size))
            at_buffer.append(raw_at_buffer)
            ratios_at_buffer.append(w.rate(n) / raw_at_buffer)
    return WriteResult(
        buffer_size,
        median(w_rates),
        median(r_rates),
        median(ratios),
        median(syncs),
        median(per_sync_bytes),
        median(per_sync_entries),
        counted,
        median(at_buffer) if at_buffer else None,
        median(ratios_at_buffer) if ratios_at_buffer else None,
    )


def warm_up(ws: Workspace, total_bytes: int) -> None:
    """Write (with fdatasync) and delete ``total_bytes`` once, untimed: on a virtual machine the
    first touch of fresh memory pages is several times slower than writing into pages the page
    cache has used before, which would favour whichever side of a comparison runs second."""
    run_raw_write(ws, total_bytes, 8)


# --- (b) acknowledgement latency --------------------------------------------------------------
@dataclass
class LatencyRun:
    p50_ms: float
    p99_ms: float
    achieved_rate: float
    fsyncs: int | None


def run_ack_latency(ws: Workspace, records: list[storage.LogRecord], rate: float) -> LatencyRun:
    """Token-bucket paced writes (``rate`` records/s, burst 32), each timed from the ``write()``
    call to its future's resolution (a done callback takes the end timestamp)."""
    n = len(records)
    starts = [0.0] * n
    ends = [0.0] * n
    clock = time.perf_counter

    def done(i: int, _f: Future[storage.DLSN]) -> None:
        ends[i] = clock()

    burst = 32.0
    bns = BenchNamespace(ws.fresh("latency"))
    try:
        dlm = bns.ns.open_log(LOG_NAME, conf=writer_conf(0))
        aw = dlm.open_async_writer()
        write = aw.write
        futures: list[Future[storage.DLSN]] = []
        gc.collect()
        t0 = last = clock()
        tokens = 1.0
        i = 0
        while i < n:
            now = clock()
            tokens = min(burst, tokens + (now - last) * rate)
            last = now
            if tokens < 1.0:
                time.sleep((1.0 - tokens) / rate)
                continue
            while tokens >= 1.0 and i < n:
                starts[i] = clock()
                fut = write(records[i])
                fut.add_done_callback(functools.partial(done, i))
                futures.append(fut)
                tokens -= 1.0
                i += 1
        elapsed = clock() - t0
        aw.flush().result()
        wait_all(futures)
        fsyncs = bns.sync_count()
        aw.close()
    finally:
        bns.close()
    lat_ms = [(e - s) * 1000.0 for s, e in zip(starts, ends, strict=True)]
    return LatencyRun(percentile(lat_ms, 0.50), percentile(lat_ms, 0.99), n / elapsed, fsyncs)


def run_raw_fsync_latency(ws: Workspace, count: int) -> tuple[float, float]:
    """p50/p99 (ms) of one 1 KiB ``os.write`` + ``os.fdatasync`` appended to a file."""
    path = ws.fresh("rawlat") / "raw.dat"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    lat_ms: list[float] = []
    try:
        for _ in range(count):
            t0 = time.perf_counter()
            os.write(fd, PAYLOAD)
            os.fdatasync(fd)
            lat_ms.append((time.perf_counter() - t0) * 1000.0)
    finally:
        os.close(fd)
        shutil.rmtree(path.parent, ignore_errors=True)
    return percentile(lat_ms, 0.50), percentile(lat_ms, 0.99)


@dataclass
class LatencyResult:
    target_rate: float
    achieved_rate: float
    p50_ms: float
    p99_ms: float
    raw_p50_ms: float
    raw_p99_ms: float
    records_per_fsync: float | None


def bench_latency(ws: Workspace, records: list[storage.LogRecord], rate: float, reps: int) -> LatencyResult:
    runs: list[LatencyRun] = []
    raws: list[tuple[float, float]] = []
    for _ in range(reps):
        runs.append(run_ack_latency(ws, records, rate))
        raws.append(run_raw_fsync_latency(ws, 300))
    per_sync = [len(records) / r.fsyncs for r in runs if r.fsyncs]
    return LatencyResult(
        rate,
        median([r.achieved_rate for r in runs]),
        median([r.p50_ms for r in runs]),
        median([r.p99_ms for r in runs]),
        median([r[0] for r in raws]),
        median([r[1] for r in raws]),
        median(per_sync) if per_sync else None,
    )


# --- (c) reading completed segments --------------------------------------------------------
def plain_read(files: Sequence[Path]) -> int:
    total = 0
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while True:
                chunk = f.read(READ_CHUNK)
                if not chunk:
                    break
                total += len(chunk)
    return total


@dataclass
class ReadResult:
    reader_rate: float
    segstore_rate: float
    arrow_rate: float
    plain_rate: float
    reader_ratio: float
    segstore_ratio: float
    arrow_ratio: float
    file_bytes: int
    segments: int
    varying_rate: float = 0.0
    varying_ratio: float = 0.0


_R = TypeVar("_R")


def timed(fn: Callable[..., _R], *args: Any) -> tuple[float, _R]:
    """Seconds ``fn(*args)`` takes (after an untimed ``gc.collect()``), and its result."""
    gc.collect()
    t0 = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t0, result


def timed_count(n: int, what: str, fn: Callable[..., int], *args: Any) -> float:
    """:func:`timed` for a read that must return ``n`` records.

    Raises:
        RuntimeError: it returned another count.
    """
    seconds, got = timed(fn, *args)
    if got != n:
        raise RuntimeError(f"{what} returned {got} records, expected {n}")
    return seconds


def bench_read(ws: Workspace, records: list[storage.LogRecord], reps: int) -> ReadResult:
    n = len(records)
    bns = BenchNamespace(ws.fresh("read"))
    try:
        dlm = bns.ns.open_log(LOG_NAME, conf=writer_conf(1 << 20))
        with dlm.open_writer() as w:
            for start in range(0, n, BULK):
                w.write_bulk(records[start : start + BULK])
            w.flush()
        files = bns.ledger_files()
        ledgers = [(s.ledger_id, bns.ns.segstore.info(s.ledger_id).last_entry_id) for s in dlm.log_segments()]
        file_bytes = plain_read(files)  # warm the page cache for every row
        rates: dict[str, list[float]] = {"plain": [], "segstore": [], "reader": [], "arrow": []}
        ratios: dict[str, list[float]] = {"segstore": [], "reader": [], "arrow": []}
        for _ in range(reps):
            t_plain, _ = timed(plain_read, files)
            t_seg, _ = timed(segstore_read, bns.ns.segstore, ledgers)
            t_reader = timed_count(n, "reader", reader_read, dlm, BULK)
            t_arrow = timed_count(n, "read_arrow", arrow_read, dlm)
            rates["arrow"].append(n / t_arrow)
            ratios["arrow"].append(t_plain / t_arrow)
            rates["plain"].append(n / t_plain)
            rates["segstore"].append(n / t_seg)
            rates["reader"].append(n / t_reader)
            ratios["segstore"].append(t_plain / t_seg)
            ratios["reader"].append(t_plain / t_reader)
        varying_rate, varying_ratio = bench_read_varying(ws, n, reps)
        return ReadResult(
            median(rates["reader"]),
            median(rates["segstore"]),
            median(rates["arrow"]),
            median(rates["plain"]),
            median(ratios["reader"]),
            median(ratios["segstore"]),
            median(ratios["arrow"]),
            file_bytes,
            len(ledgers),
            varying_rate,
            varying_ratio,
        )
    finally:
        bns.close()


def bench_read_varying(ws: Workspace, n: int, reps: int) -> tuple[float, float]:
    """``read_arrow()`` over a log of records of 512..1535 bytes (1 KiB on average) ÷ a plain read of its
    ledger files: the rate and the median ratio."""
    bns = BenchNamespace(ws.fresh("read-varying"))
    try:
        dlm = bns.ns.open_log(LOG_NAME, conf=writer_conf(1 << 20))
        big = PAYLOAD * 2
        with dlm.open_writer() as w:
            for start in range(0, n, BULK):
                w.write_bulk(
                    [
                        storage.LogRecord(t + 1, big[: 512 + (t * 7919) % 1024])
                        for t in range(start, min(n, start + BULK))
                    ]
                )
            w.flush()
        files = bns.ledger_files()
        plain_read(files)
        rates, ratios = [], []
        for _ in range(reps):
            t_plain, _ = timed(plain_read, files)
            t_arrow = timed_count(n, "read_arrow", arrow_read, dlm)
            rates.append(n / t_arrow)
            ratios.append(t_plain / t_arrow)
        return median(rates), median(ratios)
    finally:
        bns.close()


# --- profile ----------------------------------------------------------------------------------
def profile_writer(ws: Workspace, n: int, buffer_size: int, top: int = 15) -> str:
    """cProfile of ``n`` async writes: the calling thread and the ledger commit thread."""
    records = make_records(n)
    thread_prof = cProfile.Profile()

    def on_ledger(ledger: Any) -> None:
        run = getattr(ledger, "_run", None)
        if run is None:
            return

        def profiled_run() -> None:
            thread_prof.runcall(run)

        ledger._run = profiled_run

    bns = BenchNamespace(ws.fresh("profile"), on_ledger=on_ledger)
    main_prof = cProfile.Profile()
    try:
        dlm = bns.ns.open_log(LOG_NAME, conf=writer_conf(buffer_size))
        aw = dlm.open_async_writer()
        t0 = time.perf_counter()
        main_prof.enable()
        futures = [aw.write(r) for r in records]
        aw.flush().result()
        wait_all(futures)
        main_prof.disable()
        seconds = time.perf_counter() - t0
        aw.close()
    finally:
        bns.close()
    out = io.StringIO()
    out.write(f"### writerOutputBufferSize={buffer_size}: {n:,} records in {seconds:.2f} s (profiled)\n\n")
    for title, prof in (("calling thread", main_prof), ("ledger commit thread", thread_prof)):
        out.write(f"#### {title}\n```\n")
        stats = pstats.Stats(prof, stream=out)
        stats.strip_dirs().sort_stats("cumulative").print_stats(top)
        out.write("```\n")
    return out.getvalue()


def profile_reader(ws: Workspace, n: int, top: int = 15) -> str:
    """cProfile of reading ``n`` records of a completed segment with the public reader."""
    records = make_records(n)
    bns = BenchNamespace(ws.fresh("profile-read"))
    prof = cProfile.Profile()
    try:
        dlm = bns.ns.open_log(LOG_NAME, conf=writer_conf(1 << 20))
        with dlm.open_writer() as w:
            w.write_bulk(records)
            w.flush()
        plain_read(bns.ledger_files())
        t0 = time.perf_counter()
        got = prof.runcall(reader_read, dlm, BULK)
        seconds = time.perf_counter() - t0
    finally:
        bns.close()
    out = io.StringIO()
    out.write(f"### reader: {got:,} records in {seconds:.2f} s (profiled)\n\n```\n")
    pstats.Stats(prof, stream=out).strip_dirs().sort_stats("cumulative").print_stats(top)
    out.write("```\n")
    return out.getvalue()


# --- report -----------------------------------------------------------------------------------
def render(
    n: int,
    lat_n: int,
    reps: int,
    writes: list[WriteResult],
    lat: LatencyResult,
    read: ReadResult,
    seconds: float,
) -> str:
    lines = [
        f"## Storage benchmark: 1 KiB records, one log, median of {reps} (N = {n:,}; latency N = {lat_n:,})",
        "",
        "| measurement | storage | plain-Python baseline (same run) | ratio | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for w in writes:
        how = "" if w.counted else " (assumed)"
        name = f"(a) async writer, writerOutputBufferSize={fmt_bytes(w.buffer_size) if w.buffer_size else '0'}"
        matched = (
            f"os.write+fdatasync of the bytes per fsync its group commit reached, {fmt_bytes(w.bytes_per_fsync)}"
            f" ({w.fsyncs:,.0f} fsyncs{how}, {w.entries_per_fsync:,.1f} entries/fsync): {fmt_rate(w.raw_rate)}"
        )
        if w.raw_rate_at_buffer is not None and w.ratio_at_buffer is not None:
            lines.append(
                f"| {name} | {fmt_rate(w.writer_rate)}"
                f" | os.write+fdatasync of {fmt_bytes(w.buffer_size)} batches (the writer's batch size):"
                f" {fmt_rate(w.raw_rate_at_buffer)} | {w.ratio_at_buffer:.2f} | >= {TARGET_WRITE_RATIO}"
                f" | {yes_no(w.ratio_at_buffer >= TARGET_WRITE_RATIO)} |"
            )
            name = "(a) the same writer runs"
        lines.append(f"| {name} | {fmt_rate(w.writer_rate)} | {matched} | {w.ratio:.2f} | - | - |")
    per_sync = f", {lat.records_per_fsync:,.1f} rec/fsync" if lat.records_per_fsync else ""
    lines.append(
        f"| (b) ack latency, buffer 0, paced at {lat.target_rate:,.0f} rec/s (achieved {lat.achieved_rate:,.0f}"
        f"{per_sync}) | p50 {lat.p50_ms:.2f} ms, p99 {lat.p99_ms:.2f} ms"
        f" | one 1 KiB write+fdatasync: p50 {lat.raw_p50_ms:.2f} ms, p99 {lat.raw_p99_ms:.2f} ms"
        f" | - | p99 <= {TARGET_P99_MS:g} ms | {yes_no(lat.p99_ms <= TARGET_P99_MS)} |"
    )
    plain = f"f.read 4 MiB chunks of {read.segments} ledger file(s), {fmt_bytes(read.file_bytes)}: " + fmt_rate(
        read.plain_rate
    )
    lines.append(
        f"| (c) reader, read_bulk({BULK}, non_blocking=True) | {fmt_rate(read.reader_rate)} | {plain}"
        f" | {read.reader_ratio:.2f} | >= {TARGET_READ_RATIO} | {yes_no(read.reader_ratio >= TARGET_READ_RATIO)} |"
    )
    lines.append(
        f"| (c) columnar: dlm.read_arrow() into Arrow batches | {fmt_rate(read.arrow_rate)} | {plain}"
        f" | {read.arrow_ratio:.2f} | >= {TARGET_ARROW_RATIO} | {yes_no(read.arrow_ratio >= TARGET_ARROW_RATIO)} |"
    )
    lines.append(
        f"| (c) columnar, record sizes 512..1535 B (1 KiB on average) | {fmt_rate(read.varying_rate)} "
        f"| f.read of its ledger files, same way | {read.varying_ratio:.2f} | >= {TARGET_ARROW_RATIO} "
        f"| {yes_no(read.varying_ratio >= TARGET_ARROW_RATIO)} |"
    )
    lines.append(
        f"| (c) segment store read_entries (middle row) | {fmt_rate(read.segstore_rate)} | {plain}"
        f" | {read.segstore_ratio:.2f} | - | - |"
    )
    met = [w.ratio_at_buffer >= TARGET_WRITE_RATIO for w in writes if w.ratio_at_buffer is not None]
    met += [lat.p99_ms <= TARGET_P99_MS, read.reader_ratio >= TARGET_READ_RATIO]
    met += [read.arrow_ratio >= TARGET_ARROW_RATIO, read.varying_ratio >= TARGET_ARROW_RATIO]
    lines += [
        "",
        f"Targets met: {sum(met)}/{len(met)}. Whole benchmark: {seconds:.0f} s.",
        "",
        "Methodology: every row runs in this one process on the same disk, one repetition of a row and its baseline "
        "back to back, repeated "
        f"{reps} times; figures are medians and each ratio is the median of the per-repetition ratios "
        "(storage / baseline). MB/s counts 1 KiB of payload per record (1 MB = 10^6 bytes) for every row. "
        "(a) times N async `write()` calls, the final `flush()` and every future's resolution (records built "
        "beforehand; writer opening and closing untimed). Both raw baselines append the same bytes the ledger "
        "files hold: the target row in batches of writerOutputBufferSize bytes, each `os.write` + "
        "`os.fdatasync` (the writer's batch: one entry); the informational row in as many rounds as the ledger "
        "writers' `sync_count` shows, i.e. the megabyte batches the writer's group commit reached because the "
        "CPU-bound writer lets entries queue up (there the raw loop runs at disk bandwidth). Before timing, the "
        "benchmark writes and deletes N KiB once, so neither side pays for first-touched memory pages. "
        "(b) uses writerOutputBufferSize 0 without immediate flush, so "
        "every record is its own entry and group commit batches them; writes are paced by a token bucket "
        "(burst 32) at half the rate (a) measured for that configuration, and each latency runs from the "
        "`write()` call to a done-callback timestamp. (c) writes N records once with a 1 MiB buffer and "
        "closes the writer, reads every ledger file once to warm the page cache (caches cannot be dropped "
        "here), then times, in each repetition, the plain read, the segment store's `read_entries` over "
        "every ledger (checksums verified), the public reader (decoding records into objects) and "
        "`read_arrow()` (the columnar path: Arrow record batches of the records, as the Spark source reads).",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200_000, help="records for (a) and (c) (default 200,000)")
    parser.add_argument("--latency-records", type=int, default=20_000, help="records for (b) (default 20,000)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each measurement (default 3)")
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: a fresh temp dir)")
    parser.add_argument(
        "--profile", action="store_true", help="print cProfiles of 20,000 async writes and 50,000 reads instead"
    )
    args = parser.parse_args(argv)
    if args.records < 1 or args.latency_records < 1 or args.reps < 1:
        parser.error("--records, --latency-records and --reps must be >= 1")

    base, created_parent = make_base("storage", args.dir)
    ws = Workspace(base)
    started = time.perf_counter()
    try:
        if args.profile:
            for buffer_size in (64 * KIB, 0):
                print(profile_writer(ws, 20_000, buffer_size))
            print(profile_reader(ws, 50_000))
            return 0
        records = make_records(args.records)
        warm_up(ws, args.records * RECORD_SIZE)
        print(f"writing {args.records:,} records x {args.reps} ({base}) ...", file=sys.stderr, flush=True)
        writes = [bench_write(ws, records, b, args.reps) for b in (64 * KIB, 0)]
        zero = writes[-1]
        rate = zero.writer_rate / 2.0
        print(f"ack latency at {rate:,.0f} rec/s ...", file=sys.stderr, flush=True)
        lat_records = records[: args.latency_records]
        if len(lat_records) < args.latency_records:
            lat_records = make_records(args.latency_records)
        lat = bench_latency(ws, lat_records, rate, args.reps)
        print("reading ...", file=sys.stderr, flush=True)
        read = bench_read(ws, records, args.reps)
        print(render(args.records, args.latency_records, args.reps, writes, lat, read, time.perf_counter() - started))
        return 0
    finally:
        remove_base(base, created_parent)


if __name__ == "__main__":
    sys.exit(main())
