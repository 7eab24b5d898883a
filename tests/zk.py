"""A private, real ZooKeeper server for tests, and pytest fixtures around it.

:class:`ZooKeeperServer` runs Debian's ``zkServer.sh start-foreground`` (package ``zookeeper``) on a
free loopback port with its own ``zoo.cfg``, data directory and log file in a temporary directory.
``start-foreground`` rather than ``start``: the server is then our own child process (no pid file,
no one-second sleeps), and its output goes to our log file instead of Debian's shared
``/var/log/zookeeper`` (the Debian ``environment`` file overrides ``ZOOCFGDIR``/``ZOO_LOG_DIR``).
Debian's server has no SLF4J binding on its class path and would log nothing, so ``slf4j-simple`` is
added to it when present. With util-linux's ``setpriv``, the server gets SIGKILLed when the thread that
started it dies, so a hard-killed pytest (``os._exit``, SIGKILL) leaves no server behind; start and
restart servers from the main thread (fixtures and tests do).

Fixtures (import them into a conftest.py)::

    from tests.zk import pytest_runtest_makereport, zk_chroot, zk_server  # noqa: F401

* ``zk_server`` (session): the running server; fails (does not skip) when ZooKeeper is not installed.
* ``zk_chroot`` (function): a fresh chroot path ``/t-<hex>`` per test.
* ``pytest_runtest_makereport``: adds the tail of the server log to the report of a failed test that
  used the server (printed with the failure).

:func:`expire_session` expires a store's session the real way: a second client joins the same
session (id and password) and closes it, so the server ends the session and deletes its ephemeral
nodes; the store learns it on its next reconnect (kazoo state LOST).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

#: Where Debian's package puts the server script.
DEBIAN_ZK_SERVER_SH = "/usr/share/zookeeper/bin/zkServer.sh"
#: SLF4J backend that gives the Debian server a log (package libslf4j-java, a dependency of zookeeper).
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
#: Lines of the server log attached to a failed test's report.
LOG_TAIL_LINES = 150
INSTALL_HINT = "ZooKeeper is not installed: run `apt-get install -y zookeeper` (Debian package, gives zkServer.sh)"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_zk_server_script() -> str | None:
    """The path of ``zkServer.sh`` (``$ZK_SERVER_SH``, Debian's path, ``PATH``, ``dpkg -L zookeeper``), or None."""
    candidates = [os.environ.get("ZK_SERVER_SH", ""), DEBIAN_ZK_SERVER_SH, shutil.which("zkServer.sh") or ""]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["dpkg", "-L", "zookeeper"], capture_output=True, text=True, timeout=30).stdout
        for line in out.splitlines():
            if line.endswith("/zkServer.sh") and os.access(line, os.X_OK):
                return line
    return None


def _classpath() -> str:
    """The Debian class path, plus an SLF4J binding so that the server logs."""
    parts = ["/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar"]
    if os.path.exists(SLF4J_SIMPLE_JAR):
        parts.append(SLF4J_SIMPLE_JAR)
    return ":".join(parts)


