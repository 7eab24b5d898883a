"""The cold store interface: whole objects under keys, written once, read by range.

DistributedLog's third storage part ("Persistent Storage": log segment store, metadata store, cold storage):
completed log segments are copied to cheaper storage for long retention, backup and disaster recovery. A cold
store holds one object per offloaded segment (:mod:`storage.cold.segment_object` is its layout) and offers only
what offload, tiered reads, retention and restore need:

* :meth:`ColdStore.put_verified`: write an object from a stream of chunks, then read it back and compare its
  size and SHA-256 with what was written (an object store may acknowledge a write it then serves damaged or
  short: the copy counts as offloaded only once it was read back equal);
* :meth:`ColdStore.read_range`: ``length`` bytes at ``offset`` (a reader that starts mid-segment reads only what it
  needs);
* :meth:`ColdStore.stat`, :meth:`ColdStore.list`, :meth:`ColdStore.delete`, :meth:`ColdStore.check` (bind-time
  validation: reachable, bucket present, credentials accepted, writable).

Errors are translated to :class:`~storage.errors.ColdStoreError` at this boundary, with ``retriable`` set to
"may trying again later succeed?": an unreachable endpoint, a timeout or a 5xx is retriable; refused credentials,
a missing bucket or a malformed URI are not. A missing object is
:class:`~storage.errors.ColdObjectNotFoundError`.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from storage.errors import ColdStoreError

_C = TypeVar("_C", bound="ColdStore")

#: Chunk size of the read-back that verifies an upload.
VERIFY_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ObjectInfo:
    """An object of a cold store: its key (relative to the store's prefix) and size in bytes."""

    key: str
    size: int


@dataclass(frozen=True)
class PutResult:
    """What :meth:`ColdStore.put_verified` wrote and read back equal: key, size and SHA-256 (hex)."""

    key: str
    size: int
    sha256: str


class RangeReader(Protocol):
    """An open object for range reads (:meth:`ColdStore.open_ranges`); thread-safe."""

    #: The object's size in bytes.
    size: int

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset`` (fewer only at the end). Raises ColdStoreError."""
        ...

    def close(self) -> None:
        """Release the object. Idempotent."""
        ...


class _ByRange:
    """:class:`RangeReader` over :meth:`ColdStore.read_range` (the default of :meth:`ColdStore.open_ranges`)."""

    def __init__(self, store: ColdStore, key: str, size: int) -> None:
        self._store = store
        self._key = key
        self.size = size

    def read(self, offset: int, length: int) -> bytes:
        return self._store.read_range(self._key, offset, length)

    def close(self) -> None:
        pass


class ColdStore(ABC):
    """Objects under keys (``a/b/c``, relative to the store's prefix). Safe to use from several threads."""

    #: The store's URI as bound (never holds credentials).
    uri: str

    @abstractmethod
    def put(self, key: str, chunks: Iterable[bytes | memoryview]) -> int:
        """Write ``chunks`` as the whole object ``key`` (replacing one that exists); returns its size.

        A reader never sees a partly written object under ``key`` from this call (S3 completes an upload
        atomically; the filesystem store writes a temporary file and renames it).

        Raises:
            ColdStoreError: the write failed (``retriable`` as the module docstring says).
        """

    @abstractmethod
    def read_range(self, key: str, offset: int, length: int) -> bytes:
        """``length`` bytes of object ``key`` from ``offset`` (fewer only at the object's end).

        Raises:
            ColdObjectNotFoundError: no such object. ColdStoreError: the read failed.
        """

    @abstractmethod
    def stat(self, key: str) -> ObjectInfo:
        """Size of object ``key``.

        Raises:
            ColdObjectNotFoundError: no such object. ColdStoreError: the request failed.
        """

    @abstractmethod
    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (a folder: ``"log/"``), sorted by key.

        Raises:
            ColdStoreError: the request failed.
        """

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete object ``key``; a missing one is not an error.

        Raises:
            ColdStoreError: the request failed.
        """

    @abstractmethod
    def check(self) -> None:
        """Validate the store before anything depends on it (``bind --cold``): the endpoint answers, the
        bucket (or directory) exists, the credentials are accepted and a probe object can be written, read and
        deleted.

        Raises:
            ColdStoreError: one line saying which of these failed (retriable only for an outage).
        """

    def open_ranges(self, key: str) -> RangeReader:
        """Open object ``key`` for many range reads (one metadata request now, then one request per read).

        Raises:
            ColdObjectNotFoundError, ColdStoreError.
        """
        return _ByRange(self, key, self.stat(key).size)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (connections). Idempotent."""

    def put_verified(self, key: str, chunks: Iterable[bytes | memoryview]) -> PutResult:
        """:meth:`put`, then read the object back and compare its size and SHA-256 with what was written.

        On a mismatch the object is deleted and the error is retriable (a later offload writes it again).

        Raises:
            ColdStoreError: the write or the read-back failed, or the read-back differs.
        """
        digest = hashlib.sha256()
        written = 0

        def counted() -> Iterable[bytes | memoryview]:
            nonlocal written
            for chunk in chunks:
                digest.update(chunk)
                written += len(chunk)
                yield chunk

        size = self.put(key, counted())
        expected = digest.hexdigest()
        got = self.digest(key, size)
        if size != written or got != expected:
            try:
                self.delete(key)
            finally:
                raise ColdStoreError(
                    f"cold object {key!r} in {self.uri} read back differs from what was written "
                    f"({size} bytes, sha256 {got[:16]}..., wrote {written} bytes, sha256 {expected[:16]}...)",
                    retriable=True,
                )
        return PutResult(key, size, expected)

    def digest(self, key: str, size: int | None = None) -> str:
        """SHA-256 (hex) of object ``key`` read whole, in chunks; ``size`` if known (else :meth:`stat`).

        Raises:
            ColdObjectNotFoundError, ColdStoreError.
        """
        if size is None:
            size = self.stat(key).size
        h = hashlib.sha256()
        offset = 0
        while offset < size:
            data = self.read_range(key, offset, min(VERIFY_CHUNK, size - offset))
            if not data:
                break
            h.update(data)
            offset += len(data)
        return h.hexdigest()

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
