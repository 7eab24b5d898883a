"""A real full disk (an 8 MiB tmpfs mostly taken by a filler file): the embedded namespace's writes fail with one
clear error naming the path and the free space, classified right (retriable; outcome unknown for appends that may
be partly stored, definitive for a metadata change SQLite rolled back), nothing acknowledged is lost, readers keep
reading, and writing resumes in the same process once space is freed (a writer opened again)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import storage
from dl_proxy import ProxyClient
from storage import DLSN, LogRecord
from tests.proxy.conftest import StartProxy
from tests.zk import ZooKeeperServer


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    st = os.statvfs(disk)
    filler = disk / "filler"
    with open(filler, "wb") as f:
        f.write(bytes(st.f_bavail * st.f_frsize - leave))
    return filler


def _read_all(log: storage.LogManager) -> list[int]:
    with log.open_reader(DLSN.INITIAL) as r:
        out: list[int] = []
        while batch := r.read_bulk(1000, non_blocking=True):
            out.extend(x.txid for x in batch)
        return out


def test_a_full_disk_fails_writes_clearly_and_writing_resumes_once_space_is_freed(small_disk: Path) -> None:
    uri = f"distributedlog-local://{small_disk / 'ns'}"
    conf = {"maxLogSegmentBytes": 256 * 1024, "writerOutputBufferSize": 0}
    with storage.open_namespace(uri, conf) as ns:
        ns.create_log("a")
        log = ns.open_log("a")
        w = log.open_async_writer()
        filler = _fill(small_disk, 300 * 1024)
        acked: list[int] = []
        failure: storage.DLError | None = None
        for txid in range(1, 10_000):
            try:
                w.write(LogRecord(txid, b"x" * 1000)).result(timeout=30)
            except storage.DLError as e:
                failure = e
                break
            acked.append(txid)
        assert failure is not None and acked, "the disk never filled up"
        text = str(failure)
        assert "No space left on device" in text and "free of 8.0 MiB on the file system of" in text, text
        assert str(small_disk / "ns" / "segments") in text, text
        assert failure.retriable and failure.outcome_unknown, (failure.retriable, failure.outcome_unknown)
        with pytest.raises(storage.DLError) as refused:  # the writer is in error: later writes refused at once
            w.write(LogRecord(txid + 1, b"y")).result(timeout=30)
        assert not refused.value.outcome_unknown  # never sent: definitive

        # Readers keep reading what was acknowledged, the last entry excepted: an entry is visible once a later
        # entry or control record carries its LAC, or once a writer recovered the segment (DistributedLog's rule).
        visible = _read_all(log)
        assert visible in (acked, acked[:-1]), (len(visible), len(acked))

        with pytest.raises(storage.MetadataError) as meta:  # metadata on the same full disk
            for i in range(100):  # SQLite's pages may have room for a few
                ns.create_log(f"b{i}")
        text = str(meta.value)
        assert "database or disk is full" in text and "free of 8.0 MiB" in text and meta.value.retriable, text
        assert not meta.value.outcome_unknown  # SQLite rolled the transaction back

        filler.unlink()
        w.abort()
        w = log.open_async_writer()  # recovers the failed segment; same process, no restart
        more = list(range(txid + 1000, txid + 1100))
        for t in more:
            w.write(LogRecord(t, b"z"))
        w.flush().result(timeout=30)
        w.close()
        got = _read_all(log)
        assert got[: len(acked)] == acked and got[-len(more) :] == more  # the unknown ones: there or not, once
        assert len(got) == len(set(got)) and got == sorted(got)
        ns.create_log("after")  # metadata writable again


def test_a_sync_writers_failed_flush_on_a_full_disk_is_outcome_unknown(small_disk: Path) -> None:
    """A flush covers every record written since the previous one: when any of them may be stored, its error says
    outcome unknown (never a definitive error for a stored record)."""
    uri = f"distributedlog-local://{small_disk / 'ns'}"
    with storage.open_namespace(uri, {"writerOutputBufferSize": 4096}) as ns:
        ns.create_log("s")
        log = ns.open_log("s")
        w = log.open_writer()
        _fill(small_disk, 200 * 1024)
        txid = 0
        with pytest.raises(storage.DLError) as failed:
            while True:
                for _ in range(50):
                    txid += 1
                    w.write(LogRecord(txid, b"s" * 1000))
                w.flush()
        assert failed.value.outcome_unknown and failed.value.retriable, failed.value
        w.abort()


def test_offload_to_a_full_file_cold_store_names_the_directory_and_the_free_space(
    small_disk: Path, tmp_path: Path
) -> None:
    """A ``file://`` cold store on a full disk: the offload fails with the path and the space left, retriable (the
    writer's background offload tries again later), and the segment keeps its hot copy."""
    from storage.cold import open_cold_store
    from storage.config import Config

    cold = small_disk / "cold"
    cold.mkdir()
    _fill(small_disk, 0)
    with open_cold_store(f"file://{cold}", Config()) as store, pytest.raises(storage.ColdStoreError) as full:
        store.put_verified("segment", [b"x" * 65536])
    text = str(full.value)
    assert "No space left on device" in text and f"on the file system of {cold}" in text, text
    assert full.value.retriable


