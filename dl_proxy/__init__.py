"""DistributedLog's write proxy: many producers on many machines write one log through ``dlog proxy``
processes (gRPC), exactly once per producer (idempotent producers with epochs: :mod:`dl_proxy.dedup`).

Client side: :class:`ProxyClient` (``write``, ``write_bulk``, ``flush``, ``close``), :class:`ProxyStatus` and, for
asyncio, :class:`dl_proxy.aio.AsyncProxyClient`;
the status codes' error classes are in :mod:`dl_proxy.errors` (every one a :class:`storage.errors.DLError`).
"""

from dl_proxy.client import ProxyClient, ProxyStatus
from dl_proxy.errors import (
    NoProxyReachableError,
    OperationTimeoutError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    ProducerStateLostError,
    RequestDeniedError,
    SequenceMismatchError,
    ServiceUnavailableError,
    StreamUnavailableError,
    WriteTimeoutError,
)

__all__ = [
    "NoProxyReachableError",
    "OperationTimeoutError",
    "OutOfOrderSequenceError",
    "ProducerFencedError",
    "ProducerStateLostError",
    "ProxyClient",
    "ProxyStatus",
    "RequestDeniedError",
    "SequenceMismatchError",
    "ServiceUnavailableError",
    "StreamUnavailableError",
    "WriteTimeoutError",
]
