"""Entries: DistributedLog's envelope, the vectors of its TestEntry / TestEnvelopedEntry, the column decoder, and
fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import (
    CorruptedEntryError,
    DLError,
    InvalidArgumentError,
    InvalidEnvelopedEntryError,
    LogRecordTooLongError,
)
from storage.formats.dlsn import DLSN
from storage.formats.entry import (
    HEADER_LENGTH,
    CompressionCodec,
    EntryBuilder,
    EntryColumns,
    codec_from_name,
    decode_entry,
    decode_entry_columns,
    unwrap_entry,
    wrap_entry,
)
from storage.formats.record import (
    CONTROL,
    END_OF_STREAM,
    MAX_LOGRECORD_SIZE,
    RECORD_SET,
    LogRecord,
    LogRecordWithDLSN,
    encode_record,
    make_control_record,
    make_end_of_stream_record,
    serialize_record,
)
from storage.formats.recordset import RecordSetWriter
from tests.storage.formats._strategies import FUZZ, PROPERTY, int64s, mutated

CODECS = [CompressionCodec.NONE, CompressionCodec.LZ4]


def test_codec_helpers_exported() -> None:
    assert codec_from_name("lz4") is CompressionCodec.LZ4
    assert codec_from_name("zstd") is CompressionCodec.UNKNOWN


# --- the envelope ----------------------------------------------------------------------------------------------------
def test_spec_3_1_example() -> None:
    record = LogRecord(1, b"abc", position_within_segment=1)
    b = EntryBuilder()
    assert b.add(record) == 0
    data = b.to_bytes()
    rec_bytes = serialize_record(record)
    assert len(rec_bytes) == 23
    assert data == bytes.fromhex("01 00000000 00000017 00000017") + rec_bytes
    assert len(data) == 36
    assert b.num_bytes == 36
    (r,) = decode_entry(data, 1, 0, 0)
    assert (r.txid, r.payload, r.dlsn, r.position_within_segment) == (1, b"abc", DLSN(1, 0, 0), 1)


def test_lz4_envelope_layout() -> None:
    b = EntryBuilder(CompressionCodec.LZ4)
    b.add(LogRecord(1, b"A" * 1000))
    data = b.to_bytes()
    version, flags, original, stored = struct.unpack_from(">Biii", data)
    assert (version, flags, original) == (1, 1, 1020)
    assert stored == len(data) - 13 < 1020
    assert unwrap_entry(data) == encode_record(1, b"A" * 1000)


# --- DistributedLog's TestEntry ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_empty_entry(codec: CompressionCodec) -> None:
    b = EntryBuilder(codec)
    assert b.num_bytes == HEADER_LENGTH == 13
    assert b.num_records == 0 and b.num_slots == 0 and b.is_empty
    assert not b.has_user_records
    data = b.to_bytes()
    assert data == bytes.fromhex("01 00000000 00000000 00000000")  # LZ4 cannot compress nothing: codec none
    assert decode_entry(data, 1, 0, 0) == []
    assert decode_entry_columns(data) == EntryColumns([], [], [], [], [])


@pytest.mark.parametrize("codec", CODECS)
def test_too_long_record_leaves_buffer_unchanged(codec: CompressionCodec) -> None:
    b = EntryBuilder(codec)
    with pytest.raises(LogRecordTooLongError):
        b.add(LogRecord(1, bytes(MAX_LOGRECORD_SIZE - 20 + 1)))
    assert b.num_bytes == 13 and b.num_records == 0
    assert b.add(LogRecord(1, bytes(MAX_LOGRECORD_SIZE - 20))) == 0  # exactly the limit is fine
    assert b.num_bytes == 13 + MAX_LOGRECORD_SIZE


@pytest.mark.parametrize("codec", CODECS)
def test_ten_records(codec: CompressionCodec) -> None:
    b = EntryBuilder(codec)
    slots = [b.add(LogRecord(i, b"record-%d" % i, position_within_segment=i)) for i in range(10)]
    assert slots == list(range(10))
    assert b.num_records == b.num_slots == 10
    assert b.last_slot == 9
    assert b.max_txid == 9
    assert b.has_user_records
    # read back with entry id 0 (the writer would have used 1): DLSNs come from the reader's arguments
    recs = decode_entry(b.to_bytes(), 1, 0, 1)
    assert [r.dlsn for r in recs] == [DLSN(1, 0, i) for i in range(10)]
    assert [r.txid for r in recs] == list(range(10))
    assert [r.sequence_id for r in recs] == list(range(10))


def _mixed_entry(codec: CompressionCodec) -> tuple[bytes, list[int]]:
    """5 plain records, a set of 5 ("record-5..9", txid 5, position 5), 5 plain records (txid 10..14)."""
    b = EntryBuilder(codec)
    slots = [b.add(LogRecord(i, b"record-%d" % i, position_within_segment=i)) for i in range(5)]
    w = RecordSetWriter(codec)
    for i in range(5, 10):
        w.write(b"record-%d" % i)
    slots.append(b.add(w.to_record(5).with_position(5)))
    slots += [b.add(LogRecord(i, b"record-%d" % i, position_within_segment=i)) for i in range(10, 15)]
    assert b.num_records == 11
    assert b.num_slots == 15
    assert b.last_slot == 14
    return b.to_bytes(), slots


@pytest.mark.parametrize("codec", CODECS)
def test_record_set_in_entry(codec: CompressionCodec) -> None:
    data, slots = _mixed_entry(codec)
    assert slots == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14]
    recs = decode_entry(data, 1, 1, 0)
    assert [r.dlsn for r in recs] == [DLSN(1, 1, i) for i in range(15)]
    assert [r.txid for r in recs] == [0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 10, 11, 12, 13, 14]
    assert [r.payload for r in recs] == [b"record-%d" % i for i in range(15)]
    assert [r.position_within_segment for r in recs] == list(range(15))

    whole = decode_entry(data, 1, 1, 0, deserialize_record_set=False)
    assert len(whole) == 11
    assert whole[5].dlsn == DLSN(1, 1, 5) and whole[5].txid == 5 and whole[5].is_record_set
    assert whole[5].last_position_within_segment == 9
    assert [r.dlsn.slot_id for r in whole] == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("deserialize", [True, False])
def test_skip_to(codec: CompressionCodec, deserialize: bool) -> None:
    data, _ = _mixed_entry(codec)

    def read(slot: int) -> list[tuple[int, int, bytes]]:
        recs = decode_entry(data, 1, 1, 0, skip_to=DLSN(1, 1, slot), deserialize_record_set=deserialize)
        return [(r.dlsn.slot_id, r.txid, r.payload) for r in recs]

    got = read(2)
    assert got[:3] == [(2, 2, b"record-2"), (3, 3, b"record-3"), (4, 4, b"record-4")]
    if deserialize:
        assert got[3:8] == [(i, 5, b"record-%d" % i) for i in range(5, 10)]
        assert len(got) == 13
    else:
        assert got[3][:2] == (5, 5) and len(got) == 9  # the set comes back whole
    assert got[-5:] == [(i, i, b"record-%d" % i) for i in range(10, 15)]

    # lands inside the set: the remaining members are returned one by one, even without deserialization
    got = read(7)
    assert got == [(i, 5, b"record-%d" % i) for i in range(7, 10)] + [(i, i, b"record-%d" % i) for i in range(10, 15)]

    got = read(12)
    assert got == [(i, i, b"record-%d" % i) for i in range(12, 15)]
    assert read(15) == []


@pytest.mark.parametrize("codec", CODECS)
def test_columns_match_objects(codec: CompressionCodec) -> None:
    data, _ = _mixed_entry(codec)
    for deserialize in (True, False):
        for min_slot in range(0, 16):
            recs = decode_entry(data, 1, 1, 0, skip_to=DLSN(1, 1, min_slot), deserialize_record_set=deserialize)
            cols = decode_entry_columns(data, deserialize_record_set=deserialize, min_slot=min_slot)
            assert cols.txids == [r.txid for r in recs]
            assert cols.payloads == [r.payload for r in recs]
            assert cols.slots == [r.dlsn.slot_id for r in recs]
            assert cols.positions == [r.position_within_segment for r in recs]
            assert cols.flags == [r.flags for r in recs]


def test_columns_include_control() -> None:
    b = EntryBuilder()
    b.add(LogRecord(1, b"a", position_within_segment=1))
    b.add(make_control_record(1, 1))
    b.add(make_end_of_stream_record(1))
    data = b.to_bytes()
    assert decode_entry_columns(data).flags == [0, CONTROL, END_OF_STREAM]
    cols = decode_entry_columns(data, include_control=False)
    assert cols.flags == [0, END_OF_STREAM]
    assert cols.slots == [0, 2]


def test_builder_tracks_user_records_and_txids() -> None:
    b = EntryBuilder()
    b.add(make_control_record(3))
    assert not b.has_user_records
    assert b.max_txid == 3
    b.add(LogRecord(2, b"x"))
    assert b.has_user_records
    assert b.max_txid == 3
    b.add(make_end_of_stream_record())
    assert b.max_txid == 2**63 - 1


def test_builder_rejects_bad_records() -> None:
    b = EntryBuilder()
    with pytest.raises(InvalidArgumentError):
        b.add(b"raw")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        b.add(LogRecord(1, b"not a set", flags=RECORD_SET))
    r = LogRecord(1, b"x")
    r.txid = 2**64  # mutated after construction
    with pytest.raises(InvalidArgumentError):
        b.add(r)
    assert b.num_bytes == 13 and b.num_records == 0
    with pytest.raises(InvalidArgumentError):
        EntryBuilder(5)
    with pytest.raises(InvalidArgumentError):
        EntryBuilder(CompressionCodec.UNKNOWN)
    with pytest.raises(InvalidArgumentError):
        EntryBuilder().to_bytes(9)


def test_unenveloped_entries() -> None:
    b = EntryBuilder(envelope=False)
    assert b.num_bytes == 0
    b.add(LogRecord(1, b"abc", position_within_segment=1))
    assert b.num_bytes == 23
    data = b.to_bytes()
    assert data == encode_record(1, b"abc", 0, 1) == b.payload_bytes()
    (r,) = decode_entry(data, 2, 3, 0, envelope=False)
    assert r.dlsn == DLSN(2, 3, 0)
    with pytest.raises(InvalidEnvelopedEntryError):
        decode_entry(data, 2, 3, 0)  # not an envelope


def test_wrap_unwrap() -> None:
    payload = encode_record(1, b"x" * 100)
    for codec in CODECS:
        assert unwrap_entry(wrap_entry(payload, codec)) == payload
    with pytest.raises(InvalidArgumentError):
        wrap_entry(b"", 9)
    assert wrap_entry(b"", CompressionCodec.LZ4) == bytes.fromhex("01 00000000 00000000 00000000")


# --- malformed entries -------------------------------------------------------------------------------------------
_REC = encode_record(1, b"abc")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x01\x00\x00",
        b"\x00" + struct.pack(">iii", 0, 0, 0),  # version 0
        b"\x02" + struct.pack(">iii", 0, 0, 0),  # version 2
        b"\x01" + struct.pack(">iii", 0, -1, -1),  # negative lengths
        b"\x01" + struct.pack(">iii", 0, 23, 22) + _REC,  # codec none, inconsistent lengths
        b"\x01" + struct.pack(">iii", 0, 23, 23) + _REC[:-1],  # short payload
        b"\x01" + struct.pack(">iii", 0, 23, 23) + _REC + b"\x00",  # trailing byte
        b"\x01" + struct.pack(">iii", 1, 50, 3) + b"\xff\xff\xff",  # bad LZ4
        b"\x01" + struct.pack(">iii", 1, 2**31 - 1, 1) + b"\x00",  # absurd decompressed size
        b"\x01" + struct.pack(">iii", 2, 0, 0),  # unknown codec
    ],
)
def test_malformed_envelopes(data: bytes) -> None:
    with pytest.raises(InvalidEnvelopedEntryError):
        decode_entry(data, 1, 0, 0)
    with pytest.raises(InvalidEnvelopedEntryError):
        decode_entry_columns(data)


@pytest.mark.parametrize(
    "payload",
    [
        _REC[:-1],  # truncated record
        _REC + b"\x00" * 10,  # truncated header
        struct.pack(">qqi", 0, 1, -5),  # negative length
        struct.pack(">qqi", RECORD_SET, 1, 4) + b"\x00\x00\x00\x00",  # bad record set
    ],
)
def test_malformed_payloads(payload: bytes) -> None:
    data = wrap_entry(payload)
    for deserialize in (True, False):
        with pytest.raises(CorruptedEntryError):
            decode_entry(data, 1, 0, 0, deserialize_record_set=deserialize)
        with pytest.raises(CorruptedEntryError):
            decode_entry_columns(data, deserialize_record_set=deserialize)


def test_envelope_flags_other_bits_ignored() -> None:
    data = b"\x01" + struct.pack(">iii", 0x100, 23, 23) + _REC
    assert decode_entry(data, 1, 0, 0)[0].payload == b"abc"


def test_decoders_reject_non_bytes() -> None:
    with pytest.raises(InvalidArgumentError):
        decode_entry("text", 1, 0, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        decode_entry_columns(12)  # type: ignore[arg-type]


# --- properties -----------------------------------------------------------------------------------------------
plain_records = st.builds(
    LogRecord,
    int64s,
    st.binary(max_size=48),
    flags=st.sampled_from([0, CONTROL, END_OF_STREAM, 0x8, 0x100]),
    position_within_segment=st.integers(0, 2**31 - 1),
)


@st.composite
def entry_items(draw: st.DrawFn) -> LogRecord | list[bytes]:
    """A plain record or the members of a record set."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.lists(st.binary(max_size=16), max_size=6))
    return draw(plain_records)


