"""The ZooKeeper store's failures: what kind of failure each exception of its client is, the storage
error it becomes, and the runner of one request with the retry policy.

The store tells the kind (:class:`Failure`; it is the only module that imports kazoo and names its
exception classes); :func:`translate` turns it into a :mod:`storage.errors` error (the original kept as
``__cause__`` by the caller). :func:`run` sends a request only while the client is connected (each
attempt first waits for the connection) and retries failed attempts with the store's policy (a copy of
its ``kazoo.retry.KazooRetry``): reads are retried on connection loss and session expiry; a write is
retried only when it was never sent. Once sent, a connection loss leaves its outcome unknown (it may
have been applied), so it surfaces as the retriable :class:`~storage.errors.MetadataConnectionError`
and the caller re-reads before trying again (a blind retry could report NODEEXISTS or BADVERSION for
its own earlier success).

Imports :mod:`storage.errors`; neither kazoo nor :mod:`storage.metastore.zookeeper` (the store passes
itself in as a :class:`RunStore`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol, TypeVar

from storage.errors import (
    AlreadyClosedError,
    DLError,
    MetadataConnectionError,
    MetadataError,
    MetadataPermissionError,
    MetadataVersionError,
    NodeExistsError,
    NoNodeError,
)

__all__ = ["Failure", "Retry", "RetryPolicy", "RunStore", "run", "translate"]

R = TypeVar("R")


class Failure(enum.Enum):
    """What kind of failure an exception of the ZooKeeper client is."""

    CLOSED = "our own client was stopped (a session expiry of kazoo's)"
    INTERRUPTED = "the retry policy was interrupted (the store closed; a retry failure of kazoo's)"
    RETRIES_EXHAUSTED = "the retry policy gave up"
    CONNECTION = "no answer from ZooKeeper right now: connection loss, session expired or moved, timeout"
    NO_NODE = "NONODE"
    NODE_EXISTS = "NODEEXISTS"
    BAD_VERSION = "BADVERSION"
    NOT_EMPTY = "NOTEMPTY"
    NO_AUTH = "NOAUTH: the node's ACL does not give this client the permission"
    ROLLED_BACK = "an operation of a failed transaction that was only rolled back"
    OTHER = "anything else"


def translate(failure: Failure, e: BaseException, what: str, *, hosts: str, closed: bool) -> DLError:
    """The storage error for the exception ``e`` of kind ``failure``, of the request ``what`` of a store
    on ``hosts`` (``closed``: the store is closed)."""
    if closed and failure in (Failure.CLOSED, Failure.INTERRUPTED):
        return AlreadyClosedError(f"{what}: metadata store is closed")
    if failure is Failure.NO_NODE:
        return NoNodeError(f"{what}: no such node")
    if failure is Failure.NODE_EXISTS:
        return NodeExistsError(f"{what}: node exists")
    if failure is Failure.BAD_VERSION:
        return MetadataVersionError(f"{what}: version mismatch (BADVERSION)")
    if failure is Failure.NOT_EMPTY:
        return MetadataError(f"{what}: node has children")
    if failure is Failure.NO_AUTH:
        return MetadataPermissionError(
            f"{what}: permission denied by ZooKeeper (NOAUTH): the namespace's nodes carry an ACL and this client "
            "does not have its credentials (set zkAclId to the namespace's ACL id)"
        )
    if failure in (Failure.RETRIES_EXHAUSTED, Failure.INTERRUPTED):
        last = e.__context__
        detail = f"{type(last).__name__}: {last}" if last is not None else str(e)
        return MetadataConnectionError(f"{what}: ZooKeeper at {hosts} unreachable ({e}; last: {detail})")
    if failure in (Failure.CONNECTION, Failure.CLOSED):
        return MetadataConnectionError(f"{what}: ZooKeeper at {hosts} unreachable ({type(e).__name__})")
    return MetadataError(f"{what} failed on ZooKeeper: {type(e).__name__}: {e}")


# --- the runner ----------------------------------------------------------------------------
class Retry(Protocol):
    """One use of the store's retry policy: calls ``func`` until it succeeds or the policy gives up."""

    def __call__(self, func: Callable[[], R]) -> R: ...


class RetryPolicy(Protocol):
    """The store's ``kazoo.retry.KazooRetry``."""

    def copy(self) -> Retry: ...


class RunStore(Protocol):
    """What :func:`run` uses of the store (:mod:`storage.metastore.zookeeper`)."""

    @property
    def _closed(self) -> bool: ...

    @property
    def _retry(self) -> RetryPolicy: ...

    def _check_open(self) -> None: ...

    def _await_connected(self, timeout_s: float | None = None) -> None: ...

    def _failure(self, e: BaseException) -> Failure: ...

    def _translate(self, e: BaseException, what: str) -> DLError: ...


class _OutcomeUnknownError(Exception):
    """A write was sent and the connection failed before its answer (not retried)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def run(store: RunStore, what: str, fn: Callable[[], R], *, idempotent: bool = True) -> R:
    """Run one request (``fn``: the client's call and the wait for its reply) with the retry policy;
    translate every failure into a DLError (``what`` names the request in messages).

    Raises:
        AlreadyClosedError: the store is closed (or closed during the request).
        MetadataConnectionError: ZooKeeper unreachable after the retries, or a write's outcome is
        unknown. The store's translation of any other failure (NoNodeError, NodeExistsError,
        MetadataVersionError, MetadataError).
    """
    store._check_open()
    retry = store._retry.copy()

    def attempt() -> R:
        store._await_connected()
        try:
            return fn()
        except Exception as e:
            if idempotent or store._failure(e) is not Failure.CONNECTION:
                raise
            raise _OutcomeUnknownError(e) from e

    try:
        return retry(attempt)
    except DLError:
        raise
    except _OutcomeUnknownError as u:
        if store._closed:
            raise AlreadyClosedError("metadata store closed during a request") from u.cause
        raise MetadataConnectionError(
            f"{what}: the connection to ZooKeeper failed after the request was sent; "
            f"it may or may not have been applied ({type(u.cause).__name__}: {u.cause})"
        ) from u.cause
    except Exception as e:
        raise store._translate(e, what) from e
