"""The gateway as a server: py4j's Python server around a :class:`jvm_shim.gateway.Gateway` (:func:`serve`,
:class:`GatewayServer`). The process around it (``python -m jvm_shim``, ``dlog gateway``) is :mod:`jvm_shim.process`.

py4j is imported only when a server starts.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from jvm_shim.channel import DataChannel
from jvm_shim.gateway import Gateway
from storage import Config
from storage.errors import InvalidArgumentError

log = logging.getLogger("jvm_shim.gateway")

#: The environment variable a parent process passes the auth token in (never on the command line).
TOKEN_ENV = "DLOG_GATEWAY_TOKEN"
#: Default listening address: loopback only.
DEFAULT_ADDRESS = "127.0.0.1"
#: How long a clean shutdown may take before the process exits anyway (locks die with it).
SHUTDOWN_GRACE_S = 30.0


# --- the server ---------------------------------------------------------------------------------
def is_loopback(address: str) -> bool:
    """True when every address ``address`` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(address, None)
    except (socket.gaierror, UnicodeError):
        return False
    try:
        return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)
    except ValueError:
        return False


def _fast_py4j_bytes() -> None:
    """py4j decodes every ``byte[]`` argument into ``bytes`` one byte at a time in a Python loop (tens
    of milliseconds per MiB); decode it in one call instead. Same input, same output (``bytes``)."""
    from base64 import standard_b64decode

    import py4j.protocol

    if getattr(py4j.protocol.decode_bytearray, "_jvm_shim", False):
        return

    def decode_bytearray(encoded: str) -> bytes:
        return standard_b64decode(encoded.encode("ascii"))

    decode_bytearray._jvm_shim = True  # type: ignore[attr-defined]
    py4j.protocol.decode_bytearray = decode_bytearray


#: py4j servers started by :func:`serve`, whose accepted connections get ``TCP_NODELAY``.
_OWN_SERVERS: weakref.WeakSet[Any] = weakref.WeakSet()


def _set_no_delay(sender: object, **params: object) -> None:
    """py4j's ``server_connection_started`` receiver: ``TCP_NODELAY`` on the accepted socket of one of our
    servers, so a response written in pieces is not held back by Nagle's algorithm (the Java side sets it
    on its end too)."""
    if sender not in _OWN_SERVERS:
        return
    sock = getattr(params.get("connection"), "socket", None)
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _no_delay_connections() -> None:
    from py4j.java_gateway import server_connection_started

    server_connection_started.connect(_set_no_delay, unique_id="jvm_shim-tcp-nodelay")  # once: same unique_id


