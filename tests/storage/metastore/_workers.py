"""Functions run in child processes (multiprocessing 'spawn') by the metadata store tests."""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

from storage.errors import MetadataVersionError
from storage.metastore.base import MetadataStore
from storage.metastore.sqlite import SqliteMetadataStore


def cas_increments(db: str, path: str, count: int, go: Any, out: Any) -> None:
    """Once ``go`` is set, increment the decimal counter at ``path`` ``count`` times by compare-and-set;
    puts the number of conflicts retried on ``out``. A short pause between the read and the write widens
    the race window, so that conflicts really happen."""
    conflicts = 0
    with SqliteMetadataStore(db) as store:
        go.wait()
        for _ in range(count):
            while True:
                cur = store.get(path)
                time.sleep(0.0005)
                try:
                    store.set(path, str(int(cur.value) + 1).encode(), cur.version)
                    break
                except MetadataVersionError:
                    conflicts += 1
    out.put(conflicts)


def hold_lock(db: str, path: str, client_id: str, ready: Any, fork_child: bool, out: Any) -> None:
    """Take the lock, optionally fork a child that inherits it, signal ``ready``, then sleep until killed.

    With ``fork_child``, puts ``(child_pid, child_sees_lock_held)`` on ``out`` before signalling.
    """
    store = SqliteMetadataStore(db)
    lk = store.lock(path, client_id, 5)
    if fork_child:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what it sees, then outlive its parent for a while
            os.close(r)
            os.write(w, b"1" if lk.is_held() else b"0")
            os.close(w)
            time.sleep(60)
            os._exit(0)
        os.close(w)
        seen = os.read(r, 1)
        os.close(r)
        out.put((pid, seen == b"1"))
    ready.set()
    while True:
        time.sleep(1)


def take_lock(db: str, path: str, client_id: str, timeout_s: float, out: Any, report_waiting: bool = False) -> None:
    """Wait for the lock; puts ``("ok", wall-clock time acquired)`` or ``(error class name, current_owner)``
    on ``out``. With ``report_waiting``, first ``("waiting", message)`` when the wait logs its WARNING (it is
    blocked on a holder, and says which)."""
    if report_waiting:

        class Report(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                out.put(("waiting", record.getMessage()))

        logging.getLogger("storage.metastore.lock").addHandler(Report(logging.WARNING))
    with SqliteMetadataStore(db) as store:
        try:
            lk = store.lock(path, client_id, timeout_s)
        except Exception as e:
            out.put((type(e).__name__, getattr(e, "current_owner", None)))
            return
        out.put(("ok", time.time()))
        lk.release()


def apply(store: MetadataStore, op: str, path: str, data: bytes) -> None:
    """One mutation: ``set``, ``create``, ``delete`` or ``delete-recursive``."""
    if op == "set":
        store.set(path, data)
    elif op == "create":
        store.create(path, data)
    elif op == "delete":
        store.delete(path)
    elif op == "delete-recursive":
        store.delete(path, recursive=True)
    else:
        raise ValueError(f"unknown mutation {op!r}")


def mutate(db: str, op: str, path: str, data: bytes) -> None:
    """One mutation (see :func:`apply`) from another process."""
    with SqliteMetadataStore(db) as store:
        apply(store, op, path, data)


def kill_quietly(pid: int) -> None:
    """SIGKILL ``pid`` if it still exists."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
