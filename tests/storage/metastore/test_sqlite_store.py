"""Single-process behaviour of the embedded metadata store: versions, create/delete, multi, errors."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    MetadataConnectionError,
    MetadataError,
    MetadataVersionError,
    NodeExistsError,
    NoNodeError,
    OwnershipAcquireFailedError,
)
from storage.metastore import _sqlite_tree, sqlite
from storage.metastore.base import Check, Create, Delete, Op, SetData, Versioned
from storage.metastore.sqlite import SqliteMetadataStore


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "meta.db")


@pytest.fixture
def store(db: str) -> Iterator[SqliteMetadataStore]:
    s = SqliteMetadataStore(db)
    yield s
    s.close()


# --- versions -----------------------------------------------------------------------------
def test_root_exists_and_reopen_keeps_data(db: str) -> None:
    with SqliteMetadataStore(db) as s:
        assert s.get("/") == Versioned(b"", 0)
        s.create("/a", b"hello")
        raw = sqlite3.connect(db)
        try:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            raw.close()
    with SqliteMetadataStore(db) as s:
        assert s.get("/a") == Versioned(b"hello", 0)
        assert s.children("/") == ["a"]


def test_versions_and_cas(store: SqliteMetadataStore) -> None:
    store.create("/n", b"v0")
    assert store.exists("/n") == 0
    assert store.set("/n", b"v1", 0) == 1
    assert store.set("/n", b"v2") == 2  # -1 = any version
    with pytest.raises(MetadataVersionError) as ei:
        store.set("/n", b"stale", 1)
    assert ei.value.retriable
    assert store.get("/n") == Versioned(b"v2", 2)
    with pytest.raises(MetadataVersionError):
        store.delete("/n", 1)
    store.delete("/n", 2)
    assert store.exists("/n") is None
    with pytest.raises(NoNodeError):
        store.get("/n")
    with pytest.raises(NoNodeError):
        store.set("/n", b"x")


def test_empty_and_binary_data(store: SqliteMetadataStore) -> None:
    blob = bytes(range(256)) * 10
    store.create("/e")
    store.create("/b", bytearray(blob))  # type: ignore[arg-type]
    assert store.get("/e").value == b""
    assert store.get("/b").value == blob
    store.set("/e", memoryview(b"mv"))  # type: ignore[arg-type]
    assert store.get("/e") == Versioned(b"mv", 1)


# --- create / delete ----------------------------------------------------------------------
def test_create_needs_parent_unless_make_parents(store: SqliteMetadataStore) -> None:
    with pytest.raises(NoNodeError):
        store.create("/a/b", b"x")
    assert store.exists("/a") is None
    store.create("/a/b/c", b"leaf", make_parents=True)
    assert store.get("/a") == Versioned(b"", 0)
    assert store.get("/a/b") == Versioned(b"", 0)
    assert store.get("/a/b/c") == Versioned(b"leaf", 0)
    with pytest.raises(NodeExistsError):
        store.create("/a/b/c", make_parents=True)
    with pytest.raises(NodeExistsError):
        store.create("/a")
    with pytest.raises(NodeExistsError):
        store.create("/")


def test_delete_with_children(store: SqliteMetadataStore) -> None:
    store.create("/a/b/c", make_parents=True)
    store.create("/a/b2")
    store.create("/a0")  # sorts right after "/a/..." subtree; must survive
    store.create("/a-")  # sorts before "/a/"; must survive
    with pytest.raises(MetadataError) as ei:
        store.delete("/a")
    assert type(ei.value) is MetadataError
    assert store.exists("/a/b/c") == 0
    with pytest.raises(MetadataVersionError):
        store.delete("/a", 3, recursive=True)
    store.delete("/a", 0, recursive=True)
    for p in ("/a", "/a/b", "/a/b/c", "/a/b2"):
        assert store.exists(p) is None
    assert store.children("/") == ["a-", "a0"]
    with pytest.raises(NoNodeError):
        store.delete("/a")
    with pytest.raises(InvalidArgumentError):
        store.delete("/", recursive=True)


def test_children_sorted(store: SqliteMetadataStore) -> None:
    names = [
        "b",
        "a",
        "B",
        "a1",
        "10",
        "9",
        "é",
        "z",
        "_",
        "inprogress_000000000000000002",
        "logrecs_000000000000000001",
    ]
    for n in names:
        store.create("/p/" + n, make_parents=True)
    store.create("/p/a1/deeper")
    assert store.children("/p") == sorted(names)
    assert store.children("/p/z") == []
    with pytest.raises(NoNodeError):
        store.children("/missing")


# --- multi --------------------------------------------------------------------------------
def test_multi_applies_in_order(store: SqliteMetadataStore) -> None:
    store.create("/l", b"0")
    store.create("/old", b"o")
    store.multi(
        [
            Create("/l/seg1", b"s"),
            SetData("/l", b"1", 0),
            SetData("/l", b"2", 1),  # sees the previous op
            Check("/l", 2),
            Delete("/old", 0),
            Create("/old", b"new"),
        ]
    )
    assert store.get("/l") == Versioned(b"2", 2)
    assert store.get("/l/seg1").value == b"s"
    assert store.get("/old") == Versioned(b"new", 0)
    store.multi([])


@pytest.mark.parametrize(
    ("third", "error"),
    [
        (Create("/x", b"dup"), NodeExistsError),
        (SetData("/missing", b""), NoNodeError),
        (Create("/no/parent"), NoNodeError),
        (SetData("/a", b"", 0), MetadataVersionError),  # op 2 moved /a to version 1
        (Check("/b", 5), MetadataVersionError),
        (Delete("/b", 7), MetadataVersionError),
        (Delete("/a"), MetadataError),  # /a has a child created by op 1
    ],
)
def test_multi_all_or_nothing(store: SqliteMetadataStore, third: Op, error: type[DLError]) -> None:
    store.create("/a", b"a0")
    store.create("/b", b"b0")
    store.create("/x", b"x0")
    ops: list[Op] = [Create("/a/child", b"c"), SetData("/a", b"a1", 0), third, SetData("/b", b"b1")]
    with pytest.raises(error) as ei:
        store.multi(ops)
    assert type(ei.value) is error
    assert "#2" in str(ei.value)
    assert store.exists("/a/child") is None
    assert store.get("/a") == Versioned(b"a0", 0)
    assert store.get("/b") == Versioned(b"b0", 0)
    assert store.get("/x") == Versioned(b"x0", 0)
    assert store.children("/") == ["a", "b", "x"]


# --- bad input, busy, close ---------------------------------------------------------------
BAD_PATHS: list[object] = [
    "",
    "a",
    "a/b",
    "/a/",
    "//",
    "/a//b",
    "/a/./b",
    "/..",
    "/a\x00b",
    "/a\x01",
    "/\ud800",
    7,
    None,
]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_bad_paths(store: SqliteMetadataStore, path: object) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.get(path),  # type: ignore[arg-type]
        lambda: store.exists(path),  # type: ignore[arg-type]
        lambda: store.children(path),  # type: ignore[arg-type]
        lambda: store.create(path, make_parents=True),  # type: ignore[arg-type]
        lambda: store.set(path, b""),  # type: ignore[arg-type]
        lambda: store.delete(path),  # type: ignore[arg-type]
        lambda: store.multi([Create("/ok"), Check(path, 0)]),  # type: ignore[arg-type]
        lambda: store.lock(path, "c", 0),  # type: ignore[arg-type]
        lambda: store.watch(path, print),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentError):
            call()
    assert store.children("/") == []


def test_bad_arguments(store: SqliteMetadataStore, tmp_path: Path) -> None:
    store.create("/n")
    bad: list[Callable[[], object]] = [
        lambda: store.create("/m", "text"),  # type: ignore[arg-type]
        lambda: store.set("/n", None),  # type: ignore[arg-type]
        lambda: store.set("/n", b"", -2),
        lambda: store.set("/n", b"", True),
        lambda: store.delete("/n", "0"),  # type: ignore[arg-type]
        lambda: store.multi([Create("/ok"), "not an op"]),  # type: ignore[list-item]
        lambda: store.multi([Delete("/")]),
        lambda: store.multi("/n"),  # type: ignore[arg-type]
        lambda: store.lock("/n", 5, 0),  # type: ignore[arg-type]
        lambda: store.lock("/n", "c", "soon"),  # type: ignore[arg-type]
        lambda: store.watch("/n", "not callable"),  # type: ignore[arg-type]
        lambda: SqliteMetadataStore(42),  # type: ignore[arg-type]
    ]
    for call in bad:
        with pytest.raises(InvalidArgumentError):
            call()
    assert store.exists("/ok") is None
    with pytest.raises(NoNodeError):
        store.lock("/missing", "c", 0)


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


def test_closed_store(db: str) -> None:
    store = SqliteMetadataStore(db)
    store.create("/n")
    lk = store.lock("/n", "me", 0)
    store.watch("/n", lambda p: None)
    store.close()
    store.close()  # idempotent
    assert not lk.is_held()
    lk.release()  # still idempotent
    calls: list[Callable[[], object]] = [
        lambda: store.get("/n"),
        lambda: store.exists("/n"),
        lambda: store.children("/"),
        lambda: store.create("/m"),
        lambda: store.set("/n", b""),
        lambda: store.delete("/n"),
        lambda: store.multi([Check("/n", 0)]),
        lambda: store.lock("/n", "me", 0),
        lambda: store.watch("/n", print),
    ]
    for call in calls:
        with pytest.raises(AlreadyClosedError):
            call()
    with SqliteMetadataStore(db) as other:  # close released the lock
        other.lock("/n", "other", 0).release()


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


# --- locks within one process -------------------------------------------------------------
def test_lock_exclusive_between_instances_and_not_reentrant(db: str) -> None:
    with SqliteMetadataStore(db) as a, SqliteMetadataStore(db) as b:
        a.create("/log/lock", make_parents=True)
        lk = a.lock("/log/lock", "writer-a", 0)
        assert lk.path == "/log/lock"
        assert lk.is_held()
        lk.check()
        with pytest.raises(OwnershipAcquireFailedError) as ei:
            a.lock("/log/lock", "writer-a", 0)  # not re-entrant, same instance
        assert ei.value.current_owner == "writer-a"
        with pytest.raises(OwnershipAcquireFailedError) as ei:
            b.lock("/log/lock", "writer-b", 0.2)
        assert ei.value.current_owner == "writer-a"
        assert "writer-a" in str(ei.value)
        other = b.lock("/log", "writer-b", 0)  # another path is independent
        lk.release()
        lk.release()
        assert not lk.is_held()
        with pytest.raises(DLError):
            lk.check()
        lk2 = b.lock("/log/lock", "writer-b", 0)
        assert lk2.is_held()
        lk2.release()
        other.release()
        a.lock("/log/lock", "writer-a", 0).release()


def test_lock_waits_forever_until_released(store: SqliteMetadataStore, db: str) -> None:
    store.create("/l")
    lk = store.lock("/l", "first", 0)
    threading.Timer(0.2, lk.release).start()
    with SqliteMetadataStore(db) as other:
        lk2 = other.lock("/l", "second", -1)
        assert lk2.is_held() and not lk.is_held()


def test_threads_share_stores(db: str) -> None:
    threads_per_store, per_thread = 4, 30
    with SqliteMetadataStore(db) as a, SqliteMetadataStore(db) as b:
        a.create("/counter", b"0")

        def work(store: SqliteMetadataStore) -> None:
            for _ in range(per_thread):
                while True:
                    cur = store.get("/counter")
                    try:
                        store.set("/counter", b"%d" % (int(cur.value) + 1), cur.version)
                        break
                    except MetadataVersionError:
                        pass

        threads = [threading.Thread(target=work, args=(s,)) for s in (a, b) for _ in range(threads_per_store)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert b.get("/counter") == Versioned(
            b"%d" % (2 * threads_per_store * per_thread), 2 * threads_per_store * per_thread
        )
