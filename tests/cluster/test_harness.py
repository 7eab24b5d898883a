"""The simulated cluster itself (tools/cluster.py): hosts, components, and that each fault works and heals.

Every probe runs inside a simulated host: clients as processes (``cluster.run``), raw packet probes through
sockets made inside a host's namespace (``cluster.network.open_socket``). Timings are printed (``-s``).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.storage.observe import wait_until
from tools.cluster import Cluster, cleanup
from tools.netsim.hosts import NICE_ENV, Network, netns_list, netns_pids

ROOT = Path(__file__).resolve().parents[2]
PROBE_PORT = 9009


def say(*words: object) -> None:
    print("[harness]", *words, flush=True)


def connect_ok(c: Cluster, src: str, dst: str, port: int, timeout: float = 0.5) -> bool:
    """Whether a TCP connection from host ``src`` to host ``dst``'s ``port`` succeeds within ``timeout``."""
    try:
        c.network.connect(src, c.hosts[dst], port, timeout).close()
        return True
    except OSError:
        return False


@contextmanager
def udp_echo(c: Cluster, host: str, port: int = PROBE_PORT) -> Iterator[None]:
    """A UDP echo server on ``host:port`` (a thread with a socket inside the host) while the block runs."""
    s = c.network.open_socket(host, socket.SOCK_DGRAM)
    s.bind((c.hosts[host], port))
    s.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = s.recvfrom(2048)
                s.sendto(data, peer)
            except TimeoutError:
                continue
            except OSError:
                return

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        s.close()


def udp_rtts(c: Cluster, src: str, dst: str, n: int, timeout: float = 1.0, port: int = PROBE_PORT) -> list[float]:
    """``n`` UDP echo round trips from ``src`` to ``dst`` (ms; lost ones are left out)."""
    s = c.network.open_socket(src, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    out = []
    try:
        for i in range(n):
            msg = f"{i}".encode()
            t0 = time.perf_counter()
            s.sendto(msg, (c.hosts[dst], port))
            try:
                while True:
                    data, _ = s.recvfrom(2048)
                    if data == msg:
                        out.append((time.perf_counter() - t0) * 1000)
                        break
            except TimeoutError:
                pass
    finally:
        s.close()
    return out


def udp_delivered(c: Cluster, src: str, dst: str, n: int, port: int = PROBE_PORT + 1) -> int:
    """How many of ``n`` UDP datagrams sent from ``src`` arrive at ``dst``."""
    rx = c.network.open_socket(dst, socket.SOCK_DGRAM)
    rx.bind((c.hosts[dst], port))
    rx.settimeout(0.3)
    tx = c.network.open_socket(src, socket.SOCK_DGRAM)
    got = 0

    def drain() -> int:  # a few hundred small datagrams fill a receive buffer
        k = 0
        rx.setblocking(False)
        try:
            while True:
                rx.recv(64)
                k += 1
        except BlockingIOError:
            return k
        finally:
            rx.settimeout(0.3)

    try:
        for i in range(n):
            tx.sendto(f"{i}".encode(), (c.hosts[dst], port))
            if i % 50 == 49:
                time.sleep(0.002)
                got += drain()
        while True:
            try:
                rx.recvfrom(64)
                got += 1
            except TimeoutError:
                break
    finally:
        rx.close()
        tx.close()
    return got


@contextmanager
def tcp_listeners(c: Cluster, port: int = PROBE_PORT) -> Iterator[None]:
    """A listening TCP socket on every host's address (inside its namespace)."""
    socks = []
    try:
        for h, addr in c.hosts.items():
            s = c.network.open_socket(h)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, port))
            s.listen(64)
            socks.append(s)
        yield
    finally:
        for s in socks:
            s.close()


