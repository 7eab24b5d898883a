"""LogRecordSet: DistributedLog's layout, the vectors of its TestLogRecordSet, the codecs, and fuzzing of the set
reader."""

from __future__ import annotations

import os
import struct

import lz4.block
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import CorruptedEntryError, DLError, InvalidArgumentError, LogRecordTooLongError
from storage.formats.dlsn import DLSN
from storage.formats.record import MAX_LOGRECORD_SIZE, RECORD_SET, LogRecordWithDLSN, record_set_count
from storage.formats.recordset import (
    HEADER_LEN,
    CompressionCodec,
    RecordSetWriter,
    codec_from_name,
    compress,
    decode_record_set,
    decompress,
    encode_record_set,
    expand_record_set,
    member_dlsns,
    validate_record_set,
)
from tests.storage.formats._record_sets import BadSet, malformed_record_sets
from tests.storage.formats._strategies import FUZZ, PROPERTY, mutated

CODECS = [CompressionCodec.NONE, CompressionCodec.LZ4]


def _set_record(payload: bytes, dlsn: DLSN, txid: int, position: int, start_seq: int) -> LogRecordWithDLSN:
    return LogRecordWithDLSN(txid, payload, dlsn, start_seq, flags=RECORD_SET, position_within_segment=position)


# --- TestLogRecordSet -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_empty_set(codec: CompressionCodec) -> None:
    w = RecordSetWriter(codec)
    assert w.num_bytes == HEADER_LEN == 16
    assert w.num_records == 0
    data = w.to_bytes()
    assert len(data) == 16
    assert data == struct.pack(">iiii", 0x1000, 0, 0, 0)  # empty sets are always written uncompressed
    assert expand_record_set(_set_record(data, DLSN(1, 0, 0), 1, 1, 1)) == []


@pytest.mark.parametrize("codec", CODECS)
def test_too_long_member_leaves_writer_unchanged(codec: CompressionCodec) -> None:
    w = RecordSetWriter(codec)
    with pytest.raises(LogRecordTooLongError):
        w.write(bytes(MAX_LOGRECORD_SIZE + 1))
    assert w.num_bytes == 16 and w.num_records == 0
    assert len(w.to_bytes()) == 16
    w.write(bytes(MAX_LOGRECORD_SIZE))  # exactly the limit is fine
    assert w.num_records == 1


@pytest.mark.parametrize("codec", CODECS)
def test_write_and_read_members(codec: CompressionCodec) -> None:
    w = RecordSetWriter(codec)
    expected_bytes = 16
    for i in range(5):
        w.write(f"record-{i}".encode())
        expected_bytes += 4 + len(f"record-{i}")
    with pytest.raises(LogRecordTooLongError):
        w.write(bytes(MAX_LOGRECORD_SIZE + 1))
    for i in range(5, 10):
        w.write(f"record-{i}".encode())
        expected_bytes += 4 + len(f"record-{i}")
    assert w.num_records == 10
    assert w.num_bytes == expected_bytes
    data = w.to_bytes()
    metadata, count, original, stored = struct.unpack_from(">iiii", data)
    assert metadata == 0x1000 | int(codec)
    assert count == 10
    assert original == expected_bytes - 16
    assert stored == len(data) - 16
    if codec is CompressionCodec.NONE:
        assert original == stored

    members = expand_record_set(_set_record(data, DLSN(1, 1, 10), 99, 888, 999))
    assert len(members) == 10
    for i, m in enumerate(members):
        assert m.dlsn == DLSN(1, 1, 10 + i)
        assert m.txid == 99
        assert m.position_within_segment == 888 + i
        assert m.sequence_id == 999 + 888 + i - 1
        assert m.payload == f"record-{i}".encode()
        assert m.flags == 0
    assert decode_record_set(data) == [f"record-{i}".encode() for i in range(10)]


def test_uncompressed_layout_exact() -> None:
    w = RecordSetWriter()
    w.write(b"ab")
    w.write(b"")
    assert w.to_bytes() == bytes.fromhex("00001000 00000002 0000000a 0000000a 00000002 6162 00000000")


def test_to_record() -> None:
    w = RecordSetWriter(CompressionCodec.LZ4)
    w.write(b"x" * 100)
    r = w.to_record(42)
    assert r.txid == 42 and r.is_record_set and r.payload == w.to_bytes()


def test_writer_rejects() -> None:
    with pytest.raises(InvalidArgumentError):
        RecordSetWriter(7)
    with pytest.raises(InvalidArgumentError):
        RecordSetWriter(CompressionCodec.UNKNOWN)
    w = RecordSetWriter()
    with pytest.raises(InvalidArgumentError):
        w.write("text")  # type: ignore[arg-type]
    assert w.num_records == 0


def test_expand_rejects_non_set() -> None:
    with pytest.raises(InvalidArgumentError):
        expand_record_set(LogRecordWithDLSN(1, b"x", DLSN(1, 0, 0)))


