"""Change notification for the local segment store: one background thread per store.

With inotify (``inotify_simple``) the thread watches ``<root>/ledgers/`` and wakes within
milliseconds of any write, truncate, rename or delete of a ledger file by any process. If
inotify is unavailable (no kernel support, out of instances or watches) it falls back to
stat-polling the directory every ``poll_interval`` seconds.

Every change of ledger ``L`` goes to the :class:`~storage.segstore._changes.ChangeHub` this
watcher is (generations, waiters, callbacks). Notifications may be spurious (e.g. a write that
did not move the LAC).
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Any

from storage.segstore._changes import ChangeHub
from storage.segstore._ledgerfile import parse_ledger_file_name

try:
    from inotify_simple import INotify
    from inotify_simple import flags as inotify_flags
except ImportError:  # pragma: no cover - the package is a dependency
    INotify = None

_log = logging.getLogger(__name__)


class ChangeWatcher(ChangeHub):
    """Turns changes of ledger files into generation bumps and callbacks (thread-safe)."""

    def __init__(self, ledgers_dir: str, *, poll_interval: float = 0.05, use_inotify: bool = True) -> None:
        super().__init__()
        self._dir = ledgers_dir
        self._poll_interval = poll_interval
        self._wake_r, self._wake_w = os.pipe()
        self._inotify = self._open_inotify() if use_inotify else None
        # Polling baseline taken here, before any caller can append, so a change made between
        # construction and the thread's first scan is not missed.
        self._baseline = self._stat_all() if self._inotify is None else {}
        self._thread = threading.Thread(target=self._run, name="segstore-watch", daemon=True)
        self._thread.start()

    def _open_inotify(self) -> Any:
        if INotify is None:  # pragma: no cover
            return None
        try:
            ino = INotify()
        except OSError as exc:
            _log.warning("inotify unavailable (%s); polling %s", exc, self._dir)
            return None
        mask = (
            inotify_flags.MODIFY
            | inotify_flags.ATTRIB
            | inotify_flags.CLOSE_WRITE
            | inotify_flags.CREATE
            | inotify_flags.DELETE
            | inotify_flags.MOVED_FROM
            | inotify_flags.MOVED_TO
            | inotify_flags.ONLYDIR
        )
        try:
            ino.add_watch(self._dir, mask)
        except OSError as exc:
            _log.warning("cannot watch %s with inotify (%s); polling instead", self._dir, exc)
            ino.close()
            return None
        return ino

    @property
    def uses_inotify(self) -> bool:
        """Whether changes are delivered by inotify (else by polling)."""
        return self._inotify is not None

    @property
    def recheck_interval(self) -> float:
        """How long a waiter may sleep before re-reading state on its own."""
        return 1.0 if self._inotify is not None else self._poll_interval

    def close(self) -> None:
        """Stop the thread and release its file descriptors. Idempotent."""
        with self._cond:
            if self._stopped:
                return
        self.stop()
        os.write(self._wake_w, b"x")
        self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self._inotify is not None:
            self._inotify.close()

    # --- the thread -----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if self._inotify is not None:
                self._run_inotify()
            else:
                self._run_polling()
        except Exception:  # pragma: no cover - keep waiters alive: they re-check on their own
            _log.exception("segment store watcher failed; waiters fall back to re-checking")

    def _run_inotify(self) -> None:
        ino = self._inotify
        assert ino is not None
        poller = select.poll()
        poller.register(ino.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while not self._stopped:
            poller.poll()
            if self._stopped:
                return
            ids: set[int] = set()
            lost = False
            for event in ino.read(timeout=0):
                if event.mask & inotify_flags.Q_OVERFLOW:
                    lost = True
                lid = parse_ledger_file_name(event.name)
                if lid is not None:
                    ids.add(lid)
            if lost:
                ids.update(self._list_ids())
            self.changed(ids, lost)

    def _run_polling(self) -> None:
        seen = self._baseline
        while not self._stopped:
            if select.select([self._wake_r], [], [], self._poll_interval)[0]:
                return
            now = self._stat_all()
            changed = {lid for lid in seen.keys() | now.keys() if seen.get(lid) != now.get(lid)}
            seen = now
            if changed:
                self.changed(changed)

    def _stat_all(self) -> dict[int, tuple[int, int, int]]:
        out: dict[int, tuple[int, int, int]] = {}
        try:
            with os.scandir(self._dir) as it:
                for entry in it:
                    lid = parse_ledger_file_name(entry.name)
                    if lid is None:
                        continue
                    try:
                        st = entry.stat()
                    except FileNotFoundError:
                        continue
                    out[lid] = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError as exc:
            _log.warning("cannot poll %s: %s", self._dir, exc)
        return out

    def _list_ids(self) -> list[int]:
        try:
            return [lid for name in os.listdir(self._dir) if (lid := parse_ledger_file_name(name)) is not None]
        except OSError:
            return []
