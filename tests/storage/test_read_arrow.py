"""``LogManager.read_arrow``: the columnar read path gives exactly the records the object reader gives
(DLSN, txid, sequence id, payload), on every backend: whole logs over several segments (plain and LZ4
entries, control entries, record boundaries of every kind), every start DLSN and txid, exclusive end
DLSNs, ``max_records``, an in-progress segment read to its LAC, end of stream, truncation, and bad
arguments."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import storage
from storage import DLSN, LogRecord
from storage.formats.arrow_records import RECORD_SCHEMA
from tests.storage.test_writer_reader import read_all

Row = tuple[DLSN, int, int, bytes]


def rows_of(batches: object) -> list[Row]:
    out: list[Row] = []
    for b in batches:  # type: ignore[attr-defined]
        assert isinstance(b, pa.RecordBatch) and b.schema.equals(RECORD_SCHEMA)
        b.validate(full=True)
        for d, txid, seq, value in zip(
            b.column("dlsn").to_pylist(),
            b.column("txid").to_pylist(),
            b.column("sequence_id").to_pylist(),
            b.column("value").to_pylist(),
            strict=True,
        ):
            out.append((DLSN(d["lssn"], d["entry_id"], d["slot_id"]), txid, seq, value))
    return out


def reader_rows(dlm: storage.LogManager, start: DLSN | int = DLSN.INITIAL) -> list[Row]:
    return [(r.dlsn, r.txid, r.sequence_id, r.payload) for r in read_all(dlm, start)]


def payload(t: int) -> bytes:
    return b"" if t % 11 == 0 else f"value-{t}-".encode() * (t % 5 + 1)


def write_log(dlm: storage.LogManager, segments: int, per_segment: int, first: int = 1) -> int:
    """Write ``segments`` segments of ``per_segment`` records (several per entry, with flushes, so
    entries of many sizes and control entries); returns the next txid."""
    t = first
    for _ in range(segments):
        with dlm.open_writer() as w:
            for i in range(per_segment):
                w.write(LogRecord(t, payload(t)))
                t += 1
                if i % 7 == 6:
                    w.flush()
    return t


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_whole_log_equals_the_object_reader(ns: storage.Namespace, codec: str) -> None:
    dlm = ns.open_log("whole", {"writerOutputBufferSize": 300, "compressionType": codec})
    write_log(dlm, 3, 60)
    want = reader_rows(dlm)
    assert len(want) == 180 and len({d.lssn for d, *_ in want}) == 3
    assert rows_of(dlm.read_arrow()) == want
    small = list(dlm.read_arrow(batch_rows=7))
    assert len(small) > 3 and rows_of(small) == want  # batches cut at entry boundaries, nothing lost


def test_every_start_end_and_limit(ns: storage.Namespace) -> None:
    dlm = ns.open_log("ranges", {"writerOutputBufferSize": 100})
    write_log(dlm, 2, 40)
    want = reader_rows(dlm)
    dlsns = [d for d, *_ in want]
    rng = random.Random(7)
    for i, d in enumerate(dlsns):
        assert rows_of(dlm.read_arrow(d)) == want[i:]
        assert rows_of(dlm.read_arrow(DLSN.INITIAL, d)) == want[:i]  # the end is exclusive
        j = rng.randrange(i, len(dlsns))
        assert rows_of(dlm.read_arrow(d, dlsns[j])) == want[i:j]
        n = rng.randrange(0, 30)
        assert rows_of(dlm.read_arrow(d, max_records=n)) == want[i : i + n]
    # a DLSN between records (a slot past an entry's last, a control entry) starts at the next record
    for d in dlsns[:20]:
        between = DLSN(d.lssn, d.entry_id, d.slot_id + 1)
        assert rows_of(dlm.read_arrow(between)) == [r for r in want if r[0] >= between]
    assert rows_of(dlm.read_arrow(DLSN(99, 0, 0))) == []
    assert rows_of(dlm.read_arrow(max_records=0)) == []


def test_start_by_txid_equals_the_reader(ns: storage.Namespace) -> None:
    dlm = ns.open_log("txids")
    with dlm.open_writer() as w:
        for t in range(0, 300, 3):
            w.write(LogRecord(t, payload(t)))
    for target in (0, 1, 3, 150, 151, 297, 298):
        assert rows_of(dlm.read_arrow(target)) == reader_rows(dlm, target)
    ns.create_log("empty")
    assert rows_of(ns.open_log("empty").read_arrow(5)) == []


def test_in_progress_segment_is_read_to_what_readers_see(ns: storage.Namespace) -> None:
    dlm = ns.open_log("tail")
    write_log(dlm, 1, 20)
    w = dlm.open_writer()
    try:
        for t in range(100, 130):
            w.write(LogRecord(t, payload(t)))
        w.flush()
        want = reader_rows(dlm)
        assert want[-1][1] == 129 and len(want) == 50
        assert rows_of(dlm.read_arrow()) == want
        assert rows_of(dlm.read_arrow(want[25][0])) == want[25:]
    finally:
        w.close()


def test_end_of_stream_ends_the_batches(ns: storage.Namespace) -> None:
    dlm = ns.open_log("eos")
    with dlm.open_writer() as w:
        for t in range(1, 51):
            w.write(LogRecord(t, payload(t)))
        w.mark_end_of_stream()
    assert rows_of(dlm.read_arrow()) == [(r.dlsn, r.txid, r.sequence_id, r.payload) for r in _until_eos(dlm)]


def _until_eos(dlm: storage.LogManager) -> list[storage.LogRecordWithDLSN]:
    out: list[storage.LogRecordWithDLSN] = []
    with dlm.open_reader(DLSN.INITIAL) as r:
        try:
            while True:
                out.extend(r.read_bulk(100, non_blocking=True))
        except storage.EndOfStreamError:
            return out


def test_truncation(ns: storage.Namespace) -> None:
    dlm = ns.open_log("trunc")
    write_log(dlm, 3, 10)
    want = reader_rows(dlm)
    cut = want[15][0]  # inside segment 2
    with dlm.open_writer() as w:
        assert w.truncate(cut)
    assert rows_of(dlm.read_arrow()) == want[15:]  # from the min active DLSN, as a reader
    for start in (want[3][0], want[14][0], want[15][0], want[20][0]):  # positioned as the reader is
        assert rows_of(dlm.read_arrow(start)) == reader_rows(dlm, start)


def test_bad_arguments_and_missing_log(ns: storage.Namespace) -> None:
    dlm = ns.open_log("args")
    write_log(dlm, 1, 3)
    for kwargs, match in [
        ({"start": -1}, "txid must be >= 0"),
        ({"start": "x"}, "DLSN or an int"),
        ({"end": 5}, "end must be a DLSN"),
        ({"max_records": -1}, "max_records must be >= 0"),
        ({"max_records": 1.5}, "max_records must be an int"),
        ({"batch_rows": 0}, "batch_rows must be an int >= 1"),
    ]:
        with pytest.raises(storage.InvalidArgumentError, match=match):
            dlm.read_arrow(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(storage.LogNotFoundError):
        ns.open_log("missing").read_arrow()
