"""Behaviour every :class:`~storage.metastore.base.MetadataStore` shares, run on both implementations
(the embedded SQLite store and the ZooKeeper store against a real, private server): versions and
CAS, create/delete, multi (all or nothing), children, bad input, close, concurrent clients, locks and
watches. Backend-specific behaviour is tested in ``test_sqlite_*.py`` and ``test_zookeeper_store.py``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest

from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    LockingError,
    MetadataError,
    MetadataVersionError,
    NodeExistsError,
    NoNodeError,
    OwnershipAcquireFailedError,
)
from storage.metastore.base import Check, Create, Delete, MetadataStore, Op, OwnershipLock, SetData, Versioned
from storage.metastore.sqlite import SqliteMetadataStore
from tests.storage.metastore import _workers
from tests.storage.metastore._stores import WAIT_S, StoreFactory, run_in_process, until, watch_probe

BACKENDS = ["sqlite", "zookeeper"]


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """Opens stores of one backend on a fresh tree of this test's own (closed afterwards)."""
    if request.param == "zookeeper":
        open_zk = request.getfixturevalue("open_zk_store")
        others: list[MetadataStore] = []

        def zk_elsewhere(op: str, path: str, data: bytes) -> None:
            if not others:
                others.append(open_zk())
            _workers.apply(others[0], op, path, data)

        yield StoreFactory("zookeeper", open_zk, zk_elsewhere)
        return
    db: str = request.getfixturevalue("db")
    stores: list[SqliteMetadataStore] = []

    def open_sqlite() -> SqliteMetadataStore:
        s = SqliteMetadataStore(db)
        stores.append(s)
        return s

    def sqlite_elsewhere(op: str, path: str, data: bytes) -> None:
        run_in_process(_workers.mutate, db, op, path, data)

    yield StoreFactory("sqlite", open_sqlite, sqlite_elsewhere)
    for s in stores:
        s.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> MetadataStore:
    return store_factory()


# --- versions -----------------------------------------------------------------------------
def test_root_exists_and_reopen_keeps_data(store_factory: StoreFactory) -> None:
    s = store_factory()
    assert s.get("/") == Versioned(b"", 0)
    assert s.children("/") == []
    s.create("/a", b"hello")
    s.close()
    s = store_factory()
    assert s.get("/a") == Versioned(b"hello", 0)
    assert s.children("/") == ["a"]


def test_versions_and_cas(store: MetadataStore) -> None:
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


def test_empty_and_binary_data(store: MetadataStore) -> None:
    blob = bytes(range(256)) * 10
    store.create("/e")
    store.create("/b", bytearray(blob))  # type: ignore[arg-type]
    assert store.get("/e").value == b""
    assert store.get("/b").value == blob
    store.set("/e", memoryview(b"mv"))  # type: ignore[arg-type]
    assert store.get("/e") == Versioned(b"mv", 1)


# --- create / delete ----------------------------------------------------------------------
def test_create_needs_parent_unless_make_parents(store: MetadataStore) -> None:
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
    store.create("/a/b/d", make_parents=True)  # parents exist already
    assert store.children("/a/b") == ["c", "d"]


def test_delete_with_children(store: MetadataStore) -> None:
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
    with pytest.raises(NoNodeError):
        store.delete("/a", recursive=True)
    with pytest.raises(InvalidArgumentError):
        store.delete("/", recursive=True)


def test_children_sorted(store: MetadataStore) -> None:
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
def test_multi_applies_in_order(store: MetadataStore) -> None:
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
        (Create("/"), NodeExistsError),
    ],
)
def test_multi_all_or_nothing(store_factory: StoreFactory, third: Op, error: type[DLError]) -> None:
    store = store_factory()
    store.create("/a", b"a0")
    store.create("/b", b"b0")
    store.create("/x", b"x0")
    ops: list[Op] = [Create("/a/child", b"c"), SetData("/a", b"a1", 0), third, SetData("/b", b"b1")]
    with pytest.raises(error) as ei:
        store.multi(ops)
    assert type(ei.value) is error
    assert "#2" in str(ei.value)
    if store_factory.backend == "zookeeper" and (type(ei.value) is not NodeExistsError or third.path != "/"):
        assert ei.value.__cause__ is not None and type(ei.value.__cause__).__module__.startswith("kazoo")
    assert store.exists("/a/child") is None
    assert store.get("/a") == Versioned(b"a0", 0)
    assert store.get("/b") == Versioned(b"b0", 0)
    assert store.get("/x") == Versioned(b"x0", 0)
    assert store.children("/") == ["a", "b", "x"]


