"""A stand-in for the Java side of py4j, for tests: it speaks py4j's text protocol over a socket to the
gateway's Python server, the way ``py4j.ClientServer`` of a JVM calls the entry point's
``PythonGateway.call(String, String, byte[])`` (py4j has no Python client for a Python server).

One :class:`WireClient` is one py4j connection (a Java thread's): authenticate with ``A``, then each call
is ``c`` (call a Python proxy) on object ``t`` (the entry point), method ``call``, three typed arguments
(``s`` strings, ``j`` base64 bytes) and ``e``; the answer is ``!y`` + a typed value (``j`` bytes) or ``!x``
(a Python exception, which the gateway never raises).

:class:`ChannelClient` speaks the data channel of :mod:`jvm_shim.channel` the way ``DataChannel.java`` does.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
from typing import Any, Self

from py4j.protocol import escape_new_line

from jvm_shim import protocol


class WireError(Exception):
    """py4j answered with an error (``!x``), or the connection broke."""


class _Client:
    """A connection to the gateway (see the subclasses): ``raw_call`` sends one call, the rest is shared."""

    def __init__(self, port: int, host: str, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.stream = self.sock.makefile("rb")

    def raw_call(self, op: str, args: str, data: bytes) -> bytes:
        raise NotImplementedError

    def call(self, op: str, data: bytes = b"", **args: Any) -> tuple[dict[str, Any], bytes]:
        """Run ``op``; ``(result, data)``, or the error response raised as its DLError class."""
        return protocol.parse_response(self.raw_call(op, json.dumps(args), data))

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WireClient(_Client):
    def __init__(self, port: int, token: str, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
        super().__init__(port, host, timeout)
        self.sock.sendall(f"A\n{token}\ne\n".encode())
        answer = self._line()
        if answer != "!yv":
            self.close()
            raise WireError(f"authentication refused: {answer!r}")

    def _line(self) -> str:
        raw = self.stream.readline()
        if not raw:
            raise WireError("connection closed by the gateway")
        return raw.decode("utf-8")[:-1]

    def raw_call(self, op: str, args: str, data: bytes | None) -> bytes:
        """``PythonGateway.call(op, args, data)``: the raw response bytes."""
        parts = ["c", "t", "call", "s" + escape_new_line(op), "s" + escape_new_line(args)]
        parts.append("n" if data is None else "j" + base64.b64encode(data).decode("ascii"))
        parts.append("e")
        self.sock.sendall(("\n".join(parts) + "\n").encode("utf-8"))
        answer = self._line()
        if not answer.startswith("!yj"):
            raise WireError(f"unexpected py4j answer to {op}: {answer[:500]!r}")
        return base64.b64decode(answer[3:])


class ChannelClient(_Client):
    """One connection to the gateway's data channel (:mod:`jvm_shim.channel`), as ``DataChannel.java`` makes
    it: the hello with the token, then ``call`` frames answered in order."""

    def __init__(self, port: int, token: str, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
        super().__init__(port, host, timeout)
        raw = token.encode()
        self.sock.sendall(struct.pack(">I", len(raw)) + raw)
        answer = self.stream.read(1)
        if answer != b"\x00":
            self.close()
            raise WireError(f"data channel refused the token: {answer!r}")

    def raw_call(self, op: str, args: str, data: bytes) -> bytes:
        o, a = op.encode(), args.encode()
        self.sock.sendall(struct.pack(">III", len(o), len(a), len(data)) + o + a + data)
        head = self.stream.read(4)
        if len(head) < 4:
            raise WireError("connection closed by the gateway")
        (n,) = struct.unpack(">I", head)
        body = self.stream.read(n)
        if len(body) < n:
            raise WireError("connection closed mid-response")
        return bytes(body)
