"""The command line of the Ceph harness (``python tools/ceph_cluster.py start|status|kill-osd|start-osd|radosgw|stop``;
usage: :mod:`tools.ceph_cluster`): each command on a :class:`~tools.ceph.cluster.CephCluster` in DIR, progress
on stderr, exit status 1 with a one-line error when a step fails.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.ceph.base import CephClusterError
from tools.ceph.cluster import CephCluster

__all__ = ["DESCRIPTION", "main"]

#: The ``--help`` description (the first line of :mod:`tools.ceph_cluster`'s docstring).
DESCRIPTION = "A throw-away Ceph (RADOS) cluster on loopback, for the tests and for trying the RADOS segment store."


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)
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
    p = sub.add_parser(
        "radosgw", help="start an S3 endpoint (radosgw) on the cluster in DIR; print a cold store URI and its keys"
    )
    p.add_argument("dir")
    p.add_argument("--prefix", default="cold", help="the cold store's prefix in the bucket")
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
        elif args.cmd == "radosgw":
            gw = cluster.start_radosgw()
            print(gw.cold_uri(args.prefix))
            print(f"coldStoreAccessKey={gw.access_key}")
            print(f"coldStoreSecretKey={gw.secret_key}")
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
