"""The ZooKeeper metadata store against a real, private ZooKeeper server: the embedded store's
behaviours (versions, create/delete, multi, errors), DistributedLog's lock (member nodes, exclusion,
holder death, session expiry), watches, and outages (no kazoo exception escapes)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    LockingError,
    MetadataConnectionError,
    MetadataError,
    MetadataVersionError,
    NodeExistsError,
    NoNodeError,
    OwnershipAcquireFailedError,
)
from storage.metastore import zookeeper
from storage.metastore.base import Check, Create, Delete, Op, SetData, Versioned
from storage.metastore.zookeeper import (
    ZooKeeperLock,
    ZooKeeperMetadataStore,
    client_id_of_member,
    encode_client_id,
    member_id,
    member_prefix,
)
from tests.zk import ZooKeeperServer, expire_session, free_port

WAIT_S = 20.0
#: Test settings: short backoffs so that failures surface quickly.
FAST: dict[str, Any] = {
    "session_timeout_s": 10.0,
    "connect_timeout_s": 5.0,
    "retry_max_tries": 3,
    "retry_start_backoff_ms": 20,
    "retry_max_backoff_ms": 200,
}

OpenStore = Callable[..., ZooKeeperMetadataStore]


@pytest.fixture
def open_store(zk_server: ZooKeeperServer, zk_chroot: str) -> Iterator[OpenStore]:
    """Opens stores (each its own client and session) on this test's chroot; closes them afterwards."""
    stores: list[ZooKeeperMetadataStore] = []

    def make(**settings: Any) -> ZooKeeperMetadataStore:
        root = settings.pop("root", zk_chroot)
        s = ZooKeeperMetadataStore(zk_server.hosts, root, **{**FAST, **settings})
        stores.append(s)
        return s

    yield make
    for s in stores:
        s.close()


@pytest.fixture
def store(open_store: OpenStore) -> ZooKeeperMetadataStore:
    return open_store()