@PROPERTY
@given(st.lists(entry_items(), max_size=25), st.sampled_from(CODECS), st.sampled_from(CODECS), int64s)
def test_entry_round_trip(
    items: list[LogRecord | list[bytes]], codec: CompressionCodec, set_codec: CompressionCodec, start_seq: int
) -> None:
    b = EntryBuilder(codec)
    expected: list[tuple[int, int, bytes, int, int]] = []  # slot, txid, payload, flags, position
    whole: list[tuple[int, int, int]] = []  # slot, txid, flags
    total_slots = 0
    for n, item in enumerate(items):
        if isinstance(item, list):
            w = RecordSetWriter(set_codec)
            for m in item:
                w.write(m)
            rec = w.to_record(n).with_position(n)
            slot = b.add(rec)
            expected += [(slot + i, n, m, 0, n + i) for i, m in enumerate(item)]
            whole.append((slot, n, rec.flags))
            total_slots += len(item)
        else:
            slot = b.add(item)
            expected.append((slot, item.txid, item.payload, item.flags, item.position_within_segment))
            whole.append((slot, item.txid, item.flags))
            total_slots += 1
        assert slot == whole[-1][0]
    assert b.num_records == len(items)
    assert b.num_slots == total_slots
    data = b.to_bytes()
    recs = decode_entry(data, 3, 4, start_seq)
    assert [(r.dlsn.slot_id, r.txid, r.payload, r.flags, r.position_within_segment) for r in recs] == expected
    assert all(r.dlsn.lssn == 3 and r.dlsn.entry_id == 4 for r in recs)
    assert all(isinstance(r, LogRecordWithDLSN) and r.start_sequence_id_of_segment == start_seq for r in recs)
    cols = decode_entry_columns(data)
    assert list(zip(cols.slots, cols.txids, cols.payloads, cols.flags, cols.positions, strict=True)) == expected
    recs = decode_entry(data, 3, 4, start_seq, deserialize_record_set=False)
    assert [(r.dlsn.slot_id, r.txid, r.flags) for r in recs] == whole


