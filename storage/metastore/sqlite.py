"""The embedded metadata store: a versioned tree of nodes in one SQLite file (WAL mode).

Safe for many threads and many processes on one machine. Every write is one ``BEGIN IMMEDIATE``
transaction (one ``multi`` = one transaction), committed with ``synchronous=FULL`` (the WAL is
fsynced before a call returns). ``SQLITE_BUSY``/``LOCKED`` are retried with backoff; after
:data:`RETRY_S` seconds they surface as the retriable :class:`MetadataConnectionError`.

The schema and the in-transaction operations live in :mod:`._sqlite_tree`. Locks are ``flock``
locks on files in ``<db_path>.locks/`` (see :mod:`._filelock`); watches are served by one
background thread per store (see :mod:`._changewatch`).

Fork safety: in a child forked while a store is open, the store keeps working with fresh
connections, but holds none of the parent's locks (the inherited lock descriptors are closed, so the
parent's death still frees them) and none of its watches.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TypeVar

from storage.common.durable import free_space, fsync_dir
from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    MetadataConnectionError,
    MetadataError,
    NoNodeError,
)
from storage.metastore import _filelock
from storage.metastore import _sqlite_tree as tree
from storage.metastore._changewatch import ChangeWatcher
from storage.metastore.base import (
    ANY_VERSION,
    MetadataStore,
    Op,
    OwnershipLock,
    Versioned,
)

R = TypeVar("R")

#: SQLite's own wait for a busy database, per statement.
BUSY_TIMEOUT_S = 10.0
#: Total time spent retrying a transaction that keeps hitting SQLITE_BUSY/LOCKED.
RETRY_S = 30.0
#: SQLite primary result codes (the low byte of an extended code): a full disk, an I/O error.
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
#: Idle poll interval of the watch thread (inotify usually wakes it sooner).
POLL_S = 0.01

_STORES: weakref.WeakSet[SqliteMetadataStore] = weakref.WeakSet()
_FORK_ORPHANS: list[sqlite3.Connection] = []  # a child must neither use nor close inherited connections


def _is_busy(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


class SqliteMetadataStore(MetadataStore):
    """A :class:`MetadataStore` in the SQLite file ``db_path`` (created with its root on first open;
    its directory must exist).

    Raises:
        InvalidArgumentError: ``db_path`` is not a path.
        MetadataError: the file cannot be opened or is not a compatible store.
        MetadataConnectionError: the database stayed busy (locked) for too long.
    """

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        fs_path = os.fspath(db_path) if isinstance(db_path, (str, os.PathLike)) else None
        if not isinstance(fs_path, str) or not fs_path:
            raise InvalidArgumentError(f"db_path must be a str path, not {db_path!r}")
        self._db_path = os.path.abspath(fs_path)
        self._lock_dir = self._db_path + ".locks"
        self._mu = threading.Lock()
        self._closed = False
        self._idle: list[sqlite3.Connection] = []
        self._locks: set[_filelock.FileLock] = set()
        self._ephemeral: set[str] = set()  # deleted by close()
        self._watcher: ChangeWatcher | None = None
        try:
            self._run(lambda c: tree.init_schema(c, self._db_path), write=True, what="open")
            # SQLite syncs the directory after creating a journal or WAL file, not after creating the database
            # file itself: a database made just before a machine crash would be gone with its name.
            fsync_dir(os.path.dirname(self._db_path))
        except OSError as e:
            self.close()
            raise MetadataError(f"cannot sync the directory of {self._db_path}: {e}") from e
        except BaseException:
            self.close()
            raise
        _STORES.add(self)

    def __enter__(self) -> SqliteMetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteMetadataStore({self._db_path!r})"

    # --- reads ----------------------------------------------------------------------------
    def get(self, path: str) -> Versioned[bytes]:
        """Data and version of a node.

        Raises:
            InvalidArgumentError: malformed path. NoNodeError: no such node.
            MetadataError: SQLite failure. AlreadyClosedError: the store is closed.
        """
        path = tree.check_path(path)

        def fn(c: sqlite3.Connection) -> Versioned[bytes]:
            row = c.execute("SELECT data, version FROM nodes WHERE path = ?", (path,)).fetchone()
            if row is None:
                raise NoNodeError(f"no node {path}")
            return Versioned(bytes(row[0]), int(row[1]))

        return self._run(fn, write=False, what=f"get {path}")

    def get_many(self, paths: Sequence[str]) -> list[Versioned[bytes] | None]:
        """Data and version of several nodes (None for a missing one), in one read transaction.

        Raises:
            InvalidArgumentError: malformed path. MetadataError, AlreadyClosedError.
        """
        checked = [tree.check_path(p) for p in paths]

        def fn(c: sqlite3.Connection) -> list[Versioned[bytes] | None]:
            out: list[Versioned[bytes] | None] = []
            for p in checked:
                row = c.execute("SELECT data, version FROM nodes WHERE path = ?", (p,)).fetchone()
                out.append(None if row is None else Versioned(bytes(row[0]), int(row[1])))
            return out

        return self._run(fn, write=False, what=f"get {len(checked)} nodes")

    def exists(self, path: str) -> int | None:
        """The node's version, or None if it does not exist.

        Raises:
            InvalidArgumentError: malformed path. MetadataError: SQLite failure.
            AlreadyClosedError: the store is closed.
        """
        path = tree.check_path(path)

        def fn(c: sqlite3.Connection) -> int | None:
            row = c.execute("SELECT version FROM nodes WHERE path = ?", (path,)).fetchone()
            return None if row is None else int(row[0])

        return self._run(fn, write=False, what=f"exists {path}")

    def children(self, path: str) -> list[str]:
        """Names (not paths) of the node's children, sorted by code point.

        Raises:
            InvalidArgumentError: malformed path. NoNodeError: no such node.
            MetadataError: SQLite failure. AlreadyClosedError: the store is closed.
        """
        path = tree.check_path(path)

        def fn(c: sqlite3.Connection) -> list[str]:
            if c.execute("SELECT 1 FROM nodes WHERE path = ?", (path,)).fetchone() is None:
                raise NoNodeError(f"no node {path}")
            return [r[0] for r in c.execute("SELECT name FROM nodes WHERE parent = ? ORDER BY name", (path,))]

        return self._run(fn, write=False, what=f"children {path}", begin="BEGIN")

    def children_with_version(self, path: str) -> tuple[list[str], int]:
        """The children and the change-log position of the node's last children change (the change log
        records a parent whenever one of its children is created or deleted; -1 once pruned away: a
        later change still moves it).

        Raises:
            InvalidArgumentError: malformed path. NoNodeError: no such node.
            MetadataError: SQLite failure. AlreadyClosedError: the store is closed.
        """
        path = tree.check_path(path)

        def fn(c: sqlite3.Connection) -> tuple[list[str], int]:
            if c.execute("SELECT 1 FROM nodes WHERE path = ?", (path,)).fetchone() is None:
                raise NoNodeError(f"no node {path}")
            names = [r[0] for r in c.execute("SELECT name FROM nodes WHERE parent = ? ORDER BY name", (path,))]
            row = c.execute("SELECT MAX(seq) FROM changes WHERE path = ?", (path,)).fetchone()
            return names, -1 if row is None or row[0] is None else int(row[0])

        return self._run(fn, write=False, what=f"children {path}", begin="BEGIN")

    # --- writes ---------------------------------------------------------------------------
    def create(self, path: str, data: bytes = b"", *, make_parents: bool = False) -> None:
        """Create a node (and, with ``make_parents``, missing ancestors with empty data).

        Raises:
            InvalidArgumentError: malformed path or data. NodeExistsError: it exists.
            NoNodeError: the parent is missing. MetadataError: SQLite failure.
            MetadataConnectionError: busy for too long. AlreadyClosedError: the store is closed.
        """
        path, data = tree.check_path(path), tree.check_data(data)
        self._mutate(lambda c, changed: tree.do_create(c, path, data, make_parents, changed), f"create {path}")

    def create_ephemeral(self, path: str, data: bytes = b"") -> None:
        """Create a node deleted when this store closes (there are no sessions: a killed process leaves it).

        Raises:
            InvalidArgumentError, NodeExistsError, NoNodeError, MetadataError, MetadataConnectionError,
            AlreadyClosedError (as :meth:`create`).
        """
        path = tree.check_path(path)
        if path == "/":
            raise InvalidArgumentError("the root cannot be ephemeral")
        self.create(path, data)
        with self._mu:
            self._ephemeral.add(path)

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> int:
        """Replace a node's data; returns the new version.

        Raises:
            InvalidArgumentError: malformed path, data or version. NoNodeError: no such node.
            MetadataVersionError: the version does not match. MetadataError: SQLite failure.
            MetadataConnectionError: busy for too long. AlreadyClosedError: the store is closed.
        """
        path, data, version = tree.check_path(path), tree.check_data(data), tree.check_version(version)
        return self._mutate(lambda c, changed: tree.do_set(c, path, data, version, changed), f"set {path}")

    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None:
        """Delete a node (with ``recursive``, its whole subtree, atomically).

        Raises:
            InvalidArgumentError: malformed path or version, or the root. NoNodeError: no such node.
            MetadataVersionError: the version does not match. MetadataError: children present (not
            recursive) or SQLite failure. MetadataConnectionError: busy for too long.
            AlreadyClosedError: the store is closed.
        """
        path, version = tree.check_path(path), tree.check_version(version)
        if path == "/":
            raise InvalidArgumentError("the root cannot be deleted")
        self._mutate(lambda c, changed: tree.do_delete(c, path, version, recursive, changed), f"delete {path}")

    def multi(self, ops: Sequence[Op]) -> None:
        """Apply every operation atomically in one transaction, or none; each operation sees the
        effects of the previous ones.

        Raises:
            InvalidArgumentError: an operation is malformed (checked before anything is applied).
            NodeExistsError, NoNodeError, MetadataVersionError: the first failing operation.
            MetadataError: a Delete of a node with children, or SQLite failure.
            MetadataConnectionError: busy for too long. AlreadyClosedError: the store is closed.
        """
        checked = tree.check_ops(ops)
        self._check_open()
        if checked:
            self._mutate(lambda c, changed: tree.do_multi(c, checked, changed), f"multi of {len(checked)} ops")

    # --- locks and watches ----------------------------------------------------------------
    def lock(self, path: str, client_id: str, timeout_s: float) -> OwnershipLock:
        """Take the exclusive lock at ``path`` (a node that must exist), waiting up to ``timeout_s``
        (0 = try once, negative = forever). Not re-entrant, even within one store instance.

        Raises:
            InvalidArgumentError: malformed path, client id or timeout. NoNodeError: no such node.
            OwnershipAcquireFailedError: still owned by another holder after the timeout (names its
            client id). LockingError: the lock file failed. AlreadyClosedError: the store is closed.
        """
        path = tree.check_path(path)
        if not isinstance(client_id, str):
            raise InvalidArgumentError(f"client_id must be a str, not {type(client_id).__name__}")
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or math.isnan(timeout_s):
            raise InvalidArgumentError(f"timeout_s must be a number, not {timeout_s!r}")
        if self.exists(path) is None:
            raise NoNodeError(f"no lock node {path}")
        lk = _filelock.acquire(self._lock_dir, path, client_id, timeout_s, lambda: self._closed, self._forget_lock)
        with self._mu:
            if not self._closed:
                self._locks.add(lk)
                return lk
        lk.release()
        raise AlreadyClosedError("metadata store closed while taking a lock")

    def watch(self, path: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(path)`` from a background thread after any change to the data or the
        children of ``path`` committed (by any process) after this call began, until cancelled.
        Register before reading to never miss a change. Returns the cancel function.

        Raises:
            InvalidArgumentError: malformed path or callback not callable.
            MetadataError: SQLite failure. AlreadyClosedError: the store is closed.
        """
        path = tree.check_path(path)
        if not callable(callback):
            raise InvalidArgumentError("callback must be callable")
        baseline = self._run(
            lambda c: int(c.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0]),
            write=False,
            what="watch",
        )
        with self._mu:
            if self._closed:
                raise AlreadyClosedError("metadata store is closed")
            if self._watcher is None:
                self._watcher = ChangeWatcher(self._db_path, self._open_connection, baseline, POLL_S)
            return self._watcher.add(path, callback, baseline)

    def close(self) -> None:
        """Delete this store's ephemeral nodes, release its locks, stop its watch thread, close its
        connections. Idempotent."""
        with self._mu:
            ephemeral, self._ephemeral = sorted(self._ephemeral, reverse=True), set()
        for path in ephemeral:
            with contextlib.suppress(DLError):
                self.delete(path)
        with self._mu:
            if self._closed:
                return
            self._closed = True
            locks, self._locks = list(self._locks), set()
            watcher, self._watcher = self._watcher, None
            idle, self._idle = self._idle, []
        for lk in locks:
            lk.release()
        if watcher is not None:
            watcher.stop()
        for conn in idle:
            conn.close()

    # --- transactions ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError("metadata store is closed")

    def _open_connection(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise MetadataError(f"{self._db_path}: cannot use WAL mode (journal_mode is {mode})")
            conn.execute("PRAGMA synchronous = FULL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _acquire_connection(self) -> sqlite3.Connection:
        with self._mu:
            self._check_open()
            if self._idle:
                return self._idle.pop()
        return self._open_connection()

    def _release_connection(self, conn: sqlite3.Connection) -> None:
        with self._mu:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def _run(self, fn: Callable[[sqlite3.Connection], R], *, write: bool, what: str, begin: str | None = None) -> R:
        """Run ``fn`` in a transaction (``BEGIN IMMEDIATE`` for writes), retrying busy errors."""
        begin = "BEGIN IMMEDIATE" if write else begin
        deadline = time.monotonic() + RETRY_S
        delay = 0.002
        while True:
            committing = False
            try:
                conn = self._acquire_connection()
                try:
                    if begin is not None:
                        conn.execute(begin)
                    result = fn(conn)
                    if begin is not None:
                        committing = True
                        conn.execute("COMMIT")
                    return result
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
                finally:
                    self._release_connection(conn)
            except sqlite3.Error as e:
                if self._closed:
                    raise AlreadyClosedError("metadata store is closed") from e
                if not _is_busy(e):
                    raise self._error(e, what, write and committing) from e
                if time.monotonic() >= deadline:
                    raise MetadataConnectionError(f"{what}: {self._db_path} stayed busy: {e}") from e
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.1)

    def _error(self, e: sqlite3.Error, what: str, committing: bool) -> MetadataError:
        """A failed transaction as the caller's error: a full disk (SQLite rolled the transaction back) or an I/O
        error is retriable (once space is freed, the disk works again); an I/O error while committing leaves the
        outcome unknown (the commit may be in the WAL)."""
        code = (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF
        text = f"{what} failed on {self._db_path}: {e}"
        if code == _SQLITE_FULL:
            return MetadataError(f"{text} ({free_space(self._db_path)})", retriable=True)
        if code == _SQLITE_IOERR:
            return MetadataError(text, retriable=True, outcome_unknown=committing)
        return MetadataError(text)

    def _mutate(self, fn: Callable[[sqlite3.Connection, list[str]], R], what: str) -> R:
        """Run a mutation and log the paths it changed, in one write transaction."""

        def tx(c: sqlite3.Connection) -> R:
            changed: list[str] = []
            result = fn(c, changed)
            tree.log_changes(c, changed)
            return result

        return self._run(tx, write=True, what=what)

    # --- bookkeeping ----------------------------------------------------------------------
    def _forget_lock(self, lk: _filelock.FileLock) -> None:
        with self._mu:
            self._locks.discard(lk)

    def _after_fork_in_child(self) -> None:
        self._mu = threading.Lock()
        _FORK_ORPHANS.extend(self._idle)
        self._idle = []
        for lk in self._locks:
            lk.forget_after_fork()
        self._locks = set()
        if self._watcher is not None:
            self._watcher.forget_after_fork()
            self._watcher = None


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["SqliteMetadataStore"]
