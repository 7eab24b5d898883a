"""Real processes: ownership across processes, SIGKILL crash/takeover cycles, multi-process tail."""

from __future__ import annotations

import json
import logging
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import storage
from storage import DLSN
from tests.storage.observe import GENEROUS_S, Timeline


class Child:
    """A ``tests.storage.procs`` child whose stdout events are collected line by line."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.storage.procs", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.events: list[dict[str, object]] = []

    def next_event(self, timeout: float = 60) -> dict[str, object]:
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line:
                ev: dict[str, object] = json.loads(line)
                self.events.append(ev)
                return ev
            if self.proc.poll() is not None:
                break
        err = self.proc.stderr.read() if self.proc.stderr else ""
        raise AssertionError(f"child ended or timed out without an event; stderr:\n{err[-4000:]}")

    def wait_for(self, kind: str, timeout: float = 60) -> dict[str, object]:
        while True:
            ev = self.next_event(timeout)
            if ev["event"] == kind:
                return ev

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        out, _ = self.proc.communicate(timeout=30)
        for line in out.splitlines():  # events written before the kill
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass  # a line the kill cut short (or empty): the child never finished reporting it


@contextmanager
def child(env: dict[str, str], *args: str) -> Iterator[Child]:
    c = Child(env, *args)
    try:
        yield c
    finally:
        if c.proc.poll() is None:
            c.kill()


def test_second_writer_fails_while_first_lives_then_takes_over(ns_uri: str, subprocess_env: dict[str, str]) -> None:
    with child(subprocess_env, "hold", ns_uri, "owned", "7") as a:
        assert a.wait_for("holding")["last"] == "1,0,6"  # 7 small records share entry 0
        with storage.open_namespace(ns_uri, {"lockTimeoutSeconds": 1}) as ns:
            dlm = ns.open_log("owned")
            started = time.monotonic()
            with pytest.raises(storage.OwnershipAcquireFailedError):
                dlm.open_writer()
            assert time.monotonic() - started >= 0.9  # it waited lockTimeoutSeconds
            a.kill()
            # Takes over (on ZooKeeper once the dead owner's session expired): fences and
            # recovers segment 1.
            with ns.open_log("owned", {"lockTimeoutSeconds": 10}).open_writer() as w:
                (seg,) = dlm.log_segments()
                assert not seg.in_progress and seg.record_count == 7 and seg.last_dlsn == DLSN(1, 0, 6)
                w.write(storage.LogRecord(8, b"after takeover"))
                assert w.flush() == DLSN(2, 0, 0)
            assert [s.lssn for s in dlm.log_segments()] == [1, 2]
            with dlm.open_reader(DLSN.INITIAL) as r:
                recs = r.read_bulk(100)
            assert [x.txid for x in recs] == list(range(1, 9))
            assert [x.sequence_id for x in recs] == list(range(8))


def test_a_lock_wait_says_what_it_waits_for(
    ns_uri: str, subprocess_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A writer that waits for a lock another process holds logs one WARNING naming the lock and its holder while
    the wait can still succeed: stopping the holder once the WARNING is seen lets the writer in (a warning said only
    when the wait gives up would come too late for that). A wait nobody helps fails naming the holder, its WARNING
    first."""
    generous_s = int(GENEROUS_S)  # the holder's ZooKeeper session must expire within it: 2 s
    with child(subprocess_env, "hold", ns_uri, "owned", "1") as a:
        a.wait_for("holding")
        with storage.open_namespace(ns_uri, {"lockTimeoutSeconds": generous_s}) as ns:
            with (
                caplog.at_level(logging.WARNING, logger="storage.metastore.lock"),
                Timeline().logging_to("storage.metastore.lock") as timeline,
            ):

                def stop_the_holder() -> None:
                    a.proc.kill()  # SIGKILL: its lock goes with it (on ZooKeeper, with its session)
                    timeline.mark("holder stopped")

                timeline.on("warning", stop_the_holder)
                with ns.open_log("owned").open_writer() as w:
                    timeline.mark("acquired")
                    w.write(storage.LogRecord(2, b"after the holder"))
                    w.flush()
                timeline.join()
            waits = [r for r in caplog.records if r.name == "storage.metastore.lock"]
            assert len(waits) == 1, [r.getMessage() for r in waits]
            message = waits[0].getMessage()
            assert message.startswith("waiting for lock /owned/") and f"giving up after {generous_s} s" in message
            assert f":{a.proc.pid}:" in message  # the holder's client id (host:pid:id)
            assert timeline.events == ["warning", "holder stopped", "acquired"]  # said while the wait could succeed

    timeout_s = 5  # the WARNING comes once the wait has lasted half a second: long before the wait gives up
    with child(subprocess_env, "hold", ns_uri, "kept", "1") as b:
        b.wait_for("holding")
        with storage.open_namespace(ns_uri, {"lockTimeoutSeconds": timeout_s}) as ns:
            caplog.clear()
            with (
                caplog.at_level(logging.WARNING, logger="storage.metastore.lock"),
                Timeline().logging_to("storage.metastore.lock") as timeline,
            ):
                with pytest.raises(storage.OwnershipAcquireFailedError) as failed:
                    ns.open_log("kept").open_writer()
                timeline.mark("gave up")
            waits = [r for r in caplog.records if r.name == "storage.metastore.lock"]
            assert len(waits) == 1, [r.getMessage() for r in waits]
            assert f"giving up after {timeout_s} s" in waits[0].getMessage()
            assert timeline.events == ["warning", "gave up"]
            assert failed.value.current_owner is not None and f":{b.proc.pid}:" in failed.value.current_owner