# --- bad input, close ---------------------------------------------------------------------
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
def test_bad_paths(store: MetadataStore, path: object) -> None:
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


def test_bad_arguments(store: MetadataStore) -> None:
    """Bad arguments of the store's methods (its constructor's: in the backend files)."""
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
        lambda: store.lock("/n", "c", float("nan")),
        lambda: store.watch("/n", "not callable"),  # type: ignore[arg-type]
    ]
    for call in bad:
        with pytest.raises(InvalidArgumentError):
            call()
    assert store.exists("/ok") is None
    with pytest.raises(NoNodeError):
        store.lock("/missing", "c", 0)


def test_closed_store(store_factory: StoreFactory) -> None:
    store = store_factory()
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
    other = store_factory()
    other.lock("/n", "other", 0).release()  # close released the lock (ZooKeeper: closing the session)


# --- concurrency --------------------------------------------------------------------------
def test_concurrent_cas_increments_from_separate_clients(store_factory: StoreFactory) -> None:
    """Several threads share each store; several stores (clients) share the tree."""
    clients, threads_per_client, per_thread = 4, 2, 30
    stores = [store_factory() for _ in range(clients)]
    stores[0].create("/counter", b"0")
    go = threading.Event()
    conflicts: list[int] = []
    errors: list[BaseException] = []

    def work(s: MetadataStore) -> None:
        mine = 0
        try:
            go.wait()
            for _ in range(per_thread):
                while True:
                    cur = s.get("/counter")
                    try:
                        s.set("/counter", b"%d" % (int(cur.value) + 1), cur.version)
                        break
                    except MetadataVersionError:
                        mine += 1
        except BaseException as e:
            errors.append(e)
        conflicts.append(mine)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores for _ in range(threads_per_client)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(60)
    assert not errors
    total = clients * threads_per_client * per_thread
    assert stores[1].get("/counter") == Versioned(b"%d" % total, total)
    print(f"CAS conflicts retried: {sum(conflicts)}")


# --- locks --------------------------------------------------------------------------------
def test_lock_exclusive_between_instances_and_not_reentrant(store_factory: StoreFactory) -> None:
    a, b = store_factory(), store_factory()
    zk = store_factory.backend == "zookeeper"
    a.create("/log/lock", make_parents=True)
    lk = a.lock("/log/lock", "writer-a", 0)
    assert lk.path == "/log/lock"
    assert lk.is_held()
    lk.check()
    with pytest.raises(OwnershipAcquireFailedError) as ei:
        a.lock("/log/lock", "writer-a", 0)  # not re-entrant, same instance (and session)
    assert ei.value.current_owner == "writer-a"
    with pytest.raises(OwnershipAcquireFailedError) as ei:
        b.lock("/log/lock", "writer-b", 0.3)
    assert ei.value.current_owner == "writer-a"
    assert "writer-a" in str(ei.value)
    if zk:
        assert len(a.children("/log/lock")) == 1  # failed attempts removed their members
    other = b.lock("/log", "writer-b", 0)  # another path is independent
    lk.release()
    lk.release()
    assert not lk.is_held()
    with pytest.raises(LockingError):
        lk.check()
    lk2 = b.lock("/log/lock", "writer-b", 0)
    assert lk2.is_held()
    lk2.release()
    other.release()
    a.lock("/log/lock", "writer-a", 0).release()
    if zk:
        assert a.children("/log/lock") == []


#: How long a wait "forever" must at least last in the test below: past every finite wait of the suite's lock
#: settings (BASE_CONF's lockTimeoutSeconds is 1 s) and the wait's WARNING (half a second).
FOREVER_PROBE_S = 3.0