def _until(cond: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


# --- versions -----------------------------------------------------------------------------
def test_root_created_and_reopen_keeps_data(open_store: OpenStore, zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    s = open_store()
    assert s.get("/") == Versioned(b"", 0)
    assert s.children("/") == []
    s.create("/a", b"hello")
    s.close()
    s = open_store()
    assert s.get("/a") == Versioned(b"hello", 0)
    assert s.children("/") == ["a"]
    # a deeper root is created with its ancestors; a chroot in the connect string prefixes root
    deep = open_store(root=f"{zk_chroot}/deep/er")
    deep.create("/x", b"1")
    via_hosts = ZooKeeperMetadataStore(f"{zk_server.hosts}{zk_chroot}", "/deep/er", **FAST)
    try:
        assert via_hosts.root == f"{zk_chroot}/deep/er"
        assert via_hosts.get("/x").value == b"1"
    finally:
        via_hosts.close()
    whole = open_store(root="/")
    assert whole.children(zk_chroot) == ["a", "deep"]
    assert whole.get(f"{zk_chroot}/deep/er/x").value == b"1"


def test_versions_and_cas(store: ZooKeeperMetadataStore) -> None:
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


def test_empty_binary_and_oversized_data(store: ZooKeeperMetadataStore) -> None:
    blob = bytes(range(256)) * 10
    store.create("/e")
    store.create("/b", bytearray(blob))  # type: ignore[arg-type]
    assert store.get("/e").value == b""
    assert store.get("/b").value == blob
    store.set("/e", memoryview(b"mv"))  # type: ignore[arg-type]
    assert store.get("/e") == Versioned(b"mv", 1)
    big = b"x" * (zookeeper.MAX_DATA_BYTES + 1)
    with pytest.raises(InvalidArgumentError):
        store.create("/big", big)
    with pytest.raises(InvalidArgumentError):
        store.multi([Create("/big"), SetData("/big", big)])
    assert store.exists("/big") is None
    store.set("/e", b"y" * zookeeper.MAX_DATA_BYTES)  # the limit itself is fine
    assert len(store.get("/e").value) == zookeeper.MAX_DATA_BYTES


# --- create / delete ----------------------------------------------------------------------
def test_create_needs_parent_unless_make_parents(store: ZooKeeperMetadataStore) -> None:
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


def test_delete_with_children(store: ZooKeeperMetadataStore) -> None:
    store.create("/a/b/c", make_parents=True)
    store.create("/a/b2")
    store.create("/a0")
    store.create("/a-")
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


def test_recursive_delete_of_a_big_subtree_in_chunks(
    store: ZooKeeperMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zookeeper, "DELETE_CHUNK", 3)
    for i in range(4):
        for j in range(3):
            store.create(f"/t/n{i}/m{j}", make_parents=True)
    store.set("/t", b"v1")
    with pytest.raises(MetadataVersionError):  # the first chunk checks the version: nothing deleted
        store.delete("/t", 0, recursive=True)
    assert len(store.children("/t")) == 4 and store.children("/t/n3") == ["m0", "m1", "m2"]
    store.delete("/t", 1, recursive=True)
    assert store.children("/") == []


def test_children_sorted(store: ZooKeeperMetadataStore) -> None:
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
def test_multi_applies_in_order(store: ZooKeeperMetadataStore) -> None:
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
def test_multi_all_or_nothing(store: ZooKeeperMetadataStore, third: Op, error: type[DLError]) -> None:
    store.create("/a", b"a0")
    store.create("/b", b"b0")
    store.create("/x", b"x0")
    ops: list[Op] = [Create("/a/child", b"c"), SetData("/a", b"a1", 0), third, SetData("/b", b"b1")]
    with pytest.raises(error) as ei:
        store.multi(ops)
    assert type(ei.value) is error
    assert "#2" in str(ei.value)
    if type(ei.value) is not NodeExistsError or third.path != "/":
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
def test_bad_paths(store: ZooKeeperMetadataStore, path: object) -> None:
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


def test_bad_arguments(store: ZooKeeperMetadataStore, zk_server: ZooKeeperServer) -> None:
    store.create("/n")
    hosts = zk_server.hosts
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
        lambda: ZooKeeperMetadataStore(42),  # type: ignore[arg-type]
        lambda: ZooKeeperMetadataStore(""),
        lambda: ZooKeeperMetadataStore("/only/a/chroot"),
        lambda: ZooKeeperMetadataStore(hosts, "no-slash"),
        lambda: ZooKeeperMetadataStore(hosts, session_timeout_s=0),
        lambda: ZooKeeperMetadataStore(hosts, connect_timeout_s=float("inf")),
        lambda: ZooKeeperMetadataStore(hosts, retry_max_tries=0),
        lambda: ZooKeeperMetadataStore(hosts, retry_start_backoff_ms=-1),
        lambda: ZooKeeperMetadataStore("127.0.0.1:notaport"),
    ]
    for call in bad:
        with pytest.raises(InvalidArgumentError):
            call()
    assert store.exists("/ok") is None
    with pytest.raises(NoNodeError):
        store.lock("/missing", "c", 0)


def test_unreachable_server_is_a_connection_error() -> None:
    t0 = time.monotonic()
    with pytest.raises(MetadataConnectionError) as ei:
        ZooKeeperMetadataStore(f"127.0.0.1:{free_port()}", connect_timeout_s=0.5)
    assert ei.value.retriable
    assert type(ei.value.__cause__).__module__.startswith("kazoo")
    print(f"gave up after {time.monotonic() - t0:.2f}s")
    assert _until(lambda: not any(t.name.startswith("metastore-watch:zk") for t in threading.enumerate()), 5)


def test_closed_store(open_store: OpenStore) -> None:
    store = open_store()
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
    other = open_store()
    other.lock("/n", "other", 0).release()  # closing the session deleted the member


# --- concurrency --------------------------------------------------------------------------
def test_concurrent_cas_increments_from_separate_clients(open_store: OpenStore) -> None:
    clients, threads_per_client, per_thread = 4, 2, 25
    stores = [open_store() for _ in range(clients)]
    stores[0].create("/counter", b"0")
    go = threading.Event()
    conflicts: list[int] = []
    errors: list[BaseException] = []

    def work(s: ZooKeeperMetadataStore) -> None:
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
def test_member_name_helpers() -> None:
    assert encode_client_id("a b/é*~_-.") == "a+b%2F%C3%A9*%7E_-."  # java.net.URLEncoder
    assert member_prefix("w", 5) == "member_w_s         5_"  # String.format("%10d", sessionId)
    assert member_prefix("w", 72057594037927936) == "member_w_s72057594037927936_"
    assert member_id("member_w_s72057594037927936_0000000012") == 12
    assert member_id("junk") == member_id("member_x_s1_notanumber") == 2**31 - 1
    assert client_id_of_member("member_a+b%2F_x_s123_0000000001") == "a b/_x"
    assert client_id_of_member("member_0000000001") is None


def test_lock_exclusive_between_instances_and_not_reentrant(open_store: OpenStore) -> None:
    a, b = open_store(), open_store()
    a.create("/log/lock", make_parents=True)
    lk = a.lock("/log/lock", "writer-a", 0)
    assert lk.path == "/log/lock"
    assert lk.is_held()
    lk.check()
    with pytest.raises(OwnershipAcquireFailedError) as ei:
        a.lock("/log/lock", "writer-a", 0)  # not re-entrant, same instance and session
    assert ei.value.current_owner == "writer-a"
    with pytest.raises(OwnershipAcquireFailedError) as ei:
        b.lock("/log/lock", "writer-b", 0.3)
    assert ei.value.current_owner == "writer-a"
    assert "writer-a" in str(ei.value)
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
    assert a.children("/log/lock") == []


def test_lock_member_node_format(store: ZooKeeperMetadataStore, zk_chroot: str) -> None:
    store.create("/l")
    lk = store.lock("/l", "writer 1/é", 0)
    assert isinstance(lk, ZooKeeperLock)
    creds = store.session_credentials()
    assert creds is not None and lk.session_id == creds[0]
    (name,) = store.children("/l")
    assert re.fullmatch(r"member_writer\+1%2F%C3%A9_s[ \d]{10,}_\d{10}", name), name
    assert name.startswith(member_prefix("writer 1/é", creds[0]))
    assert lk.member_path == f"{zk_chroot}/l/{name}"
    assert store.get(f"/l/{name}").value == "writer 1/é".encode()
    lk.release()
    assert store.children("/l") == []


def test_lock_waiters_in_order_and_forever(open_store: OpenStore) -> None:
    a, b, c = open_store(), open_store(), open_store()
    a.create("/l")
    lk_a = a.lock("/l", "a", 0)
    got: list[str] = []
    held: dict[str, Any] = {}

    def take(s: ZooKeeperMetadataStore, who: str) -> None:
        held[who] = s.lock("/l", who, -1)
        got.append(who)

    tb = threading.Thread(target=take, args=(b, "b"))
    tb.start()
    assert _until(lambda: len(a.children("/l")) == 2)
    tc = threading.Thread(target=take, args=(c, "c"))
    tc.start()
    assert _until(lambda: len(a.children("/l")) == 3)
    time.sleep(0.2)
    assert got == []
    lk_a.release()
    tb.join(WAIT_S)
    assert got == ["b"]
    assert not lk_a.is_held() and held["b"].is_held()
    held["b"].release()
    tc.join(WAIT_S)
    assert got == ["b", "c"]
    held["c"].release()


def test_store_closed_while_waiting_for_a_lock(open_store: OpenStore) -> None:
    a, b = open_store(), open_store()
    a.create("/l")
    lk = a.lock("/l", "a", 0)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            b.lock("/l", "b", -1)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=wait)
    t.start()
    assert _until(lambda: len(a.children("/l")) == 2)
    b.close()
    t.join(WAIT_S)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], AlreadyClosedError)
    assert _until(lambda: len(a.children("/l")) == 1)
    assert lk.is_held()


