"""Fan-in: 8 producer PROCESSES through 2 proxy processes into 4 streams, on a ZooKeeper + RADOS namespace and on a
ZooKeeper + shared local path namespace. Every acknowledged record is read back exactly once by the storage reader;
per producer and stream in send order; DLSN order equals read order (tools/history.py checks and prints its line).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import storage
from tests.proxy._fanin import check_history, final_read, start_producer
from tests.proxy.conftest import StartProxy

PRODUCERS = 8
STREAMS = [f"fanin-{i}" for i in range(4)]
RECORDS_PER_PRODUCER = 1000


@pytest.fixture
def fanin_uri(proxy_ns_uri: str) -> str:
    """ZooKeeper + shared local path, then ZooKeeper + RADOS (tests/proxy/conftest.py), with the 4 logs."""
    uri = proxy_ns_uri
    with storage.open_namespace(uri) as ns:
        for s in STREAMS:
            ns.create_log(s)
    return uri


def test_fan_in_eight_producers_two_proxies_four_streams(
    fanin_uri: str, proxy_process: StartProxy, tmp_path: Path
) -> None:
    proxy_process(fanin_uri)
    proxy_process(fanin_uri)
    history = tmp_path / "history"
    started = time.monotonic()
    producers = [
        start_producer(f"producer-{i}", history, STREAMS, uri=fanin_uri, count=RECORDS_PER_PRODUCER)
        for i in range(PRODUCERS)
    ]
    summaries = [p.finish() for p in producers]
    elapsed = time.monotonic() - started
    counts = final_read(fanin_uri, STREAMS, history)
    report = check_history(history)
    acked = sum(s["acked"] for s in summaries)
    print(f"fan-in: {acked} records acknowledged in {elapsed:.1f}s with process start-up, read back {counts}; "
          f"seconds writing per producer: {[s['seconds'] for s in summaries]}")  # fmt: skip
    assert report.ok, str(report)
    assert all(s["acked"] == RECORDS_PER_PRODUCER and s["failed"] == s["unknown"] == 0 for s in summaries), summaries
    assert report.counts["acked"] == PRODUCERS * RECORDS_PER_PRODUCER
    assert sum(counts.values()) == PRODUCERS * RECORDS_PER_PRODUCER  # exactly once: nothing more in the logs
