"""Simulated hosts: Linux network namespaces on one bridge, each with its own address and host name.

Layout (all names start with ``dlc-<id>-`` so that a cleanup finds them; ``id`` is ``[a-z0-9]+``)::

    dlc-<id>-sw        the "switch": holds the bridge br0 and one veth end per host (p1, p2...)
    dlc-<id>-<host>    a host: lo and eth0 (the other veth end, enslaved to br0), address <subnet>.(10+i)

The bridge lives in a namespace of its own, so the root namespace gets no link and no route to the
hosts. While the hosts exist, the root namespace has ``ip route add unreachable <subnet>``: a client run
there by mistake fails at once with EHOSTUNREACH instead of following the default route off the machine.

Commands run inside a host with :meth:`Network.exec_prefix`: ``ip netns exec dlc-<id>-<host>`` (which also
bind-mounts ``/etc/netns/<ns>/hosts`` and ``hostname`` over ``/etc/hosts``/``/etc/hostname``: every host
name resolves to its address) then ``unshare --uts`` and ``hostname <host>``, then ``exec`` of the
command, so the PID seen by the caller is the command's own. With a niceness (``DLC_NICE``, or ``nice=``)
the prefix also runs ``nice -n N``: everything a host runs yields the CPU to the machine's other work
(``tools.lanes`` sets 5, so the rest of the suite is served first while a fault schedule loads the
machine). :func:`host_socket` makes a socket inside a host's namespace from this process (``setns`` in a
helper thread; the socket keeps its namespace), for the harness's own probes (ZooKeeper ``srvr``, Spark's
``/json``); clients run as processes inside hosts.

Measured on a 2-core VM (Debian 12, kernel 6.18 without netem): 12 hosts created in 0.4-0.7 s,
deleted in about 0.3 s; UDP echo RTT between two hosts 0.04 ms median.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "NICE_ENV",
    "NS_PREFIX",
    "Host",
    "NetError",
    "Network",
    "host_socket",
    "netns_inode",
    "netns_list",
    "netns_pids",
    "pid_netns_inode",
]

#: Every namespace the harness makes starts with this.
NS_PREFIX = "dlc-"
#: The environment variable with the niceness of what the hosts run (default 0).
NICE_ENV = "DLC_NICE"
#: Where ``ip netns`` keeps its namespaces and ``ip netns exec`` finds per-namespace /etc files.
RUN_NETNS = Path("/run/netns")
ETC_NETNS = Path("/etc/netns")
#: ``CLONE_NEWNET`` for setns(2).
CLONE_NEWNET = 0x40000000
#: The first host gets ``<subnet> + HOST_OFFSET + 1``.
HOST_OFFSET = 10
_ID_RE = re.compile(r"^[a-z0-9]{1,12}$")
_HOST_RE = re.compile(r"^[a-z][a-z0-9]{0,30}$")


class NetError(RuntimeError):
    """Creating, using or deleting the simulated network failed (the message names the command and its output)."""


@dataclass(frozen=True)
class Host:
    """One simulated host: its name (also its host name), address and network namespace."""

    name: str
    addr: str
    netns: str
    index: int


def _ip(*args: str, check: bool = True, timeout: float = 30.0) -> str:
    """Run ``ip ARGS`` (in the root namespace: only ``ip netns``/``ip link``/``ip route`` commands that name
    the harness's own namespaces or its subnet are ever passed here); return stdout.

    Raises:
        NetError: non-zero exit (with ``check``), timeout or ``ip`` missing.
    """
    try:
        res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NetError(f"`ip {' '.join(args)}` could not run: {e}") from None
    if check and res.returncode != 0:
        raise NetError(f"`ip {' '.join(args)}` failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout


def netns_list() -> list[str]:
    """The names of all named network namespaces (``ip netns list``)."""
    if not RUN_NETNS.is_dir():
        return []
    return sorted(p.name for p in RUN_NETNS.iterdir())


def netns_inode(ns: str) -> int | None:
    """The inode of namespace ``ns`` (as ``/proc/<pid>/ns/net`` of its processes shows), or None."""
    try:
        return os.stat(RUN_NETNS / ns).st_ino
    except OSError:
        return None


def pid_netns_inode(pid: int) -> int | None:
    """The network namespace inode of process ``pid``, or None (gone, or not readable)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def netns_pids(ns: str) -> list[int]:
    """PIDs of the processes in namespace ``ns`` (what ``ip netns pids`` does: compare namespace inodes)."""
    want = netns_inode(ns)
    if want is None:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and pid_netns_inode(int(entry)) == want:
            pids.append(int(entry))
    return sorted(pids)


_libc: Any = None


def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def host_socket(ns: str, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A new socket in network namespace ``ns``: a helper thread enters it (``setns``, which only changes
    that thread) and makes the socket, which then belongs to ``ns`` whichever thread uses it.

    Raises:
        NetError: the namespace does not exist or setns failed (not root).
    """
    made: list[socket.socket] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            fd = os.open(RUN_NETNS / ns, os.O_RDONLY)
            try:
                _setns(fd)
                made.append(socket.socket(family, kind))
            finally:
                os.close(fd)
        except BaseException as e:  # handed to the caller
            errors.append(e)

    t = threading.Thread(target=work, name=f"setns-{ns}", daemon=True)
    t.start()
    t.join()
    if errors or not made:
        raise NetError(f"cannot make a socket in namespace {ns}: {errors[0] if errors else 'no socket'}")
    return made[0]


class Network:
    """The switch and hosts of cluster ``cluster_id`` on ``subnet`` (not created until :meth:`create`).

    Args:
        cluster_id: ``[a-z0-9]{1,12}``; the namespaces are ``dlc-<cluster_id>-<host>``.
        subnet: an IPv4 network of at least /28 (e.g. ``10.251.0.0/24``); host ``i`` (from 1) gets
            ``subnet + 10 + i``. Two clusters at once need different ids and subnets.
        hosts: host names (``[a-z][a-z0-9]*``), in address order.
        nice: the niceness (0-19) of every process started inside a host; default ``$DLC_NICE``, else 0.

    Raises:
        ValueError: a bad id, subnet, host name or niceness, or too many hosts for the subnet.
    """

    def __init__(self, cluster_id: str, subnet: str, hosts: Sequence[str], *, nice: int | None = None) -> None:
        if not _ID_RE.match(cluster_id):
            raise ValueError(f"cluster id {cluster_id!r} must match {_ID_RE.pattern}")
        if nice is None:
            raw = os.environ.get(NICE_ENV, "0")
            if not raw.strip().isdigit():
                raise ValueError(f"{NICE_ENV}={raw!r}: a niceness must be a whole number from 0 to 19")
            nice = int(raw)
        if not 0 <= nice <= 19:
            raise ValueError(f"niceness {nice} of the simulated hosts must be from 0 to 19")
        self.nice = nice
        self.cluster_id = cluster_id
        self.subnet = ipaddress.IPv4Network(subnet)
        if self.subnet.num_addresses < HOST_OFFSET + len(hosts) + 2:
            raise ValueError(f"subnet {subnet} is too small for {len(hosts)} hosts")
        if len(set(hosts)) != len(hosts):
            raise ValueError(f"duplicate host names in {list(hosts)}")
        self.prefix = f"{NS_PREFIX}{cluster_id}-"
        self.switch = self.prefix + "sw"
        self.hosts: dict[str, Host] = {}
        for i, name in enumerate(hosts, start=1):
            if not _HOST_RE.match(name) or name == "sw":
                raise ValueError(f"host name {name!r} must match {_HOST_RE.pattern} (and not be 'sw')")
            addr = str(self.subnet.network_address + HOST_OFFSET + i)
            self.hosts[name] = Host(name, addr, self.prefix + name, i)

    # --- lookup ---------------------------------------------------------------------------------------
    def host(self, name: str) -> Host:
        """The host called ``name``.

        Raises:
            KeyError: no such host (the message lists the hosts).
        """
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"no host {name!r}; hosts: {', '.join(self.hosts)}") from None

    def addr(self, name: str) -> str:
        """The address of host ``name`` (KeyError if there is none)."""
        return self.host(name).addr

    def namespaces(self) -> list[str]:
        """Every namespace of this cluster that exists now (hosts and switch)."""
        return [ns for ns in netns_list() if ns.startswith(self.prefix)]

    @property
    def exists(self) -> bool:
        """Whether any namespace of this cluster exists."""
        return bool(self.namespaces())

    # --- create / destroy -----------------------------------------------------------------------------
    def _hosts_file(self) -> str:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{h.addr}\t{h.name}" for h in self.hosts.values()]
        return "\n".join(lines) + "\n"

    def create(self) -> None:
        """Make the switch, the hosts, their /etc/netns files and the root namespace's unreachable route.

        Raises:
            NetError: the cluster's namespaces or a route for the subnet exist already (another cluster or a
                crashed one: ``python -m tools.cluster cleanup``), or a command failed (what was made is removed).
        """
        if self.exists:
            raise NetError(
                f"namespaces {', '.join(self.namespaces())} exist already: another cluster {self.cluster_id!r} "
                f"runs, or one crashed (`python -m tools.cluster cleanup --id {self.cluster_id}`)"
            )
        routes = _ip("-4", "route", "show", "table", "all", "match", str(self.subnet)).strip()
        clash = [r for r in routes.splitlines() if not r.startswith("default") and " table local " not in f" {r} "]
        if clash:
            raise NetError(f"the root namespace has routes into {self.subnet} already ({clash}): pick another subnet")
        try:
            self._create()
        except BaseException:
            with contextlib.suppress(Exception):
                self.destroy()
            raise

    def _create(self) -> None:
        _ip("netns", "add", self.switch)
        self.run_in_ns(self.switch, ["ip", "link", "add", "br0", "type", "bridge"])
        self.run_in_ns(self.switch, ["ip", "link", "set", "br0", "up"])
        self.run_in_ns(self.switch, ["ip", "link", "set", "lo", "up"])
        # bridged frames need not pass the switch's (empty) iptables
        for key in ("bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables"):
            self.run_in_ns(self.switch, ["sysctl", "-q", "-w", f"net.bridge.{key}=0"], check=False)
        hosts_text = self._hosts_file()
        for h in self.hosts.values():
            etc = ETC_NETNS / h.netns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts_text)
            (etc / "hostname").write_text(h.name + "\n")
            _ip("netns", "add", h.netns)
            peer = f"p{h.index}"
            _ip("link", "add", "eth0", "netns", h.netns, "type", "veth", "peer", "name", peer, "netns", self.switch)
            self.run_in_ns(self.switch, ["ip", "link", "set", peer, "master", "br0"])
            self.run_in_ns(self.switch, ["ip", "link", "set", peer, "up"])
            plen = str(self.subnet.prefixlen)
            self.run_in_ns(h.netns, ["ip", "addr", "add", f"{h.addr}/{plen}", "dev", "eth0"])
            self.run_in_ns(h.netns, ["ip", "link", "set", "eth0", "up"])
            self.run_in_ns(h.netns, ["ip", "link", "set", "lo", "up"])
        _ip("route", "add", "unreachable", str(self.subnet))

    def destroy(self) -> None:
        """Delete this cluster's namespaces (hosts, then the switch), their /etc/netns dirs and the unreachable
        route. Processes still inside a namespace are not touched here (kill them first). Idempotent."""
        for ns in self.namespaces():
            if ns != self.switch:
                _ip("netns", "del", ns, check=False)
        if self.switch in netns_list():
            _ip("netns", "del", self.switch, check=False)
        for h in self.hosts.values():
            shutil.rmtree(ETC_NETNS / h.netns, ignore_errors=True)
        remove_unreachable_route(str(self.subnet))

    # --- running things in hosts ----------------------------------------------------------------------
    def exec_prefix(self, host: str) -> list[str]:
        """The argv prefix that runs a command inside ``host`` with its host name; the command is exec'ed,
        so the process started keeps the PID of the prefix's first process (KeyError: no such host)."""
        h = self.host(host)
        nice = ["nice", "-n", str(self.nice)] if self.nice else []
        return ["ip", "netns", "exec", h.netns, *nice, "unshare", "--uts", "--", "/bin/sh", "-c", _HOSTNAME_SH, h.name]

    def run_in_ns(self, ns: str, argv: Sequence[str], *, check: bool = True, timeout: float = 30.0) -> str:
        """Run ``argv`` in namespace ``ns`` (one of this cluster's) without the host name wrapper; return stdout.

        Raises:
            NetError: ``ns`` is not this cluster's, or the command failed (with ``check``) or timed out.
        """
        if not ns.startswith(self.prefix):
            raise NetError(f"refusing to run {argv[0]} in namespace {ns!r}: not one of {self.prefix}*")
        try:
            res = subprocess.run(
                ["ip", "netns", "exec", ns, *argv],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise NetError(f"`{' '.join(argv)}` in {ns} could not run: {e}") from None
        if check and res.returncode != 0:
            raise NetError(f"`{' '.join(argv)}` in {ns} failed ({res.returncode}): {res.stderr.strip()}")
        return res.stdout

    def popen(
        self, host: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None, **kw: Any
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` inside ``host`` (``subprocess.Popen`` keywords pass through; ``env`` replaces the
        environment). Raises KeyError for an unknown host, OSError if it cannot start."""
        return subprocess.Popen([*self.exec_prefix(host), *argv], env=dict(env) if env is not None else None, **kw)

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
        """Run ``argv`` inside ``host`` to completion (``subprocess.run`` keywords pass through; output captured
        as text unless ``stdout``/``stderr``/``capture_output``/``text`` say otherwise).

        Raises:
            KeyError: unknown host.
            subprocess.TimeoutExpired: it ran longer than ``timeout`` (it is killed).
            subprocess.CalledProcessError: non-zero exit with ``check``.
        """
        if "stdout" not in kw and "stderr" not in kw:
            kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        if "input" not in kw:
            kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(
            [*self.exec_prefix(host), *argv],
            env=dict(env) if env is not None else None,
            timeout=timeout,
            check=check,
            **kw,
        )

    def open_socket(self, host: str, kind: int = socket.SOCK_STREAM) -> socket.socket:
        """An IPv4 socket inside ``host`` (see :func:`host_socket`; KeyError: no such host, NetError: setns)."""
        return host_socket(self.host(host).netns, socket.AF_INET, kind)

    def connect(self, host: str, addr: str, port: int, timeout: float = 2.0) -> socket.socket:
        """A TCP connection from ``host`` to ``addr:port`` (the socket has ``timeout`` set).

        Raises:
            OSError: the connection failed or timed out (``TimeoutError``).
            NetError: the socket could not be made in the host's namespace.
        """
        s = self.open_socket(host)
        s.settimeout(timeout)
        try:
            s.connect((addr, port))
        except BaseException:
            s.close()
            raise
        return s


#: Sets the host name in the new UTS namespace, then becomes the command ($0 is the host name).
_HOSTNAME_SH = 'hostname "$0" && exec "$@"'


def remove_unreachable_route(subnet: str) -> bool:
    """Delete the root namespace's ``unreachable <subnet>`` route if it is there (only that route type);
    return whether one was deleted."""
    shown = _ip("-4", "route", "show", "type", "unreachable", check=False)
    for line in shown.splitlines():
        parts = line.split()
        if parts and parts[0] in ("unreachable", subnet) and subnet in parts:
            _ip("route", "del", "unreachable", subnet, check=False)
            return True
    return False