# --- codecs ----------------------------------------------------------------------------------------------
def test_codec_from_name() -> None:
    assert codec_from_name("none") is CompressionCodec.NONE
    assert codec_from_name("lz4") is CompressionCodec.LZ4
    assert codec_from_name("unknown") is CompressionCodec.UNKNOWN
    assert codec_from_name("LZ4") is CompressionCodec.UNKNOWN  # exact match, as stringToType
    assert (int(CompressionCodec.NONE), int(CompressionCodec.LZ4), int(CompressionCodec.UNKNOWN)) == (0, 1, -1)


@pytest.mark.parametrize("codec", CODECS)
def test_codec_round_trip(codec: CompressionCodec) -> None:
    data = b"identity-compression-codec"
    packed = compress(data, codec)
    assert decompress(packed, codec, len(data)) == data
    entries = b"".join(struct.pack(">i", len(b"record-%d" % i)) + b"record-%d" % i for i in range(100))
    assert decompress(compress(entries, codec), codec, len(entries)) == entries


def test_lz4_is_raw_block() -> None:
    data = b"A" * 1000
    packed = compress(data, CompressionCodec.LZ4)
    assert len(packed) < len(data)
    assert lz4.block.decompress(packed, uncompressed_size=1000) == data  # no stored size prefix


def test_decompress_errors() -> None:
    packed = compress(b"A" * 1000, CompressionCodec.LZ4)
    with pytest.raises(CorruptedEntryError):
        decompress(packed, CompressionCodec.LZ4, 999)
    with pytest.raises(CorruptedEntryError):
        decompress(packed, CompressionCodec.LZ4, 1001)
    with pytest.raises(CorruptedEntryError, match="implausible"):
        decompress(b"\x00", CompressionCodec.LZ4, 2**31 - 1)
    with pytest.raises(CorruptedEntryError):
        decompress(b"\xff\xff\xff", CompressionCodec.LZ4, 10)
    with pytest.raises(CorruptedEntryError):
        decompress(b"abc", CompressionCodec.NONE, 4)
    with pytest.raises(CorruptedEntryError):
        decompress(b"abc", 2, 3)
    assert decompress(b"\x00", CompressionCodec.LZ4, 0) == b""
    with pytest.raises(InvalidArgumentError):
        compress(b"", CompressionCodec.LZ4)


# --- malformed sets -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x00\x10\x00",
        struct.pack(">iiii", 0x2000, 0, 0, 0),  # bad version
        struct.pack(">iiii", 0x1000, -1, 0, 0),  # negative count
        struct.pack(">iiii", 0x1000, 0, -1, -1),
        struct.pack(">iiii", 0x1000, 1, 0, 0),  # member missing
        struct.pack(">iiii", 0x1000, 0, 4, 4),  # data missing
        struct.pack(">iiii", 0x1000, 0, 0, 0) + b"x",  # trailing byte
        struct.pack(">iiii", 0x1000, 1, 5, 5) + struct.pack(">i", 2) + b"x",  # member overruns
        struct.pack(">iiii", 0x1000, 1, 4, 4) + struct.pack(">i", -1),  # negative member length
        struct.pack(">iiii", 0x1000, 0, 4, 4) + struct.pack(">i", 0),  # trailing member data
        struct.pack(">iiii", 0x1000, 0, 3, 4) + b"abcd",  # codec none with unequal lengths
        struct.pack(">iiii", 0x1001, 1, 100, 3) + b"\xff\xff\xff",  # bad LZ4
        struct.pack(">iiii", 0x1002, 0, 0, 0),  # unknown codec
        struct.pack(">iiii", 0x1000, 2**31 - 1, 4, 4) + struct.pack(">i", 0),  # absurd count
    ],
)
def test_malformed_sets(data: bytes) -> None:
    with pytest.raises(CorruptedEntryError):
        decode_record_set(data)
    with pytest.raises(CorruptedEntryError):
        expand_record_set(_set_record(data, DLSN(1, 0, 0), 1, 1, 0))


# --- validate_record_set: the whole set checked before it is stored --------------------------------------------
BAD_SETS = malformed_record_sets()


@pytest.mark.parametrize("bad", BAD_SETS, ids=[b.id for b in BAD_SETS])
def test_validate_names_the_one_fault(bad: BadSet) -> None:
    """Each malformation is refused with CorruptedEntryError (not a subclass) and its own message; a reader refuses
    the same set with the same message, except a member over MAX_LOGRECORD_SIZE (readers decode what is stored)."""
    with pytest.raises(CorruptedEntryError) as info:
        validate_record_set(bad.data)
    assert type(info.value) is CorruptedEntryError
    assert bad.matches(str(info.value)), str(info.value)
    if bad.readable:
        assert len(decode_record_set(bad.data)) == record_set_count(bad.data)
    else:
        with pytest.raises(CorruptedEntryError) as decoded:
            decode_record_set(bad.data)
        assert str(decoded.value) == str(info.value)


