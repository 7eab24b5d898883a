"""An S3 endpoint on the test cluster: one ``radosgw`` (Debian package ``radosgw``) on loopback, for the cold
storage tests (:mod:`storage.cold`).

:meth:`ClusterGateway.start_radosgw` writes a ``[client.rgw.gw]`` section into ``ceph.conf`` (beast frontend on
127.0.0.1 and a free port), gives ``client.rgw.gw`` a cephx key (``mon 'allow rw' osd 'allow rwx'``: the gateway
creates its own pools), starts the daemon (its PID in ``pids/rgw.gw``, so :meth:`stop` stops it with the cluster),
waits until it answers HTTP, and creates one S3 user and one bucket. A second call after
:meth:`ClusterGateway.stop_radosgw` restarts it on the same port (an outage and its end, for tests).

Traps (and what this module does about them):

* with ``auth none`` the gateway, a daemon-context client, loops on ``get_initial_auth_request returned -13``:
  ``ms_mon_client_mode = crc secure`` in its section (harmless with cephx);
* the first start on a fresh cluster takes about 10 s: the gateway creates 4+ pools.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from tools.ceph.base import CephClusterError, tail
from tools.ceph.daemons import ClusterDaemons

__all__ = ["ClusterGateway", "RadosGateway"]

_NAME = "rgw.gw"
_USER = "dltest"


@dataclass(frozen=True)
class RadosGateway:
    """A running gateway: where it listens and the S3 user made for the tests."""

    endpoint: str  # HOST:PORT
    access_key: str
    secret_key: str
    bucket: str

    def cold_uri(self, prefix: str) -> str:
        """An ``s3://`` cold store URI of ``prefix`` in the test bucket, through this gateway."""
        return f"s3://{self.bucket}/{prefix.strip('/')}?endpoint={self.endpoint}&scheme=http&region=us-east-1"


def _free_port(rng: random.Random) -> int:
    import socket

    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise CephClusterError("no free port for radosgw")


class ClusterGateway(ClusterDaemons):
    """The radosgw of a test cluster (loopback clusters only)."""

    _rgw: RadosGateway | None = None

    def _rgw_port(self) -> int | None:
        text = self.conf_path.read_text()
        marker = "rgw_frontends = beast endpoint=127.0.0.1:"
        for line in text.splitlines():
            if line.startswith(marker):
                return int(line[len(marker) :])
        return None

    def start_radosgw(self, timeout: float = 120.0) -> RadosGateway:
        """Start (or restart) the gateway and return it once it answers, with its S3 user and bucket.

        Raises:
            CephClusterError: a placed cluster (not supported), the daemon exited, or it did not answer within
                ``timeout`` seconds (with its log tail).
        """
        if self.placed:
            raise CephClusterError("radosgw runs only on a loopback cluster")
        if _NAME in self.pids() and self._rgw is not None:
            return self._rgw
        port = self._rgw_port()
        if port is None:
            port = _free_port(random.Random())
            d = self.directory
            (d / "rgw").mkdir(exist_ok=True)
            with self.conf_path.open("a") as f:
                f.write(
                    f"\n[client.rgw.gw]\n"
                    f"rgw_frontends = beast endpoint=127.0.0.1:{port}\n"
                    f"rgw_data = {d}/rgw\n"
                    f"log_file = {d}/log/ceph-client.rgw.gw.log\n"
                    f"admin_socket = {d}/run/rgw.gw.asok\n"
                    "rgw_dns_name = 127.0.0.1\n"
                    "rgw_thread_pool_size = 16\n"
                    "rgw_enable_usage_log = false\n"
                    # a daemon-context client: its mon connection defaults to secure mode, which auth none lacks
                    "ms_mon_client_mode = crc secure\n"
                )
            if self.cephx:
                self.ceph("auth", "get-or-create", "client.rgw.gw", "mon", "allow rw", "osd", "allow rwx")
                self.ceph("auth", "get", "client.rgw.gw", "-o", str(d / "ceph.client.rgw.gw.keyring"))
        self._spawn(_NAME, ["radosgw", "-c", str(self.conf_path), "-n", "client.rgw.gw", "-f"])
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + timeout
        t0 = time.monotonic()
        last_say = t0
        while True:
            self._check_alive([_NAME])
            try:
                with urllib.request.urlopen(url, timeout=2):
                    break
            except urllib.error.HTTPError:
                break  # any HTTP answer: it serves
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise CephClusterError(
                    f"radosgw did not answer on {url} within {timeout}s\n"
                    f"--- {self.log_dir / 'ceph-client.rgw.gw.log'} (tail) ---\n"
                    f"{tail(self.log_dir / 'ceph-client.rgw.gw.log')}"
                )
            if time.monotonic() - last_say > 5:
                self._say(f"waiting for radosgw to answer on {url} ({time.monotonic() - t0:.0f}s)")
                last_say = time.monotonic()
            time.sleep(0.2)
        self._say(f"radosgw answers on {url} after {time.monotonic() - t0:.1f}s")
        if self._rgw is None:
            self._rgw = self._make_user_and_bucket(f"127.0.0.1:{port}")
        return self._rgw

    def _make_user_and_bucket(self, endpoint: str) -> RadosGateway:
        access, secret, bucket = "DLTESTACCESSKEY", "dltestsecretkey0123456789", "dltest"
        admin = ["radosgw-admin", "-c", str(self.conf_path), "-n", "client.admin"]
        keys = ["--access-key", access, "--secret-key", secret]
        with contextlib.suppress(CephClusterError):  # exists after a restart of the same cluster
            self._run(
                [*admin, "user", "create", "--uid", _USER, "--display-name", _USER, *keys],
                timeout=60,
            )
        gw = RadosGateway(endpoint, access, secret, bucket)
        _make_bucket(gw)
        return gw

    def stop_radosgw(self) -> None:
        """Stop the gateway (SIGKILL: an abrupt outage); :meth:`start_radosgw` starts it again on the same port."""
        pid = self.pids().get(_NAME)
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        proc = self._procs.pop(_NAME, None)
        if proc is not None:
            proc.wait(30)
        with contextlib.suppress(OSError):
            (self.pid_dir / _NAME).unlink()


def _make_bucket(gw: RadosGateway) -> None:
    """Create the test bucket with a signed S3 request (pyarrow, as the product talks to S3)."""
    os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
    os.environ.setdefault("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(
        access_key=gw.access_key,
        secret_key=gw.secret_key,
        endpoint_override=gw.endpoint,
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    )
    if fs.get_file_info(gw.bucket).type != pafs.FileType.Directory:
        fs.create_dir(gw.bucket)
