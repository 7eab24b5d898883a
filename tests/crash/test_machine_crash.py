"""Machine crashes, full disks and failing disks (tests/crash/harness.py): writers acknowledging under load on a file
system that forgets what was not fsynced (tools/crashfs.py), crashed at seeded moments, reopened by a fresh process
each time. Every acknowledged record is there exactly once and in order, nothing else is, and every reopen recovers
(after a retriable error, such as a ZooKeeper connection lost under load, it opens again, as an application would).

CI runs about 200 crash points over both metadata stores (the embedded SQLite file on the crashing disk; ZooKeeper on
machines of its own, the segments on the crashing disk), some of them after the disk filled up or failed and
recovered; ``make chaos`` runs thousands."""

from __future__ import annotations

from pathlib import Path

import pytest

import storage
from tests.crash.harness import run_crashes
from tests.zk import ZooKeeperServer
from tools.crashfs import CrashFS

pytestmark = pytest.mark.slow


def _say(capsys: pytest.CaptureFixture[str], text: str) -> None:
    with capsys.disabled():
        print(f"\n{text}", flush=True)


def _history(tmp_path: Path) -> Path:
    history = tmp_path / "history"
    history.mkdir()
    return history


def test_embedded_namespace_survives_machine_crashes(
    crashfs: CrashFS, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The namespace is created by the first writer, just before the first crash: it survives it, as do the logs
    some cycles create just before theirs."""
    uri = f"distributedlog-local://{crashfs.mountpoint / 'ns'}"
    result = run_crashes(crashfs, uri, _history(tmp_path), cycles=100, seed=20261128, report=lambda t: _say(capsys, t))
    _say(capsys, result.line("embedded"))
    assert result.ok, result.line("embedded")


def test_zookeeper_namespace_with_local_segments_survives_machine_crashes(
    crashfs: CrashFS, tmp_path: Path, zk_server: ZooKeeperServer, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Metadata on ZooKeeper (machines of its own: it does not crash), segments on the crashing disk. The segment
    directory is made by the bind, just before the first crash."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{crashfs.mountpoint / 'segments'}")
    result = run_crashes(
        crashfs, uri, _history(tmp_path), cycles=60, seed=20261129, rotation=4, report=lambda t: _say(capsys, t)
    )
    _say(capsys, result.line("zookeeper"))
    assert result.ok, result.line("zookeeper")


@pytest.mark.parametrize(
    ("label", "kinds"), [("full-disk", ("full",)), ("failing-disk", ("eio-write", "eio-fsync"))], ids=["full", "eio"]
)
def test_disk_full_or_failing_then_machine_crash(
    crashfs: CrashFS, tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str, kinds: tuple[str, ...]
) -> None:
    """Each cycle the disk fills up (writes short, then ENOSPC) or fails (EIO on writes; EIO on fsync, the unsynced
    pages then lost although a later fsync succeeds) for a while, then recovers; the writers reopen and go on in the
    same process; then the machine crashes. Failed writes are definitive only when nothing of them can be stored."""
    uri = f"distributedlog-local://{crashfs.mountpoint / 'ns'}"
    result = run_crashes(
        crashfs, uri, _history(tmp_path), cycles=25, seed=20261130, disk_faults=1.0, fault_kinds=kinds,
        report=lambda t: _say(capsys, t),
    )  # fmt: skip
    _say(capsys, result.line(label))
    assert result.ok, result.line(label)
    assert result.resumed == sum(result.faults.values()) == 25, result.line(label)


def test_exactly_once_sink_publishes_every_input_once_across_machine_crashes(
    crashfs: CrashFS, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sink's storage half (tests/crash/sink_child.py: stage a batch, publish it with its commit record; half of
    the restarts replay the last committed batch first): after crashes at seeded moments of staging and publishing,
    then a last run that publishes the rest, the output holds every input record once, in order."""
    uri = f"distributedlog-local://{crashfs.mountpoint / 'ns'}"
    with storage.open_namespace(uri) as ns:
        ns.create_log("events")
        ns.create_log("out")
        with ns.open_log("events").open_writer() as w:
            for i in range(1, 10_001):
                w.write(storage.LogRecord(i, b"e-%d" % i))
    crashfs.sync()  # the input, written earlier, is on disk
    result = run_crashes(
        crashfs, uri, _history(tmp_path), cycles=30, seed=20261131, sink=True, max_run_s=1.5,
        report=lambda t: _say(capsys, t),
    )  # fmt: skip
    _say(capsys, result.line("sink"))
    assert result.ok, result.line("sink")
    assert "sink_missing=0 sink_duplicated=0" in result.check_line, result.check_line


@pytest.mark.chaos  # about 40 minutes: `make chaos`
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("seed", [1, 2])
def test_thousands_of_machine_crashes(
    crashfs: CrashFS, tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    """2 × 2,500 crash points on the embedded namespace, one cycle in five meeting a full or failing disk first."""
    uri = f"distributedlog-local://{crashfs.mountpoint / 'ns'}"
    result = run_crashes(
        crashfs, uri, _history(tmp_path), cycles=2500, seed=seed, disk_faults=0.2, report=lambda t: _say(capsys, t)
    )
    _say(capsys, result.line(f"chaos-{seed}"))
    assert result.ok, result.line(f"chaos-{seed}")
