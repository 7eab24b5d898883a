"""Waiting for a cluster to be usable and reading its state: OSDs up (:meth:`ClusterHealth.wait_osd_up`,
:meth:`ClusterHealth.wait_osds_up`), every PG active+clean (:meth:`ClusterHealth.wait_clean`), undoing OSD
failures (:meth:`ClusterHealth.revive`), ``ceph osd stat`` (:meth:`ClusterHealth.status`).

Traps hit (and what this module does about them):

* Without a mgr, ``ceph pg dump``, ``pg stat``, ``pg ls``... wait for one forever (no error) and ``ceph -s``
  shows no PGs. ``ceph pg <pgid> query`` is answered by the PG's primary OSD: :meth:`ClusterHealth.wait_clean`
  asks every PG that way (:meth:`ClusterHealth.pg_states`).
* Right after a SIGKILL the osdmap may still show the OSD up, so a restarted OSD looks up at once:
  :meth:`ClusterHealth.wait_osd_up` also wants the address nonce to be the new PID (Ceph daemons use the
  PID as nonce).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable

from tools.ceph.base import CephClusterError, proc_state, tail
from tools.ceph.daemons import ClusterDaemons

__all__ = ["ClusterHealth"]


class ClusterHealth(ClusterDaemons):
    """Waits for OSDs and PGs, reads their states, and revives failed OSDs."""

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
                tails = "\n".join(f"--- {self.daemon_log(n)} (tail) ---\n{tail(self.daemon_log(n), 25)}" for n in names)
                raise CephClusterError(f"timed out waiting for {what}; last error: {last}\n{tails}")
            time.sleep(0.25)

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
            elif proc_state(pid) in ("T", "t"):
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