@pytest.mark.parametrize("codec", CODECS)
def test_validate_accepts_well_formed_sets(codec: CompressionCodec) -> None:
    members = [b"", os.urandom(1024), bytes(5000), b"x"]
    if codec is CompressionCodec.LZ4:
        members.append(bytes(MAX_LOGRECORD_SIZE))  # exactly the limit is fine
    w = RecordSetWriter(codec)
    for m in members:
        w.write(m)
    data = w.to_bytes()
    for form in (data, bytearray(data), memoryview(data)):
        assert validate_record_set(form) == len(members)
    assert validate_record_set(RecordSetWriter(codec).to_bytes()) == 0  # the empty set
    assert validate_record_set(encode_record_set(members)) == len(members)
    assert validate_record_set(memoryview(b"pad" + data)[3:]) == len(members)  # a view into a larger buffer


def _validate_agrees_with_decode(data: bytes) -> None:
    """validate_record_set returns len(decode_record_set(data)) or raises CorruptedEntryError (never another
    exception), and it refuses what a reader refuses, with the reader's message."""
    try:
        count = validate_record_set(data)
    except CorruptedEntryError as e:
        if "over MAX_LOGRECORD_SIZE" in str(e):
            assert len(decode_record_set(data)) == record_set_count(data)
        else:
            with pytest.raises(CorruptedEntryError) as decoded:
                decode_record_set(data)
            assert str(decoded.value) == str(e)
    else:
        assert count == len(decode_record_set(data)) == record_set_count(data)


@st.composite
def _near_valid_sets(draw: st.DrawFn) -> bytes:
    """A record set of either codec, perhaps damaged in its body, with header fields near the true values."""
    members = draw(st.lists(st.binary(max_size=40), max_size=6))
    body = encode_record_set(members)[HEADER_LEN:]
    if draw(st.booleans()):
        body = draw(mutated(body))
    codec = draw(st.sampled_from([0, 1])) if body else 0
    stored = lz4.block.compress(body, store_size=False) if codec else body
    count = len(members) + draw(st.integers(-2, 2))
    original = len(body) + draw(st.sampled_from([0, 0, 0, -1, 1]))
    stored_len = len(stored) + draw(st.sampled_from([0, 0, 0, -1, 1]))
    return struct.pack(">iiii", 0x1000 | codec, count, original, stored_len) + stored


@FUZZ
@given(st.one_of(st.binary(max_size=200), _near_valid_sets()))
def test_validate_agrees_with_decode_on_any_bytes(data: bytes) -> None:
    _validate_agrees_with_decode(data)


# --- properties and fuzzing ------------------------------------------------------------------------------------
@PROPERTY
@given(st.lists(st.binary(max_size=100), max_size=30), st.sampled_from(CODECS))
def test_round_trip(members: list[bytes], codec: CompressionCodec) -> None:
    w = RecordSetWriter(codec)
    for m in members:
        w.write(m)
    assert w.num_records == len(members)
    assert w.num_bytes == 16 + sum(4 + len(m) for m in members)
    assert decode_record_set(w.to_bytes()) == members
    assert validate_record_set(w.to_bytes()) == len(members)


@PROPERTY
@given(st.lists(st.binary(max_size=100), max_size=30), st.integers(0, 1000))
def test_encode_in_one_pass_equals_the_writer(members: list[bytes], slot: int) -> None:
    """encode_record_set (the proxy client's one-pass encoder) gives the bytes RecordSetWriter builds, and
    member_dlsns the DLSNs expand_record_set gives the members."""
    w = RecordSetWriter()
    for m in members:
        w.write(m)
    data = encode_record_set(members)
    assert data == w.to_bytes()
    assert validate_record_set(data) == len(members)
    if members:
        expanded = expand_record_set(_set_record(data, DLSN(7, 3, slot), 9, 0, 0))
        assert [r.dlsn for r in expanded] == member_dlsns(DLSN(7, 3, slot), len(members))


def test_encode_rejects_a_too_long_member() -> None:
    with pytest.raises(LogRecordTooLongError):
        encode_record_set([b"ok", b"x" * (MAX_LOGRECORD_SIZE + 1)])


def _check(data: bytes) -> None:
    _validate_agrees_with_decode(data)
    try:
        out = decode_record_set(data)
    except DLError:
        pass
    else:
        assert all(isinstance(m, bytes) for m in out)
    try:
        recs = expand_record_set(_set_record(data, DLSN(1, 2, 3), 4, 5, 6))
    except DLError:
        pass
    else:
        assert all(isinstance(r, LogRecordWithDLSN) for r in recs)


@FUZZ
@given(st.binary(max_size=120))
def test_fuzz_arbitrary(data: bytes) -> None:
    _check(data)


@FUZZ
@given(st.binary(max_size=100), st.integers(-3, 3), st.integers(0, 0xF003))
def test_fuzz_with_plausible_header(body: bytes, count: int, metadata: int) -> None:
    _check(struct.pack(">iiii", metadata, count, len(body), len(body)) + body)


@FUZZ
@given(st.data())
def test_fuzz_damaged_sets(data: st.DataObject) -> None:
    w = RecordSetWriter(data.draw(st.sampled_from(CODECS)))
    for m in data.draw(st.lists(st.binary(max_size=40), min_size=1, max_size=6)):
        w.write(m)
    _check(data.draw(mutated(w.to_bytes())))
