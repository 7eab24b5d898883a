"""Marked writes (``AsyncLogWriter.write_marked``): a control record and user records in ONE entry, durable
together; every reader sees only the user records; ``LogManager.control_records`` reads the marker back (the
write proxy keeps its idempotent producers' state this way). Run on every backend."""

from __future__ import annotations

import pytest

import storage
from storage.errors import InvalidArgumentError, LogRecordTooLongError
from storage.formats.record import MAX_LOGRECORDSET_SIZE


def _records(n: int, txid: int, tag: str) -> list[storage.LogRecord]:
    return [storage.LogRecord(txid, f"{tag}-{i}".encode()) for i in range(n)]


def test_marker_and_records_share_one_entry_and_readers_skip_the_marker(ns: storage.Namespace) -> None:
    with ns.open_log("marked") as dlm:
        w = dlm.open_async_writer()
        before = w.write(storage.LogRecord(1, b"plain")).result(30)
        futs = w.write_marked(b"MARK-A", _records(3, 2, "a"))
        dlsns = [f.result(30) for f in futs]
        after = w.write_bulk(_records(2, 3, "b"))
        tail = [f.result(30) for f in after]
        w.flush().result(30)
        # one entry: the marker in slot 0, the records in slots 1..3
        assert {(d.lssn, d.entry_id) for d in dlsns} == {(dlsns[0].lssn, dlsns[0].entry_id)}
        assert [d.slot_id for d in dlsns] == [1, 2, 3]
        assert dlsns[0].entry_id > before.entry_id
        assert tail[0].entry_id > dlsns[0].entry_id
        w.close()
        payloads = [b"plain", b"a-0", b"a-1", b"a-2", b"b-0", b"b-1"]
        with dlm.open_reader(storage.DLSN.INITIAL) as r:
            got = r.read_bulk(100, non_blocking=True)
        assert [x.payload for x in got] == payloads
        assert [x.sequence_id for x in got] == list(range(6))
        rows = [row for batch in dlm.read_arrow() for row in batch.to_pylist()]
        assert [row["value"] for row in rows] == payloads
        assert dlm.record_count() == 6
        assert dlm.last_txid() == 3
        markers = [c for seg in dlm.log_segments() for c in dlm.control_records(seg) if c.payload.startswith(b"MARK")]
        assert [(m.payload, m.dlsn.entry_id, m.dlsn.slot_id) for m in markers] == [(b"MARK-A", dlsns[0].entry_id, 0)]


def test_marked_write_survives_a_new_owner(ns: storage.Namespace) -> None:
    with ns.open_log("marked-takeover") as dlm:
        w = dlm.open_async_writer()
        [f.result(30) for f in w.write_marked(b"MARK-1", _records(2, 5, "x"))]
        w.abort()  # no commit: the next owner's recovery makes the entry visible
    with storage.open_namespace(ns.uri, ns.conf) as other, other.open_log("marked-takeover") as dlm2:
        w2 = dlm2.open_async_writer()
        markers = [c.payload for seg in dlm2.log_segments() for c in dlm2.control_records(seg)]
        assert b"MARK-1" in markers
        w2.close()
        with dlm2.open_reader(storage.DLSN.INITIAL) as r:
            assert [x.payload for x in r.read_bulk(10, non_blocking=True)] == [b"x-0", b"x-1"]


def test_bad_marked_writes_write_nothing(ns: storage.Namespace) -> None:
    with ns.open_log("marked-bad") as dlm, dlm.open_async_writer() as w:
        with pytest.raises(InvalidArgumentError):
            w.write_marked(b"M", [])
        big = [storage.LogRecord(1, b"z" * 600_000), storage.LogRecord(1, b"z" * 600_000)]
        assert sum(len(r.payload) for r in big) > MAX_LOGRECORDSET_SIZE
        with pytest.raises(LogRecordTooLongError):
            w.write_marked(b"M", big)
        w.write(storage.LogRecord(2, b"ok")).result(30)
        w.flush().result(30)
        with dlm.open_reader(storage.DLSN.INITIAL) as r:
            assert [x.payload for x in r.read_bulk(10, non_blocking=True)] == [b"ok"]
