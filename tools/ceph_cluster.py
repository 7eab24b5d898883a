#!/usr/bin/env python3
"""A throw-away Ceph (RADOS) cluster on loopback, for the tests and for trying the RADOS segment store.

Module and command line (stdlib only, any Python >= 3.10; the Ceph tools it runs are Debian's)::

    python tools/ceph_cluster.py start DIR [--osds 3] [--pool segments] [--no-cephx]
        # stdout: DIR/ceph.conf, then "dlog DIR/ceph.client.dlog.keyring"; progress on stderr
    python tools/ceph_cluster.py status DIR          # OSDs up/in, PG states, daemons and their RSS
    python tools/ceph_cluster.py kill-osd DIR 0 [--signal KILL|TERM|STOP|CONT]
    python tools/ceph_cluster.py start-osd DIR 0     # restart it, wait until it is up
    python tools/ceph_cluster.py radosgw DIR [--prefix cold]
        # an S3 endpoint on loopback (cold storage on one machine); stdout: an s3:// cold store URI, then its
        # coldStoreAccessKey=... and coldStoreSecretKey=... (for `dlog bind --cold` / a conf file)
    python tools/ceph_cluster.py stop DIR [--wipe]
    # also: python -m tools.ceph_cluster ...

    with CephCluster(Path("/tmp/c")) as c:           # or c.start() ... c.stop(); c.wipe()
        r = rados.Rados(conffile=str(c.conf_path), name=c.client_name,
                        conf={"keyring": str(c.client_keyring), "client_mount_timeout": "10"})

This module is the public front: :class:`CephCluster`, :class:`CephClusterError`, :class:`Placement`,
:data:`INSTALL_HINT`, :func:`missing_programs` and the command line :func:`main`. The code is in the package
:mod:`tools.ceph`, by concern: ``base.py`` (errors, placement, paths, running the ``ceph``/``rados`` tools),
``conf.py`` (``ceph.conf``, ``cluster.json``, keyrings, ports; the settings and why), ``daemons.py`` (mon/OSD
processes, PIDs, starting, stopping, killing), ``health.py`` (OSDs up, PGs clean, revive), ``cluster.py``
(:class:`CephCluster`: start, wipe, existing), ``cli.py`` (the command line).

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

Measured on a 2-core VM (Debian 12):

* start: 4.5-4.9 s to ready with 3 OSDs (4.0 s with 1), stop 0.2 s.
* RSS (VmRSS) after start: mon 35-43 MiB, each OSD 50-53 MiB: about 0.19 GB in all; after 100 MiB of
  appends (x3 replicas) the OSDs were at 77-79 MiB. Disk: block files are sparse (about 1 MB each
  fresh), 319 MB of ``osd/`` after those appends.
* OSD SIGKILL: marked down within 0.05-0.5 s (peers see "connection refused"); writes go on with 2 of 3
  replicas. ``start_osd``: up after 1.6-2.0 s, all PGs active+clean 0.5-1.3 s later. SIGSTOP: marked down
  after 5.3 s (heartbeat grace 4 s), up again 1.3 s after SIGCONT.

The settings of ``ceph.conf`` (one host, fast heartbeats, client resends after 2 s, small OSD memory) and
why: :mod:`tools.ceph.conf`. Traps hit while building the harness are noted where they are dealt with
(:mod:`tools.ceph.base`: the tools' environment; :mod:`tools.ceph.conf`: keyrings, BlueStore's block path;
:mod:`tools.ceph.daemons`: SIGSTOPped daemons, zombies; :mod:`tools.ceph.health`: no mgr, so no PG stats; a
restarted OSD that looks up at once; :mod:`tools.ceph.cluster`: Paxos proposal delay, admin socket path
length). For users of the cluster:

* ``Rados.connect(timeout=...)`` ignores its argument: against a monitor port with nothing behind it,
  ``connect(timeout=3)`` raised ``rados.TimedOut`` (errno 110) after 300 s (``client_mount_timeout``).
  Put ``client_mount_timeout``/``rados_mon_op_timeout`` in ``conf={...}``: then 3.0 s for 3.
* ``osd blocklist ls -f json`` prints two JSON arrays back to back (``[...][]``: the address blocklist,
  then the range blocklist); values in ceph.conf ``[osd]`` override ``ceph config set osd ...`` (use
  ``ceph tell osd.* config set`` to change them at runtime).
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as `python tools/ceph_cluster.py`: make the package `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# the documented constants and the command line stay importable from here (``X as X``: a re-export)
from tools.ceph.base import INSTALL_HINT, CephClusterError, Placement, missing_programs
from tools.ceph.base import REQUIRED_PROGRAMS as REQUIRED_PROGRAMS
from tools.ceph.cli import main as main
from tools.ceph.cluster import UNIX_PATH_MAX as UNIX_PATH_MAX
from tools.ceph.cluster import CephCluster
from tools.ceph.conf import OSD_BLOCK_BYTES as OSD_BLOCK_BYTES
from tools.ceph.conf import PG_NUM as PG_NUM
from tools.ceph.conf import PLACED_BIND_PORTS as PLACED_BIND_PORTS
from tools.ceph.conf import PLACED_MON_PORTS as PLACED_MON_PORTS
from tools.ceph.conf import PORT_FLOOR as PORT_FLOOR
from tools.ceph.conf import PORT_WINDOW as PORT_WINDOW
from tools.ceph.conf import PORTS_PER_OSD as PORTS_PER_OSD

__all__ = [
    "INSTALL_HINT",
    "CephCluster",
    "CephClusterError",
    "Placement",
    "missing_programs",
]

if __name__ == "__main__":
    sys.exit(main())
