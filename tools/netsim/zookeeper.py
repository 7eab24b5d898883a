"""A ZooKeeper ensemble on simulated hosts: one server per host, Debian's ``zookeeper`` package run with java.

Each server is ``java ... org.apache.zookeeper.server.quorum.QuorumPeerMain <dir>/zk/<name>/zoo.cfg`` (what
``zkServer.sh start-foreground`` execs, without its Debian ``environment`` file that would send logs to
``/var/log/zookeeper``), with a capped heap (``-Xmx256m -XX:+UseSerialGC``, C1 only for a faster start on two
cores), ``slf4j-simple`` on the class path so that it logs to ``<dir>/zk/<name>/zookeeper.log``, and::

    tickTime=200  initLimit=50  syncLimit=5         (a follower that hears nothing for 1 s drops the leader)
    clientPort=2181  clientPortAddress=<host addr>  server.N=<addr N>:2888:3888
    4lw.commands.whitelist=*  admin.enableServer=false  forceSync=no  minSessionTimeout=400

The mode of each server comes from the ``srvr`` four-letter word, asked from the server's own host (so a
partition does not hide it): ``leader``, ``follower``, or ``down`` (not serving / not answering).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tools.netsim.hosts import NetError, Network
from tools.netsim.procs import Component, ComponentError, Spawner, spawn_logged

__all__ = [
    "CLIENT_PORT",
    "INSTALL_HINT",
    "ZkServer",
    "find_java",
    "missing",
    "srvr",
    "write_configs",
    "zk_classpath",
]

CLIENT_PORT = 2181
QUORUM_PORT = 2888
ELECTION_PORT = 3888
ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
INSTALL_HINT = "ZooKeeper is not installed: `apt-get install -y zookeeper` (Debian; `make zookeeper`)"
JVM_FLAGS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")
_MODE_RE = re.compile(r"^Mode:\s*(\S+)", re.M)
_ZXID_RE = re.compile(r"^Zxid:\s*0x([0-9a-fA-F]+)", re.M)


def find_java() -> str | None:
    """``$JAVA_HOME/bin/java`` or ``java`` on PATH, or None."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def missing() -> list[str]:
    """What the ensemble needs and this machine lacks (empty: all there)."""
    out = []
    if find_java() is None:
        out.append("java (a JDK/JRE 17: apt-get install openjdk-17-jre-headless)")
    if not os.path.exists(ZOOKEEPER_JAR):
        out.append(f"{ZOOKEEPER_JAR} ({INSTALL_HINT})")
    return out


def zk_classpath() -> str:
    """Debian's class path (the jar's manifest names its dependencies) plus an SLF4J binding."""
    parts = ["/etc/zookeeper/conf", ZOOKEEPER_JAR]
    if os.path.exists(SLF4J_SIMPLE_JAR):
        parts.append(SLF4J_SIMPLE_JAR)
    return ":".join(parts)


def write_configs(base: Path, servers: Sequence[tuple[str, str]], tick_ms: int = 200) -> None:
    """Write ``base/<name>/zoo.cfg`` and ``base/<name>/data/myid`` for each ``(name, addr)`` of ``servers``
    (server ids 1, 2, 3... in that order)."""
    members = [f"server.{i}={addr}:{QUORUM_PORT}:{ELECTION_PORT}" for i, (_, addr) in enumerate(servers, start=1)]
    for i, (name, addr) in enumerate(servers, start=1):
        d = base / name
        (d / "data").mkdir(parents=True, exist_ok=True)
        (d / "data" / "myid").write_text(f"{i}\n")
        lines = [
            f"tickTime={tick_ms}",
            "initLimit=50",
            "syncLimit=5",
            f"dataDir={d / 'data'}",
            f"clientPort={CLIENT_PORT}",
            f"clientPortAddress={addr}",
            "4lw.commands.whitelist=*",
            "admin.enableServer=false",
            "forceSync=no",
            f"minSessionTimeout={2 * tick_ms}",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
            *members,
        ]
        (d / "zoo.cfg").write_text("\n".join(lines) + "\n")


