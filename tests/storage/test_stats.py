"""Metrics: a Prometheus scrape of a running writer and reader over the opt-in HTTP endpoint (loopback),
on every backend; ``enableStats=false`` records nothing per stream."""

from __future__ import annotations

import re
import socket
import urllib.request
import uuid

import pytest

import storage
from storage.common import stats
from tests.conftest import BASE_CONF


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def _value(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{want}}} not in the scrape")


def test_scrape_of_a_running_writer_and_reader(ns_uri: str) -> None:
    log = f"metrics-{uuid.uuid4().hex[:8]}"  # totals are per stream and per process
    conf = {**BASE_CONF, "prometheusStatsHttpPort": 0, "writerOutputBufferSize": 4096}
    with storage.open_namespace(ns_uri, conf) as ns:
        port = ns.stats_port
        assert port is not None and port > 0
        with socket.socket() as s:  # loopback only: not on another address of this host
            other = socket.gethostbyname(socket.gethostname())
            if not other.startswith("127."):
                assert s.connect_ex((other, port)) != 0
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
        assert _value(text, "dlog_log_writer_entries_total", stream=log) >= 1000 // 5  # 5 records pass 4 KiB
        assert _value(text, "dlog_log_writer_write_latency_seconds_count", stream=log) > 0
        assert _value(text, "dlog_log_writer_transmit_latency_seconds_bucket", stream=log, le="+Inf") > 0
        assert _value(text, "dlog_log_writer_flush_latency_seconds_count", stream=log) == 1
        assert _value(text, "dlog_log_writer_outstanding_writes", stream=log) == 0
        assert _value(text, "dlog_reader_records_total", stream=log) == 600
        assert _value(text, "dlog_reader_bytes_total", stream=log) > 600 * 1000
        assert _value(text, "dlog_reader_records_behind", stream=log) == 400
        store = "rados" if "rados" in str(type(ns.segstore)).lower() else "local"
        assert _value(text, "dlog_segstore_op_latency_seconds_count", store=store, op="append") > 0
        assert _value(text, "dlog_segstore_bytes_total", store=store, op="append") > 1000 * 1000
        assert _value(text, "dlog_segstore_bytes_total", store=store, op="read") > 600 * 1000
        reader.close()
        w.close()
        after = _scrape(port)
        assert f'dlog_reader_records_behind{{stream="{log}"}}' not in after  # only live readers
        assert _value(after, "dlog_log_writer_records_total", stream=log) == 1000  # totals stay


def test_limit_hits_and_errors_are_counted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    log = f"limited-{uuid.uuid4().hex[:8]}"
    with storage.open_namespace(uri, {**BASE_CONF, "rpsHardWriteLimit": 5}) as ns:
        ns.create_log(log)
        w = ns.open_log(log).open_async_writer()
        refused = 0
        for t in range(1, 50):
            try:
                w.write(storage.LogRecord(t, b"x"))
            except storage.OverCapacityError:
                refused += 1
        w.flush().result()
        text = "\n".join(f"{s.name}{s.labels} {s.value}" for m in stats.Collector().collect() for s in m.samples)
        assert refused > 0
        assert re.search(
            rf"dlog_log_writer_limit_hits_total\{{.*'limit': 'rps_hard'.*'stream': '{log}'.*\}} {refused}", text
        ) or re.search(
            rf"dlog_log_writer_limit_hits_total\{{.*'stream': '{log}'.*'limit': 'rps_hard'.*\}} {refused}", text
        ), text
        w.close()


def test_enable_stats_false_records_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
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


def test_port_in_use_is_a_clear_config_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(
            storage.InvalidConfigError, match=f"prometheusStatsHttpPort: cannot serve metrics on 127.0.0.1:{port}"
        ):
            storage.open_namespace(f"distributedlog-local://{tmp_path / 'ns'}", {"prometheusStatsHttpPort": port})
