"""The client's ownership cache: stream -> the proxy that owns it (DistributedLog's ``OwnershipCache``).

Filled by the proxies' answers: a successful write (the proxy that answered owns the stream), a FOUND redirect
(its location) and a handshake's ownership map. Emptied for a stream on STREAM_UNAVAILABLE (the proxy lost or
released it), and for every stream of a proxy that cannot be reached or left the ring. A cached owner is only a
hint: a proxy that no longer owns a stream says so, and the client looks the owner up again.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

__all__ = ["OwnershipCache"]


class OwnershipCache:
    """A thread-safe map stream -> owner address."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: dict[str, str] = {}

    def get(self, stream: str) -> str | None:
        """The cached owner of ``stream``, or None."""
        with self._lock:
            return self._owner.get(stream)

    def update(self, stream: str, owner: str) -> bool:
        """Record ``owner`` as the owner of ``stream``; returns True when that changed the cache."""
        with self._lock:
            old = self._owner.get(stream)
            self._owner[stream] = owner
            return old != owner

    def update_all(self, ownerships: Mapping[str, str]) -> None:
        """Record every ``stream -> owner`` of a handshake."""
        with self._lock:
            self._owner.update(ownerships)

    def remove(self, stream: str, owner: str | None = None) -> bool:
        """Forget ``stream``'s owner (only if it is still ``owner``, when given); True when an entry went."""
        with self._lock:
            if stream not in self._owner or (owner is not None and self._owner[stream] != owner):
                return False
            del self._owner[stream]
            return True

    def remove_owner(self, owner: str) -> list[str]:
        """Forget every stream of ``owner`` (unreachable, or gone from the ring); returns those streams."""
        with self._lock:
            gone = [s for s, o in self._owner.items() if o == owner]
            for s in gone:
                del self._owner[s]
            return gone

    def streams_of(self, owner: str) -> list[str]:
        """The streams cached as owned by ``owner``."""
        with self._lock:
            return sorted(s for s, o in self._owner.items() if o == owner)

    def snapshot(self) -> dict[str, str]:
        """A copy of the whole map."""
        with self._lock:
            return dict(self._owner)

    def __len__(self) -> int:
        with self._lock:
            return len(self._owner)
