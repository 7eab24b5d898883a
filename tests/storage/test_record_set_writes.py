"""Writers check a whole record set before storing it: a set with a valid header and a malformed body (wrong LZ4
framing, a member running past the data, a member count or decompressed length that disagrees with the header,
trailing bytes, a member over MAX_LOGRECORD_SIZE) is refused with InvalidArgumentError naming the fault, by every
write path, and nothing of the write is stored: readers, recovery and rebuilds never meet a set they cannot decode.
Run on every backend."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from functools import partial

import pytest

import storage
from storage import DLSN, LogRecord
from storage.errors import InvalidArgumentError
from storage.formats.record import CONTROL, RECORD_SET
from storage.formats.recordset import CompressionCodec, RecordSetWriter
from tests.storage.formats._record_sets import BadSet, malformed_record_sets

PREFIX = "record has the RECORD_SET flag but an invalid payload: "
BAD_SETS = malformed_record_sets()


def _refused(call: Callable[[], object], bad: BadSet) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        call()
    text = str(info.value)
    assert text.startswith(PREFIX) and bad.matches(text[len(PREFIX) :]), (bad.id, text)


def _read(dlm: storage.LogManager) -> list[storage.LogRecordWithDLSN]:
    with dlm.open_reader(DLSN.INITIAL) as r:
        return list(r.read_bulk(1000, non_blocking=True))


def _payloads(dlm: storage.LogManager) -> list[bytes]:
    return [x.payload for x in _read(dlm)]


def _set(members: list[bytes], codec: CompressionCodec, txid: int) -> LogRecord:
    w = RecordSetWriter(codec)
    for m in members:
        w.write(m)
    return w.to_record(txid)


def test_malformed_sets_are_refused_by_every_write_path_and_nothing_is_stored(ns: storage.Namespace) -> None:
    with ns.open_log("bad-sets") as dlm:
        w = dlm.open_async_writer()
        members = [b"m-0", b"m-1", b"m-2"]
        futs = [w.write(LogRecord(1, b"first")), w.write(_set(members, CompressionCodec.LZ4, 2))]
        futs += w.write_bulk([_set(members, CompressionCodec.NONE, 3)])
        [f.result(30) for f in futs]
        w.flush().result(30)
        before = [b"first", *members, *members]
        assert _payloads(dlm) == before and dlm.record_count() == 7
        segments = [(s.lssn, s.in_progress) for s in dlm.log_segments()]

        for bad in BAD_SETS:
            record = LogRecord(4, bad.data, flags=RECORD_SET)
            plain = LogRecord(4, b"lost")  # written in the same call before the bad set: not stored either
            _refused(partial(w.write, record), bad)
            _refused(partial(w.write_bulk, [plain, record]), bad)
            _refused(partial(w.write_marked, b"MARK-lost", [plain, record]), bad)

        w.flush().result(30)
        assert dlm.record_count() == 7
        assert _payloads(dlm) == before
        assert [(s.lssn, s.in_progress) for s in dlm.log_segments()] == segments
        assert not [c for s in dlm.log_segments() for c in dlm.control_records(s) if c.payload.startswith(b"MARK")]
        assert w.last_txid == 3

        # The writer goes on: a well-formed set after the refused ones takes the next positions.
        w.write(_set([b"after"], CompressionCodec.LZ4, 4)).result(30)
        w.flush().result(30)
        w.close()
        got = _read(dlm)
        assert [x.payload for x in got] == [*before, b"after"]
        assert [x.sequence_id for x in got] == list(range(8))
        assert dlm.record_count() == 8


def test_segment_writer_checks_sets_it_was_not_told_about(ns: storage.Namespace) -> None:
    """SegmentWriter.write and write_group check a RECORD_SET payload themselves when the caller passes no member
    count (the writer passes the counts it checked): a malformed set raises before anything is buffered."""
    with ns.open_log("bad-sets-segment") as dlm:
        w = dlm.open_async_writer()
        w.write(LogRecord(1, b"first")).result(30)
        seg = w._seg
        assert seg is not None
        for bad in BAD_SETS:
            record = LogRecord(2, bad.data, flags=RECORD_SET)
            _refused(partial(seg.write, record), bad)
            marker = LogRecord(2, b"MARK-lost", flags=CONTROL)
            _refused(partial(seg.write_group, marker, [LogRecord(2, b"lost"), record]), bad)
            assert not seg.has_pending()
        good: Future[DLSN] = seg.write(_set([b"a", b"b"], CompressionCodec.LZ4, 2))
        assert seg.position == 3
        w.flush().result(30)
        good.result(30)
        w.close()
        assert _payloads(dlm) == [b"first", b"a", b"b"]


def test_sync_writer_refuses_a_malformed_set(ns: storage.Namespace) -> None:
    (bad,) = (b for b in BAD_SETS if b.id == "lz4-count-high")
    with ns.open_log("bad-sets-sync") as dlm:
        with dlm.open_writer() as w:
            w.write(LogRecord(1, b"first"))
            _refused(partial(w.write, LogRecord(2, bad.data, flags=RECORD_SET)), bad)
            _refused(partial(w.write_bulk, [LogRecord(2, b"lost"), LogRecord(2, bad.data, flags=RECORD_SET)]), bad)
            w.flush()
        assert _payloads(dlm) == [b"first"]
        assert dlm.record_count() == 1
