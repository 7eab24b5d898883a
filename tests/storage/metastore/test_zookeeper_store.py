"""The ZooKeeper metadata store against a real, private ZooKeeper server, in what is its own: roots and
chroots, data size limit, chunked recursive deletes, constructor arguments, DistributedLog's lock
(member nodes, waiters, holder death, session expiry), watches across session expiry, and outages (no
kazoo exception escapes). What every store shares is in ``test_store_behaviour.py``."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storage.errors import (
    AlreadyClosedError,
    InvalidArgumentError,
    LockingError,
    MetadataConnectionError,
    MetadataVersionError,
    OwnershipAcquireFailedError,
)
from storage.metastore import zookeeper
from storage.metastore.base import Check, Create, SetData, Versioned
from storage.metastore.zookeeper import (
    ZooKeeperLock,
    ZooKeeperMetadataStore,
    client_id_of_member,
    encode_client_id,
    member_id,
    member_prefix,
)
from tests.storage.metastore._stores import WAIT_S, ZK_FAST, OpenZkStore, until, watch_probe
from tests.storage.observe import wait_parked_in
from tests.zk import ZooKeeperServer, expire_session, free_port


@pytest.fixture
def store(open_zk_store: OpenZkStore) -> ZooKeeperMetadataStore:
    return open_zk_store()


# --- roots, data, deletes, arguments -----------------------------------------------------
def test_deeper_root_and_chroot_in_hosts(
    open_zk_store: OpenZkStore, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """A deeper root is created with its ancestors; a chroot in the connect string prefixes root.
    (Root and reopening in general: the shared suite.)"""
    open_zk_store().create("/a", b"hello")
    deep = open_zk_store(root=f"{zk_chroot}/deep/er")
    deep.create("/x", b"1")
    via_hosts = ZooKeeperMetadataStore(f"{zk_server.hosts}{zk_chroot}", "/deep/er", **ZK_FAST)
    try:
        assert via_hosts.root == f"{zk_chroot}/deep/er"
        assert via_hosts.get("/x").value == b"1"
    finally:
        via_hosts.close()
    whole = open_zk_store(root="/")
    assert whole.children(zk_chroot) == ["a", "deep"]
    assert whole.get(f"{zk_chroot}/deep/er/x").value == b"1"


def test_oversized_data(store: ZooKeeperMetadataStore) -> None:
    store.create("/e")
    big = b"x" * (zookeeper.MAX_DATA_BYTES + 1)
    with pytest.raises(InvalidArgumentError):
        store.create("/big", big)
    with pytest.raises(InvalidArgumentError):
        store.multi([Create("/big"), SetData("/big", big)])
    assert store.exists("/big") is None
    store.set("/e", b"y" * zookeeper.MAX_DATA_BYTES)  # the limit itself is fine
    assert len(store.get("/e").value) == zookeeper.MAX_DATA_BYTES


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


def test_bad_constructor_arguments(zk_server: ZooKeeperServer) -> None:
    """(Bad arguments of the store's methods: the shared suite.)"""
    hosts = zk_server.hosts
    bad: list[Callable[[], object]] = [
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


def test_unreachable_server_is_a_connection_error() -> None:
    others = set(threading.enumerate())
    t0 = time.monotonic()
    hosts = f"127.0.0.1:{free_port()}"
    with pytest.raises(MetadataConnectionError) as ei:
        ZooKeeperMetadataStore(hosts, connect_timeout_s=0.5)
    assert ei.value.retriable
    assert str(ei.value).startswith(f"cannot connect to ZooKeeper at {hosts} within 0.5 s (open_timeout_s): ")
    print(f"gave up after {time.monotonic() - t0:.2f}s")
    # The failed store's own watch thread is gone (threads of other tests' stores are not ours).
    assert until(
        lambda: not any(t.name.startswith("metastore-watch:zk") and t not in others for t in threading.enumerate()),
        20,
    )


# --- locks --------------------------------------------------------------------------------
def test_member_name_helpers() -> None:
    assert encode_client_id("a b/é*~_-.") == "a+b%2F%C3%A9*%7E_-."  # java.net.URLEncoder
    assert member_prefix("w", 5) == "member_w_s         5_"  # String.format("%10d", sessionId)
    assert member_prefix("w", 72057594037927936) == "member_w_s72057594037927936_"
    assert member_id("member_w_s72057594037927936_0000000012") == 12
    assert member_id("junk") == member_id("member_x_s1_notanumber") == 2**31 - 1
    assert client_id_of_member("member_a+b%2F_x_s123_0000000001") == "a b/_x"
    assert client_id_of_member("member_0000000001") is None


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


def test_lock_waiters_in_order_and_forever(open_zk_store: OpenZkStore) -> None:
    a, b, c = open_zk_store(), open_zk_store(), open_zk_store()
    a.create("/l")
    lk_a = a.lock("/l", "a", 0)
    got: list[str] = []
    held: dict[str, Any] = {}

    def take(s: ZooKeeperMetadataStore, who: str) -> None:
        held[who] = s.lock("/l", who, -1)
        got.append(who)

    tb = threading.Thread(target=take, args=(b, "b"))
    tb.start()
    assert until(lambda: len(a.children("/l")) == 2)
    tc = threading.Thread(target=take, args=(c, "c"))
    tc.start()
    assert until(lambda: len(a.children("/l")) == 3)
    for t in (tb, tc):  # each looked at the members after joining them, and waits for the one before it
        wait_parked_in(t, "_wait_for_member", "storage/metastore/_zk_lock.py")
    assert got == []
    lk_a.release()
    tb.join(WAIT_S)
    assert got == ["b"]
    assert not lk_a.is_held() and held["b"].is_held()
    held["b"].release()
    tc.join(WAIT_S)
    assert got == ["b", "c"]
    held["c"].release()


def test_store_closed_while_waiting_for_a_lock(open_zk_store: OpenZkStore) -> None:
    a, b = open_zk_store(), open_zk_store()
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
    assert until(lambda: len(a.children("/l")) == 2)
    b.close()
    t.join(WAIT_S)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], AlreadyClosedError)
    assert until(lambda: len(a.children("/l")) == 1)
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


