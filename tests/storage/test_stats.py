"""Metrics: a Prometheus scrape of a running writer and reader over the opt-in HTTP endpoint (loopback),
on every backend; ``enableStats=false`` records nothing per stream."""

from __future__ import annotations

import socket
import urllib.request
import uuid
from pathlib import Path

import pytest

import storage
from storage.common import stats
from tests.conftest import BASE_CONF
from tests.storage.observe import listening_addresses


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def _value(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{want}}} not in the scrape")


def _delta(before: str, after: str, name: str, **labels: str) -> float:
    """How much ``name{labels}`` grew between two scrapes (absent before: from 0)."""
    try:
        start = _value(before, name, **labels)
    except AssertionError:
        start = 0.0
    return _value(after, name, **labels) - start


def _samples(log: str | None = None) -> dict[str, float]:
    """Every sample of the registry's collector (of stream ``log`` only, when given), keyed
    ``name{label=value,...}`` with the labels sorted."""
    out = {}
    for metric in stats.Collector().collect():
        for s in metric.samples:
            if log is not None and s.labels.get("stream") != log:
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def test_scrape_of_a_running_writer_and_reader(ns_uri: str) -> None:
    log = f"metrics-{uuid.uuid4().hex[:8]}"  # totals are per stream and per process
    conf = {**BASE_CONF, "prometheusStatsHttpPort": 0, "writerOutputBufferSize": 4096}
    with storage.open_namespace(ns_uri, conf) as ns:
        port = ns.stats_port
        assert port is not None and port > 0
        assert listening_addresses(port) == ["127.0.0.1"]  # loopback only: the kernel's table of listeners
        store = "rados" if "rados" in str(type(ns.segstore)).lower() else "local"
        before = _scrape(port)  # the store's totals are per process: count from here
        ns.create_log(log)
        dlm = ns.open_log(log)
        w = dlm.open_async_writer()
        futs = [w.write(storage.LogRecord(t, b"%06d" % t + b"v" * 994)) for t in range(1, 1001)]
        w.flush().result()
        assert all(f.result() for f in futs)
        reader = dlm.open_reader(storage.DLSN.INITIAL)
        got = []
        while len(got) < 600:
            got += reader.read_bulk(600 - len(got))
        text = _scrape(port)  # writer and reader both still open
        assert _value(text, "dlog_log_writer_records_total", stream=log) == 1000
        assert _value(text, "dlog_log_writer_bytes_total", stream=log) > 1000 * 1000
        # 5 records of 1,000 bytes pass 4 KiB: 200 entries of records, and the flush's commit is one more
        assert _value(text, "dlog_log_writer_entries_total", stream=log) == 201
        assert _value(text, "dlog_log_writer_write_latency_seconds_count", stream=log) == 200  # entries of records
        assert _value(text, "dlog_log_writer_transmit_latency_seconds_bucket", stream=log, le="+Inf") == 201
        assert _value(text, "dlog_log_writer_transmit_latency_seconds_count", stream=log) == 201
        assert _value(text, "dlog_log_writer_flush_latency_seconds_count", stream=log) == 1
        assert _value(text, "dlog_log_writer_outstanding_writes", stream=log) == 0
        assert _value(text, "dlog_reader_records_total", stream=log) == 600
        assert _value(text, "dlog_reader_bytes_total", stream=log) > 600 * 1000
        assert _value(text, "dlog_reader_records_behind", stream=log) == 400
        # group commits: at least one, at most one per entry
        appends = _delta(before, text, "dlog_segstore_op_latency_seconds_count", store=store, op="append")
        assert 1 <= appends <= 201, appends
        assert _delta(before, text, "dlog_segstore_bytes_total", store=store, op="append") > 1000 * 1000
        assert _delta(before, text, "dlog_segstore_bytes_total", store=store, op="read") > 600 * 1000
        reader.close()
        w.close()
        after = _scrape(port)
        assert f'dlog_reader_records_behind{{stream="{log}"}}' not in after  # only live readers
        assert _value(after, "dlog_log_writer_records_total", stream=log) == 1000  # totals stay


def test_limit_hits_and_errors_are_counted(tmp_path: Path) -> None:
    """A write over the hard rate limit, and writes to a segment that recovery fenced under the writer: the
    limiter's hits, the writer's errors and the segment store's failed appends, each counted exactly."""
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    log = f"limited-{uuid.uuid4().hex[:8]}"
    store = stats.store_stats("local")
    with storage.open_namespace(uri, {**BASE_CONF, "rpsHardWriteLimit": 5}) as ns:
        ns.create_log(log)
        dlm = ns.open_log(log)
        w = dlm.open_async_writer()
        refused = 0
        for t in range(1, 50):
            try:
                w.write(storage.LogRecord(t, b"x"))
            except storage.OverCapacityError:
                refused += 1
        w.flush().result()
        assert refused > 0
        assert _samples(log)[f"dlog_log_writer_limit_hits_total{{limit=rps_hard,stream={log}}}"] == refused
        assert not any(k.startswith("dlog_log_writer_errors_total") for k in _samples(log))  # no error yet

        w.close()

        # another client fences the segment under a writer (as recovery by a new owner does): the next append
        # fails in the segment store, and the write with it
        fenced = f"fenced-{uuid.uuid4().hex[:8]}"
        errors = f"dlog_log_writer_errors_total{{error=WriterFencedError,stream={fenced}}}"
        ns.create_log(fenced)
        dlm = ns.open_log(fenced, {**BASE_CONF, "rpsHardWriteLimit": -1})
        w = dlm.open_async_writer()
        w.write(storage.LogRecord(1, b"before the fence")).result(timeout=60)
        store_errors = store.errors.get("append", 0)
        (segment,) = dlm.log_segments()
        assert segment.in_progress
        assert ns.segstore.fence(segment.ledger_id) == 0
        with pytest.raises(storage.WriterFencedError):
            w.write(storage.LogRecord(2, b"after the fence")).result(timeout=60)
        assert store.errors.get("append", 0) - store_errors == 1  # one failed group commit
        assert _samples(fenced)[errors] == 1
        with pytest.raises(storage.WriterFencedError):
            w.flush().result(timeout=60)  # the flush fails too: counted; the store is not asked again
        samples = _samples(fenced)
        assert samples[errors] == 2
        assert [k for k in samples if k.startswith("dlog_log_writer_errors_total")] == [errors]
        assert store.errors.get("append", 0) - store_errors == 1
        scraped = _samples()  # what a scrape shows of the store: the same total
        assert scraped["dlog_segstore_op_errors_total{op=append,store=local}"] == store.errors["append"]
        w.abort()


def test_enable_stats_false_records_nothing(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    log = f"quiet-{uuid.uuid4().hex[:8]}"
    with storage.open_namespace(uri, {**BASE_CONF, "enableStats": False}) as ns:
        ns.create_log(log)
        dlm = ns.open_log(log)
        with dlm.open_writer() as w:
            w.write(storage.LogRecord(1, b"x"))
            w.flush()
        with dlm.open_reader(storage.DLSN.INITIAL) as r:
            assert r.read_next(non_blocking=True) is not None
    names = {s.labels.get("stream") for m in stats.Collector().collect() for s in m.samples}
    assert log not in names


def test_port_in_use_is_a_clear_config_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(
            storage.InvalidConfigError, match=f"prometheusStatsHttpPort: cannot serve metrics on 127.0.0.1:{port}"
        ):
            storage.open_namespace(f"distributedlog-local://{tmp_path / 'ns'}", {"prometheusStatsHttpPort": port})
