"""The client's gRPC side: one ``grpc.aio`` channel per proxy address (created on the client's loop thread on first
use, TLS when the proxy announces it or the client insists), the auth token as call metadata, and gRPC failures
turned into :class:`TransportError` with what the client needs to know: was the proxy unreachable, is the outcome
unknown, can it never succeed.

Channels reconnect fast (100 ms up to 1 s between attempts, instead of gRPC's default of up to 2 minutes), so a
restarted proxy is used again within a second.
"""

from __future__ import annotations

import asyncio
import logging

import grpc
import grpc.aio

from dl_proxy.errors import BadRequestError, NotImplementedByProxyError, RequestDeniedError
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.proto import distributedlog_pb2_grpc as pb_grpc
from storage.errors import DLError

__all__ = ["Transport", "TransportError"]

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
        self.error: DLError = (cls or DLError)(f"proxy refused the request: gRPC {code.name}: {details}")


class Transport:
    """The channels of one client; every coroutine runs on ``loop``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        token: str | None,
        tls: bool,
        credentials: tuple[bytes | None, bytes | None, bytes | None],
    ) -> None:
        self._loop = loop
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self._force_tls = tls
        self._tls_addresses: frozenset[str] = frozenset()
        self._root, self._key, self._chain = credentials
        self._channels: dict[str, tuple[grpc.aio.Channel, pb_grpc.DistributedLogServiceStub, bool]] = {}

    def set_tls(self, addresses: frozenset[str]) -> None:
        """The proxies that announced TLS (their channels are made secure)."""
        self._tls_addresses = addresses

    def _stub(self, address: str) -> pb_grpc.DistributedLogServiceStub:
        secure = self._force_tls or address in self._tls_addresses
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

    async def write_bulk(self, address: str, request: pb.BulkWriteRequest, timeout_s: float) -> pb.BulkWriteResponse:
        """One ``writeBulk``. Raises TransportError."""
        try:
            resp: pb.BulkWriteResponse = await self._stub(address).writeBulk(
                request, timeout=timeout_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as e:
            raise TransportError(e.code(), str(e.details())) from None
        return resp

    async def write(self, address: str, request: pb.WriteRequest, timeout_s: float) -> pb.WriteResponse:
        """One ``write`` (a record, or a record set). Raises TransportError."""
        try:
            resp: pb.WriteResponse = await self._stub(address).write(
                request, timeout=timeout_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as e:
            raise TransportError(e.code(), str(e.details())) from None
        return resp

    async def handshake(self, address: str, timeout_s: float) -> pb.ServerInfo:
        """One ``handshake`` with ownerships. Raises TransportError."""
        try:
            info: pb.ServerInfo = await self._stub(address).handshake(
                pb.ClientInfo(get_ownerships=True), timeout=timeout_s, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as e:
            raise TransportError(e.code(), str(e.details())) from None
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
