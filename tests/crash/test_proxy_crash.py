"""The write proxy's machine crashes (its segments on tools/crashfs.py; ZooKeeper and the producers on machines of
their own): at seeded moments the proxy is SIGKILLed and its disk forgets what was not fsynced, then it starts
again. Idempotent producers keep writing through it; no acknowledged record is lost, none is duplicated, each
producer's records stay in send order (tools/history.py)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

import storage
from tests.proxy._fanin import check_history, final_read, start_producer
from tests.proxy.conftest import StartProxy
from tests.zk import ZooKeeperServer
from tools.crashfs import CrashFS

pytestmark = pytest.mark.slow

STREAMS = [f"crash-{i}" for i in range(3)]
CYCLES = 8


def test_proxy_machine_crashes_under_idempotent_producers(
    crashfs: CrashFS,
    tmp_path: Path,
    zk_server: ZooKeeperServer,
    zk_chroot: str,
    proxy_process: StartProxy,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = random.Random(20261132)
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{crashfs.mountpoint / 'segments'}")
    with storage.open_namespace(uri) as ns:
        for s in STREAMS:
            ns.create_log(s)
    history = tmp_path / "history"
    stop_file = tmp_path / "stop"
    proc, address = proxy_process(uri, listen="127.0.0.1:0")
    producers = [
        start_producer(f"producer-{i}", history, STREAMS, proxies=[address], rate=300, stop_file=stop_file)
        for i in range(3)
    ]
    port = address.rsplit(":", 1)[1]
    for _ in range(CYCLES):
        time.sleep(rng.uniform(0.3, 1.5))  # producers write through the proxy
        proc.kill()
        proc.wait(timeout=30)
        tear = rng.random() < 0.5
        crashfs.crash(rng.randrange(2**31), torn=tear)
        proc, again = proxy_process(uri, listen=f"127.0.0.1:{port}")  # the machine is back, same address
        assert again == address
    time.sleep(2.0)
    stop_file.touch()
    summaries = [p.finish() for p in producers]
    counts = final_read(uri, STREAMS, history)
    report = check_history(history)
    acked = sum(s["acked"] for s in summaries)
    line = f"CRASH proxy points={CYCLES} acked={acked} read={sum(counts.values())}\n  {report.line()}"
    with capsys.disabled():
        print(f"\n{line}", flush=True)
    assert report.ok, str(report)
    assert sum(counts.values()) == acked == report.counts["acked"], line