def test_lock_waits_forever_until_released(store_factory: StoreFactory) -> None:
    """A negative timeout: the wait says it waits until the lock is released, is still waiting long after any
    short timeout would have given up, and takes the lock once it is released."""
    store, other = store_factory(), store_factory()
    store.create("/l")
    lk = store.lock("/l", "first", 0)
    said: list[str] = []

    class Said(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    result: Future[OwnershipLock] = Future()

    def take() -> None:
        try:
            result.set_result(other.lock("/l", "second", -1))
        except BaseException as e:
            result.set_exception(e)

    handler = Said(logging.WARNING)
    logging.getLogger("storage.metastore.lock").addHandler(handler)
    try:
        threading.Thread(target=take, daemon=True).start()
        assert until(lambda: bool(said)), "no WARNING from the waiting lock"
    finally:
        logging.getLogger("storage.metastore.lock").removeHandler(handler)
    assert len(said) == 1 and said[0].endswith("held by first; waiting until it is released"), said
    with pytest.raises(TimeoutError):  # not given up: still waiting
        result.result(timeout=FOREVER_PROBE_S)
    lk.release()
    lk2 = result.result(timeout=WAIT_S)
    assert lk2.is_held() and not lk.is_held()
    lk2.release()


# --- watches ------------------------------------------------------------------------------
def test_watch_sees_data_and_children_changes_from_elsewhere(store_factory: StoreFactory) -> None:
    """Changes by another client (SQLite: another process; ZooKeeper: another session)."""
    store = store_factory()
    store.create("/w/deep", make_parents=True)
    probe = watch_probe(store, "/w")
    assert not probe.event.wait(0.2)  # nothing happened yet
    steps: list[tuple[str, str, bytes, Callable[[], bool] | None]] = [
        ("set", "/w", b"1", lambda: store.get("/w").value == b"1"),
        ("create", "/w/c", b"", lambda: store.children("/w") == ["c", "deep"]),
        ("set", "/w/c", b"grandchild data is not a change of /w", None),
        ("delete", "/w/c", b"", lambda: store.children("/w") == ["deep"]),
        ("delete-recursive", "/w", b"", None),
        ("create", "/w", b"again", None),  # a watch on a missing node sees its creation
        ("set", "/w", b"2", None),
    ]
    for i, (op, path, data, check) in enumerate(steps):
        probe.event.clear()
        store_factory.mutate_elsewhere(op, path, data)
        if i == 2:
            assert not probe.event.wait(0.3)
            continue
        assert probe.event.wait(WAIT_S), f"no callback after step {i}"
        if check is not None:
            assert check(), f"step {i}"
    assert set(probe.calls) == {"/w"}
    assert store.get("/w").value == b"2"


def test_watch_cancel_stops_callbacks(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.create("/w")
    calls: list[str] = []
    cancel = store.watch("/w", calls.append)
    store_factory.mutate_elsewhere("set", "/w", b"1")
    assert until(lambda: bool(calls))
    cancel()
    cancel()  # idempotent
    seen = len(calls)
    sentinel = watch_probe(store, "/w")  # registered after the cancel: fires after it would have
    store_factory.mutate_elsewhere("set", "/w", b"2")
    assert sentinel.event.wait(WAIT_S)
    time.sleep(0.1)
    assert len(calls) == seen


def test_watch_callbacks_may_use_the_store_and_failures_are_isolated(store_factory: StoreFactory) -> None:
    store, other = store_factory(), store_factory()
    store.create("/w", b"0")
    seen: list[bytes] = []
    done = threading.Event()

    def boom(path: str) -> None:
        raise RuntimeError("callback failure")

    def reads_back(path: str) -> None:
        seen.append(store.get(path).value)  # calls into the store from the callback thread
        store.set("/echo", seen[-1]) if store.exists("/echo") is not None else store.create("/echo", seen[-1])
        done.set()

    store.watch("/w", boom)
    store.watch("/w", reads_back)
    probe = watch_probe(store, "/w")
    changes: list[tuple[bytes, Callable[[bytes], object]]] = [
        (b"1", lambda v: store.set("/w", v)),  # by the store itself
        (b"2", lambda v: store_factory.mutate_elsewhere("set", "/w", v)),  # by another client
    ]
    for value, change in changes:
        done.clear()
        probe.event.clear()
        change(value)
        assert done.wait(WAIT_S)
        assert probe.event.wait(WAIT_S)
        assert until(lambda v=value: other.get("/echo").value == v)  # type: ignore[misc]
    assert seen[-1] == b"2"


def test_children_version_moves_with_every_child_create_and_delete(store: MetadataStore) -> None:
    store.create("/cv/a", b"1", make_parents=True)
    names, v0 = store.children_with_version("/cv")
    assert names == ["a"] and store.children_with_version("/cv") == (["a"], v0)
    store.set("/cv/a", b"2")  # a child's data: not a children change
    store.create("/cv/a/deeper")  # a grandchild: not a children change of /cv
    assert store.children_with_version("/cv") == (["a"], v0)
    seen = {v0}
    for step in (
        lambda: store.create("/cv/b"),
        lambda: store.delete("/cv/b"),
        # delete + create of the same name in one transaction (a truncation's rewrite): same names, new version
        lambda: store.multi([Delete("/cv/a/deeper"), Delete("/cv/a"), Create("/cv/a", b"3")]),
    ):
        step()
        names, v = store.children_with_version("/cv")
        assert v not in seen, (names, v, seen)
        seen.add(v)
    assert names == ["a"]
    with pytest.raises(NoNodeError):
        store.children_with_version("/no/such")
