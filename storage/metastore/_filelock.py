"""Process-death-safe exclusive locks on files (``fcntl.flock``), for the embedded metadata store.

A lock on metadata path ``p`` is an exclusive ``flock`` on ``<lock dir>/<sha1(p)>.lock``. ``flock``
locks belong to the open file description, so two opens of the same file conflict even inside one
process (no re-entrancy), and the kernel drops the lock when the last descriptor of the holder is
closed, which happens when the holder process dies (SIGKILL included). Lock files are never
unlinked: unlinking a lock file races with a waiter that already opened it (two holders of two
different inodes).

The holder writes ``{"client_id": ..., "pid": ...}`` into the file once it owns it, so a waiter that
times out can name the current owner.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable

from storage.common.durable import try_flock
from storage.errors import AlreadyClosedError, LockingError, OwnershipAcquireFailedError
from storage.metastore._lockwait import LockWait
from storage.metastore.base import OwnershipLock

#: Longest sleep between two attempts while waiting for a lock.
MAX_POLL_S = 0.02


def lock_file_for(lock_dir: str, path: str) -> str:
    """The lock file of metadata path ``path`` inside ``lock_dir``."""
    return os.path.join(lock_dir, hashlib.sha1(path.encode("utf-8")).hexdigest() + ".lock")


def read_owner(fd: int) -> str | None:
    """The client id recorded in an open lock file, or None if unknown (empty or being rewritten)."""
    try:
        raw = os.pread(fd, 65536, 0)
        record = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None
    owner = record.get("client_id") if isinstance(record, dict) else None
    return owner if isinstance(owner, str) else None


class FileLock(OwnershipLock):
    """A held ``flock``; released by :meth:`release`, by closing its store, or by process death."""

    def __init__(self, path: str, fd: int, on_release: Callable[[FileLock], None]) -> None:
        self._path = path
        self._fd: int | None = fd
        self._on_release = on_release
        self._mu = threading.Lock()

    @property
    def path(self) -> str:
        """The metadata path this lock guards."""
        return self._path

    def is_held(self) -> bool:
        """True until released (or the store closed, or the process forked: a child never holds)."""
        return self._fd is not None

    def release(self) -> None:
        """Clear the owner record and drop the lock. Idempotent; never raises."""
        with self._mu:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            finally:
                os.close(fd)
        self._on_release(self)

    def forget_after_fork(self) -> None:
        """In a forked child: close the inherited descriptor (the parent keeps the lock) and stop holding."""
        self._mu = threading.Lock()
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def acquire(
    lock_dir: str,
    path: str,
    client_id: str,
    timeout_s: float,
    is_closed: Callable[[], bool],
    on_release: Callable[[FileLock], None],
) -> FileLock:
    """Take the exclusive lock of ``path``, polling up to ``timeout_s`` (0 = once, < 0 = forever).

    Raises:
        OwnershipAcquireFailedError: still held by someone else after the timeout (names the owner).
        AlreadyClosedError: the store was closed while waiting.
        LockingError: the lock file could not be opened or locked (I/O error).
    """
    deadline = None if timeout_s < 0 else time.monotonic() + timeout_s
    try:
        os.makedirs(lock_dir, exist_ok=True)
        fd = os.open(lock_file_for(lock_dir, path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise LockingError(f"cannot open the lock file of {path}: {e}") from e
    delay = 0.001
    wait = LockWait(path, timeout_s)
    try:
        while True:
            try:
                if try_flock(fd):
                    break
            except OSError as e:
                raise LockingError(f"cannot lock {path}: {e}") from e
            if is_closed():
                raise AlreadyClosedError("metadata store closed while waiting for a lock")
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                owner = read_owner(fd)
                raise OwnershipAcquireFailedError(
                    f"lock {path} is owned by {owner if owner is not None else 'an unknown holder'}",
                    current_owner=owner,
                )
            wait.waiting(lambda: read_owner(fd))
            time.sleep(delay if deadline is None else min(delay, max(deadline - now, 0.0)))
            delay = min(delay * 2, MAX_POLL_S)
        record = json.dumps({"client_id": client_id, "pid": os.getpid()}).encode("utf-8")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, record, 0)
        except OSError as e:
            raise LockingError(f"cannot record the owner of lock {path}: {e}") from e
    except BaseException:
        os.close(fd)
        raise
    return FileLock(path, fd, on_release)
