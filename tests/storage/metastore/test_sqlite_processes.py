"""The embedded metadata store across real processes: CAS counters, locks (and holder death), watches."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storage.errors import OwnershipAcquireFailedError
from storage.metastore.sqlite import SqliteMetadataStore
from tests.storage.metastore import _workers

CTX = multiprocessing.get_context("spawn")
WAIT_S = 20.0


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "meta.db")


@pytest.fixture
def store(db: str) -> Iterator[SqliteMetadataStore]:
    s = SqliteMetadataStore(db)
    yield s
    s.close()


def _run(target: Callable[..., object], *args: object) -> None:
    p = CTX.Process(target=target, args=args)
    p.start()
    p.join(60)
    assert p.exitcode == 0


def test_concurrent_cas_increments(store: SqliteMetadataStore, db: str) -> None:
    procs, per_proc = 4, 50
    store.create("/counter", b"0")
    go, out = CTX.Event(), CTX.Queue()
    workers = [
        CTX.Process(target=_workers.cas_increments, args=(db, "/counter", per_proc, go, out)) for _ in range(procs)
    ]
    for w in workers:
        w.start()
    go.set()
    conflicts = [out.get(timeout=60) for _ in workers]
    for w in workers:
        w.join(WAIT_S)
        assert w.exitcode == 0
    final = store.get("/counter")
    assert int(final.value) == procs * per_proc
    assert final.version == procs * per_proc
    print(f"CAS conflicts retried: {sum(conflicts)}")


def test_lock_held_by_other_process_then_holder_killed(store: SqliteMetadataStore, db: str) -> None:
    store.create("/log/lock", make_parents=True)
    ready, out = CTX.Event(), CTX.Queue()
    holder = CTX.Process(target=_workers.hold_lock, args=(db, "/log/lock", "holder-1", ready, False, out))
    holder.start()
    try:
        assert ready.wait(WAIT_S)
        with pytest.raises(OwnershipAcquireFailedError) as ei:
            store.lock("/log/lock", "me", 0.3)
        assert ei.value.current_owner == "holder-1"
        # another process waits for it, and gets it once the holder is SIGKILLed
        waiter = CTX.Process(target=_workers.take_lock, args=(db, "/log/lock", "waiter", WAIT_S, out))
        waiter.start()
        time.sleep(0.5)
        killed_at = time.time()
        holder.kill()
        status, acquired_at = out.get(timeout=WAIT_S)
        waiter.join(WAIT_S)
        assert status == "ok"
        print(f"waiter acquired the lock {acquired_at - killed_at:.3f}s after the holder was SIGKILLed")
    finally:
        holder.kill()
        holder.join()
    lk = store.lock("/log/lock", "me", WAIT_S)  # the waiter released it
    lk.release()
    lk = store.lock("/log/lock", "me", 0)  # release then re-acquire
    lk.release()


def test_other_process_times_out_naming_owner(store: SqliteMetadataStore, db: str) -> None:
    store.create("/l")
    lk = store.lock("/l", "parent-owner", 0)
    out = CTX.Queue()
    _run(_workers.take_lock, db, "/l", "child", 0.3, out)
    assert out.get(timeout=WAIT_S) == ("OwnershipAcquireFailedError", "parent-owner")
    lk.release()
    _run(_workers.take_lock, db, "/l", "child", 0, out)
    assert out.get(timeout=WAIT_S)[0] == "ok"


def test_forked_child_does_not_keep_a_dead_holders_lock(store: SqliteMetadataStore, db: str) -> None:
    store.create("/l")
    ready, out = CTX.Event(), CTX.Queue()
    holder = CTX.Process(target=_workers.hold_lock, args=(db, "/l", "forker", ready, True, out))
    holder.start()
    child_pid = None
    try:
        assert ready.wait(WAIT_S)
        child_pid, child_sees_held = out.get(timeout=WAIT_S)
        assert child_sees_held is False
        with pytest.raises(OwnershipAcquireFailedError):
            store.lock("/l", "me", 0)
        holder.kill()
        _reap(holder)  # not join(): the forked child inherited the holder's sentinel pipe
        os.kill(child_pid, 0)  # the forked child still lives ...
        store.lock("/l", "me", WAIT_S).release()  # ... yet the lock is free
    finally:
        holder.kill()
        if child_pid is not None:
            _workers.kill_quietly(child_pid)
        holder.join()


def _reap(p: multiprocessing.process.BaseProcess) -> None:
    deadline = time.monotonic() + WAIT_S
    while p.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert p.exitcode is not None


def _watch_event(store: SqliteMetadataStore, path: str) -> tuple[threading.Event, list[float], object]:
    ev = threading.Event()
    times: list[float] = []

    def cb(p: str) -> None:
        assert p == path
        times.append(time.monotonic())
        ev.set()

    cancel = store.watch(path, cb)
    return ev, times, cancel


def test_watch_sees_data_change_from_other_process(store: SqliteMetadataStore, db: str) -> None:
    store.create("/w", b"0")
    ev, _, _ = _watch_event(store, "/w")
    _run(_workers.mutate, db, "set", "/w", b"1")
    assert ev.wait(WAIT_S)
    assert store.get("/w").value == b"1"


def test_watch_sees_children_changes_from_other_process(store: SqliteMetadataStore, db: str) -> None:
    store.create("/w/deep", make_parents=True)
    ev, _, _ = _watch_event(store, "/w")
    _run(_workers.mutate, db, "create", "/w/c", b"")
    assert ev.wait(WAIT_S)
    assert store.children("/w") == ["c", "deep"]
    ev.clear()
    _run(_workers.mutate, db, "delete", "/w/c", b"")
    assert ev.wait(WAIT_S)
    assert store.children("/w") == ["deep"]


def test_watch_cancel_stops_callbacks(store: SqliteMetadataStore, db: str) -> None:
    store.create("/w")
    calls: list[str] = []
    cancel = store.watch("/w", calls.append)
    store.set("/w", b"1")
    deadline = time.monotonic() + WAIT_S
    while not calls and time.monotonic() < deadline:
        time.sleep(0.005)
    assert calls
    cancel()
    cancel()  # idempotent
    seen = len(calls)
    sentinel, _, _ = _watch_event(store, "/w")  # registered after the cancel: fires after it would have
    _run(_workers.mutate, db, "set", "/w", b"2")
    assert sentinel.wait(WAIT_S)
    assert len(calls) == seen


def test_watch_latency_and_close_stops_thread(db: str) -> None:
    with SqliteMetadataStore(db) as writer:
        writer.create("/w")
        reader = SqliteMetadataStore(db)
        ev, times, _ = _watch_event(reader, "/w")
        latencies = []
        for i in range(20):
            ev.clear()
            t0 = time.monotonic()
            writer.set("/w", b"%d" % i)
            assert ev.wait(WAIT_S)
            latencies.append(times[-1] - t0)
        latencies.sort()
        print(f"watch latency (set + notify, same process, other instance): median {latencies[10] * 1000:.2f} ms")
        threads_before = {t.name for t in threading.enumerate()}
        assert any(n.startswith("metastore-watch") for n in threads_before)
        reader.close()
        assert not any(t.name.startswith("metastore-watch") and t.is_alive() for t in threading.enumerate())


def test_failing_callback_does_not_stop_other_watches(store: SqliteMetadataStore, db: str) -> None:
    store.create("/w")

    def boom(path: str) -> None:
        raise RuntimeError("callback failure")

    store.watch("/w", boom)
    ev, _, _ = _watch_event(store, "/w")
    store.set("/w", b"1")
    assert ev.wait(WAIT_S)
    ev.clear()
    _run(_workers.mutate, db, "set", "/w", b"2")
    assert ev.wait(WAIT_S)
