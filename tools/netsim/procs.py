"""Processes of the simulated cluster: the state file, PID checks, a spawner thread, component handles.

A process started by the harness is only ever signalled by its recorded PID, and only if that PID is still
the same process: alive (not a zombie), in the expected network namespace (``/proc/<pid>/ns/net`` has the
inode of ``/run/netns/<ns>``) and with the cluster's directory in its command line (every component names
a file under it). Never by process name.

:class:`Spawner` starts processes from one long-lived thread: with ``die_with_parent`` their command is
prefixed with ``setpriv --pdeathsig KILL``, and the kernel sends that signal when the *thread* that forked
them exits, so every start (also restarts from a test's worker thread) goes through that one thread,
which lives as long as the harness's process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tools.ceph.base import proc_state
from tools.ceph.daemons import die_with_parent_prefix
from tools.netsim.hosts import netns_inode, pid_netns_inode

__all__ = [
    "Component",
    "ComponentError",
    "Spawner",
    "StateFile",
    "is_ours",
    "proc_state",
    "rss_bytes",
    "signal_pid",
    "wait_gone",
]

T = TypeVar("T")


class ComponentError(RuntimeError):
    """A component could not be started, stopped or signalled (the message says which and why)."""


def is_ours(pid: int, netns: str, marker: str) -> bool:
    """Whether ``pid`` is a live (not zombie) process in namespace ``netns`` whose command line contains
    ``marker`` (the cluster directory)."""
    if proc_state(pid) in (None, "Z", "X"):
        return False
    want = netns_inode(netns)
    if want is None or pid_netns_inode(pid) != want:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return os.fsencode(marker) in cmdline


def rss_bytes(pid: int) -> int:
    """VmRSS of ``pid`` in bytes (0 if unknown)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def signal_pid(pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False if it is gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, netns: str, marker: str, timeout: float) -> bool:
    """Wait until ``pid`` is no longer ours (exited; reaped if our child); return whether it went in time."""
    end = time.monotonic() + timeout
    while True:
        _reap(pid)
        if not is_ours(pid, netns, marker):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)


