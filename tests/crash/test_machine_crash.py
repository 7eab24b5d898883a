"""Machine crashes (tests/crash/harness.py): writers acknowledging under load on a file system that forgets what
was not fsynced (tools/crashfs.py), crashed at seeded moments, reopened by a fresh process each time. Every
acknowledged record is there exactly once and in order, nothing else is, and every reopen recovers.

CI runs 200 crash points over the two stores of metadata (the embedded SQLite file on the crashing disk;
ZooKeeper on machines of its own, the segments on the crashing disk); ``make chaos`` runs thousands."""

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


def test_embedded_namespace_survives_machine_crashes(
    crashfs: CrashFS, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The namespace is created by the first writer, just before the first crash: it survives it."""
    history = tmp_path / "history"
    history.mkdir()
    uri = f"distributedlog-local://{crashfs.mountpoint / 'ns'}"
    result = run_crashes(crashfs, uri, history, cycles=120, seed=20261128, report=lambda t: _say(capsys, t))
    _say(capsys, result.line("embedded"))
    assert result.ok, result.line("embedded")


def test_zookeeper_namespace_with_local_segments_survives_machine_crashes(
    crashfs: CrashFS, tmp_path: Path, zk_server: ZooKeeperServer, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Metadata on ZooKeeper (machines of its own: it does not crash), segments on the crashing disk. The segment
    directory is made by the bind, just before the first crash."""
    history = tmp_path / "history"
    history.mkdir()
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{crashfs.mountpoint / 'segments'}")
    result = run_crashes(crashfs, uri, history, cycles=80, seed=20261129, rotation=4, report=lambda t: _say(capsys, t))
    _say(capsys, result.line("zookeeper"))
    assert result.ok, result.line("zookeeper")
