"""The daemons of a cluster as processes: making the monitor and the OSDs (``--mkfs``), starting them,
their PIDs, stopping them, and the OSD failures the tests inject (:meth:`ClusterDaemons.kill_osd`,
:meth:`ClusterDaemons.start_osd`, :meth:`ClusterDaemons.start_mon`).

No mgr, no systemd: the daemons are plain child processes in a session of their own (``start_new_session``: a
Ctrl-C of the parent does not reach them), their output in ``DIR/log/<name>.out``, their PIDs in
``DIR/pids/<name>``. :meth:`ClusterDaemons.stop` signals only those PIDs, and only if ``/proc/<pid>/cmdline``
names ``DIR/ceph.conf``; never by process name. ``die_with_parent`` runs them under ``setpriv --pdeathsig
KILL``.

Trap hit (and what this module does about it): a SIGSTOPped daemon acts on SIGTERM only once continued:
:meth:`ClusterDaemons.stop` sends SIGCONT after SIGTERM. Daemons left by the CLI belong to PID 1 once it exits;
stopped, they are zombies until PID 1 reaps them (``pgrep`` lists them as ``<defunct>`` for a moment). A
zombie counts as stopped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from tools.ceph.base import CephClusterError, ClusterBase, proc_state, tail

__all__ = ["ClusterDaemons", "die_with_parent_prefix"]


def die_with_parent_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL --``, if util-linux's setpriv has it (else nothing)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    try:
        out = subprocess.run([setpriv, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"] if "--pdeathsig" in out else []


class ClusterDaemons(ClusterBase):
    """Starts, tracks, signals and stops the daemons of a cluster (by their recorded PIDs)."""

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
        if proc_state(pid) in (None, "Z", "X"):
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

    def _spawn(self, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        prefix = die_with_parent_prefix() if self.die_with_parent else []
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
                    f"--- {self.daemon_log(name)} (tail) ---\n{tail(self.daemon_log(name))}\n"
                    f"--- {self.log_dir / (name + '.out')} (tail) ---\n{tail(self.log_dir / (name + '.out'), 10)}"
                )

    # --- making the daemons ------------------------------------------------------------------
    def _make_mon(self, fsid: str, mon_addrvec: str, keyring: Path) -> None:
        """Make the data of the monitor ``mon.a`` (``monmaptool``, ``ceph-mon --mkfs``), reachable at
        ``mon_addrvec``, with the keys of ``keyring`` as its initial auth database."""
        monmap = self.directory / "tmp" / "monmap"
        self._run(
            [
                "monmaptool",
                "--create",
                "--fsid",
                fsid,
                "--addv",
                "a",
                mon_addrvec,
                "--enable-all-features",
                "--set-min-mon-release",
                "pacific",
                str(monmap),
            ],
            timeout=30.0,
        )
        conf = str(self.conf_path)
        self._run(
            ["ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap", str(monmap), "--keyring", str(keyring)],
            timeout=60,
        )

    def _mkfs_osd(self, i: int, osd_uuid: str) -> subprocess.Popen[bytes]:
        """Start ``ceph-osd --mkfs`` of ``osd.<i>`` (registered, keyring in place) at its placement, output in
        ``log/osd.<i>.mkfs.out``; return it without waiting (the OSDs are made in parallel)."""
        conf = str(self.conf_path)
        with open(self.log_dir / f"osd.{i}.mkfs.out", "wb") as out:
            return subprocess.Popen(
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
                cwd=self.directory,
                env=self._env(),
                start_new_session=True,
            )

    # --- stopping ----------------------------------------------------------------------------
    def stop(self, timeout: float = 30.0) -> None:
        """Stop every recorded daemon by PID: SIGTERM (OSDs first, then the mon), SIGKILL after ``timeout``.

        Only a process whose command line names this cluster's ceph.conf is signalled. Idempotent.
        """
        recorded = self._recorded()
        if not recorded:
            return
        gateways = {n: p for n, p in recorded.items() if n.startswith("rgw")}
        osds = {n: p for n, p in recorded.items() if not n.startswith(("mon.", "rgw"))}
        mons = {n: p for n, p in recorded.items() if n.startswith("mon.")}
        for name, pid in gateways.items():  # radosgw ignores SIGTERM (a 30 s wait): it keeps no state of its own
            self._reap(name, pid)
            if self._is_ours(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for group in (gateways, osds, mons):
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
