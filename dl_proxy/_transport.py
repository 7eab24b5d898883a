"""The client's gRPC side: one ``grpc.aio`` channel per proxy address (created on the client's loop thread on first
use, TLS when the proxy announces it or the client insists), the auth token as call metadata, and gRPC failures
turned into :class:`TransportError` with what the client needs to know: was the proxy unreachable, is the outcome
unknown, can it never succeed.

A token goes only where it cannot be read on the way: to a proxy announced with TLS (or every proxy when the
client insists on TLS), to a loopback address, or anywhere when the client allows plaintext
(``allow_plaintext_token``); a request that would carry it in plaintext elsewhere is not sent and fails
definitively (:meth:`TransportError.not_sent`).

Channels reconnect fast (100 ms up to 1 s between attempts, instead of gRPC's default of up to 2 minutes), so a
restarted proxy is used again within a second.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import grpc.aio

from dl_proxy.errors import BadRequestError, NotImplementedByProxyError, RequestDeniedError
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.proto import distributedlog_pb2_grpc as pb_grpc
from dl_proxy.registry import is_loopback
from storage.errors import DLError, InvalidArgumentError

__all__ = ["NOT_SENT", "REFUSED", "UNREACHABLE", "Transport", "TransportError", "failure_kind"]

log = logging.getLogger(__name__)

_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.keepalive_timeout_ms", 5000),
]

_UNREACHABLE = frozenset({grpc.StatusCode.UNAVAILABLE})
#: The codes of a proxy that answered and refused the caller (a bad or missing token).
_REFUSED = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})
#: What :func:`failure_kind` says of a failed request.
REFUSED, NOT_SENT, UNREACHABLE = "REFUSED", "NOT_SENT", "UNREACHABLE"
#: How the text of a :meth:`TransportError.not_sent` error starts.
_NOT_SENT_PREFIX = "not sent: "
_DEFINITE = {
    grpc.StatusCode.UNAUTHENTICATED: RequestDeniedError,
    grpc.StatusCode.PERMISSION_DENIED: RequestDeniedError,
    grpc.StatusCode.UNIMPLEMENTED: NotImplementedByProxyError,
    grpc.StatusCode.INVALID_ARGUMENT: BadRequestError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: BadRequestError,
}


class TransportError(Exception):
    """A request got no answer from the proxy service (a gRPC status other than OK).

    ``unreachable``: no connection (the proxy is down or unreachable; the request was most likely not
    delivered, but that is not certain). ``unknown``: the request may have been served (a deadline or a broken
    connection). ``definite``: it can never succeed as sent (``error`` is the storage error to give the caller).
    """

    def __init__(self, code: grpc.StatusCode, details: str, *, unknown: bool = False) -> None:
        super().__init__(f"gRPC {code.name}: {details}")
        self.code = code
        self.unreachable = code in _UNREACHABLE
        self.unknown = unknown or code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN)
        cls = _DEFINITE.get(code)
        self.definite = cls is not None
        unauthenticated = code == grpc.StatusCode.UNAUTHENTICATED
        hint = " (give the proxies' shared token: ProxyClient(token=...))" if unauthenticated else ""
        self.error: DLError = (cls or DLError)(f"proxy refused the request: gRPC {code.name}: {details}{hint}")

    @classmethod
    def not_sent(cls, error: DLError) -> TransportError:
        """The client did not send the request, for the reason ``error`` (which the request fails with):
        definitive, and nothing reached a proxy."""
        e = cls(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        e.args = (f"{_NOT_SENT_PREFIX}{error}",)
        e.definite, e.error = True, error
        return e


def failure_kind(error: str) -> str:
    """What a failed request's ``str(TransportError)`` (a :class:`~dl_proxy.client.ProxyStatus`'s ``error``)
    means: :data:`REFUSED` (the proxy answered and refused it: UNAUTHENTICATED or PERMISSION_DENIED, a bad or
    missing token), :data:`NOT_SENT` (the client did not send it, :meth:`TransportError.not_sent`) or
    :data:`UNREACHABLE` (anything else: no connection, no answer in time)."""
    if error.startswith(_NOT_SENT_PREFIX):
        return NOT_SENT
    name = error.removeprefix("gRPC ").partition(":")[0]
    if any(name == code.name for code in _REFUSED):
        return REFUSED
    return UNREACHABLE


class Transport:
    """The channels of one client; every coroutine runs on ``loop``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        token: str | None,
        tls: bool,
        credentials: tuple[bytes | None, bytes | None, bytes | None],
        allow_plaintext_token: bool = False,
    ) -> None:
        self._loop = loop
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self._allow_plaintext = allow_plaintext_token
        self._force_tls = tls
        self._tls_addresses: frozenset[str] = frozenset()
        self._root, self._key, self._chain = credentials
        self._channels: dict[str, tuple[grpc.aio.Channel, pb_grpc.DistributedLogServiceStub, bool]] = {}

    def set_tls(self, addresses: frozenset[str]) -> None:
        """The proxies that announced TLS (their channels are made secure)."""
        self._tls_addresses = addresses

    def _stub(self, address: str) -> pb_grpc.DistributedLogServiceStub:
        """The stub of ``address`` (its channel made, or remade when its TLS changed).

        Raises:
            TransportError: not sent (definitive, InvalidArgumentError): a token would travel in plaintext.
        """
        secure = self._force_tls or address in self._tls_addresses
        if not secure and self._metadata is not None and not self._allow_plaintext:
            host = address.rpartition(":")[0]
            if not is_loopback(host):
                raise TransportError.not_sent(
                    InvalidArgumentError(
                        f"proxy {address} is not announced with TLS: the token would travel in plaintext; use TLS, "
                        f"or allow_plaintext_token=True / --allow-plaintext-token"
                    )
                )
        got = self._channels.get(address)
        if got is not None and got[2] == secure:
            return got[1]
        if got is not None:
            self._loop.create_task(got[0].close())
        if secure:
            creds = grpc.ssl_channel_credentials(self._root, self._key, self._chain)
            channel = grpc.aio.secure_channel(address, creds, options=_CHANNEL_OPTIONS)
        else:
            channel = grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS)
        stub = pb_grpc.DistributedLogServiceStub(channel)
        self._channels[address] = (channel, stub, secure)
        return stub

    async def _call(self, address: str, method: str, request: Any, timeout_s: float) -> Any:
        """One unary call of ``method`` on ``address``. Raises TransportError (also when not sent)."""
        try:
            return await getattr(self._stub(address), method)(request, timeout=timeout_s, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise TransportError(e.code(), str(e.details())) from None

    async def write_bulk(self, address: str, request: pb.BulkWriteRequest, timeout_s: float) -> pb.BulkWriteResponse:
        """One ``writeBulk``. Raises TransportError (also when not sent, see :meth:`_stub`)."""
        resp: pb.BulkWriteResponse = await self._call(address, "writeBulk", request, timeout_s)
        return resp

    async def write_multi(self, address: str, request: pb.MultiWriteRequest, timeout_s: float) -> pb.MultiWriteResponse:
        """One ``writeMulti`` (several streams' requests). Raises TransportError (also when not sent)."""
        resp: pb.MultiWriteResponse = await self._call(address, "writeMulti", request, timeout_s)
        return resp

    async def write(self, address: str, request: pb.WriteRequest, timeout_s: float) -> pb.WriteResponse:
        """One ``write`` (a record, or a record set). Raises TransportError (also when not sent)."""
        resp: pb.WriteResponse = await self._call(address, "write", request, timeout_s)
        return resp

    async def handshake(self, address: str, timeout_s: float) -> pb.ServerInfo:
        """One ``handshake`` with ownerships. Raises TransportError (also when not sent)."""
        info: pb.ServerInfo = await self._call(address, "handshake", pb.ClientInfo(get_ownerships=True), timeout_s)
        return info

    async def close(self) -> None:
        """Close every channel (calls in flight are cancelled)."""
        channels = [c for c, _, _ in self._channels.values()]
        self._channels.clear()
        for c in channels:
            try:
                await c.close()
            except Exception as e:  # closing is best effort
                log.debug("closing a channel: %s", e)
