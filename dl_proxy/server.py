"""The write proxy process (``dlog proxy``): serve :mod:`dl_proxy.service` over gRPC until SIGTERM.

Start-up: check the listen address (a non-loopback one needs TLS and a token; a wildcard one, ``0.0.0.0`` or
``[::]``, also an advertised address), bind the port, open the namespace with the proxy's address (the advertised
one, else the listen one) as its lock owner id (so a refused proxy learns where to redirect), serve, announce
itself in ZooKeeper (:mod:`dl_proxy.registry`), then print exactly one line ``PROXY listening on HOST:PORT``
(that address). The ZooKeeper session timeout is the conf's ``zkSessionTimeoutSeconds`` (DistributedLog's proxies
ran with 1 s): it bounds how long a dead proxy's streams stay locked.

SIGTERM (or SIGINT): announce DOWN, refuse new streams, stop accepting RPCs and let those in flight finish (a few
seconds at most), release every owned stream (another proxy takes each over at once, without waiting for a
session timeout), remove the announcement, close the namespace, exit 0.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc

from dl_proxy.proto import distributedlog_pb2_grpc as pb_grpc
from dl_proxy.registry import Announcement, is_loopback
from dl_proxy.service import DistributedLogService, ProxyCore
from storage.config import Config
from storage.errors import DLError, InvalidArgumentError
from storage.log.namespace import open_namespace

log = logging.getLogger(__name__)

#: Environment variable holding the shared auth token (the clients read the same one).
TOKEN_ENV = "DLOG_PROXY_TOKEN"
#: Largest gRPC message (a bulk write of many records).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: How long in-flight requests may finish after SIGTERM.
GRACE_S = 5.0


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    client_ca: Path | None = None


def is_wildcard(host: str) -> bool:
    """True for an address that means every interface (``0.0.0.0``, ``::``, ``[::]``, ``*``): no client can
    connect to it, so it is never announced."""
    if host == "*":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def parse_listen(listen: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` (port 0: a free one).

    Raises:
        InvalidArgumentError: not HOST:PORT.
    """
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise InvalidArgumentError(f"--listen must be HOST:PORT, not {listen!r}")
    return host, int(port)


