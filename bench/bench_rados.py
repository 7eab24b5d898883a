"""RADOS benchmark: the Ceph RADOS segment store side by side with raw librados on the same pool,
and with the local-files store, all in one run.

Run::

    .venv/bin/python bench/bench_rados.py [--records N] [--latency-records N] [--reps 5]
                                          [--in-flight 1] [--buffer 65536] [--dir PATH]
                                          [--conf ceph.conf --pool POOL [--id ID] [--keyring PATH]]
                                          [--profile]

Starts a throw-away Ceph cluster (``tools/ceph_cluster.py``: 1 monitor, 3 BlueStore OSDs on
loopback, pool ``segments`` size 3 / min_size 2, cephx user ``client.dlog``) in a temp dir, or
uses an existing one (``--conf`` and ``--pool``; everything then goes into a fresh RADOS
namespace ``dl-bench-<hex>`` that is emptied at the end). Starts a private ZooKeeper server
(``tests/zk.py``) and binds two namespaces ``distributedlog://127.0.0.1:<port>/...``: one to
``rados://POOL?...`` and one to a ``file://`` directory on this disk, so the two differ only in
the segment store. Records are 1 KiB; every measurement is repeated (``--reps``) after an
untimed warm-up, the median is reported, and each ratio is the median of the per-repetition
ratios (the sides of a ratio run back to back in one repetition, their order alternating).

Sections (each prints a table; a summary table closes the report):

(1) Writer throughput. The async writer of the RADOS-bound namespace
    (``open_async_writer()``, ``writerOutputBufferSize`` = ``--buffer``, every future waited
    for) ÷ raw ``ioctx.aio_append`` of entries of the size the writer produced (its mean entry
    payload), the same number of bytes, ``--in-flight`` appends outstanding, a new object every
    ``radosMaxObjectBytes`` (64 MiB) as the store rolls. Also the store-level writer
    (``RadosLedgerWriter.append_nowait`` of pre-built entries of that size) ÷ the same baseline,
    and, for context, raw appends of the bytes per operation the writer's group commit reached.
(2) Acknowledgement latency, ``write()`` call to future resolution, of the same async writer
    paced by a token bucket at half its rate in (1); and raw ``aio_append`` latency (call to
    completion callback) of entries of the writer's entry size paced at the same byte rate.
(3) Reading the closed multi-object ledger of the last (1) run: ``read_entries`` over it and
    the log reader (``open_reader`` + ``read_bulk``) ÷ raw ``ioctx.read`` of the same objects
    in 4 MiB chunks.
(4) The same figures for the local-files store (the ``file://``-bound namespace and a
    ``LocalSegmentStore``), measured in the same repetitions.

``--profile`` prints instead cProfiles of the async writer on RADOS (calling thread and the
ledger's commit thread) and of ``read_entries``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import gc
import io
import math
import pstats
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

# _common first: it puts the checkout on sys.path for `storage`
import _common
from _common import (
    KIB,
    MIB,
    PAYLOAD,
    RECORD_SIZE,
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
from bench_zookeeper import start_zookeeper

import storage
from storage.errors import DLError
from storage.segstore._rados_io import part_oid
from storage.segstore._rados_view import read_head
from storage.segstore.local import LocalSegmentStore
from storage.segstore.rados import RadosLocation, RadosSegmentStore, import_rados

TARGET_WRITE_RATIO = 0.7
TARGET_P99_MS = 20.0
TARGET_READ_RATIO = 0.5

READ_CHUNK = 4 * MIB
MAX_OBJECT_BYTES = 64 * MIB  # radosMaxObjectBytes' default: the store rolls to a new object there
BULK = 10_000
BURST = 32.0  # records a paced producer may issue at once
LOG_PREFIX = "bench"
RAW_PREFIX = "bench.raw"


# --- where the cluster is ---------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """The pool to measure on, and the RADOS namespace this run uses inside it."""

    conf: str
    pool: str
    client_id: str | None
    keyring: str | None
    namespace: str

    def location(self) -> RadosLocation:
        return RadosLocation(self.pool, self.conf, self.client_id, self.keyring, self.namespace)


def start_cluster(verbose: bool) -> tuple[Any, Target]:
    """A throw-away cluster in a fresh temp dir (short: admin socket paths are limited)."""
    from tools.ceph_cluster import CephCluster

    directory = Path(tempfile.mkdtemp(prefix="dlb-ceph-"))
    cluster = CephCluster(directory, cephx=True, die_with_parent=True, verbose=verbose)
    try:
        cluster.start()
    except BaseException:
        with contextlib.suppress(Exception):
            cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    ns = f"dl-bench-{uuid.uuid4().hex[:8]}"
    return cluster, Target(str(cluster.conf_path), cluster.pool, cluster.client_id, str(cluster.client_keyring), ns)


def stop_cluster(cluster: Any) -> None:
    try:
        cluster.stop()
    finally:
        shutil.rmtree(cluster.directory, ignore_errors=True)


# --- helpers --------------------------------------------------------------------------------
def make_records(n: int) -> list[storage.LogRecord]:
    return [storage.LogRecord(i + 1, PAYLOAD) for i in range(n)]


def writer_conf(buffer_size: int) -> dict[str, object]:
    """One segment for the whole run (1 GiB), no periodic or immediate flush."""
    return _common.writer_conf(writerOutputBufferSize=buffer_size)


def entry_payload(size: int) -> bytes:
    return (PAYLOAD * (size // RECORD_SIZE + 1))[:size]


class BenchNamespace:
    """A ZooKeeper namespace that remembers the ledger writers its segment store creates (for
    their ``sync_count``: append operations or fsyncs) and hands out fresh log names."""

    def __init__(self, uri: str, conf: dict[str, object]) -> None:
        self.uri = uri
        self.ns = storage.open_namespace(uri, conf)
        self.ledgers: list[Any] = []
        self._n = 0
        store: Any = self.ns.segstore
        original = store.create_ledger

        def create_ledger(ledger_id: int | None = None) -> Any:
            ledger = original(ledger_id)
            self.ledgers.append(ledger)
            return ledger

        store.create_ledger = create_ledger

    def fresh_log(self, tag: str) -> str:
        self._n += 1
        return f"{LOG_PREFIX}-{tag}-{self._n}"

    def drop(self, name: str) -> None:
        try:
            self.ns.delete_log(name)
        except DLError as e:
            print(f"warning: could not delete log {name!r} of {self.uri}: {e}", file=sys.stderr)

    def close(self) -> None:
        self.ns.close()


class Pacer:
    """A token bucket: ``rate`` items/s, at most ``burst`` at once; :meth:`run` calls ``issue(i)``
    for ``i`` in ``0..n-1`` and returns the seconds it took to issue them all."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = max(1.0, burst)

    def run(self, n: int, issue: Callable[[int], None]) -> float:
        clock = time.perf_counter
        rate, burst = self.rate, self.burst
        tokens = 1.0
        t0 = last = clock()
        i = 0
        while i < n:
            now = clock()
            tokens = min(burst, tokens + (now - last) * rate)
            last = now
            if tokens < 1.0:
                time.sleep((1.0 - tokens) / rate)
                continue
            while tokens >= 1.0 and i < n:
                issue(i)
                tokens -= 1.0
                i += 1
        return clock() - t0


