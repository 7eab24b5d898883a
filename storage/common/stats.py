"""Stats of writers, readers and segment stores, exported with ``prometheus_client``.

DistributedLog reports through a ``StatsLogger`` tree (``log_writer/write``, ``async_reader/read_next``,
``bookkeeper_client/ADD_ENTRY``, ...); here the same measurements are Prometheus metrics named
``dlog_<scope>_<name>``, labelled by ``stream`` (log) or ``store`` and ``op``:

=============================================  ==========================================================
metric                                          what (DistributedLog's stat)
=============================================  ==========================================================
``dlog_log_writer_records_total``               user records acknowledged (``log_writer/write`` count)
``dlog_log_writer_bytes_total``                 entry bytes acknowledged
``dlog_log_writer_entries_total``               entries acknowledged (``segment_writer/transmit``)
``dlog_log_writer_write_latency_seconds``       histogram: oldest record of an entry, ``write()`` → durable
``dlog_log_writer_transmit_latency_seconds``    histogram: entry handed to the segment store → durable
``dlog_log_writer_flush_latency_seconds``       histogram: ``flush()`` calls
``dlog_log_writer_rolls_total``                 segments completed by rolling (``log_segment_roll``)
``dlog_log_writer_errors_total``                failed appends / writes, label ``error`` (the error class)
``dlog_log_writer_outstanding_writes``          gauge: writes not yet acknowledged (live writers)
``dlog_log_writer_limit_hits_total``            writes over a rate limit, label ``limit`` (``rps_soft``...)
``dlog_reader_records_total``                   user records returned (``async_reader/read_next`` count)
``dlog_reader_bytes_total``                     entry bytes decoded
``dlog_reader_wait_seconds``                    histogram: time a blocking read waited for records
``dlog_reader_records_behind``                  gauge: records after the reader's position (live readers)
``dlog_segstore_op_latency_seconds``            histogram per ``op``: ``append`` (one group commit), ...
``dlog_segstore_bytes_total``                   bytes appended / read, per ``op``
``dlog_segstore_op_errors_total``               failed operations per ``op``
=============================================  ==========================================================

The hot paths touch plain Python numbers only (one entry, one group commit or one read call at a
time, never one record); :class:`Collector` turns them into metric families when scraped. Totals
live per stream and per store kind for the life of the process (a reopened writer keeps counting);
the two gauges come from live writers and readers. The namespace key ``enableStats`` (default on)
turns the per-stream recording off.

:func:`start_http_server` serves the registry on an opt-in HTTP endpoint (the namespace keys
``prometheusStatsHttpPort``, ``prometheusStatsHttpAddress`` — BookKeeper's names — default off and
loopback).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

__all__ = [
    "BUCKETS",
    "Collector",
    "LatencyHistogram",
    "ReaderStats",
    "StoreStats",
    "WriterStats",
    "reader_stats",
    "start_http_server",
    "store_stats",
    "writer_stats",
]

log = logging.getLogger(__name__)

#: Latency histogram bucket bounds, seconds (the last is +Inf).
BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))


class LatencyHistogram:
    """Bucket counts and a sum; ``observe`` is a bisect and two additions (under the GIL)."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * len(BUCKETS)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds

    def family(self, name: str, doc: str, labels: list[str], values: list[str]) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=labels)
        cumulative, buckets = 0, []
        for bound, count in zip(BUCKETS, list(self.counts), strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        fam.add_metric(values, buckets, self.sum)
        return fam


class WriterStats:
    """One stream's writer totals in this process."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.records = 0
        self.bytes = 0
        self.entries = 0
        self.rolls = 0
        self.errors: dict[str, int] = {}
        self.write_latency = LatencyHistogram()
        self.transmit_latency = LatencyHistogram()
        self.flush_latency = LatencyHistogram()
        # writers (.outstanding, .limiter), by weak reference: a WeakSet costs about 1 KB, and there is one of these
        # per stream (at 10,000 streams on a proxy, 10 MB); this list holds one reference, rarely two
        self._live: list[weakref.ref[Any]] = []
        self._closed_limit_hits: dict[str, int] = {}

    def error(self, exc: BaseException) -> None:
        name = type(exc).__name__
        self.errors[name] = self.errors.get(name, 0) + 1

    def attach(self, writer: Any) -> None:
        self._live.append(weakref.ref(writer))

    def _writers(self) -> list[Any]:
        return [w for w in (r() for r in list(self._live)) if w is not None]

    def detach(self, writer: Any) -> None:
        limiter = getattr(writer, "limiter", None)
        if limiter is not None:  # a closed writer's limit hits stay counted
            for k, v in limiter.hits.items():
                self._closed_limit_hits[k] = self._closed_limit_hits.get(k, 0) + v
        for r in list(self._live):
            if r() is writer or r() is None:  # the writer, and any collected one
                try:
                    self._live.remove(r)
                except ValueError:  # removed by a concurrent detach
                    pass

    def outstanding(self) -> int:
        return sum(w.outstanding.count for w in self._writers() if w.outstanding is not None)

    def limit_hits(self) -> dict[str, int]:
        hits = dict(self._closed_limit_hits)
        for w in self._writers():
            if w.limiter is not None:
                for k, v in w.limiter.hits.items():
                    hits[k] = hits.get(k, 0) + v
        return hits


class ReaderStats:
    """One stream's reader totals in this process."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.records = 0
        self.bytes = 0
        self.wait = LatencyHistogram()
        #: live readers' "records behind" functions
        self._behind: dict[int, Callable[[], int]] = {}

    def track_behind(self, key: int, fn: Callable[[], int] | None) -> None:
        if fn is None:
            self._behind.pop(key, None)
        else:
            self._behind[key] = fn

    def records_behind(self) -> int | None:
        if not self._behind:
            return None
        total = 0
        for fn in list(self._behind.values()):
            try:
                total += fn()
            except Exception:  # a reader closing during a scrape, a store hiccup: not counted
                continue
        return total


class StoreStats:
    """One segment store kind's (``local``, ``rados``) operation totals in this process."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.latency: dict[str, LatencyHistogram] = {}
        self.bytes: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self._lock = threading.Lock()

    def observe(self, op: str, seconds: float, nbytes: int = 0) -> None:
        h = self.latency.get(op)
        if h is None:
            with self._lock:
                h = self.latency.setdefault(op, LatencyHistogram())
        h.observe(seconds)
        if nbytes:
            self.bytes[op] = self.bytes.get(op, 0) + nbytes

    def error(self, op: str) -> None:
        self.errors[op] = self.errors.get(op, 0) + 1

    @contextmanager
    def timed(self, op: str, nbytes: int = 0) -> Iterator[None]:
        """Time the block as one ``op`` (``nbytes`` counted); an exception counts as an error."""
        t0 = time.perf_counter()
        try:
            yield
        except BaseException:
            self.error(op)
            raise
        finally:
            self.observe(op, time.perf_counter() - t0, nbytes)

    def timed_reads(self, op: str, entries: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
        """``entries`` (entry id, bytes) passed through, counting their bytes as they go and the time
        spent producing them (one latency observation per iterator, when it ends)."""
        spent = 0.0
        counts = self.bytes
        try:
            while True:
                t0 = time.perf_counter()
                try:
                    item = next(entries)
                except StopIteration:
                    spent += time.perf_counter() - t0
                    return
                except Exception:
                    self.error(op)
                    raise
                spent += time.perf_counter() - t0
                counts[op] = counts.get(op, 0) + len(item[1])
                yield item
        finally:
            self.observe(op, spent)


_lock = threading.Lock()
_writers: dict[str, WriterStats] = {}
_readers: dict[str, ReaderStats] = {}
_stores: dict[str, StoreStats] = {}


_T = TypeVar("_T")


def _one(table: dict[str, _T], key: str, make: Callable[[str], _T]) -> _T:
    """``table[key]``, made by ``make(key)`` the first time (one per key for the whole process)."""
    with _lock:
        s = table.get(key)
        if s is None:
            s = table[key] = make(key)
        return s


def writer_stats(stream: str) -> WriterStats:
    """The writer totals of ``stream`` in this process."""
    return _one(_writers, stream, WriterStats)


def reader_stats(stream: str) -> ReaderStats:
    """The reader totals of ``stream`` in this process."""
    return _one(_readers, stream, ReaderStats)


def store_stats(store: str) -> StoreStats:
    """The operation totals of one segment store kind (``local``, ``rados``) in this process."""
    return _one(_stores, store, StoreStats)


class Collector:
    """Turns the totals above into Prometheus metric families at scrape time."""

    def collect(self) -> Iterable[Metric]:
        with _lock:
            writers, readers, stores = list(_writers.values()), list(_readers.values()), list(_stores.values())
        yield from _writer_families(writers)
        yield from _reader_families(readers)
        yield from _store_families(stores)

    def describe(self) -> Iterable[Metric]:
        return []  # dynamic label sets: not described up front


def _writer_families(writers: list[WriterStats]) -> Iterator[Metric]:
    p = "dlog_log_writer_"
    records = CounterMetricFamily(p + "records", "User records acknowledged.", labels=["stream"])
    nbytes = CounterMetricFamily(p + "bytes", "Entry bytes acknowledged.", labels=["stream"])
    entries = CounterMetricFamily(p + "entries", "Entries acknowledged.", labels=["stream"])
    rolls = CounterMetricFamily(p + "rolls", "Log segments completed by rolling.", labels=["stream"])
    errors = CounterMetricFamily(p + "errors", "Failed appends and writes, by error class.", labels=["stream", "error"])
    hits = CounterMetricFamily(p + "limit_hits", "Writes over a rate limit.", labels=["stream", "limit"])
    outstanding = GaugeMetricFamily(p + "outstanding_writes", "Writes not yet acknowledged.", labels=["stream"])
    for w in writers:
        s = [w.stream]
        records.add_metric(s, w.records)
        nbytes.add_metric(s, w.bytes)
        entries.add_metric(s, w.entries)
        rolls.add_metric(s, w.rolls)
        for err, n in sorted(w.errors.items()):
            errors.add_metric([w.stream, err], n)
        for lim, n in sorted(w.limit_hits().items()):
            hits.add_metric([w.stream, lim], n)
        outstanding.add_metric(s, w.outstanding())
    yield from (records, nbytes, entries, rolls, errors, hits, outstanding)
    for w in writers:
        yield w.write_latency.family(
            p + "write_latency_seconds", "write() of an entry's oldest record to durable.", ["stream"], [w.stream]
        )
        yield w.transmit_latency.family(
            p + "transmit_latency_seconds", "An entry handed to the segment store to durable.", ["stream"], [w.stream]
        )
        yield w.flush_latency.family(p + "flush_latency_seconds", "flush() calls.", ["stream"], [w.stream])


def _reader_families(readers: list[ReaderStats]) -> Iterator[Metric]:
    p = "dlog_reader_"
    records = CounterMetricFamily(p + "records", "User records returned to readers.", labels=["stream"])
    nbytes = CounterMetricFamily(p + "bytes", "Entry bytes decoded by readers.", labels=["stream"])
    behind = GaugeMetricFamily(p + "records_behind", "Records after live readers' positions.", labels=["stream"])
    for r in readers:
        records.add_metric([r.stream], r.records)
        nbytes.add_metric([r.stream], r.bytes)
        n = r.records_behind()
        if n is not None:
            behind.add_metric([r.stream], n)
    yield from (records, nbytes, behind)
    for r in readers:
        yield r.wait.family(p + "wait_seconds", "Time blocking reads waited for records.", ["stream"], [r.stream])


def _store_families(stores: list[StoreStats]) -> Iterator[Metric]:
    p = "dlog_segstore_"
    nbytes = CounterMetricFamily(p + "bytes", "Bytes appended or read.", labels=["store", "op"])
    errors = CounterMetricFamily(p + "op_errors", "Failed segment store operations.", labels=["store", "op"])
    for st in stores:
        for op, n in sorted(st.bytes.items()):
            nbytes.add_metric([st.store, op], n)
        for op, n in sorted(st.errors.items()):
            errors.add_metric([st.store, op], n)
    yield from (nbytes, errors)
    for st in stores:
        for op, h in sorted(st.latency.items()):
            yield h.family(p + "op_latency_seconds", "Segment store operations.", ["store", "op"], [st.store, op])


_COLLECTOR = Collector()
_registered: set[int] = set()
_servers: dict[tuple[str, int], Any] = {}


def register(registry: CollectorRegistry = REGISTRY) -> None:
    """Add this module's metrics to ``registry`` (once; the default registry at import)."""
    with _lock:
        if id(registry) in _registered:
            return
        registry.register(_COLLECTOR)
        _registered.add(id(registry))


def start_http_server(port: int, addr: str = "127.0.0.1") -> int:
    """Serve the default registry on ``http://addr:port/metrics`` (once per address in a process);
    returns the port (``port=0`` picks a free one).

    Raises:
        OSError: the address is taken.
    """
    import prometheus_client

    with _lock:
        key = (addr, port)
        server = _servers.get(key)
        if server is None:
            server, _thread = prometheus_client.start_http_server(port, addr=addr)
            _servers[key] = server
            log.info("serving metrics on http://%s:%d/metrics", addr, server.server_port)
        return int(server.server_port)


register()