def parse_advertise(advertise: str | None, listen: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``--advertise HOST:PORT`` for the listen address ``listen``, or None (no advertise:
    the listen address is announced). Port 0 stands for the port the proxy binds (the listen port, or the free
    one picked for a listen port 0); a fixed advertised port may differ from a fixed listen port (a port forward).

    Raises:
        InvalidArgumentError: a wildcard listen address without ``advertise``; ``advertise`` not HOST:PORT, a
            wildcard itself, or a fixed port while the listen port is 0 (no one can forward to a port not yet
            picked).
    """
    listen_host, listen_port = parse_listen(listen)
    if advertise is None:
        if is_wildcard(listen_host):
            raise InvalidArgumentError(
                f"--listen {listen} listens on every interface, which is no address clients can connect to: "
                f"add --advertise HOST:PORT, the address clients reach this proxy at (it is announced, and it "
                f"names this proxy as the owner of its streams)"
            )
        return None
    host, sep, port = advertise.rpartition(":")
    if not sep or not host or "/" in advertise or not port.isdigit() or not 0 <= int(port) < 65536:
        raise InvalidArgumentError(
            f"--advertise must be HOST:PORT (port 0: the port the proxy listens on), not {advertise!r}"
        )
    if is_wildcard(host):
        raise InvalidArgumentError(
            f"--advertise {advertise} is a wildcard address: advertise the host name or address clients reach "
            f"this proxy at"
        )
    if int(port) != 0 and listen_port == 0:
        raise InvalidArgumentError(
            f"--advertise {advertise} names a fixed port but --listen {listen} picks a free one: give --listen a "
            f"fixed port, or use --advertise {host}:0 to announce the port picked"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address: clients need the brackets
    return host, int(port)


def check_security(host: str, tls: TlsFiles | None, token: str | None) -> None:
    """A non-loopback listen address needs TLS and a token.

    Raises:
        InvalidArgumentError: it has not both (one line saying what to add).
    """
    if is_loopback(host):
        return
    where = f"listening on non-loopback address {host}"
    add_token = f"--token-file FILE (or set ${TOKEN_ENV})"
    if tls is None and not token:
        raise InvalidArgumentError(f"{where} needs TLS and a shared token: add --tls-cert/--tls-key and {add_token}")
    if tls is None:
        raise InvalidArgumentError(f"{where} needs TLS as well as the token: add --tls-cert/--tls-key")
    if not token:
        raise InvalidArgumentError(f"{where} needs a shared token as well as TLS: add {add_token}")


def read_token(token_file: str | None) -> str | None:
    """The token from ``token_file`` (stripped), else ``$DLOG_PROXY_TOKEN``, else None.

    Raises:
        InvalidArgumentError: the file cannot be read or is empty.
    """
    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise InvalidArgumentError(f"cannot read the token file {token_file}: {e}") from e
        if not token:
            raise InvalidArgumentError(f"the token file {token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


class ProxyServer:
    """One running proxy. ``start()`` serves; ``stop()`` shuts down gracefully.

    ``advertise`` (``HOST:PORT``, port 0: the port bound): the address announced and used as the lock owner id
    (default: the listen address; required when that is a wildcard, see :func:`parse_advertise`).

    Raises:
        InvalidArgumentError: a bad listen or advertise address, a wildcard listen address without
            ``advertise``, missing TLS/token for a non-loopback address, ``threads`` < 1, unreadable TLS files,
            a port that cannot be bound.
        DLError: the namespace cannot be opened (NamespaceNotFoundError, MetadataError...).
    """

    def __init__(
        self,
        uri: str,
        conf: Config,
        *,
        listen: str = "127.0.0.1:0",
        tls: TlsFiles | None = None,
        token: str | None = None,
        threads: int = 128,
        advertise: str | None = None,
    ) -> None:
        host, port = parse_listen(listen)
        check_security(host, tls, token)
        advertised = parse_advertise(advertise, listen)
        if threads < 1:
            raise InvalidArgumentError(f"--threads must be at least 1, not {threads}")
        self._uri = uri
        self._conf = conf
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dl-proxy-rpc"),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        bind = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
        try:
            if tls is not None:
                creds = grpc.ssl_server_credentials(
                    [(tls.key.read_bytes(), tls.cert.read_bytes())],
                    root_certificates=tls.client_ca.read_bytes() if tls.client_ca else None,
                    require_client_auth=tls.client_ca is not None,
                )
                bound = self._server.add_secure_port(bind, creds)
            else:
                bound = self._server.add_insecure_port(bind)
        except OSError as e:
            raise InvalidArgumentError(f"cannot read the TLS files: {e}") from e
        except RuntimeError as e:
            raise InvalidArgumentError(f"cannot listen on {listen}: {e}") from e
        if not bound:
            raise InvalidArgumentError(f"cannot listen on {listen} (address in use or not local)")
        #: The announced address, also the lock owner id: the advertised one (its port 0: the port bound), or
        #: the listen address with the port bound.
        self.address = f"{host}:{bound}" if advertised is None else f"{advertised[0]}:{advertised[1] or bound}"
        self.tls = tls is not None
        self._token = token
        self._ns = open_namespace(uri, conf, client_id=self.address)
        self.announcement: Announcement | None = None
        self.core = ProxyCore(self._ns, conf, self.address, None)
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._servicer: DistributedLogService | None = None

    def start(self) -> None:
        """Serve, then announce.

        Raises:
            MetadataError: the announcement failed (the server is stopped again).
        """
        self._servicer = DistributedLogService(self.core, self._token)
        pb_grpc.add_DistributedLogServiceServicer_to_server(self._servicer, self._server)
        self._server.start()
        try:
            ann = Announcement(self._ns.metastore, self.address, tls=self.tls)
            ann.start()
        except BaseException:
            self._server.stop(None)
            self._ns.close()
            raise
        self.announcement = self.core.announcement = ann
        if self._ns.stats_port is not None:
            log.info(
                "metrics on http://%s:%d/metrics", self._conf.get("prometheusStatsHttpAddress"), self._ns.stats_port
            )

    def stop(self) -> None:
        """Graceful shutdown (see the module). Idempotent; never raises."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self.core.shutting_down = True
            try:
                if self.announcement is not None:
                    self.announcement.set_status("DOWN")
            except DLError as e:
                log.info("could not announce DOWN: %s", e)
            self._server.stop(GRACE_S).wait(GRACE_S + 1)
            if self._servicer is not None:
                self._servicer.writes.close()
            self.core.shutdown()
            if self.announcement is not None:
                self.announcement.close()
            self._ns.close()
            self._stopped.set()

    def wait(self) -> None:
        self._stopped.wait()


def run(
    uri: str,
    conf: Config,
    *,
    out: Callable[[str], None],
    listen: str = "127.0.0.1:0",
    tls: TlsFiles | None = None,
    token: str | None = None,
    threads: int = 128,
    advertise: str | None = None,
) -> None:
    """Run a proxy until SIGTERM/SIGINT (main thread only): prints ``PROXY listening on HOST:PORT`` once serving.

    Raises:
        InvalidArgumentError: as :class:`ProxyServer` (bad listen or advertise address, a wildcard listen address
            without ``advertise``, missing TLS/token for a non-loopback address, ``threads`` < 1, unreadable files).
        DLError: the namespace cannot be opened (NamespaceNotFoundError, MetadataError...).
        MetadataError: the announcement failed.
    """
    server = ProxyServer(uri, conf, listen=listen, tls=tls, token=token, threads=threads, advertise=advertise)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.start()
        out(f"PROXY listening on {server.address}")
        while not stop.wait(0.5):
            pass
        log.info("stopping: releasing %d streams", len(server.core.owned()))
    finally:
        server.stop()
        for s, h in old.items():
            signal.signal(s, h)