def srvr(network: Network, host: str, addr: str, timeout: float = 2.0) -> str:
    """The answer of the server at ``addr:2181`` to ``srvr``, asked from ``host`` ('' when none came).

    Raises:
        NetError: no socket could be made in ``host``.
    """
    try:
        s = network.connect(host, addr, CLIENT_PORT, timeout)
    except OSError:
        return ""
    chunks = []
    try:
        s.sendall(b"srvr")
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    except OSError:
        pass
    finally:
        s.close()
    return b"".join(chunks).decode(errors="replace")


class ZkServer(Component):
    """One ZooKeeper server of the ensemble (``zk<N>`` on host ``zk<N>``).

    Args:
        network: the hosts.
        spawner: starts the process (see :class:`tools.netsim.procs.Spawner`).
        directory: ``<cluster dir>/zk/<name>`` (from :func:`write_configs`).
        get_pid, set_pid: read and record its PID in the cluster's state.
    """

    role = "zookeeper"

    def __init__(
        self,
        name: str,
        host: str,
        network: Network,
        spawner: Spawner,
        directory: Path,
        marker: str,
        get_pid: Callable[[str], int | None],
        set_pid: Callable[[str, int | None], None],
        on_fault: Callable[[str, Component, int | None], None] | None = None,
    ) -> None:
        super().__init__(name, host, network.host(host).netns, marker, on_fault)
        self.network = network
        self.spawner = spawner
        self.directory = directory
        self.addr = network.addr(host)
        self._get_pid = get_pid
        self._set_pid = set_pid

    @property
    def log_path(self) -> Path:
        """Its log (slf4j-simple output)."""
        return self.directory / "zookeeper.log"

    def recorded_pid(self) -> int | None:
        """The recorded PID."""
        return self._get_pid(self.name)

    def argv(self) -> list[str]:
        """The java command line.

        Raises:
            ComponentError: no java.
        """
        java = find_java()
        if java is None:
            raise ComponentError("no java on PATH (or JAVA_HOME)")
        return [
            java,
            *JVM_FLAGS,
            "-cp",
            zk_classpath(),
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            f"-Dzookeeper.log.dir={self.directory}",
            "-Dzookeeper.jmx.log4j.disable=true",
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(self.directory / "zoo.cfg"),
        ]

    def _start(self) -> int:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JVMFLAGS", "SERVER_JVMFLAGS", "CLASSPATH"))}
        proc = spawn_logged(
            self.spawner, self.network.exec_prefix(self.host), self.argv(), self.log_path, env, self.directory
        )
        self._set_pid(self.name, proc.pid)
        return proc.pid

    def srvr(self, timeout: float = 2.0) -> str:
        """Its ``srvr`` answer, asked from its own host ('' if none; NetError if the host is gone)."""
        return srvr(self.network, self.host, self.addr, timeout)

    def mode(self, timeout: float = 2.0) -> str:
        """``leader``, ``follower``, ``standalone``, or ``down`` (dead, paused, not serving, no answer)."""
        if self.pid() is None:
            return "down"
        try:
            m = _MODE_RE.search(self.srvr(timeout))
        except NetError:
            return "down"
        return m.group(1) if m else "down"

    def zxid(self, timeout: float = 2.0) -> int | None:
        """Its last zxid (the high 32 bits are the leader's epoch), or None."""
        m = _ZXID_RE.search(self.srvr(timeout))
        return int(m.group(1), 16) if m else None

    def wait_ready(self, timeout: float = 60.0) -> float:
        """Wait until it is leader or follower; return the seconds waited.

        Raises:
            ComponentError: it died or did not join a quorum in time (with its log tail).
        """
        t0 = time.monotonic()
        while True:
            if self.pid() is None:
                raise ComponentError(f"{self.name} exited:\n{self.log_tail()}")
            if self.mode(1.0) in ("leader", "follower", "standalone"):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise ComponentError(f"{self.name} did not join a quorum in {timeout}s:\n{self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of its log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"(no log {self.log_path}: {e.strerror})"
