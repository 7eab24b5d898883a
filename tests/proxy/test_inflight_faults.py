"""The stream's owner dies or freezes while its producers have several large requests in flight (four requests of up
to 1,000 records each, as the client allows by default): every acknowledged record read back once, in each
producer's order, and every write that failed *definitively* is not in the log (the checker's ``failed_visible``);
writes whose outcome is unknown may be in it, once.

SIGKILL: the producers resend to the other proxy, which rebuilt the producers' windows from the log. SIGSTOP for
four session timeouts: the other proxy takes the stream over (fencing the frozen owner's segment) while the frozen
one still holds requests; when it runs again, none of its appends can be acknowledged.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

import storage
from tests.proxy._fanin import check_history, final_read, start_producer
from tests.proxy.conftest import StartProxy
from tests.proxy.test_client_proxies import stream_routed_to

PRODUCERS = 2
SESSION_S = 2


@pytest.mark.parametrize("fault", ["sigkill", "sigstop"])
def test_owner_fails_with_large_requests_in_flight(
    fault: str, zk_local_uri: str, proxy_process: StartProxy, tmp_path: Path
) -> None:
    conf = {"zkSessionTimeoutSeconds": SESSION_S}
    owner, a = proxy_process(zk_local_uri, conf=conf)
    _other, b = proxy_process(zk_local_uri, conf=conf)
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
    time.sleep(2.0)  # the producers write as fast as they can: full requests in flight to the owner (pacing)
    if fault == "sigkill":
        owner.kill()
        owner.wait(timeout=30)
    else:
        owner.send_signal(signal.SIGSTOP)
        time.sleep(4 * SESSION_S)  # frozen past its session: the other proxy takes the stream over
        owner.send_signal(signal.SIGCONT)
    time.sleep(2.0)  # writes go on through the other proxy (pacing)
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