# --- hosts -------------------------------------------------------------------------------------------
def test_every_host_reaches_every_other(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    with tcp_listeners(c):
        bad = [(a, b) for a in c.hosts for b in c.hosts if not connect_ok(c, a, b, PROBE_PORT, 2.0)]
    assert bad == [], f"unreachable pairs: {bad}"
    assert len(c.hosts) >= 12


def test_host_names_and_addresses(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    code = (
        "import socket; name = socket.gethostname()\n"
        "print(name, socket.gethostbyname(name), socket.gethostbyname('zk2'))"
    )
    for h in ("zk1", "ceph2", "client1"):
        out = c.python_on(h, code, check=True).stdout.split()
        assert out == [h, c.hosts[h], c.hosts["zk2"]]


def test_hosts_run_at_the_cluster_niceness(healthy_cluster: Cluster) -> None:
    """What a host runs has the niceness the cluster was made with (``DLC_NICE``: 5 under ``tools.lanes``)."""
    c = healthy_cluster
    assert c.network.nice == int(os.environ.get(NICE_ENV, "0"))
    for h in ("zk1", "client1"):
        assert c.python_on(h, "import os; print(os.nice(0))", check=True).stdout.split() == [str(c.network.nice)]


def test_a_bad_niceness_is_refused_before_anything_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("-5", "twenty", "20"):
        monkeypatch.setenv(NICE_ENV, bad)
        with pytest.raises(ValueError, match="from 0 to 19"):
            Network("zz", "10.252.0.0/24", ["a", "b"])
    monkeypatch.delenv(NICE_ENV)
    with pytest.raises(ValueError, match="from 0 to 19"):
        Network("zz", "10.252.0.0/24", ["a", "b"], nice=20)
    assert Network("zz", "10.252.0.0/24", ["a"], nice=7).exec_prefix("a")[4:7] == ["nice", "-n", "7"]


def test_root_namespace_cannot_reach_the_subnet(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    routes = subprocess.run(["ip", "route", "show", "type", "unreachable"], capture_output=True, text=True).stdout
    assert str(c.network.subnet) in routes
    t0 = time.monotonic()
    with socket.socket() as s, pytest.raises(OSError) as info:
        s.settimeout(5)
        s.connect((c.hosts["zk1"], 2181))
    took = time.monotonic() - t0
    say(f"root namespace connect to zk1: {info.value} after {took * 1000:.1f} ms")
    assert info.value.errno == errno.EHOSTUNREACH  # refused by the route, not a timeout (that is ETIMEDOUT)


def test_firewall_rules_only_inside_the_hosts(healthy_cluster: Cluster) -> None:
    def root_rules() -> str:
        return subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout

    c = healthy_cluster
    before = root_rules()
    c.faults.partition([["client1"], ["zk1"]])
    c.faults.loss(["client2"], ["ceph1"], 0.1)
    ns = c.network.host("client1").netns
    inside = c.network.run_in_ns(ns, ["nft", "list", "ruleset"])
    assert c.hosts["zk1"] in inside
    assert root_rules() == before
    c.heal()
    assert c.network.run_in_ns(ns, ["nft", "list", "ruleset"]).strip() == ""


# --- components --------------------------------------------------------------------------------------
def test_zookeeper_ensemble_and_a_client_on_a_client_host(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    modes = sorted(c.zk_modes().values())
    assert modes == ["follower", "follower", "leader"]
    leader = c.zk_leader()
    assert leader is not None and leader.role == "zookeeper"
    path = f"/harness-{uuid.uuid4().hex[:8]}"
    code = (
        "import sys, time; from kazoo.client import KazooClient\n"
        "k = KazooClient(hosts=sys.argv[1], timeout=5); k.start(timeout=10)\n"
        "t = time.perf_counter()\n"
        "if sys.argv[3] == 'create': k.create(sys.argv[2], b'hello from ' + sys.argv[4].encode())\n"
        "print(k.get(sys.argv[2])[0].decode(), f'{(time.perf_counter() - t) * 1000:.1f}ms'); k.stop()\n"
    )
    made = c.run("client1", [c.python, "-c", code, c.zk_connect, path, "create", "client1"], check=True).stdout
    read = c.run("client2", [c.python, "-c", code, c.zk_connect, path, "get", ""], check=True).stdout
    say(f"kazoo from client1: {made.strip()}; from client2: {read.strip()}")
    assert read.startswith("hello from client1")


def test_ceph_write_and_read_as_the_restricted_user(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    assert c.ceph.status() == {"osds": 3, "up": 3, "in": 3}
    code = (
        "import sys, rados\n"
        "r = rados.Rados(conffile=sys.argv[1], name='client.dlog', conf={'client_mount_timeout': '10'}); r.connect()\n"
        "io = r.open_ioctx('segments'); io.set_namespace('harness')\n"
        "if sys.argv[2] == 'write': io.write_full('obj', sys.argv[3].encode())\n"
        "print(io.read('obj').decode())\n"
        "try:\n    r.create_pool('not-allowed'); print('CREATED')\n"
        "except rados.Error as e:\n    print('DENIED', type(e).__name__)\n"
        "r.shutdown()\n"
    )
    conf = str(c.ceph.conf_path)
    wrote = c.run("client1", [c.python, "-c", code, conf, "write", "from client1"], check=True).stdout.split("\n")
    read = c.run("client3", [c.python, "-c", code, conf, "read"], check=True).stdout.split("\n")
    assert wrote[0] == read[0] == "from client1"
    assert read[1].startswith("DENIED"), read


def test_spark_master_has_both_workers(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    code = "import urllib.request\nprint(urllib.request.urlopen('http://master:8080/json/', timeout=5).read().decode())"
    data = json.loads(c.python_on("client1", code, check=True).stdout)
    alive = sorted(w["host"] for w in data["workers"] if w["state"] == "ALIVE")
    assert data["status"] == "ALIVE" and data["url"] == c.spark_master_url
    assert alive == sorted(c.hosts[h] for h in ("worker1", "worker2"))


def test_dlog_on_client_hosts(cluster_namespace: str, healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    w = c.run("client1", [c.dlog, "--uri", cluster_namespace, "write", "--create", "log"], input="a\nb\n", check=True)
    assert "wrote 2 records" in w.stdout
    r = c.run("client2", [c.dlog, "--uri", cluster_namespace, "show", "log"], check=True)
    assert "1,0,1" in r.stdout or "1,0,1" in r.stderr, r.stdout


# --- faults ------------------------------------------------------------------------------------------
def test_partition_and_heal(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    assert connect_ok(c, "client1", "zk1", 2181)
    f = c.faults.partition([["client1"], ["zk1", "zk2", "zk3"]])
    t0 = time.monotonic()
    assert not connect_ok(c, "client1", "zk1", 2181)  # silently dropped: times out
    assert udp_delivered(c, "zk2", "client1", 20) == 0 and udp_delivered(c, "client1", "zk3", 20) == 0
    assert c.zk_modes()["zk2"] != "down"  # asked from zk2's own host
    assert connect_ok(c, "client1", "ceph1", 3300)  # not partitioned from Ceph
    assert connect_ok(c, "client2", "zk1", 2181)  # nor is another client
    say(f"partition: connect timed out at once ({time.monotonic() - t0:.2f}s for both probes)")
    c.heal()
    assert connect_ok(c, "client1", "zk1", 2181)
    rec = c.faults.get(f.id)
    assert rec.kind == "partition" and rec.end is not None and rec.end >= rec.start
    assert rec.hosts == ["client1", "zk1", "zk2", "zk3"]


def test_partition_reject_fails_fast(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    c.faults.partition([["client1"], ["zk1"]], mode="reject")
    s = c.network.open_socket("client1")
    s.settimeout(5)
    t0 = time.monotonic()
    with pytest.raises(OSError) as info:
        s.connect((c.hosts["zk1"], 2181))
    s.close()
    say(f"reject: {info.value} after {(time.monotonic() - t0) * 1000:.1f} ms")
    assert info.value.errno == errno.EHOSTUNREACH  # rejected at once, not a timeout (that is ETIMEDOUT)


def test_isolated_osd_host_is_marked_down_then_back(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    f = c.faults.isolate("ceph2")
    down = c.ceph.wait_osd_up(1, up=False, timeout=30)
    assert udp_delivered(c, "client1", "ceph2", 20) == 0 and udp_delivered(c, "ceph2", "ceph1", 20) == 0
    assert connect_ok(c, "client1", "ceph1", 3300)
    t0 = time.monotonic()
    c.heal()
    up = c.ceph.wait_osd_up(1, timeout=60)
    say(f"isolate ceph2: osd.1 marked down after {down:.1f}s; up {up:.1f}s after heal ({time.monotonic() - t0:.1f}s)")
    assert c.faults.get(f.id).kind == "isolate"


def test_one_way(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    c.faults.one_way(["client1"], ["client2"])
    assert udp_delivered(c, "client1", "client2", 50) == 0
    assert udp_delivered(c, "client2", "client1", 50) == 50
    with tcp_listeners(c):
        assert connect_ok(c, "client3", "client1", PROBE_PORT)
        assert not connect_ok(c, "client2", "client1", PROBE_PORT)  # TCP needs both ways: the SYN-ACK is dropped
    c.heal()
    assert udp_delivered(c, "client1", "client2", 50) == 50


def test_random_loss(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    c.faults.loss(["client2"], ["client1"], p=0.3, both_ways=False)
    n = 1000
    got = udp_delivered(c, "client1", "client2", n)
    say(f"loss p=0.3: {n - got} of {n} dropped ({(n - got) / n:.1%})")
    assert 0.22 * n <= n - got <= 0.38 * n
    assert udp_delivered(c, "client2", "client1", 100) == 100  # only one way
    c.heal()
    assert udp_delivered(c, "client1", "client2", 200) == 200


def test_delay(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    with udp_echo(c, "client2"):
        base = udp_rtts(c, "client1", "client2", 20)
        f = c.faults.delay(["client1"], ["client2"], ms=50, jitter_ms=20)
        slow = udp_rtts(c, "client1", "client2", 40)
        other = udp_rtts(c, "client3", "client2", 10)
        c.heal()
        after = udp_rtts(c, "client1", "client2", 20)
    med = statistics.median(slow)
    say(
        f"delay 50±20 ms each way: RTT median {statistics.median(base):.2f} -> {med:.1f} ms "
        f"(min {min(slow):.1f}, max {max(slow):.1f}); after heal {statistics.median(after):.2f} ms"
    )
    # Ordering within one run, not wall-clock bounds: the delayed link is slower than the same link before the
    # fault, than an undelayed link to the same host during it, and than itself after the heal.
    assert len(slow) == 40 and len(base) == 20 and len(other) == 10 and len(after) == 20
    assert med > statistics.median(base) and med > statistics.median(other), (base, slow, other)
    assert statistics.median(after) < med, (slow, after)
    # Every packet is held (a delay of ms ± jitter never lets one through early): the fastest delayed round trip
    # is slower than the typical undelayed one.
    assert min(slow) > statistics.median(other) and min(slow) > statistics.median(after), (slow, other, after)
    # And held at least as long as asked: 50 - 20 ms each way at the least (a little under 60 ms for the timers'
    # granularity). A lower bound only: a loaded machine makes round trips longer, never shorter.
    assert min(slow) >= 55, slow
    rec = c.faults.get(f.id)
    for host, pid in rec.delayers:  # stopped by heal
        assert pid not in netns_pids(c.network.host(host).netns)


def test_sigstop_and_sigcont(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    follower = next(z for z in c.zk if z.mode() == "follower")
    follower.pause()
    assert follower.paused and follower.mode(0.5) == "down"
    assert c.faults.active()[-1].kind == "pause"
    t0 = time.monotonic()
    follower.resume()
    follower.wait_ready(30)
    say(f"SIGCONT: {follower.name} serving again after {time.monotonic() - t0:.2f}s")
    assert not follower.paused and c.faults.records()[-1].end is not None


def test_sigkill_of_the_zookeeper_leader(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    leader = c.zk_leader()
    assert leader is not None
    leader.kill()
    t0 = time.monotonic()
    wait_until(
        lambda: c.zk_leader() not in (None, leader), f"a ZooKeeper leader other than the killed {leader.name}", 30, 0.05
    )
    new = c.zk_leader()
    assert new is not None
    elected = time.monotonic() - t0
    t1 = time.monotonic()
    c.heal()  # restarts it
    c.wait_zk_quorum(timeout=30)
    rejoined = time.monotonic() - t1
    say(f"SIGKILL of the leader {leader.name}: {new.name} leads after {elected:.2f}s; rejoined {rejoined:.1f}s")
    kills = [f for f in c.faults.records() if f.kind == "kill" and f.detail["component"] == leader.name]
    assert kills and kills[-1].end is not None


def test_sigkill_of_an_osd(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    osd = c.osds[2]
    osd.kill()
    down = c.ceph.wait_osd_up(2, up=False, timeout=30)
    osd.start()
    say(f"SIGKILL osd.2: marked down after {down:.2f}s; restarted and up")
    assert c.ceph.status()["up"] == 3


# --- command line and cleanup ------------------------------------------------------------------------
def test_cli_status_and_exec(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    cli = [sys.executable, "-m", "tools.cluster", "--id", c.cluster_id]
    st = subprocess.run([*cli, "status", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    data = json.loads(st.stdout)
    assert data["components"]["zk1"]["state"] == "running" and data["ceph_osds"]["up"] == 3
    ex = subprocess.run(
        [*cli, "exec", "client2", "--", "hostname"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert ex.stdout.strip() == "client2"


def test_cleanup_after_a_crashed_harness(tmp_path: Path) -> None:
    """A harness that died leaves namespaces, a route and processes: ``cleanup --id`` removes them all."""
    cid, subnet = f"x{os.getpid()}", f"10.252.{os.getpid() % 250}.0/24"  # no clash with a concurrent session
    cleanup(cid)
    c = Cluster(cid, subnet, tmp_path / "c", clients=1, spark=False)
    c._prepare_dir()
    c.network.create()
    ns = c.network.host("client1").netns
    sleeper = c.popen("client1", ["sleep", "600"], start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        # ip netns exec enters the namespace after it starts
        wait_until(lambda: sleeper.pid in netns_pids(ns), "the sleeper inside client1's namespace", 10)
        del c  # the harness "crashes": nothing is torn down
        # made by this live process: a `cleanup` without --id in another process leaves it alone
        code = f"from tools.netsim.sweep import owner_alive; print(owner_alive({cid!r}))"
        owner = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert owner.stdout.strip() == str(os.getpid()), owner.stderr
        out = subprocess.run(
            [sys.executable, "-m", "tools.cluster", "cleanup", "--id", cid],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        sleeper.wait(10)
    finally:
        cleanup(cid)
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
    assert not [ns for ns in netns_list() if ns.startswith(f"dlc-{cid}-")]
    assert not list(Path("/etc/netns").glob(f"dlc-{cid}-*"))
    assert subnet not in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    assert not (tmp_path / "c").exists()
    again = subprocess.run([sys.executable, "-m", "tools.cluster", "cleanup", "--id", cid], cwd=ROOT, timeout=60)
    assert again.returncode == 0  # idempotent
