"""A consistent-hash ring of proxy addresses (DistributedLog's ``ConsistentHashRoutingService``).

Each proxy address takes ``vnodes`` points on a 64-bit ring (BLAKE2b of ``"<address>#<i>"``); a stream is
routed to the owner of the first point at or after the stream's hash, walking on past excluded addresses.
The hash is a fixed function (never Python's salted ``hash()``), so every client process maps a stream to the
same proxy, and when a proxy leaves, only its streams move, all to the same next proxy ("deterministic
routing": every client fails over to the same candidate).
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections.abc import Collection, Iterable

__all__ = ["DEFAULT_VNODES", "HashRing", "hash64"]

#: Points per proxy: enough for an even share of streams among a handful of proxies.
DEFAULT_VNODES = 160


def hash64(key: str) -> int:
    """A stable 64-bit hash of ``key`` (BLAKE2b, 8 bytes, big-endian)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


class HashRing:
    """A thread-safe consistent-hash ring of addresses ``"host:port"``.

    Raises ``ValueError`` for ``vnodes`` < 1.
    """

    def __init__(self, addresses: Iterable[str] = (), *, vnodes: int = DEFAULT_VNODES) -> None:
        if vnodes < 1:
            raise ValueError(f"vnodes must be >= 1, got {vnodes}")
        self.vnodes = vnodes
        self._lock = threading.Lock()
        self._members: set[str] = set()
        self._points: list[int] = []
        self._owners: list[str] = []
        self.set(addresses)

    def set(self, addresses: Iterable[str]) -> None:
        """Make the ring hold exactly ``addresses``."""
        members = set(addresses)
        pairs = sorted((hash64(f"{a}#{i}"), a) for a in members for i in range(self.vnodes))
        with self._lock:
            self._members = members
            self._points = [p for p, _ in pairs]
            self._owners = [a for _, a in pairs]

    def add(self, address: str) -> None:
        """Add ``address`` (no-op when present)."""
        with self._lock:
            if address in self._members:
                return
            members = self._members | {address}
        self.set(members)

    def remove(self, address: str) -> None:
        """Remove ``address`` (no-op when absent)."""
        with self._lock:
            if address not in self._members:
                return
            members = self._members - {address}
        self.set(members)

    def members(self) -> frozenset[str]:
        """The addresses on the ring."""
        with self._lock:
            return frozenset(self._members)

    def __contains__(self, address: object) -> bool:
        with self._lock:
            return address in self._members

    def __len__(self) -> int:
        with self._lock:
            return len(self._members)

    def lookup(self, key: str, exclude: Collection[str] = ()) -> str | None:
        """The address ``key`` routes to, skipping ``exclude``; None when every member is excluded (or none)."""
        return next(iter(self.candidates(key, exclude, limit=1)), None)

    def candidates(self, key: str, exclude: Collection[str] = (), *, limit: int | None = None) -> list[str]:
        """Distinct addresses in ring order from ``key``'s point: the first is :meth:`lookup`'s answer, the next
        ones where ``key`` goes when the earlier ones are excluded."""
        with self._lock:
            points, owners = self._points, self._owners
            wanted = len(self._members - set(exclude))
        if limit is not None:
            wanted = min(wanted, limit)
        found: list[str] = []
        if not points or wanted <= 0:
            return found
        start = bisect.bisect_left(points, hash64(key))
        n = len(points)
        for i in range(n):
            owner = owners[(start + i) % n]
            if owner not in exclude and owner not in found:
                found.append(owner)
                if len(found) >= wanted:
                    break
        return found
