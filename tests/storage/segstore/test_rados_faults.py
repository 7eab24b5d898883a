"""The RADOS store under real failures of a real Ceph cluster (1 monitor, 3 OSDs, pool size 3,
min_size 2): an OSD SIGKILLed under a running writer, two of three OSDs down, damaged object
bytes. Destructive tests restart every OSD they kill before they end."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from types import FrameType
from typing import Any

import pytest

from storage.errors import CorruptedEntryError, SegmentStoreError
from storage.segstore._rados_io import part_oid
from storage.segstore._rados_writer import RadosLedgerWriter
from storage.segstore.rados import RadosLocation, RadosSegmentStore
from tests.storage._damage import flip_payload_byte
from tests.storage.observe import finishes, wait_until
from tests.storage.segstore._child import payload
from tests.storage.segstore.conftest import rados_store

SIZE = 1024


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The session's cluster; every OSD is up again when the test ends."""
    c = request.getfixturevalue("ceph_cluster")
    try:
        yield c
    finally:
        c.revive()


def primary_of(cluster: Any, location: RadosLocation, oid: str) -> int:
    out = cluster.ceph("osd", "map", location.pool, oid, location.namespace, "-f", "json")
    return int(json.loads(out)["acting_primary"])


class Pump:
    """Appends 1 KiB entries with up to ``window`` in flight from a thread, recording when each
    acknowledgement arrived (to measure stalls)."""

    def __init__(self, writer: Any, window: int = 32) -> None:
        self.writer = writer
        self.window = window
        self.acked: list[int] = []
        self.ack_times: list[float] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        lid = self.writer.ledger_id
        pending: deque[Future[int]] = deque()
        n = 0
        try:
            while not self._stop.is_set() or pending:
                while not self._stop.is_set() and len(pending) < self.window:
                    pending.append(self.writer.append_async(payload(lid, n, SIZE)))
                    n += 1
                self.acked.append(pending.popleft().result(timeout=120))
                self.ack_times.append(time.monotonic())
        except BaseException as exc:
            self.error = exc

    def wait_acks(self, n: int, timeout: float = 120) -> None:
        def enough() -> bool:
            if self.error is not None:
                raise AssertionError(f"the pump failed after {len(self.acked)} acks") from self.error
            return len(self.acked) >= n

        wait_until(enough, f"{n} acks", timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive()

    def longest_stall(self, since: float) -> float:
        times = [since, *(t for t in self.ack_times if t >= since)]
        return max(b - a for a, b in itertools.pairwise(times)) if len(times) > 1 else 0.0


def read_back(location: RadosLocation, lid: int) -> list[int]:
    """Entry ids read by a fresh client, checking every byte."""
    with rados_store(location) as s:
        last = s.info(lid).last_entry_id
        ids = []
        for eid, data in s.read_entries(lid, 0, last):
            assert data == payload(lid, eid, SIZE), f"entry {eid} has wrong bytes"
            ids.append(eid)
        return ids


def test_osd_sigkilled_under_a_running_writer(cluster: Any, rados_location: RadosLocation) -> None:
    with rados_store(rados_location) as store:
        writer = store.create_ledger()
        lid = writer.ledger_id
        pump = Pump(writer)
        pump.wait_acks(500)
        victim = primary_of(cluster, rados_location, part_oid(lid, 0))
        killed_at = time.monotonic()
        cluster.kill_osd(victim)
        before = len(pump.acked)
        pump.wait_acks(before + 2000)  # writes go on with two replicas
        stall_kill = pump.longest_stall(killed_at)
        restarted_at = time.monotonic()
        cluster.start_osd(victim)
        cluster.wait_osd_up(victim, timeout=120)
        up_after = time.monotonic() - restarted_at
        pump.wait_acks(len(pump.acked) + 2000)  # and through the rejoin
        pump.stop()
        assert pump.error is None, pump.error
        stall_rejoin = pump.longest_stall(restarted_at)
        last = writer.close()
    acked = pump.acked
    got = read_back(rados_location, lid)
    lost = len(set(acked) - set(got))
    duplicated = len(got) - len(set(got))
    print(
        f"RADOS OSD SIGKILL: osd.{victim} (primary) killed under the writer; acked {len(acked)}, read back {len(got)}, "
        f"lost {lost}, duplicated {duplicated}, longest stall {stall_kill:.2f}s after the kill, "
        f"{stall_rejoin:.2f}s around the rejoin (osd up again {up_after:.1f}s after restart)"
    )
    assert acked == list(range(len(acked)))
    assert got == list(range(last + 1)) and last == acked[-1]
    assert lost == 0 and duplicated == 0


def test_two_of_three_osds_down(cluster: Any, rados_location: RadosLocation) -> None:
    op_timeout = 5
    store = rados_store(rados_location, op_timeout_s=op_timeout)
    try:
        writer = store.create_ledger()
        lid = writer.ledger_id
        acked = [writer.append(payload(lid, i, SIZE)) for i in range(100)]
        for osd in (1, 2):
            cluster.kill_osd(osd)
        for osd in (1, 2):
            cluster.wait_osd_up(osd, up=False, timeout=60)
        started = time.monotonic()
        failed = writer.append_async(payload(lid, 100, SIZE))
        with pytest.raises(SegmentStoreError) as info:  # the op timeout fires (generous slack: no hang)
            failed.result(timeout=op_timeout * 12)
        waited = time.monotonic() - started
        assert info.value.retriable, info.value
        assert "timed out" in str(info.value)
        with pytest.raises(SegmentStoreError):  # the writer stopped: nothing is retried blindly
            writer.append_async(payload(lid, 101, SIZE)).result(timeout=10)
        writer.abort()
    finally:
        store.close()
    for osd in (1, 2):
        cluster.start_osd(osd)
    cluster.wait_osds_up(3, timeout=120)
    with rados_store(rados_location) as fresh:
        last = fresh.fence(lid)  # recovery decides whether the timed-out append landed
        assert last in (99, 100, 101)
        resumed = fresh.create_ledger()
        assert resumed.append(b"after the outage") == 0
        resumed.close()
    got = read_back(rados_location, lid)
    print(
        f"RADOS two of three OSDs down: acked {len(acked)}, append failed (retriable) after {waited:.1f}s "
        f"(op timeout {op_timeout}s), read back {len(got)} after recovery (last entry {last}), lost "
        f"{len(set(acked) - set(got))}"
    )
    assert got[:100] == acked and got == list(range(last + 1))


@pytest.mark.parametrize("close", [True, False], ids=["closed", "open"])
def test_damaged_object_bytes_raise_at_that_entry(rados_location: RadosLocation, close: bool) -> None:
    with rados_store(rados_location) as store:
        writer = store.create_ledger()
        lid = writer.ledger_id
        n = 3000  # ~3 MiB: four data objects at the tests' 1 MiB
        futures = [writer.append_async(payload(lid, i, SIZE)) for i in range(n)]
        assert futures[-1].result(timeout=60) == n - 1
        if close:
            writer.close()
        else:  # its frame carries LAC n-1 (all acknowledged): entries 0..n-1 visible, ledger still open
            writer.append(payload(lid, n, SIZE))
        bad = 1500  # in the second data object
        flip_payload_byte(store, lid, bad)
    with rados_store(rados_location) as fresh:
        last = fresh.info(lid).last_entry_id
        assert last == n - 1
        got = []
        with pytest.raises(CorruptedEntryError, match=f"entry {bad}"):
            for eid, data in fresh.read_entries(lid, 0, last):
                assert data == payload(lid, eid, SIZE)
                got.append(eid)
        assert got == list(range(bad))
        after = [eid for eid, _ in fresh.read_entries(lid, bad + 1, last)]
        assert after == list(range(bad + 1, last + 1))
        if not close:
            writer.abort()


def test_a_ledger_spans_several_objects(rados_location: RadosLocation) -> None:
    """Rolled, not striped: every data object stays under the limit; entries never straddle two."""
    with rados_store(rados_location) as store:
        assert isinstance(store, RadosSegmentStore)
        writer = store.create_ledger()
        lid = writer.ledger_id
        for f in [writer.append_async(payload(lid, i, 50_000)) for i in range(100)]:
            f.result(timeout=60)
        writer.close()
        sizes = []
        part = 0
        while True:
            try:
                sizes.append(store.ioctx.stat(part_oid(lid, part))[0])
            except Exception:
                break
            part += 1
        assert len(sizes) >= 5 and all(s <= 1 << 20 for s in sizes)
        assert [d for _, d in store.read_entries(lid, 0, 99)] == [payload(lid, i, 50_000) for i in range(100)]
        assert store.info(lid).length_bytes == sum(sizes)


def test_errors_naming_what_is_wrong(rados_location: RadosLocation, tmp_path: Any, ceph_cluster: Any) -> None:
    missing_pool = RadosLocation("no-such-pool", rados_location.conf, rados_location.client_id, rados_location.keyring)
    with pytest.raises(SegmentStoreError, match="pool 'no-such-pool' does not exist"):
        RadosSegmentStore(missing_pool)
    with pytest.raises(SegmentStoreError, match="no such configuration file"):
        RadosSegmentStore(RadosLocation("segments", str(tmp_path / "nope.conf")))
    bad_key = tmp_path / "bad.keyring"
    bad_key.write_text(f"[client.{rados_location.client_id}]\n\tkey = AQBJ9yNnAAAAABAAAAAAAAAAAAAAAAAAAAAAAA==\n")
    bad = RadosLocation(rados_location.pool, rados_location.conf, rados_location.client_id, str(bad_key))
    started = time.monotonic()
    with pytest.raises(SegmentStoreError, match="cannot connect") as info:
        RadosSegmentStore(bad, connect_timeout_s=5)
    print(f"bad credentials: {info.value} ({time.monotonic() - started:.1f}s)")


def test_pipelined_appends_stay_in_order(rados_location: RadosLocation) -> None:
    """With several guarded appends in flight (radosMaxInFlightWrites > 1) entries are still
    acknowledged and stored in entry order, across object rolls."""
    with rados_store(rados_location, max_in_flight=8, max_write_bytes=64 * 1024) as store:
        writer = store.create_ledger()
        assert isinstance(writer, RadosLedgerWriter)
        lid = writer.ledger_id
        futures = [writer.append_async(payload(lid, i, SIZE)) for i in range(4000)]
        assert [f.result(timeout=60) for f in futures] == list(range(4000))
        assert writer.sync_count > 50  # many operations, several at a time
        assert writer.close() == 3999
    assert read_back(rados_location, lid) == list(range(4000))


def _read_to_end(fd: int) -> bytes:
    """Everything written to the pipe ``fd`` until its writers closed it."""
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_forked_child_never_touches_the_parents_client(rados_location: RadosLocation) -> None:
    """Spark forks Python workers from a daemon: a store inherited across fork refuses use with a
    clear error and closes without touching librados; the parent's client goes on working."""
    with rados_store(rados_location) as store:
        assert isinstance(store, RadosSegmentStore)
        writer = store.create_ledger()
        writer.append(b"before fork")
        store.watch(lambda _lid: None)  # a live watch the child inherits
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: reports through the pipe what it saw and what its close called
            error, touched, client = "", [], ""
            try:
                os.close(r)
                try:
                    store.info(writer.ledger_id)
                except SegmentStoreError as exc:
                    error = str(exc)

                def profile(frame: FrameType, event: str, arg: object) -> None:
                    module = str(frame.f_globals.get("__name__", ""))
                    if event == "call" and module.startswith("storage.segstore._rados"):
                        touched.append(f"{module}.{frame.f_code.co_qualname}")

                sys.setprofile(profile)
                try:
                    store.close()
                finally:
                    sys.setprofile(None)
                client = store._cluster.state  # the parent's librados client, as the child sees it
            finally:
                os.write(w, json.dumps({"error": error, "touched": touched, "client": client}).encode())
                os._exit(0)
        os.close(w)
        try:
            report = json.loads(finishes(lambda: _read_to_end(r), "the forked child's report"))
            finishes(lambda: os.waitpid(pid, 0), "the forked child's exit")
        finally:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG) == (0, 0):  # still running: a hang
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            os.close(r)  # after the child ended: a read still waiting on it has seen the end
        assert "forked child" in report["error"], report
        assert report["touched"] == []  # its close called nothing of the store's librados layer ...
        assert report["client"] == "connected"  # ... and did not shut the parent's client down
        writer.append(b"after fork")
        assert writer.close() == 1
        assert [d for _, d in store.read_entries(writer.ledger_id, 0, 1)] == [b"before fork", b"after fork"]
