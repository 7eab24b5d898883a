"""What the rest of the Ceph harness builds on: :class:`CephClusterError`, :class:`Placement`, the programs it
needs (:func:`missing_programs`), small ``/proc`` helpers, and :class:`ClusterBase`: a cluster's settings (the
arguments of :class:`~tools.ceph.cluster.CephCluster`), where its files are and where its daemons run, and
running the ``ceph``/``rados`` tools against it (:meth:`ClusterBase.ceph`, :meth:`ClusterBase.rados_cli`).

Trap hit (and what this module does about it): ``CEPH_ARGS``/``CEPH_CONF`` in the environment would redirect
the tools, and the ``ceph`` CLI is a ``/usr/bin/python3`` script that a venv's ``PYTHONPATH`` could break:
both are removed from the tools' environment (:data:`_SCRUBBED_ENV`, :meth:`ClusterBase._env`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "INSTALL_HINT",
    "REQUIRED_PROGRAMS",
    "CephClusterError",
    "ClusterBase",
    "Placement",
    "missing_programs",
    "proc_state",
    "tail",
]

#: Programs the harness runs (Debian: ``ceph-mon``, ``ceph-osd`` and their dependency ``ceph-common``).
REQUIRED_PROGRAMS = ("ceph-mon", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rados")
INSTALL_HINT = (
    "Ceph is not installed: run `make ceph` (Debian: apt-get install --no-install-recommends "
    "ceph-mon ceph-osd python3-rados uuid-runtime radosgw; the make target also exposes the `rados` module to the venv)"
)
#: Environment variables that would change what the ``ceph``/``rados`` tools and the daemons do.
_SCRUBBED_ENV = ("CEPH_ARGS", "CEPH_CONF", "CEPH_KEYRING", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")


class CephClusterError(RuntimeError):
    """A step of the harness failed; the message says which, and holds the relevant output or log tail."""


@dataclass(frozen=True)
class Placement:
    """Where a daemon (or the admin tools) runs: the address it binds and the argv prefix that runs a command
    there (e.g. ``("ip", "netns", "exec", "dlc-x-ceph1")``; empty: here)."""

    addr: str
    prefix: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """A JSON-able form (for ``cluster.json``)."""
        return {"addr": self.addr, "prefix": list(self.prefix)}

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> Placement:
        """The inverse of :meth:`to_json`.

        Raises:
            CephClusterError: ``raw`` is not such a mapping.
        """
        addr, prefix = raw.get("addr"), raw.get("prefix", [])
        if not isinstance(addr, str) or not isinstance(prefix, list):
            raise CephClusterError(f"bad placement in cluster.json: {raw!r}")
        return cls(addr, tuple(str(p) for p in prefix))


def missing_programs() -> list[str]:
    """The programs of :data:`REQUIRED_PROGRAMS` that are not on ``PATH``."""
    return [p for p in REQUIRED_PROGRAMS if shutil.which(p) is None]


def proc_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``R``, ``S``, ``T``, ``Z``...), or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[0] if fields else None


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of the file ``path`` (or a note saying why there are none)."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"(no {path}: {e.strerror})"
    return "\n".join(text.splitlines()[-lines:])


class ClusterBase:
    """A cluster's settings, files and placements, and the ``ceph``/``rados`` tools run against it; the
    arguments are those of :class:`~tools.ceph.cluster.CephCluster` (see there).

    Raises:
        ValueError: inconsistent sizes or an incomplete placement.
    """

    CLIENT_ID = "dlog"

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        osds: int = 3,
        pool: str = "segments",
        pool_size: int = 3,
        min_size: int = 2,
        cephx: bool = True,
        die_with_parent: bool = False,
        verbose: bool = False,
        mon_at: Placement | None = None,
        osds_at: Sequence[Placement] | None = None,
        tools_at: Placement | None = None,
        public_network: str | None = None,
    ) -> None:
        placed = (mon_at, osds_at, tools_at, public_network)
        if any(p is not None for p in placed) and any(p is None for p in placed):
            raise ValueError("mon_at, osds_at, tools_at and public_network go together")
        if osds_at is not None and len(osds_at) != osds:
            raise ValueError(f"osds_at has {len(osds_at)} placements for {osds} OSDs")
        if osds < 1:
            raise ValueError("osds must be >= 1")
        if not 1 <= min_size <= pool_size:
            raise ValueError("need 1 <= min_size <= pool_size")
        if pool_size > osds:
            raise ValueError(f"pool_size {pool_size} needs at least as many OSDs (have {osds})")
        self.directory = Path(directory).absolute()
        self.osds = osds
        self._pool = pool
        self.pool_size = pool_size
        self.min_size = min_size
        self.cephx = cephx
        self.die_with_parent = die_with_parent
        self.verbose = verbose
        self.mon_at = mon_at
        self.osds_at = tuple(osds_at) if osds_at is not None else None
        self.tools_at = tools_at
        self.public_network = public_network
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._t0 = time.monotonic()

    @property
    def placed(self) -> bool:
        """Whether the daemons run at placements (simulated hosts) rather than here on loopback."""
        return self.mon_at is not None

    def placement(self, name: str) -> Placement | None:
        """The placement of daemon ``name`` (``mon.a``, ``osd.N``) or of the tools (any other name)."""
        if name.startswith("mon.") and self.mon_at is not None:
            return self.mon_at
        if name.startswith("osd.") and self.osds_at is not None:
            return self.osds_at[int(name.split(".", 1)[1])]
        return self.tools_at

    def _where(self, name: str) -> list[str]:
        at = self.placement(name)
        return list(at.prefix) if at is not None else []

    # --- where things are --------------------------------------------------------------------
    @property
    def conf_path(self) -> Path:
        """The cluster's ``ceph.conf`` (clients: ``rados.Rados(conffile=str(conf_path), ...)``)."""
        return self.directory / "ceph.conf"

    @property
    def admin_keyring(self) -> Path:
        """Keyring of ``client.admin`` (all caps)."""
        return self.directory / "ceph.client.admin.keyring"

    @property
    def client_id(self) -> str:
        """Id of the restricted client user (``name="client." + client_id``)."""
        return self.CLIENT_ID

    @property
    def client_name(self) -> str:
        """``client.<client_id>``, the ``name`` for ``rados.Rados``."""
        return f"client.{self.CLIENT_ID}"

    @property
    def client_keyring(self) -> Path:
        """Keyring of the restricted client user (found through ceph.conf's ``keyring`` even if not given)."""
        return self.directory / f"ceph.client.{self.CLIENT_ID}.keyring"

    @property
    def pool(self) -> str:
        """The pool created by :meth:`start`."""
        return self._pool

    @property
    def log_dir(self) -> Path:
        """Daemon logs: ``ceph-<name>.log`` (Ceph's own log) and ``<name>.out`` (stdout/stderr)."""
        return self.directory / "log"

    @property
    def pid_dir(self) -> Path:
        """``<name>`` files holding the PID of each daemon started by this harness."""
        return self.directory / "pids"

    def daemon_log(self, name: str) -> Path:
        """The Ceph log of daemon ``name`` (``mon.a``, ``osd.0``...)."""
        return self.log_dir / f"ceph-{name}.log"

    # --- running the tools -------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        env.setdefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        return env

    def _say(self, msg: str) -> None:
        if self.verbose:
            print(f"[ceph_cluster {time.monotonic() - self._t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    def _run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        what: str | None = None,
        input_text: str | None = None,
        where: Sequence[str] = (),
    ) -> str:
        try:
            res = subprocess.run(
                [*where, *argv],
                input=input_text,
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=self.directory,
                env=self._env(),
                stdin=None if input_text is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise CephClusterError(f"`{what or ' '.join(argv)}` timed out after {timeout}s: {err.strip()}") from None
        except OSError as e:
            raise CephClusterError(f"`{what or ' '.join(argv)}` could not run: {e}") from None
        if res.returncode != 0:
            raise CephClusterError(
                f"`{what or ' '.join(argv)}` failed with exit status {res.returncode}: "
                f"{(res.stderr.strip() or res.stdout.strip())[-4000:]}"
            )
        return res.stdout

    def ceph(self, *args: str, timeout: float = 30.0, input_text: str | None = None) -> str:
        """Run the ``ceph`` CLI against this cluster as ``client.admin``; return its stdout.

        ``--connect-timeout`` is ``timeout`` as well (the CLI would otherwise wait for a monitor for 5 min).

        Raises:
            CephClusterError: non-zero exit status or timeout (names the command, holds its stderr).
        """
        conn = str(max(1, int(timeout)))
        argv = ["ceph", "-c", str(self.conf_path), "-n", "client.admin", "--connect-timeout", conn, *args]
        if input_text is not None:
            argv[1:1] = ["-i", "-"]
        return self._run(
            argv,
            timeout=timeout + 5,
            what="ceph " + " ".join(args),
            input_text=input_text,
            where=self._where("tools"),
        )

    def ceph_json(self, *args: str, timeout: float = 30.0) -> object:
        """:meth:`ceph` with ``-f json``, parsed."""
        out = self.ceph(*args, "-f", "json", timeout=timeout)
        try:
            return json.loads(out)
        except json.JSONDecodeError as e:
            raise CephClusterError(f"`ceph {' '.join(args)} -f json` gave no JSON ({e}): {out[:500]!r}") from None

    def rados_cli(self, *args: str, user: str | None = None, timeout: float = 30.0) -> str:
        """Run the ``rados`` CLI (as ``client.<user>``, default the restricted client); return its stdout."""
        argv = ["rados", "-c", str(self.conf_path), "--id", user or self.CLIENT_ID, *args]
        # rados has no connect timeout option of its own: bound the mon and OSD waits instead
        argv += ["--client-mount-timeout", str(int(timeout)), "--rados-osd-op-timeout", str(int(timeout))]
        return self._run(argv, timeout=timeout + 5, what="rados " + " ".join(args), where=self._where("tools"))
