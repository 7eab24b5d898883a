"""DLSN: DistributedLog's byte layouts, worked vectors, the vectors of its TestDLSN, and fuzzing of every DLSN
decoder."""

from __future__ import annotations

import base64
import copy
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import DLError, InvalidArgumentError
from storage.formats.dlsn import DLSN
from tests.storage.formats._strategies import FUZZ, PROPERTY, int64s

# --- worked vectors ------------------------------------------------------------------------
VECTORS = [
    (
        DLSN(1, 0, 0),
        "01 0000000000000001 0000000000000000 0000000000000000",
        "AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==",
    ),
    (
        DLSN(1, 0, -1),
        "01 0000000000000001 0000000000000000 ffffffffffffffff",
        "AQAAAAAAAAABAAAAAAAAAAD//////////w==",
    ),
    (
        DLSN(0, -1, -1),
        "01 0000000000000000 ffffffffffffffff ffffffffffffffff",
        "AQAAAAAAAAAA/////////////////////w==",
    ),
    (
        DLSN(99, 88, 77),
        "01 0000000000000063 0000000000000058 000000000000004d",
        "AQAAAAAAAABjAAAAAAAAAFgAAAAAAAAATQ==",
    ),
]


@pytest.mark.parametrize(("dlsn", "hexbytes", "b64"), VECTORS)
def test_vectors(dlsn: DLSN, hexbytes: str, b64: str) -> None:
    assert dlsn.to_bytes() == bytes.fromhex(hexbytes)
    assert dlsn.to_bytes(1) == bytes.fromhex(hexbytes)
    assert len(dlsn.to_bytes()) == 25
    assert dlsn.serialize() == b64
    assert DLSN.deserialize(b64) == dlsn
    assert DLSN.from_bytes(bytes.fromhex(hexbytes)) == dlsn


def test_constants() -> None:
    assert (DLSN.INITIAL.lssn, DLSN.INITIAL.entry_id, DLSN.INITIAL.slot_id) == (1, 0, 0)
    assert DLSN(1, 0, -1) == DLSN.NON_INCLUSIVE_LOWER_BOUND
    assert DLSN(0, -1, -1) == DLSN.INVALID
    assert DLSN.NON_INCLUSIVE_LOWER_BOUND < DLSN.INITIAL
    assert DLSN.INVALID < DLSN.NON_INCLUSIVE_LOWER_BOUND


def test_fields_and_text_forms() -> None:
    d = DLSN(3, 4, 5)
    assert (d.lssn, d.entry_id, d.slot_id) == (3, 4, 5)
    assert str(d) == "3,4,5"
    assert repr(d) == "DLSN(3,4,5)"
    assert str(DLSN(0, -1, -1)) == "0,-1,-1"


def test_frozen_hashable() -> None:
    d = DLSN(1, 2, 3)
    with pytest.raises(AttributeError):
        d.lssn = 5  # type: ignore[misc]
    assert {d: 1}[DLSN(1, 2, 3)] == 1
    assert len({DLSN(1, 2, 3), DLSN(1, 2, 3), DLSN(1, 2, 4)}) == 2


def test_pickle_and_copy() -> None:
    d = DLSN(7, -8, 9)
    assert pickle.loads(pickle.dumps(d)) == d
    assert copy.copy(d) == d
    assert copy.deepcopy(d) == d


def test_signed_ordering() -> None:
    assert DLSN(1, 0, -1) < DLSN(1, 0, 0)
    assert DLSN(1, -5, 100) < DLSN(1, 0, 0)
    assert DLSN(-1, 100, 100) < DLSN(0, 0, 0)
    assert DLSN(2, 0, 0) > DLSN(1, 99, 99)
    assert sorted([DLSN(2, 0, 0), DLSN(1, 1, 0), DLSN(1, 0, 5)]) == [DLSN(1, 0, 5), DLSN(1, 1, 0), DLSN(2, 0, 0)]
    assert DLSN(1, 2, 3) <= DLSN(1, 2, 3) and DLSN(1, 2, 3) >= DLSN(1, 2, 3)


def test_navigation() -> None:
    assert DLSN(1, 2, 3).next() == DLSN(1, 2, 4)
    assert DLSN(1, 2, 3).position_on_next_segment() == DLSN(2, 0, 0)


# --- DistributedLog's TestDLSN ---------------------------------------------------------------------------------
def test_round_trip_v0_and_v1() -> None:
    d = DLSN(99, 88, 77)
    v0 = d.to_bytes(0)
    assert len(v0) == 200
    assert v0[0] == 0 and v0[25:] == bytes(175)
    assert v0[1:25] == d.to_bytes(1)[1:]
    assert DLSN.from_bytes(v0) == d
    assert DLSN.from_bytes(d.to_bytes(1)) == d
    # the base64 of a v0 form deserializes too (deserialize accepts any version)
    assert DLSN.deserialize(base64.b64encode(v0).decode()) == d


def test_deserialize_bad() -> None:
    with pytest.raises(InvalidArgumentError, match="baddlsn"):
        DLSN.deserialize("baddlsn")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x01" + bytes(23),  # v1 too short
        b"\x01" + bytes(25),  # v1 too long
        b"\x00" + bytes(24),  # v0 must be 200 bytes
        b"\x00" + bytes(198),
        b"\x02" + bytes(24),  # unknown version
        b"\xff" + bytes(199),
    ],
)
def test_from_bytes_bad(data: bytes) -> None:
    with pytest.raises(InvalidArgumentError):
        DLSN.from_bytes(data)