HOLDER = """
import sys, time
from storage.metastore.zookeeper import ZooKeeperMetadataStore
store = ZooKeeperMetadataStore(sys.argv[1], sys.argv[2], session_timeout_s=float(sys.argv[3]))
lock = store.lock("/log/lock", "holder-1", 30)
print("locked", flush=True)
time.sleep(600)
"""


def test_lock_freed_when_holder_process_is_killed(
    store: ZooKeeperMetadataStore, zk_server: ZooKeeperServer, zk_chroot: str, subprocess_env: dict[str, str]
) -> None:
    session_s = 4.0
    store.create("/log/lock", make_parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, zk_server.hosts, zk_chroot, str(session_s)],
        stdout=subprocess.PIPE,
        env=subprocess_env,
    )
    try:
        assert holder.stdout is not None
        line = _readline(holder.stdout, WAIT_S)
        assert line == "locked", line
        with pytest.raises(OwnershipAcquireFailedError) as ei:
            store.lock("/log/lock", "me", 0.3)
        assert ei.value.current_owner == "holder-1"
        killed_at = time.monotonic()
        holder.kill()
        holder.wait()
        lk = store.lock("/log/lock", "waiter", 3 * session_s + 5)  # the member goes with the session
        print(f"waiter acquired the lock {time.monotonic() - killed_at:.2f}s after the holder was SIGKILLed")
        assert lk.is_held()
        (name,) = store.children("/log/lock")
        assert store.get(f"/log/lock/{name}").value == b"waiter"
        lk.release()
    finally:
        holder.kill()
        holder.wait()


