"""The files that describe a cluster, and its ports: ``ceph.conf`` (:meth:`ClusterConf._write_conf`),
``cluster.json`` (the settings, read back by :meth:`~tools.ceph.cluster.CephCluster.existing`), the cephx
keyrings (``mon.``, ``client.admin``, each ``osd.N``, the restricted client user), and the ports picked on
loopback (:func:`choose_ports`).

Settings: one host, so ``osd_crush_chooseleaf_type = 0``; heartbeat
interval 1 s / grace 4 s, ``mon_osd_min_down_reporters = 1``; in ``[client]`` ``objecter_timeout = 2`` and
``objecter_tick_interval = 1`` (a client resends an unanswered op against a new osdmap after about 2 s,
not 10-15 s, when an OSD rejoins or hangs); small OSD memory (cache 64 MiB, no autotune, 1 op shard);
``paxos_propose_interval = 0.1`` (see :mod:`tools.ceph.cluster` for why); ``mon_mgr_mkfs_grace`` a year, so
that a mgr-less mon raises no MGR_DOWN.

Traps hit (and what this module does about them):

* A ``keyring`` in ``[global]`` also overrides the daemons' own default (``$mon_data/keyring``,
  ``$osd_data/keyring``): the mon and OSDs then find no key. ``[mon]``/``[osd]`` set it back.
* ``bluestore_block_path`` inside ``osd_data`` makes BlueStore link ``block`` to itself (ELOOP, then
  "mkfs failed, (17) File exists", only in the OSD log): the block file is ``osd/ceph-<id>.block``.
* ``ceph auth get-or-create -o FILE`` writes the key only, mode 0644: the keyring is written by
  ``ceph auth get`` (key and caps) and made 0600.
"""

from __future__ import annotations

import json
import random
import socket
import uuid
from pathlib import Path

from tools.ceph.base import CephClusterError, ClusterBase

__all__ = [
    "OSD_BLOCK_BYTES",
    "PG_NUM",
    "PLACED_BIND_PORTS",
    "PLACED_MON_PORTS",
    "PORTS_PER_OSD",
    "PORT_FLOOR",
    "PORT_WINDOW",
    "ClusterConf",
    "choose_ports",
]

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
#: Ports of a placed monitor (msgr v2, v1: Ceph's defaults) and the OSD port window (Ceph's default).
PLACED_MON_PORTS = (3300, 6789)
PLACED_BIND_PORTS = (6800, 7300)


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


def choose_ports(osds: int, rng: random.Random) -> tuple[int, int, int]:
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


class ClusterConf(ClusterBase):
    """Writes ``ceph.conf``, ``cluster.json`` and the keyrings of a cluster."""

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

    def _write_settings(self, mon_ports: tuple[int, int], bind_min: int, bind_max: int) -> None:
        """``cluster.json``: the settings, the ports and the placement (for :meth:`CephCluster.existing`)."""
        (self.directory / "cluster.json").write_text(
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

    # --- keyrings (cephx) --------------------------------------------------------------------
    def _make_bootstrap_keyring(self) -> Path:
        """Make the keys of ``mon.`` and ``client.admin`` (its own keyring: :attr:`admin_keyring`); return the
        keyring that holds both, for the mon's initial auth database (``ceph-mon --mkfs --keyring``)."""
        boot = self.directory / "tmp" / "mon-bootstrap.keyring"
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
        return boot

    def _register_osd(self, i: int) -> str:
        """Register ``osd.<i>`` with a cephx key of its own and write that key into its data dir (made here);
        return the OSD's UUID (for ``ceph-osd --mkfs --osd-uuid``).

        ``ceph osd new UUID ID -i {"cephx_secret": KEY}`` creates the auth entity ``osd.ID`` with the osd
        profile caps (``mon 'allow profile osd' mgr 'allow profile osd' osd 'allow *'``).
        """
        t = 30.0
        osd_uuid = str(uuid.uuid4())
        secret = self._run(["ceph-authtool", "--gen-print-key"], timeout=t).strip()
        got = self.ceph("osd", "new", osd_uuid, str(i), input_text=json.dumps({"cephx_secret": secret})).strip()
        if got != str(i):
            raise CephClusterError(f"`ceph osd new {osd_uuid} {i}` gave id {got!r}")
        data = self.directory / "osd" / f"ceph-{i}"
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
        return osd_uuid

    def _make_client_user(self) -> None:
        """Make the restricted client user (caps: :meth:`client_caps`) and write its keyring (key and caps,
        mode 0600) to :attr:`client_keyring`."""
        self.ceph("auth", "get-or-create", self.client_name, *self.client_caps())
        self.ceph("auth", "get", self.client_name, "-o", str(self.client_keyring))  # key and caps
        self.client_keyring.chmod(0o600)

    def client_caps(self) -> list[str]:
        """The caps of the restricted client, as ``ceph auth`` arguments: read the maps, blocklist (add, rm;
        ``osd blocklist ls`` needs only ``r``), and read/write/call classes in the pool (all namespaces)."""
        return ["mon", 'allow r, allow command "osd blocklist"', "osd", f"allow rwx pool={self.pool}"]
