"""tools/crashfs.py alone: what a crash forgets and keeps, full and failing disks (the rules the machine-crash tests
stand on; POSIX's, stricter than ext4's)."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from storage.common.durable import fsync_path
from tools.crashfs import CrashFS, CrashFSError


def _append(path: Path, data: bytes, *, sync: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_unsynced_data_and_names_are_forgotten(crashfs: CrashFS) -> None:
    root = crashfs.mountpoint
    (root / "d").mkdir()
    _append(root / "d" / "f", b"durable", sync=True)
    _append(root / "d" / "f", b" lost")
    assert (root / "d" / "f").read_bytes() == b"durable lost"  # readable before the crash
    crashfs.crash(1)
    assert not (root / "d").exists()  # the directory's name was never synced in its parent

    (root / "d").mkdir()
    fsync_path(root)
    _append(root / "d" / "f", b"durable", sync=True)
    fsync_path(root / "d")
    _append(root / "d" / "f", b" lost")
    (root / "d" / "new").write_bytes(b"x")
    crashfs.crash(2)
    assert (root / "d" / "f").read_bytes() == b"durable" and os.listdir(root / "d") == ["f"]


def test_rename_unlink_and_torn_writes(crashfs: CrashFS) -> None:
    root = crashfs.mountpoint
    _append(root / "a", b"A", sync=True)
    _append(root / "b", b"B", sync=True)
    fsync_path(root)
    os.rename(root / "b", root / "a")
    os.unlink(root / "a")
    assert os.listdir(root) == []
    crashfs.crash(3)
    assert sorted(os.listdir(root)) == ["a", "b"] and (root / "a").read_bytes() == b"A"

    fd = os.open(root / "a", os.O_WRONLY | os.O_APPEND)
    for i in range(10):
        os.write(fd, b"%d" % i)
    os.close(fd)
    kept = [crashfs.crash(seed, torn=True)["bytes_torn_kept"] for seed in range(40) if not _reset(root / "a")]
    assert set(kept) != {0}, "a torn crash keeps a prefix of the unsynced writes now and then"


def _reset(path: Path) -> bool:
    """Append ten unsynced bytes again after a crash; the file's content is always "A" plus a prefix of them."""
    data = path.read_bytes()
    assert data[:1] == b"A" and b"0123456789".startswith(data[1:]), data
    os.truncate(path, 1)
    fsync_path(path)
    _append(path, b"0123456789")
    return False


def test_full_disk_gives_short_writes_then_enospc_and_recovers(crashfs: CrashFS) -> None:
    root = crashfs.mountpoint
    crashfs.fault(enospc_after=3)
    fd = os.open(root / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert os.write(fd, b"12345") == 3
        with pytest.raises(OSError) as full:
            os.write(fd, b"45")
        assert full.value.errno == errno.ENOSPC
        with pytest.raises(OSError):
            (root / "g").mkdir()
        assert os.statvfs(root).f_bavail == 0
        crashfs.fault()
        assert os.write(fd, b"45") == 2
    finally:
        os.close(fd)
    assert (root / "f").read_bytes() == b"12345"


def test_a_failed_fsync_loses_its_pages_although_a_later_fsync_succeeds(crashfs: CrashFS) -> None:
    root = crashfs.mountpoint
    page = 4096
    _append(root / "f", b"a" * page, sync=True)
    fsync_path(root)
    fd = os.open(root / "f", os.O_WRONLY)
    try:
        os.pwrite(fd, b"b" * (2 * page), page)  # pages 1 and 2
        crashfs.fault(eio_fsync="f")
        with pytest.raises(OSError) as failed:
            os.fsync(fd)
        assert failed.value.errno == errno.EIO
        crashfs.fault()
        os.pwrite(fd, b"c", 3 * page)  # page 3
        os.pwrite(fd, b"B", 2 * page)  # page 2 written again: written back whole by the next fsync
        os.fsync(fd)  # succeeds, and does not save page 1
    finally:
        os.close(fd)
    crashfs.crash(4)
    data = (root / "f").read_bytes()
    assert len(data) == 3 * page + 1
    assert data[page : 2 * page] == bytes(page)  # page 1 lost: what the disk had (nothing: zeros)
    assert data[2 * page : 2 * page + 2] == b"Bb" and data[-1:] == b"c"


def test_sqlite_in_wal_mode_keeps_committed_transactions(crashfs: CrashFS) -> None:
    db = crashfs.mountpoint / "m.db"
    c = sqlite3.connect(db)
    c.execute("PRAGMA journal_mode = WAL")
    c.execute("PRAGMA synchronous = FULL")
    c.execute("CREATE TABLE t (x)")
    c.commit()
    fsync_path(crashfs.mountpoint)  # the database file's own name (SQLite syncs the directory only for its journals)
    for i in range(50):
        c.execute("INSERT INTO t VALUES (?)", (i,))
        c.commit()
    c.close()
    crashfs.crash(5)
    c = sqlite3.connect(db)
    try:
        assert c.execute("SELECT count(*) FROM t").fetchone() == (50,)
    finally:
        c.close()


def test_a_crash_refuses_while_files_are_open(crashfs: CrashFS) -> None:
    with open(crashfs.mountpoint / "f", "wb"), pytest.raises(CrashFSError, match="still open"):
        crashfs.crash(6, wait_s=0.2)
