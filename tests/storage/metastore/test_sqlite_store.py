"""Single-process behaviour of the embedded metadata store that is its own: the WAL database file,
constructor arguments, wrapped SQLite failures, a busy database, change-log pruning. What every
store shares is in ``test_store_behaviour.py``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from storage.errors import InvalidArgumentError, MetadataConnectionError, MetadataError
from storage.metastore import _sqlite_tree, sqlite
from storage.metastore.sqlite import SqliteMetadataStore


def test_database_in_wal_mode(db: str) -> None:
    """(Root, reopening: ``test_root_exists_and_reopen_keeps_data`` of the shared suite.)"""
    with SqliteMetadataStore(db) as s:
        s.create("/a", b"hello")
        raw = sqlite3.connect(db)
        try:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            raw.close()


def test_bad_constructor_arguments() -> None:
    with pytest.raises(InvalidArgumentError):
        SqliteMetadataStore(42)  # type: ignore[arg-type]


def test_backend_failures_are_wrapped(tmp_path: Path) -> None:
    with pytest.raises(MetadataError) as ei:
        SqliteMetadataStore(tmp_path / "no" / "such" / "dir" / "m.db")
    assert isinstance(ei.value.__cause__, sqlite3.Error)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database, just some bytes" * 100)
    with pytest.raises(MetadataError) as ei:
        SqliteMetadataStore(junk)
    assert isinstance(ei.value.__cause__, sqlite3.Error)


def test_busy_database_raises_retriable_connection_error(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_S", 0.05)
    monkeypatch.setattr(sqlite, "RETRY_S", 0.3)
    with SqliteMetadataStore(db) as store:
        store.create("/n", b"x")
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        try:
            assert store.get("/n").value == b"x"  # WAL: readers are not blocked
            with pytest.raises(MetadataConnectionError) as ei:
                store.set("/n", b"y")
            assert ei.value.retriable
            assert isinstance(ei.value.__cause__, sqlite3.OperationalError)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert store.set("/n", b"y") == 1


def test_change_log_is_pruned(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sqlite_tree, "PRUNE_EVERY", 10)
    monkeypatch.setattr(_sqlite_tree, "CHANGES_KEPT", 5)
    with SqliteMetadataStore(db) as store:
        store.create("/n")
        for i in range(60):
            store.set("/n", b"%d" % i)
    conn = sqlite3.connect(db)
    try:
        (rows,) = conn.execute("SELECT count(*) FROM changes").fetchone()
    finally:
        conn.close()
    assert rows <= 15
