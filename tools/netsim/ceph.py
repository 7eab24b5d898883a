"""Ceph on simulated hosts: :class:`tools.ceph_cluster.CephCluster` with each daemon placed in a host.

The monitor runs on ``mon_host`` (``mon_host = [v2:<addr>:3300,v1:<addr>:6789]``), ``osd.i`` on
``osd_hosts[i]`` (OSD ports 6800-7300 of its own address), ``public_network`` is the cluster's subnet, and
the ``ceph``/``rados`` admin tools run on the monitor's host. cephx is on; the restricted client user
``client.dlog`` (caps: ``mon 'allow r, allow command "osd blocklist"' osd 'allow rwx pool=segments'``) has
its keyring next to ``ceph.conf`` in ``<cluster dir>/ceph``, which every host sees (the hosts share the
file system). Pool ``segments``: 8 PGs, size 3, min_size 2, replicated across OSDs (``osd_crush_chooseleaf_type
= 0``: the same as across hosts here, with one OSD per host and size 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tools.ceph_cluster import CephCluster, CephClusterError, Placement
from tools.netsim.hosts import Network
from tools.netsim.procs import Component, ComponentError, Spawner

__all__ = ["CephDaemon", "make_ceph", "segments_uri"]


def make_ceph(
    network: Network,
    directory: Path,
    mon_host: str,
    osd_hosts: Sequence[str],
    *,
    pool: str = "segments",
    die_with_parent: bool = False,
    verbose: bool = False,
) -> CephCluster:
    """The (not yet started) Ceph cluster of ``network``: mon on ``mon_host``, one OSD per ``osd_hosts``.

    Raises:
        KeyError: an unknown host.
        ValueError: fewer than 3 OSD hosts (the pool has size 3).
    """

    def at(host: str) -> Placement:
        return Placement(network.addr(host), tuple(network.exec_prefix(host)))

    return CephCluster(
        directory,
        osds=len(osd_hosts),
        pool=pool,
        pool_size=3,
        min_size=2,
        cephx=True,
        die_with_parent=die_with_parent,
        verbose=verbose,
        mon_at=at(mon_host),
        osds_at=[at(h) for h in osd_hosts],
        tools_at=at(mon_host),
        public_network=str(network.subnet),
    )


def segments_uri(ceph: CephCluster, namespace: str | None = None) -> str:
    """``rados://<pool>?conf=...&id=dlog&keyring=...[&namespace=...]``: the segment store URI for ``dlog bind``."""
    uri = f"rados://{ceph.pool}?conf={ceph.conf_path}&id={ceph.client_id}&keyring={ceph.client_keyring}"
    return uri + (f"&namespace={namespace}" if namespace else "")


class CephDaemon(Component):
    """``mon.a`` or ``osd.<i>`` of the cluster's Ceph (starts go through :class:`CephCluster`)."""

    def __init__(
        self,
        name: str,
        host: str,
        network: Network,
        ceph: CephCluster,
        spawner: Spawner,
        marker: str,
        on_fault: Callable[[str, Component, int | None], None] | None = None,
    ) -> None:
        super().__init__(name, host, network.host(host).netns, marker, on_fault)
        self.role = "ceph-mon" if name.startswith("mon.") else "ceph-osd"
        self.ceph = ceph
        self.spawner = spawner

    @property
    def osd_id(self) -> int | None:
        """The OSD id (None for the monitor)."""
        return int(self.name.split(".", 1)[1]) if self.role == "ceph-osd" else None

    @property
    def log_path(self) -> Path:
        """Ceph's own log of the daemon."""
        return self.ceph.daemon_log(self.name)

    def recorded_pid(self) -> int | None:
        """The PID in ``<ceph dir>/pids/<name>`` if that process runs."""
        return self.ceph.pids().get(self.name)

    def _start(self) -> int:
        osd = self.osd_id
        try:
            if osd is None:
                return self.spawner.call(self.ceph.start_mon)
            return self.spawner.call(lambda: self.ceph.start_osd(osd))
        except CephClusterError as e:
            raise ComponentError(f"cannot start {self.name}: {e}") from None

    def wait_ready(self, timeout: float = 60.0) -> float:
        """OSD: wait until the osdmap shows this process up; mon: until it answers ``mon stat``. Return the
        seconds waited.

        Raises:
            ComponentError: it did not get there in time.
        """
        t0 = time.monotonic()
        try:
            osd = self.osd_id
            if osd is not None:
                return self.ceph.wait_osd_up(osd, timeout=timeout)
            while True:
                try:
                    self.ceph.ceph("mon", "stat", timeout=5)
                    return time.monotonic() - t0
                except CephClusterError:
                    if self.pid() is None or time.monotonic() - t0 > timeout:
                        raise
                    time.sleep(0.25)
        except CephClusterError as e:
            raise ComponentError(f"{self.name} not ready: {e}") from None
