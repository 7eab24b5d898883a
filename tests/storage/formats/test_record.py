"""LogRecord / LogRecordWithDLSN: DistributedLog's layout and worked example, special records, parsing and fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import CorruptedEntryError, DLError, InvalidArgumentError
from storage.formats.dlsn import DLSN
from storage.formats.record import (
    CONTROL,
    CONTROL_RECORD_CONTENT,
    EMPTY_LOGSEGMENT_TX_ID,
    END_OF_STREAM,
    END_OF_STREAM_CONTENT,
    INVALID_TXID,
    KEEPALIVE_RECORD_CONTENT,
    MAX_LOGRECORD_SIZE,
    MAX_LOGRECORDSET_SIZE,
    MAX_TXID,
    RECORD_SET,
    LogRecord,
    LogRecordWithDLSN,
    encode_record,
    iter_raw_records,
    make_control_record,
    make_end_of_stream_record,
    make_keepalive_record,
    parse_records,
    record_metadata,
    record_set_count,
    serialize_record,
)
from storage.formats.record_reader import read_records
from storage.formats.recordset import RecordSetWriter
from tests.storage.formats._strategies import FUZZ, PROPERTY, int64s, mutated


def test_constants() -> None:
    assert (CONTROL, END_OF_STREAM, RECORD_SET) == (0x1, 0x2, 0x4)
    assert MAX_LOGRECORD_SIZE == 1040384 == 1024 * 1024 - 8 * 1024
    assert MAX_LOGRECORDSET_SIZE == 1044480 == 1024 * 1024 - 4 * 1024
    assert MAX_TXID == 2**63 - 1
    assert INVALID_TXID == -999
    assert EMPTY_LOGSEGMENT_TX_ID == -99
    assert CONTROL_RECORD_CONTENT == b"control"
    assert KEEPALIVE_RECORD_CONTENT == b"keepalive"
    assert END_OF_STREAM_CONTENT == b"endOfStream"


def test_spec_2_2_example() -> None:
    r = LogRecord(1, b"abc", position_within_segment=1)
    expected = bytes.fromhex("0000000000010000 0000000000000001 00000003 616263")
    assert serialize_record(r) == expected
    assert encode_record(1, b"abc", 0, 1) == expected
    assert r.persistent_size == 23 == len(expected)
    assert r.metadata == 0x10000


def test_metadata_long() -> None:
    assert record_metadata(0, 0) == 0
    assert record_metadata(CONTROL, 5) == 0x50001
    assert record_metadata(0xFFFF, 2**31 - 1) == 0x00007FFFFFFFFFFF
    for flags, pos in [(0x10000, 0), (-1, 0), (0, -1), (0, 2**31)]:
        with pytest.raises(InvalidArgumentError):
            record_metadata(flags, pos)


def test_public_constructor() -> None:
    r = LogRecord(5, b"payload")
    assert (r.txid, r.payload, r.flags, r.position_within_segment) == (5, b"payload", 0, 0)
    assert not r.is_control and not r.is_end_of_stream and not r.is_record_set
    assert LogRecord(1, bytearray(b"xy")).payload == b"xy"
    assert type(LogRecord(1, bytearray(b"xy")).payload) is bytes
    assert LogRecord(1, memoryview(b"xyz")[1:]).payload == b"yz"
    assert LogRecord(-3, b"").txid == -3  # the writer, not the record, rejects negative txids


@pytest.mark.parametrize(
    ("txid", "payload"),
    [("1", b"x"), (1.0, b"x"), (None, b"x"), (True, b"x"), (2**63, b"x"), (1, "text"), (1, None), (1, [1, 2])],
)
def test_constructor_rejects(txid: object, payload: object) -> None:
    with pytest.raises(InvalidArgumentError):
        LogRecord(txid, payload)  # type: ignore[arg-type]


def test_constructor_rejects_flags_position() -> None:
    with pytest.raises(InvalidArgumentError):
        LogRecord(1, b"", flags=0x10000)
    with pytest.raises(InvalidArgumentError):
        LogRecord(1, b"", position_within_segment=-1)
    with pytest.raises(InvalidArgumentError):
        LogRecord(1, b"").with_position(2**31)


def test_special_records() -> None:
    c = make_control_record(7, 3)
    assert (c.txid, c.payload, c.flags, c.position_within_segment) == (7, b"control", CONTROL, 3)
    assert c.is_control and not c.is_end_of_stream
    k = make_keepalive_record(8)
    assert (k.txid, k.payload, k.flags) == (8, b"keepalive", CONTROL)
    e = make_end_of_stream_record(4)
    assert (e.txid, e.payload, e.flags, e.position_within_segment) == (MAX_TXID, b"endOfStream", END_OF_STREAM, 4)
    assert e.is_end_of_stream and not e.is_control


def test_with_position_copies() -> None:
    r = LogRecord(1, b"a", flags=CONTROL)
    r2 = r.with_position(9)
    assert r.position_within_segment == 0
    assert (r2.txid, r2.payload, r2.flags, r2.position_within_segment) == (1, b"a", CONTROL, 9)
    assert type(r2) is LogRecord


def test_equality() -> None:
    assert LogRecord(1, b"a") == LogRecord(1, b"a")
    assert LogRecord(1, b"a") != LogRecord(1, b"b")
    assert LogRecord(1, b"a") != LogRecord(1, b"a", flags=CONTROL)
    d = DLSN(1, 0, 0)
    assert LogRecordWithDLSN(1, b"a", d, 5) == LogRecordWithDLSN(1, b"a", d, 5)
    assert LogRecordWithDLSN(1, b"a", d, 5) != LogRecordWithDLSN(1, b"a", DLSN(1, 0, 1), 5)
    assert LogRecordWithDLSN(1, b"a", d) != LogRecord(1, b"a")
    assert "txid=1" in repr(LogRecord(1, b"a"))


def test_record_with_dlsn() -> None:
    r = LogRecordWithDLSN(99, b"x", DLSN(1, 1, 10), 999, position_within_segment=888)
    assert r.sequence_id == 999 + 888 - 1
    assert r.dlsn == DLSN(1, 1, 10)
    assert r.start_sequence_id_of_segment == 999
    with pytest.raises(InvalidArgumentError):
        LogRecordWithDLSN(1, b"", (1, 0, 0))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        LogRecordWithDLSN(1, b"", DLSN(1, 0, 0), "0")  # type: ignore[arg-type]


def test_last_position() -> None:
    w = RecordSetWriter()
    for i in range(4):
        w.write(b"m%d" % i)
    s = LogRecord(1, w.to_bytes(), flags=RECORD_SET, position_within_segment=10)
    assert s.last_position_within_segment == 13
    assert LogRecord(1, b"x", position_within_segment=10).last_position_within_segment == 10
    broken = LogRecord(1, b"junk", flags=RECORD_SET, position_within_segment=10)
    assert broken.last_position_within_segment == 10  # unparseable set falls back to position


def test_record_set_count() -> None:
    w = RecordSetWriter()
    w.write(b"a")
    w.write(b"b")
    assert record_set_count(w.to_bytes()) == 2
    with pytest.raises(CorruptedEntryError):
        record_set_count(b"\x00\x00\x10")
    with pytest.raises(CorruptedEntryError):
        record_set_count(struct.pack(">ii", 0x2000, 1))
    with pytest.raises(CorruptedEntryError):
        record_set_count(struct.pack(">ii", 0x1000, -1))


def test_parse_records_and_errors() -> None:
    buf = encode_record(1, b"a", CONTROL, 3) + encode_record(2, b"", 0, 4)
    recs = parse_records(buf)
    assert [(r.txid, r.payload, r.flags, r.position_within_segment) for r in recs] == [
        (1, b"a", CONTROL, 3),
        (2, b"", 0, 4),
    ]
    assert list(iter_raw_records(b"")) == []
    with pytest.raises(CorruptedEntryError, match="truncated"):
        parse_records(buf[:-1])
    with pytest.raises(CorruptedEntryError, match="truncated"):
        parse_records(buf + b"\x00" * 19)
    with pytest.raises(CorruptedEntryError, match="negative"):
        parse_records(struct.pack(">qqi", 0, 1, -1))
    with pytest.raises(InvalidArgumentError):
        parse_records("not bytes")  # type: ignore[arg-type]


def test_parse_keeps_java_int_position() -> None:
    # bit 47 set: Java casts the 32-bit position to a (negative) int; unused high bits are ignored
    metadata = (0xFFFFFFFF << 16) | CONTROL | (0xABCD << 48)
    buf = struct.pack(">qqi", metadata - (1 << 64), 5, 0)
    (r,) = parse_records(buf)
    assert r.position_within_segment == -1
    assert r.flags == CONTROL


def test_read_records_dlsns_and_sequence_ids() -> None:
    buf = b"".join(encode_record(i, b"r%d" % i, 0, i + 1) for i in range(3))
    recs = read_records(buf, 4, 7, 100)
    assert [r.dlsn for r in recs] == [DLSN(4, 7, 0), DLSN(4, 7, 1), DLSN(4, 7, 2)]
    assert [r.sequence_id for r in recs] == [100, 101, 102]


def test_read_records_skip_to_other_entries() -> None:
    buf = b"".join(encode_record(i, b"", 0, i) for i in range(3))
    assert len(read_records(buf, 1, 5, 0, skip_to=DLSN(1, 4, 9))) == 3  # target before this entry
    assert read_records(buf, 1, 5, 0, skip_to=DLSN(1, 6, 0)) == []  # target after it
    assert read_records(buf, 1, 5, 0, skip_to=DLSN(2, 0, 0)) == []
    assert len(read_records(buf, 1, 5, 0, skip_to=DLSN(1, 5, -1))) == 3
    assert [r.txid for r in read_records(buf, 1, 5, 0, skip_to=DLSN(1, 5, 1))] == [1, 2]
    with pytest.raises(InvalidArgumentError):
        read_records(buf, 1, 5, 0, skip_to=DLSN(1, 5, 1), skip_to_txid=3)


def test_read_records_skip_to_txid() -> None:
    buf = (
        encode_record(1, b"a", 0, 1)
        + encode_record(5, b"control", CONTROL, 1)
        + encode_record(5, b"b", 0, 2)
        + encode_record(3, b"c", 0, 3)
    )
    recs = read_records(buf, 1, 0, 0, skip_to_txid=5)
    assert [(r.txid, r.payload, r.dlsn.slot_id) for r in recs] == [(5, b"b", 2), (3, b"c", 3)]
    recs = read_records(buf, 1, 0, 0, skip_to_txid=5, skip_control=False)
    assert [r.payload for r in recs] == [b"control", b"b", b"c"]
    assert read_records(buf, 1, 0, 0, skip_to_txid=6) == []


# --- properties and fuzzing ------------------------------------------------------------------------------
records = st.builds(
    LogRecord,
    int64s,
    st.binary(max_size=64),
    flags=st.integers(0, 0xFFFF).filter(lambda f: not f & RECORD_SET),
    position_within_segment=st.integers(0, 2**31 - 1),
)


@PROPERTY
@given(st.lists(records, max_size=20))
def test_serialize_parse_round_trip(recs: list[LogRecord]) -> None:
    buf = b"".join(serialize_record(r) for r in recs)
    assert parse_records(buf) == recs
    assert sum(r.persistent_size for r in recs) == len(buf)


def _value_or_dlerror(fn: object, *args: object) -> object:
    try:
        return fn(*args)  # type: ignore[operator]
    except DLError:
        return None


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_parse_records(data: bytes) -> None:
    out = _value_or_dlerror(parse_records, data)
    assert out is None or isinstance(out, list)


@FUZZ
@given(st.binary(max_size=200), st.booleans())
def test_fuzz_read_records(data: bytes, deserialize: bool) -> None:
    out = _value_or_dlerror(lambda: read_records(data, 1, 0, 0, deserialize_record_set=deserialize))
    assert out is None or isinstance(out, list)


@FUZZ
@given(st.data())
def test_fuzz_read_records_damaged(data: st.DataObject) -> None:
    recs = data.draw(st.lists(records, min_size=1, max_size=5))
    w = RecordSetWriter()
    for m in data.draw(st.lists(st.binary(max_size=8), max_size=4)):
        w.write(m)
    recs.append(LogRecord(1, w.to_bytes(), flags=RECORD_SET))
    buf = data.draw(mutated(b"".join(serialize_record(r) for r in recs)))
    skip = data.draw(st.one_of(st.none(), st.builds(DLSN, st.just(1), st.integers(-1, 1), st.integers(-1, 12))))
    for deserialize in (True, False):
        out = _value_or_dlerror(
            lambda d=deserialize: read_records(buf, 1, 0, 0, deserialize_record_set=d, skip_to=skip)  # type: ignore[misc]
        )
        assert out is None or isinstance(out, list)


def test_read_records_argument_checks() -> None:
    buf = encode_record(1, b"a")
    with pytest.raises(InvalidArgumentError):
        read_records(buf, "1", 0, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        read_records(buf, 1, 0, 0, skip_to=(1, 0, 0))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        read_records(buf, 1, 0, 0, skip_to_txid=1.5)  # type: ignore[arg-type]
