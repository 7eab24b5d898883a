"""The ZooKeeper metadata store: the :class:`~storage.metastore.base.MetadataStore` tree kept in a real
ZooKeeper ensemble through kazoo. This is the only module of ``storage`` that imports kazoo; every
kazoo exception is translated here into :mod:`storage.errors` (the original kept as ``__cause__``).
The first connection is made by :mod:`storage.metastore._zk_connect` (what it waits for, and when
it gives up).

Paths: every path of the interface is relative to ``root`` (``/`` is ``root`` itself), created with
its missing ancestors when the store opens. The prefixing is done here, not by kazoo's chroot, so that
one client can create its own root.

Requests and retries: a request is sent only while the client is connected; each attempt first waits
up to ``connect_timeout_s`` for the connection. Failed attempts are retried with a
:class:`kazoo.retry.KazooRetry` policy (``retry_max_tries`` attempts in all, exponential backoff from
``retry_start_backoff_ms`` to ``retry_max_backoff_ms``). Reads are retried on connection loss and
session expiry. A write is retried only when it was never sent; once sent, a connection loss leaves
its outcome unknown (it may have been applied), so it surfaces as the retriable
:class:`~storage.errors.MetadataConnectionError` and the caller re-reads before trying again (a blind
retry could report NODEEXISTS or BADVERSION for its own earlier success). The kazoo client itself
reconnects forever in the background, with a short backoff.

Locks follow DistributedLog's ``ZKSessionLock`` (spec §5.5): an EPHEMERAL_SEQUENTIAL member
``member_<URL-encoded client id>_s<"%10d" session id>_<10-digit seq>`` under the lock path, with the
client id as data; the lowest sequence number owns the lock; a waiter watches its predecessor. Unlike
DistributedLog the lock is not re-entrant, not even within one session (the interface requires it).
A held lock is lost when its session is: on kazoo's LOST state (session expired or closed), when the
client comes back with another session id, or when the connection has been down for longer than the
session timeout (the server must have expired the session by then; the request timeout is the one
asked for, so a server that negotiated a longer one makes this conservative). A merely SUSPENDED
connection keeps the lock: it may come back with the session, and the ephemeral member, intact;
fencing of the old owner's segment is what prevents a split brain in that window.

Watches are raw ZooKeeper watches (an exists watch for the data, a children watch for the children)
re-armed before every callback. kazoo does not restore watches after a reconnect, so after every
reconnect all of them are re-armed and every callback is called once (changes may have been missed
meanwhile; spurious calls are allowed). Callbacks, re-arming and reconnect housekeeping run on one
worker thread per store, never on kazoo's own threads, so callbacks may call back into the store.

Not fork-safe: a forked child must open its own store.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote_plus, unquote_plus

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionDropped,
    ConnectionLoss,
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
from kazoo.protocol.states import EventType, KazooState
from kazoo.retry import InterruptedError as KazooInterruptedError
from kazoo.retry import KazooRetry, RetryFailedError

from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    LockingError,
    MetadataConnectionError,
    MetadataError,
    MetadataVersionError,
    NodeExistsError,
    NoNodeError,
    OwnershipAcquireFailedError,
)
from storage.metastore import _zk_connect
from storage.metastore._sqlite_tree import check_data, check_ops, check_path, check_version, parent_of
from storage.metastore._watchthread import call_watch, join_watch_thread
from storage.metastore.base import (
    ANY_VERSION,
    Check,
    Create,
    Delete,
    MetadataStore,
    Op,
    OwnershipLock,
    SetData,
    Versioned,
)

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
#: Longest a lock waiter sleeps between two looks at the lock members (a watch usually wakes it sooner).
LOCK_RECHECK_S = 2.0
#: Java's ``Integer.MAX_VALUE``: the member id of a lock child whose name does not parse.
_UNPARSEABLE_MEMBER = 2**31 - 1

# Errors that mean "no answer from ZooKeeper right now" (ConnectionClosedError, a subclass of
# SessionExpiredError, means our own client was stopped and is checked first).
_CONN_ERRORS = (
    ConnectionLoss,
    SessionExpiredError,
    SessionMovedError,
    OperationTimeoutError,
    ConnectionDropped,
    KazooTimeoutError,
)


class _OutcomeUnknownError(Exception):
    """A write was sent and the connection failed before its answer (not retried)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def encode_client_id(client_id: str) -> str:
    """``java.net.URLEncoder.encode(client_id, "UTF-8")``: unreserved ``A-Za-z0-9.-*_``, space as ``+``."""
    return quote_plus(client_id, safe="*").replace("~", "%7E")


