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
from storage import DLSN, LogRecord


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
