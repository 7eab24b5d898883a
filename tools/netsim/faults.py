"""Network faults between simulated hosts, each undoable and recorded (kind, hosts, start and end times).

Every rule is installed with ``ip netns exec <host ns> iptables -w ...`` inside a namespace of the cluster,
never in the root namespace (:meth:`tools.netsim.hosts.Network.run_in_ns` refuses any other namespace),
and matches only the host's ``eth0`` (its loopback is never touched, so a server stays reachable from its
own host, e.g. for ``srvr``):

* partition: between every two groups, in each receiving host ``INPUT -i eth0 -s <other group> -j DROP``
  (``mode="reject"``: ``! -p icmp -j REJECT --reject-with icmp-host-unreachable``, so connects fail at once
  with EHOSTUNREACH; ICMP passes, else the other side's rule would eat the rejection). Hosts in no group
  are untouched: ``partition([["client1"], ["zk1", "zk2", "zk3"]])`` cuts one client from ZooKeeper only.
* isolate: a partition of one host from all others.
* one-way: packets from ``src`` dropped in ``dst``'s INPUT (UDP passes the other way; TCP dies both ways at
  the handshake, as on a real network).
* loss: ``INPUT -i eth0 -s <peers> -m statistic --mode random --probability p -j DROP`` in each host (both
  ways by default).
* delay: ``OUTPUT -o eth0 -d <peers> -j NFQUEUE --queue-num Q --queue-bypass`` plus a delayer process
  (:mod:`tools.netsim.delayer`) bound to queue Q in that host, holding each packet ``ms ± jitter`` ms; both
  ways by default, so a round trip grows by about ``2 * ms``.

Process faults (SIGKILL, SIGSTOP of a component) are recorded here too (kinds ``kill``, ``pause``), by the
cluster. The records live in the cluster's state file, so a fault made by one process (the CLI) can be
healed by another. :meth:`Faults.heal_network` removes every recorded rule and delayer, then flushes the
whole ruleset of every host (``nft flush ruleset`` and ``iptables -F``) and stops any delayer left.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.netsim.hosts import NetError, Network, netns_pids
from tools.netsim.procs import Spawner, StateFile, is_ours, signal_pid, spawn_logged, wait_gone

__all__ = ["DELAYER", "Fault", "FaultError", "Faults"]

#: The delayer script (stdlib only; run with the harness's interpreter).
DELAYER = Path(__file__).with_name("delayer.py")
#: NFQUEUE number of fault ``i`` is ``QUEUE_BASE + i``.
QUEUE_BASE = 1000
NETWORK_KINDS = ("partition", "isolate", "one-way", "loss", "delay")
PROCESS_KINDS = ("kill", "pause")


class FaultError(RuntimeError):
    """A fault could not be made or undone (the message names the command and its output)."""


@dataclass
class Fault:
    """One fault: ``kind``, the hosts it touches, wall-clock ``start``/``end`` (``time.time()``; ``end`` None
    while active), what exactly (``detail``), and what undoes it (``rules``: ``[host, chain, args]``;
    ``delayers``: ``[host, pid]``)."""

    id: int
    kind: str
    hosts: list[str]
    start: float
    end: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    rules: list[list[Any]] = field(default_factory=list)
    delayers: list[list[Any]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        """Whether it has not been undone yet."""
        return self.end is None

    @property
    def duration(self) -> float | None:
        """Seconds from start to end (None while active)."""
        return None if self.end is None else self.end - self.start

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "id": self.id,
            "kind": self.kind,
            "hosts": list(self.hosts),
            "start": self.start,
            "end": self.end,
            "detail": dict(self.detail),
            "rules": [list(r) for r in self.rules],
            "delayers": [list(d) for d in self.delayers],
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Fault:
        """The inverse of :meth:`to_json`."""
        return cls(
            id=int(raw["id"]),
            kind=str(raw["kind"]),
            hosts=[str(h) for h in raw.get("hosts", [])],
            start=float(raw["start"]),
            end=None if raw.get("end") is None else float(raw["end"]),
            detail=dict(raw.get("detail", {})),
            rules=[list(r) for r in raw.get("rules", [])],
            delayers=[list(d) for d in raw.get("delayers", [])],
        )

    def describe(self) -> str:
        """One line: id, kind, hosts, detail, times."""
        detail = " ".join(f"{k}={v}" for k, v in self.detail.items())
        when = time.strftime("%H:%M:%S", time.localtime(self.start))
        span = "active" if self.end is None else f"ended after {self.end - self.start:.1f}s"
        return f"#{self.id} {self.kind} [{', '.join(self.hosts)}] {detail} (from {when}, {span})"


class Faults:
    """Makes, records and undoes network faults of ``network``; records process faults for the cluster.

    Args:
        network: the hosts.
        state: the cluster's state file (key ``faults``: the list of records; ``next_fault``).
        marker: the cluster directory (in every delayer's command line).
        spawner: starts delayers.
        log_dir: delayer logs.
        python: the interpreter that runs the delayer.
    """

    def __init__(
        self, network: Network, state: StateFile, marker: str, spawner: Spawner, log_dir: Path, python: str
    ) -> None:
        self.network = network
        self.state = state
        self.marker = marker
        self.spawner = spawner
        self.log_dir = log_dir
        self.python = python

    # --- records --------------------------------------------------------------------------------------
    def records(self) -> list[Fault]:
        """Every fault so far, oldest first."""
        return [Fault.from_json(r) for r in self.state.read().get("faults", [])]

    def active(self) -> list[Fault]:
        """The faults not undone yet."""
        return [f for f in self.records() if f.active]

    def _new(self, kind: str, hosts: Iterable[str], detail: dict[str, Any]) -> Fault:
        def add(data: dict[str, Any]) -> Fault:
            fid = int(data.get("next_fault", 1))
            data["next_fault"] = fid + 1
            fault = Fault(fid, kind, sorted(set(hosts)), time.time(), None, detail)
            data.setdefault("faults", []).append(fault.to_json())
            return fault

        return self.state.update(add)

    def _save(self, fault: Fault) -> None:
        def put(data: dict[str, Any]) -> None:
            data["faults"] = [fault.to_json() if int(r["id"]) == fault.id else r for r in data.get("faults", [])]

        self.state.update(put)

    def get(self, fault_id: int) -> Fault:
        """The record of fault ``fault_id``.

        Raises:
            FaultError: there is none.
        """
        for f in self.records():
            if f.id == fault_id:
                return f
        raise FaultError(f"no fault #{fault_id}")

    def record_process(self, kind: str, component: str, host: str, pid: int | None) -> Fault:
        """Record a process fault (``kill``/``pause``) of ``component`` on ``host``."""
        return self._new(kind, [host], {"component": component, "pid": pid})

    def end_process(self, kind: str, component: str) -> list[Fault]:
        """Mark the active ``kind`` faults of ``component`` ended (the caller restarted/continued it)."""
        ended = []
        for f in self.active():
            if f.kind == kind and f.detail.get("component") == component:
                f.end = time.time()
                self._save(f)
                ended.append(f)
        return ended

    # --- making faults --------------------------------------------------------------------------------
    def _check_hosts(self, hosts: Iterable[str]) -> list[str]:
        out = []
        for h in hosts:
            self.network.host(h)  # KeyError for an unknown one
            out.append(h)
        return out

    def _iptables(self, host: str, op: str, chain: str, args: Sequence[str], check: bool = True) -> None:
        ns = self.network.host(host).netns
        try:
            self.network.run_in_ns(ns, ["iptables", "-w", op, chain, *args], check=check)
        except NetError as e:
            raise FaultError(str(e)) from None

    def _apply(self, fault: Fault, rules: list[list[Any]]) -> Fault:
        """Install ``rules`` (recording each as it goes, so a failure midway is still undone by heal)."""
        try:
            for host, chain, args in rules:
                self._iptables(host, "-A", chain, args)
                fault.rules.append([host, chain, list(args)])
        finally:
            self._save(fault)
        return fault

    def _addrs(self, hosts: Iterable[str]) -> str:
        return ",".join(self.network.addr(h) for h in hosts)

    def _others(self, hosts: Iterable[str]) -> list[str]:
        skip = set(hosts)
        return [h for h in self.network.hosts if h not in skip]

    def partition(self, groups: Sequence[Sequence[str]], mode: str = "drop") -> Fault:
        """Cut every group from every other (both ways). Hosts in no group keep reaching everyone.

        Raises:
            KeyError: an unknown host.
            ValueError: fewer than two groups, a host in two groups, or a bad ``mode``.
            FaultError: a rule could not be installed (those installed are recorded; heal removes them).
        """
        groups = [self._check_hosts(g) for g in groups]
        if len(groups) < 2 or any(not g for g in groups):
            raise ValueError("a partition needs at least two non-empty groups")
        seen = [h for g in groups for h in g]
        if len(seen) != len(set(seen)):
            raise ValueError(f"a host is in two groups: {groups}")
        target = _target(mode)
        fault = self._new("partition", seen, {"groups": [list(g) for g in groups], "mode": mode})
        rules: list[list[Any]] = []
        for g in groups:
            others = [h for other in groups if other is not g for h in other]
            for h in g:
                rules.append([h, "INPUT", ["-i", "eth0", "-s", self._addrs(others), *target]])
        return self._apply(fault, rules)

    def isolate(self, host: str, mode: str = "drop") -> Fault:
        """Cut ``host`` from every other host, both ways (see :meth:`partition`)."""
        fault = self.partition([[host], self._others([host])], mode)
        fault.kind = "isolate"
        fault.detail["host"] = host
        self._save(fault)
        return fault

    def one_way(self, src: Sequence[str], dst: Sequence[str], mode: str = "drop") -> Fault:
        """Drop what ``src`` hosts send to ``dst`` hosts (in the receivers' INPUT); the other way stays open.

        Raises:
            KeyError: unknown host. ValueError: empty or overlapping sides. FaultError: rule failed.
        """
        src, dst = self._check_hosts(src), self._check_hosts(dst)
        if not src or not dst or set(src) & set(dst):
            raise ValueError("one-way needs disjoint, non-empty src and dst")
        fault = self._new("one-way", [*src, *dst], {"src": list(src), "dst": list(dst), "mode": mode})
        target = _target(mode)
        return self._apply(fault, [[h, "INPUT", ["-i", "eth0", "-s", self._addrs(src), *target]] for h in dst])

    def loss(
        self, hosts: Sequence[str], peers: Sequence[str] | None = None, p: float = 0.3, both_ways: bool = True
    ) -> Fault:
        """Drop a random fraction ``p`` of the packets ``hosts`` receive from ``peers`` (default: every other
        host); ``both_ways`` also of what ``peers`` receive from ``hosts``.

        Raises:
            KeyError: unknown host. ValueError: ``p`` not in (0, 1]. FaultError: rule failed.
        """
        if not 0 < p <= 1:
            raise ValueError(f"loss probability {p} not in (0, 1]")
        hosts = self._check_hosts(hosts)
        peers = self._check_hosts(peers) if peers is not None else self._others(hosts)
        stat = ["-m", "statistic", "--mode", "random", "--probability", f"{p:.6f}", "-j", "DROP"]
        rules = [[h, "INPUT", ["-i", "eth0", "-s", self._addrs(peers), *stat]] for h in hosts]
        if both_ways:
            rules += [[h, "INPUT", ["-i", "eth0", "-s", self._addrs(hosts), *stat]] for h in peers]
        fault = self._new("loss", [*hosts, *peers], {"hosts": hosts, "peers": peers, "p": p, "both_ways": both_ways})
        return self._apply(fault, rules)

    def delay(
        self,
        hosts: Sequence[str],
        peers: Sequence[str] | None = None,
        ms: float = 50.0,
        jitter_ms: float = 20.0,
        both_ways: bool = True,
        seed: int | None = None,
    ) -> Fault:
        """Hold each packet ``hosts`` send to ``peers`` (default: every other host) ``ms ± jitter_ms``
        (uniform; packets of a flow keep their order); ``both_ways`` also what ``peers`` send to ``hosts``.

        Raises:
            KeyError: unknown host. ValueError: negative delay or jitter above it.
            FaultError: a delayer did not start or a rule failed (what was made is recorded; heal undoes it).
        """
        if ms < 0 or jitter_ms < 0 or jitter_ms > ms:
            raise ValueError("need 0 <= jitter_ms <= ms")
        hosts = self._check_hosts(hosts)
        peers = self._check_hosts(peers) if peers is not None else self._others(hosts)
        senders = [(h, peers) for h in hosts] + ([(h, hosts) for h in peers] if both_ways else [])
        fault = self._new(
            "delay",
            [*hosts, *peers],
            {"hosts": hosts, "peers": peers, "ms": ms, "jitter_ms": jitter_ms, "both_ways": both_ways},
        )
        queue = QUEUE_BASE + fault.id
        fault.detail["queue"] = queue
        rules: list[list[Any]] = []
        try:
            for i, (h, to) in enumerate(senders):
                pid = self._start_delayer(fault, h, queue, ms, jitter_ms, None if seed is None else seed + i)
                fault.delayers.append([h, pid])
                nfqueue = ["-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]
                rules.append([h, "OUTPUT", ["-o", "eth0", "-d", self._addrs(to), *nfqueue]])
        finally:
            self._save(fault)
        return self._apply(fault, rules)

    def _start_delayer(self, fault: Fault, host: str, queue: int, ms: float, jitter: float, seed: int | None) -> int:
        log = self.log_dir / f"delay-{fault.id}-{host}.log"
        argv = [self.python, str(DELAYER), "--queue", str(queue), "--delay-ms", str(ms), "--jitter-ms", str(jitter)]
        if seed is not None:
            argv += ["--seed", str(seed)]
        argv += ["--tag", self.marker]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        proc = spawn_logged(self.spawner, self.network.exec_prefix(host), argv, log, env, self.log_dir)
        end = time.monotonic() + 15
        while time.monotonic() < end:
            text = log.read_text(errors="replace") if log.exists() else ""
            if "\nready" in text:
                return proc.pid
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        proc.kill()
        raise FaultError(f"the delayer on {host} did not start:\n{log.read_text(errors='replace')[-2000:]}")

    # --- undoing --------------------------------------------------------------------------------------
    def end(self, fault: Fault | int) -> Fault:
        """Undo network fault ``fault``: delete its rules, stop its delayers; record its end. Process faults are
        only marked ended (the cluster restarts or continues the process). Idempotent.

        Raises:
            FaultError: no such fault.
        """
        f = self.get(fault if isinstance(fault, int) else fault.id)
        if not f.active:
            return f
        for host, chain, args in f.rules:
            if host in self.network.hosts:
                self._iptables(host, "-D", chain, args, check=False)
        for host, pid in f.delayers:
            self._stop_delayer(str(host), int(pid))
        f.end = time.time()
        self._save(f)
        return f

    def _stop_delayer(self, host: str, pid: int) -> None:
        ns = self.network.host(host).netns
        if is_ours(pid, ns, self.marker):
            signal_pid(pid, signal.SIGTERM)
            if not wait_gone(pid, ns, self.marker, 5.0):
                signal_pid(pid, signal.SIGKILL)
                wait_gone(pid, ns, self.marker, 5.0)

    def heal_network(self) -> list[Fault]:
        """End every active network fault, then flush every host's whole ruleset and stop any delayer still
        running in a host; return the faults ended.

        Raises:
            FaultError: a host's ruleset could not be flushed.
        """
        ended = [self.end(f) for f in self.active() if f.kind in NETWORK_KINDS]
        self.flush_all()
        return ended

    def flush_all(self) -> None:
        """Flush the firewall of every host (``nft flush ruleset``, ``iptables -F``/``-X``) and stop stray
        delayers (processes in a host whose command line runs the delayer with this cluster's tag).

        Raises:
            FaultError: a flush failed.
        """
        for h in self.network.hosts.values():
            if h.netns not in self.network.namespaces():
                continue
            try:  # iptables first (a legacy backend), then everything nftables has (iptables-nft's tables too)
                self.network.run_in_ns(h.netns, ["sh", "-c", _FLUSH_SH])
            except NetError as e:
                raise FaultError(str(e)) from None
            for pid in netns_pids(h.netns):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if os.fsencode(str(DELAYER)) in cmd and is_ours(pid, h.netns, self.marker):
                    self._stop_delayer(h.name, pid)


_FLUSH_SH = "iptables -w -F 2>/dev/null; iptables -w -X 2>/dev/null; nft flush ruleset"


def _target(mode: str) -> list[str]:
    if mode == "drop":
        return ["-j", "DROP"]
    if mode == "reject":  # ICMP passes, else the other side's rule would eat the rejection
        return ["!", "-p", "icmp", "-j", "REJECT", "--reject-with", "icmp-host-unreachable"]
    raise ValueError(f"mode must be drop or reject, not {mode!r}")