# --- raw librados -----------------------------------------------------------------------------
class RawRados:
    """Plain librados on an I/O context (the bench's own store's: same client, pool, namespace)."""

    def __init__(self, ioctx: Any) -> None:
        self.ioctx = ioctx
        self._n = 0
        self.objects: list[str] = []

    def _prefix(self) -> str:
        self._n += 1
        return f"{RAW_PREFIX}.{self._n:06d}"

    def append(self, sizes: Sequence[int], depth: int, max_object: int = MAX_OBJECT_BYTES) -> tuple[float, int]:
        """Seconds to ``aio_append`` one operation per size (a new object whenever the next would
        pass ``max_object``) with at most ``depth`` outstanding, all completed; and the objects
        written. The objects are deleted afterwards."""
        ioctx = self.ioctx
        prefix = self._prefix()
        bufs = {size: entry_payload(size) for size in set(sizes)}
        slots = threading.Semaphore(depth)
        errors: list[int] = []

        def done(completion: Any) -> None:
            rc = completion.get_return_value()
            if rc < 0:
                errors.append(rc)
            slots.release()

        oids = [f"{prefix}.{0:06d}"]
        filled = 0
        acquire = slots.acquire
        aio_append = ioctx.aio_append
        gc.collect()
        t0 = time.perf_counter()
        for size in sizes:
            if filled and filled + size > max_object:
                oids.append(f"{prefix}.{len(oids):06d}")
                filled = 0
            acquire()
            aio_append(oids[-1], bufs[size], oncomplete=done)
            filled += size
        for _ in range(depth):
            acquire()
        seconds = time.perf_counter() - t0
        for _ in range(depth):
            slots.release()
        self.remove(oids)
        if errors:
            raise RuntimeError(f"raw aio_append failed: {errors[0]}")
        return seconds, len(oids)

    def paced_append(self, size: int, count: int, rate: float) -> tuple[list[float], float]:
        """``count`` appends of ``size`` bytes paced at ``rate`` appends/s (no in-flight cap):
        each latency in ms (call to completion callback), and the achieved rate."""
        ioctx = self.ioctx
        oid = f"{self._prefix()}.{0:06d}"
        buf = entry_payload(size)
        starts = [0.0] * count
        ends = [0.0] * count
        clock = time.perf_counter
        finished = threading.Semaphore(0)
        errors: list[int] = []

        def done(i: int, completion: Any) -> None:
            ends[i] = clock()
            rc = completion.get_return_value()
            if rc < 0:
                errors.append(rc)
            finished.release()

        def issue(i: int) -> None:
            starts[i] = clock()
            ioctx.aio_append(oid, buf, oncomplete=functools.partial(done, i))

        gc.collect()
        elapsed = Pacer(rate, 1.0).run(count, issue)
        for _ in range(count):
            finished.acquire()
        self.remove([oid])
        if errors:
            raise RuntimeError(f"raw aio_append failed: {errors[0]}")
        return [(e - s) * 1000.0 for s, e in zip(starts, ends, strict=True)], count / elapsed

    def read(self, oids: Sequence[str]) -> int:
        """Read every object whole, ``READ_CHUNK`` bytes per ``ioctx.read``; bytes read."""
        read = self.ioctx.read
        total = 0
        for oid in oids:
            offset = 0
            while True:
                chunk = read(oid, READ_CHUNK, offset)
                offset += len(chunk)
                if len(chunk) < READ_CHUNK:
                    break
            total += offset
        return total

    def remove(self, oids: Sequence[str]) -> None:
        rados = import_rados()
        for oid in oids:
            with contextlib.suppress(rados.ObjectNotFound):
                self.ioctx.remove_object(oid)


def empty_namespace(ioctx: Any) -> int:
    """Delete every object of the I/O context's RADOS namespace (an existing cluster's); count."""
    rados = import_rados()
    names = [obj.key for obj in ioctx.list_objects()]
    for name in names:
        with contextlib.suppress(rados.ObjectNotFound):
            ioctx.remove_object(name)
    return len(names)


