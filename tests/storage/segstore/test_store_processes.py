"""Segment stores across real processes, on every store kind: fencing a live writer, SIGKILL,
long-poll, ledger ids."""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from storage.errors import InvalidArgumentError, SegmentStoreError, WriterFencedError
from storage.segstore import _ledgerfile as lf
from storage.segstore.base import SegmentStore
from storage.segstore.local import LocalSegmentStore
from tests.storage.observe import GENEROUS_S, wait_parked_in
from tests.storage.segstore._child import payload
from tests.storage.segstore._helpers import Child


def collect_acks(child: Child, until: int) -> list[int]:
    """Read "A id" lines until ``until`` acknowledgements were seen."""
    acked: list[int] = []
    while len(acked) < until:
        acked.append(int(child.expect("A")))
    return acked


def check_readable(store: SegmentStore, lid: int, last: int, size: int) -> None:
    """Every entry 0..last is readable with exactly the bytes the writer appended."""
    count = 0
    for eid, data in store.read_entries(lid, 0, last):
        assert data == payload(lid, eid, size), f"entry {eid} has wrong bytes"
        count += 1
    assert count == last + 1
    with pytest.raises(InvalidArgumentError):
        store.read_entries(lid, 0, last + 1)


def test_fence_stops_a_writer_process(store: SegmentStore, store_spec: str, spawn: type[Child]) -> None:
    size = 1000
    child = spawn("append-loop", store_spec, size, 16)
    lid = int(child.expect("L"))
    acked = collect_acks(child, 300)
    last = store.fence(lid)  # the writer keeps appending meanwhile
    # After fence returned: the writer's appends fail; nothing it had acknowledged is lost.
    while True:
        line = child.next_line()
        assert line is not None, child.stderr()
        if line.startswith("A "):
            acked.append(int(line[2:]))
            continue
        assert line == "E WriterFencedError"
        break
    assert child.expect("E2") == "WriterFencedError"  # sticky: later appends fail too
    assert child.wait() == 0
    assert acked == list(range(len(acked)))
    assert max(acked) <= last
    info = store.info(lid)
    assert info.fenced and info.last_entry_id == last
    check_readable(store, lid, last, size)
    assert store.fence(lid) == last


@pytest.mark.parametrize("acks_before_kill", [20, 37, 55])
def test_sigkilled_writer_loses_no_acknowledged_entry(
    store_spec: str, open_store: Callable[..., SegmentStore], spawn: type[Child], acks_before_kill: int
) -> None:
    # Big entries in flight 8 at a time: the kill often lands inside a write and tears the
    # tail (seen in about a quarter of runs), otherwise between writes.
    size = 256 * 1024
    child = spawn("append-loop", store_spec, size, 8)
    lid = int(child.expect("L"))
    acked = collect_acks(child, acks_before_kill)
    os.kill(child.proc.pid, signal.SIGKILL)
    child.proc.wait(30)
    while (line := child.next_line()) is not None:  # acks printed before the kill
        if line.startswith("A "):
            acked.append(int(line[2:]))
    with open_store() as s:
        before = s.info(lid)
        assert not before.closed and not before.fenced
        last = s.fence(lid)
        assert max(acked) <= last
        check_readable(s, lid, last, size)


def check_wait_wakes_on_another_process(s: SegmentStore, store_spec: str, spawn: type[Child]) -> None:
    child = spawn("wait-append", store_spec)
    lid = int(child.expect("L"))
    assert s.last_add_confirmed(lid) == 0
    changes: queue.Queue[int] = queue.Queue()
    s.watch(changes.put)
    result: Future[int] = Future()
    # its own timeout is far beyond the test's patience: it returns because the other process appended
    waiter = threading.Thread(target=lambda: result.set_result(s.wait_for_lac(lid, 0, 10 * GENEROUS_S)), daemon=True)
    waiter.start()
    wait_parked_in(waiter, "wait_change", "storage/segstore/_changes.py")  # blocked: nothing to see yet
    assert not result.done()
    child.send("go")
    assert child.expect("D") == "2"
    assert result.result(timeout=GENEROUS_S) == 1
    waiter.join()
    while changes.get(timeout=30) != lid:  # the watch saw the other process's write
        pass