class StateFile:
    """A JSON document in ``path``, read and changed under an exclusive ``flock`` (``path`` + ``.lock``), so
    that the harness, the CLI and tests in other processes can share it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mu = threading.RLock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._mu:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(str(self.path) + ".lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def read(self) -> dict[str, Any]:
        """The current document (``{}`` if there is none; then nothing is created)."""
        if not self.path.parent.is_dir():
            return {}
        with self._locked():
            return self._load()

    def update(self, change: Callable[[dict[str, Any]], T]) -> T:
        """Apply ``change`` to the document in place and write it back atomically; return what it returned."""
        with self._locked():
            data = self._load()
            result = change(data)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, self.path)
            return result


class Spawner:
    """Runs callables on one long-lived daemon thread (the parent thread of every process it starts).

    Args:
        die_with_parent: prefix commands with ``setpriv --pdeathsig KILL --`` (see :meth:`prefix`).
    """

    def __init__(self, die_with_parent: bool) -> None:
        self.die_with_parent = die_with_parent
        self._prefix = die_with_parent_prefix() if die_with_parent else []
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._mu = threading.Lock()

    def prefix(self) -> list[str]:
        """``setpriv --pdeathsig KILL --`` with ``die_with_parent`` (if setpriv can), else nothing."""
        return list(self._prefix)

    def _loop(self) -> None:
        while True:
            fn, reply = self._jobs.get()
            try:
                reply.put((True, fn()))
            except BaseException as e:  # handed back to the caller
                reply.put((False, e))

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the spawner thread (directly when not ``die_with_parent``); return its result or raise
        what it raised."""
        if not self.die_with_parent or threading.current_thread() is self._thread:
            return fn()
        with self._mu:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="cluster-spawner", daemon=True)
                self._thread.start()
        reply: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
        self._jobs.put((fn, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]


class Component:
    """A handle on one daemon of the cluster (ZooKeeper server, Ceph mon/OSD, Spark master/worker).

    Subclasses say how to find its PID (:meth:`recorded_pid`) and how to start it (:meth:`_start`).
    ``on_fault`` is called with ``(kind, component, pid)`` when a signal that is a fault (SIGKILL, SIGSTOP) is
    sent and with ``("end-" + kind, component, pid)`` when it is undone (start after a kill, resume after a
    pause), so that the cluster can record them.
    """

    role = "component"

    def __init__(
        self,
        name: str,
        host: str,
        netns: str,
        marker: str,
        on_fault: Callable[[str, Component, int | None], None] | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.netns = netns
        self.marker = marker
        self.on_fault = on_fault

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} on {self.host} pid={self.pid()}>"

    # --- to be provided ---------------------------------------------------------------------------------
    def recorded_pid(self) -> int | None:
        """The PID recorded for it (alive or not), or None."""
        raise NotImplementedError

    def _start(self) -> int:
        """Start it (it is not running); return its PID."""
        raise NotImplementedError

    def wait_ready(self, timeout: float = 60.0) -> float:
        """Wait until it serves; return the seconds waited (subclasses; here: alive).

        Raises:
            ComponentError: it is not running.
        """
        if self.pid() is None:
            raise ComponentError(f"{self.name} is not running")
        return 0.0

    # --- state ------------------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """Its PID if it runs now (a paused one counts), else None."""
        pid = self.recorded_pid()
        if pid is None:
            return None
        _reap(pid)
        return pid if is_ours(pid, self.netns, self.marker) else None

    @property
    def alive(self) -> bool:
        """Whether it runs (paused or not)."""
        return self.pid() is not None

    @property
    def paused(self) -> bool:
        """Whether it is stopped by SIGSTOP."""
        pid = self.pid()
        return pid is not None and proc_state(pid) in ("T", "t")

    def state(self) -> str:
        """``running``, ``paused`` or ``dead``."""
        pid = self.pid()
        if pid is None:
            return "dead"
        return "paused" if proc_state(pid) in ("T", "t") else "running"

    def rss(self) -> int:
        """Its VmRSS in bytes (0 when not running)."""
        pid = self.pid()
        return rss_bytes(pid) if pid is not None else 0

    # --- actions ----------------------------------------------------------------------------------------
    def _fault(self, kind: str, pid: int | None) -> None:
        if self.on_fault is not None:
            self.on_fault(kind, self, pid)

    def kill(self, sig: int = signal.SIGKILL, wait: float = 30.0) -> int:
        """Send ``sig`` to it; return the PID signalled. SIGKILL and SIGSTOP are recorded as faults (``kill``,
        ``pause``); after SIGKILL/SIGTERM/SIGINT it waits up to ``wait`` s until the process is gone.

        Raises:
            ComponentError: it is not running, or still runs after ``wait``.
        """
        pid = self.pid()
        if pid is None:
            raise ComponentError(f"{self.name} is not running")
        if sig == signal.SIGCONT:
            self.resume()
            return pid
        signal_pid(pid, sig)
        if sig in (signal.SIGTERM, signal.SIGINT):
            signal_pid(pid, signal.SIGCONT)  # a stopped process acts on them only once continued
        if sig == signal.SIGKILL:
            self._fault("kill", pid)
        elif sig == signal.SIGSTOP:
            self._fault("pause", pid)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT) and not wait_gone(pid, self.netns, self.marker, wait):
            raise ComponentError(f"{self.name} pid {pid} still runs {wait}s after {signal.Signals(sig).name}")
        return pid

    def pause(self) -> int:
        """SIGSTOP it (a recorded ``pause`` fault); return its PID (ComponentError: not running)."""
        return self.kill(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT it (ends its ``pause`` fault); nothing if it is not running."""
        pid = self.pid()
        if pid is not None:
            signal_pid(pid, signal.SIGCONT)
        self._fault("end-pause", pid)

    def stop(self, timeout: float = 20.0) -> None:
        """Stop it: SIGTERM (and SIGCONT), SIGKILL after ``timeout``. Not a fault. Idempotent.

        Raises:
            ComponentError: it survived SIGKILL for 10 s.
        """
        pid = self.pid()
        if pid is None:
            return
        signal_pid(pid, signal.SIGTERM)
        signal_pid(pid, signal.SIGCONT)
        if wait_gone(pid, self.netns, self.marker, timeout):
            return
        signal_pid(pid, signal.SIGKILL)
        if not wait_gone(pid, self.netns, self.marker, 10.0):
            raise ComponentError(f"{self.name} pid {pid} survived SIGKILL")

    def start(self, wait: bool = True, timeout: float = 60.0) -> int:
        """Start it (ends its ``kill`` fault, if any); with ``wait``, wait until it serves. Return its PID.

        Raises:
            ComponentError: it runs already, or did not start or serve in time.
        """
        pid = self.pid()
        if pid is not None:
            raise ComponentError(f"{self.name} is running already (pid {pid})")
        pid = self._start()
        self._fault("end-kill", pid)
        end = time.monotonic() + 15
        while self.pid() != pid:  # it enters its host's namespace and execs the daemon after it started
            if proc_state(pid) in (None, "Z", "X"):
                raise ComponentError(f"{self.name} (pid {pid}) exited as it started")
            if time.monotonic() > end:
                raise ComponentError(f"{self.name} (pid {pid}) did not get into host {self.host}")
            time.sleep(0.01)
        if wait:
            self.wait_ready(timeout)
        return pid

    def restart(self, timeout: float = 60.0) -> int:
        """:meth:`stop`, then :meth:`start` and wait until it serves; return the new PID."""
        self.stop()
        return self.start(timeout=timeout)


def spawn_logged(
    spawner: Spawner,
    prefix: Sequence[str],
    argv: Sequence[str],
    log: Path,
    env: dict[str, str],
    cwd: Path,
) -> subprocess.Popen[bytes]:
    """Start ``[*die-with-parent prefix, *prefix, *argv]`` on the spawner thread, in a session of its own, output
    appended to ``log``. Raises OSError if it cannot start."""

    def go() -> subprocess.Popen[bytes]:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n".encode())
            out.flush()
            return subprocess.Popen(
                [*spawner.prefix(), *prefix, *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,  # a Ctrl-C of the harness does not reach it
            )

    return spawner.call(go)
