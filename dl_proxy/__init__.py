"""DistributedLog's write proxy: many producers on many machines write one log through ``dlog proxy``
processes (gRPC), exactly once per producer (see CONTRACT.md §7).

Client side: :class:`ProxyClient` (``write``, ``write_bulk``, ``flush``, ``close``) and :class:`ProxyStatus`;
the status codes' error classes are in :mod:`dl_proxy.errors` (every one a :class:`storage.errors.DLError`).
"""

from dl_proxy.client import ProxyClient, ProxyStatus
from dl_proxy.errors import (
    OutOfOrderSequenceError,
    RequestDeniedError,
    ServiceUnavailableError,
    StreamUnavailableError,
    WriteTimeoutError,
)

__all__ = [
    "OutOfOrderSequenceError",
    "ProxyClient",
    "ProxyStatus",
    "RequestDeniedError",
    "ServiceUnavailableError",
    "StreamUnavailableError",
    "WriteTimeoutError",
]
