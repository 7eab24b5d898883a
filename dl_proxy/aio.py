"""The write proxies from asyncio: :class:`AsyncProxyClient`, awaitable writes over a :class:`dl_proxy.ProxyClient`.

::

    async with await AsyncProxyClient.connect(uri="distributedlog://127.0.0.1:2181/ns") as client:
        dlsn = await client.write("events", b"payload")          # once durable
        dlsns = await client.write_bulk("events", [b"a", b"b"])  # in order, each once durable
        await client.flush()

The client's network side runs on its own thread, so awaiting a write never blocks the event loop; only a write
that finds ``max_pending_bytes`` (or the stream's ``max_stream_pending_bytes``) full waits for space, and it does
so on a worker thread. Errors are the same :mod:`storage.errors` classes as :class:`~dl_proxy.ProxyClient`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from dl_proxy.client import ProxyClient
from storage.formats.dlsn import DLSN

__all__ = ["AsyncProxyClient"]


class AsyncProxyClient:
    """Awaitable writes through the write proxies; the keyword options are :class:`~dl_proxy.ProxyClient`'s.

    Make one with ``await AsyncProxyClient.connect(...)`` (the ZooKeeper discovery's first read runs on a worker
    thread) or wrap an existing client: ``AsyncProxyClient(client)``.
    """

    def __init__(self, client: ProxyClient) -> None:
        self.client = client

    @classmethod
    async def connect(
        cls, uri: str | None = None, proxies: Sequence[str] | None = None, **options: Any
    ) -> AsyncProxyClient:
        """A new client (as ``ProxyClient(uri=..., proxies=..., **options)``).

        Raises:
            InvalidArgumentError, NamespaceNotFoundError, MetadataError: as :class:`~dl_proxy.ProxyClient`.
        """
        client = await asyncio.to_thread(ProxyClient, uri, proxies, **options)
        return cls(client)

    def _full(self, nbytes: int) -> bool:
        c = self.client
        return c._pending_bytes + nbytes > c._max_pending

    async def write(self, stream: str, payload: bytes) -> DLSN:
        """Write one record; returns its DLSN once durable.

        Raises:
            What :meth:`ProxyClient.write` raises, at once or as the write's outcome.
        """
        if self._full(len(payload)):
            fut = await asyncio.to_thread(self.client.write, stream, payload)
        else:
            fut = self.client.write(stream, payload)
        return await asyncio.wrap_future(fut)

    async def write_bulk(self, stream: str, payloads: Iterable[bytes]) -> list[DLSN]:
        """Write several records of one stream, in order; their DLSNs once all are durable.

        Raises:
            What :meth:`ProxyClient.write_bulk` raises; the first failed record's error.
        """
        items = list(payloads)
        if self._full(sum(map(len, items))):
            futs = await asyncio.to_thread(self.client.write_bulk, stream, items)
        else:
            futs = self.client.write_bulk(stream, items)
        return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in futs)))

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued and wait for every outcome (on a worker thread).

        Raises:
            As :meth:`ProxyClient.flush`.
        """
        await asyncio.to_thread(self.client.flush, timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Flush and close (on a worker thread). Idempotent."""
        await asyncio.to_thread(self.client.close, timeout)

    async def __aenter__(self) -> AsyncProxyClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