def test_wait_for_lac_wakes_on_append_by_another_process(
    store: SegmentStore, store_spec: str, spawn: type[Child]
) -> None:
    check_wait_wakes_on_another_process(store, store_spec, spawn)


def test_wait_for_lac_wakes_on_append_by_another_process_local_polling(store_root: Path, spawn: type[Child]) -> None:
    with LocalSegmentStore(store_root, use_inotify=False) as s:
        check_wait_wakes_on_another_process(s, str(store_root), spawn)


def test_ledger_ids_unique_across_processes(
    store_spec: str, open_store: Callable[..., SegmentStore], spawn: type[Child]
) -> None:
    children = [spawn("ids", store_spec, 25) for _ in range(3)]
    ids: list[int] = []
    for child in children:
        while (line := child.next_line()) != "done":
            assert line is not None and line.startswith("I "), child.stderr()
            ids.append(int(line[2:]))
        assert child.wait() == 0
    assert len(ids) == 75 and len(set(ids)) == 75
    with open_store() as s:
        assert len(s.list_ledgers()) == 3 * 12  # every other one was deleted
        fresh = s.create_ledger()
        assert fresh.ledger_id > max(ids)  # deleted ids are never handed out again
        fresh.abort()


def test_fence_waits_a_bounded_time_for_a_frozen_append_and_names_its_process(
    local_store: LocalSegmentStore, store_root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer process frozen inside an append (holding the ledger file's lock) holds up a fence for at most
    ``FENCE_LOCK_WAIT_S``: the fence then fails, retriable, naming the process; once that process is gone it
    succeeds."""
    writer = local_store.create_ledger()
    writer.append(b"kept")
    path = store_root / "ledgers" / lf.ledger_file_name(writer.ledger_id)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDWR); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        holder.send_signal(signal.SIGSTOP)
        monkeypatch.setattr(lf, "FENCE_LOCK_WAIT_S", 1.5)
        with caplog.at_level(logging.WARNING, "storage.segstore.local"), pytest.raises(SegmentStoreError) as err:
            local_store.fence(writer.ledger_id)
        assert err.value.retriable and f"locked by process {holder.pid}" in str(err.value), err.value
        assert any(f"process {holder.pid}" in r.getMessage() for r in caplog.records), caplog.text
        assert not local_store.info(writer.ledger_id).fenced  # the failed fence changed nothing
    finally:
        holder.kill()
        holder.send_signal(signal.SIGCONT)
        holder.wait()
    assert local_store.fence(writer.ledger_id) == 0
    writer.abort()


def test_fence_between_an_append_and_its_sync_seals_the_appended_entries(
    local_store: LocalSegmentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer holds the ledger file's lock for the fence check and the write only: a fence while the writer is
    in its ``fdatasync`` does not wait for it, seals the written entries (synced by the seal), and the writer then
    acknowledges them; its next append is refused."""
    writer = local_store.create_ledger()
    assert writer.append(b"e0") == 0
    in_sync, go_on = threading.Event(), threading.Event()
    real_fdatasync = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        if threading.current_thread().name.startswith("ledger-io") and not go_on.is_set():
            in_sync.set()
            assert go_on.wait(GENEROUS_S)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    pending = writer.append_async(b"e1")
    assert in_sync.wait(GENEROUS_S)
    try:
        assert local_store.fence(writer.ledger_id) == 1  # the written frame is in, before its writer synced it
    finally:
        go_on.set()
    assert pending.result(GENEROUS_S) == 1
    assert [d for _, d in local_store.read_entries(writer.ledger_id, 0, 1)] == [b"e0", b"e1"]
    with pytest.raises(WriterFencedError):
        writer.append(b"e2")
    writer.abort()
