"""The metadata store interface: a versioned tree of nodes, as ZooKeeper offers one.

Paths are absolute, ``/``-separated, with no trailing slash (the root is ``/``). Every node
has bytes of data and a version that starts at 0 and grows by one on every ``set``. Writes
take the expected version (``-1`` = any) and fail with
:class:`~storage.errors.MetadataVersionError` when it does not match. ``multi`` applies a
list of operations atomically: all of them, or none (the first failure is raised).

The same interface is implemented by the embedded store (SQLite, WAL mode, several processes
on one machine) and by the ZooKeeper store (kazoo), so everything above it — the log layout
of ``storage.log.layout``, writers, readers — is written once.

Ownership: :meth:`MetadataStore.lock` returns an :class:`OwnershipLock`, exclusive across
processes and across store instances, freed when the holder releases it or its process dies
(SIGKILL included) or, for ZooKeeper, its session expires.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from storage.errors import NoNodeError

T = TypeVar("T")

#: "Any version" for set/delete/check.
ANY_VERSION = -1


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A value with the version it was read at."""

    value: T
    version: int


# --- operations for multi ---------------------------------------------------------------
@dataclass(frozen=True)
class Create:
    """Create ``path`` with ``data``. Fails with NodeExistsError, or NoNodeError if the parent is missing."""

    path: str
    data: bytes = b""


@dataclass(frozen=True)
class SetData:
    """Replace the data of ``path`` if its version matches (``-1`` = any)."""

    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True)
class Delete:
    """Delete ``path`` (which must have no children) if its version matches."""

    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True)
class Check:
    """Assert that ``path`` exists at ``version``; changes nothing."""

    path: str
    version: int


Op = Create | SetData | Delete | Check


class OwnershipLock(ABC):
    """An exclusive, process-death-safe lock on one path."""

    @property
    @abstractmethod
    def path(self) -> str:
        """The lock path."""

    @abstractmethod
    def is_held(self) -> bool:
        """True while this holder still owns the lock (False after release or session loss)."""

    def check(self) -> None:
        """Raise ``LockingError`` if the lock is no longer held."""
        if not self.is_held():
            from storage.errors import LockingError

            raise LockingError(f"lost ownership of lock {self.path}")

    @abstractmethod
    def release(self) -> None:
        """Release the lock. Idempotent."""


class MetadataStore(ABC):
    """A versioned tree of nodes with atomic multi-operations, locks and watches."""

    @abstractmethod
    def get(self, path: str) -> Versioned[bytes]:
        """Data and version of a node.

        Raises:
            NoNodeError: no such node. MetadataError: backend failure.
        """

    def get_many(self, paths: Sequence[str]) -> list[Versioned[bytes] | None]:
        """Data and version of several nodes (None for a missing one). Backends with round
        trips (ZooKeeper) pipeline the reads; the values need not be one consistent snapshot.

        Raises:
            InvalidArgumentError, MetadataError.
        """
        out: list[Versioned[bytes] | None] = []
        for p in paths:
            try:
                out.append(self.get(p))
            except NoNodeError:
                out.append(None)
        return out

    @abstractmethod
    def exists(self, path: str) -> int | None:
        """The node's version, or None if it does not exist."""

    @abstractmethod
    def children(self, path: str) -> list[str]:
        """Names (not paths) of the node's children, sorted.

        Raises:
            NoNodeError: no such node.
        """

    @abstractmethod
    def children_with_version(self, path: str) -> tuple[list[str], int]:
        """The node's children (as :meth:`children`) and, read in the same operation, a number that
        changes whenever a child of the node is created or deleted (ZooKeeper's ``cversion``; compare it
        for equality only). A child deleted and created again under the same name changes it too.

        Raises:
            NoNodeError: no such node.
        """

    def children_many(
        self, paths: Sequence[str], *, watch: Callable[[str], None] | None = None
    ) -> list[tuple[list[str], int] | None]:
        """:meth:`children_with_version` of several nodes (None for a missing one). Backends with round
        trips (ZooKeeper) pipeline the requests.

        With ``watch``, ``watch(path)`` is called once, from a background thread, after the next change
        of the children of each existing node (or its deletion), or after a reconnect (a change may have
        been missed then); spurious calls are allowed. Such a one-shot watch is only useful together with
        :meth:`settle`: a backend whose :meth:`settle` returns False does not set it.

        Raises:
            InvalidArgumentError, MetadataError.
        """
        out: list[tuple[list[str], int] | None] = []
        for p in paths:
            try:
                out.append(self.children_with_version(p))
            except NoNodeError:
                out.append(None)
        return out

    def settle(self) -> bool:
        """Wait until the callbacks of the one-shot watches of :meth:`children_many` for every change
        committed before this call have run (ZooKeeper: one ``sync`` round trip, then the notification
        queues drained), so that a cache kept current by them is at least as new as this call. False
        if this backend has no such barrier (its callers re-read instead of trusting watches).

        Raises:
            MetadataConnectionError: the store cannot be reached. MetadataError, AlreadyClosedError.
        """
        return False

    @abstractmethod
    def create(self, path: str, data: bytes = b"", *, make_parents: bool = False) -> None:
        """Create a node (and, with ``make_parents``, missing ancestors with empty data).

        Raises:
            NodeExistsError: it exists. NoNodeError: the parent is missing.
        """

    @abstractmethod
    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> int:
        """Replace a node's data; returns the new version.

        Raises:
            NoNodeError, MetadataVersionError.
        """

    @abstractmethod
    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None:
        """Delete a node (with ``recursive``, its whole subtree). Missing node → NoNodeError.

        Raises:
            NoNodeError, MetadataVersionError, MetadataError (children present, not recursive).
        """

    @abstractmethod
    def create_ephemeral(self, path: str, data: bytes = b"") -> None:
        """Create a node that lives only as long as this store's session (a process announcing itself,
        as DistributedLog's proxies do). ZooKeeper: an ephemeral znode, gone when this store closes, its
        process dies or its session expires (the owner re-creates it after a new session; watch it). The
        embedded store has no sessions: the node is deleted when this store closes, but a killed process
        leaves it behind.

        Raises:
            NodeExistsError: it exists. NoNodeError: the parent is missing. InvalidArgumentError,
            MetadataError (MetadataConnectionError: the outcome is unknown, re-read), AlreadyClosedError.
        """

    @abstractmethod
    def multi(self, ops: Sequence[Op]) -> None:
        """Apply every operation atomically, or none.

        Raises:
            NodeExistsError, NoNodeError, MetadataVersionError: the first failing operation.
        """

    @abstractmethod
    def lock(self, path: str, client_id: str, timeout_s: float) -> OwnershipLock:
        """Take the exclusive lock at ``path`` (a node that must exist), waiting up to
        ``timeout_s`` (0 = try once, negative = forever).

        Locks are not re-entrant: a second ``lock`` on the same path fails even from the same
        store instance (one writer per log, always).

        Raises:
            OwnershipAcquireFailedError: still owned by another holder after the timeout
            (the message names the current owner's client id where known).
            NoNodeError: the lock path does not exist.
        """

    @abstractmethod
    def watch(self, path: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(path)`` from a background thread after any change to the data or
        the children of ``path`` (by any process), until cancelled. Spurious calls are
        allowed; missed changes are not. Returns a function that cancels the watch."""

    @abstractmethod
    def close(self) -> None:
        """Release locks, watches and connections. Idempotent."""
