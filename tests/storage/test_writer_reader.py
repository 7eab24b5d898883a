"""Writers and readers end to end, with exact DLSNs, txids and sequence ids
(after DistributedLog's TestAsyncReaderWriter / TestNonBlockingReads / TestLogSegmentsZK)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import storage
from storage import DLSN, LogRecord


def payload(t: int) -> bytes:
    return f"{t};{t}".encode()


def write_segment(dlm: storage.LogManager, first: int, count: int) -> None:
    with dlm.open_writer() as w:
        for t in range(first, first + count):
            w.write(LogRecord(t, payload(t)))
        w.flush()


def read_all(dlm: storage.LogManager, start: DLSN | int = DLSN.INITIAL) -> list[storage.LogRecordWithDLSN]:
    out = []
    with dlm.open_reader(start) as r:
        while True:
            batch = r.read_bulk(100, non_blocking=True)
            if not batch:
                return out
            out.extend(batch)


def test_sync_writer_one_entry_per_record_exact_dlsns(ns: storage.Namespace) -> None:
    dlm = ns.open_log("log")
    with dlm.open_writer() as w:
        for t in range(1, 11):
            w.write(LogRecord(t, payload(t)))
        assert w.flush() == DLSN(1, 9, 0)
    recs = read_all(dlm)
    assert [r.dlsn for r in recs] == [DLSN(1, i, 0) for i in range(10)]
    assert [r.txid for r in recs] == list(range(1, 11))
    assert [r.sequence_id for r in recs] == list(range(10))
    assert [r.payload for r in recs] == [payload(t) for t in range(1, 11)]
    (seg,) = dlm.log_segments()
    assert (seg.lssn, seg.first_txid, seg.last_txid, seg.record_count) == (1, 1, 10, 10)
    assert not seg.in_progress and seg.last_dlsn == DLSN(1, 9, 0) and seg.start_sequence_id == 0


def test_records_packed_into_entries_by_output_buffer(ns: storage.Namespace) -> None:
    dlm = ns.open_log("packed", {"writerOutputBufferSize": 1024})
    body = b"x" * 24  # persistent size 44: the entry is transmitted once it holds > 1024 bytes (24 records)
    with dlm.open_writer() as w:
        for t in range(100):
            w.write(LogRecord(t, body))
        assert w.flush() == DLSN(1, 4, 3)
    recs = read_all(dlm)
    assert [r.dlsn for r in recs] == [DLSN(1, k // 24, k % 24) for k in range(100)]
    assert [r.sequence_id for r in recs] == list(range(100))


def test_sequence_ids_contiguous_across_segments(ns: storage.Namespace) -> None:
    dlm = ns.open_log("seq")
    write_segment(dlm, 1, 10)
    write_segment(dlm, 11, 5)
    write_segment(dlm, 16, 7)
    segs = dlm.log_segments()
    assert [s.lssn for s in segs] == [1, 2, 3]
    assert [s.start_sequence_id for s in segs] == [0, 10, 15]
    assert [s.record_count for s in segs] == [10, 5, 7]
    recs = read_all(dlm)
    assert [r.sequence_id for r in recs] == list(range(22))
    assert [r.txid for r in recs] == list(range(1, 23))
    assert recs[10].dlsn == DLSN(2, 0, 0) and recs[15].dlsn == DLSN(3, 0, 0)


def test_async_writer_futures_and_lac_visibility(ns: storage.Namespace) -> None:
    dlm = ns.open_log("async")
    w = dlm.open_async_writer()
    assert w.write(LogRecord(1, b"a")).result(10) == DLSN(1, 0, 0)
    r = dlm.open_reader(DLSN.INITIAL)
    # Entry 0 is durable but not confirmed: no later entry carries its LAC yet.
    assert r.read_next(non_blocking=True) is None
    assert w.write(LogRecord(2, b"b")).result(10) == DLSN(1, 1, 0)
    first = r.read_next(non_blocking=True)
    assert first is not None and first.dlsn == DLSN(1, 0, 0) and first.payload == b"a"
    assert r.read_next(non_blocking=True) is None
    assert w.flush().result(10) == DLSN(1, 1, 0)  # a control record publishes entry 1
    second = r.read_next(non_blocking=False)
    assert second is not None and second.dlsn == DLSN(1, 1, 0) and second.sequence_id == 1
    assert r.read_next(non_blocking=True) is None  # the control record (entry 2) is invisible
    r.close()
    w.close()
    (seg,) = dlm.log_segments()
    assert (seg.record_count, seg.last_dlsn, seg.last_txid) == (2, DLSN(1, 1, 0), 2)


def test_immediate_flush_makes_each_write_visible(ns: storage.Namespace) -> None:
    dlm = ns.open_log("immediate", {"enableImmediateFlush": True})
    w = dlm.open_async_writer()
    r = dlm.open_async_reader(DLSN.INITIAL)
    for t in range(1, 6):
        dlsn = w.write(LogRecord(t, payload(t))).result(10)
        rec = r.read_next().result(10)
        assert rec.dlsn == dlsn and rec.txid == t
    r.close()
    w.close()


def test_immediate_flush_publishes_every_entry_of_a_burst(ns: storage.Namespace) -> None:
    # entries written back to back publish each other (each frame carries the LAC); the last one still gets its
    # control record, so a tailing reader sees every acknowledged record
    dlm = ns.open_log("burst", {"enableImmediateFlush": True, "writerOutputBufferSize": 0})
    w = dlm.open_async_writer()
    futures = [w.write(LogRecord(t, payload(t))) for t in range(1, 201)]
    dlsns = [f.result(10) for f in futures]
    r = dlm.open_async_reader(DLSN.INITIAL)
    got: list[storage.LogRecordWithDLSN] = []
    deadline = time.monotonic() + 10
    while len(got) < len(dlsns) and time.monotonic() < deadline:
        got.extend(r.read_bulk(len(dlsns), timeout_s=0.1).result(10))
    assert [x.dlsn for x in got] == dlsns
    r.close()
    w.close()


def test_immediate_flush_costs_one_sync_per_data_entry(tmp_path: Path) -> None:
    # the commit record that publishes an acknowledged entry needs no fdatasync of its own (it publishes only durable
    # entries; the next entry's fdatasync, or the seal, makes it durable): one barrier per data entry, not two
    with storage.open_namespace(f"distributedlog-local://{tmp_path / 'ns'}") as local:
        dlm = local.open_log("one-sync", {"enableImmediateFlush": True, "writerOutputBufferSize": 0})
        w = dlm.open_async_writer()
        r = dlm.open_async_reader(DLSN.INITIAL)
        for t in range(1, 41):
            dlsn = w.write(LogRecord(t, payload(t))).result(10)
            assert r.read_next().result(10).dlsn == dlsn  # published at once, as before
        seg = w._seg
        assert seg is not None
        assert seg.ledger.sync_count == 40
        r.close()
        w.close()


def test_periodic_flush_makes_writes_visible(ns: storage.Namespace) -> None:
    dlm = ns.open_log("periodic", {"periodicFlushFrequencyMilliSeconds": 20, "writerOutputBufferSize": 1 << 20})
    w = dlm.open_async_writer()
    futures = [w.write(LogRecord(t, payload(t))) for t in range(1, 51)]
    r = dlm.open_async_reader(DLSN.INITIAL)
    got: list[storage.LogRecordWithDLSN] = []
    while len(got) < 50:
        got.extend(r.read_bulk(50, timeout_s=0.1).result(20))
    assert [f.result(10) for f in futures] == [x.dlsn for x in got]
    assert [x.txid for x in got] == list(range(1, 51))
    r.close()
    w.close()


def test_reader_by_dlsn_inside_entry_skips_earlier_slots(ns: storage.Namespace) -> None:
    dlm = ns.open_log("slots", {"writerOutputBufferSize": 1 << 20})
    with dlm.open_writer() as w:
        for t in range(1, 11):
            w.write(LogRecord(t, payload(t)))
        assert w.flush() == DLSN(1, 0, 9)
    recs = read_all(dlm, DLSN(1, 0, 4))
    assert [r.txid for r in recs] == [5, 6, 7, 8, 9, 10]
    assert [r.dlsn for r in recs] == [DLSN(1, 0, s) for s in range(4, 10)]
    # a slot that does not exist positions on the next record
    assert [r.dlsn for r in read_all(dlm, DLSN(1, 0, 42))] == []
    assert read_all(dlm, DLSN.INVALID)[0].dlsn == DLSN(1, 0, 0)
    assert read_all(dlm, DLSN.NON_INCLUSIVE_LOWER_BOUND)[0].dlsn == DLSN(1, 0, 0)


def test_async_reader_read_bulk_and_fifo(ns: storage.Namespace) -> None:
    dlm = ns.open_log("bulk")
    write_segment(dlm, 1, 30)
    r = dlm.open_async_reader(DLSN(1, 5, 0))
    f1 = r.read_bulk(10)
    f2 = r.read_next()
    f3 = r.read_bulk(100, timeout_s=0.2)
    assert [x.txid for x in f1.result(10)] == list(range(6, 16))
    assert f2.result(10).txid == 16
    assert [x.txid for x in f3.result(10)] == list(range(17, 31))
    pending = r.read_next()
    r.close()
    with pytest.raises(storage.ReadCancelledError):
        pending.result(10)
    with pytest.raises(storage.ReadCancelledError):
        r.read_next().result(10)


def test_reader_tails_across_a_roll(ns: storage.Namespace) -> None:
    ns.create_log("tail")
    dlm = ns.open_log("tail")
    r = dlm.open_async_reader(DLSN.INITIAL)
    pending = r.read_bulk(20, timeout_s=30)
    write_segment(dlm, 1, 10)
    write_segment(dlm, 11, 10)
    got = list(pending.result(30))
    while len(got) < 20:
        got.extend(r.read_bulk(20 - len(got), timeout_s=1).result(30))
    assert [x.dlsn for x in got] == [DLSN(1, i, 0) for i in range(10)] + [DLSN(2, i, 0) for i in range(10)]
    r.close()


def test_reopen_writer_continues_with_next_lssn(ns: storage.Namespace) -> None:
    dlm = ns.open_log("reopen")
    for i in range(3):
        write_segment(dlm, 1 + 5 * i, 5)
    assert [s.lssn for s in dlm.log_segments()] == [1, 2, 3]
    assert dlm.last_dlsn() == DLSN(3, 4, 0)
    assert dlm.last_txid() == 15
    assert dlm.first_dlsn() == DLSN(1, 0, 0)
    assert dlm.record_count() == 15
    assert dlm.record_count(DLSN(2, 2, 0)) == 8
    assert dlm.record_count(DLSN(3, 0, 0)) == 5


def test_record_sets_expand_into_members_with_contiguous_positions(ns: storage.Namespace) -> None:
    from storage.formats.recordset import RecordSetWriter

    dlm = ns.open_log("sets", {"writerOutputBufferSize": 1 << 20})
    rs = RecordSetWriter(1)  # LZ4
    for i in range(5):
        rs.write(f"member-{i}".encode())
    w = dlm.open_async_writer()
    futures = [w.write(LogRecord(t, payload(t))) for t in (1, 2, 3)]
    futures.append(w.write(rs.to_record(4)))
    futures += [w.write(LogRecord(t, payload(t))) for t in (5, 6)]
    assert w.flush().result(10) == DLSN(1, 0, 9)
    assert [f.result(10) for f in futures] == [DLSN(1, 0, s) for s in (0, 1, 2, 3, 8, 9)]
    w.close()
    recs = read_all(dlm)
    assert [r.dlsn for r in recs] == [DLSN(1, 0, s) for s in range(10)]
    assert [r.txid for r in recs] == [1, 2, 3, 4, 4, 4, 4, 4, 5, 6]
    assert [r.sequence_id for r in recs] == list(range(10))
    assert [r.payload for r in recs[3:8]] == [f"member-{i}".encode() for i in range(5)]
    (seg,) = dlm.log_segments()
    assert seg.record_count == 10
    assert read_all(dlm, DLSN(1, 0, 6))[0].payload == b"member-3"


def test_application_cannot_write_control_records(ns: storage.Namespace) -> None:
    from storage.formats.record import CONTROL

    with ns.open_log("ctl").open_writer() as w, pytest.raises(storage.InvalidArgumentError):
        w.write(LogRecord(1, b"x", flags=CONTROL))


def test_record_counts_like_read_handler(ns: storage.Namespace) -> None:
    """After TestBKLogReadHandler#testGetLogRecordCount*: completed segments count from their
    metadata, the in-progress one from its last visible record."""
    dlm = ns.open_log("counts")
    ns.create_log("counts")
    assert dlm.record_count() == 0
    for i in range(3):
        write_segment(dlm, 1 + 10 * i, 10)
    assert dlm.record_count() == 30
    assert dlm.record_count(DLSN(1, 0, 0)) == 30
    assert dlm.record_count(DLSN(1, 5, 0)) == 25
    assert dlm.record_count(DLSN(2, 0, 0)) == 20
    assert dlm.record_count(DLSN(3, 9, 0)) == 1
    assert dlm.record_count(DLSN(4, 0, 0)) == 0
    w = dlm.open_async_writer()
    for t in range(31, 36):
        w.write(LogRecord(t, payload(t))).result(10)
    # Entry 4 (txid 35) is not yet confirmed: readers see 4 of the 5 in-progress records.
    assert dlm.record_count() == 34
    assert dlm.record_count(DLSN(4, 2, 0)) == 2
    w.flush().result(10)
    assert dlm.record_count() == 35
    assert dlm.last_dlsn() == DLSN(4, 4, 0) and dlm.last_txid() == 35
    w.close()
    assert dlm.record_count() == 35
