"""The embedded metadata store across real processes: CAS counters, locks (holder death, a forked
holder), watch latency and the watch thread. Watches seeing changes from another process are in
``test_store_behaviour.py`` (its SQLite ``mutate_elsewhere`` is another process)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Iterator

import pytest

from storage.errors import OwnershipAcquireFailedError
from storage.metastore.sqlite import SqliteMetadataStore
from tests.storage.metastore import _workers
from tests.storage.metastore._stores import CTX, WAIT_S, run_in_process, watch_probe


@pytest.fixture
def store(db: str) -> Iterator[SqliteMetadataStore]:
    s = SqliteMetadataStore(db)
    yield s
    s.close()


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
        waiter = CTX.Process(target=_workers.take_lock, args=(db, "/log/lock", "waiter", WAIT_S, out, True))
        waiter.start()
        status, message = out.get(timeout=WAIT_S)  # the waiter says it is blocked, on whom, before the kill
        assert status == "waiting" and "held by holder-1" in message, (status, message)
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
    run_in_process(_workers.take_lock, db, "/l", "child", 0.3, out)
    assert out.get(timeout=WAIT_S) == ("OwnershipAcquireFailedError", "parent-owner")
    lk.release()
    run_in_process(_workers.take_lock, db, "/l", "child", 0, out)
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


def test_watch_latency_and_close_stops_thread(db: str) -> None:
    with SqliteMetadataStore(db) as writer:
        writer.create("/w")
        others = set(threading.enumerate())
        reader = SqliteMetadataStore(db)
        probe = watch_probe(reader, "/w")
        ev, times = probe.event, probe.times
        latencies = []
        for i in range(20):
            ev.clear()
            t0 = time.monotonic()
            writer.set("/w", b"%d" % i)
            assert ev.wait(WAIT_S)
            latencies.append(times[-1] - t0)
        latencies.sort()
        print(f"watch latency (set + notify, same process, other instance): median {latencies[10] * 1000:.2f} ms")
        mine = [t for t in threading.enumerate() if t.name.startswith("metastore-watch") and t not in others]
        assert mine
        reader.close()
        for t in mine:  # this store's watch thread stops (other tests' stores are not ours to check)
            t.join(20)
        assert not any(t.is_alive() for t in mine)
