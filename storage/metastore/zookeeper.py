"""The ZooKeeper metadata store: the :class:`~storage.metastore.base.MetadataStore` tree kept in a real
ZooKeeper ensemble through kazoo. This is the only module of ``storage`` that imports kazoo; every
kazoo exception is translated into :mod:`storage.errors` (the original kept as ``__cause__``): this
module tells what kind of failure it is (:data:`_FAILURES`), :mod:`storage.metastore._zk_errors` what
it becomes.

The store is made of modules that import neither kazoo nor this one (the store passes itself to them
as the protocol each declares: its kazoo client, request helpers, session and kinds of failure):
:mod:`storage.metastore._zk_connect`, the first connection (what it waits for, and when it gives up)
and the checks of the connect string and settings; :mod:`storage.metastore._zk_errors`, the runner of
one request (retries, and writes whose outcome is unknown) and the translation of failures;
:mod:`storage.metastore._zk_writes`, transactions and the writes of several nodes (the root, create
with missing parents, the recursive delete); :mod:`storage.metastore._zk_lock`, the ownership lock
and its member nodes; :mod:`storage.metastore._zk_watches`, the watches and the store's worker thread.

Paths: every path of the interface is relative to ``root`` (``/`` is ``root`` itself), created with
its missing ancestors when the store opens. The prefixing is done here, not by kazoo's chroot, so that
one client can create its own root. Every znode the store creates is created by
:meth:`ZooKeeperMetadataStore._create_request` (a request of its own, or an operation of a transaction).

Requests and retries: a request is sent only while the client is connected; each attempt first waits
up to ``connect_timeout_s`` for the connection. Failed attempts are retried with a
:class:`kazoo.retry.KazooRetry` policy (``retry_max_tries`` attempts in all, exponential backoff from
``retry_start_backoff_ms`` to ``retry_max_backoff_ms``). Reads are retried on connection loss and
session expiry. A write is retried only when it was never sent; once sent, a connection loss leaves
its outcome unknown (it may have been applied), so it surfaces as the retriable
:class:`~storage.errors.MetadataConnectionError` and the caller re-reads before trying again (a blind
retry could report NODEEXISTS or BADVERSION for its own earlier success). The kazoo client itself
reconnects forever in the background, with a short backoff.

Locks follow DistributedLog's ``ZKSessionLock`` (member nodes, and when a held lock counts as lost:
:mod:`storage.metastore._zk_lock`). A connection down for less than the session timeout (kazoo's
SUSPENDED) does not lose a lock: a held lock's ``check()`` passes and ``is_held()`` stays True, so
writers go on appending (the segment store's fencing keeps a stale owner out); only the session's
end (LOST, another session id, or disconnected past the session timeout) loses it. Watches are raw
ZooKeeper watches, re-armed and called once after every reconnect, on one worker thread per store
(:mod:`storage.metastore._zk_watches`).

Not fork-safe: a forked child must open its own store.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionDropped,
    ConnectionLoss,
    NoAuthError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    SessionMovedError,
)
from kazoo.exceptions import NodeExistsError as KazooNodeExistsError
from kazoo.exceptions import NoNodeError as KazooNoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import Callback, EventType, KazooState
from kazoo.retry import InterruptedError as KazooInterruptedError
from kazoo.retry import KazooRetry, RetryFailedError
from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

from storage.errors import AlreadyClosedError, DLError, InvalidArgumentError, NodeExistsError, NoNodeError
from storage.metastore import _zk_connect, _zk_errors, _zk_writes
from storage.metastore._sqlite_tree import check_data, check_ops, check_path, check_version
from storage.metastore._zk_errors import Failure
from storage.metastore._zk_lock import (
    LockMembers,
    ZooKeeperLock,
    client_id_of_member,
    encode_client_id,
    member_id,
    member_prefix,
)
from storage.metastore._zk_watches import Watches
from storage.metastore.base import ANY_VERSION, Create, MetadataStore, Op, OwnershipLock, SetData, Versioned

__all__ = [
    "MAX_DATA_BYTES",
    "ZooKeeperLock",
    "ZooKeeperMetadataStore",
    "client_id_of_member",
    "encode_client_id",
    "member_id",
    "member_prefix",
]

log = logging.getLogger(__name__)

R = TypeVar("R")

#: Largest node data accepted. ZooKeeper refuses packets above ``jute.maxbuffer`` (1 MiB by default,
#: headers included) by dropping the connection, so larger data is refused up front.
MAX_DATA_BYTES = 1_000_000
#: Operations per transaction of a recursive delete; a larger subtree is deleted in several.
DELETE_CHUNK = 1000
#: How many times create(make_parents) and delete(recursive) re-plan when the tree changes under them.
MAX_REPLANS = 20
#: Backoff of the background reconnection: first delay and cap, in seconds.
RECONNECT_DELAY_S = 0.1
RECONNECT_MAX_DELAY_S = 1.0

#: What kind of failure each of kazoo's exceptions is (the first match counts: ConnectionClosedError, our
#: own client stopped, is a SessionExpiredError; kazoo's InterruptedError is a RetryFailedError).
_FAILURES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], Failure], ...] = (
    (ConnectionClosedError, Failure.CLOSED),
    (KazooInterruptedError, Failure.INTERRUPTED),
    (RetryFailedError, Failure.RETRIES_EXHAUSTED),
    (
        (ConnectionLoss, SessionExpiredError, SessionMovedError, OperationTimeoutError, ConnectionDropped),
        Failure.CONNECTION,
    ),
    (KazooTimeoutError, Failure.CONNECTION),
    (KazooNoNodeError, Failure.NO_NODE),
    (KazooNodeExistsError, Failure.NODE_EXISTS),
    (BadVersionError, Failure.BAD_VERSION),
    (NotEmptyError, Failure.NOT_EMPTY),
    (NoAuthError, Failure.NO_AUTH),
    ((RolledBackError, RuntimeInconsistency), Failure.ROLLED_BACK),
)


class ZooKeeperMetadataStore(MetadataStore):
    """A :class:`MetadataStore` in ZooKeeper under ``root``, through one kazoo client (one session).

    Args:
        hosts: ``host:port[,host:port...]`` (a ``/chroot`` suffix is allowed and prefixes ``root``).
        root: the node that plays ``/`` for this store; created with its ancestors if missing
            (unless ``create_root`` is False).
        session_timeout_s: the session timeout asked of the server (``zkSessionTimeoutSeconds``).
        connect_timeout_s: how long each attempt of a request waits for a connection, and opening
            the store unless ``open_timeout_s`` is given.
        open_timeout_s: how long opening the store waits for its first connection (a WARNING
            naming the servers after half a second; :mod:`storage.metastore._zk_connect`);
            ``open_timeout_name`` names that setting in the error.
        retry_max_tries: attempts per request in all (``zkNumRetries`` + 1); ``-1`` = forever.
        retry_start_backoff_ms, retry_max_backoff_ms: the exponential backoff between attempts
            (``zkRetryStartBackoffMillis``, ``zkRetryMaxBackoffMillis``).
        acl_id: DistributedLog's ``zkAclId``: the session authenticates with the digest credentials
            ``acl_id:acl_id`` and every znode this store creates carries DistributedLog's
            ``EVERYONE_READ_CREATOR_ALL`` ACL (anyone may read; only a client with these credentials may
            create children, change or delete). None: no credentials, open ACLs.

    Raises:
        InvalidArgumentError: malformed hosts, root or settings.
        MetadataConnectionError: no connection within ``open_timeout_s`` (naming the servers and
            why they do not answer), or the root could not be made.
        MetadataError: another ZooKeeper failure while creating the root.
        NoNodeError: ``create_root`` is False and the root does not exist.
        MetadataPermissionError: the root must be created and its parent's ACL refuses this client.
    """

    def __init__(
        self,
        hosts: str,
        root: str = "/",
        *,
        session_timeout_s: float = 30.0,
        connect_timeout_s: float = 15.0,
        retry_max_tries: int = 4,
        retry_start_backoff_ms: float = 5000,
        retry_max_backoff_ms: float = 30000,
        create_root: bool = True,
        open_timeout_s: float | None = None,
        open_timeout_name: str = "open_timeout_s",
        acl_id: str | None = None,
    ) -> None:
        self._closed = False
        self._stopped = False
        hosts, root = _zk_connect.split_chroot(hosts, root)
        _zk_connect.check_settings(
            session_timeout_s=session_timeout_s,
            connect_timeout_s=connect_timeout_s,
            open_timeout_s=connect_timeout_s if open_timeout_s is None else open_timeout_s,
            retry_start_backoff_ms=retry_start_backoff_ms,
            retry_max_backoff_ms=retry_max_backoff_ms,
            retry_max_tries=retry_max_tries,
        )

        self._hosts = hosts
        self._root = root
        self._session_timeout_s = float(session_timeout_s)
        self._connect_timeout_s = float(connect_timeout_s)
        #: Safety net for one request on a live connection (a dead one fails it after 2/3 of the session timeout).
        self._request_timeout_s = self._session_timeout_s * 1.5 + 1.0
        self._retry = KazooRetry(
            max_tries=retry_max_tries,
            delay=retry_start_backoff_ms / 1000.0,
            backoff=2,
            max_jitter=0.4,
            max_delay=max(retry_max_backoff_ms, retry_start_backoff_ms) / 1000.0,
            ignore_expire=True,
            interrupt=lambda: self._closed,
        )

        self._mu = threading.Lock()  # store bookkeeping (shared by its locks and its watches)
        self._cond = threading.Condition()  # connection state
        self._session_id: int | None = None
        self._suspended_since: float | None = None
        self._ever_connected = False
        self._locking = LockMembers(self, self._mu)
        self._watches = Watches(self, self._mu, f"metastore-watch:zk{root}")

        if acl_id is not None and (not isinstance(acl_id, str) or not acl_id or ":" in acl_id):
            self._watches.stop()
            self._closed = self._stopped = True
            raise InvalidArgumentError(f"zkAclId must be a non-empty id without ':', not {acl_id!r}")
        #: The ACL of every znode this store creates (None: kazoo's default, open to everyone).
        self._acl = None if acl_id is None else [*READ_ACL_UNSAFE, *CREATOR_ALL_ACL]
        try:
            self._client = KazooClient(
                hosts=hosts,
                timeout=self._session_timeout_s,
                auth_data=None if acl_id is None else [("digest", f"{acl_id}:{acl_id}")],
                connection_retry=KazooRetry(
                    max_tries=-1, delay=RECONNECT_DELAY_S, backoff=2, max_jitter=0.4, max_delay=RECONNECT_MAX_DELAY_S
                ),
            )
        except Exception as e:  # kazoo.exceptions.ConfigurationError, ValueError from a bad port
            self._watches.stop()
            self._closed = self._stopped = True
            raise InvalidArgumentError(f"bad ZooKeeper hosts {hosts!r}: {e}") from e
        self._client.add_listener(self._on_state)
        try:
            open_timeout = self._connect_timeout_s if open_timeout_s is None else float(open_timeout_s)
            try:
                _zk_connect.connect(self._client, hosts, open_timeout, timeout_key=open_timeout_name)
            except DLError:
                raise
            except Exception as e:
                raise self._translate(e, f"connect to ZooKeeper at {hosts}") from e
            if create_root:
                _zk_writes.make_root(self)
            elif self._root != "/" and self.exists("/") is None:
                raise NoNodeError(f"ZooKeeper node {self._root} does not exist at {hosts}")
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ZooKeeperMetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ZooKeeperMetadataStore({self._hosts!r}, {self._root!r})"

    @property
    def hosts(self) -> str:
        """The connect string (without chroot)."""
        return self._hosts

    @property
    def root(self) -> str:
        """The ZooKeeper path this store calls ``/``."""
        return self._root

    def session_credentials(self) -> tuple[int, bytes] | None:
        """``(session id, password)`` of the current session, or None while disconnected (tests use it
        to expire the session from another client)."""
        cid = self._client.client_id
        if cid is None:
            return None
        return int(cid[0]), bytes(cid[1])

    # --- reads ----------------------------------------------------------------------------
    def get(self, path: str) -> Versioned[bytes]:
        """Data and version of a node.

        Raises:
            InvalidArgumentError: malformed path. NoNodeError: no such node.
            MetadataConnectionError: ZooKeeper unreachable (after retries). MetadataError: other failure.
            AlreadyClosedError: the store is closed.
        """
        zpath = self._z(check_path(path))
        data, stat = self._run(f"get {path}", lambda: self._wait(self._client.get_async(zpath)))
        return Versioned(bytes(data or b""), int(stat.version))

    def get_many(self, paths: Sequence[str]) -> list[Versioned[bytes] | None]:
        """Data and version of several nodes (None for a missing one), with every request in
        flight at once (one round trip instead of one per node).

        Raises:
            InvalidArgumentError: malformed path. MetadataConnectionError, MetadataError, AlreadyClosedError.
        """
        zpaths = [self._z(check_path(p)) for p in paths]

        def fetch() -> list[Versioned[bytes] | None]:
            pending = [self._client.get_async(z) for z in zpaths]
            out: list[Versioned[bytes] | None] = []
            for req in pending:
                try:
                    data, stat = self._wait(req)
                except KazooNoNodeError:
                    out.append(None)
                    continue
                out.append(Versioned(bytes(data or b""), int(stat.version)))
            return out

        return self._run(f"get {len(paths)} nodes", fetch)

    def exists(self, path: str) -> int | None:
        """The node's version, or None if it does not exist.

        Raises:
            InvalidArgumentError: malformed path. MetadataConnectionError: ZooKeeper unreachable.
            MetadataError: other failure. AlreadyClosedError: the store is closed.
        """
        zpath = self._z(check_path(path))
        stat = self._run(f"exists {path}", lambda: self._wait(self._client.exists_async(zpath)))
        return None if stat is None else int(stat.version)

    def children(self, path: str) -> list[str]:
        """Names (not paths) of the node's children, sorted by code point.

        Raises:
            InvalidArgumentError: malformed path. NoNodeError: no such node.
            MetadataConnectionError: ZooKeeper unreachable. MetadataError: other failure.
            AlreadyClosedError: the store is closed.
        """
        zpath = self._z(check_path(path))
        names = self._run(f"children {path}", lambda: self._wait(self._client.get_children_async(zpath)))
        return sorted(str(n) for n in names)

    def children_with_version(self, path: str) -> tuple[list[str], int]:
        """The children and the node's ``cversion`` (bumped by every child create and delete), from one
        ``getChildren2`` request.

        Raises:
            InvalidArgumentError: malformed path. NoNodeError: no such node.
            MetadataConnectionError: ZooKeeper unreachable. MetadataError: other failure.
            AlreadyClosedError: the store is closed.
        """
        zpath = self._z(check_path(path))
        names, stat = self._run(
            f"children {path}", lambda: self._wait(self._client.get_children_async(zpath, include_data=True))
        )
        return sorted(str(n) for n in names), int(stat.cversion)

    def children_many(
        self, paths: Sequence[str], *, watch: Callable[[str], None] | None = None
    ) -> list[tuple[list[str], int] | None]:
        """The children and ``cversion`` of several nodes (None for a missing one), every request in flight
        at once; with ``watch``, a one-shot watch on each existing node (see the base class).

        Raises:
            InvalidArgumentError: malformed path. MetadataConnectionError, MetadataError, AlreadyClosedError.
        """
        zpaths = [(p, self._z(check_path(p))) for p in paths]

        def fetch() -> list[tuple[list[str], int] | None]:
            pending = []
            for p, z in zpaths:
                watcher, forget = self._watches.oneshot(p, watch) if watch is not None else (None, None)
                pending.append((self._client.get_children_async(z, watch=watcher, include_data=True), forget))
            out: list[tuple[list[str], int] | None] = []
            failed: BaseException | None = None
            for req, forget in pending:
                try:
                    names, stat = self._wait(req)
                except Exception as e:
                    if forget is not None:
                        forget()
                    if not isinstance(e, KazooNoNodeError) and failed is None:
                        failed = e
                    out.append(None)
                    continue
                out.append((sorted(str(n) for n in names), int(stat.cversion)))
            if failed is not None:
                raise failed
            return out

        return self._run(f"children of {len(paths)} nodes", fetch)

    def settle(self) -> bool:
        """One ``sync`` round trip (ZooKeeper delivers a session's watch events before the replies to its
        later requests), then kazoo's callback queue and this store's worker drained: every one-shot
        watch of :meth:`children_many` for a change committed before this call has been called.

        Raises:
            MetadataConnectionError: ZooKeeper unreachable. MetadataError, AlreadyClosedError.
        """
        root = self._z("/")
        self._run("sync", lambda: self._wait(self._client.sync_async(root)))
        delivered = threading.Event()
        self._client.handler.dispatch_callback(Callback("watch", delivered.set, ()))
        if not delivered.wait(self._request_timeout_s):
            raise self._translate(ConnectionLoss("kazoo's callback thread is stuck"), "settle watches")
        try:
            self._watches.drain(self._request_timeout_s, "its watch callbacks")
        except TimeoutError as e:
            raise self._translate(ConnectionLoss(str(e)), "settle watches") from e
        return True

    # --- writes ---------------------------------------------------------------------------
    def create(self, path: str, data: bytes = b"", *, make_parents: bool = False) -> None:
        """Create a node (and, with ``make_parents``, missing ancestors with empty data, in the same
        transaction).

        Raises:
            InvalidArgumentError: malformed path or data. NodeExistsError: it exists.
            NoNodeError: the parent is missing. MetadataConnectionError: ZooKeeper unreachable, or the
            connection failed after the request was sent (the node may exist: re-read).
            MetadataError: other failure. AlreadyClosedError: the store is closed.
        """
        path, data = check_path(path), self._check_data(data)
        self._check_open()
        if path == "/":
            raise NodeExistsError("node / exists")
        zpath = self._z(path)

        def plain() -> None:
            self._run(f"create {path}", lambda: self._wait(self._create_request(zpath, data)), idempotent=False)

        if not make_parents:
            plain()
            return
        _zk_writes.create_with_parents(self, path, data, plain, MAX_REPLANS)

    def create_ephemeral(self, path: str, data: bytes = b"") -> None:
        """Create an ephemeral znode of this store's session (deleted by ZooKeeper when the session ends).

        Raises:
            InvalidArgumentError: malformed path or data, or the root. NodeExistsError: it exists.
            NoNodeError: the parent is missing. MetadataConnectionError: ZooKeeper unreachable, or the
            connection failed after the request was sent (re-read). MetadataError, AlreadyClosedError.
        """
        path, data = check_path(path), self._check_data(data)
        self._check_open()
        if path == "/":
            raise InvalidArgumentError("the root cannot be ephemeral")
        zpath = self._z(path)
        self._run(
            f"create ephemeral {path}",
            lambda: self._wait(self._create_request(zpath, data, ephemeral=True)),
            idempotent=False,
        )

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> int:
        """Replace a node's data; returns the new version.

        Raises:
            InvalidArgumentError: malformed path, data or version. NoNodeError: no such node.
            MetadataVersionError: the version does not match. MetadataConnectionError: ZooKeeper
            unreachable, or the connection failed after the request was sent (re-read the version).
            MetadataError: other failure. AlreadyClosedError: the store is closed.
        """
        path, data, version = check_path(path), self._check_data(data), check_version(version)
        zpath = self._z(path)
        stat = self._run(
            f"set {path}", lambda: self._wait(self._client.set_async(zpath, data, version)), idempotent=False
        )
        return int(stat.version)

    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None:
        """Delete a node (with ``recursive``, its whole subtree: atomically in one transaction when it
        has at most :data:`DELETE_CHUNK` nodes, else leaves first in several, each conditional on the
        node's version).

        Raises:
            InvalidArgumentError: malformed path or version, or the root. NoNodeError: no such node.
            MetadataVersionError: the version does not match. MetadataError: children present (not
            recursive), or other failure. MetadataConnectionError: ZooKeeper unreachable, or the
            connection failed after the request was sent. AlreadyClosedError: the store is closed.
        """
        path, version = check_path(path), check_version(version)
        if path == "/":
            raise InvalidArgumentError("the root cannot be deleted")
        zpath = self._z(path)
        if not recursive:
            self._run(f"delete {path}", lambda: self._wait(self._client.delete_async(zpath, version)), idempotent=False)
            return
        _zk_writes.delete_recursive(self, path, version, chunk=DELETE_CHUNK, max_replans=MAX_REPLANS)

    def multi(self, ops: Sequence[Op]) -> None:
        """Apply every operation atomically in one ZooKeeper transaction, or none; each operation sees
        the effects of the previous ones.

        Raises:
            InvalidArgumentError: an operation is malformed (checked before anything is sent).
            NodeExistsError, NoNodeError, MetadataVersionError: the first failing operation.
            MetadataError: a Delete of a node with children, or other failure.
            MetadataConnectionError: ZooKeeper unreachable, or the connection failed after the
            transaction was sent (re-read). AlreadyClosedError: the store is closed.
        """
        checked = check_ops(ops)
        for op in checked:
            if isinstance(op, Create | SetData):
                self._check_data(op.data)
        self._check_open()
        if not checked:
            return
        failed = _zk_writes.commit(self, checked, "multi")
        if failed is not None:
            raise failed[1]

    # --- locks ----------------------------------------------------------------------------
    def lock(self, path: str, client_id: str, timeout_s: float) -> OwnershipLock:
        """Take the exclusive lock at ``path`` (a node that must exist), waiting up to ``timeout_s``
        (0 = try once, negative = forever). Not re-entrant, even within one store instance.

        Raises:
            InvalidArgumentError: malformed path, client id or timeout. NoNodeError: no such node.
            OwnershipAcquireFailedError: still owned by another holder after the timeout (names its
            client id). MetadataConnectionError: ZooKeeper unreachable. MetadataError: other failure.
            AlreadyClosedError: the store is closed (also while waiting).
        """
        path = check_path(path)
        if not isinstance(client_id, str):
            raise InvalidArgumentError(f"client_id must be a str, not {type(client_id).__name__}")
        if not _zk_connect.is_number(timeout_s) or math.isnan(timeout_s):
            raise InvalidArgumentError(f"timeout_s must be a number, not {timeout_s!r}")
        # no existence check first: creating our member under a missing node fails with NoNodeError anyway
        return self._locking.acquire(path, self._z(path), client_id, timeout_s)

    # --- watches --------------------------------------------------------------------------
    def watch(self, path: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(path)`` from the store's worker thread after any change to the data or the
        children of ``path`` (its creation and deletion included) by any client, until cancelled; and
        once after every reconnect. Register before reading to never miss a change. Returns the
        (idempotent) cancel function.

        Raises:
            InvalidArgumentError: malformed path or callback not callable.
            MetadataConnectionError: ZooKeeper unreachable. MetadataError: other failure.
            AlreadyClosedError: the store is closed.
        """
        path = check_path(path)
        if not callable(callback):
            raise InvalidArgumentError("callback must be callable")
        return self._watches.add(path, self._z(path), callback)

    # --- close ----------------------------------------------------------------------------
    def close(self) -> None:
        """Release this store's locks (closing the session deletes their members), cancel its
        watches, stop its client and worker thread. Idempotent; never raises."""
        with self._mu:
            if self._stopped:
                return
            self._closed = self._stopped = True
        self._locking.close()
        self._watches.cancel_all()
        with self._cond:
            self._cond.notify_all()
        try:
            self._client.stop()
            self._client.close()
        except Exception:
            log.warning("stopping the ZooKeeper client of %r failed", self, exc_info=True)
        self._watches.stop()

    # --- requests -------------------------------------------------------------------------
    def _z(self, path: str) -> str:
        """The ZooKeeper path of an interface path."""
        if self._root == "/":
            return path
        return self._root if path == "/" else self._root + path

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError("metadata store is closed")

    @staticmethod
    def _check_data(data: object) -> bytes:
        data = check_data(data)
        if len(data) > MAX_DATA_BYTES:
            raise InvalidArgumentError(f"node data of {len(data)} bytes exceeds the limit of {MAX_DATA_BYTES}")
        return data

    def _wait(self, async_result: Any) -> Any:
        """The result of a kazoo request (its error raised), waiting at most the request timeout."""
        try:
            return async_result.get(timeout=self._request_timeout_s)
        except KazooTimeoutError as e:
            raise ConnectionLoss(f"no reply from ZooKeeper within {self._request_timeout_s:g}s") from e

    def _await_connected(self, timeout_s: float | None = None) -> None:
        """Wait until the client is connected, or raise kazoo's ConnectionLoss (retriable)."""
        deadline = time.monotonic() + (self._connect_timeout_s if timeout_s is None else timeout_s)
        with self._cond:
            while not self._client.connected:
                self._check_open()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ConnectionLoss(f"not connected to ZooKeeper at {self._hosts}")
                self._cond.wait(min(remaining, 0.1))
        self._check_open()

    def _run(self, what: str, fn: Callable[[], R], *, idempotent: bool = True) -> R:
        """Run one request with the retry policy; translate every failure into a DLError
        (:func:`storage.metastore._zk_errors.run`)."""
        return _zk_errors.run(self, what, fn, idempotent=idempotent)

    def _translate(self, e: BaseException, what: str) -> DLError:
        """The storage error for a kazoo (or other backend) exception."""
        return _zk_errors.translate(self._failure(e), e, what, hosts=self._hosts, closed=self._closed)

    @staticmethod
    def _failure(e: BaseException) -> Failure:
        """What kind of failure a kazoo (or other backend) exception is."""
        return next((failure for kinds, failure in _FAILURES if isinstance(e, kinds)), Failure.OTHER)

    # --- connection state -----------------------------------------------------------------
    def _on_state(self, state: Any) -> None:
        """kazoo's state listener (runs on kazoo's connection thread: must not block)."""
        lost: list[ZooKeeperLock] = []
        with self._cond:
            if state == KazooState.CONNECTED:
                cid = self._client.client_id
                self._session_id = None if cid is None else int(cid[0])
                self._suspended_since = None
                reconnect = self._ever_connected
                self._ever_connected = True
                if reconnect and not self._closed:
                    self._watches.submit(self._after_reconnect)
            elif state == KazooState.SUSPENDED:
                if self._suspended_since is None:
                    self._suspended_since = time.monotonic()
            else:  # LOST: the session expired (or the client was stopped); its ephemeral nodes are gone
                self._session_id = None
                if self._suspended_since is None:
                    self._suspended_since = time.monotonic()
                lost = self._locking.session_lost()
            self._cond.notify_all()
        for lk in lost:
            lk._session_expired()

    def _session_alive(self, session_id: int) -> bool:
        """False once ``session_id`` is known (or bound) to be gone."""
        if self._closed:
            return False
        with self._cond:
            current, since = self._session_id, self._suspended_since
        if current != session_id:
            return False
        return since is None or time.monotonic() - since <= self._session_timeout_s

    def _await_session(self, session_id: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until the client is connected in session ``session_id``: True then;
        False after the timeout, or at once when that session is known to be gone (LOST, another
        session) or the store is closed. Woken by every connection state change."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if self._closed or self._session_id != session_id:
                    return False
                if self._suspended_since is None:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)

    def _current_session(self) -> int:
        cid = self._client.client_id
        if cid is None:
            raise ConnectionLoss("not connected to ZooKeeper")
        return int(cid[0])

    def _after_reconnect(self) -> None:
        """On the worker after every reconnect: delete stale lock members of this session, re-arm
        every watch and call every callback once."""
        if self._closed:
            return
        try:
            sid = self._current_session()
        except ConnectionLoss:
            return  # disconnected again: the next reconnect runs this again
        self._locking.after_reconnect(sid)
        self._watches.after_reconnect()

    # --- for the modules of the store (they do not import kazoo) ---------------------------
    def _create_request(
        self, zpath: str, data: bytes, *, ephemeral: bool = False, sequence: bool = False, tx: Any = None
    ) -> Any:
        """Create the znode ``zpath``: kazoo's async request, or with ``tx`` an operation of that
        transaction (returns None). Every znode the store creates is created through here."""
        create = self._client.create_async if tx is None else tx.create
        return create(zpath, data, acl=self._acl, ephemeral=ephemeral, sequence=sequence)

    @staticmethod
    def _connection_event(event: Any) -> bool:
        """Whether a watch event is kazoo's NONE (the connection dropped), not a change of the node."""
        return bool(getattr(event, "type", None) == EventType.NONE)

    def _drop_lock(self, lk: ZooKeeperLock, *, delete: bool) -> None:
        self._locking.drop(lk, delete=delete)