# --- (1) writer throughput --------------------------------------------------------------------
@dataclass
class WriterRun:
    seconds: float
    entries: int  # entries appended to the segment's ledger(s)
    payload_bytes: int  # entry payload bytes (records, headers, control records)
    ops: int | None  # append operations (RADOS) or fsyncs (local) the ledger writers issued
    name: str  # the log (still there)
    records: int

    @property
    def entry_size(self) -> float:
        return self.payload_bytes / max(1, self.entries)


def run_async_writer(b: BenchNamespace, records: Sequence[storage.LogRecord], buffer_size: int) -> WriterRun:
    """N async writes to a fresh log, every future waited for (timed); the log is left behind."""
    name = b.fresh_log("writer")
    dlm = b.ns.open_log(name, conf=writer_conf(buffer_size))
    first = len(b.ledgers)
    aw = dlm.open_async_writer()
    try:
        seconds, _last = timed_async_writes(aw, records)
        ledgers = b.ledgers[first:]
        entries = sum(ledger.last_add_confirmed + 1 for ledger in ledgers)
        payload = sum(ledger.bytes_written for ledger in ledgers)
        counts = [getattr(ledger, "sync_count", None) for ledger in ledgers]
        ops = sum(c for c in counts if isinstance(c, int)) if all(isinstance(c, int) for c in counts) else None
    finally:
        aw.close()
        dlm.close()
    return WriterRun(seconds, entries, payload, ops, name, len(records))


def run_store_writer(store: Any, entry: bytes, count: int) -> tuple[float, int | None]:
    """Seconds for ``count`` ``append_nowait`` of ``entry`` to a new ledger until the ack listener
    has seen them all; and the writer's ``sync_count``. The ledger is deleted afterwards."""
    writer = store.create_ledger()
    acked = 0
    errors: list[BaseException] = []
    finished = threading.Event()

    def listener(n: int, _last: int, exc: BaseException | None) -> None:
        nonlocal acked
        if exc is not None:
            errors.append(exc)
            finished.set()
        acked += n
        if acked >= count:
            finished.set()

    writer.set_ack_listener(listener)
    append = writer.append_nowait
    try:
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(count):
            append(entry)
        finished.wait()
        seconds = time.perf_counter() - t0
        ops = getattr(writer, "sync_count", None)
        writer.close()
    finally:
        with contextlib.suppress(DLError):
            writer.abort()
        store.delete_ledger(writer.ledger_id)
    if errors:
        raise RuntimeError(f"store writer failed: {errors[0]}")
    return seconds, ops if isinstance(ops, int) else None


def split_bytes(total: int, size: int) -> list[int]:
    """``total`` bytes as operations of ``size`` bytes (the last one the remainder)."""
    size = max(1, size)
    sizes = [size] * (total // size)
    if total % size:
        sizes.append(total % size)
    return sizes


@dataclass
class Samples:
    """Per-repetition values of one measurement."""

    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, key: str, value: float) -> None:
        self.values.setdefault(key, []).append(value)

    def med(self, key: str) -> float:
        return median(self.values.get(key, []))


@dataclass
class WriteFigures:
    n: int
    entry_size: float  # mean payload bytes per entry of the RADOS async writer
    records_per_entry: float
    raw_entries: int  # appends of the raw baseline (and entries of the store-level run)
    s: Samples  # rates in records/s (record-equivalents for store and raw) and ratios
    ops: Samples  # operations per run
    raw_objects: int


