"""The cluster as a whole: :class:`CephCluster` (its daemons: :mod:`tools.ceph.daemons`, waits:
:mod:`tools.ceph.health`, files and keys: :mod:`tools.ceph.conf`, tools: :mod:`tools.ceph.base`, its S3 gateway
for the cold storage tests: :mod:`tools.ceph.rgw`), and what
this module adds: starting a fresh cluster (:meth:`CephCluster.start`), wiping it, and a handle on an existing
one (:meth:`CephCluster.existing`).

The start, in order: ports, ``ceph.conf`` and ``cluster.json``; the keys of ``mon.`` and ``client.admin``;
the monitor (``--mkfs``, started, asked ``mon stat``); each OSD registered with its own key and made
(``--mkfs``, all in parallel) while the pool and the client user are created; the OSDs started and waited
for; a test write as the client user; every PG active+clean.

Traps hit (and what this module does about them):

* Each mon command that changes the osdmap (``osd pool create``, ``osd pool set``...) waits for the next
  Paxos proposal, ``paxos_propose_interval``, 1 s by default (a start then takes about 11 s): it is
  0.1 s here (which also marks OSDs up/down sooner); size/min_size come from
  ``osd_pool_default_size/min_size`` instead of two ``pool set``; the pool is created and the OSDs made
  (``--mkfs``, in parallel) while none is up yet.
* Admin sockets are unix sockets (at most 107 bytes of path): a too long DIR is refused up front.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from tools.ceph.base import INSTALL_HINT, CephClusterError, Placement, missing_programs, tail
from tools.ceph.conf import PG_NUM, PLACED_BIND_PORTS, PLACED_MON_PORTS, ClusterConf, choose_ports
from tools.ceph.health import ClusterHealth
from tools.ceph.rgw import ClusterGateway

__all__ = ["UNIX_PATH_MAX", "CephCluster"]

#: Longest path a unix socket (the daemons' admin sockets) can have on Linux.
UNIX_PATH_MAX = 107


class CephCluster(ClusterGateway, ClusterHealth, ClusterConf):
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

    def _bootstrap(self, deadline: float) -> None:
        """The start after :meth:`_clear`, step by step (see the module docstring), by ``deadline``."""
        d = self.directory
        rng = random.Random()
        if self.placed:  # each host has ports of its own
            mon_ports, (bind_min, bind_max) = PLACED_MON_PORTS, PLACED_BIND_PORTS
        else:
            mon_port, bind_min, bind_max = choose_ports(self.osds, rng)
            mon_ports = (mon_port, mon_port + 1)
        fsid = str(uuid.uuid4())
        self._write_conf(fsid, mon_ports, bind_min, bind_max)
        self._write_settings(mon_ports, bind_min, bind_max)
        auth = "cephx" if self.cephx else "none"
        self._say(f"mon {self._mon_addrvec(mon_ports)}; OSD ports {bind_min}-{bind_max}; auth {auth}")

        # keys: mon. and client.admin go into the mon's initial auth database at mkfs
        boot = self._make_bootstrap_keyring()

        # monitor
        self._make_mon(fsid, self._mon_addrvec(mon_ports), boot)
        boot.unlink()
        conf = str(self.conf_path)
        self._spawn("mon.a", ["ceph-mon", "-c", conf, "-i", "a", "-f"])
        self._wait("the monitor to answer", deadline, ["mon.a"], lambda: bool(self.ceph("mon", "stat", timeout=5)))

        # OSDs: register each with its own cephx key, write the key into its data dir, mkfs in parallel
        mkfs: dict[int, subprocess.Popen[bytes]] = {}
        try:
            for i in range(self.osds):
                mkfs[i] = self._mkfs_osd(i, self._register_osd(i))
            # while the OSDs are made: the pool (its PGs are created as soon as the OSDs boot) and the client
            self._create_pool_and_client()
            for i, proc in mkfs.items():
                rc = proc.wait(max(1.0, deadline - time.monotonic()))
                if rc != 0:
                    raise CephClusterError(
                        f"ceph-osd --mkfs of osd.{i} failed (status {rc})\n"
                        f"--- {self.log_dir / f'osd.{i}.mkfs.out'} ---\n{tail(self.log_dir / f'osd.{i}.mkfs.out')}\n"
                        f"--- {self.daemon_log(f'osd.{i}')} (tail) ---\n{tail(self.daemon_log(f'osd.{i}'))}"
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
        self._make_client_user()
        self._say(f"pool {self.pool} (size {self.pool_size}, min_size {self.min_size}) and {self.client_name} made")

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

    @classmethod
    def existing(cls, directory: str | os.PathLike[str], *, verbose: bool = False) -> CephCluster:
        """A handle on a cluster that an earlier :meth:`start` made in ``directory`` (its settings are read
        from ``directory/cluster.json``)."""
        d = Path(directory).absolute()
        try:
            saved = json.loads((d / "cluster.json").read_text())
        except (OSError, ValueError) as e:
            raise CephClusterError(f"no cluster in {d}: {e}") from None
        kw: dict[str, Any] = {
            "osds": int(saved["osds"]),
            "pool": str(saved["pool"]),
            "pool_size": int(saved["pool_size"]),
            "min_size": int(saved["min_size"]),
            "cephx": bool(saved["cephx"]),
            "verbose": verbose,
        }
        placement = saved.get("placement")
        if isinstance(placement, dict):  # a cluster placed on simulated hosts
            kw.update(
                mon_at=Placement.from_json(placement["mon"]),
                osds_at=[Placement.from_json(o) for o in placement["osds"]],
                tools_at=Placement.from_json(placement["tools"]),
                public_network=str(placement["public_network"]),
            )
        return cls(d, **kw)