def test_lock_lost_on_session_expiry(open_zk_store: OpenZkStore, zk_server: ZooKeeperServer) -> None:
    a, b = open_zk_store(), open_zk_store()
    a.create("/l")
    lk = a.lock("/l", "a", 0)
    old = a.session_credentials()
    expire_session(a, zk_server.hosts)
    assert until(lambda: not lk.is_held())
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
def test_watch_survives_session_expiry(open_zk_store: OpenZkStore, zk_server: ZooKeeperServer) -> None:
    store, other = open_zk_store(), open_zk_store()
    store.create("/w")
    ev = watch_probe(store, "/w").event
    expire_session(store, zk_server.hosts)
    assert ev.wait(WAIT_S)  # called once after the reconnect: changes may have been missed
    ev.clear()
    other.set("/w", b"after")  # re-armed under the new session
    assert ev.wait(WAIT_S)


# --- outages: no kazoo exception escapes --------------------------------------------------
def test_server_outage_raises_connection_errors_then_recovers(
    open_zk_store: OpenZkStore, zk_server: ZooKeeperServer
) -> None:
    store = open_zk_store(session_timeout_s=30.0, connect_timeout_s=0.3, retry_max_tries=1)
    other = open_zk_store()
    store.create("/n", b"0")
    store.create("/l1")
    store.create("/l2")
    lk1 = store.lock("/l1", "me", 0)
    lk2 = store.lock("/l2", "me", 0)
    ev = watch_probe(store, "/n").event
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
        # SUSPENDED, not expired: the session may come back, so the lock is held and check() passes (a writer
        # goes on; the segment store's fencing keeps it out if the session did expire and another writer took over)
        assert lk1.is_held()
        lk1.check()
        lk2.release()  # never raises; the delete is queued for the reconnect
    finally:
        zk_server.start()
    # Recovery, not its speed, is what is tested: the waits are generous (a loaded machine restarts the server
    # slowly), and one that runs out says what the store was doing.
    _recovers(lambda: _reachable(store), "the store to reconnect", store)
    assert lk1.is_held()  # same session after the restart
    assert len(other.children("/l1")) == 1
    _recovers(lambda: other.children("/l2") == [], "the released lock's member to be deleted", store)
    assert ev.wait(WAIT_S)  # watches are called once after a reconnect
    ev.clear()
    other.set("/n", b"after")  # ... and re-armed
    assert ev.wait(WAIT_S)
    assert store.get("/n").value == b"after"
    lk1.release()
    assert other.children("/l1") == []


#: How long a test waits for a store to recover after the server came back.
RECOVERY_S = 60.0


def _recovers(cond: Callable[[], bool], what: str, store: ZooKeeperMetadataStore) -> None:
    """Wait up to ``RECOVERY_S`` for ``cond``; else fail naming ``what`` and the store's connection state."""
    t0 = time.monotonic()
    if until(cond, RECOVERY_S):
        return
    client = store._client
    pytest.fail(
        f"no {what} within {time.monotonic() - t0:.0f}s: kazoo state {client.state}, connected {client.connected}, "
        f"session {store._session_id!r}, suspended since {store._suspended_since!r}, "
        f"stale lock members {dict(store._locking._stale_members)}, orphan scans {set(store._locking._orphan_scans)}"
    )


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
