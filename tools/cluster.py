"""A simulated cluster on one machine: ZooKeeper ×3, Ceph (mon + 3 OSDs) and Spark standalone on network
namespaces ("hosts"), with network and process faults. Needs root (namespaces, iptables).

Command line (run from the repository root with the venv's interpreter)::

    python -m tools.cluster up [--id dl] [--subnet 10.251.0.0/24] [--clients 3] [--proxies 0] [--no-spark]
                               [--namespace /dl]
    python -m tools.cluster status | down [--keep-dir] | cleanup [--id ID]
    python -m tools.cluster exec client1 -- .venv/bin/dlog --uri URI list
    python -m tools.cluster partition zk1,zk2 zk3,client1 | isolate ceph2 | one-way client1 zk1
    python -m tools.cluster loss client1 --p 0.05 [--peers ceph1,ceph2,ceph3] | delay client1 --ms 50 --jitter 20
    python -m tools.cluster kill osd.1 [--signal STOP] | pause zk2 | resume zk2 | start osd.1 | heal [--fault N]

From Python (tests)::

    with Cluster("t", "10.251.200.0/24", die_with_parent=True) as c:     # up() ... down()
        uri = c.bind_namespace("/dl")                   # dlog bind on a client host; distributedlog://zk.../dl
        c.run("client1", [c.dlog, "--uri", uri, "list"])
        c.zk_leader().kill(); c.faults.partition([["client1"], ["zk1", "zk2", "zk3"]]); c.heal()

API: ``hosts`` (name -> address), ``client_hosts``, ``popen``/``run``/``python_on(host, ...)`` (inside a host),
``zk_connect``, ``namespace_uri(path)``, ``bind_namespace(path)``, ``segments_uri()``, ``dlog``/``python``,
``spark_master_url``, ``spark_driver_conf(host)``; components (``kill(sig)``, ``pause``, ``resume``, ``stop``,
``start``, ``restart``, ``pid()``, ``state()``): ``components``, ``component(name)``, ``by_role(role)``, ``zk``,
``zk_leader()``, ``zk_modes()``, ``mon``, ``osds``, ``spark_master``, ``spark_workers``, and ``ceph`` (the
:class:`~tools.ceph_cluster.CephCluster`: ``wait_osd_up``, ``status``...); faults: ``faults.partition``/
``isolate``/``one_way``/``loss``/``delay``, ``faults.records()``/``active()`` (kind, hosts, start, end),
``heal()``, ``end_fault(id)``; ``status()``, ``rss()``, ``timings``. Measured figures: :mod:`tools.netsim`.

Hosts (``dlc-<id>-<host>`` namespaces on one bridge; addresses ``<subnet>.11`` on, in this order)::

    zk1 zk2 zk3            one ZooKeeper server each (2181; quorum 2888/3888; tickTime 200 ms)
    ceph1 ceph2 ceph3      ceph1: mon.a and osd.0; ceph2: osd.1; ceph3: osd.2 (pool segments, size 3/min 2)
    master worker1 worker2 Spark master (7077, UI 8080) and two workers (1 core, 1 GiB each)
    client1 ... clientN    writers, readers, drivers (nothing runs there until you run it)

State: ``<dir>`` (default ``/tmp/dlc-<id>``) holds ``state.json`` (hosts, PIDs, faults), ``zk/``, ``ceph/``,
``spark/``, ``faults/`` (delayer logs); ``/run/dlc/<id>.json`` points at it, so that ``cleanup`` finds a
cluster whose harness crashed (it also finds namespaces named ``dlc-*`` without any record). ``cleanup``
without ``--id`` leaves alone a cluster whose maker still runs (a test session); ``cleanup --id ID`` does not.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from tools.ceph_cluster import CephCluster, CephClusterError
from tools.ceph_cluster import missing_programs as ceph_missing
from tools.netsim import zookeeper as zkmod
from tools.netsim.ceph import CephDaemon, make_ceph, segments_uri
from tools.netsim.faults import Fault, Faults
from tools.netsim.hosts import NetError, Network, netns_pids
from tools.netsim.procs import Component, ComponentError, Spawner, StateFile, rss_bytes
from tools.netsim.spark import SparkDaemon, driver_conf, find_spark_class
from tools.netsim.sweep import REGISTRY, kill_namespaces, sweep
from tools.netsim.zookeeper import ZkServer

__all__ = ["DEFAULT_ID", "DEFAULT_SUBNET", "Cluster", "ClusterError", "cleanup", "main", "preflight"]

DEFAULT_ID = "dl"
DEFAULT_SUBNET = "10.251.0.0/24"
ZK_HOSTS = ("zk1", "zk2", "zk3")
CEPH_HOSTS = ("ceph1", "ceph2", "ceph3")
MASTER_HOST = "master"
WORKER_HOSTS = ("worker1", "worker2")
DEFAULT_CLIENTS = 3


class ClusterError(RuntimeError):
    """The cluster could not be brought up, used or torn down (the message says why and what to do)."""


def preflight(spark: bool = True, python: str | None = None) -> list[str]:
    """What this machine lacks for a cluster (empty: nothing): root, programs, packages."""
    problems = []
    if os.geteuid() != 0:
        problems.append("not root: network namespaces and iptables need root")
    for prog, pkg in (("ip", "iproute2"), ("iptables", "iptables"), ("nft", "nftables"), ("unshare", "util-linux")):
        if shutil.which(prog) is None:
            problems.append(f"no `{prog}` (apt-get install {pkg})")
    problems += zkmod.missing()
    missing = ceph_missing()
    if missing:
        problems.append(f"Ceph programs missing ({', '.join(missing)}): make ceph")
    if spark and find_spark_class(python or sys.executable) is None:
        problems.append(f"pyspark's bin/spark-class not found for {python or sys.executable} (make venv)")
    if not Path("/proc/net/netfilter/nfnetlink_queue").exists():
        problems.append("the kernel has no nfnetlink_queue (needed for added delay)")
    return problems


def _layout(clients: int, spark: bool, proxies: int = 0) -> list[str]:
    hosts = [*ZK_HOSTS, *CEPH_HOSTS]
    if spark:
        hosts += [MASTER_HOST, *WORKER_HOSTS]
    hosts += [f"proxy{i}" for i in range(1, proxies + 1)]
    return hosts + [f"client{i}" for i in range(1, clients + 1)]


class Cluster:
    """The simulated cluster ``cluster_id`` on ``subnet`` (nothing runs until :meth:`up`).

    Args:
        cluster_id: ``[a-z0-9]{1,12}``; namespaces ``dlc-<id>-<host>``.
        subnet: the hosts' /24 (or larger); two clusters at once need different ids and subnets.
        directory: where its files live (default ``/tmp/dlc-<id>``; keep it short: Ceph's admin sockets).
        clients: number of client hosts ``client1..N``.
        proxies: number of hosts ``proxy1..N`` for write proxies (``dlog proxy``, started by the caller: they are
            clients of ZooKeeper and Ceph like any other; a host of their own lets a fault cut one proxy alone).
        spark: run the Spark master and workers.
        python: the interpreter of clients, workers' ``PYSPARK_PYTHON`` and the delayer (default: this one).
        die_with_parent: every daemon gets SIGKILL when this process dies (tests; not for the CLI).
        verbose: progress on stderr.

    Raises:
        ValueError: bad id, subnet or client count.
    """

    def __init__(
        self,
        cluster_id: str = DEFAULT_ID,
        subnet: str = DEFAULT_SUBNET,
        directory: str | os.PathLike[str] | None = None,
        *,
        clients: int = DEFAULT_CLIENTS,
        proxies: int = 0,
        spark: bool = True,
        python: str | None = None,
        die_with_parent: bool = False,
        verbose: bool = False,
    ) -> None:
        if clients < 1:
            raise ValueError("need at least one client host")
        if proxies < 0:
            raise ValueError("the number of proxy hosts cannot be negative")
        self.cluster_id = cluster_id
        self.network = Network(cluster_id, subnet, _layout(clients, spark, proxies))
        self.directory = Path(directory or f"/tmp/dlc-{cluster_id}").absolute()
        self.marker = str(self.directory) + "/"
        self.spark_enabled = spark
        self.python = python or sys.executable
        self.verbose = verbose
        self.state = StateFile(self.directory / "state.json")
        self.spawner = Spawner(die_with_parent)
        self.faults = Faults(
            self.network, self.state, self.marker, self.spawner, self.directory / "faults", self.python
        )
        self.timings: dict[str, float] = {}
        self._t0 = time.monotonic()
        self.zk = [
            ZkServer(h, h, self.network, self.spawner, self.directory / "zk" / h, self.marker,
                     self._get_pid, self._set_pid, self._on_fault)
            for h in ZK_HOSTS
        ]  # fmt: skip
        self.ceph: CephCluster = make_ceph(
            self.network, self.directory / "ceph", CEPH_HOSTS[0], CEPH_HOSTS, die_with_parent=die_with_parent
        )
        self.mon = CephDaemon(
            "mon.a", CEPH_HOSTS[0], self.network, self.ceph, self.spawner, self.marker, self._on_fault
        )
        self.osds = [
            CephDaemon(f"osd.{i}", h, self.network, self.ceph, self.spawner, self.marker, self._on_fault)
            for i, h in enumerate(CEPH_HOSTS)
        ]
        self.spark_master: SparkDaemon | None = None
        self.spark_workers: list[SparkDaemon] = []
        if spark:
            self._make_spark()

    def _make_spark(self) -> None:
        found = self.state.read().get("spark_class") or find_spark_class(self.python)
        spark_class = Path(found) if found else Path("/nonexistent/spark-class")

        def daemon(name: str, host: str, kind: str) -> SparkDaemon:
            return SparkDaemon(name, host, kind, self.network, self.spawner, self.directory / "spark" / name,
                               self.marker, spark_class, self.python, MASTER_HOST, self._get_pid, self._set_pid,
                               self._on_fault)  # fmt: skip

        self.spark_master = daemon("spark-master", MASTER_HOST, "master")
        self.spark_workers = [daemon(f"spark-{h}", h, "worker") for h in WORKER_HOSTS]

    # --- existing clusters ----------------------------------------------------------------------------
    @classmethod
    def existing(cls, cluster_id: str = DEFAULT_ID, *, verbose: bool = False) -> Cluster:
        """A handle on the running cluster ``cluster_id`` (from ``/run/dlc/<id>.json`` and its state file).

        Raises:
            ClusterError: no such cluster.
        """
        try:
            reg = json.loads((REGISTRY / f"{cluster_id}.json").read_text())
            settings = json.loads((Path(reg["dir"]) / "state.json").read_text())["settings"]
        except (OSError, ValueError, KeyError) as e:
            raise ClusterError(f"no cluster {cluster_id!r} here ({e}); start one with `up`") from None
        return cls(
            cluster_id,
            settings["subnet"],
            reg["dir"],
            clients=int(settings["clients"]),
            proxies=int(settings.get("proxies", 0)),
            spark=bool(settings["spark"]),
            python=settings["python"],
            verbose=verbose,
        )

    # --- state ----------------------------------------------------------------------------------------
    def _get_pid(self, name: str) -> int | None:
        pid = self.state.read().get("pids", {}).get(name)
        return int(pid) if pid is not None else None

    def _set_pid(self, name: str, pid: int | None) -> None:
        def put(data: dict[str, Any]) -> None:
            data.setdefault("pids", {})[name] = pid

        self.state.update(put)

    def _on_fault(self, kind: str, comp: Component, pid: int | None) -> None:
        if kind in ("kill", "pause"):
            self.faults.record_process(kind, comp.name, comp.host, pid)
        elif kind.startswith("end-"):
            self.faults.end_process(kind[4:], comp.name)

    def _say(self, msg: str) -> None:
        if self.verbose:
            print(f"[cluster {self.cluster_id} {time.monotonic() - self._t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    # --- layout ---------------------------------------------------------------------------------------
    @property
    def hosts(self) -> dict[str, str]:
        """``{host name: address}``, in address order."""
        return {name: h.addr for name, h in self.network.hosts.items()}

    @property
    def client_hosts(self) -> list[str]:
        """The client hosts (``client1``...)."""
        return [h for h in self.network.hosts if h.startswith("client")]

    @property
    def proxy_hosts(self) -> list[str]:
        """The hosts for write proxies (``proxy1``...)."""
        return [h for h in self.network.hosts if h.startswith("proxy")]

    @property
    def components(self) -> dict[str, Component]:
        """``{name: component}``: ``zk1..3``, ``mon.a``, ``osd.0..2``, ``spark-master``, ``spark-worker1..2``."""
        comps: list[Component] = [*self.zk, self.mon, *self.osds]
        if self.spark_master is not None:
            comps += [self.spark_master, *self.spark_workers]
        return {c.name: c for c in comps}

    def component(self, name: str) -> Component:
        """The component called ``name``.

        Raises:
            KeyError: no such component (the message lists them).
        """
        comps = self.components
        if name not in comps:
            raise KeyError(f"no component {name!r}; components: {', '.join(comps)}")
        return comps[name]

    def by_role(self, role: str) -> list[Component]:
        """Components of ``role``: ``zookeeper``, ``ceph-mon``, ``ceph-osd``, ``spark-master``, ``spark-worker``."""
        return [c for c in self.components.values() if c.role == role]

    def on_host(self, host: str) -> list[Component]:
        """The components running on ``host``."""
        return [c for c in self.components.values() if c.host == host]

    @property
    def zk_connect(self) -> str:
        """``<zk1 addr>:2181,<zk2 addr>:2181,<zk3 addr>:2181``."""
        return ",".join(f"{z.addr}:{zkmod.CLIENT_PORT}" for z in self.zk)

    def namespace_uri(self, path: str) -> str:
        """``distributedlog://<zk servers>/<path>`` (use it from a client host)."""
        return f"distributedlog://{self.zk_connect}/{path.lstrip('/')}"

    def segments_uri(self, rados_namespace: str | None = None) -> str:
        """``rados://segments?conf=...&id=dlog&keyring=...[&namespace=...]``."""
        return segments_uri(self.ceph, rados_namespace)

    @property
    def dlog(self) -> str:
        """The ``dlog`` command next to :attr:`python` (``<venv>/bin/dlog``)."""
        return str(Path(self.python).parent / "dlog")

    @property
    def spark_master_url(self) -> str:
        """``spark://<master addr>:7077``.

        Raises:
            ClusterError: the cluster runs without Spark.
        """
        if self.spark_master is None:
            raise ClusterError("this cluster runs without Spark")
        return self.spark_master.master_url

    def spark_driver_conf(self, host: str) -> dict[str, str]:
        """Spark settings of a driver on ``host`` (``spark.master``, ``spark.driver.host``/``bindAddress``)."""
        return driver_conf(self.network, MASTER_HOST, host)

    # --- running things on hosts ----------------------------------------------------------------------
    def popen(
        self, host: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None, **kw: Any
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` inside ``host`` (``subprocess.Popen`` keywords pass through). Raises KeyError for an
        unknown host and OSError when it cannot start."""
        return self.network.popen(host, argv, env=env, **kw)

    def run(
        self,
        host: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = 60.0,
        check: bool = False,
        **kw: Any,
    ) -> subprocess.CompletedProcess[Any]:
        """Run ``argv`` inside ``host`` to completion (output captured as text unless told otherwise).

        Raises:
            KeyError: unknown host. subprocess.TimeoutExpired: timeout. subprocess.CalledProcessError: with
            ``check``, a non-zero exit.
        """
        return self.network.run(host, argv, env=env, timeout=timeout, check=check, **kw)

    def python_on(
        self, host: str, code: str, *, timeout: float | None = 60.0, **kw: Any
    ) -> subprocess.CompletedProcess[Any]:
        """Run Python ``code`` with :attr:`python` inside ``host`` (see :meth:`run`)."""
        return self.run(host, [self.python, "-c", code], timeout=timeout, **kw)

    @staticmethod
    def rados_namespace_for(path: str) -> str:
        """The RADOS namespace :meth:`bind_namespace` gives namespace ``path`` (``/a/b`` -> ``a-b``)."""
        return path.strip("/").replace("/", "-")

    def bind_namespace(self, path: str, *, host: str | None = None, rados_namespace: str | None = None) -> str:
        """Bind the DistributedLog namespace ``path`` to the cluster's RADOS pool by running ``dlog --uri URI bind
        --segments rados://...`` on a client host; return the namespace URI. Objects go to the RADOS namespace
        ``rados_namespace`` (default: ``path`` with ``/`` as ``-``), so namespaces never share ledger objects.

        Raises:
            ClusterError: ``dlog bind`` failed (its output is in the message).
        """
        uri = self.namespace_uri(path)
        rns = rados_namespace if rados_namespace is not None else self.rados_namespace_for(path)
        res = self.run(
            host or self.client_hosts[0],
            [self.dlog, "--uri", uri, "bind", "--segments", self.segments_uri(rns)],
            timeout=120,
        )
        if res.returncode != 0:
            raise ClusterError(
                f"dlog bind of {uri} failed ({res.returncode}): {res.stderr.strip() or res.stdout.strip()}"
            )
        return uri

    # --- lifecycle ------------------------------------------------------------------------------------
    def up(self, timeout: float = 300.0) -> Cluster:
        """Create the hosts and start every component; return once ZooKeeper has a leader and two followers,
        Ceph's client wrote to the pool with all PGs active+clean, and both Spark workers are registered.
        ``timings`` then holds the seconds of each phase.

        Raises:
            ClusterError: something is missing (see :func:`preflight`), the cluster exists already, or a
                component did not come up (everything made is removed again; logs stay in the directory).
        """
        problems = preflight(self.spark_enabled, self.python)
        if problems:
            raise ClusterError("cannot run the cluster here:\n  " + "\n  ".join(problems))
        if self.network.exists:
            raise ClusterError(
                f"cluster {self.cluster_id!r} exists: `python -m tools.cluster cleanup --id {self.cluster_id}`"
            )
        self._t0 = time.monotonic()
        deadline = self._t0 + timeout
        self._prepare_dir()
        try:
            self._up(deadline)
        except BaseException as e:
            with contextlib.suppress(Exception):
                self.down(keep_dir=True)
            if isinstance(e, (NetError, ComponentError, CephClusterError)):
                raise ClusterError(
                    f"cluster {self.cluster_id} did not come up (logs in {self.directory}): {e}"
                ) from None
            raise
        return self

    def _prepare_dir(self) -> None:
        d = self.directory
        if d.exists() and any(d.iterdir()) and not (d / "state.json").exists():
            raise ClusterError(f"{d} exists and is no cluster directory: pick another directory")
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        spark_class = find_spark_class(self.python) if self.spark_enabled else None
        settings = {
            "id": self.cluster_id,
            "subnet": str(self.network.subnet),
            "clients": len(self.client_hosts),
            "proxies": len(self.proxy_hosts),
            "spark": self.spark_enabled,
            "python": self.python,
        }
        self.state.update(
            lambda s: s.update(
                settings=settings, hosts=self.hosts, spark_class=str(spark_class or ""), owner=os.getpid()
            )
        )
        REGISTRY.mkdir(parents=True, exist_ok=True)
        reg = {"id": self.cluster_id, "dir": str(d), "subnet": str(self.network.subnet), "prefix": self.network.prefix}
        (REGISTRY / f"{self.cluster_id}.json").write_text(json.dumps(reg) + "\n")
        if self.spark_enabled:
            self._make_spark()

    def _phase(self, name: str, t: float) -> None:
        self.timings[name] = round(time.monotonic() - t, 2)
        self._say(f"{name}: {self.timings[name]:.1f}s")

    def _up(self, deadline: float) -> None:
        t = time.monotonic()
        self.network.create()
        self._phase("hosts", t)
        zkmod.write_configs(self.directory / "zk", [(z.name, z.addr) for z in self.zk])
        t = time.monotonic()
        for z in self.zk:
            z.start(wait=False)
        if self.spark_master is not None:
            self.spark_master.start(wait=False)
            for w in self.spark_workers:
                w.start(wait=False)
        self.spawner.call(lambda: self.ceph.start(timeout=max(10.0, deadline - time.monotonic())))
        self._phase("ceph", t)
        self.wait_zk_quorum(timeout=max(5.0, deadline - time.monotonic()))
        self._phase("zookeeper", t)
        if self.spark_master is not None:
            for d in (self.spark_master, *self.spark_workers):
                d.wait_ready(timeout=max(5.0, deadline - time.monotonic()))
            self._phase("spark", t)
        self.timings["total"] = round(time.monotonic() - self._t0, 2)
        self.state.update(lambda s: s.update(timings=self.timings))
        self._say(f"up in {self.timings['total']:.1f}s")

    def down(self, keep_dir: bool = False) -> None:
        """Stop everything and remove what :meth:`up` made: processes (by recorded PID, then whatever is left
        in the cluster's namespaces), firewall rules, namespaces, /etc/netns dirs, the root namespace's
        unreachable route, the registry entry and (unless ``keep_dir``) the directory. Idempotent."""
        with contextlib.suppress(Exception):
            self.faults.heal_network()
        for c in self.components.values():
            with contextlib.suppress(Exception):
                if isinstance(c, CephDaemon):
                    continue
                c.stop(timeout=10)
        with contextlib.suppress(Exception):
            self.ceph.stop(timeout=10)
        kill_namespaces(self.network.namespaces())
        self.network.destroy()
        with contextlib.suppress(OSError):
            (REGISTRY / f"{self.cluster_id}.json").unlink()
        if not keep_dir:
            shutil.rmtree(self.directory, ignore_errors=True)
        self._say("down")

    def __enter__(self) -> Cluster:
        return self.up()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.down()

    # --- roles and readiness --------------------------------------------------------------------------
    def zk_modes(self) -> dict[str, str]:
        """``{zk name: leader | follower | down}``."""
        return {z.name: z.mode(1.0) for z in self.zk}

    def zk_leader(self) -> ZkServer | None:
        """The ZooKeeper leader (of the highest epoch, if an old one still says leader), or None."""
        leaders = [z for z in self.zk if z.mode(1.0) == "leader"]
        if len(leaders) > 1:
            leaders.sort(key=lambda z: (z.zxid(1.0) or 0) >> 32, reverse=True)
        return leaders[0] if leaders else None

    def wait_zk_quorum(self, followers: int = 2, timeout: float = 60.0) -> float:
        """Wait until one server is leader and ``followers`` others follow; return the seconds waited.

        Raises:
            ClusterError: not within ``timeout`` (with the modes and the log tails).
        """
        t0 = time.monotonic()
        while True:
            modes = self.zk_modes()
            got = list(modes.values())
            if got.count("leader") == 1 and got.count("follower") >= followers:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                tails = "\n".join(f"--- {z.name} ---\n{z.log_tail(15)}" for z in self.zk)
                raise ClusterError(f"no ZooKeeper quorum after {timeout}s: {modes}\n{tails}")
            time.sleep(0.1)

    # --- faults ---------------------------------------------------------------------------------------
    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to component ``name`` (recorded as a fault for SIGKILL/SIGSTOP); return its PID."""
        return self.component(name).kill(sig)

    def pause(self, name: str) -> int:
        """SIGSTOP component ``name`` (a ``pause`` fault); return its PID."""
        return self.component(name).pause()

    def resume(self, name: str) -> None:
        """SIGCONT component ``name`` (ends its ``pause`` fault)."""
        self.component(name).resume()

    def heal(self, restart: bool = True, timeout: float = 90.0) -> list[Fault]:
        """Undo every fault: remove all firewall rules and delayers, continue paused components, and (with
        ``restart``) start the components killed by a ``kill`` fault and wait until they serve; return the
        faults ended.

        Raises:
            ClusterError: a component did not come back within ``timeout``.
        """
        ended = self.faults.heal_network()
        active = self.faults.active()
        ids = {f.id for f in active}
        for c in self.components.values():
            if c.paused or any(f.kind == "pause" and f.detail.get("component") == c.name for f in active):
                c.resume()
        restarted = []
        for f in active:
            if f.kind == "kill" and restart:
                c = self.component(str(f.detail["component"]))
                if c.pid() is None:
                    c.start(wait=False)
                    restarted.append(c)
                else:
                    self.faults.end_process("kill", c.name)
        try:
            for c in restarted:
                c.wait_ready(timeout)
        except ComponentError as e:
            raise ClusterError(str(e)) from None
        return ended + [f for f in self.faults.records() if f.id in ids]

    def end_fault(self, fault_id: int, timeout: float = 90.0) -> Fault:
        """Undo one fault: a network fault's rules and delayers go; a killed component is started (and waited
        for), a paused one continued. Return its record.

        Raises:
            FaultError: no such fault. ClusterError: the component did not come back in time.
        """
        f = self.faults.get(fault_id)
        if f.active and f.kind in ("kill", "pause"):
            c = self.component(str(f.detail["component"]))
            try:
                if f.kind == "pause":
                    c.resume()
                elif c.pid() is None:
                    c.start(timeout=timeout)
            except ComponentError as e:
                raise ClusterError(str(e)) from None
            self.faults.end_process(f.kind, c.name)
            return self.faults.get(fault_id)
        return self.faults.end(f)

    # --- looking at it --------------------------------------------------------------------------------
    def rss(self) -> dict[str, int]:
        """``{component: VmRSS bytes}`` plus ``"total"``: every process in the cluster's namespaces."""
        out = {name: c.rss() for name, c in self.components.items()}
        out["total"] = sum(rss_bytes(pid) for ns in self.network.namespaces() for pid in netns_pids(ns))
        return out

    def status(self) -> dict[str, Any]:
        """Hosts, components (pid, state, RSS), ZooKeeper modes, Ceph OSDs up, Spark workers, active faults."""
        comps = {
            name: {"host": c.host, "role": c.role, "pid": c.pid(), "state": c.state(), "rss_mib": c.rss() >> 20}
            for name, c in self.components.items()
        }
        for name, mode in self.zk_modes().items():
            comps[name]["zk_mode"] = mode
        osd: dict[str, Any]
        try:
            osd = dict(self.ceph.status())
        except CephClusterError as e:
            osd = {"error": str(e).splitlines()[0][:200]}
        spark: dict[str, Any] = {}
        if self.spark_master is not None:
            try:
                j = self.spark_master.master_json(2.0)
                spark = {"status": j.get("status"), "alive_workers": j.get("aliveworkers")}
            except (OSError, NetError) as e:
                spark = {"error": str(e)}
        return {
            "id": self.cluster_id,
            "dir": str(self.directory),
            "hosts": self.hosts,
            "components": comps,
            "ceph_osds": osd,
            "spark": spark,
            "faults": [f.describe() for f in self.faults.active()],
            "namespaces": self.network.namespaces(),
        }


def cleanup(cluster_id: str | None = None, keep_dir: bool = False) -> list[str]:
    """Remove what crashed (or running) clusters left: ``cluster_id``'s, or every ``dlc-*`` one (see
    :func:`tools.netsim.sweep.sweep`). Idempotent; returns the ids cleaned."""

    def down(cid: str, keep: bool) -> None:
        Cluster.existing(cid).down(keep_dir=keep)

    return sweep(cluster_id, keep_dir, down)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    from tools.netsim.cli import run_cli

    return run_cli(argv)


if __name__ == "__main__":
    sys.exit(main())
