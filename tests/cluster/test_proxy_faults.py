"""Write proxies on hosts of their own (``proxy1``, ``proxy2``), producers on two client hosts writing the same
streams through them, and the owning proxy's host partitioned from the ZooKeeper ensemble (not from Ceph, not from
the producers) for longer than its session timeout, then healed.

What must hold (the history checker's line): every acknowledged record read back exactly once, per producer and
stream in the order it wrote them, DLSN order equal to read order for the tailing reader. The cut-off proxy still
reaches Ceph, so its core writer may try to append after the other proxy took the stream over: the new owner's
recovery fences the segment, and none of those appends can become visible (guarded appends); the producers' retries
carry their sequence numbers, so a write whose reply was lost is not stored twice.

Off loopback a proxy needs TLS and a token: the test makes a CA and a server certificate for the proxies'
addresses with ``openssl``, and the producers trust that CA and send the token.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.clients import CLIENT_CONF
from tests.cluster.scenario import ROOT, Client, Scenario
from tests.storage.observe import wait_until
from tools.cluster import ZK_HOSTS, Cluster
from tools.history import availability

pytestmark = pytest.mark.timeout(900)

TOKEN = "cluster-proxy-token"
PORT = 7000
#: The proxies' ZooKeeper session (DistributedLog's proxy ran with 1 s): a cut-off proxy loses its streams soon.
SESSION_S = 2
PARTITION_S = 15.0
STREAMS = ("p1", "p2")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def _pki(directory: Path, addresses: list[str]) -> Path:
    """A CA and one server certificate for every proxy address (subjectAltName IPs), and the token file."""
    d = directory / "pki"
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=dlc-test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=" + ",".join(f"IP:{a}" for a in addresses) + "\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=dlog-proxy", "-keyout", "proxy.key",
             "-out", "proxy.csr", cwd=d)  # fmt: skip
    _openssl("x509", "-req", "-in", "proxy.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.ext", "-out", "proxy.pem", cwd=d)  # fmt: skip
    (d / "token").write_text(TOKEN + "\n")
    return d


def _start_proxy(c: Cluster, run: Scenario, host: str, pki: Path) -> Client:
    conf = {**CLIENT_CONF, "zkSessionTimeoutSeconds": SESSION_S, "proxyCreateStreamOnWrite": "true"}
    argv = [c.dlog, "--uri", run.uri, "proxy", "--listen", f"{c.hosts[host]}:{PORT}"]
    argv += ["--tls-cert", str(pki / "proxy.pem"), "--tls-key", str(pki / "proxy.key")]
    argv += ["--token-file", str(pki / "token")]
    for key, value in conf.items():
        argv += ["--set", f"{key}={value}"]
    proc = c.popen(host, argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    proxy = Client(f"proxy-{host}", proc, run.dir / f"proxy-{host}.out")
    proxy.wait_line("PROXY listening on", timeout=120)
    return proxy


def _owner(c: Cluster, uri: str, stream: str) -> str:
    """The address of the proxy holding ``stream``'s write lock (asked from client3 without waiting for the lock)."""
    code = (
        "import storage, sys\n"
        f"ns = storage.open_namespace({uri!r}, {{'lockTimeoutSeconds': 0}})\n"
        "try:\n"
        f"    ns.open_log({stream!r}).open_async_writer().abort()\n"
        "    print('OWNER none')\n"
        "except storage.OwnershipAcquireFailedError as e:\n"
        "    print('OWNER', e.current_owner)\n"
        "ns.close()\n"
    )
    res = c.run("client3", [c.python, "-c", code], cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return str(res.stdout.strip().splitlines()[-1].split(" ", 1)[1])


def _acked_since(history_dir: Path, since: float) -> set[tuple[str, str]]:
    """``(producer, stream)`` pairs with a write invoked at or after monotonic time ``since`` and acknowledged, as
    the producers' history files hold them so far (a line still being written is skipped)."""
    invoked: dict[tuple[str, str, str], tuple[str, float]] = {}
    acked: set[tuple[str, str]] = set()
    for path in history_dir.glob("*.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            key = (ev.get("p", ""), ev.get("r", ""), ev.get("op", ""))
            if ev.get("ev") == "invoke" and ev.get("kind") == "write":
                invoked[key] = (ev.get("log", ""), float(ev["m"]))
            elif ev.get("ev") == "ok" and key in invoked and invoked[key][1] >= since:
                acked.add((key[0], invoked[key][0]))
    return acked


def _wait_acked(history_dir: Path, since: float, producers: list[Client], timeout: float) -> None:
    """Wait until every producer has a write invoked after ``since`` acknowledged on every stream. Raises
    AssertionError if one exits or ``timeout`` passes first."""
    want = {(p.name, s) for p in producers for s in STREAMS}
    got: set[tuple[str, str]] = set()

    def all_acked() -> bool:
        got.update(_acked_since(history_dir, since))
        for p in producers:
            assert p.proc.poll() is None, p.lines[-10:]
        return want <= got

    wait_until(all_acked, f"an acknowledged write since {since:.1f} by every producer on every stream", timeout, 0.2)


def test_owning_proxy_host_partitioned_from_zookeeper(
    healthy_cluster: Cluster, cluster_namespace: str, tmp_path: Path
) -> None:
    c = healthy_cluster
    assert len(c.proxy_hosts) >= 2, c.proxy_hosts
    run = Scenario(c, cluster_namespace, tmp_path)
    pki = _pki(tmp_path, [c.hosts[h] for h in c.proxy_hosts])
    proxies = {h: _start_proxy(c, run, h, pki) for h in c.proxy_hosts[:2]}
    stop_file = tmp_path / "stop-producers"
    producers = []
    for host in ("client1", "client2"):
        argv = [c.python, "-m", "tests.proxy._producer", "--name", f"prod-{host}", "--history", str(run.history_dir)]
        argv += ["--streams", ",".join(STREAMS), "--uri", run.uri, "--rate", "100", "--stop-file", str(stop_file)]
        argv += ["--tls-ca", str(pki / "ca.pem"), "--token-file", str(pki / "token"), "--timeout", "60"]
        proc = c.popen(host, argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        producers.append(Client(f"prod-{host}", proc, tmp_path / f"prod-{host}.out"))
    try:
        _wait_acked(run.history_dir, 0.0, producers, timeout=180)  # both write both streams through the proxies
        owner = _owner(c, run.uri, STREAMS[0])
        owner_host = next(h for h in proxies if owner.startswith(f"{c.hosts[h]}:"))
        other_host = next(h for h in proxies if h != owner_host)
        with run.fault("partition", f"{owner_host} | zk"):
            t_cut = time.monotonic()
            c.faults.partition([[owner_host], list(ZK_HOSTS)])
            time.sleep(PARTITION_S)
            c.heal()
            t_heal = time.monotonic()
        _wait_acked(run.history_dir, t_heal, producers, timeout=180)  # the producers go on after the heal
        new_owner = _owner(c, run.uri, STREAMS[0])
        stop_file.touch()
        results = []
        for p in producers:
            line = p.wait_line('{"name"', timeout=180)  # its last line: it flushed and closed its client
            results.append(json.loads(line))
            assert p.proc.wait(120) == 0, p.lines[-10:]
    finally:
        stop_file.touch()
        for p in producers:
            if p.proc.poll() is None:
                p.kill()
        for proxy in proxies.values():
            proxy.stop(timeout=60)
    report = run.finish(list(STREAMS))
    print(availability(run.history, "write").line() if run.history else "")
    print(
        f"PROXY {STREAMS[0]} owner {owner} ({owner_host}) cut from ZooKeeper {PARTITION_S:.0f}s "
        f"(session {SESSION_S}s) -> owner after heal {new_owner}; "
        f"longest gap in acks {run.longest_gap(t_cut, t_heal + 10):.1f}s; producers "
        + " ".join(
            f"{r['name']}: written={r['written']} acked={r['acked']} unknown={r['unknown']} "
            f"stall={r['longest_stall_s']:.1f}s"
            for r in results
        )
    )
    assert report.ok, report
    for kind in ("lost", "duplicated", "reordered", "stale_visible", "out_of_order"):
        assert report.counts[kind] == 0, report
    assert all(r["acked"] > 0 for r in results), results
    # The stream moved: its write lock in ZooKeeper is now held by the proxy that was not cut off.
    assert new_owner.startswith(f"{c.hosts[other_host]}:"), (owner, new_owner, c.hosts[other_host])
