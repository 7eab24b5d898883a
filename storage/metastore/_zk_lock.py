"""The ZooKeeper store's ownership lock: its member nodes, the lock object and the acquisition algorithm.

Locks follow DistributedLog's ``ZKSessionLock``: an EPHEMERAL_SEQUENTIAL member
``member_<URL-encoded client id>_s<"%10d" session id>_<10-digit seq>`` under the lock path, with the
client id as data; the lowest sequence number owns the lock; a waiter watches its predecessor. Unlike
DistributedLog the lock is not re-entrant, not even within one session (the interface requires it).
A held lock is lost when its session is: on kazoo's LOST state (session expired or closed), when the
client comes back with another session id, or when the connection has been down for longer than the
session timeout (the server must have expired the session by then; the request timeout is the one
asked for, so a server that negotiated a longer one makes this conservative).

A merely SUSPENDED connection (down for less than the session timeout) keeps the lock, as in
DistributedLog, whose writers keep writing to BookKeeper while ZooKeeper is briefly away: it may come
back with the session, and the ephemeral member, intact. :meth:`ZooKeeperLock.is_held` stays True and
:meth:`ZooKeeperLock.check` (called before every write) does not raise then, so data appends and their
acknowledgements go on. What keeps a stale owner out in that window is the segment store's fencing,
not the lock: if the server did expire the session and another writer took the lock over, that
writer's recovery fenced our in-progress ledger before it wrote anything, so none of our appends can
succeed (or be acknowledged) after it, and everything acknowledged before it is recovered. Metadata
writes that need ZooKeeper (a segment roll, a truncation) first wait for the reconnection with
:meth:`ZooKeeperLock.confirm` (bounded by the session timeout).

A create whose reply was lost (outcome unknown) is followed by a look among the lock's children for
our member; members of failed attempts and released locks that ZooKeeper could not be told about are
deleted after the next reconnect in the same session (a new session has lost them anyway).

Imports :mod:`storage.errors`, :mod:`storage.metastore.base` and :mod:`storage.metastore._zk_errors`
(kinds of failure, the runner's protocol); neither kazoo nor :mod:`storage.metastore.zookeeper`: the
store passes itself in as a :class:`LockStore` (its client, requests and session; kazoo is imported
only by the store's module).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar
from urllib.parse import quote_plus, unquote_plus

from storage.errors import AlreadyClosedError, DLError, LockingError, NoNodeError, OwnershipAcquireFailedError
from storage.metastore._lockwait import LockWait
from storage.metastore._zk_errors import Failure, RunStore
from storage.metastore.base import OwnershipLock

__all__ = [
    "CONFIRM_NOTICE_S",
    "LOCK_RECHECK_S",
    "LockMembers",
    "LockOwner",
    "LockStore",
    "ZooKeeperLock",
    "client_id_of_member",
    "encode_client_id",
    "member_id",
    "member_prefix",
]

log = logging.getLogger("storage.metastore.zookeeper")

R = TypeVar("R")

#: Longest a lock waiter sleeps between two looks at the lock members (a watch usually wakes it sooner).
LOCK_RECHECK_S = 2.0
#: Stripes of lock paths whose members are created one at a time (a create whose reply was lost is followed by a
#: look at the lock's children, which must not meet a member another attempt of this store is creating there).
MEMBER_STRIPES = 64
#: A wait of :meth:`ZooKeeperLock.confirm` for the reconnection says what waits once it has lasted this long.
CONFIRM_NOTICE_S = 1.0
#: Java's ``Integer.MAX_VALUE``: the member id of a lock child whose name does not parse.
_UNPARSEABLE_MEMBER = 2**31 - 1


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


# --- what the lock uses of its store -------------------------------------------------------
class LockOwner(Protocol):
    """What a held :class:`ZooKeeperLock` uses of its store: the connection listener's state (read
    without a lock) and the bookkeeping of its locks."""

    @property
    def _closed(self) -> bool: ...

    @property
    def _session_id(self) -> int | None: ...

    @property
    def _suspended_since(self) -> float | None: ...

    def _session_alive(self, session_id: int) -> bool: ...

    def _await_session(self, session_id: int, timeout_s: float) -> bool: ...

    def _drop_lock(self, lk: ZooKeeperLock, *, delete: bool) -> None: ...


class _Client(Protocol):
    """What is used of a ``kazoo.client.KazooClient`` (each request returns kazoo's async result)."""

    @property
    def connected(self) -> bool: ...

    def get_async(self, path: str) -> Any: ...

    def get_children_async(self, path: str) -> Any: ...

    def exists_async(self, path: str, watch: Callable[[Any], None] | None = None) -> Any: ...

    def delete_async(self, path: str) -> Any: ...


class LockStore(LockOwner, RunStore, Protocol):
    """What the acquisition algorithm uses of the store (:mod:`storage.metastore.zookeeper`), besides
    what a held lock and the runner use: its kazoo client, requests and session."""

    @property
    def _client(self) -> _Client: ...

    def _wait(self, async_result: Any) -> Any: ...

    def _current_session(self) -> int: ...

    def _run(self, what: str, fn: Callable[[], R], *, idempotent: bool = True) -> R: ...

    def _create_request(self, zpath: str, data: bytes, *, ephemeral: bool = False, sequence: bool = False) -> Any: ...


# --- the lock ------------------------------------------------------------------------------
class ZooKeeperLock(OwnershipLock):
    """A held DistributedLog lock member (see the module docstring for when it counts as lost)."""

    def __init__(self, store: LockOwner, path: str, member_path: str, session_id: int) -> None:
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
        """True until released, or until the session it was taken in is lost (kazoo's LOST, another
        session id, or disconnected for longer than the session timeout). Stays True while the
        connection is merely suspended for less than the session timeout."""
        if self._released or self._lost:
            return False
        if not self._store._session_alive(self._session_id):
            self._mark_lost()
            return False
        return True

    def check(self) -> None:
        """Raise ``LockingError`` if the lock was lost; return otherwise.

        A connection to ZooKeeper that is down for less than the session timeout (SUSPENDED) does
        not count: the session, and with it the lock, may well be intact, so writes go on (see the
        module docstring: the segment store's fencing keeps a stale owner out). Once the session is
        lost (LOST, a new session id, or disconnected past the session timeout) this raises.

        Called before every write, so the common case reads the connection listener's state
        without taking a lock (single attribute reads are atomic in CPython).

        Raises:
            LockingError: released, or the session it was taken in is lost (``retriable``: a writer opened again
            can take the lock once ZooKeeper is reachable and the log is free).
        """
        store = self._store
        if self._confirmed(store):
            return
        if not self.is_held():
            raise _lost_error(self._path, self._session_id)

    def _confirmed(self, store: LockOwner) -> bool:
        """Held, and the store connected in the lock's session right now (single attribute reads: no lock)."""
        return (
            not self._released
            and not self._lost
            and not store._closed
            and store._session_id == self._session_id
            and store._suspended_since is None
        )

    def confirm(self, what: str) -> None:
        """Return once ownership is confirmed: the store is connected in the lock's session (at once
        in the common case). While the connection is suspended, wait for the reconnection, for no
        longer than the session timeout (past it the lock counts as lost). For the metadata writes
        that need ZooKeeper (a segment roll, a truncation): they then run in a session known to be
        the lock's. ``what`` names the waiting operation in the WARNING logged once the wait has
        lasted :data:`CONFIRM_NOTICE_S` (and in the INFO line when it ends).

        Raises:
            LockingError: the lock was released or lost, before or during the wait (``retriable``: a writer
            opened again takes the lock once ZooKeeper is reachable and the log is free).
        """
        store = self._store
        if self._confirmed(store):
            return
        started = time.monotonic()
        noticed = False
        while True:
            if not self.is_held():
                if noticed:
                    log.warning("%s: gave up waiting for ZooKeeper, ownership of lock %s is lost", what, self._path)
                raise _lost_error(self._path, self._session_id)
            waited = time.monotonic() - started
            if not noticed and waited >= CONFIRM_NOTICE_S:
                noticed = True
                log.warning(
                    "%s waits for the connection to ZooKeeper to come back (%.1f s so far; the lock %s is lost "
                    "if session %#x times out)",
                    what,
                    waited,
                    self._path,
                    self._session_id,
                )
            step = 0.25 if noticed else max(0.01, min(0.25, CONFIRM_NOTICE_S - waited))
            if store._await_session(self._session_id, step):
                if noticed:
                    log.info("%s goes on: ZooKeeper is back after %.1f s", what, time.monotonic() - started)
                return

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

    def _session_expired(self) -> None:
        """The connection listener saw the session end (kazoo's LOST): the member went with it."""
        self._lost = True
        log.warning("lost ownership of lock %s: ZooKeeper session %#x expired", self._path, self._session_id)


# --- the store's locks and members ---------------------------------------------------------
class LockMembers:
    """One store's held locks and lock member nodes, and the acquisition algorithm.

    ``mu`` is the store's bookkeeping lock (shared, so that the store's closing and this
    bookkeeping see each other atomically).
    """

    def __init__(self, store: LockStore, mu: threading.Lock) -> None:
        self._store = store
        self._mu = mu
        # creating the members of one lock / cleaning up after an uncertain create there: one mutex per stripe of
        # lock paths, so that locks of different logs are taken concurrently
        self._member_mus = tuple(threading.Lock() for _ in range(MEMBER_STRIPES))
        self._locks: set[ZooKeeperLock] = set()
        self._members: set[str] = set()  # member paths of this store's live locks and lock attempts
        self._stale_members: dict[str, int] = {}  # member path -> session id: delete when possible
        self._orphan_scans: set[tuple[str, str, int]] = set()  # (lock path, member prefix, session id)
        self._waiters: set[threading.Event] = set()

    def acquire(self, path: str, zlock: str, client_id: str, timeout_s: float) -> ZooKeeperLock:
        """Take the lock at ``path`` (ZooKeeper path ``zlock``; arguments checked by the store), waiting
        up to ``timeout_s`` (0 = try once, negative = forever).

        Raises:
            NoNodeError: no such node. OwnershipAcquireFailedError: still owned by another holder
            after the timeout (names its client id). MetadataConnectionError: ZooKeeper unreachable.
            MetadataError: other failure. AlreadyClosedError: the store is closed (also while waiting).
        """
        store = self._store
        deadline = None if timeout_s < 0 else time.monotonic() + timeout_s
        notice = LockWait(path, timeout_s)
        name, sid = self._create_member(path, zlock, client_id)
        try:
            while True:
                store._check_open()
                kids = store._run(f"lock {path}", lambda: store._wait(store._client.get_children_async(zlock)))
                if name not in kids:  # our member is gone (session expired while waiting): join again
                    self._forget_member(f"{zlock}/{name}")
                    name, sid = self._create_member(path, zlock, client_id)
                    continue
                ordered = sorted(kids, key=lambda n: (member_id(n), n))
                i = ordered.index(name)
                if i == 0:
                    lk = ZooKeeperLock(store, path, f"{zlock}/{name}", sid)
                    with self._mu:
                        if store._closed:
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
                notice.waiting(functools.partial(self._owner_of, path, zlock, ordered[0]))
                wait_s = LOCK_RECHECK_S if deadline is None else min(LOCK_RECHECK_S, deadline - now)
                due = notice.due_in()
                if due is not None:  # wake up in time to say what this wait waits for
                    wait_s = min(wait_s, max(due, 0.01))
                self._wait_for_member(path, f"{zlock}/{ordered[i - 1]}", wait_s)
        except BaseException:
            self._abandon_member(f"{zlock}/{name}", sid)
            raise

    def _owner_of(self, path: str, zlock: str, member: str) -> str | None:
        """The client id of lock member ``member`` (None if unknown or gone)."""
        return self._read_owner(path, zlock, member)[1]

    def drop(self, lk: ZooKeeperLock, *, delete: bool) -> None:
        """Forget a released or lost lock; with ``delete``, delete its member (now, or after the next
        reconnect in the same session)."""
        with self._mu:
            self._locks.discard(lk)
        if delete:
            self._abandon_member(lk.member_path, lk.session_id)

    def close(self) -> None:
        """The store is closing (already marked closed): every lock counts as released (closing the
        session deletes their members) and every waiter wakes up."""
        with self._mu:
            locks, self._locks = list(self._locks), set()
            waiters = list(self._waiters)
        for lk in locks:
            lk._mark_released()
        for ev in waiters:
            ev.set()

    def session_lost(self) -> list[ZooKeeperLock]:
        """The session expired (kazoo's LOST; called by the connection listener): its members are gone.
        Forgets this store's locks, members and pending cleanups, wakes every waiter, and returns the
        locks that were held (for :meth:`ZooKeeperLock._session_expired`)."""
        with self._mu:
            lost, self._locks = list(self._locks), set()
            for lk in lost:
                self._members.discard(lk.member_path)
            self._stale_members.clear()
            self._orphan_scans.clear()
            waiters = list(self._waiters)
        for ev in waiters:
            ev.set()
        return lost

    def after_reconnect(self, sid: int) -> None:
        """On the store's worker after a reconnect in session ``sid``: delete this session's orphan
        members (of creates whose reply was lost) and stale members (of failed attempts and released
        locks); what ZooKeeper cannot be told now waits for the next reconnect."""
        with self._mu:
            scans = list(self._orphan_scans)
            stale = dict(self._stale_members)
        for zlock, prefix, psid in scans:
            with self._member_mu(zlock):
                if psid == sid and not self._delete_orphans(zlock, prefix):
                    continue
            with self._mu:
                self._orphan_scans.discard((zlock, prefix, psid))
        for zmember, msid in stale.items():
            with self._member_mu(zmember.rsplit("/", 1)[0]):
                if msid == sid and not self._try_delete(zmember):
                    continue
            with self._mu:
                if self._stale_members.get(zmember) == msid:
                    del self._stale_members[zmember]

    def _member_mu(self, zlock: str) -> threading.Lock:
        """The mutex for creating members of ``zlock`` and cleaning up after uncertain creates there."""
        return self._member_mus[hash(zlock) % MEMBER_STRIPES]

    # --- member nodes ------------------------------------------------------------------------
    def _create_member(self, path: str, zlock: str, client_id: str) -> tuple[str, int]:
        """Create this holder's EPHEMERAL_SEQUENTIAL member; returns (name, session id).

        After a connection loss during the create (outcome unknown), the member is looked for among the
        lock's children (same session, our prefix, not one of this store's known members); if it cannot
        be looked for now, that is done after the next reconnect and the orphan deleted.

        Raises:
            NoNodeError: no lock node. MetadataConnectionError, MetadataError, AlreadyClosedError.
        """
        store = self._store
        data = client_id.encode("utf-8")
        retry = store._retry.copy()

        def attempt() -> tuple[str, int]:
            store._await_connected()
            sid = store._current_session()
            prefix = member_prefix(client_id, sid)
            with self._member_mu(zlock):
                try:
                    created = store._wait(
                        store._create_request(f"{zlock}/{prefix}", data, ephemeral=True, sequence=True)
                    )
                    name = str(created).rsplit("/", 1)[1]
                except Exception as e:
                    if store._failure(e) is not Failure.CONNECTION:
                        raise
                    found = self._find_member(zlock, prefix, sid)
                    if found is None:
                        raise
                    name = found
                with self._mu:
                    self._members.add(f"{zlock}/{name}")
                return name, sid

        try:
            return retry(attempt)
        except DLError:
            raise
        except Exception as e:
            if store._failure(e) is Failure.NO_NODE:
                raise NoNodeError(f"no lock node {path}") from e
            raise store._translate(e, f"lock {path}") from e

    def _find_member(self, zlock: str, prefix: str, sid: int) -> str | None:
        """After an uncertain create (``_member_mu`` held): our member if it exists, else None."""
        store = self._store
        try:
            store._await_connected()
            if store._current_session() != sid:
                return None  # a new session: the member, if any, died with the old one
            kids = store._wait(store._client.get_children_async(zlock))
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
        store = self._store
        try:
            kids = store._wait(store._client.get_children_async(zlock))
        except Exception as e:
            return store._failure(e) is Failure.NO_NODE
        with self._mu:
            orphans = [str(k) for k in kids if str(k).startswith(prefix) and f"{zlock}/{k}" not in self._members]
        return all([self._try_delete(f"{zlock}/{k}") for k in orphans])

    def _try_delete(self, zpath: str) -> bool:
        """Delete one node once, now; True if it is gone, False if ZooKeeper could not be reached."""
        store = self._store
        if not store._client.connected:
            return False
        try:
            store._wait(store._client.delete_async(zpath))
        except Exception as e:
            return store._failure(e) is Failure.NO_NODE
        return True

    def _read_owner(self, path: str, zlock: str, name: str) -> tuple[bool, str | None]:
        """(found, client id) of the lock member ``name``; found is False if it is gone."""
        store = self._store
        try:
            data, _ = store._run(f"lock {path}", lambda: store._wait(store._client.get_async(f"{zlock}/{name}")))
        except NoNodeError:
            return False, None
        owner = bytes(data or b"").decode("utf-8", errors="replace")
        return True, owner or client_id_of_member(name)

    def _wait_for_member(self, path: str, zmember: str, wait_s: float) -> None:
        """Sleep up to ``wait_s`` until the lock member ``zmember`` changes (or is gone already), the
        connection state changes, or the store closes."""
        store = self._store
        wake = threading.Event()
        with self._mu:
            self._waiters.add(wake)
        try:
            stat = store._run(
                f"lock {path}",
                lambda: store._wait(store._client.exists_async(zmember, watch=lambda event: wake.set())),
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
        if self._store._closed:
            return  # stopping the client closes the session, which deletes the member
        if not self._try_delete(zmember):
            with self._mu:
                self._stale_members[zmember] = sid


def _lost_error(path: str, session_id: int) -> LockingError:
    """The error of a lock lost with its session: retriable, since a writer opened again (once ZooKeeper is
    reachable) can take the lock; nothing more is acknowledged by this one."""
    return LockingError(
        f"lost ownership of lock {path} (ZooKeeper session {session_id:#x} expired or closed): this writer "
        "acknowledges nothing more; open a writer again to go on",
        retriable=True,
    )
