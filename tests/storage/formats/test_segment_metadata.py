"""LogSegmentMetadata: DistributedLog's text format, ordering and sequence ids, the vectors of its
TestLogSegmentMetadata, names, and fuzzing."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import (
    DLError,
    IllegalStateError,
    InvalidArgumentError,
    MetadataError,
    UnexpectedError,
    UnsupportedMetadataVersionError,
)
from storage.formats.dlsn import DLSN
from storage.formats.record import INVALID_TXID
from storage.formats.segment_metadata import (
    LogSegmentMetadata,
    SegmentName,
    TruncationStatus,
    assign_start_sequence_ids,
    compare_segments,
    completed_name,
    compute_start_sequence_id,
    inprogress_name,
    legacy_completed_name,
    legacy_inprogress_name,
    next_log_segment_sequence_number,
    parse_segment_name,
    segment_sort_key,
    sort_segments,
)
from tests.storage.formats._strategies import FUZZ, PROPERTY, int32s, int64s, mutated

MIN64 = -(2**63)


def seg(
    lssn: int, *, version: int = 5, completed: bool = True, count: int = 0, start: int = -1, first: int = 0
) -> LogSegmentMetadata:
    s = LogSegmentMetadata.new_inprogress(lssn=lssn, ledger_id=100 + lssn, first_txid=first, version=version)
    s = dataclasses.replace(s, start_sequence_id=start)
    if completed:
        s = s.complete(first + 10, count, 3, 0, 1234, start, f"/log/ledgers/{completed_name(lssn)}")
    return s


# --- defaults and derived values --------------------------------------------------------------------------
def test_defaults() -> None:
    s = LogSegmentMetadata(lssn=3, ledger_id=7, first_txid=11)
    assert s.last_txid == INVALID_TXID == -999
    assert s.record_count == 0
    assert s.last_dlsn == DLSN(3, -1, -1)
    assert s.min_active_dlsn == DLSN(3, 0, 0)
    assert s.start_sequence_id == -1
    assert s.truncation_status == "active"
    assert s.truncation_status is TruncationStatus.ACTIVE
    assert s.in_progress
    assert s.completion_time_ms == 0
    assert s.version == 5
    assert s.region_id == 0
    assert s.path == ""
    assert s.first_dlsn == DLSN(3, 0, 0)
    assert s.envelope_entries


def test_envelope_entries_by_version() -> None:
    assert [LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, version=v).envelope_entries for v in range(1, 6)] == [
        False,
        False,
        False,
        True,
        True,
    ]


def test_effective_start_sequence_id() -> None:
    assert (
        LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, start_sequence_id=999).effective_start_sequence_id == 999
    )
    v4 = LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, version=4, start_sequence_id=999)
    assert v4.effective_start_sequence_id == MIN64 + (1 << 32)
    unassigned = LogSegmentMetadata(lssn=2, ledger_id=1, first_txid=0)
    assert unassigned.effective_start_sequence_id == MIN64 + (2 << 32)
    # Java long arithmetic wraps
    big = LogSegmentMetadata(lssn=2**31, ledger_id=1, first_txid=0, version=4)
    assert big.effective_start_sequence_id == 0
    assert LogSegmentMetadata(lssn=2**32, ledger_id=1, first_txid=0, version=4).effective_start_sequence_id == MIN64


def test_znode_name() -> None:
    s = LogSegmentMetadata(
        lssn=1, ledger_id=1, first_txid=0, path="/ns/log/<default>/ledgers/inprogress_000000000000000001"
    )
    assert s.znode_name == "inprogress_000000000000000001"
    assert LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0).znode_name == ""


def test_truncation_status_enum() -> None:
    assert [t.value for t in TruncationStatus] == ["active", "partially_truncated", "truncated", "unknown"]
    assert TruncationStatus("truncated") is TruncationStatus.TRUNCATED
    assert str(TruncationStatus.PARTIALLY_TRUNCATED) == "partially_truncated"
    assert [t.code for t in TruncationStatus] == [0, 1, 2, 3]
    assert TruncationStatus.from_code(0x102) is TruncationStatus.TRUNCATED
    s = LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, status=3)
    assert s.truncation_status == "unknown"
    assert not (s.is_truncated or s.is_partially_truncated or s.is_non_truncated)


def test_validation() -> None:
    with pytest.raises(InvalidArgumentError):
        LogSegmentMetadata(lssn="1", ledger_id=1, first_txid=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, version=6)
    with pytest.raises(InvalidArgumentError):
        LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, region_id=16)
    with pytest.raises(InvalidArgumentError):
        LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, status=256)
    with pytest.raises(InvalidArgumentError):
        LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, record_count=2**31)
    with pytest.raises(InvalidArgumentError):
        LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, last_dlsn=DLSN(2, 0, 0))
    with pytest.raises(InvalidArgumentError):
        LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, in_progress=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        dataclasses.replace(LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0), lssn=2)  # DLSNs stay in lssn 1


# --- versions and fields ----------------------------------------------------------------------------------------------
def test_spec_inprogress_v5_example() -> None:
    s = LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, start_sequence_id=999)
    assert s.serialize() == b"5;1;0;1;0;0;999"
    parsed = LogSegmentMetadata.parse("/x", b"5;1;0;1;0;0;999")
    assert parsed == s
    assert parsed.start_sequence_id == 999 == parsed.effective_start_sequence_id
    assert parsed.in_progress


def test_spec_vsc_examples() -> None:
    s = seg(1, count=10, start=0)
    vsc = int(s.serialize().split(b";")[0])
    assert vsc == 5 | 10 << 32 == 42949672965
    p = s.with_truncation(TruncationStatus.PARTIALLY_TRUNCATED, DLSN(1, 2, 0))
    assert int(p.serialize().split(b";")[0]) == 5 | 1 << 8 | 10 << 32
    assert LogSegmentMetadata.parse("/p", p.serialize()) == p


def _full(version: int, in_progress: bool) -> LogSegmentMetadata:
    s = LogSegmentMetadata(
        lssn=7,
        ledger_id=42,
        first_txid=100,
        version=version,
        region_id=3,
        status=1,
        min_active_dlsn=DLSN(7, 5, 6),
        start_sequence_id=55,
        path="/l/x",
    )
    if not in_progress:
        s = s.complete(200, 12, 9, 2, 1700000000000, 55, "/l/y")
    return s


@pytest.mark.parametrize(
    ("version", "in_progress", "text"),
    [
        (1, True, "1;42;100"),
        (1, False, f"{1 | 12 << 32};42;100;200;1700000000000"),
        (2, True, f"{2 | 1 << 8 | 3 << 28};42;100;7"),
        (2, False, f"{2 | 1 << 8 | 3 << 28 | 12 << 32};42;100;200;1700000000000;7;9;2"),
        (3, True, f"{3 | 1 << 8 | 3 << 28};42;100;7;5;6"),
        (3, False, f"{3 | 1 << 8 | 3 << 28 | 12 << 32};42;100;200;1700000000000;7;9;2;5;6"),
        (4, True, f"{4 | 1 << 8 | 3 << 28};42;100;7;5;6"),
        (4, False, f"{4 | 1 << 8 | 3 << 28 | 12 << 32};42;100;200;1700000000000;7;9;2;5;6"),
        (5, True, f"{5 | 1 << 8 | 3 << 28};42;100;7;5;6;55"),
        (5, False, f"{5 | 1 << 8 | 3 << 28 | 12 << 32};42;100;200;1700000000000;7;9;2;5;6;55"),
    ],
)
def test_serialize_every_version(version: int, in_progress: bool, text: str) -> None:
    s = _full(version, in_progress)
    assert s.serialize(version=version) == text.encode()
    parsed = LogSegmentMetadata.parse("/z", text.encode(), skip_min_version_check=True)
    assert parsed.version == version
    assert parsed.in_progress == in_progress
    assert parsed.ledger_id == 42 and parsed.first_txid == 100
    assert parsed.path == "/z"
    if version == 1:
        assert parsed.lssn == 0  # V1 has no lssn
        assert parsed.region_id == 0 and parsed.status == 0  # V1 quirk: lost
    else:
        assert parsed.lssn == 7 and parsed.region_id == 3 and parsed.status == 1
    if not in_progress:
        assert parsed.last_txid == 200 and parsed.completion_time_ms == 1700000000000 and parsed.record_count == 12
        if version >= 2:
            assert parsed.last_dlsn == DLSN(7, 9, 2)
    else:
        assert parsed.last_txid == INVALID_TXID and parsed.record_count == 0
    if version >= 3:
        assert parsed.min_active_dlsn == DLSN(7, 5, 6)
    else:
        assert parsed.min_active_dlsn == DLSN(parsed.lssn, 0, 0)  # quirk: not persisted
    assert parsed.start_sequence_id == (55 if version == 5 else -1)
    if version >= 3:
        assert parsed == dataclasses.replace(s, version=version, start_sequence_id=parsed.start_sequence_id)


def test_encode_region_flag() -> None:
    s = LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, region_id=14)
    assert s.serialize(encode_region_id=False) == b"5;1;0;1;0;0;-1"
    assert s.serialize() == f"{5 | 14 << 28};1;0;1;0;0;-1".encode()


def test_negative_record_count_round_trips() -> None:
    s = _full(5, False)
    s = dataclasses.replace(s, record_count=-2)
    assert int(s.serialize().split(b";")[0]) < 0
    assert LogSegmentMetadata.parse("/n", s.serialize()).record_count == -2


# --- DistributedLog's TestLogSegmentMetadata --------------------------------------------------------------------------
def test_read_metadata_region() -> None:
    s = LogSegmentMetadata(lssn=0, ledger_id=1000, first_txid=1, region_id=14, path="/metadata1")
    read = LogSegmentMetadata.parse("/metadata1", s.serialize())
    assert read == s
    assert read.region_id == 14


def test_read_v1_cross_version() -> None:
    s = LogSegmentMetadata(lssn=0, ledger_id=1000, first_txid=1, version=1, region_id=14)
    read = LogSegmentMetadata.parse("/metadata2", s.serialize(), skip_min_version_check=True)
    assert (read.ledger_id, read.first_txid, read.last_txid, read.lssn) == (1000, 1, s.last_txid, 0)
    assert read.region_id == 0
    with pytest.raises(UnsupportedMetadataVersionError):
        LogSegmentMetadata.parse("/metadata-failure", s.serialize())


def test_mutate_truncation_status() -> None:
    s = LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, version=4)
    s = s.complete(1000, 1000, 1000, 0, 0, 0, "/completed-metadata")
    partial = s.with_truncation(TruncationStatus.PARTIALLY_TRUNCATED, DLSN(1, 500, 0))
    full = partial.with_truncation(TruncationStatus.TRUNCATED)
    assert full.min_active_dlsn == DLSN(1, 500, 0)
    assert full.truncation_status == "truncated" and full.is_truncated
    active = full.with_truncation("active")
    assert active.is_non_truncated and active.status == 0
    with pytest.raises(InvalidArgumentError):
        s.with_truncation(TruncationStatus.PARTIALLY_TRUNCATED, DLSN(2, 0, 0))
    with pytest.raises(InvalidArgumentError):
        s.with_truncation("bogus")
    with pytest.raises(InvalidArgumentError):
        s.with_truncation(TruncationStatus.UNKNOWN)


def test_truncation_keeps_other_status_bits() -> None:
    s = LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, status=0xF0)
    assert s.with_truncation(TruncationStatus.TRUNCATED).status == 0xF2


def test_parse_empty() -> None:
    with pytest.raises(MetadataError):
        LogSegmentMetadata.parse("/metadata1", b"")


def test_start_sequence_id_v5_and_v4() -> None:
    v5 = LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, start_sequence_id=999)
    assert LogSegmentMetadata.parse("/metadatav5", v5.serialize()).effective_start_sequence_id == 999
    v4 = LogSegmentMetadata(lssn=1, ledger_id=1, first_txid=0, version=4, start_sequence_id=999)
    assert LogSegmentMetadata.parse("/metadatav4", v4.serialize()).effective_start_sequence_id < 0


# --- parse errors ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", MetadataError),
        (";;;", MetadataError),
        ("x;1;2", MetadataError),
        ("5;1;0;1;0;0", MetadataError),  # 6 fields for v5
        ("5;1;0;1;0;0;999;1", MetadataError),  # 8 fields
        ("5;1;0;1;a;0;999", MetadataError),
        ("5;1;0;1;0;0;9223372036854775808", MetadataError),
        ("5;1;0;1;0;0;1.5", MetadataError),
        ("5; 1;0;1;0;0;999", MetadataError),
        ("6;1;0;1;0;0;999", UnsupportedMetadataVersionError),
        ("0;1;0", UnsupportedMetadataVersionError),
        ("1;1;0", UnsupportedMetadataVersionError),
        ("255;1;0", UnsupportedMetadataVersionError),
    ],
)
def test_parse_errors(text: str, error: type[MetadataError]) -> None:
    with pytest.raises(error):
        LogSegmentMetadata.parse("/bad", text.encode())


def test_parse_java_split_quirks() -> None:
    # trailing empty fields are dropped, as by Java's String.split
    assert LogSegmentMetadata.parse("/a", b"5;1;0;1;0;0;999;;").start_sequence_id == 999
    assert LogSegmentMetadata.parse("/a", "5;1;0;+1;0;0;999").lssn == 1
    assert LogSegmentMetadata.parse("/a", b"261;1;0;1;0;0;999").status == 1  # 261 = 5 | 1 << 8
    with pytest.raises(UnsupportedMetadataVersionError):
        LogSegmentMetadata.parse("/a", b"0;0;0;0;0;0;0", skip_min_version_check=True)
    with pytest.raises(MetadataError):
        LogSegmentMetadata.parse("/a", 5)  # type: ignore[arg-type]


def test_complete() -> None:
    s = LogSegmentMetadata.new_inprogress(lssn=4, ledger_id=9, first_txid=50, path="/l/inprogress_000000000000000004")
    done = s.complete(60, 7, 3, 1, 1700, 20, "/l/logrecs_000000000000000004")
    assert not done.in_progress
    assert done.last_dlsn == DLSN(4, 3, 1)
    assert (done.last_txid, done.record_count, done.completion_time_ms, done.start_sequence_id) == (60, 7, 1700, 20)
    assert done.path == "/l/logrecs_000000000000000004"
    assert (done.lssn, done.ledger_id, done.first_txid, done.version) == (4, 9, 50, 5)
    with pytest.raises(IllegalStateError):
        done.complete(60, 7, 3, 1, 1700, 20, "/again")


# --- names ------------------------------------------------------------------------------------------------------
def test_names() -> None:
    assert inprogress_name(1) == "inprogress_000000000000000001" == LogSegmentMetadata.inprogress_name(1)
    assert completed_name(1) == "logrecs_000000000000000001" == LogSegmentMetadata.completed_name(1)
    assert legacy_inprogress_name(255) == "inprogress_ff"
    assert legacy_inprogress_name(-1) == "inprogress_ffffffffffffffff"
    assert legacy_completed_name(1, 2) == "logrecs_000000000000000001_000000000000000002"


def test_parse_names() -> None:
    assert parse_segment_name("inprogress_000000000000000001") == SegmentName(in_progress=True, lssn=1)
    assert parse_segment_name("logrecs_000000000000000012") == SegmentName(in_progress=False, lssn=12)
    assert parse_segment_name("inprogress_ff") == SegmentName(in_progress=True, first_txid=255)
    assert parse_segment_name("inprogress_ffffffffffffffff") == SegmentName(in_progress=True, first_txid=-1)
    assert parse_segment_name("logrecs_000000000000000100_000000000000000199") == SegmentName(
        in_progress=False, first_txid=100, last_txid=199
    )
    assert parse_segment_name("logrecs_1_2_3_v5l10_0001") == SegmentName(
        in_progress=False, first_txid=1, last_txid=2, lssn=3
    )
    for n in range(1, 40, 7):
        assert parse_segment_name(inprogress_name(n)).lssn == n
        assert parse_segment_name(completed_name(n)).lssn == n


@pytest.mark.parametrize(
    "name",
    [
        "",
        "unknown",
        "inprogress_",
        "inprogress_xyz",
        "logrecs_",
        "logrecs_a",
        "logrecs_1_2_3_4",
        "ledgers_1",
        "inprogress_99999999999999999999",
        "logrecs_99999999999999999999",
    ],
)
def test_parse_bad_names(name: str) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_segment_name(name)


# --- ordering --------------------------------------------------------------------------------------------------
def test_ordering() -> None:
    a_in = seg(2, completed=False)
    a_done = seg(2)
    b = seg(1)
    c = seg(3, completed=False)
    assert compare_segments(a_in, a_done) == -1
    assert compare_segments(a_done, a_in) == 1
    assert compare_segments(b, a_in) == -1
    asc = sort_segments([c, a_done, b, a_in])
    assert asc == [b, a_in, a_done, c]
    assert [s.in_progress for s in asc] == [False, True, False, True]
    desc = sort_segments([c, a_done, b, a_in], descending=True)
    assert desc == [c, a_done, a_in, b]
    assert sorted([c, a_done, b, a_in], key=segment_sort_key) == asc
    assert sorted([c, a_done, b, a_in], key=LogSegmentMetadata.sort_key) == asc


def test_ordering_v1_by_first_txid() -> None:
    v1a = LogSegmentMetadata(lssn=0, ledger_id=1, first_txid=100, version=1)
    v1b = LogSegmentMetadata(lssn=0, ledger_id=2, first_txid=50, version=1)
    v2 = LogSegmentMetadata(lssn=9, ledger_id=3, first_txid=70, version=2)
    assert compare_segments(v1a, v1b) == 1
    assert compare_segments(v1a, v2) == 1  # lssn 0 on one side: compare first txids
    assert sort_segments([v1a, v1b]) == [v1b, v1a]


# --- sequence ids ---------------------------------------------------------------------------------------------
def test_compute_start_sequence_id() -> None:
    segs = [seg(1, count=5, start=0), seg(2, count=7, start=5)]
    assert compute_start_sequence_id(segs, seg(3, completed=False)) == 12
    assert compute_start_sequence_id(list(reversed(segs)), seg(3, completed=False)) == 12
    assert compute_start_sequence_id([], seg(1, completed=False)) == 0
    assert compute_start_sequence_id([seg(1, count=5, start=0)], seg(3, completed=False)) == 0  # no lssn 2
    assert compute_start_sequence_id([seg(2, version=4, count=3)], seg(3, completed=False)) == 0  # not v5
    with pytest.raises(UnexpectedError):
        compute_start_sequence_id([seg(2, completed=False)], seg(3, completed=False))
    # the segment itself (inprogress, same lssn) is ignored
    assert compute_start_sequence_id([seg(2, count=7, start=5), seg(3, completed=False)], seg(3, completed=False)) == 12


def test_assign_start_sequence_ids() -> None:
    segs = [seg(3, completed=False), seg(2, count=7, start=5), seg(1, count=5, start=0)]
    out = assign_start_sequence_ids(segs)
    assert [s.lssn for s in out] == [1, 2, 3]
    assert out[2].start_sequence_id == 12 and out[2].in_progress
    # an inprogress segment with nothing before it starts at 0
    assert assign_start_sequence_ids([seg(1, completed=False)])[0].start_sequence_id == 0
    # older completed segments reset the carried value: 0
    out = assign_start_sequence_ids([seg(1, version=4, count=3), seg(2, completed=False)])
    assert out[1].start_sequence_id == 0
    # only the first inprogress segment is assigned
    out = assign_start_sequence_ids([seg(1, count=2, start=0), seg(2, completed=False), seg(3, completed=False)])
    assert [s.start_sequence_id for s in out] == [0, 2, -1]
    # v4 inprogress segments are left alone
    assert assign_start_sequence_ids([seg(1, version=4, completed=False)])[0].start_sequence_id == -1


def test_assign_validates_gaps() -> None:
    with pytest.raises(UnexpectedError, match="gap"):
        assign_start_sequence_ids([seg(1), seg(3)])
    with pytest.raises(UnexpectedError, match="gap"):
        assign_start_sequence_ids([seg(2, completed=False), seg(2)])
    assert len(assign_start_sequence_ids([seg(1), seg(3)], validate_lssn=False)) == 2
    v1 = LogSegmentMetadata(lssn=0, ledger_id=5, first_txid=0, version=1, in_progress=False)
    assert len(assign_start_sequence_ids([v1, seg(5)])) == 2  # V1 segments are not checked


def test_next_lssn() -> None:
    assert next_log_segment_sequence_number([]) == 1
    assert next_log_segment_sequence_number([], first_lssn=10) == 10
    assert next_log_segment_sequence_number([seg(1), seg(2)]) == 3
    # a V1 segment (lssn 0) sorts by first txid; each newer V1 segment counts one
    newer_v1 = LogSegmentMetadata(lssn=0, ledger_id=5, first_txid=99, version=1, in_progress=False)
    assert next_log_segment_sequence_number([seg(1), newer_v1]) == 3
    older_v1 = LogSegmentMetadata(lssn=0, ledger_id=5, first_txid=-5, version=1, in_progress=False)
    assert next_log_segment_sequence_number([seg(1), older_v1]) == 2


# --- properties and fuzzing --------------------------------------------------------------------------------------
@st.composite
def segments(draw: st.DrawFn) -> LogSegmentMetadata:
    version = draw(st.integers(2, 5))
    lssn = draw(int64s)
    s = LogSegmentMetadata(
        lssn=lssn,
        ledger_id=draw(int64s),
        first_txid=draw(int64s),
        version=version,
        region_id=draw(st.integers(0, 15)),
        status=draw(st.integers(0, 255)),
        min_active_dlsn=DLSN(lssn, draw(int64s), draw(int64s)) if version >= 3 else DLSN(lssn, 0, 0),
        start_sequence_id=draw(int64s) if version >= 5 else -1,
    )
    if draw(st.booleans()):
        s = s.complete(
            draw(int64s), draw(int32s), draw(int64s), draw(int64s), draw(int64s), s.start_sequence_id, "/completed"
        )
    return s


@PROPERTY
@given(segments())
def test_serialize_parse_round_trip(s: LogSegmentMetadata) -> None:
    assert LogSegmentMetadata.parse("/p", s.serialize()) == s


def _check(data: bytes | str, skip: bool) -> None:
    try:
        out = LogSegmentMetadata.parse("/f", data, skip_min_version_check=skip)
    except DLError:
        return
    assert isinstance(out, LogSegmentMetadata)
    assert LogSegmentMetadata.parse("/g", out.serialize(), skip_min_version_check=True).ledger_id == out.ledger_id


@FUZZ
@given(st.binary(max_size=120), st.booleans())
def test_fuzz_parse_bytes(data: bytes, skip: bool) -> None:
    _check(data, skip)


@FUZZ
@given(st.lists(st.one_of(int64s.map(str), st.text(alphabet="0123456789-+", max_size=22)), max_size=12), st.booleans())
def test_fuzz_parse_fields(fields: list[str], skip: bool) -> None:
    _check(";".join(fields), skip)


@FUZZ
@given(st.data())
def test_fuzz_parse_damaged(data: st.DataObject) -> None:
    s = data.draw(segments())
    _check(data.draw(mutated(s.serialize())), data.draw(st.booleans()))


@FUZZ
@given(st.text(max_size=80))
def test_fuzz_segment_names(name: str) -> None:
    try:
        out = parse_segment_name(name)
    except DLError:
        return
    assert isinstance(out, SegmentName)


@FUZZ
@given(st.sampled_from(["inprogress_", "logrecs_"]), st.text(alphabet="0123456789abcdefv_l-", max_size=60))
def test_fuzz_segment_names_prefixed(prefix: str, rest: str) -> None:
    try:
        out = parse_segment_name(prefix + rest)
    except DLError:
        return
    assert isinstance(out, SegmentName)