def member_prefix(client_id: str, session_id: int) -> str:
    """The name of a lock member before ZooKeeper appends its sequence number."""
    return f"member_{encode_client_id(client_id)}_s{session_id:10d}_"


def member_id(name: str) -> int:
    """The member id of a lock child: the integer after its last ``_`` (unparseable names sort last)."""
    try:
        return int(name.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return _UNPARSEABLE_MEMBER


def client_id_of_member(name: str) -> str | None:
    """The client id encoded in a ``member_<client id>_s<session>_<seq>`` name, or None."""
    parts = name.split("_")
    if len(parts) >= 4 and parts[0] == "member" and parts[-2].startswith("s"):
        return unquote_plus("_".join(parts[1:-2]))
    return None


@dataclass(eq=False)
class _Watch:
    path: str
    zpath: str
    callback: Callable[[str], None]
    cancelled: bool = False
    queued: bool = False
    on_event: Callable[[Any], None] = field(default=lambda event: None)


class _Worker:
    """One thread running submitted tasks in order (watch callbacks, re-arming, reconnect housekeeping)."""

    def __init__(self, name: str) -> None:
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)

    def stop(self, join_timeout_s: float = 10.0) -> None:
        self._tasks.put(None)
        join_watch_thread(self._thread, join_timeout_s, log, self._thread.name)

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                task()
            except Exception:
                log.exception("metadata store background task failed")


