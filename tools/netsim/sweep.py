"""Removing what a simulated cluster left behind, also after its harness crashed.

A cluster is found by its registry entry ``/run/dlc/<id>.json`` (its directory, subnet and namespace prefix;
``/run`` lasts as long as the namespaces: until reboot) and by the names of its namespaces
(``dlc-<id>-*``). Its processes are stopped by recorded PID where its state file is readable (the cluster's
own :meth:`~tools.cluster.Cluster.down`), and in any case every process still inside one of its namespaces
gets SIGKILL (``ip netns pids``: membership of the namespace is the proof it is ours). Then the
namespaces, ``/etc/netns/dlc-<id>-*``, the root namespace's ``unreachable <subnet>`` route, the registry
entry and (unless kept) the directory go.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tools.ceph_cluster import CephCluster
from tools.netsim.hosts import ETC_NETNS, NS_PREFIX, netns_list, netns_pids, remove_unreachable_route
from tools.netsim.procs import proc_state, signal_pid

__all__ = ["REGISTRY", "kill_namespaces", "sweep"]

#: ``<id>.json`` per cluster: ``{"id", "dir", "subnet", "prefix"}``.
REGISTRY = Path("/run/dlc")


def kill_namespaces(namespaces: Sequence[str], timeout: float = 10.0) -> int:
    """SIGKILL every process in ``namespaces`` (only names starting with ``dlc-`` are looked at) and wait up to
    ``timeout`` s for them to be gone; return how many were signalled."""
    pids = [pid for ns in namespaces if ns.startswith(NS_PREFIX) for pid in netns_pids(ns)]
    for pid in pids:
        signal_pid(pid, signal.SIGKILL)
    end = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < end:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if proc_state(pid) in (None, "Z", "X"):
                break
            time.sleep(0.02)
    return len(pids)


def known_ids() -> set[str]:
    """Ids of the clusters with a registry entry or a ``dlc-<id>-*`` namespace."""
    ids = {p.stem for p in REGISTRY.glob("*.json")} if REGISTRY.is_dir() else set()
    return ids | {ns[len(NS_PREFIX) :].split("-", 1)[0] for ns in netns_list() if ns.startswith(NS_PREFIX)}


def owner_alive(cluster_id: str) -> int | None:
    """The PID of the live process (not this one) that made cluster ``cluster_id`` and still runs it (a test
    session), or None (made by the CLI, which has exited, or its maker died)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        reg = json.loads((REGISTRY / f"{cluster_id}.json").read_text())
        owner = int(json.loads((Path(str(reg["dir"])) / "state.json").read_text())["owner"])
        if owner != os.getpid() and proc_state(owner) not in (None, "Z", "X"):
            return owner
    return None


def sweep(cluster_id: str | None, keep_dir: bool, down: Callable[[str, bool], None]) -> list[str]:
    """Remove cluster ``cluster_id``, or (None) every known one whose maker is not a live process (a running test
    session's cluster is left alone: name it to remove it). ``down(id, keep_dir)`` is tried first (the
    orderly teardown from the cluster's state); whatever it fails to do is done here from the registry and
    the namespace names. Idempotent; returns the ids swept."""
    ids = {cluster_id} if cluster_id is not None else {i for i in known_ids() if owner_alive(i) is None}
    for cid in sorted(ids):
        with contextlib.suppress(Exception):  # no state or a damaged one: by names and the registry
            down(cid, keep_dir)
        reg: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            reg = json.loads((REGISTRY / f"{cid}.json").read_text())
        prefix = f"{NS_PREFIX}{cid}-"
        mine = [ns for ns in netns_list() if ns.startswith(prefix)]
        directory = Path(str(reg["dir"])) if reg.get("dir") else None
        if directory is not None and (directory / "ceph" / "cluster.json").exists():
            with contextlib.suppress(Exception):
                CephCluster.existing(directory / "ceph").stop(timeout=5)
        kill_namespaces(mine)
        for ns in sorted(mine, key=lambda n: n == prefix + "sw"):  # hosts, then the switch
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        if ETC_NETNS.is_dir():
            for d in ETC_NETNS.glob(prefix + "*"):
                shutil.rmtree(d, ignore_errors=True)
        if reg.get("subnet"):
            remove_unreachable_route(str(reg["subnet"]))
        if directory is not None and not keep_dir and (directory / "state.json").exists():
            shutil.rmtree(directory, ignore_errors=True)
        with contextlib.suppress(OSError):
            (REGISTRY / f"{cid}.json").unlink()
    return sorted(ids)
