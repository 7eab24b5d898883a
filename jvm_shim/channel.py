"""The gateway's data channel: the operations of :mod:`jvm_shim.protocol` over a plain, authenticated
loopback socket, for the calls that carry records.

Why a second socket: py4j passes a ``byte[]`` as base64 text inside a text command, so every record byte
is encoded by the JVM, decoded by CPython (about 400 MB/s on one core, holding the GIL) and parsed as a
line first. Profiling the gateway under Java writers of 1 KiB records put base64 decoding alone at 30% of
the time the gateway held the GIL, and py4j's command parsing at another 20%. PySpark makes the same
split: py4j for control, local sockets authenticated with a secret for bulk data. Here py4j stays the
entry point (handshake, ``gateway.ping`` advertising this channel's port, every other operation) and the
Java classes send ``writer.write``, ``writer.await`` and ``reader.read`` over this channel when the gateway
offers one (``"dataPort"`` in the ``gateway.ping`` result); a JVM that does not use it loses nothing but
speed.

Wire format (integers unsigned 32-bit big-endian)::

    hello     client -> gateway   u32 n, n bytes: the gateway's auth token (UTF-8)
              gateway -> client   1 byte: 0 accepted (anything else, or the connection closing: refused)
    request   client -> gateway   u32 op_len, u32 args_len, u32 data_len, then op (UTF-8), args (UTF-8
                                  JSON object), data (binary): exactly ``PythonGateway.call(op, args, data)``
    response  gateway -> client   u32 n, n bytes: the response envelope of :mod:`jvm_shim.protocol`

One connection serves one client thread's calls in order (one request, then its response); the gateway
gives each connection its own thread, as py4j does. A wrong token, a hello not sent within
:data:`HELLO_TIMEOUT_S`, or a malformed frame closes the connection without serving anything. The channel
listens on the gateway's address (loopback unless the gateway was allowed otherwise) on a free port.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import logging
import socket
import struct
import threading
from typing import Protocol

log = logging.getLogger("jvm_shim.channel")

_U32 = struct.Struct(">I")
_REQUEST = struct.Struct(">III")
#: Seconds a new connection has to send its hello.
HELLO_TIMEOUT_S = 10.0
#: Largest token, operation name and JSON arguments accepted (bytes): anything longer is not a client.
MAX_TOKEN_BYTES = 4096
MAX_OP_BYTES = 256
MAX_ARGS_BYTES = 1 << 20
#: Largest data part of one request (bytes); the Java writer sends at most 256 KiB per call by default.
MAX_DATA_BYTES = 256 << 20
ACCEPTED = b"\x00"
REFUSED = b"\x01"


class CallTarget(Protocol):
    """What the channel serves: ``call(op, args, data) -> response bytes`` that never raises
    (:meth:`jvm_shim.gateway.Gateway.call`)."""

    def call(self, op: str, args: str | None, data: bytes | bytearray | None) -> bytes: ...


class _ClosedError(Exception):
    """The peer closed the connection (or sent a frame this side refuses)."""


def _read_exact(stream: io.BufferedReader[socket.SocketIO], n: int) -> bytes:
    out = stream.read(n)  # a buffered socket file: n bytes unless the connection ends
    if len(out) != n:
        raise _ClosedError("connection closed mid-frame")
    return out


class DataChannel:
    """A listening data channel serving ``target.call``; :meth:`stop` closes it and every connection.

    Raises (constructor):
        OSError: the socket cannot listen on ``address``.
    """

    def __init__(self, target: CallTarget, address: str, token: str) -> None:
        self._target = target
        self._token = token.encode()
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((address, 0))
            self._listener.listen(64)
        except OSError:
            self._listener.close()
            raise
        #: The port the channel listens on.
        self.port: int = int(self._listener.getsockname()[1])
        self.address = address
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._stopped = False
        self._acceptor = threading.Thread(target=self._accept_loop, name="gateway-data-accept", daemon=True)
        self._acceptor.start()

    # --- lifecycle ------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop accepting and shut every connection down (a call being served finishes; its response is
        lost). Idempotent; never raises."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            connections = list(self._connections)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._acceptor.join(5.0)

    @property
    def connections(self) -> int:
        """How many connections are open now."""
        with self._lock:
            return len(self._connections)

    # --- serving --------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while True:
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return  # stopped
            with self._lock:
                if self._stopped:
                    sock.close()
                    return
                self._connections.add(sock)
            threading.Thread(target=self._serve, args=(sock,), name=f"gateway-data-{peer[1]}", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stream = io.BufferedReader(socket.SocketIO(sock, "rb"), 1 << 16)
            try:
                if not self._hello(sock, stream):
                    return
                while True:
                    try:
                        head = stream.read(_REQUEST.size)
                    except OSError:
                        return
                    if len(head) < _REQUEST.size:
                        return  # the client closed the connection (between calls: normal)
                    op_len, args_len, data_len = _REQUEST.unpack(head)
                    if op_len > MAX_OP_BYTES or args_len > MAX_ARGS_BYTES or data_len > MAX_DATA_BYTES:
                        log.warning(
                            "data channel: refusing a request of %d/%d/%d bytes (op/args/data)",
                            op_len,
                            args_len,
                            data_len,
                        )
                        return
                    op = _read_exact(stream, op_len).decode("utf-8", "replace")
                    args = _read_exact(stream, args_len).decode("utf-8", "replace")
                    data = _read_exact(stream, data_len) if data_len else b""
                    response = self._target.call(op, args, data)
                    sock.sendall(_U32.pack(len(response)) + response)
            finally:
                stream.close()
        except (_ClosedError, OSError):
            pass  # the client went away, or stop() shut the socket down
        except Exception:  # pragma: no cover - a bug; the connection closes, the gateway goes on
            log.exception("data channel connection failed")
        finally:
            with self._lock:
                self._connections.discard(sock)
            with contextlib.suppress(OSError):
                sock.close()

    def _hello(self, sock: socket.socket, stream: io.BufferedReader[socket.SocketIO]) -> bool:
        """Read and check the hello; True when accepted."""
        sock.settimeout(HELLO_TIMEOUT_S)
        try:
            (n,) = _U32.unpack(_read_exact(stream, _U32.size))
            if n > MAX_TOKEN_BYTES:
                return False
            token = _read_exact(stream, n)
        except (_ClosedError, OSError):  # OSError includes the hello timeout
            return False
        if not hmac.compare_digest(token, self._token):
            log.warning("data channel: a connection sent a wrong token")
            with contextlib.suppress(OSError):
                sock.sendall(REFUSED)
            return False
        sock.settimeout(None)
        sock.sendall(ACCEPTED)
        return True