class GatewayServer:
    """A running gateway: py4j's Python server around a :class:`Gateway`. Stop it with :meth:`stop`."""

    def __init__(
        self, gateway: Gateway, client_server: Any, address: str, port: int, token: str, channel: DataChannel
    ) -> None:
        self.gateway = gateway
        #: The data channel (:mod:`jvm_shim.channel`) beside py4j's server, same address and token.
        self.channel = channel
        self.address = address
        #: The port the server listens on (the bound one when 0 was asked for).
        self.port = port
        self.token = token
        self._client_server = client_server
        self._stopped = False
        self._stop_lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until a stop was requested (``gateway.shutdown``); True if it was."""
        return self.gateway.shutdown_requested.wait(timeout)

    def stop(self) -> None:
        """Close every handle of the gateway (in-flight calls then fail or return), then stop py4j's
        server and close its connections. Idempotent."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        self.gateway.close()
        self.channel.stop()
        server = self._client_server.get_callback_server()
        if server is not None:
            # py4j closes a connection's buffered stream before its socket; a connection thread blocked
            # reading that stream holds the stream's lock, so the close would wait for the client's next
            # command forever. Shutting the sockets down first ends those reads (EOF) at once.
            with server.lock:
                connections = list(server.connections)
            for connection in connections:
                sock = getattr(connection, "socket", None)
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
        # Only the Python server: JavaGateway.shutdown() would also try to connect to a Java gateway
        # (there is none) to send it a shutdown command.
        self._client_server.shutdown_callback_server()

    def __enter__(self) -> GatewayServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    uri: str | None,
    *,
    port: int = 0,
    address: str = DEFAULT_ADDRESS,
    auth_token: str,
    allow_remote: bool = False,
    conf: Config | Mapping[str, object] | None = None,
) -> GatewayServer:
    """Open the gateway (``uri`` may be None: namespaces per call only) and start py4j's Python server
    on ``address:port`` (``port`` 0 = a free port; :attr:`GatewayServer.port` is the bound one) with
    ``auth_token`` required of every connection. Returns once the server accepts connections.

    Raises:
        InvalidArgumentError: an empty token, a bad port, or a non-loopback ``address`` without
            ``allow_remote``.
        DLError: ``uri`` cannot be opened. UnexpectedError: the server cannot listen (port in use).
    """
    from py4j.clientserver import ClientServer, JavaParameters, PythonParameters
    from py4j.java_gateway import server_started
    from py4j.protocol import Py4JNetworkError

    from storage.errors import UnexpectedError

    if not isinstance(auth_token, str) or not auth_token:
        raise InvalidArgumentError("the gateway requires an auth token")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidArgumentError(f"port must be 0..65535, got {port!r}")
    if not allow_remote and not is_loopback(address):
        raise InvalidArgumentError(
            f"refusing to listen on {address!r}: not a loopback address (the gateway serves every log of the "
            "namespace to whoever has the token; allow it explicitly to listen beyond this machine)"
        )
    _fast_py4j_bytes()
    _no_delay_connections()
    gateway = Gateway(uri, conf)
    listening = threading.Event()
    servers: list[object] = []

    def on_started(sender: object, **_: object) -> None:
        servers.append(sender)
        listening.set()

    signal_id = f"jvm_shim-{id(gateway)}"
    server_started.connect(on_started, unique_id=signal_id)
    try:
        client_server = ClientServer(
            # The gateway never calls Java. Should py4j try anyway (it does on a failed start, to send a
            # shutdown command), port 0 is refused at once: neither the token nor a shutdown reaches
            # whatever else listens on py4j's default port 25333.
            java_parameters=JavaParameters(address="127.0.0.1", port=0, eager_load=False, auto_convert=False),
            python_parameters=PythonParameters(
                address=address,
                port=port,
                auth_token=auth_token,
                daemonize=True,
                daemonize_connections=True,
                eager_load=True,
            ),
            python_server_entry_point=gateway,
        )
    except Py4JNetworkError as e:
        gateway.close()
        raise UnexpectedError(f"the gateway cannot listen on {address}:{port}: {e.cause or e}") from e
    except BaseException:
        gateway.close()
        raise
    try:
        callback_server = client_server.get_callback_server()
        _OWN_SERVERS.add(callback_server)
        deadline = time.monotonic() + 10.0
        while callback_server not in servers and time.monotonic() < deadline:  # bound, but not yet listening
            listening.wait(0.05)
            listening.clear()
    finally:
        server_started.disconnect(on_started, unique_id=signal_id)
    bound = int(callback_server.get_listening_port())
    listen_address = str(callback_server.get_listening_address())
    try:
        channel = DataChannel(gateway, listen_address, auth_token)
    except OSError as e:
        client_server.shutdown_callback_server()
        gateway.close()
        raise UnexpectedError(f"the gateway's data channel cannot listen on {listen_address}: {e}") from e
    gateway.data_port = channel.port
    log.info(
        "gateway listening on %s:%d, data channel on port %d (namespace %s)",
        listen_address,
        bound,
        channel.port,
        uri or "per call",
    )
    return GatewayServer(gateway, client_server, listen_address, bound, auth_token, channel)
