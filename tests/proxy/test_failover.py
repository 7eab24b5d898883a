"""A proxy SIGKILLed under load, 10 seeded times: producers (processes, idempotent) fail over to the other proxy;
the killed one is restarted between rounds. No acknowledged record lost, none duplicated, each producer's records
in send order (tools/history.py); the longest write stall is printed, not asserted.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

import storage
from tests.proxy._fanin import check_history, final_read, start_producer
from tests.proxy.conftest import StartProxy

STREAMS = [f"failover-{i}" for i in range(4)]
PRODUCERS = 4
ROUNDS = 10
SEED = 21


@pytest.fixture
def zk_uri(zk_local_uri: str) -> str:
    uri = zk_local_uri
    with storage.open_namespace(uri) as ns:
        for s in STREAMS:
            ns.create_log(s)
    return uri


def test_sigkill_a_proxy_under_load_ten_times(zk_uri: str, proxy_process: StartProxy, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    proxies = [proxy_process(zk_uri), proxy_process(zk_uri)]
    history = tmp_path / "history"
    stop_file = tmp_path / "stop"
    producers = [
        start_producer(f"producer-{i}", history, STREAMS, uri=zk_uri, rate=200, stop_file=stop_file)
        for i in range(PRODUCERS)
    ]
    kills: list[str] = []
    for round_no in range(ROUNDS):
        time.sleep(rng.uniform(0.3, 1.0))  # load runs on both proxies (pacing, not an assertion)
        victim = rng.randrange(len(proxies))
        proc, address = proxies[victim]
        proc.kill()
        proc.wait(timeout=30)
        kills.append(address)
        time.sleep(rng.uniform(0.2, 0.6))  # the survivor serves alone for a while
        proxies[victim] = proxy_process(zk_uri)
        print(f"round {round_no}: SIGKILLed {address}, restarted as {proxies[victim][1]}")
    time.sleep(1.0)
    stop_file.touch()
    summaries = [p.finish() for p in producers]
    counts = final_read(zk_uri, STREAMS, history)
    report = check_history(history)
    stall = max(s["longest_stall_s"] for s in summaries)
    acked = sum(s["acked"] for s in summaries)
    print(f"failover: {len(kills)} SIGKILLs, {acked} acknowledged, read back {sum(counts.values())}; "
          f"longest write stall {stall:.2f}s (per producer: {[s['longest_stall_s'] for s in summaries]})")  # fmt: skip
    assert report.ok, str(report)
    assert all(s["failed"] == 0 and s["unknown"] == 0 for s in summaries), summaries
    assert sum(counts.values()) == acked == report.counts["acked"]
