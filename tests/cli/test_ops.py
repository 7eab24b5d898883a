"""``dlog purge`` (dry run, then purge, with counts; subscribers protect what they have not read),
``dlog stats`` (one-shot namespace view and ``--scrape`` of a running process), ``dlog subscribers``
and ``dlog lag``, on every backend."""

from __future__ import annotations

import subprocess
import sys
import time

import storage
from storage import DLSN, LogRecord
from tests.cli.conftest import Dlog


def _segments(uri: str, log: str, n: int) -> None:
    with storage.open_namespace(uri) as ns:
        ns.create_log(log, exist_ok=True)
        dlm = ns.open_log(log)
        for k in range(n):
            with dlm.open_writer() as w:  # each writer completes one segment
                for t in range(k * 10 + 1, k * 10 + 11):
                    w.write(LogRecord(t, b"p" * 100))
                w.flush()


def test_purge_dry_run_then_purge(dlog: Dlog, ns_uri: str) -> None:
    _segments(ns_uri, "old", 5)
    with storage.open_namespace(ns_uri) as ns:
        ns.open_log("old").subscriptions().advance("reporting", DLSN(3, 0, 0))
    time.sleep(1.1)
    dry = dlog("--uri", ns_uri, "purge", "old", "--older-than", "1s", "--dry-run").ok()
    assert dry.lines[-1] == "would purge 2 segments (20 records) of old"  # segment 3 on: the subscriber needs them
    assert dry.lines[0].startswith("would purge old segment 1: ledgerId=")
    assert "records=10 txids=1..10 completed=" in dry.lines[0]
    assert dlog("--uri", ns_uri, "count", "old").ok().lines == ["total is 50 records."]  # nothing deleted
    dlog("--uri", ns_uri, "subscribers", "old", "--delete", "reporting").ok()
    done = dlog("--uri", ns_uri, "purge", "old", "--older-than", "1s").ok()
    assert done.lines[-1] == "purged 4 segments (40 records) of old"  # the newest completed segment stays
    assert dlog("--uri", ns_uri, "count", "old").ok().lines == ["total is 10 records."]
    again = dlog("--uri", ns_uri, "purge", "--all", "--older-than", "1s").ok()
    assert again.lines == ["purged 0 segments (0 records) of old"]
    dlog("--uri", ns_uri, "purge", "old", "--older-than", "soon").error(2, "'soon' is not a duration")
    dlog("--uri", ns_uri, "purge", "--older-than", "1d").error(2, "give log NAMEs or --all")
    dlog("--uri", ns_uri, "purge", "missing", "--older-than", "1d").error(1, "log 'missing' does not exist")


def test_subscribers_lag_and_stats(dlog: Dlog, ns_uri: str) -> None:
    _segments(ns_uri, "events", 2)
    r = dlog("--uri", ns_uri, "lag", "events").ok()  # nobody subscribed yet: said so, on stderr (stdout: rows)
    assert len(r.lines) == 1 and r.lines[0].startswith("log: events lastDLSN: 2,") and r.err == "dlog: no subscribers\n"
    assert dlog("--uri", ns_uri, "subscribers", "events").ok().out == ""
    with storage.open_namespace(ns_uri) as ns:
        ns.open_log("events").subscriptions().advance("etl", DLSN(2, 0, 0))
    assert dlog("--uri", ns_uri, "subscribers", "events").ok().lines == ["etl\t2,0,0"]
    r = dlog("--uri", ns_uri, "lag", "events").ok()
    lag = r.lines
    assert r.err == ""
    assert lag[0].startswith("log: events lastDLSN: 2,")
    assert lag[1].startswith("etl\tposition=2,0,0\trecordsBehind=10\tbytesBehind=")
    out = dlog("--uri", ns_uri, "stats").ok().out
    assert 'dlog_log_segments{stream="events"} 2' in out
    assert 'dlog_log_records{stream="events"} 20' in out
    assert 'dlog_subscriber_records_behind{stream="events",subscriber="etl"} 10' in out
    dlog("--uri", ns_uri, "subscribers", "events", "--delete", "nobody").error(1, "has no subscriber 'nobody'")
    dlog("--uri", ns_uri, "subscribers", "events", "--delete", "etl").ok()
    r = dlog("--uri", ns_uri, "lag", "events").ok()
    assert len(r.lines) == 1 and r.err == "dlog: no subscribers\n"


WRITER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import storage
conf = {"prometheusStatsHttpPort": 0, "writerOutputBufferSize": 4096}
with storage.open_namespace(sys.argv[2], conf) as ns:
    ns.create_log("scraped", exist_ok=True)
    w = ns.open_log("scraped").open_async_writer()
    for t in range(1, 501):
        w.write(storage.LogRecord(t, b"s" * 200))
    w.flush().result()
    print(ns.stats_port, flush=True)
    sys.stdin.readline()  # stay up until the test has scraped
    w.close()
"""


def test_stats_scrape_of_a_running_process(dlog: Dlog, ns_uri: str, subprocess_env: dict[str, str]) -> None:
    from tests.conftest import ROOT

    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(ROOT), ns_uri],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        lines = dlog("stats", "--scrape", f"127.0.0.1:{port}").ok().lines
        assert 'dlog_log_writer_records_total{stream="scraped"} 500.0' in lines
        assert any(
            line.startswith('dlog_log_writer_write_latency_seconds_bucket{le="0.001",stream="scraped"}')
            or line.startswith('dlog_log_writer_write_latency_seconds_bucket{stream="scraped",le="0.001"}')
            for line in lines
        ), lines
        assert all(line.startswith(("dlog_", "# HELP dlog_", "# TYPE dlog_")) for line in lines)
    finally:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=30)
    dlog("stats", "--scrape", f"127.0.0.1:{port}").error(1, f"cannot scrape http://127.0.0.1:{port}/metrics")
