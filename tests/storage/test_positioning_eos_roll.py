"""Positioning by transaction id, end of stream and rolling
(after DistributedLog's TestReadUtils / TestBKDistributedLogManager / TestRollLogSegments)."""

from __future__ import annotations

import time

import pytest

import storage
from storage import DLSN, LogRecord
from tests.storage.test_writer_reader import read_all, write_segment


def test_reader_by_txid_exact_and_between(ns: storage.Namespace) -> None:
    dlm = ns.open_log("txid")
    with dlm.open_writer() as w:
        for t in range(0, 200, 2):  # even txids 0..198, one record per entry
            w.write(LogRecord(t, b"v"))
    for target, expect_txid in [(0, 0), (1, 2), (100, 100), (101, 102), (198, 198)]:
        recs = read_all(dlm, target)
        assert recs[0].txid == expect_txid
        assert recs[0].dlsn == DLSN(1, expect_txid // 2, 0)
        assert recs[0].sequence_id == expect_txid // 2
    assert read_all(dlm, 199) == []  # beyond the end: the reader waits for new data


def test_reader_by_txid_with_duplicates_across_segments(ns: storage.Namespace) -> None:
    dlm = ns.open_log("dups", {"writerOutputBufferSize": 1 << 20})
    # txid 5 is the last of segment 1, all of segment 2 and the first of segment 3.
    for txids in ([1, 2, 3, 4, 5], [5, 5, 5], [5, 6, 7]):
        with dlm.open_writer() as w:
            for t in txids:
                w.write(LogRecord(t, f"{t}".encode()))
    recs = read_all(dlm, 5)
    assert recs[0].dlsn == DLSN(1, 0, 4)  # the first copy of txid 5
    assert [r.txid for r in recs] == [5, 5, 5, 5, 5, 6, 7]
    assert read_all(dlm, 6)[0].dlsn == DLSN(3, 0, 1)


def test_reader_by_txid_lands_in_later_entry_with_control_entries(ns: storage.Namespace) -> None:
    dlm = ns.open_log("ctrl")
    with dlm.open_writer() as w:
        for t in range(1, 21):
            w.write(LogRecord(t, b"v"))
            w.flush()  # data entry, control entry, data entry, ...
    assert read_all(dlm, 7)[0].dlsn == DLSN(1, 12, 0)
    assert [r.txid for r in read_all(dlm, 7)] == list(range(7, 21))


def test_reader_by_txid_on_empty_and_missing_log(ns: storage.Namespace) -> None:
    ns.create_log("empty")
    assert read_all(ns.open_log("empty"), 5) == []
    with pytest.raises(storage.LogNotFoundError):
        ns.open_log("missing").open_reader(5)


def test_end_of_stream(ns: storage.Namespace) -> None:
    dlm = ns.open_log("eos")
    with dlm.open_writer() as w:
        for t in range(1, 6):
            w.write(LogRecord(t, b"v"))
        w.mark_end_of_stream()
        w.mark_end_of_stream()  # twice is fine
        with pytest.raises(storage.EndOfStreamError):
            w.write(LogRecord(6, b"late"))
    assert dlm.is_end_of_stream()
    assert dlm.last_txid() == 5 and dlm.last_dlsn() == DLSN(1, 4, 0)
    (seg,) = dlm.log_segments()
    assert seg.last_txid == 2**63 - 1 and seg.record_count == 5
    with dlm.open_reader(DLSN.INITIAL) as r:
        assert [x.txid for x in r.read_bulk(10)] == [1, 2, 3, 4, 5]
        for _ in range(2):  # sticky
            with pytest.raises(storage.EndOfStreamError):
                r.read_next()
    with pytest.raises(storage.EndOfStreamError), dlm.open_writer() as w2:
        w2.write(LogRecord(100, b"after"))


def test_end_of_stream_async_reader(ns: storage.Namespace) -> None:
    dlm = ns.open_log("eos-async")
    w = dlm.open_async_writer()
    w.write(LogRecord(1, b"a")).result(10)
    w.mark_end_of_stream()
    w.close()
    r = dlm.open_async_reader(DLSN.INITIAL)
    assert r.read_next().result(10).txid == 1
    with pytest.raises(storage.EndOfStreamError):
        r.read_next().result(10)
    r.close()


def test_roll_by_size(ns: storage.Namespace) -> None:
    dlm = ns.open_log("roll", {"logSegmentRollingMinutes": 0, "maxLogSegmentBytes": 1000})
    with dlm.open_writer() as w:
        for t in range(1, 101):
            w.write(LogRecord(t, b"x" * 80))  # 100 bytes persistent + 13 envelope per entry
    segs = dlm.log_segments()
    # A segment rolls once its ledger holds more than 1000 bytes: 9 entries of 113 bytes.
    assert [s.record_count for s in segs] == [9] * 11 + [1]
    assert [s.first_txid for s in segs] == [1 + 9 * i for i in range(12)]
    assert [s.start_sequence_id for s in segs] == [9 * i for i in range(12)]
    recs = read_all(dlm)
    assert [r.sequence_id for r in recs] == list(range(100))
    assert recs[9].dlsn == DLSN(2, 0, 0)


def test_roll_by_time(ns: storage.Namespace) -> None:
    dlm = ns.open_log("roll-time", {"logSegmentRollingMinutes": 0.0005})  # 30 ms
    w = dlm.open_async_writer()
    for t in range(1, 4):
        w.write(LogRecord(t, b"v")).result(10)
        time.sleep(0.05)
    w.close()
    segs = dlm.log_segments()
    assert [s.record_count for s in segs] == [1, 1, 1]
    assert [s.lssn for s in segs] == [1, 2, 3]
    assert [r.txid for r in read_all(dlm)] == [1, 2, 3]


def test_txid_rules(ns: storage.Namespace) -> None:
    dlm = ns.open_log("rules")
    write_segment(dlm, 10, 5)  # txids 10..14
    with dlm.open_writer() as w:
        with pytest.raises(storage.TransactionIdOutOfOrderError):
            w.write(LogRecord(13, b"below maxtxid"))
        with pytest.raises(storage.TransactionIdOutOfOrderError):
            w.write(LogRecord(-1, b"negative"))
        with pytest.raises(storage.TransactionIdOutOfOrderError):
            w.write(LogRecord(2**63 - 1, b"MAX_TXID"))
        w.write(LogRecord(14, b"equal is allowed"))
        with pytest.raises(storage.TransactionIdOutOfOrderError):
            w.write(LogRecord(12, b"down within a segment"))
        with pytest.raises(storage.LogRecordTooLongError):
            w.write(LogRecord(15, b"x" * (1040384 - 20 + 1)))
        w.write(LogRecord(15, b"x" * (1040384 - 20)))  # exactly the limit
        assert w.flush() == DLSN(2, 1, 0)
    assert [r.txid for r in read_all(dlm, DLSN(2, 0, 0))] == [14, 15]