class WriteRep:
    """The rows of one (1) repetition; each step stores its rate (records/s) in ``this``."""

    def __init__(
        self,
        rados_ns: BenchNamespace,
        local_ns: BenchNamespace,
        rstore: RadosSegmentStore,
        lstore: LocalSegmentStore,
        raw: RawRados,
        records: Sequence[storage.LogRecord],
        buffer_size: int,
        depth: int,
        entry_size: int,
        count: int,
        ops: Samples,
    ) -> None:
        self.rados_ns, self.local_ns = rados_ns, local_ns
        self.rstore, self.lstore, self.raw = rstore, lstore, raw
        self.records, self.buffer_size, self.depth = records, buffer_size, depth
        self.entry_size, self.count = entry_size, count
        self.entry = entry_payload(entry_size)
        self.ops = ops
        self.n = len(records)
        self.this: dict[str, float] = {}
        self.run: WriterRun | None = None
        self.raw_objects = 0

    def rados_writer(self) -> None:
        run = self.run = run_async_writer(self.rados_ns, self.records, self.buffer_size)
        self.this["rados"] = self.n / run.seconds
        self.this["entry_size"] = run.entry_size
        if run.ops:
            self.ops.add("rados", run.ops)
            self.ops.add("op_bytes", run.payload_bytes / run.ops)

    def rados_store(self) -> None:
        seconds, sent = run_store_writer(self.rstore, self.entry, self.count)
        self.this["store"] = self.n / seconds
        if sent:
            self.ops.add("store", sent)

    def raw_entries(self) -> None:
        seconds, self.raw_objects = self.raw.append([self.entry_size] * self.count, self.depth)
        self.this["raw"] = self.n / seconds

    def raw_grouped(self) -> None:
        """Raw appends of the bytes per operation the async writer's group commit reached."""
        run = self.run
        if run is None or not run.ops:
            return
        seconds, _ = self.raw.append(split_bytes(run.payload_bytes, run.payload_bytes // run.ops), self.depth)
        self.this["raw_grouped"] = self.n / seconds

    def local_writer(self) -> None:
        run = run_async_writer(self.local_ns, self.records, self.buffer_size)
        self.this["local"] = self.n / run.seconds
        if run.ops:
            self.ops.add("local", run.ops)
        self.local_ns.drop(run.name)

    def local_store(self) -> None:
        seconds, syncs = run_store_writer(self.lstore, self.entry, self.count)
        self.this["local_store"] = self.n / seconds
        if syncs:
            self.ops.add("local_store", syncs)

    def steps(self, rep: int) -> list[Callable[[], None]]:
        if rep % 2 == 0:
            return [self.rados_writer, self.raw_entries, self.rados_store, self.raw_grouped]
        return [self.raw_entries, self.rados_store, self.rados_writer, self.raw_grouped]


def bench_write(
    rados_ns: BenchNamespace,
    local_ns: BenchNamespace,
    rstore: RadosSegmentStore,
    lstore: LocalSegmentStore,
    raw: RawRados,
    records: Sequence[storage.LogRecord],
    buffer_size: int,
    depth: int,
    reps: int,
    probe: WriterRun,
) -> tuple[WriteFigures, WriterRun]:
    """Every repetition runs the RADOS async writer, the raw baseline, the RADOS store writer
    and the raw baseline at the writer's bytes per operation (order alternating), then the
    local writer and store writer. Returns the figures and the last RADOS async-writer run (its
    log kept for the reads)."""
    n = len(records)
    entry_size = max(1, round(probe.entry_size))
    records_per_entry = probe.records / max(1, probe.entries)
    count = max(1, math.ceil(n / records_per_entry))
    s = Samples()
    ops = Samples()
    raw_objects = 0
    last_run: WriterRun | None = None
    for rep in range(reps):
        r = WriteRep(rados_ns, local_ns, rstore, lstore, raw, records, buffer_size, depth, entry_size, count, ops)
        for step in r.steps(rep):
            step()
        for step in (r.local_writer, r.local_store) if rep % 2 == 0 else (r.local_store, r.local_writer):
            step()
        assert r.run is not None
        if last_run is not None:
            rados_ns.drop(last_run.name)
        last_run = r.run
        raw_objects = r.raw_objects
        this = r.this
        for key, value in this.items():
            s.add(key, value)
        s.add("ratio", this["rados"] / this["raw"])
        s.add("store_ratio", this["store"] / this["raw"])
        s.add("layer_ratio", this["rados"] / this["store"])
        if "raw_grouped" in this:
            s.add("grouped_ratio", this["rados"] / this["raw_grouped"])
        s.add("rados_vs_local", this["rados"] / this["local"])
        s.add("store_vs_local", this["store"] / this["local_store"])
    assert last_run is not None
    return WriteFigures(n, s.med("entry_size"), records_per_entry, count, s, ops, raw_objects), last_run


# --- (2) acknowledgement latency --------------------------------------------------------------
def run_paced_writer(
    b: BenchNamespace, records: Sequence[storage.LogRecord], buffer_size: int, rate: float
) -> tuple[list[float], float]:
    """Paced async writes to a fresh log (deleted afterwards): each latency in ms (``write()``
    call to a done-callback timestamp) and the achieved rate."""
    n = len(records)
    starts = [0.0] * n
    ends = [0.0] * n
    clock = time.perf_counter

    def done(i: int, _f: Future[storage.DLSN]) -> None:
        ends[i] = clock()

    name = b.fresh_log("latency")
    dlm = b.ns.open_log(name, conf=writer_conf(buffer_size))
    try:
        aw = dlm.open_async_writer()
        write = aw.write
        futures: list[Future[storage.DLSN]] = []

        def issue(i: int) -> None:
            starts[i] = clock()
            fut = write(records[i])
            fut.add_done_callback(functools.partial(done, i))
            futures.append(fut)

        gc.collect()
        elapsed = Pacer(rate, BURST).run(n, issue)
        aw.flush().result()
        wait_all(futures)
        aw.close()
    finally:
        dlm.close()
        b.drop(name)
    return [(e - s) * 1000.0 for s, e in zip(starts, ends, strict=True)], n / elapsed


@dataclass
class LatencyFigures:
    rate: float  # records/s the writers were paced at (half the RADOS writer's rate)
    raw_rate: float  # appends/s of the raw baseline (same bytes/s)
    local_rate: float  # records/s the local writer was paced at (half its own rate)
    s: Samples


def bench_latency(
    rados_ns: BenchNamespace,
    local_ns: BenchNamespace,
    raw: RawRados,
    records: Sequence[storage.LogRecord],
    buffer_size: int,
    writes: WriteFigures,
    reps: int,
) -> LatencyFigures:
    rate = writes.s.med("rados") / 2.0
    local_rate = writes.s.med("local") / 2.0
    entry_size = max(1, round(writes.entry_size))
    raw_rate = rate / writes.records_per_entry
    raw_count = max(1, math.ceil(len(records) / writes.records_per_entry))
    s = Samples()
    for rep in range(reps):

        def rados() -> None:
            lat, achieved = run_paced_writer(rados_ns, records, buffer_size, rate)
            s.add("p50", percentile(lat, 0.50))
            s.add("p99", percentile(lat, 0.99))
            s.add("achieved", achieved)

        def rawp() -> None:
            lat, achieved = raw.paced_append(entry_size, raw_count, raw_rate)
            s.add("raw_p50", percentile(lat, 0.50))
            s.add("raw_p99", percentile(lat, 0.99))
            s.add("raw_achieved", achieved)

        def local() -> None:
            lat, achieved = run_paced_writer(local_ns, records, buffer_size, local_rate)
            s.add("local_p50", percentile(lat, 0.50))
            s.add("local_p99", percentile(lat, 0.99))
            s.add("local_achieved", achieved)

        for step in [rados, rawp, local] if rep % 2 == 0 else [rawp, rados, local]:
            step()
    return LatencyFigures(rate, raw_rate, local_rate, s)


# --- (3) reading a completed segment ----------------------------------------------------------
@dataclass
class ReadFigures:
    n: int
    object_bytes: int
    objects: int
    s: Samples


def completed_ledgers(b: BenchNamespace, dlm: storage.LogManager) -> list[tuple[int, int]]:
    return [(seg.ledger_id, b.ns.segstore.info(seg.ledger_id).last_entry_id) for seg in dlm.log_segments()]


def bench_read(
    rados_ns: BenchNamespace,
    local_ns: BenchNamespace,
    raw: RawRados,
    rados_log: str,
    records: Sequence[storage.LogRecord],
    buffer_size: int,
    reps: int,
) -> ReadFigures:
    """Reads of the RADOS log the last (1) run left, and of a local log written the same way."""
    n = len(records)
    rdlm = rados_ns.ns.open_log(rados_log, conf=writer_conf(buffer_size))
    local_run = run_async_writer(local_ns, records, buffer_size)
    ldlm = local_ns.ns.open_log(local_run.name, conf=writer_conf(buffer_size))
    try:
        rledgers = completed_ledgers(rados_ns, rdlm)
        rstore: Any = rados_ns.ns.segstore
        oids = [
            part_oid(lid, i)
            for lid, _ in rledgers
            for i in range(len(read_head(rstore.ioctx, import_rados(), lid).parts))
        ]
        lledgers = completed_ledgers(local_ns, ldlm)
        object_bytes = raw.read(oids)  # warm-up, untimed
        segstore_read(rstore, rledgers)
        segstore_read(local_ns.ns.segstore, lledgers)
        s = Samples()
        clock = time.perf_counter

        def timed(read: Callable[[], int], expect: int | None) -> float:
            gc.collect()
            t0 = clock()
            got = read()
            rate = n / (clock() - t0)
            if expect is not None and got != expect:
                raise RuntimeError(f"a reader returned {got} records, expected {expect}")
            return rate

        rows: dict[str, tuple[Callable[[], int], int | None]] = {
            "raw": (functools.partial(raw.read, oids), None),
            "store": (functools.partial(segstore_read, rstore, rledgers), None),
            "reader": (functools.partial(reader_read, rdlm, BULK), n),
            "local_store": (functools.partial(segstore_read, local_ns.ns.segstore, lledgers), None),
            "local_reader": (functools.partial(reader_read, ldlm, BULK), n),
        }
        order = list(rows)
        for rep in range(reps):
            keys = order[:3][::-1] + order[3:][::-1] if rep % 2 else order
            this = {key: timed(*rows[key]) for key in keys}
            for key, value in this.items():
                s.add(key, value)
            s.add("store_ratio", this["store"] / this["raw"])
            s.add("reader_ratio", this["reader"] / this["raw"])
            s.add("store_vs_local", this["store"] / this["local_store"])
            s.add("reader_vs_local", this["reader"] / this["local_reader"])
        return ReadFigures(n, object_bytes, len(oids), s)
    finally:
        rdlm.close()
        ldlm.close()
        local_ns.drop(local_run.name)


# --- profile ----------------------------------------------------------------------------------
def profile_rados(b: BenchNamespace, n: int, buffer_size: int, top: int = 18) -> str:
    """cProfile of ``n`` async writes on RADOS (calling thread and ledger commit thread), of
    ``read_entries`` over the ledger they made and of the log reader reading them."""
    records = make_records(n)
    thread_prof = cProfile.Profile()
    store: Any = b.ns.segstore
    original = store.create_ledger

    def create_ledger(ledger_id: int | None = None) -> Any:
        ledger = original(ledger_id)
        run = ledger._run

        def profiled_run() -> None:
            thread_prof.runcall(run)

        ledger._run = profiled_run
        return ledger

    store.create_ledger = create_ledger
    main_prof = cProfile.Profile()
    name = b.fresh_log("profile")
    dlm = b.ns.open_log(name, conf=writer_conf(buffer_size))
    read_prof = cProfile.Profile()
    reader_prof = cProfile.Profile()
    try:
        aw = dlm.open_async_writer()
        t0 = time.perf_counter()
        main_prof.enable()
        futures = [aw.write(r) for r in records]
        aw.flush().result()
        wait_all(futures)
        main_prof.disable()
        seconds = time.perf_counter() - t0
        aw.close()
        ledgers = completed_ledgers(b, dlm)
        segstore_read(store, ledgers)  # warm, untimed
        t0 = time.perf_counter()
        read_prof.runcall(segstore_read, store, ledgers)
        read_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        reader_prof.runcall(reader_read, dlm, BULK)
        reader_seconds = time.perf_counter() - t0
    finally:
        store.create_ledger = original
        dlm.close()
        b.drop(name)
    out = io.StringIO()
    out.write(f"### RADOS async writer, writerOutputBufferSize={buffer_size}: {n:,} records in {seconds:.2f} s\n\n")
    sections = (
        ("calling thread", main_prof),
        ("ledger commit thread", thread_prof),
        (f"read_entries: {n:,} records in {read_seconds:.2f} s", read_prof),
        (f"log reader read_bulk: {n:,} records in {reader_seconds:.2f} s", reader_prof),
    )
    for title, prof in sections:
        out.write(f"#### {title}\n```\n")
        pstats.Stats(prof, stream=out).strip_dirs().sort_stats("cumulative").print_stats(top)
        out.write("```\n")
    return out.getvalue()


# --- report -----------------------------------------------------------------------------------
def ms(value: float) -> str:
    return f"{value:.2f} ms"


def ratio_cells(value: float, target: float | None, higher: bool = True) -> str:
    if target is None:
        return f"{value:.2f} | - | -"
    ok = value >= target if higher else value <= target
    return f"{value:.2f} | {'>=' if higher else '<='} {target:g} | {yes_no(ok)}"


@dataclass
class Report:
    args: argparse.Namespace
    where: str
    writes: WriteFigures
    lat: LatencyFigures
    read: ReadFigures
    seconds: float
    setup_s: float

    def met(self) -> dict[str, bool]:
        w, lat, r = self.writes.s, self.lat.s, self.read.s
        return {
            "write": w.med("ratio") >= TARGET_WRITE_RATIO,
            "p99": lat.med("p99") <= TARGET_P99_MS,
            "read_entries": r.med("store_ratio") >= TARGET_READ_RATIO,
            "reader": r.med("reader_ratio") >= TARGET_READ_RATIO,
        }

    def render(self) -> str:
        a = self.args
        w, lat, rd = self.writes, self.lat, self.read
        ws, ls, rs = w.s, lat.s, rd.s
        esize = fmt_bytes(w.entry_size)
        rpe = w.records_per_entry
        ops = w.ops
        n_ops = ops.med("rados")
        grouped = ops.med("op_bytes")
        store_ops = ops.med("store")
        met = self.met()
        out = [
            f"## RADOS segment store vs raw librados vs local files: 1 KiB records, median of {a.reps} "
            f"(N = {a.records:,}; latency N = {a.latency_records:,})",
            "",
            f"Cluster: {self.where}. writerOutputBufferSize {fmt_bytes(a.buffer)}, "
            f"{a.in_flight} appends in flight (radosMaxInFlightWrites), "
            f"a data object per {MAX_OBJECT_BYTES // MIB} MiB.",
            "",
            "### (1) Writer throughput",
            "",
            "| measurement | RADOS store | raw librados baseline (same run) | ratio | target | met |",
            "|---|---|---|---|---|---|",
            f"| async writer (ZooKeeper + RADOS namespace): {esize} entries ({rpe:,.1f} records/entry), "
            f"{n_ops:,.0f} append ops ({fmt_bytes(grouped)}/op) | {fmt_rate(ws.med('rados'))} "
            f"| `aio_append` of {w.raw_entries:,} {esize} entries, {a.in_flight} in flight, {w.raw_objects} object(s): "
            f"{fmt_rate(ws.med('raw'))} | {ratio_cells(ws.med('ratio'), TARGET_WRITE_RATIO)} |",
            f"| store writer `append_nowait`, {w.raw_entries:,} pre-built {esize} entries, {store_ops:,.0f} append ops "
            f"| {fmt_rate(ws.med('store'))} | the same: {fmt_rate(ws.med('raw'))} "
            f"| {ratio_cells(ws.med('store_ratio'), None)} |",
            f"| log layer: async writer ÷ store writer | {fmt_rate(ws.med('rados'))} | store writer: "
            f"{fmt_rate(ws.med('store'))} | {ratio_cells(ws.med('layer_ratio'), None)} |",
        ]
        if "grouped_ratio" in ws.values:
            out.append(
                f"| async writer vs raw at its group-commit size | {fmt_rate(ws.med('rados'))} "
                f"| `aio_append` of {fmt_bytes(grouped)} ops, {a.in_flight} in flight: "
                f"{fmt_rate(ws.med('raw_grouped'))} | {ratio_cells(ws.med('grouped_ratio'), None)} |"
            )
        out += [
            "",
            f"### (2) Acknowledgement latency at half the maximum rate ({fmt_rate(lat.rate)})",
            "",
            "| measurement | achieved rate | p50 | p99 | target | met |",
            "|---|---|---|---|---|---|",
            f"| async writer on RADOS, per record (`write()` to future) | {fmt_rate(ls.med('achieved'))} "
            f"| {ms(ls.med('p50'))} | {ms(ls.med('p99'))} | p99 <= {TARGET_P99_MS:g} ms | {yes_no(met['p99'])} |",
            f"| raw `aio_append` of {esize} entries at the same bytes/s ({lat.raw_rate:,.0f} appends/s), per append "
            f"| {fmt_rate(ls.med('raw_achieved') * rpe)} | {ms(ls.med('raw_p50'))} | {ms(ls.med('raw_p99'))} | - | - |",
            "",
            f"### (3) Reading a completed segment: one closed ledger of {rd.objects} object(s), "
            f"{fmt_bytes(rd.object_bytes)}",
            "",
            "| measurement | RADOS store | raw librados baseline (same run) | ratio | target | met |",
            "|---|---|---|---|---|---|",
            f"| `read_entries` (checksums verified) | {fmt_rate(rs.med('store'))} "
            f"| `ioctx.read` of the same objects, {READ_CHUNK // MIB} MiB chunks: {fmt_rate(rs.med('raw'))} "
            f"| {ratio_cells(rs.med('store_ratio'), TARGET_READ_RATIO)} |",
            f"| log reader `read_bulk({BULK:,}, non_blocking=True)` | {fmt_rate(rs.med('reader'))} "
            f"| the same: {fmt_rate(rs.med('raw'))} | {ratio_cells(rs.med('reader_ratio'), TARGET_READ_RATIO)} |",
            "",
            "### (4) The local-files store in the same run (ZooKeeper namespace bound to a directory on this disk)",
            "",
            "| measurement | RADOS | local files | RADOS ÷ local |",
            "|---|---|---|---|",
            f"| async writer throughput | {fmt_rate(ws.med('rados'))} | {fmt_rate(ws.med('local'))} "
            f"({ops.med('local'):,.0f} fsyncs) | {ws.med('rados_vs_local'):.2f} |",
            f"| store writer `append_nowait`, {esize} entries | {fmt_rate(ws.med('store'))} "
            f"| {fmt_rate(ws.med('local_store'))} ({ops.med('local_store'):,.0f} fsyncs) "
            f"| {ws.med('store_vs_local'):.2f} |",
            f"| ack latency at half its own max rate: paced at (achieved) | {fmt_rate(lat.rate)} "
            f"({ls.med('achieved'):,.0f}) | {fmt_rate(lat.local_rate)} ({ls.med('local_achieved'):,.0f}) | - |",
            f"| ack latency p50 / p99 | {ms(ls.med('p50'))} / {ms(ls.med('p99'))} "
            f"| {ms(ls.med('local_p50'))} / {ms(ls.med('local_p99'))} | - |",
            f"| `read_entries` | {fmt_rate(rs.med('store'))} | {fmt_rate(rs.med('local_store'))} "
            f"| {rs.med('store_vs_local'):.2f} |",
            f"| log reader `read_bulk` | {fmt_rate(rs.med('reader'))} | {fmt_rate(rs.med('local_reader'))} "
            f"| {rs.med('reader_vs_local'):.2f} |",
            "",
            "### Summary",
            "",
            "| 1 KiB records | RADOS (ZooKeeper + RADOS) | raw librados | RADOS ÷ raw | target | met "
            "| local files (ZooKeeper + files) |",
            "|---|---|---|---|---|---|---|",
            f"| async writer | {fmt_rate(ws.med('rados'))} | {fmt_rate(ws.med('raw'))} ({esize} appends) "
            f"| {ws.med('ratio'):.2f} | >= {TARGET_WRITE_RATIO:g} | {yes_no(met['write'])} "
            f"| {fmt_rate(ws.med('local'))} |",
            f"| store writer (pre-built entries) | {fmt_rate(ws.med('store'))} | the same "
            f"| {ws.med('store_ratio'):.2f} | - | - | {fmt_rate(ws.med('local_store'))} |",
            f"| ack p50 / p99 at half max rate | {ms(ls.med('p50'))} / {ms(ls.med('p99'))} "
            f"| {ms(ls.med('raw_p50'))} / {ms(ls.med('raw_p99'))} | - | p99 <= {TARGET_P99_MS:g} ms "
            f"| {yes_no(met['p99'])} | {ms(ls.med('local_p50'))} / {ms(ls.med('local_p99'))} |",
            f"| `read_entries`, closed ledger | {fmt_rate(rs.med('store'))} | {fmt_rate(rs.med('raw'))} "
            f"| {rs.med('store_ratio'):.2f} | >= {TARGET_READ_RATIO:g} | {yes_no(met['read_entries'])} "
            f"| {fmt_rate(rs.med('local_store'))} |",
            f"| log reader `read_bulk` | {fmt_rate(rs.med('reader'))} | {fmt_rate(rs.med('raw'))} "
            f"| {rs.med('reader_ratio'):.2f} | >= {TARGET_READ_RATIO:g} | {yes_no(met['reader'])} "
            f"| {fmt_rate(rs.med('local_reader'))} |",
            "",
            f"Targets met: {sum(met.values())}/{len(met)}. Whole benchmark: {self.seconds:.0f} s "
            f"(cluster and ZooKeeper start {self.setup_s:.1f} s).",
            "",
            "Methodology: one process, one machine (a loopback cluster: the monitor, every OSD, ZooKeeper and this "
            "benchmark share its CPUs and disk). Both namespaces use the same ZooKeeper server, so they differ only "
            "in the segment store. After an untimed warm-up of every row, each repetition runs every row back to "
            "back (order alternating); figures are medians, each ratio the median of the per-repetition ratios. "
            "MB/s counts 1 KiB of payload per record for every row (raw rows: their bytes as record equivalents). "
            "(1) times N async `write()` calls, the final `flush()` and every future's resolution (records built "
            "beforehand; open and close untimed); the store writer row times `append_nowait` of pre-built entries "
            "until the ack listener has seen them all; the raw baseline pushes the same bytes in entry-sized "
            "`aio_append`s through a semaphore of the same depth and waits for every completion. The store "
            "group-commits whatever queued into one guarded operation (`omap_cmp` + `append`, up to "
            "radosMaxWriteBytes), so it sends fewer, larger operations than the baseline; the last row of (1) "
            "gives raw appends at the size it reached. (2) paces with a token bucket (burst 32 records) at half "
            "the (1) rate of that writer, same writer settings (a record also waits for its entry to fill), "
            "latency from the `write()` call to a done-callback timestamp; the raw row paces entry-sized "
            "`aio_append`s at the same bytes/s, latency from the call to the completion callback. (3) reads the "
            "ledger the last (1) run closed (one object per 64 MiB) after one untimed full read; the OSDs' caches "
            "cannot be dropped, so reads are as warm as the cluster keeps them.",
        ]
        return "\n".join(out)


# --- main -------------------------------------------------------------------------------------
def _raise_interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt in the main thread, so every cleanup runs."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def warm_up(
    rados_ns: BenchNamespace,
    local_ns: BenchNamespace,
    rstore: RadosSegmentStore,
    lstore: LocalSegmentStore,
    raw: RawRados,
    records: Sequence[storage.LogRecord],
    buffer_size: int,
    depth: int,
) -> WriterRun:
    """One untimed round of every writer on ``records``; the RADOS writer's run (log deleted)
    tells the entry size."""
    probe = run_async_writer(rados_ns, records, buffer_size)
    rados_ns.drop(probe.name)
    entry_size = max(1, round(probe.entry_size))
    count = max(1, probe.entries)
    raw.append([entry_size] * count, depth)
    run_store_writer(rstore, entry_payload(entry_size), count)
    local_ns.drop(run_async_writer(local_ns, records, buffer_size).name)
    run_store_writer(lstore, entry_payload(entry_size), count)
    return probe


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200_000, help="records for (1) and (3) (default 200,000)")
    parser.add_argument("--latency-records", type=int, default=100_000, help="records for (2) (default 100,000)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each measurement (default 5)")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=1,
        help="append operations in flight, store and raw (default 1, as radosMaxInFlightWrites)",
    )
    parser.add_argument("--buffer", type=int, default=64 * KIB, help="writerOutputBufferSize (default 65536)")
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: under bench-data)")
    parser.add_argument("--conf", help="ceph.conf of an existing cluster (default: start a throw-away one)")
    parser.add_argument("--pool", help="its pool (with --conf)")
    parser.add_argument("--id", dest="client_id", default=None, help="cephx user id (with --conf; default admin)")
    parser.add_argument("--keyring", default=None, help="its keyring (with --conf)")
    parser.add_argument("--verbose", action="store_true", help="cluster start progress on stderr")
    parser.add_argument(
        "--profile", action="store_true", help="print cProfiles of 100,000 async writes on RADOS and of reading them"
    )
    args = parser.parse_args(argv)
    if min(args.records, args.latency_records, args.reps, args.in_flight) < 1 or args.buffer < 0:
        parser.error("--records, --latency-records, --reps and --in-flight must be >= 1, --buffer >= 0")
    if (args.conf is None) != (args.pool is None):
        parser.error("--conf and --pool go together")
    if args.conf is not None:
        args.conf = str(Path(args.conf).resolve())
        if args.keyring is not None:
            args.keyring = str(Path(args.keyring).resolve())

    started = time.perf_counter()
    base, created_parent = make_base("rados", args.dir)
    cluster: Any = None
    server: Any = None
    opened: list[Callable[[], None]] = []  # closers, run in reverse
    with terminate_as_interrupt():
        try:
            if args.conf is None:
                print("starting a Ceph cluster (1 mon, 3 OSDs) ...", file=sys.stderr, flush=True)
                cluster, target = start_cluster(args.verbose)
                where = "throw-away, 1 monitor + 3 BlueStore OSDs on loopback, pool size 3 / min_size 2, cephx"
            else:
                target = Target(args.conf, args.pool, args.client_id, args.keyring, f"dl-bench-{uuid.uuid4().hex[:8]}")
                where = f"existing, {args.conf}, pool {args.pool}, RADOS namespace {target.namespace}"
            print(f"starting ZooKeeper ({base}) ...", file=sys.stderr, flush=True)
            server = start_zookeeper(base / "zk", True)
            rados_conf: dict[str, object] = {"radosMaxInFlightWrites": args.in_flight}
            rstore = RadosSegmentStore(target.location(), max_in_flight=args.in_flight)
            ioctx = rstore.ioctx

            def close_rados_store() -> None:
                if args.conf is not None:
                    print(f"removed {empty_namespace(ioctx)} objects", file=sys.stderr)
                rstore.close()

            opened.append(close_rados_store)
            raw = RawRados(rstore.ioctx)
            lstore = LocalSegmentStore(base / "local-store")
            opened.append(lstore.close)
            zk_root = f"distributedlog://{server.hosts}/bench-{uuid.uuid4().hex[:12]}"
            storage.bind_namespace(f"{zk_root}-rados", segments=target.location().uri(), conf=rados_conf)
            rados_ns = BenchNamespace(f"{zk_root}-rados", rados_conf)
            opened.append(rados_ns.close)
            storage.bind_namespace(f"{zk_root}-local", segments=f"file://{base / 'local-segments'}")
            local_ns = BenchNamespace(f"{zk_root}-local", {})
            opened.append(local_ns.close)
            setup_s = time.perf_counter() - started

            if args.profile:
                print(profile_rados(rados_ns, 100_000, args.buffer))
                return 0

            records = make_records(args.records)
            print("warming up ...", file=sys.stderr, flush=True)
            probe = warm_up(
                rados_ns,
                local_ns,
                rstore,
                lstore,
                raw,
                records[: max(1, min(len(records), 20_000))],
                args.buffer,
                args.in_flight,
            )
            print(f"(1) writing {args.records:,} records x {args.reps} ...", file=sys.stderr, flush=True)
            writes, last = bench_write(
                rados_ns, local_ns, rstore, lstore, raw, records, args.buffer, args.in_flight, args.reps, probe
            )
            print(f"(2) ack latency at {writes.s.med('rados') / 2:,.0f} rec/s ...", file=sys.stderr, flush=True)
            lat_records = records[: args.latency_records]
            if len(lat_records) < args.latency_records:
                lat_records = make_records(args.latency_records)
            lat = bench_latency(rados_ns, local_ns, raw, lat_records, args.buffer, writes, args.reps)
            print("(3) reading ...", file=sys.stderr, flush=True)
            read = bench_read(rados_ns, local_ns, raw, last.name, records, args.buffer, args.reps)
            rados_ns.drop(last.name)
            report = Report(args, where, writes, lat, read, time.perf_counter() - started, setup_s)
            print(report.render())
            return 0
        finally:
            for close in reversed(opened):
                try:
                    close()
                except Exception as e:  # close everything, report what failed
                    print(f"warning: cleanup step failed: {e}", file=sys.stderr)
            if server is not None:
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