def _die_with_parent() -> list[str]:
    """A command prefix that SIGKILLs the server when the thread that started it dies (pytest killed
    hard, ``os._exit``: no fixture teardown, no atexit), if util-linux's ``setpriv`` can."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    try:
        help_text = subprocess.run([setpriv, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"] if "--pdeathsig" in help_text else []


class ZooKeeperServer:
    """A standalone ZooKeeper server on ``127.0.0.1:<free port>``, data and log in ``workdir``.

    ``tick_ms=200`` lets sessions be as short as 0.4 s (``minSessionTimeout`` = 2 ticks) and up to
    ``max_session_ms``. Data survives :meth:`stop`/:meth:`start` (same data directory), and so do
    sessions that have not expired.
    """

    def __init__(
        self,
        script: str | None = None,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        tick_ms: int = 200,
        max_session_ms: int = 60000,
        config: str | None = None,
    ) -> None:
        found = script or find_zk_server_script()
        if found is None:
            raise RuntimeError(INSTALL_HINT)
        self.script = found
        self._own_dir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="zk-test-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port if port is not None else free_port()
        self.data_dir = self.workdir / "data"
        self.cfg_path = self.workdir / "zoo.cfg"
        self.log_path = self.workdir / "zookeeper.log"
        self.cfg_path.write_text(
            config
            if config is not None
            else "\n".join(
                [
                    f"tickTime={tick_ms}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "admin.enableServer=false",
                    f"minSessionTimeout={2 * tick_ms}",
                    f"maxSessionTimeout={max_session_ms}",
                    "maxClientCnxns=0",
                    "forceSync=no",
                    "4lw.commands.whitelist=*",
                    "",
                ]
            )
        )
        self._proc: subprocess.Popen[bytes] | None = None
        self._mu = threading.Lock()
        atexit.register(self._kill_quietly)

    @property
    def hosts(self) -> str:
        """The connect string, ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the server and wait until a client connects.

        Raises:
            RuntimeError: it died or did not answer within ``timeout_s`` (the message holds the log tail).
        """
        with self._mu:
            if self.running:
                return
            env = dict(os.environ)
            env.update(
                ZOOCFGDIR=str(self.workdir),
                ZOO_LOG_DIR=str(self.workdir),
                JMXDISABLE="true",
                SERVER_JVMFLAGS=" ".join(
                    [
                        "-Xmx256m",
                        "-XX:+UseSerialGC",
                        f"-cp {_classpath()}",  # the last -cp wins over the Debian one
                        "-Dorg.slf4j.simpleLogger.showDateTime=true",
                        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
                        f"-Dzookeeper.log.dir={self.workdir}",
                    ]
                ),
            )
            with open(self.log_path, "ab") as log:
                log.write(f"==== {time.strftime('%H:%M:%S')} starting ZooKeeper on {self.hosts} ====\n".encode())
                log.flush()
                self._proc = subprocess.Popen(
                    [*_die_with_parent(), self.script, "start-foreground", str(self.cfg_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.workdir,  # a relative dataDir (as conf/zoo.cfg's) lands in the work directory
                    start_new_session=True,  # a Ctrl-C of pytest does not hit it before the fixture stops it
                )
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.running:
                raise RuntimeError(f"ZooKeeper exited at startup:\n{self.log_text(tail=60)}")
            if not self._port_open() and time.monotonic() < deadline:
                time.sleep(0.05)  # the JVM is still starting: no kazoo client (and its warnings) yet
                continue
            client = KazooClient(hosts=self.hosts, timeout=5.0)
            try:
                client.start(timeout=1.0)
                client.get_children("/")
                return
            except Exception:
                if time.monotonic() >= deadline:
                    self.stop()
                    raise RuntimeError(
                        f"ZooKeeper did not answer on {self.hosts} within {timeout_s}s:\n{self.log_text(tail=60)}"
                    ) from None
                time.sleep(0.1)
            finally:
                with contextlib.suppress(Exception):
                    client.stop()
                    client.close()

    def _port_open(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout_s``). Idempotent."""
        with self._mu:
            proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """SIGKILL the server (a crash: nothing flushed beyond what ZooKeeper wrote already)."""
        with self._mu:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def restart(self) -> None:
        """Stop, then start again on the same port with the same data."""
        self.stop()
        self.start()

    def log_text(self, tail: int | None = None) -> str:
        """The server log (all of it, or its last ``tail`` lines)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as e:
            return f"(no ZooKeeper log at {self.log_path}: {e})"
        if tail is not None:
            text = "\n".join(text.splitlines()[-tail:])
        return text

    def close(self) -> None:
        """Stop the server and delete its directory (if this object made it)."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _kill_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self.kill()

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def expire_session(store: Any, hosts: str, timeout_s: float = 20.0) -> None:
    """Expire the ZooKeeper session of ``store`` (anything with ``session_credentials()``) at the server,
    and wait until the store has noticed (it is on another session, or disconnected).

    A second client attaches to the same session and closes it. The store's own reconnect can steal
    the session back before the close arrives; then it is tried again.
    """
    creds = store.session_credentials()
    if creds is None:
        raise RuntimeError("the store is not connected")
    session_id, password = creds
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        other = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=10.0)
        try:
            other.start(timeout=5.0)
        except Exception:
            pass  # the session is already gone
        finally:
            with contextlib.suppress(Exception):
                other.stop()
                other.close()
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            now = store.session_credentials()
            if now is not None and now[0] != session_id:
                return
            time.sleep(0.02)
    raise RuntimeError(f"could not expire ZooKeeper session {session_id:#x}")


# --- pytest fixtures ------------------------------------------------------------------------
_SERVER_KEY = pytest.StashKey[ZooKeeperServer]()
_LOGGED_KEY = pytest.StashKey[bool]()


def started_server() -> ZooKeeperServer:
    """A private ZooKeeper server, started (FAILS the test if ZooKeeper is not installed or does not start)."""
    script = find_zk_server_script()
    if script is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    server = ZooKeeperServer(script)
    try:
        server.start()
    except RuntimeError as e:
        server.close()
        pytest.fail(str(e), pytrace=False)
    return server


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    """A private ZooKeeper server for the whole test session (FAILS if ZooKeeper is not installed)."""
    server = started_server()
    yield server
    # Storage handles that a test process cached (the Spark layer keeps one namespace per URI and
    # process) are closed while the server still answers: closed at exit, they would retry a
    # server that is gone.
    handles = sys.modules.get("dl_spark._handles")
    if handles is not None:
        with contextlib.suppress(Exception):
            handles.close_all()
    server.close()


@pytest.fixture
def zk_chroot(zk_server: ZooKeeperServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A chroot path of its own for this test (created by the store that first uses it)."""
    request.node.stash[_SERVER_KEY] = zk_server
    if not zk_server.running:  # a previous test stopped it and failed before restarting it
        zk_server.start()
    yield f"/t-{uuid.uuid4().hex[:12]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Attach the tail of the ZooKeeper log to the report of a failed test that used the server."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or item.stash.get(_LOGGED_KEY, False):
        return
    server = item.stash.get(_SERVER_KEY, None)
    if server is None and "zk_server" in getattr(item, "fixturenames", ()):
        server = getattr(item, "funcargs", {}).get("zk_server")
    if isinstance(server, ZooKeeperServer):
        item.stash[_LOGGED_KEY] = True
        report.sections.append(
            (
                f"ZooKeeper server log (last {LOG_TAIL_LINES} lines of {server.log_path})",
                server.log_text(LOG_TAIL_LINES),
            )
        )
