"""``dlog proxy`` as a process: the ready line, the announcement in ZooKeeper, SIGTERM (graceful: streams released,
so another proxy takes over at once; the node removed; exit 0), a SIGKILLed proxy's node gone with its session, and
the refusals to start: a non-loopback address without TLS and a token, fewer than one request thread."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request

import pytest

from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.registry import list_proxies
from dl_proxy.server import ProxyServer
from storage.config import Config
from storage.errors import InvalidArgumentError
from tests.proxy.conftest import ROOT, StartProxy, _env, stub
from tests.proxy.test_dedup import _bulk, _records
from tests.storage.metastore._stores import until
from tests.zk import free_port

T = 30


def test_ready_line_announcement_and_graceful_sigterm(zk_local_uri: str, proxy_process: StartProxy) -> None:
    pa, a = proxy_process(zk_local_uri)
    _pb, b = proxy_process(zk_local_uri)
    infos = list_proxies(zk_local_uri)
    assert sorted(p.address for p in infos) == sorted([a, b])
    assert all(p.status == "WRITE_AND_ACCEPT" and not p.tls and p.started_ms > 0 for p in infos)
    cha, sa = stub(a)
    chb, sb = stub(b)
    with cha, chb:
        assert sa.writeBulk(_bulk("graceful", [b"g0"], "prod", 0), timeout=T).header.code == pb.SUCCESS
        pa.send_signal(signal.SIGTERM)
        assert pa.wait(30) == 0
        assert [p.address for p in list_proxies(zk_local_uri)] == [b]
        # released, not left for a session timeout: the other proxy takes the stream on the first request
        again = sb.writeBulk(_bulk("graceful", [b"g0"], "prod", 0), timeout=T)
        assert again.header.code == pb.SUCCESS and again.write_responses[0].duplicate, again
        moved = sb.writeBulk(_bulk("graceful", [b"g1"], "prod", 1), timeout=T)
        assert moved.header.code == pb.SUCCESS and not moved.write_responses[0].duplicate, moved
    assert [r.payload for r in _records(zk_local_uri, "graceful")] == [b"g0", b"g1"]


def test_killed_proxy_leaves_with_its_session(zk_local_uri: str, proxy_process: StartProxy) -> None:
    pa, a = proxy_process(zk_local_uri)
    assert [p.address for p in list_proxies(zk_local_uri)] == [a]
    pa.kill()
    pa.wait(30)
    assert until(lambda: list_proxies(zk_local_uri) == [], 60)


def test_non_loopback_needs_tls_and_a_token(zk_local_uri: str) -> None:
    cmd = [sys.executable, "-m", "dlog", "--uri", zk_local_uri, "proxy", "--listen", "0.0.0.0:0"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(None), cwd=str(ROOT), timeout=120)
    assert p.returncode != 0 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs TLS and a shared token" in lines[0] and "--tls-cert" in lines[0], p.stderr
    assert list_proxies(zk_local_uri) == []


def test_threads_below_one_refused(zk_local_uri: str) -> None:
    cmd = [sys.executable, "-m", "dlog", "--uri", zk_local_uri, "proxy", "--threads", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(None), cwd=str(ROOT), timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--threads" in lines[0] and "0 is not in the range 1<=x<=4096" in lines[0], p.stderr
    assert list_proxies(zk_local_uri) == []
    # the Python API says the same, as an InvalidArgumentError (not ThreadPoolExecutor's ValueError)
    with pytest.raises(InvalidArgumentError, match="--threads must be at least 1, not 0"):
        ProxyServer(zk_local_uri, Config(), threads=0)


def test_metrics_on_the_endpoint(zk_local_uri: str, proxy_process: StartProxy) -> None:
    port = free_port()
    _p, a = proxy_process(zk_local_uri, conf={"prometheusStatsHttpPort": port, "proxyCreateStreamOnWrite": True})
    ch, s = stub(a)
    with ch:
        assert s.write(pb.WriteRequest(stream="m", data=b"x"), timeout=T).header.code == pb.SUCCESS
        s.writeBulk(_bulk("m", [b"y"], "prod", 0), timeout=T)
        s.writeBulk(_bulk("m", [b"y"], "prod", 0), timeout=T)  # a duplicate
        s.write(pb.WriteRequest(stream="bad name", data=b"x"), timeout=T)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}
    assert samples['dl_proxy_requests_total{code="200",method="write"}'] == 1.0
    assert samples['dl_proxy_requests_total{code="200",method="writeBulk"}'] == 2.0
    assert samples['dl_proxy_requests_total{code="602",method="write"}'] == 1.0
    assert samples["dl_proxy_dedup_hits_total"] == 1.0
    assert samples["dl_proxy_owned_streams"] == 1.0
    assert samples['dl_proxy_request_seconds_count{method="writeBulk"}'] == 2.0