# --- fuzzing ----------------------------------------------------------------------------------------------------
def _check(data: bytes, **kwargs: object) -> None:
    try:
        recs = decode_entry(data, 1, 2, 3, **kwargs)  # type: ignore[arg-type]
    except DLError:
        pass
    else:
        assert all(isinstance(r, LogRecordWithDLSN) for r in recs)
    col_kwargs = {k: v for k, v in kwargs.items() if k in ("envelope", "deserialize_record_set")}
    try:
        cols = decode_entry_columns(data, **col_kwargs)  # type: ignore[arg-type]
    except DLError:
        pass
    else:
        assert len(cols.txids) == len(cols.payloads) == len(cols.slots) == len(cols.positions) == len(cols.flags)


@FUZZ
@given(st.binary(max_size=200), st.booleans(), st.booleans())
def test_fuzz_arbitrary_bytes(data: bytes, envelope: bool, deserialize: bool) -> None:
    _check(data, envelope=envelope, deserialize_record_set=deserialize)


@FUZZ
@given(st.binary(max_size=150), st.integers(0, 3), st.integers(-2, 300), st.booleans())
def test_fuzz_plausible_envelope(body: bytes, codec: int, delta: int, deserialize: bool) -> None:
    original = len(body) if codec == 0 else max(0, len(body) + delta)
    data = b"\x01" + struct.pack(">iii", codec, original, len(body)) + body
    _check(data, deserialize_record_set=deserialize)


