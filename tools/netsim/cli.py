"""The command line of ``python -m tools.cluster`` (see :mod:`tools.cluster` for the verbs)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["run_cli"]


def _groups(raw: str) -> list[str]:
    return [h for h in raw.split(",") if h]


class _Sub:
    """``add_parser`` with the common options (``--id`` after the verb too)."""

    def __init__(self, sub: Any, common: argparse.ArgumentParser) -> None:
        self.sub = sub
        self.common = common

    def add_parser(self, name: str, **kw: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self.sub.add_parser(name, parents=[self.common], **kw)
        return parser


def _parser() -> argparse.ArgumentParser:
    from tools.cluster import DEFAULT_CLIENTS, DEFAULT_SUBNET

    p = argparse.ArgumentParser(
        prog="python -m tools.cluster",
        description="A simulated cluster (ZooKeeper x3, Ceph, Spark) on network namespaces, with faults.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--id", default=argparse.SUPPRESS, help="cluster id (default $DLC_ID, else dl)")
    p.add_argument("--id", default=argparse.SUPPRESS, help="cluster id (default $DLC_ID, else dl)")
    sub = _Sub(p.add_subparsers(dest="cmd", required=True), common)
    s = sub.add_parser("up", help="create the hosts, start everything, bind a namespace, print how to use it")
    s.add_argument("--subnet", default=DEFAULT_SUBNET)
    s.add_argument("--dir", default=None, help="cluster directory (default /tmp/dlc-<id>)")
    s.add_argument("--clients", type=int, default=DEFAULT_CLIENTS)
    s.add_argument("--proxies", type=int, default=0, help="hosts proxy1..N for `dlog proxy` (default 0)")
    s.add_argument("--no-spark", action="store_true")
    s.add_argument("--python", default=sys.executable, help="the venv's interpreter (default: this one)")
    s.add_argument("--namespace", default="/dl", help="DistributedLog namespace to bind (default /dl)")
    s.add_argument("--no-bind", action="store_true", help="bind no namespace")
    s.add_argument("--timeout", type=float, default=300.0)
    s = sub.add_parser("down", help="stop everything and remove it")
    s.add_argument("--keep-dir", action="store_true")
    s = sub.add_parser("status", help="hosts, components, ZooKeeper modes, OSDs, faults")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser(
        "cleanup",
        help="remove what clusters left (--id's; without: all dlc-* ones but those of a running test session)",
    )
    s.add_argument("--keep-dir", action="store_true")
    s = sub.add_parser("exec", help="run a command inside a host: exec HOST -- CMD...")
    s.add_argument("host")
    s.add_argument("argv", nargs=argparse.REMAINDER)
    s = sub.add_parser("bind", help="bind a DistributedLog namespace to the pool; print its URI")
    s.add_argument("path")
    s.add_argument("--host", default=None)
    s = sub.add_parser("partition", help="cut groups (comma-separated hosts) from each other, both ways")
    s.add_argument("groups", nargs="+", type=_groups)
    s.add_argument("--reject", action="store_true", help="reject (fail fast) instead of dropping")
    s = sub.add_parser("isolate", help="cut one host from all others")
    s.add_argument("host")
    s.add_argument("--reject", action="store_true")
    s = sub.add_parser("one-way", help="drop what SRC hosts send to DST hosts")
    s.add_argument("src", type=_groups)
    s.add_argument("dst", type=_groups)
    for verb, what in (("loss", "drop a random fraction of packets"), ("delay", "hold packets ms ± jitter")):
        s = sub.add_parser(verb, help=f"{what} between HOSTS and --peers (default: all others)")
        s.add_argument("hosts", type=_groups)
        s.add_argument("--peers", type=_groups, default=None)
        s.add_argument("--one-way", action="store_true", help="only what HOSTS receive (loss) / send (delay)")
        if verb == "loss":
            s.add_argument("--p", type=float, default=0.3)
        else:
            s.add_argument("--ms", type=float, default=50.0)
            s.add_argument("--jitter", type=float, default=20.0)
    s = sub.add_parser("kill", help="signal a component (default SIGKILL)")
    s.add_argument("name")
    s.add_argument("--signal", default="KILL")
    for verb in ("pause", "resume", "start", "stop"):
        sub.add_parser(verb, help=f"{verb} a component").add_argument("name")
    s = sub.add_parser("heal", help="undo all faults (or one: --fault ID)")
    s.add_argument("--fault", type=int, default=None)
    s.add_argument("--no-restart", action="store_true", help="do not restart killed components")
    sub.add_parser("faults", help="list every fault so far")
    return p


def _print_status(st: dict[str, Any]) -> None:
    print(f"cluster {st['id']} in {st['dir']}")
    print("hosts:")
    for name, addr in st["hosts"].items():
        on = [c for c, v in st["components"].items() if v["host"] == name]
        print(f"  {name:<9} {addr:<15} {' '.join(on)}")
    print("components:")
    for name, v in st["components"].items():
        extra = f" zk={v['zk_mode']}" if "zk_mode" in v else ""
        pid = v["pid"] if v["pid"] is not None else "-"
        print(
            f"  {name:<14} {v['role']:<13} {v['host']:<8} pid {pid!s:<8} {v['state']:<8} {v['rss_mib']:>5} MiB{extra}"
        )
    print(f"ceph osds: {st['ceph_osds']}")
    if st["spark"]:
        print(f"spark: {st['spark']}")
    print("active faults:" + ("" if st["faults"] else " none"))
    for f in st["faults"]:
        print(f"  {f}")


def _up(args: argparse.Namespace) -> int:
    from tools.cluster import Cluster

    c = Cluster(
        args.id,
        args.subnet,
        args.dir,
        clients=args.clients,
        proxies=args.proxies,
        spark=not args.no_spark,
        python=args.python,
        verbose=True,
    )
    c.up(timeout=args.timeout)
    c.state.update(lambda s: s.update(owner=None))  # it outlives this command: `cleanup` may sweep it
    print(f"cluster {c.cluster_id} up in {c.timings['total']:.1f}s ({c.timings}); files in {c.directory}")
    for name, addr in c.hosts.items():
        print(f"  {name:<9} {addr:<15} {' '.join(x.name for x in c.on_host(name))}")
    me = f"{shlex.quote(sys.executable)} -m tools.cluster --id {c.cluster_id}"
    client = c.client_hosts[0]
    if not args.no_bind:
        uri = c.bind_namespace(args.namespace)
        seg = c.segments_uri(c.rados_namespace_for(args.namespace))
        print(f"namespace URI (use it from a client host; bound to {seg}):\n  {uri}")
    else:
        uri = c.namespace_uri(args.namespace)
        print(f"namespace URI (not bound): {uri}\n  bind: {me} bind {args.namespace}")
    print(f"run a command on a client host ({', '.join(c.client_hosts)}):")
    print(f"  {me} exec {client} -- {shlex.quote(c.dlog)} --uri '{uri}' list")
    if c.spark_master is not None:
        conf = " ".join(f"--conf {k}={v}" for k, v in c.spark_driver_conf(client).items() if k != "spark.master")
        print(f"spark master {c.spark_master_url} (a driver on {client}: --master {c.spark_master_url} {conf})")
    print(f"faults: {me} partition zk1 zk2,zk3 | isolate ceph2 | delay {client} --ms 50 | heal; status; down")
    return 0


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the verb; return the exit status (1 with one line on stderr on errors)."""
    from tools.cluster import DEFAULT_ID, Cluster, ClusterError, cleanup
    from tools.netsim.faults import FaultError
    from tools.netsim.hosts import NetError
    from tools.netsim.procs import ComponentError

    args = _parser().parse_args(argv)
    chosen = getattr(args, "id", None) or os.environ.get("DLC_ID") or None
    args.id = chosen or DEFAULT_ID
    try:
        if args.cmd == "up":
            return _up(args)
        if args.cmd == "cleanup":  # no id: every cluster
            done = cleanup(chosen, keep_dir=args.keep_dir)
            print(f"cleaned: {', '.join(done) or 'nothing to clean'}")
            return 0
        c = Cluster.existing(args.id, verbose=args.cmd in ("down", "heal", "start"))
        if args.cmd == "down":
            c.down(keep_dir=args.keep_dir)
        elif args.cmd == "status":
            st = c.status()
            print(json.dumps(st, indent=1)) if args.json else _print_status(st)
        elif args.cmd == "exec":
            cmd = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            if not cmd:
                raise ClusterError("exec HOST -- COMMAND...: no command")
            prefix = c.network.exec_prefix(args.host)
            sys.stdout.flush()
            os.execvp(prefix[0], [*prefix, *cmd])
        elif args.cmd == "bind":
            print(c.bind_namespace(args.path, host=args.host))
        elif args.cmd == "partition":
            print(c.faults.partition(args.groups, "reject" if args.reject else "drop").describe())
        elif args.cmd == "isolate":
            print(c.faults.isolate(args.host, "reject" if args.reject else "drop").describe())
        elif args.cmd == "one-way":
            print(c.faults.one_way(args.src, args.dst).describe())
        elif args.cmd == "loss":
            print(c.faults.loss(args.hosts, args.peers, args.p, both_ways=not args.one_way).describe())
        elif args.cmd == "delay":
            print(c.faults.delay(args.hosts, args.peers, args.ms, args.jitter, both_ways=not args.one_way).describe())
        elif args.cmd == "kill":
            name = args.signal.upper()
            sig = signal.Signals[name if name.startswith("SIG") else "SIG" + name]
            print(f"{args.name}: sent {sig.name} to pid {c.kill(args.name, sig)}")
        elif args.cmd in ("pause", "resume", "start", "stop"):
            comp = c.component(args.name)
            getattr(comp, args.cmd)()
            print(f"{args.name}: {comp.state()} (pid {comp.pid()})")
        elif args.cmd == "heal":
            ended = [c.end_fault(args.fault)] if args.fault is not None else c.heal(restart=not args.no_restart)
            for f in ended:
                print(f"healed {f.describe()}")
        elif args.cmd == "faults":
            for f in c.faults.records():
                print(f.describe())
        return 0
    except (ClusterError, NetError, FaultError, ComponentError, KeyError, ValueError) as e:
        print(f"cluster: {e}", file=sys.stderr)
        return 1