def test_the_write_proxy_on_a_full_disk(
    small_disk: Path, zk_server: ZooKeeperServer, zk_chroot: str, proxy_process: StartProxy
) -> None:
    """The proxy's segments on a full disk: a producer's write fails after its delivery timeout with the storage
    error (path, free space) as the cause it saw, outcome unknown; once space is freed the same client writes on
    and every acknowledged record is in the log once."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{small_disk / 'segments'}")
    with storage.open_namespace(uri) as ns:
        ns.create_log("full")
    proc, address = proxy_process(uri)
    acked: list[bytes] = []
    with ProxyClient(proxies=[address], timeout_s=5.0) as client:
        client.write("full", b"first").result(60)
        acked.append(b"first")
        filler = _fill(small_disk, 64 * 1024)
        failure: storage.DLError | None = None
        for i in range(2000):
            payload = b"%d-" % i + b"x" * 2000
            try:
                client.write("full", payload).result(60)
                acked.append(payload)
            except storage.DLError as e:
                failure = e
                break
        assert failure is not None, "the disk never filled up"
        text = str(failure)
        assert "No space left on device" in text and "free of 8.0 MiB" in text, text
        assert failure.outcome_unknown, text
        filler.unlink()
        client.write("full", b"after").result(60)
        acked.append(b"after")
    proc.terminate()  # a clean stop: the proxy completes its segment
    assert proc.wait(60) == 0
    with storage.open_namespace(uri, create=False) as ns:
        log = ns.open_log("full")
        log.open_writer().close()
        with log.open_reader(DLSN.INITIAL) as r:
            got = [x.payload for batch in iter(lambda: r.read_bulk(1000, non_blocking=True), []) for x in batch]
    assert all(got.count(p) == 1 for p in acked) and got[-1] == b"after", (len(got), len(acked))


def test_the_sinks_staging_on_a_full_disk_fails_clearly_and_leaves_nothing_behind(small_disk: Path) -> None:
    """What the exactly-once sink's tasks do (stage a batch in a ledger of its own) on a full disk: one clear error
    (path, free space); the half-written ledger is swept like any staged ledger of a failed task; once space is
    freed, staging and publishing work."""
    from storage.log.staging import list_staged, publish, stage_records, sweep

    uri = f"distributedlog-local://{small_disk / 'ns'}"
    with storage.open_namespace(uri) as ns:
        ns.create_log("out")
        filler = _fill(small_disk, 200 * 1024)
        with pytest.raises(storage.DLError) as full:
            stage_records(ns, ((t, b"y" * 1000) for t in range(1, 2001)))
        text = str(full.value)
        assert "No space left on device" in text and "free of 8.0 MiB" in text and full.value.retriable, text
        filler.unlink()
        sweep(ns, older_than_ms=0)
        assert list_staged(ns) == []
        assert set(ns.segstore.list_ledgers()) == set()  # nothing half-written left
        staged = stage_records(ns, [(1, b"a"), (2, b"b")])
        assert staged is not None
        publish(ns, "out", [staged], {"batchId": 0}, lambda prev: prev is None)
        assert [x.payload for x in ns.open_log("out").open_reader(DLSN.INITIAL).read_bulk(10, non_blocking=True)] == [
            b"a",
            b"b",
        ]