def _readline(stream: Any, timeout_s: float) -> str:
    out: list[bytes] = []
    t = threading.Thread(target=lambda: out.append(stream.readline()), daemon=True)
    t.start()
    t.join(timeout_s)
    return out[0].decode().strip() if out else "<timeout>"


def test_lock_lost_on_session_expiry(open_store: OpenStore, zk_server: ZooKeeperServer) -> None:
    a, b = open_store(), open_store()
    a.create("/l")
    lk = a.lock("/l", "a", 0)
    old = a.session_credentials()
    expire_session(a, zk_server.hosts)
    assert _until(lambda: not lk.is_held())
    with pytest.raises(LockingError):
        lk.check()
    lk_b = b.lock("/l", "b", 5)  # a's member went with its session
    new = a.session_credentials()
    assert old is not None and new is not None and new[0] != old[0]
    assert a.get("/l") == Versioned(b"", 0)  # the store goes on with its new session
    with pytest.raises(OwnershipAcquireFailedError) as ei:
        a.lock("/l", "a", 0)
    assert ei.value.current_owner == "b"
    lk.release()  # harmless: never touches b's member
    assert len(b.children("/l")) == 1 and lk_b.is_held()
    lk_b.release()
    lk2 = a.lock("/l", "a", 0)
    assert isinstance(lk2, ZooKeeperLock) and lk2.is_held() and lk2.session_id == new[0]
    lk2.release()


# --- watches ------------------------------------------------------------------------------
def _watch_event(store: ZooKeeperMetadataStore, path: str) -> tuple[threading.Event, list[str], Callable[[], None]]:
    ev = threading.Event()
    calls: list[str] = []

    def cb(p: str) -> None:
        calls.append(p)
        ev.set()

    cancel = store.watch(path, cb)
    return ev, calls, cancel


def test_watch_sees_data_and_children_changes_from_other_client(open_store: OpenStore) -> None:
    store, other = open_store(), open_store()
    store.create("/w/deep", make_parents=True)
    ev, calls, _ = _watch_event(store, "/w")
    assert not ev.wait(0.2)  # nothing happened yet
    steps: list[Callable[[], object]] = [
        lambda: other.set("/w", b"1"),
        lambda: other.create("/w/c"),
        lambda: other.set("/w/c", b"grandchild data is not a change of /w"),
        lambda: other.delete("/w/c"),
        lambda: other.delete("/w", recursive=True),
        lambda: other.create("/w", b"again"),  # a watch on a missing node sees its creation
        lambda: other.set("/w", b"2"),
    ]
    for i, step in enumerate(steps):
        ev.clear()
        step()
        if i == 2:
            assert not ev.wait(0.3)
            continue
        assert ev.wait(WAIT_S), f"no callback after step {i}"
    assert set(calls) == {"/w"}
    assert store.get("/w").value == b"2"


