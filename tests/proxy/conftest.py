"""Fixtures of the write proxy tests: ZooKeeper namespaces bound to a shared local path or to Ceph RADOS, and
``proxy_process``, which runs ``dlog --uri URI proxy`` as a real subprocess.

* ``zk_local_uri``: a ZooKeeper namespace (a chroot of its own) bound to ``file://<tmp>/segments``.
* ``zk_rados_uri``: a ZooKeeper namespace bound to a RADOS namespace of its own on the session's Ceph cluster.
* ``proxy_ns_uri``: parametrized over both (``"zk-local"``, ``"zk-rados"``).
* ``proxy_process(uri, *args, conf=None, env=None, listen=None, expect_ready=True)`` starts a proxy, waits for
  its ``PROXY listening on HOST:PORT`` line and returns ``(process, "host:port")``; every proxy it started is
  stopped at teardown (SIGTERM, then SIGKILL after 20 s). ``conf`` adds ``--set KEY=VALUE`` overrides on top of
  :data:`PROXY_CONF` (a 2 s ZooKeeper session, so a killed proxy's streams are free again quickly). Its stderr
  goes to ``<tmp>/proxy-N.log`` (``ProxyProcess.log_text()``); ``env`` adds variables (e.g.
  ``DLOG_PROXY_FAILPOINT``). With ``expect_ready=False`` it returns at once with an empty address (a proxy
  expected to refuse to start: wait for it and read ``log_text()``).
* ``stub(address, token=None, tls_ca=None, client_cert=None)`` (module function): a gRPC stub of the generated
  code, and ``call_metadata(token)``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

import storage
from dl_proxy.proto import distributedlog_pb2_grpc as pb_grpc
from storage.segstore.rados import RadosLocation
from tests.storage.metastore.conftest import open_zk_store  # noqa: F401  (a fixture: ZooKeeper stores on a chroot)
from tests.zk import ZooKeeperServer

ROOT = Path(__file__).resolve().parents[2]
#: Conf overrides every test proxy gets (tests may override them).
PROXY_CONF: dict[str, object] = {"zkSessionTimeoutSeconds": 2}
#: How long a proxy may take to print its ready line.
READY_TIMEOUT_S = 60.0


@pytest.fixture
def zk_local_uri(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> str:
    """A ZooKeeper namespace bound to a local segment directory of its own."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    return uri


@pytest.fixture
def zk_rados_uri(zk_server: ZooKeeperServer, zk_chroot: str, rados_location: RadosLocation) -> str:
    """A ZooKeeper namespace bound to a RADOS namespace of its own."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=rados_location.uri())
    return uri


@pytest.fixture(params=["zk-local", "zk-rados"])
def proxy_ns_uri(request: pytest.FixtureRequest) -> str:
    """A ZooKeeper namespace bound to a shared local path, then (second run) to Ceph RADOS."""
    return str(request.getfixturevalue("zk_local_uri" if request.param == "zk-local" else "zk_rados_uri"))


@dataclass
class ProxyProcess:
    """A running ``dlog proxy``."""

    process: subprocess.Popen[str]
    address: str
    log_path: Path
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def terminate(self, timeout_s: float = 20.0) -> int:
        """SIGTERM, wait (SIGKILL after ``timeout_s``); the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


#: ``proxy_process(uri, *args, conf=None, env=None, listen=None, expect_ready=True, verbose=False)
#: -> (Popen, "host:port")`` (``verbose``: ``dlog -v``, INFO lines such as stream acquisitions in its log).
StartProxy = Callable[..., tuple["subprocess.Popen[str]", str]]


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("DLOG_PROXY_FAILPOINT", None)
    env.pop("DLOG_PROXY_TOKEN", None)
    env.update(extra or {})
    return env


@pytest.fixture
def proxy_processes(tmp_path: Path) -> Iterator[list[ProxyProcess]]:
    """Every proxy started by ``proxy_process`` in this test (stopped at teardown)."""
    started: list[ProxyProcess] = []
    yield started
    for p in started:
        p.terminate()


@pytest.fixture
def proxy_process(proxy_processes: list[ProxyProcess], tmp_path: Path) -> StartProxy:
    """Starts ``dlog --uri URI proxy`` processes (see the module docstring)."""

    def start(
        uri: str,
        *args: str,
        conf: dict[str, object] | None = None,
        env: dict[str, str] | None = None,
        listen: str | None = None,
        expect_ready: bool = True,
        verbose: bool = False,
    ) -> tuple[subprocess.Popen[str], str]:
        settings = {**PROXY_CONF, **(conf or {})}
        cmd = [sys.executable, "-m", "dlog", *(["-v"] if verbose else []), "--uri", uri, "proxy"]
        if listen is not None:
            cmd += ["--listen", listen]
        for k, v in settings.items():
            cmd += ["--set", f"{k}={v}"]
        cmd += list(args)
        log_path = tmp_path / f"proxy-{len(proxy_processes)}.log"
        with open(log_path, "w") as log_file:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=log_file, text=True, env=_env(env), cwd=str(ROOT)
            )
        pp = ProxyProcess(proc, "", log_path)
        proxy_processes.append(pp)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                pp.lines.put(line.rstrip("\n"))
            pp.lines.put("")  # EOF

        threading.Thread(target=pump, daemon=True).start()
        if not expect_ready:
            return proc, ""
        try:
            line = pp.lines.get(timeout=READY_TIMEOUT_S)
        except queue.Empty:
            line = ""
        prefix = "PROXY listening on "
        if not line.startswith(prefix):
            pp.kill()
            raise AssertionError(f"proxy did not start (first line {line!r}); its log:\n{pp.log_text()[-4000:]}")
        pp.address = line[len(prefix) :].strip()
        return proc, pp.address

    return start


def call_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata carrying ``token``."""
    return () if token is None else (("authorization", f"Bearer {token}"),)


def stub(
    address: str,
    *,
    tls_ca: bytes | None = None,
    client_cert: tuple[bytes, bytes] | None = None,
    server_name: str | None = None,
) -> tuple[grpc.Channel, pb_grpc.DistributedLogServiceStub]:
    """A channel and the generated stub for the proxy at ``address`` (TLS with ``tls_ca``; ``client_cert`` =
    (key, cert) PEM). Close the channel when done."""
    if tls_ca is not None:
        key, cert = client_cert if client_cert is not None else (None, None)
        creds = grpc.ssl_channel_credentials(root_certificates=tls_ca, private_key=key, certificate_chain=cert)
        options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
        channel = grpc.secure_channel(address, creds, options=options)
    else:
        channel = grpc.insecure_channel(address)
    return channel, pb_grpc.DistributedLogServiceStub(channel)
