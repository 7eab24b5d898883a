"""Spark standalone on simulated hosts: a master and workers, run by pyspark's own ``bin/spark-class``.

Master: ``spark-class org.apache.spark.deploy.master.Master --host <addr> --port 7077 --webui-port 8080``;
worker: ``spark-class org.apache.spark.deploy.worker.Worker --host <addr> --cores 1 --memory 1g --work-dir
<dir>/spark/<name>/work spark://<master addr>:7077``. Both with ``SPARK_LOCAL_IP=<addr>``, a 256 MiB daemon
heap (``SPARK_DAEMON_MEMORY``), ``SPARK_DAEMON_JAVA_OPTS`` naming the cluster directory (how the harness
recognises its processes), and the venv's interpreter as ``PYSPARK_PYTHON``. ``spark-class`` runs a
launcher JVM first, then execs the daemon's JVM (so the recorded PID is the daemon's). Logs:
``<dir>/spark/<name>.log``. The master's readiness and its workers come from its web UI's ``/json``, fetched
from the master's own host.

A driver on a client host needs ``spark.master = spark://<master addr>:7077`` and ``spark.driver.host =
spark.driver.bindAddress = <client addr>`` (executors connect back to it): :func:`driver_conf`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.netsim.hosts import NetError, Network
from tools.netsim.procs import Component, ComponentError, Spawner, spawn_logged

__all__ = ["MASTER_PORT", "WEBUI_PORT", "SparkDaemon", "driver_conf", "find_spark_class", "http_get"]

MASTER_PORT = 7077
WEBUI_PORT = 8080
WORKER_WEBUI_PORT = 8081
DAEMON_MEMORY = "256m"
DAEMON_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true"


def find_spark_class(python: str) -> Path | None:
    """pyspark's ``bin/spark-class`` for interpreter ``python`` (this process's pyspark if it is that
    interpreter, else asked from it), or None."""
    same = os.path.realpath(python) == os.path.realpath(sys.executable)
    spec = importlib.util.find_spec("pyspark") if same else None
    if spec is not None and spec.submodule_search_locations:
        base = Path(next(iter(spec.submodule_search_locations)))
    else:
        code = "import importlib.util as u; s = u.find_spec('pyspark'); print(s.submodule_search_locations[0])"
        try:
            out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode != 0 or not out.stdout.strip():
            return None
        base = Path(out.stdout.strip())
    script = base / "bin" / "spark-class"
    return script if os.access(script, os.X_OK) else None


def http_get(network: Network, host: str, addr: str, port: int, path: str, timeout: float = 3.0) -> bytes:
    """The body of ``GET http://addr:port/path`` fetched from inside ``host`` (HTTP/1.0).

    Raises:
        OSError: no connection, a timeout, or a status other than 200.
        NetError: no socket could be made in ``host``.
    """
    s = network.connect(host, addr, port, timeout)
    try:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: {addr}:{port}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    finally:
        s.close()
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        raise OSError(f"GET {path} from {addr}:{port}: {status.decode(errors='replace')}")
    return body


def driver_conf(network: Network, master_host: str, driver_host: str) -> dict[str, str]:
    """Spark settings of a driver running on ``driver_host`` against the master on ``master_host``."""
    addr = network.addr(driver_host)
    return {
        "spark.master": f"spark://{network.addr(master_host)}:{MASTER_PORT}",
        "spark.driver.host": addr,
        "spark.driver.bindAddress": addr,
    }


class SparkDaemon(Component):
    """The Spark master (``kind="master"``) or a worker (``kind="worker"``) on host ``host``."""

    def __init__(
        self,
        name: str,
        host: str,
        kind: str,
        network: Network,
        spawner: Spawner,
        directory: Path,
        marker: str,
        spark_class: Path,
        python: str,
        master_host: str,
        get_pid: Callable[[str], int | None],
        set_pid: Callable[[str, int | None], None],
        on_fault: Callable[[str, Component, int | None], None] | None = None,
    ) -> None:
        super().__init__(name, host, network.host(host).netns, marker, on_fault)
        if kind not in ("master", "worker"):
            raise ValueError(f"kind must be master or worker, not {kind!r}")
        self.kind = kind
        self.role = f"spark-{kind}"
        self.network = network
        self.spawner = spawner
        self.directory = directory
        self.spark_class = spark_class
        self.python = python
        self.master_host = master_host
        self.addr = network.addr(host)
        self._get_pid = get_pid
        self._set_pid = set_pid

    @property
    def master_url(self) -> str:
        """``spark://<master addr>:7077``."""
        return f"spark://{self.network.addr(self.master_host)}:{MASTER_PORT}"

    @property
    def log_path(self) -> Path:
        """Its log (the JVM's stdout and stderr)."""
        return self.directory.parent / f"{self.name}.log"

    def recorded_pid(self) -> int | None:
        """The recorded PID."""
        return self._get_pid(self.name)

    def argv(self) -> list[str]:
        """The ``spark-class`` command line."""
        if self.kind == "master":
            return [
                str(self.spark_class),
                "org.apache.spark.deploy.master.Master",
                "--host",
                self.addr,
                "--port",
                str(MASTER_PORT),
                "--webui-port",
                str(WEBUI_PORT),
            ]
        return [
            str(self.spark_class),
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            self.addr,
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            str(WORKER_WEBUI_PORT),
            "--work-dir",
            str(self.directory / "work"),
            self.master_url,
        ]

    def env(self) -> dict[str, str]:
        """Its environment: this one without Spark/PySpark settings of the caller, plus its own."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_", "_JAVA_OPTIONS"))}
        env.update(
            SPARK_LOCAL_IP=self.addr,
            SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
            SPARK_DAEMON_JAVA_OPTS=f"{DAEMON_JAVA_OPTS} -Ddlc.dir={self.marker}",
            SPARK_LOCAL_DIRS=str(self.directory / "tmp"),
            SPARK_WORKER_DIR=str(self.directory / "work"),
            SPARK_CONF_DIR=str(self.directory / "conf"),
            PYSPARK_PYTHON=self.python,
            PYSPARK_DRIVER_PYTHON=self.python,
        )
        return env

    def _start(self) -> int:
        for sub in ("tmp", "work", "conf"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        proc = spawn_logged(
            self.spawner, self.network.exec_prefix(self.host), self.argv(), self.log_path, self.env(), self.directory
        )
        self._set_pid(self.name, proc.pid)
        return proc.pid

    def master_json(self, timeout: float = 3.0) -> dict[str, Any]:
        """The master's ``/json`` (asked from the master's host).

        Raises:
            OSError: the master did not answer (or not with JSON).
            NetError: no socket in the master's host.
        """
        body = http_get(
            self.network, self.master_host, self.network.addr(self.master_host), WEBUI_PORT, "/json/", timeout
        )
        try:
            data = json.loads(body)
        except ValueError as e:
            raise OSError(f"the master's /json is no JSON: {e}") from None
        if not isinstance(data, dict):
            raise OSError("the master's /json is no object")
        return data

    def registered(self, timeout: float = 3.0) -> bool:
        """Master: whether its web UI answers with status ALIVE; worker: whether the master lists it ALIVE."""
        try:
            data = self.master_json(timeout)
        except (OSError, NetError):
            return False
        if self.kind == "master":
            return str(data.get("status", "")) == "ALIVE"
        return any(
            w.get("host") == self.addr and w.get("state") == "ALIVE"
            for w in data.get("workers", [])
            if isinstance(w, dict)
        )

    def wait_ready(self, timeout: float = 90.0) -> float:
        """Wait until the master serves / the worker is registered ALIVE; return the seconds waited.

        Raises:
            ComponentError: it exited or was not ready in time (with its log tail).
        """
        t0 = time.monotonic()
        while True:
            if self.pid() is None:
                raise ComponentError(f"{self.name} exited:\n{self.log_tail()}")
            if self.registered(2.0):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise ComponentError(f"{self.name} not ready after {timeout}s:\n{self.log_tail()}")
            time.sleep(0.25)

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of its log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"(no log {self.log_path}: {e.strerror})"
