"""Names that survive a machine crash: a new file or directory is durable only once the directory holding its
name was fsynced (POSIX; ext4 and xfs usually persist it sooner, other file systems and unlucky timing do not).

Every directory the project creates goes through :func:`makedirs_durable`, which fsyncs the parent of each
directory it made, up to the first one that existed; files created in a directory are followed by
:func:`fsync_dir` of that directory.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path


def try_flock(fd: int) -> bool:
    """Take ``flock(LOCK_EX)`` on ``fd`` without waiting: True if taken, False if another open file holds it.

    Raises:
        OSError: the lock call failed for another reason.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file (its data) or a directory (the names created, renamed or removed in it) by its path.

    Raises:
        OSError: it cannot be opened or synced.
    """
    _fsync(path, os.O_RDONLY)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory, so that the names created, renamed or removed in it survive a crash.

    Raises:
        OSError: the directory cannot be opened or synced (``NotADirectoryError``: ``path`` is no directory).
    """
    _fsync(path, os.O_RDONLY | os.O_DIRECTORY)


def _fsync(path: str | os.PathLike[str], flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(path: str | os.PathLike[str]) -> list[Path]:
    """``mkdir -p path``, each directory made durable (its parent fsynced) before returning; returns the
    directories made, outermost first (none when ``path`` existed).

    A directory another process made at the same moment counts as existing, and its parent is fsynced all the same
    (that process may not have got that far).

    Raises:
        OSError: a directory cannot be made or synced (``FileExistsError``: ``path`` or one of its parents is a
            file).
    """
    target = Path(os.path.abspath(path))
    missing: list[Path] = []
    p = target
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    if not missing and not target.is_dir():
        raise FileExistsError(f"{target} exists and is not a directory")
    made: list[Path] = []
    for d in reversed(missing):
        try:
            d.mkdir()
            made.append(d)
        except FileExistsError:
            if not d.is_dir():
                raise
        fsync_dir(d.parent)
    return made


def os_error_detail(exc: OSError, path: str | os.PathLike[str]) -> str:
    """``exc`` as text for an error message about ``path``; a full disk also says how much space is left there
    (``No space left on device (12.0 KiB free of 8.0 MiB on the file system of PATH)``)."""
    text = f"[Errno {exc.errno}] {exc.strerror}" if exc.strerror else str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        text += f" ({free_space(path)})"
    return text


def free_space(path: str | os.PathLike[str]) -> str:
    """``12.0 KiB free of 8.0 MiB on the file system of PATH`` (what a full-disk error adds)."""
    where = os.fspath(path)
    try:
        st = os.statvfs(where if os.path.isdir(where) else os.path.dirname(where) or ".")
    except OSError:
        return f"on the file system of {where}"
    return (
        f"{_size(st.f_bavail * st.f_frsize)} free of {_size(st.f_blocks * st.f_frsize)} on the file system of {where}"
    )


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
