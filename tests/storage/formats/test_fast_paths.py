"""The hot paths of the formats agree with the general code: in-place decoding of uncompressed
entries, records whose DLSN is built on first use, ``EntryBuilder.add(record, position)``."""

from __future__ import annotations

import copy
import pickle

from hypothesis import given
from hypothesis import strategies as st

from storage.errors import DLError
from storage.formats.dlsn import DLSN
from storage.formats.entry import CompressionCodec, EntryBuilder, decode_entry, unwrap_entry, wrap_entry
from storage.formats.record import LogRecord, LogRecordWithDLSN
from storage.formats.record_reader import read_records
from storage.formats.recordset import RecordSetWriter
from tests.storage.formats._strategies import FUZZ, PROPERTY, mutated
from tests.storage.formats.test_entry import entry_items


def _outcome(fn: object) -> object:
    try:
        recs = fn()  # type: ignore[operator]
    except DLError as exc:
        return type(exc), str(exc)
    return [
        (r.dlsn, r.txid, r.payload, r.flags, r.position_within_segment, r.start_sequence_id_of_segment)
        for r in recs  # type: ignore[attr-defined]
    ]


def _general(data: bytes, deserialize: bool) -> object:
    # skip_to at slot -1 of the entry itself selects every record, through the general loop
    return _outcome(
        lambda: read_records(unwrap_entry(data), 5, 9, 100, deserialize_record_set=deserialize, skip_to=DLSN(5, 9, -1))
    )


def _build(items: list[LogRecord | list[bytes]], codec: CompressionCodec = CompressionCodec.NONE) -> bytes:
    b = EntryBuilder(codec)
    for n, item in enumerate(items):
        if isinstance(item, list):
            w = RecordSetWriter()
            for m in item:
                w.write(m)
            b.add(w.to_record(n), n + 1)
        else:
            b.add(item)
    return b.to_bytes()


@PROPERTY
@given(st.lists(entry_items(), max_size=20), st.booleans())
def test_fast_decode_matches_general_loop(items: list[LogRecord | list[bytes]], deserialize: bool) -> None:
    data = _build(items)
    fast = _outcome(lambda: decode_entry(data, 5, 9, 100, deserialize_record_set=deserialize))
    assert fast == _general(data, deserialize)
    for view in (bytearray(data), memoryview(data)):
        assert _outcome(lambda v=view: decode_entry(v, 5, 9, 100, deserialize_record_set=deserialize)) == fast


@FUZZ
@given(st.data())
def test_fast_decode_matches_general_loop_on_damage(data: st.DataObject) -> None:
    items = data.draw(st.lists(entry_items(), min_size=1, max_size=6))
    damaged = data.draw(mutated(_build(items)))
    deserialize = data.draw(st.booleans())
    fast = _outcome(lambda: decode_entry(damaged, 5, 9, 100, deserialize_record_set=deserialize))
    try:
        unwrap_entry(damaged)
    except DLError:
        assert isinstance(fast, tuple)  # the envelope's own error
        return
    assert fast == _general(damaged, deserialize)


def test_lazy_dlsn_records_behave_like_built_ones() -> None:
    b = EntryBuilder()
    for i in range(3):
        b.add(LogRecord(10 + i, b"p%d" % i), i + 1)
    recs = decode_entry(b.to_bytes(), 2, 7, 50)
    built = [LogRecordWithDLSN(10 + i, b"p%d" % i, DLSN(2, 7, i), 50, position_within_segment=i + 1) for i in range(3)]
    assert recs == built
    assert [r.dlsn for r in recs] == [DLSN(2, 7, 0), DLSN(2, 7, 1), DLSN(2, 7, 2)]
    assert recs[1].dlsn is recs[1].dlsn  # built once
    fresh = decode_entry(b.to_bytes(), 2, 7, 50)
    for r in (*fresh, *built):  # DLSN not built yet / given
        for clone in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
            assert clone == r and clone.dlsn == r.dlsn and type(clone) is LogRecordWithDLSN
    recs[0].dlsn = DLSN(9, 9, 9)
    assert recs[0].dlsn == DLSN(9, 9, 9)
    assert "DLSN(2,7,2)" in repr(recs[2])


def test_add_with_position_serializes_like_with_position() -> None:
    records = [LogRecord(1, b"a"), LogRecord(2, b"bb", flags=0x8, position_within_segment=7)]
    a, b = EntryBuilder(), EntryBuilder()
    for n, r in enumerate(records):
        assert a.add(r, 40 + n) == b.add(r.with_position(40 + n))
    assert a.to_bytes() == b.to_bytes()
    assert records[1].position_within_segment == 7  # the record itself is not changed


def test_wrap_entry_accepts_any_buffer() -> None:
    for payload in (b"abc", bytearray(b"abc"), memoryview(b"xabcx")[1:4]):
        assert wrap_entry(payload) == b"\x01" + (0).to_bytes(4, "big") + (3).to_bytes(4, "big") * 2 + b"abc"
    assert unwrap_entry(wrap_entry(bytearray(b"abc" * 50), CompressionCodec.LZ4)) == b"abc" * 50
    b = EntryBuilder()
    b.add(LogRecord(1, b"x"))
    assert b.to_bytes() == b.to_bytes(CompressionCodec.NONE) == b.to_bytes(0) == wrap_entry(b.payload_bytes())
    b.clear()
    assert b.num_records == 0 and b.num_bytes == 13 and b.to_bytes() == wrap_entry(b"")