@FUZZ
@given(st.data())
def test_fuzz_damaged_entries(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from(CODECS))
    b = EntryBuilder(codec)
    for item in data.draw(st.lists(entry_items(), min_size=1, max_size=6)):
        if isinstance(item, list):
            w = RecordSetWriter(data.draw(st.sampled_from(CODECS)))
            for m in item:
                w.write(m)
            b.add(w.to_record(1))
        else:
            b.add(item)
    damaged = data.draw(mutated(b.to_bytes()))
    skip = data.draw(st.one_of(st.none(), st.builds(DLSN, st.just(1), st.integers(1, 3), st.integers(-1, 20))))
    deserialize = data.draw(st.booleans())
    _check(damaged, deserialize_record_set=deserialize, skip_to=skip)


@FUZZ
@given(st.data())
def test_fuzz_damaged_payloads_unenveloped(data: st.DataObject) -> None:
    b = EntryBuilder(envelope=False)
    for item in data.draw(st.lists(entry_items(), min_size=1, max_size=6)):
        if isinstance(item, list):
            w = RecordSetWriter()
            for m in item:
                w.write(m)
            b.add(w.to_record(1))
        else:
            b.add(item)
    _check(data.draw(mutated(b.to_bytes())), envelope=False, deserialize_record_set=data.draw(st.booleans()))