def test_watch_cancel_stops_callbacks(open_store: OpenStore) -> None:
    store, other = open_store(), open_store()
    store.create("/w")
    calls: list[str] = []
    cancel = store.watch("/w", calls.append)
    other.set("/w", b"1")
    assert _until(lambda: bool(calls))
    cancel()
    cancel()  # idempotent
    seen = len(calls)
    sentinel, _, _ = _watch_event(store, "/w")  # registered after the cancel: fires after it would have
    other.set("/w", b"2")
    assert sentinel.wait(WAIT_S)
    time.sleep(0.1)
    assert len(calls) == seen


def test_watch_callbacks_may_use_the_store_and_failures_are_isolated(open_store: OpenStore) -> None:
    store, other = open_store(), open_store()
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
    for value in (b"1", b"2"):
        done.clear()
        other.set("/w", value)
        assert done.wait(WAIT_S)
        assert _until(lambda v=value: other.get("/echo").value == v)  # type: ignore[misc]
    assert seen[-1] == b"2"


def test_watch_survives_session_expiry(open_store: OpenStore, zk_server: ZooKeeperServer) -> None:
    store, other = open_store(), open_store()
    store.create("/w")
    ev, _, _ = _watch_event(store, "/w")
    expire_session(store, zk_server.hosts)
    assert ev.wait(WAIT_S)  # called once after the reconnect: changes may have been missed
    ev.clear()
    other.set("/w", b"after")  # re-armed under the new session
    assert ev.wait(WAIT_S)


# --- outages: no kazoo exception escapes --------------------------------------------------
def test_server_outage_raises_connection_errors_then_recovers(
    open_store: OpenStore, zk_server: ZooKeeperServer
) -> None:
    store = open_store(session_timeout_s=30.0, connect_timeout_s=0.3, retry_max_tries=1)
    other = open_store()
    store.create("/n", b"0")
    store.create("/l1")
    store.create("/l2")
    lk1 = store.lock("/l1", "me", 0)
    lk2 = store.lock("/l2", "me", 0)
    ev, _, _ = _watch_event(store, "/n")
    zk_server.stop()
    try:
        calls: list[Callable[[], object]] = [
            lambda: store.get("/n"),
            lambda: store.exists("/n"),
            lambda: store.children("/"),
            lambda: store.create("/m"),
            lambda: store.set("/n", b"x"),
            lambda: store.delete("/n"),
            lambda: store.delete("/n", recursive=True),
            lambda: store.create("/a/b", make_parents=True),
            lambda: store.multi([Check("/n", 0), SetData("/n", b"y")]),
            lambda: store.lock("/l1", "other", 0),
            lambda: store.watch("/n", print),
        ]
        for call in calls:
            with pytest.raises(MetadataConnectionError) as ei:
                call()
            assert ei.value.retriable
            chain: list[BaseException] = []
            e: BaseException | None = ei.value
            while e is not None and len(chain) < 10:
                chain.append(e)
                e = e.__cause__ or e.__context__
            assert any(type(x).__module__.startswith("kazoo") for x in chain)
        assert lk1.is_held()  # SUSPENDED, not expired: the session may come back
        lk2.release()  # never raises; the delete is queued for the reconnect
    finally:
        zk_server.start()
    assert _until(lambda: _reachable(store))
    assert lk1.is_held()  # same session after the restart
    assert len(other.children("/l1")) == 1
    assert _until(lambda: other.children("/l2") == [])  # the queued delete ran
    assert ev.wait(WAIT_S)  # watches are called once after a reconnect
    ev.clear()
    other.set("/n", b"after")  # ... and re-armed
    assert ev.wait(WAIT_S)
    assert store.get("/n").value == b"after"
    lk1.release()
    assert other.children("/l1") == []


def _reachable(store: ZooKeeperMetadataStore) -> bool:
    try:
        store.exists("/")
        return True
    except MetadataConnectionError:
        return False


def test_only_the_adapter_imports_kazoo() -> None:
    package = Path(zookeeper.__file__).resolve().parents[1]
    importers = sorted(
        str(p.relative_to(package.parent))
        for p in package.rglob("*.py")
        if re.search(r"^\s*(import kazoo|from kazoo)", p.read_text(encoding="utf-8"), re.MULTILINE)
    )
    assert importers == ["storage/metastore/zookeeper.py"]
