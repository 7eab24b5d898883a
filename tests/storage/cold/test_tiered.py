"""Offload, tiered reads, retention by tier and restore, on a ZooKeeper namespace bound to local segment files and
a cold store of each kind (a filesystem path, S3 on radosgw)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import storage
from storage import DLSN, LogRecord
from storage.errors import ColdStoreError, CorruptedEntryError, LogSegmentNotFoundError, MetadataError
from storage.log.offload import object_key, offload_log
from storage.log.restore import restore_log
from storage.log.tiered import TieredSegmentStore
from tests.storage.observe import wait_until

#: Small segments: a roll every few records.
ROLLING = {"logSegmentRollingMinutes": 0, "maxLogSegmentBytes": 1500, "logSegmentRetentionHours": 0}


def payload(t: int) -> bytes:
    return f"record-{t:05d}-".encode() * 8  # ~110 bytes


def tiered_of(ns: storage.Namespace) -> TieredSegmentStore:
    assert isinstance(ns.segstore, TieredSegmentStore)
    return ns.segstore


def write_records(dlm: storage.LogManager, first: int, count: int) -> None:
    with dlm.open_writer() as w:
        for t in range(first, first + count):
            w.write(LogRecord(t, payload(t)))
            if t % 5 == 0:
                w.flush()
        w.flush()


def read_txids(dlm: storage.LogManager, start: DLSN | int = DLSN.INITIAL) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    with dlm.open_reader(start) as r:
        while True:
            batch = r.read_bulk(100, non_blocking=True)
            if not batch:
                return out
            out.extend((rec.txid, rec.payload) for rec in batch)


def read_async(dlm: storage.LogManager, n: int) -> list[tuple[int, bytes]]:
    ar = dlm.open_async_reader(DLSN.INITIAL)
    try:
        out: list[tuple[int, bytes]] = []
        while len(out) < n:
            out.extend((rec.txid, rec.payload) for rec in ar.read_bulk(50, timeout_s=0.2).result(30))
        return out
    finally:
        ar.close()


def arrow_rows(dlm: storage.LogManager, start: DLSN | int = DLSN.INITIAL) -> list[tuple[int, bytes]]:
    table = pa.Table.from_batches(list(dlm.read_arrow(start)))
    return list(zip(table.column("txid").to_pylist(), table.column("value").to_pylist(), strict=True))


def purge_hot(dlm: storage.LogManager) -> list[storage.LogSegmentMetadata]:
    time.sleep(0.01)  # a purge timestamp must be in the past
    return dlm.purge_segments(int(time.time() * 1000) - 1)


def test_a_short_lived_writer_offloads_its_only_segment_when_it_closes(
    cold_ns_uri: str, cold_conf: dict[str, Any]
) -> None:
    """offloadThresholdHours=0 means at once: a writer that never rolled leaves no segment hot-only at close."""
    with storage.open_namespace(cold_ns_uri, {**cold_conf, "offloadThresholdHours": 0}) as ns:
        dlm = ns.open_log("short")
        write_records(dlm, 1, 10)
        (seg,) = dlm.log_segments()
        assert not seg.in_progress
        record = tiered_of(ns).index.get(seg.ledger_id)
        assert record is not None and record.key == object_key("short", seg)


def test_offload_under_a_running_writer_purge_hot_then_every_reader_reads_exact_records(
    cold_ns_uri: str, cold_conf: dict[str, Any]
) -> None:
    conf = {**cold_conf, **ROLLING, "offloadThresholdHours": 0}
    expected = [(t, payload(t)) for t in range(1, 201)]
    with storage.open_namespace(cold_ns_uri, conf) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("events")
        w = dlm.open_writer()
        for t in range(1, 201):  # each roll triggers the writer's background offload
            w.write(LogRecord(t, payload(t)))
            if t % 5 == 0:
                w.flush()

        def completed_offloaded() -> bool:
            done = [s for s in dlm.log_segments() if not s.in_progress]
            return len(done) >= 3 and all(tiered.index.get(s.ledger_id) is not None for s in done)

        wait_until(completed_offloaded, "the writer's background offload of its completed segments")
        w.close()
        report = offload_log(tiered, _meta(ns, "events"))  # the last one (catch-up)
        segments = dlm.log_segments()
        assert all(not s.in_progress for s in segments) and len(segments) >= 4
        assert len(report.offloaded) + report.already == len(segments)
        records = {s.ledger_id: tiered.index.get(s.ledger_id) for s in segments}
        assert all(
            rec is not None and rec.key == object_key("events", s) for s in segments for rec in [records[s.ledger_id]]
        )
        offloaded_bytes = sum(rec.size for rec in records.values() if rec is not None)

        purged = purge_hot(dlm)
        assert [s.lssn for s in purged] == [s.lssn for s in segments[:-1]]  # the newest completed one stays
        assert [s.lssn for s in dlm.log_segments()] == [s.lssn for s in segments]  # metadata kept
        assert [tiered.where(s.ledger_id) for s in segments] == ["cold"] * (len(segments) - 1) + ["both"]
        assert purge_hot(dlm) == []  # nothing hot left to purge

        assert read_txids(dlm) == expected
        assert read_async(dlm, 200) == expected
        assert arrow_rows(dlm) == expected
        assert read_txids(dlm, 97) == expected[96:]  # positioning by txid inside a cold segment
        mid = dlm.log_segments()[1]
        assert read_txids(dlm, DLSN(mid.lssn, 2, 0))[0] == expected[mid.first_txid + 1]
        assert dlm.record_count() == 200 and dlm.last_txid() == 200 and dlm.first_dlsn() == DLSN(1, 0, 0)
        print(f"offloaded {len(segments)} segments, {offloaded_bytes} bytes; read back 4 x 200 records")


def _meta(ns: storage.Namespace, name: str) -> Any:
    from storage.log.layout import LogMetadata

    return LogMetadata(ns.metastore, ns.paths_of(name))


def test_a_damaged_cold_object_raises_corrupted_entry_error_at_that_entry(
    cold_ns_uri: str, cold_conf: dict[str, Any]
) -> None:
    with storage.open_namespace(cold_ns_uri, {**cold_conf, **ROLLING, "offloadThresholdHours": -1}) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("damaged")
        write_records(dlm, 1, 60)
        write_records(dlm, 61, 10)
        first = dlm.log_segments()[0]
        offload_log(tiered, _meta(ns, "damaged"))
        purge_hot(dlm)
        assert tiered.where(first.ledger_id) == "cold"
        rec = tiered.index.get(first.ledger_id)
        assert rec is not None
        blob = bytearray(tiered.cold.read_range(rec.key, 0, rec.size))
        blob[rec.data_bytes // 2] ^= 0xFF  # inside an entry in the middle of the first segment
        tiered.cold.put(rec.key, [bytes(blob)])
    with storage.open_namespace(cold_ns_uri, {**cold_conf, **ROLLING}) as ns:  # a reader in a fresh process state
        dlm = ns.open_log("damaged")
        got: list[int] = []
        with pytest.raises(CorruptedEntryError), dlm.open_reader(DLSN.INITIAL) as r:
            while True:
                batch = r.read_bulk(10, non_blocking=True)
                if not batch:
                    break
                got.extend(x.txid for x in batch)
        assert got == list(range(1, len(got) + 1)) and len(got) < first.record_count  # exact up to the damage
        with pytest.raises(CorruptedEntryError):
            list(dlm.read_arrow())


def test_purge_never_deletes_the_only_copy_and_cold_retention_deletes_whole_segments(
    cold_ns_uri: str, cold_conf: dict[str, Any], tmp_path: Path
) -> None:
    with storage.open_namespace(cold_ns_uri, {**cold_conf, **ROLLING, "offloadThresholdHours": -1}) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("r")
        for i in range(4):
            write_records(dlm, 1 + 10 * i, 10)
        segments = dlm.log_segments()
        # a purge offloads what is not offloaded yet, then deletes only hot copies
        assert [s.lssn for s in purge_hot(dlm)] == [1, 2, 3]
        assert [tiered.where(s.ledger_id) for s in segments] == ["cold", "cold", "cold", "hot"]
        assert read_txids(dlm) == [(t, payload(t)) for t in range(1, 41)]
    # the cold copies go after their own retention, and the segments with them (the newest completed one stays)
    with storage.open_namespace(cold_ns_uri, {**cold_conf, "coldSegmentRetentionHours": 1e-9}) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("r")
        time.sleep(0.01)
        purged = dlm.purge_segments(int(time.time() * 1000) - 1)
        assert [s.lssn for s in purged] == [1, 2, 3]
        assert [s.lssn for s in dlm.log_segments()] == [4]
        assert [o.key for o in tiered.cold.list("r/")] == []  # segment 4 was never offloaded
        assert all(tiered.index.get(s.ledger_id) is None for s in segments)
        assert read_txids(dlm) == [(t, payload(t)) for t in range(31, 41)]


def test_restore_rebuilds_the_hot_ledgers_from_cold(
    cold_ns_uri: str, cold_conf: dict[str, Any], tmp_path: Path
) -> None:
    conf = {**cold_conf, **ROLLING, "offloadThresholdHours": -1}
    with storage.open_namespace(cold_ns_uri, conf) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("dr")
        write_records(dlm, 1, 80)
        before = dlm.log_segments()
        report = offload_log(tiered, _meta(ns, "dr"))
        assert len(report.offloaded) == len(before) >= 3
    # disaster: the whole hot store is lost
    shutil.rmtree(tmp_path / "segments")
    (tmp_path / "segments").mkdir()
    with storage.open_namespace(cold_ns_uri, conf) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("dr")
        assert [tiered.where(s.ledger_id) for s in before] == ["cold"] * len(before)
        assert read_txids(dlm) == [(t, payload(t)) for t in range(1, 81)]  # readable from cold meanwhile
        rep = restore_log(tiered, _meta(ns, "dr"))
        assert [lssn for lssn, _, _ in rep.restored] == [s.lssn for s in before] and rep.lost == []
        after = dlm.log_segments()
        assert all(new.ledger_id > max(s.ledger_id for s in before) for new in after)  # no id reused
        assert [tiered.where(s.ledger_id) for s in after] == ["both"] * len(after)
        assert [(s.lssn, s.first_txid, s.last_txid, s.record_count) for s in after] == [
            (s.lssn, s.first_txid, s.last_txid, s.record_count) for s in before
        ]
        assert read_txids(dlm) == [(t, payload(t)) for t in range(1, 81)]
        assert restore_log(tiered, _meta(ns, "dr")).restored == []  # idempotent
        write_records(dlm, 81, 5)  # a writer goes on after the restore
        assert read_txids(dlm)[-5:] == [(t, payload(t)) for t in range(81, 86)]
        print(f"restored {len(rep.restored)} segments, {rep.bytes_restored} bytes, from cold")


def test_a_segment_lost_in_both_tiers_is_reported(cold_ns_uri: str, cold_conf: dict[str, Any], tmp_path: Path) -> None:
    conf = {**cold_conf, **ROLLING, "offloadThresholdHours": -1}
    with storage.open_namespace(cold_ns_uri, conf) as ns:
        dlm = ns.open_log("lost")
        write_records(dlm, 1, 20)
        seg = dlm.log_segments()[0]
        ns.segstore.delete_ledger(seg.ledger_id)
        with pytest.raises(LogSegmentNotFoundError):
            from storage.log.offload import offload_segment

            offload_segment(tiered_of(ns), _meta(ns, "lost"), seg)
        assert seg.lssn in restore_log(tiered_of(ns), _meta(ns, "lost")).lost


def test_bind_checks_the_cold_store_first_and_a_bound_namespace_may_add_one(
    zk_server: Any, zk_chroot: str, tmp_path: Path, cold_kind: str, cold_uri: str, cold_conf: dict[str, Any]
) -> None:
    from tests.storage.test_binding import _exists

    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    segments = tmp_path / "segments"
    bad = (
        cold_uri.replace("s3://dltest/", "s3://missing-bucket/")
        if cold_kind == "s3"
        else "file:///proc/no-such-dir/cold"
    )
    with pytest.raises(ColdStoreError) as e:
        storage.bind_namespace(uri, segments=f"file://{segments}", conf=cold_conf, cold=bad)
    assert e.value.retriable is False
    assert not _exists(zk_server, zk_chroot) and not segments.exists()  # nothing half-bound
    storage.bind_namespace(uri, segments=f"file://{segments}", conf=cold_conf)  # no cold store yet
    with storage.open_namespace(uri, cold_conf) as ns:
        assert not isinstance(ns.segstore, TieredSegmentStore)
        write_records(ns.open_log("early"), 1, 30)
    with pytest.raises(ColdStoreError):
        storage.bind_namespace(uri, segments=f"file://{segments}", conf=cold_conf, cold=bad)
    storage.bind_namespace(uri, segments=f"file://{segments}", conf=cold_conf, cold=cold_uri)  # added later
    storage.bind_namespace(uri, segments=f"file://{segments}", conf=cold_conf, cold=cold_uri)  # again: no-op
    other = f"file://{tmp_path / 'other-cold'}"
    with pytest.raises(MetadataError, match="already bound to the cold store"):
        storage.bind_namespace(uri, segments=f"file://{segments}", conf=cold_conf, cold=other)
    assert not (tmp_path / "other-cold").exists()
    with storage.open_namespace(uri, {**cold_conf, **ROLLING}) as ns:
        tiered = tiered_of(ns)
        report = offload_log(tiered, _meta(ns, "early"))  # segments written before the cold store: catch-up
        assert len(report.offloaded) == len(ns.open_log("early").log_segments())
        ns.delete_log("early")  # deleting a log deletes its cold copies too
        assert tiered.cold.list("early/") == []


def test_an_outage_during_offload_is_retried_later_and_never_blocks_writes(
    ceph_cluster: Any, radosgw: Any, zk_server: Any, zk_chroot: str, tmp_path: Path
) -> None:
    from storage.common.stats import store_stats

    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    conf = {
        "coldStoreAccessKey": radosgw.access_key,
        "coldStoreSecretKey": radosgw.secret_key,
        "coldStoreRequestTimeoutSeconds": 2,
        "coldStoreMaxAttempts": 1,
        "offloadThresholdHours": 0,
        "offloadRetryIntervalSeconds": 0.5,
        "lockTimeoutSeconds": 1,
        **ROLLING,
    }
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}", conf=conf, cold=radosgw.cold_uri("outage"))
    stats = store_stats("cold")
    with storage.open_namespace(uri, conf) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("o")

        def unoffloaded() -> list[storage.LogSegmentMetadata]:
            return [s for s in dlm.log_segments() if not s.in_progress and tiered.index.get(s.ledger_id) is None]

        w = dlm.open_writer()
        try:
            for t in range(1, 41):
                w.write(LogRecord(t, payload(t)))
                if t % 5 == 0:
                    w.flush()
            wait_until(lambda: not unoffloaded(), "the background offload before the outage")
            failures_before = stats.errors.get("offload", 0)
            ceph_cluster.stop_radosgw()
            try:
                for t in range(41, 121):  # writes go on, acknowledged, while the cold store is down
                    w.write(LogRecord(t, payload(t)))
                    if t % 5 == 0:
                        w.flush()
                wait_until(lambda: stats.errors.get("offload", 0) > failures_before, "a failed (retriable) offload")
                pending = unoffloaded()
                assert pending  # completed during the outage, not offloaded
                purged = purge_hot(dlm)  # hot copies of segments offloaded before the outage may go ...
                assert all(tiered.index.get(s.ledger_id) is not None for s in purged)
                assert not {s.lssn for s in purged} & {s.lssn for s in pending}  # ... never the only copy
                assert all(tiered.hot_exists(s.ledger_id) for s in pending)
                print(f"offload failures during the outage: {stats.errors.get('offload', 0) - failures_before}")
            finally:
                ceph_cluster.start_radosgw()
            wait_until(lambda: not unoffloaded(), "the offload retried after the outage", timeout_s=120)
        finally:
            w.close()
        offload_log(tiered, _meta(ns, "o"))
        purge_hot(dlm)
        segments = dlm.log_segments()
        assert [tiered.where(s.ledger_id) for s in segments[:-1]] == ["cold"] * (len(segments) - 1)
        assert read_txids(dlm) == [(t, payload(t)) for t in range(1, 121)]  # nothing lost
        assert arrow_rows(dlm) == [(t, payload(t)) for t in range(1, 121)]


def test_subscriber_positions_hold_for_both_tiers(cold_ns_uri: str, cold_conf: dict[str, Any]) -> None:
    with storage.open_namespace(cold_ns_uri, {**cold_conf, **ROLLING, "offloadThresholdHours": -1}) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("s")
        for i in range(4):
            write_records(dlm, 1 + 10 * i, 10)
        dlm.subscriptions().advance("app", DLSN(2, 0, 0))  # still needs segments 2..
        assert [s.lssn for s in purge_hot(dlm)] == [1]
        assert [tiered.where(s.ledger_id) for s in dlm.log_segments()] == ["cold", "hot", "hot", "hot"]
    with storage.open_namespace(cold_ns_uri, {**cold_conf, "coldSegmentRetentionHours": 1e-9}) as ns:
        dlm = ns.open_log("s")
        assert [s.lssn for s in purge_hot(dlm)] == [1]  # the cold copy of 1 goes; 2.. stay in both tiers' sense
        assert [s.lssn for s in dlm.log_segments()] == [2, 3, 4]
        assert read_txids(dlm, DLSN(2, 0, 0)) == [(t, payload(t)) for t in range(11, 41)]


def test_tiered_reads_over_a_rados_hot_store(
    zk_server: Any, zk_chroot: str, tmp_path: Path, rados_location: Any, cold_conf: dict[str, Any], cold_uri: str
) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=rados_location.uri(), conf=cold_conf, cold=cold_uri)
    with storage.open_namespace(uri, {**cold_conf, **ROLLING, "offloadThresholdHours": -1}) as ns:
        tiered = tiered_of(ns)
        dlm = ns.open_log("r")
        write_records(dlm, 1, 60)
        write_records(dlm, 61, 10)
        offload_log(tiered, _meta(ns, "r"))
        purged = purge_hot(dlm)
        assert purged and all(tiered.where(s.ledger_id) == "cold" for s in purged)
        expected = [(t, payload(t)) for t in range(1, 71)]
        assert read_txids(dlm) == expected
        assert arrow_rows(dlm) == expected
        assert read_txids(dlm, 33) == expected[32:]
