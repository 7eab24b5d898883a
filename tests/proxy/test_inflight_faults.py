"""The stream's owner dies or freezes while its producers have several large requests in flight (four requests of up
to 1,000 records each, as the client allows by default): every acknowledged record read back once, in each
producer's order, and every write that failed *definitively* is not in the log (the checker's ``failed_visible``);
writes whose outcome is unknown may be in it, once.

SIGKILL: the producers resend to the other proxy, which rebuilt the producers' windows from the log. SIGSTOP until
the other proxy has taken the stream over (after the frozen owner's session expired, fencing its segment) while
the frozen one still holds requests; when it runs again, none of its appends can be acknowledged. Each step waits
for what it needs to see (acknowledgements in the producers' histories, the new owner), not for a while.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

import storage
from dl_proxy.proto import distributedlog_pb2 as pb
from tests.proxy._fanin import check_history, final_read, start_producer
from tests.proxy.conftest import StartProxy, stub
from tests.proxy.test_client_proxies import stream_routed_to
from tests.storage.observe import flocks_held_by, stopped, wait_until

PRODUCERS = 2
SESSION_S = 2
#: Acknowledgements each producer must have had before a fault, and again after it: a full request (the client's
#: largest) and more, so that every producer's window of requests to the owner is in use.
ACKS = 1500


def _acks(history: Path) -> dict[str, int]:
    """Acknowledged writes per producer so far, from the producers' history files."""
    counts: dict[str, int] = {}
    for path in history.glob("producer-*.jsonl"):
        name = path.name.split(".")[0]
        counts[name] = counts.get(name, 0) + path.read_text(errors="replace").count('"ev": "ok"')
    return counts


def _every_producer_acked(history: Path, at_least: dict[str, int]) -> bool:
    now = _acks(history)
    return all(now.get(f"producer-{i}", 0) >= at_least.get(f"producer-{i}", 0) + ACKS for i in range(PRODUCERS))


def _owns(address: str, stream: str) -> bool:
    channel, service = stub(address)
    with channel:
        ownerships = service.handshake(pb.ClientInfo(get_ownerships=True), timeout=30).ownerships
    return stream in dict(ownerships)


def _freeze_outside_appends(process: subprocess.Popen[str]) -> int:
    """SIGSTOP ``process`` at a moment it holds no ledger file's lock; returns how many freezes were undone.

    A local ledger's append holds the file's ``flock`` for its header check and write (microseconds), and the next
    owner's fence waits for that lock (up to ``FENCE_LOCK_WAIT_S``, then the takeover fails and is tried again): a
    writer frozen inside that window holds its stream until it runs again. This test is about a frozen owner with
    requests in flight, so it freezes the owner outside that window, as a pause almost always lands.
    """
    for undone in range(100):
        process.send_signal(signal.SIGSTOP)
        wait_until(lambda: stopped(process.pid), f"process {process.pid} stopped")
        if not flocks_held_by(process.pid):
            return undone
        process.send_signal(signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError(f"process {process.pid} held a file lock at each of 100 freezes")


@pytest.mark.parametrize("fault", ["sigkill", "sigstop"])
def test_owner_fails_with_large_requests_in_flight(
    fault: str, zk_local_uri: str, proxy_process: StartProxy, tmp_path: Path
) -> None:
    conf = {"zkSessionTimeoutSeconds": SESSION_S}
    owner, a = proxy_process(zk_local_uri, conf=conf, verbose=True)  # INFO lines: acquisitions, in their logs
    _other, b = proxy_process(zk_local_uri, conf=conf, verbose=True)
    streams = [stream_routed_to(a, [a, b], prefix=f"inflight-{fault}-")]
    with storage.open_namespace(zk_local_uri) as ns:
        for s in streams:
            ns.create_log(s)
    history = tmp_path / "history"
    stop_file = tmp_path / "stop"
    opts = ["--batch-records", "1000", "--max-inflight", "4", "--linger", "0.05", "--request-timeout", "2"]
    producers = [
        start_producer(
            f"producer-{i}", history, streams, proxies=[a, b], stop_file=stop_file, payload_bytes=200, extra=opts
        )
        for i in range(PRODUCERS)
    ]
    # the producers write as fast as they can: with acknowledgements flowing, their requests fill the window
    wait_until(lambda: _every_producer_acked(history, {}), f"{ACKS} acknowledgements of every producer")
    before = _acks(history)
    if fault == "sigkill":
        owner.kill()
        owner.wait(timeout=30)
    else:
        refrozen = _freeze_outside_appends(owner)
        try:  # frozen until its session expired and the other proxy took the stream over
            wait_until(lambda: _owns(b, streams[0]), f"{b} owning {streams[0]}")
        finally:
            owner.send_signal(signal.SIGCONT)
        print(f"owner frozen again {refrozen} times: it was inside an append, holding the ledger file's lock")
    wait_until(lambda: _every_producer_acked(history, before), "writes going on through the other proxy")
    stop_file.touch()
    summaries = [p.finish() for p in producers]
    counts = final_read(zk_local_uri, streams, history)
    report = check_history(history)
    acked = sum(s["acked"] for s in summaries)
    print(f"{fault} with requests in flight: {acked} acknowledged, {sum(s['unknown'] for s in summaries)} unknown, "
          f"{sum(s['failed'] for s in summaries)} failed definitively, read back {sum(counts.values())}; "
          f"longest stall {max(s['longest_stall_s'] for s in summaries):.2f}s")  # fmt: skip
    assert report.ok, str(report)
    assert acked > 0 and report.counts["lost"] == 0 and report.counts["failed_visible"] == 0
    assert report.counts["duplicated"] == 0
