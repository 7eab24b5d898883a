"""Segment stores across real processes, on every store kind: fencing a live writer, SIGKILL,
long-poll, ledger ids."""

from __future__ import annotations

import os
import queue
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from storage.errors import InvalidArgumentError
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
