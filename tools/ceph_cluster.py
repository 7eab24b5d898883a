#!/usr/bin/env python3
"""A throw-away Ceph (RADOS) cluster on loopback, for the tests and for trying the RADOS segment store.

Module and command line (stdlib only, any Python >= 3.10; the Ceph tools it runs are Debian's)::

    python tools/ceph_cluster.py start DIR [--osds 3] [--pool segments] [--no-cephx]
        # stdout: DIR/ceph.conf, then "dlog DIR/ceph.client.dlog.keyring"; progress on stderr
    python tools/ceph_cluster.py status DIR          # OSDs up/in, PG states, daemons and their RSS
    python tools/ceph_cluster.py kill-osd DIR 0 [--signal KILL|TERM|STOP|CONT]
    python tools/ceph_cluster.py start-osd DIR 0     # restart it, wait until it is up
    python tools/ceph_cluster.py stop DIR [--wipe]

    with CephCluster(Path("/tmp/c")) as c:           # or c.start() ... c.stop(); c.wipe()
        r = rados.Rados(conffile=str(c.conf_path), name=c.client_name,
                        conf={"keyring": str(c.client_keyring), "client_mount_timeout": "10"})

What it starts (Ceph 16.2.15 Pacific, Debian packages ``ceph-mon ceph-osd``): one monitor ``mon.a`` and
``osds`` BlueStore OSDs, each on a sparse 2 GiB file, no mgr, no systemd: plain child processes in a
session of their own (``start_new_session``: a Ctrl-C of the parent does not reach them), PIDs in
``DIR/pids/<name>``. :meth:`CephCluster.stop` signals only those PIDs, and only if ``/proc/<pid>/cmdline``
names ``DIR/ceph.conf``; never by process name. Everything lives in DIR: ``ceph.conf``, keyrings, ``mon/``,
``osd/`` (data dirs and ``ceph-<id>.block``), ``log/`` (``ceph-<name>.log``, ``<name>.out``), ``run/``
(admin sockets), ``crash/``, ``cluster.json`` (the settings, for :meth:`CephCluster.existing`). Then the
replicated pool (8 PGs, size 3, min_size 2, ``application enable ... rados``) and the client user;
:meth:`CephCluster.start` returns once that user wrote to the pool and every PG is active+clean. Health is
HEALTH_OK, also past the 120 s after which a mgr-less mon raises MGR_DOWN (``mon_mgr_mkfs_grace`` is a year).

Placement (optional; default: everything on loopback as described here): ``CephCluster(..., mon_at=Placement(addr,
prefix), osds_at=[...], tools_at=Placement(...), public_network="10.251.0.0/24")`` runs each daemon with an argv
prefix (e.g. ``ip netns exec NS ...``: a simulated host, see ``tools/netsim``) and binds it to that host's
address: ``mon_host = [v2:<mon addr>:3300,v1:<mon addr>:6789]``, ``public_network``/``cluster_network`` the
given subnet, ``public_addr``/``cluster_addr`` per daemon, OSD ports in Ceph's default window 6800-7300 (each
host has its own ports, so nothing is checked by bind()); the ``ceph``/``rados`` tools and ``ceph-osd --mkfs``
run inside ``tools_at``/the OSD's host. ``cluster.json`` keeps the placement, so :meth:`CephCluster.existing`
gets it back.

Ports (loopback): all on 127.0.0.1, below the ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), each
checked free by bind(): the mon on ``P`` (msgr v2) and ``P+1`` (v1), the OSDs in the 200-port window
``P+10..P+209`` (``ms_bind_port_min/max``; 8 ports per OSD), ``P`` random in 20000..ephemeral-210.

cephx (default; ``cephx=False``/``--no-cephx`` gives ``auth none``): ``mon.`` and ``client.admin`` (caps mon,
osd, mgr ``allow *``) are made with ceph-authtool and go into the mon's auth database at ``--mkfs``. Each
OSD gets its own key: ``ceph osd new UUID ID -i {"cephx_secret": KEY}`` registers it (entity ``osd.ID``, caps
``mon 'allow profile osd' mgr 'allow profile osd' osd 'allow *'``) and ``DIR/osd/ceph-ID/keyring`` holds it.
The restricted user ``client.dlog`` gets ``mon 'allow r, allow command "osd blocklist"' osd 'allow rwx
pool=<pool>'``: it reads the mon/osd maps, reads, writes and calls object classes in every namespace of
the pool, lists the blocklist (``osd blocklist ls``: ``r``), adds and removes entries (``osd blocklist``
with ``blocklistop`` add/rm); ``osd blocklist clear``, pool changes and other pools are denied (EACCES;
an op on another pool: ``rados.PermissionError``, EPERM). ``keyring = DIR/ceph.$name.keyring`` in
``[global]``: every client finds its own keyring (``ceph.client.admin.keyring``,
``ceph.client.dlog.keyring``) from ceph.conf alone.

Measured on a 2-core VM (Debian 12, another 3-OSD cluster idling beside it):

* start: 4.5-4.9 s to ready with 3 OSDs (4.0 s with 1), stop 0.2 s.
* RSS (VmRSS) after start: mon 35-43 MiB, each OSD 50-53 MiB: about 0.19 GB in all; after 100 MiB of
  appends (x3 replicas) the OSDs were at 77-79 MiB. Disk: block files are sparse (about 1 MB each
  fresh), 319 MB of ``osd/`` after those appends.
* OSD SIGKILL: marked down within 0.05-0.5 s (peers see "connection refused"); writes go on with 2 of 3
  replicas. ``start_osd``: up after 1.6-2.0 s, all PGs active+clean 0.5-1.3 s later. SIGSTOP: marked down
  after 5.3 s (heartbeat grace 4 s), up again 1.3 s after SIGCONT.

Settings (from an earlier probe, re-checked): one host, so ``osd_crush_chooseleaf_type = 0``; heartbeat
interval 1 s / grace 4 s, ``mon_osd_min_down_reporters = 1``; in ``[client]`` ``objecter_timeout = 2`` and
``objecter_tick_interval = 1`` (a client resends an unanswered op against a new osdmap after about 2 s,
not 10-15 s, when an OSD rejoins or hangs); small OSD memory (cache 64 MiB, no autotune, 1 op shard).

Traps hit (and what this module does about them):

1. ``Rados.connect(timeout=...)`` ignores its argument: against a monitor port with nothing behind it,
   ``connect(timeout=3)`` raised ``rados.TimedOut`` (errno 110) after 300 s (``client_mount_timeout``).
   Put ``client_mount_timeout``/``rados_mon_op_timeout`` in ``conf={...}``: then 3.0 s for 3.
2. Each mon command that changes the osdmap (``osd pool create``, ``osd pool set``...) waits for the next
   Paxos proposal, ``paxos_propose_interval`` = 1 s: start took 11 s. Now 0.1 s (also marks OSDs up/down
   sooner); size/min_size come from ``osd_pool_default_size/min_size`` instead of two ``pool set``; the
   pool is created and the OSDs made (``--mkfs``, in parallel) while none is up yet.
3. Without a mgr, ``ceph pg dump``, ``pg stat``, ``pg ls``... wait for one forever (no error) and ``ceph -s``
   shows no PGs. ``ceph pg <pgid> query`` is answered by the PG's primary OSD: :meth:`CephCluster.wait_clean`
   asks every PG that way.
4. A ``keyring`` in ``[global]`` also overrides the daemons' own default (``$mon_data/keyring``,
   ``$osd_data/keyring``): the mon and OSDs then find no key. ``[mon]``/``[osd]`` set it back.
5. Right after a SIGKILL the osdmap may still show the OSD up, so a restarted OSD looks up at once:
   :meth:`CephCluster.wait_osd_up` also wants the address nonce to be the new PID (Ceph daemons use the
   PID as nonce).
6. ``bluestore_block_path`` inside ``osd_data`` makes BlueStore link ``block`` to itself (ELOOP, then
   "mkfs failed, (17) File exists", only in the OSD log): the block file is ``osd/ceph-<id>.block``.
7. A SIGSTOPped daemon acts on SIGTERM only once continued: :meth:`CephCluster.stop` sends SIGCONT after
   SIGTERM. Daemons left by the CLI belong to PID 1 once it exits; stopped, they are zombies until PID 1
   reaps them (``pgrep`` lists them as ``<defunct>`` for a moment). A zombie counts as stopped.
8. ``CEPH_ARGS``/``CEPH_CONF`` in the environment would redirect the tools, and the ``ceph`` CLI is a
   ``/usr/bin/python3`` script that a venv's ``PYTHONPATH`` could break: both are removed from the tools'
   environment.
9. ``ceph auth get-or-create -o FILE`` writes the key only, mode 0644: the keyring is written by
   ``ceph auth get`` (key and caps) and made 0600.
10. Admin sockets are unix sockets (at most 107 bytes of path): a too long DIR is refused up front.
11. For users of the cluster: ``osd blocklist ls -f json`` prints two JSON arrays back to back
    (``[...][]``: the address blocklist, then the range blocklist); values in ceph.conf ``[osd]``
    override ``ceph config set osd ...`` (use ``ceph tell osd.* config set`` to change them at runtime).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = [
    "INSTALL_HINT",
    "CephCluster",
    "CephClusterError",
    "Placement",
    "missing_programs",
]

#: Programs the harness runs (Debian: ``ceph-mon``, ``ceph-osd`` and their dependency ``ceph-common``).
REQUIRED_PROGRAMS = ("ceph-mon", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rados")
INSTALL_HINT = (
    "Ceph is not installed: run `make ceph` (Debian: apt-get install --no-install-recommends "
    "ceph-mon ceph-osd python3-rados uuid-runtime; the make target also exposes the `rados` module to the venv)"
)
#: Size of each OSD's sparse BlueStore block file.
OSD_BLOCK_BYTES = 2 * 1024**3
#: Placement groups of the pool (fixed: no mgr, so no autoscaler).
PG_NUM = 8
#: Ports each OSD binds (public, cluster, front and back heartbeat; each msgr v2 and v1).
PORTS_PER_OSD = 8
#: Size of the port window (``ms_bind_port_min``..``max``) the OSDs bind in.
PORT_WINDOW = 200
#: Lowest port picked; the highest is just below the kernel's ephemeral range.
PORT_FLOOR = 20000
#: Longest path a unix socket (the daemons' admin sockets) can have on Linux.
UNIX_PATH_MAX = 107
#: Ports of a placed monitor (msgr v2, v1: Ceph's defaults) and the OSD port window (Ceph's default).
PLACED_MON_PORTS = (3300, 6789)
PLACED_BIND_PORTS = (6800, 7300)
#: Environment variables that would change what the ``ceph``/``rados`` tools and the daemons do.
_SCRUBBED_ENV = ("CEPH_ARGS", "CEPH_CONF", "CEPH_KEYRING", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")


class CephClusterError(RuntimeError):
    """A step of the harness failed; the message says which, and holds the relevant output or log tail."""


@dataclass(frozen=True)
class Placement:
    """Where a daemon (or the admin tools) runs: the address it binds and the argv prefix that runs a command
    there (e.g. ``("ip", "netns", "exec", "dlc-x-ceph1")``; empty: here)."""

    addr: str
    prefix: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """A JSON-able form (for ``cluster.json``)."""
        return {"addr": self.addr, "prefix": list(self.prefix)}

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> Placement:
        """The inverse of :meth:`to_json`.

        Raises:
            CephClusterError: ``raw`` is not such a mapping.
        """
        addr, prefix = raw.get("addr"), raw.get("prefix", [])
        if not isinstance(addr, str) or not isinstance(prefix, list):
            raise CephClusterError(f"bad placement in cluster.json: {raw!r}")
        return cls(addr, tuple(str(p) for p in prefix))


def missing_programs() -> list[str]:
    """The programs of :data:`REQUIRED_PROGRAMS` that are not on ``PATH``."""
    return [p for p in REQUIRED_PROGRAMS if shutil.which(p) is None]


def _ephemeral_port_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _choose_ports(osds: int, rng: random.Random) -> tuple[int, int, int]:
    """``(mon_port, bind_min, bind_max)``: the mon gets ``mon_port`` (v2) and ``mon_port + 1`` (v1), the
    OSDs bind in ``bind_min..bind_max``; all below the ephemeral range, free by bind() right now."""
    high = _ephemeral_port_low() - 1
    low = PORT_FLOOR if high - PORT_FLOOR > 4 * PORT_WINDOW else 1024
    need = PORTS_PER_OSD * osds + 16  # room for restarted OSDs whose old ports linger
    for _ in range(500):
        base = rng.randrange(low, high - PORT_WINDOW - 10)
        if not (_port_free(base) and _port_free(base + 1)):
            continue
        window = range(base + 10, base + 10 + PORT_WINDOW)
        if sum(_port_free(p) for p in window) >= need:
            return base, window[0], window[-1]
    raise CephClusterError(f"no free port range found in {low}..{high}")


def _proc_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``R``, ``S``, ``T``, ``Z``...), or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[0] if fields else None


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"(no {path}: {e.strerror})"
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL --``, if util-linux's setpriv has it (else nothing)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    try:
        out = subprocess.run([setpriv, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"] if "--pdeathsig" in out else []


class CephCluster:
    """One monitor and ``osds`` BlueStore OSDs on loopback, everything under ``directory``.

    Args:
        directory: where the cluster lives (created; a previous cluster there is stopped and wiped by
            :meth:`start`).
        osds: number of OSDs.
        pool: the replicated pool created by :meth:`start` (``application enable ... rados``).
        pool_size: its ``size``; ``min_size``: its ``min_size``.
        cephx: real cephx authentication (default); False gives ``auth none``.
        die_with_parent: SIGKILL the daemons when the thread that started them dies (``setpriv
            --pdeathsig``), so a hard-killed test run leaves nothing behind. Not for the CLI, whose
            daemons must outlive it.
        verbose: progress lines on stderr.
        mon_at, osds_at, tools_at, public_network: run the monitor, each OSD (``osds_at[i]`` for ``osd.i``)
            and the admin tools at these placements, on the subnet ``public_network`` (all four or none;
            default: all on loopback, here).

    Raises:
        ValueError: inconsistent sizes or an incomplete placement.
    """

    CLIENT_ID = "dlog"

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        osds: int = 3,
        pool: str = "segments",
        pool_size: int = 3,
        min_size: int = 2,
        cephx: bool = True,
        die_with_parent: bool = False,
        verbose: bool = False,
        mon_at: Placement | None = None,
        osds_at: Sequence[Placement] | None = None,
        tools_at: Placement | None = None,
        public_network: str | None = None,
    ) -> None:
        placed = (mon_at, osds_at, tools_at, public_network)
        if any(p is not None for p in placed) and any(p is None for p in placed):
            raise ValueError("mon_at, osds_at, tools_at and public_network go together")
        if osds_at is not None and len(osds_at) != osds:
            raise ValueError(f"osds_at has {len(osds_at)} placements for {osds} OSDs")
        if osds < 1:
            raise ValueError("osds must be >= 1")
        if not 1 <= min_size <= pool_size:
            raise ValueError("need 1 <= min_size <= pool_size")
        if pool_size > osds:
            raise ValueError(f"pool_size {pool_size} needs at least as many OSDs (have {osds})")
        self.directory = Path(directory).absolute()
        self.osds = osds
        self._pool = pool
        self.pool_size = pool_size
        self.min_size = min_size
        self.cephx = cephx
        self.die_with_parent = die_with_parent
        self.verbose = verbose
        self.mon_at = mon_at
        self.osds_at = tuple(osds_at) if osds_at is not None else None
        self.tools_at = tools_at
        self.public_network = public_network
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._t0 = time.monotonic()

    @property
    def placed(self) -> bool:
        """Whether the daemons run at placements (simulated hosts) rather than here on loopback."""
        return self.mon_at is not None

    def placement(self, name: str) -> Placement | None:
        """The placement of daemon ``name`` (``mon.a``, ``osd.N``) or of the tools (any other name)."""
        if name.startswith("mon.") and self.mon_at is not None:
            return self.mon_at
        if name.startswith("osd.") and self.osds_at is not None:
            return self.osds_at[int(name.split(".", 1)[1])]
        return self.tools_at

    def _where(self, name: str) -> list[str]:
        at = self.placement(name)
        return list(at.prefix) if at is not None else []

    # --- where things are --------------------------------------------------------------------
    @property
    def conf_path(self) -> Path:
        """The cluster's ``ceph.conf`` (clients: ``rados.Rados(conffile=str(conf_path), ...)``)."""
        return self.directory / "ceph.conf"

    @property
    def admin_keyring(self) -> Path:
        """Keyring of ``client.admin`` (all caps)."""
        return self.directory / "ceph.client.admin.keyring"

    @property
    def client_id(self) -> str:
        """Id of the restricted client user (``name="client." + client_id``)."""
        return self.CLIENT_ID

    @property
    def client_name(self) -> str:
        """``client.<client_id>``, the ``name`` for ``rados.Rados``."""
        return f"client.{self.CLIENT_ID}"

    @property
    def client_keyring(self) -> Path:
        """Keyring of the restricted client user (found through ceph.conf's ``keyring`` even if not given)."""
        return self.directory / f"ceph.client.{self.CLIENT_ID}.keyring"

    @property
    def pool(self) -> str:
        """The pool created by :meth:`start`."""
        return self._pool

    @property
    def log_dir(self) -> Path:
        """Daemon logs: ``ceph-<name>.log`` (Ceph's own log) and ``<name>.out`` (stdout/stderr)."""
        return self.directory / "log"

    @property
    def pid_dir(self) -> Path:
        """``<name>`` files holding the PID of each daemon started by this harness."""
        return self.directory / "pids"

    def daemon_log(self, name: str) -> Path:
        """The Ceph log of daemon ``name`` (``mon.a``, ``osd.0``...)."""
        return self.log_dir / f"ceph-{name}.log"

    # --- processes ---------------------------------------------------------------------------
    def _recorded(self) -> dict[str, int]:
        pids: dict[str, int] = {}
        if not self.pid_dir.is_dir():
            return pids
        for f in sorted(self.pid_dir.iterdir()):
            with contextlib.suppress(OSError, ValueError):
                pids[f.name] = int(f.read_text().strip())
        return pids

    def _is_ours(self, pid: int) -> bool:
        """Whether ``pid`` is a live (not zombie) process whose command line names our ceph.conf."""
        if _proc_state(pid) in (None, "Z", "X"):
            return False
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return os.fsencode(self.conf_path) in args

    def _reap(self, name: str, pid: int) -> None:
        proc = self._procs.get(name)
        if proc is not None and proc.pid == pid:
            proc.poll()
        else:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)

    def pids(self) -> dict[str, int]:
        """``{name: pid}`` of the recorded daemons that are running now (a SIGSTOPped one counts)."""
        out: dict[str, int] = {}
        for name, pid in self._recorded().items():
            self._reap(name, pid)
            if self._is_ours(pid):
                out[name] = pid
        return out

    def rss(self) -> dict[str, int]:
        """``{name: VmRSS in bytes}`` of the running daemons."""
        out: dict[str, int] = {}
        for name, pid in self.pids().items():
            with contextlib.suppress(OSError, ValueError, IndexError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[name] = int(line.split()[1]) * 1024
        return out

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        env.setdefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        return env

    def _say(self, msg: str) -> None:
        if self.verbose:
            print(f"[ceph_cluster {time.monotonic() - self._t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    def _spawn(self, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        prefix = _die_with_parent_prefix() if self.die_with_parent else []
        with open(self.log_dir / f"{name}.out", "ab") as out:
            out.write(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                [*prefix, *self._where(name), *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                env=self._env(),
                start_new_session=True,  # a Ctrl-C of the parent does not reach the daemons
            )
        self._procs[name] = proc
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        (self.pid_dir / name).write_text(f"{proc.pid}\n")
        self._say(f"{name} pid {proc.pid}")
        return proc

    def _check_alive(self, names: Iterable[str]) -> None:
        """Raise if one of the daemons ``names`` has exited (with its log tail)."""
        for name in names:
            proc = self._procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise CephClusterError(
                    f"{name} exited with status {proc.returncode}\n"
                    f"--- {self.daemon_log(name)} (tail) ---\n{_tail(self.daemon_log(name))}\n"
                    f"--- {self.log_dir / (name + '.out')} (tail) ---\n{_tail(self.log_dir / (name + '.out'), 10)}"
                )

    # --- running the tools -------------------------------------------------------------------
    def _run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        what: str | None = None,
        input_text: str | None = None,
        where: Sequence[str] = (),
    ) -> str:
        try:
            res = subprocess.run(
                [*where, *argv],
                input=input_text,
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=self.directory,
                env=self._env(),
                stdin=None if input_text is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise CephClusterError(f"`{what or ' '.join(argv)}` timed out after {timeout}s: {err.strip()}") from None
        except OSError as e:
            raise CephClusterError(f"`{what or ' '.join(argv)}` could not run: {e}") from None
        if res.returncode != 0:
            raise CephClusterError(
                f"`{what or ' '.join(argv)}` failed with exit status {res.returncode}: "
                f"{(res.stderr.strip() or res.stdout.strip())[-4000:]}"
            )
        return res.stdout

    def ceph(self, *args: str, timeout: float = 30.0, input_text: str | None = None) -> str:
        """Run the ``ceph`` CLI against this cluster as ``client.admin``; return its stdout.

        ``--connect-timeout`` is ``timeout`` as well (the CLI would otherwise wait for a monitor for 5 min).

        Raises:
            CephClusterError: non-zero exit status or timeout (names the command, holds its stderr).
        """
        conn = str(max(1, int(timeout)))
        argv = ["ceph", "-c", str(self.conf_path), "-n", "client.admin", "--connect-timeout", conn, *args]
        if input_text is not None:
            argv[1:1] = ["-i", "-"]
        return self._run(
            argv,
            timeout=timeout + 5,
            what="ceph " + " ".join(args),
            input_text=input_text,
            where=self._where("tools"),
        )

    def ceph_json(self, *args: str, timeout: float = 30.0) -> object:
        """:meth:`ceph` with ``-f json``, parsed."""
        out = self.ceph(*args, "-f", "json", timeout=timeout)
        try:
            return json.loads(out)
        except json.JSONDecodeError as e:
            raise CephClusterError(f"`ceph {' '.join(args)} -f json` gave no JSON ({e}): {out[:500]!r}") from None

    def rados_cli(self, *args: str, user: str | None = None, timeout: float = 30.0) -> str:
        """Run the ``rados`` CLI (as ``client.<user>``, default the restricted client); return its stdout."""
        argv = ["rados", "-c", str(self.conf_path), "--id", user or self.CLIENT_ID, *args]
        # rados has no connect timeout option of its own: bound the mon and OSD waits instead
        argv += ["--client-mount-timeout", str(int(timeout)), "--rados-osd-op-timeout", str(int(timeout))]
        return self._run(argv, timeout=timeout + 5, what="rados " + " ".join(args), where=self._where("tools"))

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 300.0) -> CephCluster:
        """Start a fresh cluster (stopping and wiping a previous one in ``directory``), create the pool and
        the client user, and return once the client wrote to the pool and every PG is active+clean.

        Raises:
            CephClusterError: a step failed or the cluster was not writable within ``timeout`` seconds
                (with the tail of the relevant daemon log). The daemons started so far are stopped.
        """
        missing = missing_programs()
        if missing:
            raise CephClusterError(f"missing programs {', '.join(missing)}. {INSTALL_HINT}")
        self._t0 = time.monotonic()
        deadline = self._t0 + timeout
        self.stop()
        self._clear()
        try:
            self._bootstrap(deadline)
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise
        self._say(f"ready in {time.monotonic() - self._t0:.1f}s")
        return self

    def _clear(self) -> None:
        longest = self.directory / "run" / f"ceph-osd.{self.osds - 1}.asok"
        if len(os.fsencode(longest)) > UNIX_PATH_MAX:
            raise CephClusterError(f"directory path too long: admin socket {longest} exceeds {UNIX_PATH_MAX} bytes")
        self.directory.mkdir(parents=True, exist_ok=True)
        for entry in ("mon", "osd", "log", "run", "crash", "pids", "tmp"):
            shutil.rmtree(self.directory / entry, ignore_errors=True)
        for pattern in ("ceph.conf", "*.keyring", "monmap", "cluster.json"):
            for f in self.directory.glob(pattern):
                f.unlink()
        for entry in ("mon", "osd", "log", "run", "crash", "pids", "tmp"):
            (self.directory / entry).mkdir()

    def _mon_addrvec(self, mon_ports: tuple[int, int]) -> str:
        addr = self.mon_at.addr if self.mon_at is not None else "127.0.0.1"
        return f"[v2:{addr}:{mon_ports[0]},v1:{addr}:{mon_ports[1]}]"

    def _write_conf(self, fsid: str, mon_ports: tuple[int, int], bind_min: int, bind_max: int) -> None:
        d = self.directory
        auth = "cephx" if self.cephx else "none"
        if self.placed:
            where = f"on simulated hosts of {self.public_network}"
            addrs = f"public_network = {self.public_network}\ncluster_network = {self.public_network}"
        else:
            where = "on 127.0.0.1"
            addrs = "public_addr = 127.0.0.1\ncluster_addr = 127.0.0.1"
        conf = f"""\
# Written by tools/ceph_cluster.py: a throw-away cluster {where}, everything under {d}.
[global]
fsid = {fsid}
mon_host = {self._mon_addrvec(mon_ports)}
{addrs}
ms_bind_port_min = {bind_min}
ms_bind_port_max = {bind_max}
auth_cluster_required = {auth}
auth_service_required = {auth}
auth_client_required = {auth}
# client.admin -> {d}/ceph.client.admin.keyring, client.{self.CLIENT_ID} -> {self.client_keyring}
keyring = {d}/ceph.$name.keyring
run_dir = {d}/run
crash_dir = {d}/crash
osd_pool_default_size = {self.pool_size}
osd_pool_default_min_size = {self.min_size}
osd_pool_default_pg_num = {PG_NUM}
osd_pool_default_pgp_num = {PG_NUM}
osd_pool_default_pg_autoscale_mode = off
# one host: replicate across OSDs, not hosts
osd_crush_chooseleaf_type = 0
mon_osd_reporter_subtree_level = osd
mon_allow_pool_delete = true
mon_allow_pool_size_one = true
mon_max_pg_per_osd = 1000
# no mgr: without this the mon reports MGR_DOWN (HEALTH_WARN) 120 s after mkfs
mon_mgr_mkfs_grace = 31536000
# HEALTH_OK on a fullish disk and with small pools
mon_data_avail_warn = 2
mon_data_avail_crit = 1
mon_warn_on_pool_no_app = false
mon_warn_on_pool_no_redundancy = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
# fast failover: peers are believed at once; a hung OSD is marked down after about 4 s
osd_heartbeat_interval = 1
osd_heartbeat_grace = 4
mon_osd_min_down_reporters = 1

[mon]
mon_data = {d}/mon/$cluster-$id
# commit map changes (pool create, OSD up/down...) after 0.1 s instead of 1 s
paxos_propose_interval = 0.1
keyring = $mon_data/keyring
log_file = {d}/log/$cluster-$name.log
admin_socket = {d}/run/$cluster-$name.asok
mon_cluster_log_file = {d}/log/cluster.log
log_to_stderr = false
err_to_stderr = false

[osd]
osd_data = {d}/osd/$cluster-$id
keyring = $osd_data/keyring
log_file = {d}/log/$cluster-$name.log
admin_socket = {d}/run/$cluster-$name.asok
log_to_stderr = false
err_to_stderr = false
osd_objectstore = bluestore
osd_crush_update_on_start = true
# BlueStore on a sparse file; its path must lie outside osd_data (else a self-referencing symlink)
bluestore_block_path = {d}/osd/$cluster-$id.block
bluestore_block_create = true
bluestore_block_size = {OSD_BLOCK_BYTES}
bluestore_block_db_create = false
bluestore_block_wal_create = false
bluestore_fsck_on_mkfs = false
bluestore_fsck_on_mount = false
# small memory
bluestore_cache_autotune = false
bluestore_cache_size = {64 * 1024**2}
osd_memory_target = {896 * 1024**2}
osd_memory_cache_min = {32 * 1024**2}
osd_op_num_shards = 1
osd_op_num_threads_per_shard = 2
bluestore_rocksdb_options_annex = write_buffer_size={8 * 1024**2}

[client]
# re-send an op without reply after 2 s (default 10 s + a 5 s tick) against the newest osdmap
objecter_timeout = 2
objecter_tick_interval = 1
"""
        if self.mon_at is not None and self.osds_at is not None:
            # each daemon binds its own host's address
            conf += f"\n[mon.a]\npublic_addr = {self.mon_at.addr}\n"
            for i, at in enumerate(self.osds_at):
                conf += f"\n[osd.{i}]\npublic_addr = {at.addr}\ncluster_addr = {at.addr}\n"
        self.conf_path.write_text(conf)

    def _bootstrap(self, deadline: float) -> None:
        d = self.directory
        rng = random.Random()
        if self.placed:  # each host has ports of its own
            mon_ports, (bind_min, bind_max) = PLACED_MON_PORTS, PLACED_BIND_PORTS
        else:
            mon_port, bind_min, bind_max = _choose_ports(self.osds, rng)
            mon_ports = (mon_port, mon_port + 1)
        fsid = str(uuid.uuid4())
        self._write_conf(fsid, mon_ports, bind_min, bind_max)
        (d / "cluster.json").write_text(
            json.dumps(
                {
                    "osds": self.osds,
                    "pool": self.pool,
                    "pool_size": self.pool_size,
                    "min_size": self.min_size,
                    "cephx": self.cephx,
                    "mon_port": mon_ports[0],
                    "mon_ports": list(mon_ports),
                    "bind_ports": [bind_min, bind_max],
                    "placement": None
                    if self.mon_at is None or self.osds_at is None or self.tools_at is None
                    else {
                        "mon": self.mon_at.to_json(),
                        "osds": [at.to_json() for at in self.osds_at],
                        "tools": self.tools_at.to_json(),
                        "public_network": self.public_network,
                    },
                },
                indent=1,
            )
            + "\n"
        )
        auth = "cephx" if self.cephx else "none"
        self._say(f"mon {self._mon_addrvec(mon_ports)}; OSD ports {bind_min}-{bind_max}; auth {auth}")

        # keys: mon. and client.admin go into the mon's initial auth database at mkfs
        boot = d / "tmp" / "mon-bootstrap.keyring"
        t = 30.0
        self._run(
            ["ceph-authtool", "--create-keyring", str(boot), "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"],
            timeout=t,
        )
        admin_caps = ["--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mgr", "allow *"]
        self._run(
            [
                "ceph-authtool",
                "--create-keyring",
                str(self.admin_keyring),
                "--gen-key",
                "-n",
                "client.admin",
                *admin_caps,
            ],
            timeout=t,
        )
        self._run(["ceph-authtool", str(boot), "--import-keyring", str(self.admin_keyring)], timeout=t)

        # monitor
        monmap = d / "tmp" / "monmap"
        addrs = self._mon_addrvec(mon_ports)
        self._run(
            [
                "monmaptool",
                "--create",
                "--fsid",
                fsid,
                "--addv",
                "a",
                addrs,
                "--enable-all-features",
                "--set-min-mon-release",
                "pacific",
                str(monmap),
            ],
            timeout=t,
        )
        conf = str(self.conf_path)
        self._run(
            ["ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap", str(monmap), "--keyring", str(boot)], timeout=60
        )
        boot.unlink()
        self._spawn("mon.a", ["ceph-mon", "-c", conf, "-i", "a", "-f"])
        self._wait("the monitor to answer", deadline, ["mon.a"], lambda: bool(self.ceph("mon", "stat", timeout=5)))

        # OSDs: register each with its own cephx key (`osd new UUID ID -i {"cephx_secret": ...}` creates the
        # auth entity osd.ID with the osd profile caps), write the key into its data dir, mkfs in parallel
        mkfs: dict[int, subprocess.Popen[bytes]] = {}
        try:
            for i in range(self.osds):
                osd_uuid = str(uuid.uuid4())
                secret = self._run(["ceph-authtool", "--gen-print-key"], timeout=t).strip()
                got = self.ceph("osd", "new", osd_uuid, str(i), input_text=json.dumps({"cephx_secret": secret})).strip()
                if got != str(i):
                    raise CephClusterError(f"`ceph osd new {osd_uuid} {i}` gave id {got!r}")
                data = d / "osd" / f"ceph-{i}"
                data.mkdir()
                self._run(
                    [
                        "ceph-authtool",
                        "--create-keyring",
                        str(data / "keyring"),
                        "--name",
                        f"osd.{i}",
                        "--add-key",
                        secret,
                    ],
                    timeout=t,
                )
                with open(self.log_dir / f"osd.{i}.mkfs.out", "wb") as out:
                    mkfs[i] = subprocess.Popen(
                        [
                            *self._where(f"osd.{i}"),
                            "ceph-osd",
                            "-c",
                            conf,
                            "-i",
                            str(i),
                            "--mkfs",
                            "--osd-uuid",
                            osd_uuid,
                        ],
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        cwd=d,
                        env=self._env(),
                        start_new_session=True,
                    )
            # while the OSDs are made: the pool (its PGs are created as soon as the OSDs boot) and the client
            self._create_pool_and_client()
            for i, proc in mkfs.items():
                rc = proc.wait(max(1.0, deadline - time.monotonic()))
                if rc != 0:
                    raise CephClusterError(
                        f"ceph-osd --mkfs of osd.{i} failed (status {rc})\n"
                        f"--- {self.log_dir / f'osd.{i}.mkfs.out'} ---\n{_tail(self.log_dir / f'osd.{i}.mkfs.out')}\n"
                        f"--- {self.daemon_log(f'osd.{i}')} (tail) ---\n{_tail(self.daemon_log(f'osd.{i}'))}"
                    )
        except subprocess.TimeoutExpired:
            raise CephClusterError(f"ceph-osd --mkfs did not finish in time; see {self.log_dir}") from None
        finally:
            for proc in mkfs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        self._say(f"{self.osds} OSDs made")
        for i in range(self.osds):
            self._spawn(f"osd.{i}", ["ceph-osd", "-c", conf, "-i", str(i), "-f"])
        self.wait_osds_up(self.osds, timeout=max(1.0, deadline - time.monotonic()))
        self._say(f"{self.osds} OSDs up")

        # writable? (as the restricted client, so that its key and caps are checked too)
        probe = d / "tmp" / "ready-probe"
        probe.write_text("ready\n")

        def write() -> bool:
            self.rados_cli("-p", self.pool, "put", "__ready_probe", str(probe), timeout=10)
            self.rados_cli("-p", self.pool, "rm", "__ready_probe", timeout=10)
            return True

        names = ["mon.a", *(f"osd.{i}" for i in range(self.osds))]
        self._wait(f"a test write to pool {self.pool}", deadline, names, write)
        self._say("test write done")
        self.wait_clean(timeout=max(1.0, deadline - time.monotonic()))

    def _create_pool_and_client(self) -> None:
        # size and min_size come from osd_pool_default_size/min_size in ceph.conf (checked below): a
        # `ceph osd pool set` costs a map update each
        self.ceph("osd", "pool", "create", self.pool, str(PG_NUM), str(PG_NUM), "replicated")
        self.ceph("osd", "pool", "application", "enable", self.pool, "rados")
        pools = self.ceph_json("osd", "pool", "ls", "detail")
        assert isinstance(pools, list)
        got = next(((p["size"], p["min_size"]) for p in pools if p["pool_name"] == self.pool), None)
        if got != (self.pool_size, self.min_size):
            raise CephClusterError(
                f"pool {self.pool} has (size, min_size) {got}, not {(self.pool_size, self.min_size)}"
            )
        self.ceph("auth", "get-or-create", self.client_name, *self.client_caps())
        self.ceph("auth", "get", self.client_name, "-o", str(self.client_keyring))  # key and caps
        self.client_keyring.chmod(0o600)
        self._say(f"pool {self.pool} (size {self.pool_size}, min_size {self.min_size}) and {self.client_name} made")

    def client_caps(self) -> list[str]:
        """The caps of the restricted client, as ``ceph auth`` arguments: read the maps, blocklist (add, rm;
        ``osd blocklist ls`` needs only ``r``), and read/write/call classes in the pool (all namespaces)."""
        return ["mon", 'allow r, allow command "osd blocklist"', "osd", f"allow rwx pool={self.pool}"]

    def _wait(self, what: str, deadline: float, names: Iterable[str], probe: Callable[[], bool]) -> None:
        """Call ``probe()`` until it returns True; raise with the daemon log tails at the deadline."""
        names = list(names)
        last = ""
        while True:
            self._check_alive(names)
            try:
                if probe():
                    return
            except CephClusterError as e:
                last = str(e)
            if time.monotonic() >= deadline:
                tails = "\n".join(
                    f"--- {self.daemon_log(n)} (tail) ---\n{_tail(self.daemon_log(n), 25)}" for n in names
                )
                raise CephClusterError(f"timed out waiting for {what}; last error: {last}\n{tails}")
            time.sleep(0.25)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every recorded daemon by PID: SIGTERM (OSDs first, then the mon), SIGKILL after ``timeout``.

        Only a process whose command line names this cluster's ceph.conf is signalled. Idempotent.
        """
        recorded = self._recorded()
        if not recorded:
            return
        osds = {n: p for n, p in recorded.items() if not n.startswith("mon.")}
        mons = {n: p for n, p in recorded.items() if n.startswith("mon.")}
        for group in (osds, mons):
            self._terminate(group, timeout)
        for name in recorded:
            with contextlib.suppress(OSError):
                (self.pid_dir / name).unlink()
        self._procs.clear()
        self._say("stopped")

    def _terminate(self, group: dict[str, int], timeout: float) -> None:
        for name, pid in group.items():
            self._reap(name, pid)
            if self._is_ours(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                    os.kill(pid, signal.SIGCONT)  # a SIGSTOPped daemon acts on TERM only once continued
        for sig in (signal.SIGKILL, None):
            end = time.monotonic() + timeout
            while True:
                alive = {}
                for name, pid in group.items():
                    self._reap(name, pid)
                    if self._is_ours(pid):
                        alive[name] = pid
                if not alive or time.monotonic() >= end:
                    break
                time.sleep(0.05)
            if not alive:
                return
            if sig is None:
                raise CephClusterError(f"could not stop {alive}")
            for name, pid in alive.items():
                self._say(f"{name} pid {pid} ignored SIGTERM: SIGKILL")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            timeout = 10.0

    def wipe(self) -> None:
        """Stop the cluster and delete ``directory``."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> CephCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- OSD failures ------------------------------------------------------------------------
    def kill_osd(self, osd_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to ``osd.<osd_id>`` (by its recorded PID). For SIGKILL/SIGTERM/SIGINT, wait until it
        has exited; SIGSTOP/SIGCONT return at once (a stopped OSD is marked down after the heartbeat grace)."""
        name = f"osd.{osd_id}"
        pid = self._recorded().get(name)
        if pid is None or not self._is_ours(pid):
            raise CephClusterError(f"{name} is not running")
        os.kill(pid, sig)
        self._say(f"sent {signal.Signals(sig).name} to {name} pid {pid}")
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            if sig != signal.SIGKILL:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            end = time.monotonic() + 30
            while time.monotonic() < end:
                self._reap(name, pid)
                if not self._is_ours(pid):
                    self._procs.pop(name, None)  # its exit is no startup failure
                    return
                time.sleep(0.02)
            raise CephClusterError(f"{name} pid {pid} still runs 30 s after {signal.Signals(sig).name}")

    def start_osd(self, osd_id: int) -> int:
        """Restart the existing ``osd.<osd_id>`` (same data); record and return its new PID. Does not wait
        for it to be up: see :meth:`wait_osd_up`."""
        name = f"osd.{osd_id}"
        if not (self.directory / "osd" / f"ceph-{osd_id}").is_dir():
            raise CephClusterError(f"there is no {name} in {self.directory}")
        pid = self._recorded().get(name)
        if pid is not None and self._is_ours(pid):
            raise CephClusterError(f"{name} is still running (pid {pid})")
        return self._spawn(name, ["ceph-osd", "-c", str(self.conf_path), "-i", str(osd_id), "-f"]).pid

    def start_mon(self) -> int:
        """Restart the existing monitor ``mon.a`` (same data); record and return its new PID. Does not wait
        for it to answer.

        Raises:
            CephClusterError: there is no monitor in ``directory``, or it still runs.
        """
        if not (self.directory / "mon" / "ceph-a").is_dir():
            raise CephClusterError(f"there is no mon.a in {self.directory}")
        pid = self._recorded().get("mon.a")
        if pid is not None and self._is_ours(pid):
            raise CephClusterError(f"mon.a is still running (pid {pid})")
        return self._spawn("mon.a", ["ceph-mon", "-c", str(self.conf_path), "-i", "a", "-f"]).pid

    def revive(self, timeout: float = 120.0) -> list[str]:
        """Undo OSD failures: SIGCONT stopped OSDs, restart dead ones, then wait until all are up and every PG
        is active+clean. Returns the names of the OSDs it continued or restarted (nothing to do: no waiting)."""
        running = self.pids()
        touched: list[str] = []
        for i in range(self.osds):
            name = f"osd.{i}"
            pid = running.get(name)
            if pid is None:
                self.start_osd(i)
                touched.append(name)
            elif _proc_state(pid) in ("T", "t"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                touched.append(name)
        if touched:
            t0 = time.monotonic()
            for name in touched:
                self.wait_osd_up(int(name.split(".")[1]), timeout=max(1.0, t0 + timeout - time.monotonic()))
            self.wait_clean(timeout=max(1.0, t0 + timeout - time.monotonic()))
            self._say(f"revived {', '.join(touched)} in {time.monotonic() - t0:.1f}s")
        return touched

    def osd_states(self) -> dict[int, tuple[bool, bool]]:
        """``{osd id: (up, in)}`` from the current osdmap."""
        dump = self.ceph_json("osd", "dump", timeout=10)
        assert isinstance(dump, dict)
        return {int(o["osd"]): (bool(o["up"]), bool(o["in"])) for o in dump["osds"]}

    def wait_osd_up(self, osd_id: int, up: bool = True, timeout: float = 60.0) -> float:
        """Wait until the osdmap shows ``osd.<osd_id>`` up (or down, ``up=False``); return the seconds waited.

        Up means up as the running process: its address nonce must be the recorded PID (Ceph daemons use
        their PID as nonce), else an OSD restarted right after a kill would count as up while the osdmap
        still shows its previous, dead instance.
        """
        t0 = time.monotonic()
        name = f"osd.{osd_id}"

        def probe() -> bool:
            dump = self.ceph_json("osd", "dump", timeout=10)
            assert isinstance(dump, dict)
            entry = next((o for o in dump["osds"] if int(o["osd"]) == osd_id), None)
            if entry is None or bool(entry["up"]) != up:
                return False
            if not up:
                return True
            pid = self.pids().get(name)
            nonces = {int(a.get("nonce", -1)) for a in entry.get("public_addrs", {}).get("addrvec", [])}
            return pid is None or pid in nonces

        self._wait(f"{name} {'up' if up else 'down'}", t0 + timeout, [name] if up else [], probe)
        return time.monotonic() - t0

    def wait_osds_up(self, n: int | None = None, timeout: float = 60.0) -> float:
        """Wait until at least ``n`` (default: all) OSDs are up; return the seconds waited."""
        want = self.osds if n is None else n
        t0 = time.monotonic()

        def probe() -> bool:
            stat = self.ceph_json("osd", "stat", timeout=10)
            assert isinstance(stat, dict)
            return int(stat["num_up_osds"]) >= want

        names = [f"osd.{i}" for i in range(self.osds) if f"osd.{i}" in self._procs]
        self._wait(f"{want} OSDs up", t0 + timeout, names, probe)
        return time.monotonic() - t0

    def pg_states(self, timeout: float = 10.0) -> dict[str, str]:
        """``{pgid: state}`` of every PG of every pool (``"active+clean"``...; ``"unknown"`` when its primary
        did not answer within ``timeout``).

        Without a mgr the monitors know no PG states (``ceph pg dump``/``pg stat``/``pg ls`` wait for a mgr
        forever), so each PG is asked on its primary OSD with ``ceph pg <pgid> query``, several at a time.
        """
        pools = self.ceph_json("osd", "pool", "ls", "detail", timeout=timeout)
        assert isinstance(pools, list)
        pgids = [f"{p['pool_id']}.{seed:x}" for p in pools for seed in range(int(p["pg_num"]))]
        states: dict[str, str] = {}
        conn = str(max(1, int(timeout)))
        base = ["ceph", "-c", str(self.conf_path), "-n", "client.admin", "--connect-timeout", conn]
        for start in range(0, len(pgids), 16):
            batch = pgids[start : start + 16]
            procs = {
                pgid: subprocess.Popen(
                    [*self._where("tools"), *base, "pg", pgid, "query", "-f", "json"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=self._env(),
                )
                for pgid in batch
            }
            end = time.monotonic() + timeout
            for pgid, proc in procs.items():
                states[pgid] = "unknown"
                try:
                    out, _ = proc.communicate(timeout=max(0.1, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
                    continue
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    states[pgid] = str(json.loads(out)["state"])
        return states

    def wait_clean(self, timeout: float = 120.0) -> float:
        """Wait until every PG is ``active+clean`` (see :meth:`pg_states`); return the seconds waited."""
        t0 = time.monotonic()
        last: dict[str, str] = {}

        def probe() -> bool:
            nonlocal last
            last = self.pg_states(timeout=min(10.0, max(1.0, t0 + timeout - time.monotonic())))
            return all({"active", "clean"} <= set(state.split("+")) for state in last.values())

        try:
            self._wait("all PGs active+clean", t0 + timeout, [], probe)
        except CephClusterError as e:
            bad = {pg: st for pg, st in last.items() if st != "active+clean"}
            raise CephClusterError(f"PGs not active+clean after {timeout}s: {bad}\n{e}") from None
        return time.monotonic() - t0

    def status(self) -> dict[str, int]:
        """``{"osds": n, "up": n, "in": n}`` from ``ceph osd stat``."""
        stat = self.ceph_json("osd", "stat", timeout=10)
        assert isinstance(stat, dict)
        return {"osds": int(stat["num_osds"]), "up": int(stat["num_up_osds"]), "in": int(stat["num_in_osds"])}

    @classmethod
    def existing(cls, directory: str | os.PathLike[str], *, verbose: bool = False) -> CephCluster:
        """A handle on a cluster that an earlier :meth:`start` made in ``directory`` (its settings are read
        from ``directory/cluster.json``)."""
        d = Path(directory).absolute()
        try:
            saved = json.loads((d / "cluster.json").read_text())
        except (OSError, ValueError) as e:
            raise CephClusterError(f"no cluster in {d}: {e}") from None
        placement = saved.get("placement")
        if isinstance(placement, dict):
            return cls(
                d,
                osds=int(saved["osds"]),
                pool=str(saved["pool"]),
                pool_size=int(saved["pool_size"]),
                min_size=int(saved["min_size"]),
                cephx=bool(saved["cephx"]),
                verbose=verbose,
                mon_at=Placement.from_json(placement["mon"]),
                osds_at=[Placement.from_json(o) for o in placement["osds"]],
                tools_at=Placement.from_json(placement["tools"]),
                public_network=str(placement["public_network"]),
            )
        return cls(
            d,
            osds=int(saved["osds"]),
            pool=str(saved["pool"]),
            pool_size=int(saved["pool_size"]),
            min_size=int(saved["min_size"]),
            cephx=bool(saved["cephx"]),
            verbose=verbose,
        )


# --- command line --------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("start", help="start a fresh cluster in DIR; print ceph.conf, then 'ID KEYRING' of the client")
    p.add_argument("dir")
    p.add_argument("--osds", type=int, default=3)
    p.add_argument("--pool", default="segments")
    p.add_argument("--pool-size", type=int, default=None, help="default: min(3, osds)")
    p.add_argument("--min-size", type=int, default=None, help="default: min(2, pool size)")
    p.add_argument("--no-cephx", action="store_true", help="auth none")
    p.add_argument("--timeout", type=float, default=300.0)
    p = sub.add_parser("stop", help="stop the cluster in DIR (by recorded PIDs)")
    p.add_argument("dir")
    p.add_argument("--wipe", action="store_true", help="then delete DIR")
    p = sub.add_parser("kill-osd", help="signal one OSD (default SIGKILL)")
    p.add_argument("dir")
    p.add_argument("id", type=int)
    p.add_argument("--signal", default="KILL", help="KILL, TERM, STOP, CONT...")
    p = sub.add_parser("start-osd", help="restart one OSD and wait until it is up")
    p.add_argument("dir")
    p.add_argument("id", type=int)
    p.add_argument("--timeout", type=float, default=60.0)
    p = sub.add_parser("status", help="OSDs up/in, daemons and their RSS")
    p.add_argument("dir")
    args = parser.parse_args(argv)

    try:
        if args.cmd == "start":
            size = args.pool_size if args.pool_size is not None else min(3, args.osds)
            cluster = CephCluster(
                args.dir,
                osds=args.osds,
                pool=args.pool,
                pool_size=size,
                min_size=args.min_size if args.min_size is not None else min(2, size),
                cephx=not args.no_cephx,
                verbose=True,
            )
            cluster.start(timeout=args.timeout)
            print(cluster.conf_path)
            print(cluster.client_id, cluster.client_keyring)
            return 0
        if args.cmd == "stop":
            d = Path(args.dir)
            if not (d / "cluster.json").exists():
                print(f"no cluster in {d}", file=sys.stderr)
                if args.wipe:
                    shutil.rmtree(d, ignore_errors=True)
                return 0
            cluster = CephCluster.existing(d, verbose=True)
            cluster.wipe() if args.wipe else cluster.stop()
            return 0
        cluster = CephCluster.existing(args.dir, verbose=True)
        if args.cmd == "kill-osd":
            name = args.signal.upper()
            sig = signal.Signals[name if name.startswith("SIG") else "SIG" + name]
            cluster.kill_osd(args.id, sig)
        elif args.cmd == "start-osd":
            cluster.start_osd(args.id)
            took = cluster.wait_osd_up(args.id, timeout=args.timeout)
            print(f"osd.{args.id} up after {took:.1f}s", file=sys.stderr)
        elif args.cmd == "status":
            st = cluster.status()
            print(f"osds {st['osds']} up {st['up']} in {st['in']}")
            counts: dict[str, int] = {}
            for state in cluster.pg_states(timeout=5).values():
                counts[state] = counts.get(state, 0) + 1
            print("pgs " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
            rss = cluster.rss()
            for name, pid in cluster.pids().items():
                print(f"{name} pid {pid} rss {rss.get(name, 0) / 2**20:.0f} MiB")
        return 0
    except (CephClusterError, KeyError, ValueError) as e:
        print(f"ceph_cluster: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
