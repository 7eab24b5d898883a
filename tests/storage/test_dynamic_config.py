"""Dynamic configuration: per-log files re-read on change, bad values rejected with the key named and
the old value kept, changes applied to running writers without reopening them."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import storage
from storage.config import Config
from storage.config.dynamic import DynamicConfig, stream_config_files
from tests.conftest import BASE_CONF
from tests.storage.observe import wait_until


def _write(path: Path, text: str) -> None:
    """Replace the file and move its mtime on (several writes may fall within one mtime tick)."""
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000 + time.monotonic_ns() % 1000))


def test_files_layering_reload_and_rejection(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = Config(streamConfigDir=str(tmp_path / "streams"), defaultStreamConfigFile=str(tmp_path / "default.conf"))
    files = stream_config_files(base, "a/b")
    assert files == [str(tmp_path / "default.conf"), str(tmp_path / "streams" / "a/b.conf")]
    dyn = DynamicConfig(base, files, name="a/b")
    assert dyn.current == base and dyn.errors == []  # no files yet
    seen: list[Config] = []
    dyn.subscribe(seen.append)
    _write(tmp_path / "default.conf", "rpsHardWriteLimit=100\nwriterOutputBufferSize=1024\n")
    (tmp_path / "streams" / "a").mkdir(parents=True)
    _write(tmp_path / "streams" / "a" / "b.conf", "rpsHardWriteLimit=50\n")
    assert dyn.reload() is True
    assert dyn.current.get("rpsHardWriteLimit") == 50  # the log's own file wins
    assert dyn.current.get("writerOutputBufferSize") == 1024
    assert seen == [dyn.current]
    assert dyn.reload() is False  # unchanged files are not re-read
    with caplog.at_level(logging.ERROR, logger="storage.config.dynamic"):
        _write(tmp_path / "streams" / "a" / "b.conf", "rpsHardWriteLimit=fast\nnoSuchKey=1\nbpsHardWriteLimit=4096\n")
        assert dyn.reload() is True
    assert dyn.current.get("rpsHardWriteLimit") == 50  # rejected: the old value is kept
    assert dyn.current.get("bpsHardWriteLimit") == 4096  # the rest of the file applies
    assert any("rpsHardWriteLimit='fast' rejected" in e and "keeping 50" in e for e in dyn.errors), dyn.errors
    assert any("noSuchKey" in e for e in dyn.errors)
    assert "rpsHardWriteLimit='fast' rejected" in caplog.text
    with caplog.at_level(logging.ERROR, logger="storage.config.dynamic"):
        _write(tmp_path / "default.conf", "writerOutputBufferSize=\\u00zz\n")  # malformed: nothing changes
        assert dyn.reload() is False
    assert dyn.current.get("writerOutputBufferSize") == 1024 and "keeping the current values" in dyn.errors[0]
    with caplog.at_level(logging.WARNING, logger="storage.config.dynamic"):
        _write(tmp_path / "default.conf", "writerOutputBufferSize=1024\nlockTimeoutSeconds=7\n")
        assert dyn.reload() is True
    assert "['lockTimeoutSeconds'] changed; not dynamic" in caplog.text
    (tmp_path / "streams" / "a" / "b.conf").unlink()  # a removed file's overrides go away
    assert dyn.reload() is True
    assert dyn.current.get("rpsHardWriteLimit") == -1 and dyn.current.get("bpsHardWriteLimit") == -1
    assert dyn.current.get("writerOutputBufferSize") == 1024


def _wait(cond: Callable[[], object]) -> None:
    wait_until(cond, "the dynamic configuration re-read")


def test_dynamic_change_applied_to_a_running_writer(ns_uri: str, tmp_path: Path) -> None:
    streams = tmp_path / "streams"
    streams.mkdir()
    conf = {**BASE_CONF, "streamConfigDir": str(streams), "dynamicConfigReloadIntervalSec": 0.1}
    with storage.open_namespace(ns_uri, conf) as ns:
        ns.create_log("live")
        dlm = ns.open_log("live")
        w = dlm.open_async_writer()
        futs = [w.write(storage.LogRecord(t, b"x" * 100)) for t in range(1, 201)]  # no limit yet
        _write(streams / "live.conf", "rpsHardWriteLimit=20\nlogSegmentRetentionHours=5\n")
        _wait(lambda: w.limiter is not None)
        assert w.limiter is not None and w.limiter.limits.rps_hard == 20
        refused = 0
        txid = 200
        t0 = time.monotonic()
        while refused < 50:  # far faster than 20/s, until the new limit has refused 50 writes
            try:
                futs.append(w.write(storage.LogRecord(txid + 1, b"y")))
                txid += 1
            except storage.OverCapacityError:
                refused += 1
        elapsed = time.monotonic() - t0
        assert txid - 200 <= 20 + 20 * elapsed + 1, (txid, elapsed)  # a stored second, then the rate
        assert dlm.dynamic is not None
        _write(streams / "live.conf", "rpsHardWriteLimit=-1\nrpsHardWriteLimit=oops\n")  # bad: old value kept
        _wait(lambda: any("rpsHardWriteLimit='oops' rejected" in e for e in dlm.dynamic.errors))  # it was re-read
        assert w.limiter is not None and w.limiter.limits.rps_hard == 20
        _write(streams / "live.conf", "# limits lifted\n")
        _wait(lambda: w.limiter is None)
        for _ in range(300):
            futs.append(w.write(storage.LogRecord(txid + 1, b"z")))
            txid += 1
        w.flush().result()
        assert all(f.result() for f in futs)
        w.close()
        assert dlm.record_count() == txid  # the same writer throughout; nothing acknowledged lost