def _acked(events: list[dict[str, object]]) -> list[int]:
    return [int(e["txid"]) for e in events if e["event"] == "ack"]  # type: ignore[call-overload]


@pytest.mark.slow
def test_writer_sigkilled_20_seeded_cycles(ns_uri: str, subprocess_env: dict[str, str]) -> None:
    rng = random.Random(20261122)
    acked: list[int] = []
    least = 0  # acknowledgements seen before the kills, whatever the machine's speed
    for cycle in range(20):
        with child(subprocess_env, "writer", ns_uri, "crash") as w:
            opened = w.wait_for("open")
            assert int(opened["next_txid"]) > (acked[-1] if acked else 0)  # type: ignore[call-overload]
            wanted = rng.randint(50, 150)  # killed mid-stream: after a seeded number of acks, while it writes on
            while len(_acked(w.events)) < wanted:
                w.wait_for("ack")
            least += wanted
            w.kill()
            mine = _acked(w.events)
            assert mine == sorted(mine), f"cycle {cycle}: acks out of order"
            acked.extend(mine)
    assert len(acked) >= least >= 20 * 50
    with storage.open_namespace(ns_uri, {"lockTimeoutSeconds": 20}) as ns:
        dlm = ns.open_log("crash")
        dlm.open_writer().close()  # recover the last in-progress segment
        txids: list[int] = []
        with dlm.open_reader(DLSN.INITIAL) as r:
            while True:
                batch = r.read_bulk(5000, non_blocking=True)
                if not batch:
                    break
                for rec in batch:
                    assert rec.payload == f"rec-{rec.txid}".encode() * 8, f"torn or wrong record at {rec.dlsn}"
                txids.extend(x.txid for x in batch)
        segments = dlm.log_segments()
    lost = set(acked) - set(txids)
    duplicated = len(txids) - len(set(txids))
    print(
        f"crash cycles: 20, acked {len(acked)}, read {len(txids)}, lost {len(lost)}, duplicated {duplicated}, "
        f"segments {len(segments)}"
    )
    assert not lost and duplicated == 0
    assert txids == sorted(txids)
    assert all(s.lssn == i + 1 for i, s in enumerate(segments))
    assert [s.start_sequence_id for s in segments][1:] == [
        sum(x.record_count for x in segments[:i]) for i in range(1, len(segments))
    ]


@pytest.mark.slow
def test_multiprocess_tail_100k(ns_uri: str, subprocess_env: dict[str, str]) -> None:
    with storage.open_namespace(ns_uri) as ns:
        ns.create_log("tail")
    with child(subprocess_env, "tail", ns_uri, "tail", "100000") as reader:
        reader.wait_for("ready")
        with child(subprocess_env, "produce", ns_uri, "tail", "100000") as producer:
            assert producer.wait_for("produced", timeout=300)["count"] == 100000
        done = reader.wait_for("done", timeout=300)
    print(f"tail: {done}")
    assert done["seen"] == 100000 and done["in_order"] is True
