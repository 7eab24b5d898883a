"""The change-watching thread of the embedded metadata store.

Every mutation appends ``(seq, path)`` rows to the ``changes`` table in the same transaction (the
node itself, and its parent when children change). One background thread per store instance
follows that log: it sleeps on inotify events for the database's ``-wal`` file (every commit of
any process writes it), checks ``PRAGMA data_version`` (which changes on any commit by another
connection), then reads the new rows and calls the matching callbacks.

A commit becomes visible slightly after its WAL write (fsync, then the WAL index), so after an
event the thread re-checks with a short backoff (1, 2, 4 ... ms). Without events it still polls
every ``poll_s`` seconds, so a missed or unavailable inotify costs latency, never a change.

If the log was pruned past the rows this thread has not read yet (it fell more than the retained
window behind), every watch is called once: spurious calls are allowed, missed changes are not.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from storage.metastore._watchthread import call_watch, join_watch_thread

log = logging.getLogger(__name__)

#: Rows read from the change log per query.
BATCH = 5000
#: First re-check delay after an inotify event.
FAST_S = 0.001


@dataclass(eq=False)
class _Watch:
    path: str
    callback: Callable[[str], None]
    baseline: int  # changes with seq <= baseline were committed before the watch was registered
    cancelled: bool = field(default=False)
    pending: bool = field(default=False)  # registered after the thread passed its baseline: call once


def _open_inotify(db_path: str) -> Any | None:
    """An inotify instance watching the database directory, or None if unavailable."""
    try:
        from inotify_simple import INotify, flags

        ino = INotify()
        try:
            ino.add_watch(os.path.dirname(os.path.abspath(db_path)), flags.MODIFY | flags.CREATE | flags.MOVED_TO)
        except BaseException:
            ino.close()
            raise
        return ino
    except (ImportError, OSError):
        log.debug("inotify unavailable for %s; polling only", db_path, exc_info=True)
        return None


class ChangeWatcher:
    """Follows the change log from ``start_seq`` on and dispatches callbacks."""

    def __init__(
        self, db_path: str, open_connection: Callable[[], sqlite3.Connection], start_seq: int, poll_s: float
    ) -> None:
        self._db_path = db_path
        self._open_connection = open_connection
        self._last_seq = start_seq
        self._poll_s = poll_s
        self._watches: dict[int, _Watch] = {}
        self._next_id = 0
        self._mu = threading.Lock()
        self._stop = threading.Event()
        base = os.path.basename(db_path)
        self._names = {base, base + "-wal"}
        self._thread = threading.Thread(target=self._run, name=f"metastore-watch:{base}", daemon=True)
        self._thread.start()

    def add(self, path: str, callback: Callable[[str], None], baseline: int) -> Callable[[], None]:
        """Register a watch; returns its (idempotent) cancel function."""
        w = _Watch(path, callback, baseline)
        with self._mu:
            w.pending = baseline < self._last_seq
            wid = self._next_id
            self._next_id += 1
            self._watches[wid] = w

        def cancel() -> None:
            w.cancelled = True
            with self._mu:
                self._watches.pop(wid, None)

        return cancel

    def stop(self, join_timeout_s: float = 10.0) -> None:
        """Stop the thread (and wait for it, unless called from a callback on that thread)."""
        self._stop.set()
        with self._mu:
            self._watches.clear()
        join_watch_thread(self._thread, join_timeout_s, log, f"of {self._db_path}")

    def forget_after_fork(self) -> None:
        """In a forked child (where the thread does not exist): drop every watch."""
        self._mu = threading.Lock()
        self._stop.set()
        self._watches.clear()

    # --- the thread -----------------------------------------------------------------------
    def _run(self) -> None:
        ino = _open_inotify(self._db_path)
        conn: sqlite3.Connection | None = None
        last_dv: int | None = None
        delay = self._poll_s
        try:
            while not self._stop.is_set():
                try:
                    if conn is None:
                        conn = self._open_connection()
                        last_dv = None
                    dv = int(conn.execute("PRAGMA data_version").fetchone()[0])
                    if dv != last_dv:
                        self._dispatch(conn)
                        last_dv = dv  # only once every row up to this commit was dispatched
                        delay = FAST_S
                    self._call_pending()
                except Exception:  # sqlite3.Error, or a connection that cannot be opened right now
                    log.warning("metadata watch on %s failed; retrying", self._db_path, exc_info=True)
                    if conn is not None:
                        conn.close()
                        conn = None
                    delay = self._poll_s
                woke = self._wait(ino, delay)
                delay = FAST_S if woke else min(delay * 2, self._poll_s)
        finally:
            if conn is not None:
                conn.close()
            if ino is not None:
                ino.close()

    def _wait(self, ino: Any | None, delay: float) -> bool:
        """Sleep up to ``delay``; True if the database files were written meanwhile."""
        if ino is None:
            self._stop.wait(delay)
            return False
        try:
            events = ino.read(timeout=max(1, int(delay * 1000)))
        except OSError:
            self._stop.wait(delay)
            return False
        return any(ev.name in self._names for ev in events)

    def _dispatch(self, conn: sqlite3.Connection) -> None:
        while not self._stop.is_set():
            rows = conn.execute(
                "SELECT seq, path FROM changes WHERE seq > ? ORDER BY seq LIMIT ?", (self._last_seq, BATCH)
            ).fetchall()
            if not rows:
                return
            gap = rows[0][0] != self._last_seq + 1
            latest: dict[str, int] = {}
            for seq, path in rows:
                latest[path] = seq
            with self._mu:
                self._last_seq = rows[-1][0]
                watches = list(self._watches.values())
            for w in watches:
                seq = latest.get(w.path)
                if gap or (seq is not None and seq > w.baseline):
                    self._call(w)
            if len(rows) < BATCH:
                return

    def _call_pending(self) -> None:
        with self._mu:
            pending = [w for w in self._watches.values() if w.pending]
            for w in pending:
                w.pending = False
        for w in pending:
            self._call(w)

    @staticmethod
    def _call(w: _Watch) -> None:
        call_watch(w, log)