class ZooKeeperLock(OwnershipLock):
    """A held DistributedLog lock member (see the module docstring for when it counts as lost)."""

    def __init__(self, store: ZooKeeperMetadataStore, path: str, member_path: str, session_id: int) -> None:
        self._store = store
        self._path = path
        self._member_path = member_path
        self._session_id = session_id
        self._released = False
        self._lost = False
        self._mu = threading.Lock()

    @property
    def path(self) -> str:
        """The lock path (relative to the store's root)."""
        return self._path

    @property
    def member_path(self) -> str:
        """The ZooKeeper path of this holder's member node (absolute, root included)."""
        return self._member_path

    @property
    def session_id(self) -> int:
        """The ZooKeeper session the lock was taken in."""
        return self._session_id

    def is_held(self) -> bool:
        """True until released, or until the session it was taken in is lost."""
        if self._released or self._lost:
            return False
        if not self._store._session_alive(self._session_id):
            self._mark_lost()
            return False
        return True

    def check(self) -> None:
        """Raise ``LockingError`` if the lock was lost, and a *retriable* ``LockingError`` while
        the connection to ZooKeeper is down: ownership cannot be confirmed then, so a writer
        acknowledges nothing new until the session is back (or known to be gone).

        Called before every write, so the common case reads the connection listener's state
        without taking a lock (single attribute reads are atomic in CPython).
        """
        store = self._store
        if (
            not self._released
            and not self._lost
            and not store._closed
            and store._session_id == self._session_id
            and store._suspended_since is None
        ):
            return
        if not self.is_held():
            raise LockingError(f"lost ownership of lock {self._path} (ZooKeeper session {self._session_id:#x})")
        raise LockingError(
            f"connection to ZooKeeper lost: ownership of {self._path} cannot be confirmed; retry once reconnected",
            retriable=True,
        )

    def release(self) -> None:
        """Delete the member node (queued for after a reconnect if ZooKeeper is unreachable now).
        Idempotent; never raises."""
        with self._mu:
            if self._released:
                return
            self._released = True
        self._store._drop_lock(self, delete=True)

    def _mark_lost(self) -> None:
        with self._mu:
            if self._lost or self._released:
                return
            self._lost = True
        log.warning("lost ownership of lock %s (ZooKeeper session %#x)", self._path, self._session_id)
        self._store._drop_lock(self, delete=True)

    def _mark_released(self) -> None:
        with self._mu:
            self._released = True


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

    Raises:
        InvalidArgumentError: malformed hosts, root or settings.
        MetadataConnectionError: no connection within ``open_timeout_s`` (naming the servers and
            why they do not answer), or the root could not be made.
        MetadataError: another ZooKeeper failure while creating the root.
        NoNodeError: ``create_root`` is False and the root does not exist.
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
    ) -> None:
        self._closed = False
        self._stopped = False
        if not isinstance(hosts, str) or not hosts.strip() or hosts.strip().startswith("/"):
            raise InvalidArgumentError(f"hosts must be 'host:port[,host:port...]', not {hosts!r}")
        root = check_path(root)
        hosts = hosts.strip()
        if "/" in hosts:  # a chroot in the connect string comes before root
            hosts, extra = hosts.split("/", 1)
            extra = "/" + extra.strip("/")
            if extra != "/":
                root = check_path(extra if root == "/" else extra + root)
        for name, value, positive in (
            ("session_timeout_s", session_timeout_s, True),
            ("connect_timeout_s", connect_timeout_s, True),
            ("open_timeout_s", connect_timeout_s if open_timeout_s is None else open_timeout_s, True),
            ("retry_start_backoff_ms", retry_start_backoff_ms, False),
            ("retry_max_backoff_ms", retry_max_backoff_ms, False),
        ):
            if not _is_number(value) or not math.isfinite(value) or value < 0 or (positive and value == 0):
                raise InvalidArgumentError(
                    f"{name} must be a finite number {'>' if positive else '>='} 0, not {value!r}"
                )
        if (
            not isinstance(retry_max_tries, int)
            or isinstance(retry_max_tries, bool)
            or not (retry_max_tries >= 1 or retry_max_tries == -1)
        ):
            raise InvalidArgumentError(f"retry_max_tries must be an int >= 1 or -1, not {retry_max_tries!r}")

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

        self._mu = threading.Lock()  # store bookkeeping
        self._cond = threading.Condition()  # connection state
        self._member_mu = threading.Lock()  # creating lock members / cleaning up after uncertain creates
        self._session_id: int | None = None
        self._suspended_since: float | None = None
        self._ever_connected = False
        self._locks: set[ZooKeeperLock] = set()
        self._members: set[str] = set()  # member paths of this store's live locks and lock attempts
        self._stale_members: dict[str, int] = {}  # member path -> session id: delete when possible
        self._orphan_scans: set[tuple[str, str, int]] = set()  # (lock path, member prefix, session id)
        self._watches: set[_Watch] = set()
        self._waiters: set[threading.Event] = set()
        self._worker = _Worker(f"metastore-watch:zk{root}")

        try:
            self._client = KazooClient(
                hosts=hosts,
                timeout=self._session_timeout_s,
                connection_retry=KazooRetry(
                    max_tries=-1, delay=RECONNECT_DELAY_S, backoff=2, max_jitter=0.4, max_delay=RECONNECT_MAX_DELAY_S
                ),
            )
        except Exception as e:  # kazoo.exceptions.ConfigurationError, ValueError from a bad port
            self._worker.stop()
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
                self._make_root()
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
            self._run(f"create {path}", lambda: self._wait(self._client.create_async(zpath, data)), idempotent=False)

        if not make_parents:
            plain()
            return
        for _ in range(MAX_REPLANS):
            try:
                plain()
                return
            except NoNodeError:
                pass
            missing: list[str] = []
            p = parent_of(path)
            while p != "/" and self.exists(p) is None:
                missing.append(p)
                p = parent_of(p)
            ops: list[Op] = [Create(a) for a in reversed(missing)]
            ops.append(Create(path, data))
            failed = self._commit(ops, f"create {path}")
            if failed is None:
                return
            index, error = failed
            if index == len(ops) - 1 and isinstance(error, NodeExistsError):
                raise NodeExistsError(f"node {path} exists") from error.__cause__
            # an ancestor appeared or vanished meanwhile: plan again
        raise MetadataError(f"create {path}: the tree kept changing under make_parents")

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
        for _ in range(MAX_REPLANS):
            below = self._subtree(path)  # NoNodeError if the node itself is missing
            deletes: list[Op] = [Delete(p) for p in reversed(below)]
            chunks = [deletes[i : i + DELETE_CHUNK] for i in range(0, len(deletes), DELETE_CHUNK)] or [[]]
            if len(chunks[-1]) < DELETE_CHUNK:
                chunks[-1].append(Delete(path, version))
            else:
                chunks.append([Delete(path, version)])
            replan = False
            for chunk in chunks:
                ops = chunk if len(chunks) == 1 else [Check(path, version), *chunk]
                failed = self._commit(ops, f"delete {path}")
                if failed is None:
                    continue
                index, error = failed
                if ops[index].path == path and type(error) is not MetadataError:
                    raise error  # the node itself is missing or at another version
                replan = True  # a child was added, or a descendant vanished, meanwhile
                break
            if not replan:
                return
        raise MetadataError(f"delete {path}: the subtree kept changing under the recursive delete")

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
        failed = self._commit(checked, "multi")
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
        if not _is_number(timeout_s) or math.isnan(timeout_s):
            raise InvalidArgumentError(f"timeout_s must be a number, not {timeout_s!r}")
        if self.exists(path) is None:
            raise NoNodeError(f"no lock node {path}")
        zlock = self._z(path)
        deadline = None if timeout_s < 0 else time.monotonic() + timeout_s
        name, sid = self._create_member(path, zlock, client_id)
        try:
            while True:
                self._check_open()
                kids = self._run(f"lock {path}", lambda: self._wait(self._client.get_children_async(zlock)))
                if name not in kids:  # our member is gone (session expired while waiting): join again
                    self._forget_member(f"{zlock}/{name}")
                    name, sid = self._create_member(path, zlock, client_id)
                    continue
                ordered = sorted(kids, key=lambda n: (member_id(n), n))
                i = ordered.index(name)
                if i == 0:
                    lk = ZooKeeperLock(self, path, f"{zlock}/{name}", sid)
                    with self._mu:
                        if self._closed:
                            raise AlreadyClosedError("metadata store closed while taking a lock")
                        self._locks.add(lk)
                    return lk
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    found, owner = self._read_owner(path, zlock, ordered[0])
                    if not found:
                        continue  # the owner just left: look again
                    raise OwnershipAcquireFailedError(
                        f"lock {path} is owned by {owner if owner is not None else 'an unknown holder'}",
                        current_owner=owner,
                    )
                wait_s = LOCK_RECHECK_S if deadline is None else min(LOCK_RECHECK_S, deadline - now)
                self._wait_for_member(path, f"{zlock}/{ordered[i - 1]}", wait_s)
        except BaseException:
            self._abandon_member(f"{zlock}/{name}", sid)
            raise

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
        w = _Watch(path, self._z(path), callback)
        w.on_event = lambda event: self._on_watch_event(w, event)
        with self._mu:
            self._check_open()
            self._watches.add(w)

        def cancel() -> None:
            w.cancelled = True
            with self._mu:
                self._watches.discard(w)

        try:
            self._run(f"watch {path}", lambda: self._arm(w))
        except BaseException:
            cancel()
            raise
        return cancel

    # --- close ----------------------------------------------------------------------------
    def close(self) -> None:
        """Release this store's locks (closing the session deletes their members), cancel its
        watches, stop its client and worker thread. Idempotent; never raises."""
        with self._mu:
            if self._stopped:
                return
            self._closed = self._stopped = True
            locks, self._locks = list(self._locks), set()
            watches, self._watches = list(self._watches), set()
            waiters = list(self._waiters)
        for lk in locks:
            lk._mark_released()
        for w in watches:
            w.cancelled = True
        for ev in waiters:
            ev.set()
        with self._cond:
            self._cond.notify_all()
        try:
            self._client.stop()
            self._client.close()
        except Exception:
            log.warning("stopping the ZooKeeper client of %r failed", self, exc_info=True)
        self._worker.stop()

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
        """Run one request with the retry policy; translate every failure into a DLError."""
        self._check_open()
        retry = self._retry.copy()

        def attempt() -> R:
            self._await_connected()
            try:
                return fn()
            except ConnectionClosedError:
                raise
            except _CONN_ERRORS as e:
                if idempotent:
                    raise
                raise _OutcomeUnknownError(e) from e

        try:
            return retry(attempt)  # type: ignore[no-any-return]
        except DLError:
            raise
        except _OutcomeUnknownError as u:
            if self._closed:
                raise AlreadyClosedError("metadata store closed during a request") from u.cause
            raise MetadataConnectionError(
                f"{what}: the connection to ZooKeeper failed after the request was sent; "
                f"it may or may not have been applied ({type(u.cause).__name__}: {u.cause})"
            ) from u.cause
        except Exception as e:
            raise self._translate(e, what) from e

    def _translate(self, e: BaseException, what: str) -> DLError:
        """The storage error for a kazoo (or other backend) exception."""
        if self._closed and isinstance(e, ConnectionClosedError | KazooInterruptedError):
            return AlreadyClosedError(f"{what}: metadata store is closed")
        if isinstance(e, KazooNoNodeError):
            return NoNodeError(f"{what}: no such node")
        if isinstance(e, KazooNodeExistsError):
            return NodeExistsError(f"{what}: node exists")
        if isinstance(e, BadVersionError):
            return MetadataVersionError(f"{what}: version mismatch (BADVERSION)")
        if isinstance(e, NotEmptyError):
            return MetadataError(f"{what}: node has children")
        if isinstance(e, RetryFailedError):
            last = e.__context__
            detail = f"{type(last).__name__}: {last}" if last is not None else str(e)
            return MetadataConnectionError(f"{what}: ZooKeeper at {self._hosts} unreachable ({e}; last: {detail})")
        if isinstance(e, (*_CONN_ERRORS, ConnectionClosedError)):
            return MetadataConnectionError(f"{what}: ZooKeeper at {self._hosts} unreachable ({type(e).__name__})")
        return MetadataError(f"{what} failed on ZooKeeper: {type(e).__name__}: {e}")

    def _commit(self, ops: list[Op], what: str) -> tuple[int, DLError] | None:
        """Run ``ops`` in one transaction; None on success, else (index, error) of the first failing op."""
        stop = len(ops)
        for i, op in enumerate(ops):
            if isinstance(op, Create) and op.path == "/":
                stop = i  # creating the root always fails with NODEEXISTS; run what comes before it
                break
        zops = ops[:stop]

        def commit() -> list[Any]:
            tx = self._client.transaction()
            for op in zops:
                zpath = self._z(op.path)
                if isinstance(op, Create):
                    tx.create(zpath, op.data)
                elif isinstance(op, SetData):
                    tx.set_data(zpath, op.data, op.version)
                elif isinstance(op, Delete):
                    tx.delete(zpath, op.version)
                else:
                    tx.check(zpath, op.version)
            if stop < len(ops):
                tx.check(self._z("/"), -2)  # a check that always fails, so the prefix rolls back
            return list(self._wait(tx.commit_async()))

        results = self._run(what, commit, idempotent=False)
        failures = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
        if not failures:
            return None
        causes = [(i, r) for i, r in failures if not isinstance(r, RolledBackError | RuntimeInconsistency)]
        index, exc = (causes or failures)[0]
        if index >= stop:
            index = stop
        where = f"{what} op #{index} ({type(ops[index]).__name__} {ops[index].path})"
        if index == stop:
            return index, NodeExistsError(f"{where}: node exists")
        error = self._translate(exc, where)
        error.__cause__ = exc
        return index, error

    def _subtree(self, path: str) -> list[str]:
        """The interface paths strictly below ``path``, parents before children.

        Raises:
            NoNodeError: ``path`` itself does not exist.
        """
        below: list[str] = []
        frontier = [path]
        first = True
        while frontier:
            nxt: list[str] = []
            for p in frontier:
                try:
                    names = self.children(p)
                except NoNodeError:
                    if first:
                        raise
                    continue  # deleted meanwhile: the transaction will tell
                for n in names:
                    child = f"{p}/{n}" if p != "/" else f"/{n}"
                    below.append(child)
                    nxt.append(child)
                first = False
            frontier = nxt
            first = False
        return below

    def _make_root(self) -> None:
        if self._root == "/":
            return
        parts = self._root.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            zpath = "/" + "/".join(parts[:i])

            def make(zpath: str = zpath) -> None:
                try:
                    self._wait(self._client.create_async(zpath, b""))
                except KazooNodeExistsError:
                    pass

            self._run(f"create root {zpath}", make)

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
                    self._worker.submit(self._after_reconnect)
            elif state == KazooState.SUSPENDED:
                if self._suspended_since is None:
                    self._suspended_since = time.monotonic()
            else:  # LOST: the session expired (or the client was stopped); its ephemeral nodes are gone
                self._session_id = None
                if self._suspended_since is None:
                    self._suspended_since = time.monotonic()
                with self._mu:
                    lost, self._locks = list(self._locks), set()
                    for lk in lost:
                        self._members.discard(lk.member_path)
                    self._stale_members.clear()
                    self._orphan_scans.clear()
                    waiters = list(self._waiters)
                for ev in waiters:
                    ev.set()
            self._cond.notify_all()
        for lk in lost:
            lk._lost = True
            log.warning("lost ownership of lock %s: ZooKeeper session %#x expired", lk.path, lk.session_id)

    def _session_alive(self, session_id: int) -> bool:
        """False once ``session_id`` is known (or bound) to be gone."""
        if self._closed:
            return False
        with self._cond:
            current, since = self._session_id, self._suspended_since
        if current != session_id:
            return False
        return since is None or time.monotonic() - since <= self._session_timeout_s

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
        with self._member_mu:
            with self._mu:
                scans = list(self._orphan_scans)
                stale = dict(self._stale_members)
            for zlock, prefix, psid in scans:
                if psid == sid and not self._delete_orphans(zlock, prefix):
                    continue
                with self._mu:
                    self._orphan_scans.discard((zlock, prefix, psid))
            for zmember, msid in stale.items():
                if msid == sid and not self._try_delete(zmember):
                    continue
                with self._mu:
                    if self._stale_members.get(zmember) == msid:
                        del self._stale_members[zmember]
        with self._mu:
            watches = list(self._watches)
        for w in watches:
            if w.cancelled:
                continue
            try:
                self._arm(w)
            except Exception as e:
                log.debug("re-arming the watch on %s failed (%s); the next reconnect retries", w.path, e)
            self._call(w)

    # --- watches, internals ---------------------------------------------------------------
    def _arm(self, w: _Watch) -> None:
        """Set the exists watch and (if the node exists) the children watch of ``w``."""
        if w.cancelled:
            return
        stat = self._wait(self._client.exists_async(w.zpath, watch=w.on_event))
        if stat is not None:
            try:
                self._wait(self._client.get_children_async(w.zpath, watch=w.on_event))
            except KazooNoNodeError:
                pass  # deleted in between: the exists watch fires

    def _on_watch_event(self, w: _Watch, event: Any) -> None:
        """kazoo's watcher (runs on kazoo's callback thread): hand the event to the worker."""
        if w.cancelled or self._closed or getattr(event, "type", None) == EventType.NONE:
            return  # NONE = the connection dropped; the reconnect re-arms and calls every watch
        with self._mu:
            if w.queued:
                return
            w.queued = True
        self._worker.submit(lambda: self._fire(w))

    def _fire(self, w: _Watch) -> None:
        with self._mu:
            w.queued = False
        if w.cancelled or self._closed:
            return
        try:
            if self._client.connected:
                self._arm(w)
        except Exception as e:
            log.debug("re-arming the watch on %s failed (%s); the reconnect re-arms it", w.path, e)
        self._call(w)

    @staticmethod
    def _call(w: _Watch) -> None:
        call_watch(w, log)

    # --- locks, internals -----------------------------------------------------------------
    def _create_member(self, path: str, zlock: str, client_id: str) -> tuple[str, int]:
        """Create this holder's EPHEMERAL_SEQUENTIAL member; returns (name, session id).

        After a connection loss during the create (outcome unknown), the member is looked for among the
        lock's children (same session, our prefix, not one of this store's known members); if it cannot
        be looked for now, that is done after the next reconnect and the orphan deleted.
        """
        data = client_id.encode("utf-8")
        retry = self._retry.copy()

        def attempt() -> tuple[str, int]:
            self._await_connected()
            sid = self._current_session()
            prefix = member_prefix(client_id, sid)
            with self._member_mu:
                try:
                    created = self._wait(
                        self._client.create_async(f"{zlock}/{prefix}", data, ephemeral=True, sequence=True)
                    )
                    name = str(created).rsplit("/", 1)[1]
                except ConnectionClosedError:
                    raise
                except _CONN_ERRORS:
                    found = self._find_member(zlock, prefix, sid)
                    if found is None:
                        raise
                    name = found
                with self._mu:
                    self._members.add(f"{zlock}/{name}")
                return name, sid

        try:
            return retry(attempt)  # type: ignore[no-any-return]
        except DLError:
            raise
        except KazooNoNodeError as e:
            raise NoNodeError(f"no lock node {path}") from e
        except Exception as e:
            raise self._translate(e, f"lock {path}") from e

    def _find_member(self, zlock: str, prefix: str, sid: int) -> str | None:
        """After an uncertain create (``_member_mu`` held): our member if it exists, else None."""
        try:
            self._await_connected()
            if self._current_session() != sid:
                return None  # a new session: the member, if any, died with the old one
            kids = self._wait(self._client.get_children_async(zlock))
        except Exception:
            with self._mu:
                self._orphan_scans.add((zlock, prefix, sid))
            return None
        with self._mu:
            mine = sorted(
                (str(k) for k in kids if str(k).startswith(prefix) and f"{zlock}/{k}" not in self._members),
                key=member_id,
            )
        for extra in mine[1:]:
            self._try_delete(f"{zlock}/{extra}")
        return mine[0] if mine else None

    def _delete_orphans(self, zlock: str, prefix: str) -> bool:
        """Delete this session's unknown members of ``zlock`` (``_member_mu`` held); False if unreachable."""
        try:
            kids = self._wait(self._client.get_children_async(zlock))
        except KazooNoNodeError:
            return True
        except Exception:
            return False
        with self._mu:
            orphans = [str(k) for k in kids if str(k).startswith(prefix) and f"{zlock}/{k}" not in self._members]
        return all([self._try_delete(f"{zlock}/{k}") for k in orphans])

    def _try_delete(self, zpath: str) -> bool:
        """Delete one node once, now; True if it is gone, False if ZooKeeper could not be reached."""
        if not self._client.connected:
            return False
        try:
            self._wait(self._client.delete_async(zpath))
        except KazooNoNodeError:
            return True
        except Exception:
            return False
        return True

    def _read_owner(self, path: str, zlock: str, name: str) -> tuple[bool, str | None]:
        """(found, client id) of the lock member ``name``; found is False if it is gone."""
        try:
            data, _ = self._run(f"lock {path}", lambda: self._wait(self._client.get_async(f"{zlock}/{name}")))
        except NoNodeError:
            return False, None
        owner = bytes(data or b"").decode("utf-8", errors="replace")
        return True, owner or client_id_of_member(name)

    def _wait_for_member(self, path: str, zmember: str, wait_s: float) -> None:
        """Sleep up to ``wait_s`` until the lock member ``zmember`` changes (or is gone already), the
        connection state changes, or the store closes."""
        wake = threading.Event()
        with self._mu:
            self._waiters.add(wake)
        try:
            stat = self._run(
                f"lock {path}",
                lambda: self._wait(self._client.exists_async(zmember, watch=lambda event: wake.set())),
            )
            if stat is not None:
                wake.wait(max(wait_s, 0.0))
        finally:
            with self._mu:
                self._waiters.discard(wake)

    def _forget_member(self, zmember: str) -> None:
        with self._mu:
            self._members.discard(zmember)

    def _abandon_member(self, zmember: str, sid: int) -> None:
        """A lock attempt failed: delete its member now, or after the next reconnect (same session)."""
        self._forget_member(zmember)
        if self._closed:
            return  # stopping the client closes the session, which deletes the member
        if not self._try_delete(zmember):
            with self._mu:
                self._stale_members[zmember] = sid

    def _drop_lock(self, lk: ZooKeeperLock, *, delete: bool) -> None:
        with self._mu:
            self._locks.discard(lk)
        if delete:
            self._abandon_member(lk.member_path, lk.session_id)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = [
    "MAX_DATA_BYTES",
    "ZooKeeperLock",
    "ZooKeeperMetadataStore",
    "client_id_of_member",
    "encode_client_id",
    "member_id",
    "member_prefix",
]