def test_from_bytes_accepts_bytes_likes() -> None:
    raw = DLSN(5, 6, 7).to_bytes()
    assert DLSN.from_bytes(bytearray(raw)) == DLSN(5, 6, 7)
    assert DLSN.from_bytes(memoryview(raw)) == DLSN(5, 6, 7)
    with pytest.raises(InvalidArgumentError):
        DLSN.from_bytes("AQ==")  # type: ignore[arg-type]


def test_to_bytes_bad_version() -> None:
    with pytest.raises(InvalidArgumentError):
        DLSN(1, 0, 0).to_bytes(2)


def test_deserialize_is_lenient() -> None:
    d = DLSN(1, 0, -1)
    std = d.serialize()
    assert "/" in std
    urlsafe = base64.urlsafe_b64encode(d.to_bytes()).decode()
    assert DLSN.deserialize(urlsafe) == d
    assert DLSN.deserialize(std.rstrip("=")) == d  # padding optional
    assert DLSN.deserialize(" \n".join(std)) == d  # invalid characters are skipped
    assert DLSN.deserialize("*" + std + "\r\n") == d
    assert DLSN.deserialize(std + "garbage-after-padding") == d  # '=' ends the input
    assert DLSN.deserialize(std.encode()) == d


def test_parse() -> None:
    assert DLSN.parse("1,0,0") == DLSN(1, 0, 0)
    assert DLSN.parse(" 3 , -4 ,\t5 ") == DLSN(3, -4, 5)
    assert DLSN.parse("+3,4,5") == DLSN(3, 4, 5)
    assert DLSN.parse("InitialDLSN") == DLSN.INITIAL
    assert DLSN.parse("9223372036854775807,-9223372036854775808,0") == DLSN(2**63 - 1, -(2**63), 0)
    assert DLSN.parse("0000000000000000000000000001,0,0") == DLSN(1, 0, 0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1,2",
        "1,2,3,4",
        "a,b,c",
        "1,,3",
        "1.0,2,3",
        "1_0,2,3",
        "9223372036854775808,0,0",
        "0,-9223372036854775809,0",
        "1" * 5000 + ",0,0",
        "\u0661,\u0662,\u0663",  # non-ASCII digits
        "DLSN(1,0,0)",
        "initialdlsn",
    ],
)
def test_parse_bad(text: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        DLSN.parse(text)
    assert "DLSN" in str(info.value)


def test_parse_non_str() -> None:
    with pytest.raises(InvalidArgumentError):
        DLSN.parse(b"1,0,0")  # type: ignore[arg-type]


def test_constructor_validation() -> None:
    with pytest.raises(InvalidArgumentError, match="lssn"):
        DLSN("1", 0, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="entry_id"):
        DLSN(1, 1.5, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="slot_id"):
        DLSN(1, 0, True)
    with pytest.raises(InvalidArgumentError, match="64-bit"):
        DLSN(2**63, 0, 0)
    with pytest.raises(InvalidArgumentError, match="64-bit"):
        DLSN(0, 0, -(2**63) - 1)
    with pytest.raises(InvalidArgumentError):
        DLSN(1, 0, None)  # type: ignore[arg-type]


def test_int_subclasses_are_normalised() -> None:
    class MyInt(int):
        pass

    d = DLSN(MyInt(1), 2, 3)
    assert type(d.lssn) is int
    assert d == DLSN(1, 2, 3)


# --- properties and fuzzing ----------------------------------------------------------------------------
dlsns = st.builds(DLSN, int64s, int64s, int64s)


@PROPERTY
@given(dlsns)
def test_round_trips(d: DLSN) -> None:
    assert DLSN.from_bytes(d.to_bytes()) == d
    assert DLSN.from_bytes(d.to_bytes(0)) == d
    assert DLSN.deserialize(d.serialize()) == d
    assert DLSN.parse(str(d)) == d
    assert base64.b64decode(d.serialize()) == d.to_bytes()


@PROPERTY
@given(dlsns, dlsns)
def test_order_matches_tuple_order(a: DLSN, b: DLSN) -> None:
    ta = (a.lssn, a.entry_id, a.slot_id)
    tb = (b.lssn, b.entry_id, b.slot_id)
    assert (a < b) == (ta < tb)
    assert (a == b) == (ta == tb)


def _value_or_dlerror(fn: object, arg: object) -> None:
    try:
        result = fn(arg)  # type: ignore[operator]
    except DLError:
        return
    assert isinstance(result, DLSN)


@FUZZ
@given(st.binary(max_size=260))
def test_fuzz_from_bytes(data: bytes) -> None:
    _value_or_dlerror(DLSN.from_bytes, data)


@FUZZ
@given(st.one_of(st.binary(min_size=24, max_size=26).map(lambda b: b"\x01" + b), st.binary(min_size=199, max_size=201)))
def test_fuzz_from_bytes_near_valid_lengths(data: bytes) -> None:
    _value_or_dlerror(DLSN.from_bytes, data)


@FUZZ
@given(st.text(max_size=300))
def test_fuzz_deserialize_text(text: str) -> None:
    _value_or_dlerror(DLSN.deserialize, text)


@FUZZ
@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_= \n", max_size=60))
def test_fuzz_deserialize_base64ish(text: str) -> None:
    _value_or_dlerror(DLSN.deserialize, text)


@FUZZ
@given(st.text(max_size=200))
def test_fuzz_parse(text: str) -> None:
    _value_or_dlerror(DLSN.parse, text)


@FUZZ
@given(st.lists(st.one_of(st.text(alphabet="0123456789+- \t", max_size=25), st.text(max_size=5)), max_size=5))
def test_fuzz_parse_numberish(parts: list[str]) -> None:
    _value_or_dlerror(DLSN.parse, ",".join(parts))
