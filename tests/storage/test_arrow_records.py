"""``entries_to_batches`` (:mod:`storage.formats.arrow_records`: the in-place scan of plain entries) gives exactly
the batches of the simple path: every entry decoded with ``decode_entry_columns``, filtered by position
and by DLSN slot, and the lists turned into Arrow arrays. Fuzzed over random entries (control,
end-of-stream, record sets, LZ4, odd metadata, malformed data)."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.errors import CorruptedEntryError
from storage.formats.arrow_records import RECORD_SCHEMA, RecordColumns, entries_to_batches
from storage.formats.entry import decode_entry_columns, wrap_entry
from storage.formats.record import CONTROL, END_OF_STREAM, RECORD_SET
from storage.formats.recordset import CompressionCodec, RecordSetWriter

_RECORD = struct.Struct(">qqi")
_NOT_USER = CONTROL | END_OF_STREAM
_DLSN_FIELDS = list(RECORD_SCHEMA.field("dlsn").type)

FUZZ = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])


# --- the simple path (the reader before the in-place scan) ------------------------------------
def _simple_batch(lssn: int, seq_base: int, cols: dict[str, list[Any]]) -> pa.RecordBatch:
    n = len(cols["txids"])
    dlsn = pa.StructArray.from_arrays(
        [pa.array([lssn] * n, pa.int64()), pa.array(cols["entries"], pa.int64()), pa.array(cols["slots"], pa.int64())],
        fields=_DLSN_FIELDS,
    )
    seq = pc.add(pa.array(cols["positions"], pa.int64()), pa.scalar(seq_base, pa.int64()))
    return pa.RecordBatch.from_arrays(
        [
            dlsn,
            pa.array(cols["txids"], pa.int64()),
            seq,
            pa.array(cols["values"], pa.binary()),
        ],
        schema=RECORD_SCHEMA,
    )


def simple_read(
    entries: list[tuple[int, bytes]],
    *,
    lssn: int,
    start_sequence_id: int,
    envelope: bool,
    lo: int,
    hi: int,
    batch_rows: int,
    first_slot: tuple[int, int] | None = None,
    end_slot: tuple[int, int] | None = None,
) -> list[pa.RecordBatch]:
    out = []
    keys = ("entries", "slots", "txids", "positions", "values")
    acc: dict[str, list[Any]] = {k: [] for k in keys}
    done = False
    for entry_id, data in entries:
        cols = decode_entry_columns(data, envelope=envelope, include_control=False)
        is_end = end_slot is not None and entry_id == end_slot[0]
        keep_slot = [
            (first_slot is None or entry_id != first_slot[0] or s >= first_slot[1])
            and (not is_end or end_slot is None or s < end_slot[1])
            for s in cols.slots
        ]
        cols = type(cols)(*([v for v, k in zip(col, keep_slot, strict=True) if k] for col in cols))
        pos = cols.positions
        if not pos:
            if is_end:
                break
            continue
        if pos[0] >= lo and pos[-1] <= hi and not any(cols.flags):
            rows = list(range(len(pos)))
        else:
            rows = []
            for i, p in enumerate(pos):
                if p > hi:
                    done = True
                    break
                if p < lo or cols.flags[i] & _NOT_USER:
                    continue
                rows.append(i)
        for i in rows:
            acc["entries"].append(entry_id)
            acc["slots"].append(cols.slots[i])
            acc["txids"].append(cols.txids[i])
            acc["positions"].append(pos[i])
            acc["values"].append(cols.payloads[i])
        if len(acc["txids"]) >= batch_rows:
            out.append(_simple_batch(lssn, start_sequence_id - 1, acc))
            acc = {k: [] for k in keys}
        if done or is_end or pos[-1] >= hi:
            break
    if acc["txids"]:
        out.append(_simple_batch(lssn, start_sequence_id - 1, acc))
    return out


# --- random entries ---------------------------------------------------------------------------
def _record(metadata: int, txid: int, payload: bytes) -> bytes:
    return _RECORD.pack(metadata, txid, len(payload)) + payload


def _metadata(flags: int, position: int, high: int = 0) -> int:
    m = flags | ((position & 0xFFFFFFFF) << 16) | (high << 48)
    return m - (1 << 64) if m >= 1 << 63 else m


txids = st.one_of(st.integers(0, 1000), st.integers(-(2**63), 2**63 - 1))
payloads = st.binary(max_size=40)


@st.composite
def entry_records(draw: st.DrawFn, start: int) -> tuple[bytes, int]:
    """Serialized records of one entry, user positions counting on from ``start``; returns
    ``(payload, next start)``. Mostly plain user records; sometimes control, end-of-stream,
    record sets, unused flag bits, odd metadata (high bits, positions past 2**31) or jumps."""
    out = []
    pos = start
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user"] * 8 + ["control", "eos", "set", "flag", "odd", "jump"]))
        if kind == "user":
            pos += 1
            out.append(_record(_metadata(0, pos), draw(txids), draw(payloads)))
        elif kind == "control":
            out.append(_record(_metadata(CONTROL, pos), draw(txids), b"control"))
        elif kind == "eos":
            out.append(_record(_metadata(END_OF_STREAM, pos), 2**63 - 1, b"endOfStream"))
        elif kind == "set":
            w = RecordSetWriter(draw(st.sampled_from([CompressionCodec.NONE, CompressionCodec.LZ4])))
            members = draw(st.lists(payloads, min_size=1, max_size=4))
            for m in members:
                w.write(m)
            out.append(_record(_metadata(RECORD_SET, pos + 1), draw(txids), w.to_bytes()))
            pos += len(members)
        elif kind == "flag":
            pos += 1
            out.append(
                _record(_metadata(draw(st.sampled_from([0x8, 0x100, 0x8000])), pos), draw(txids), draw(payloads))
            )
        elif kind == "odd":
            p = draw(st.integers(0, 2**32 - 1))
            out.append(_record(_metadata(0, p, draw(st.integers(0, 0xFFFF))), draw(txids), draw(payloads)))
        else:
            pos += draw(st.integers(-3, 5))
    return b"".join(out), pos


@st.composite
def segments(draw: st.DrawFn) -> dict[str, Any]:
    envelope = draw(st.booleans()) or draw(st.booleans())
    entries = []
    pos = 0
    for entry_id in range(draw(st.integers(0, 8))):
        payload, pos = draw(entry_records(pos))
        if envelope:
            codec = draw(st.sampled_from([CompressionCodec.NONE] * 3 + [CompressionCodec.LZ4]))
            data = wrap_entry(payload, codec)
        else:
            data = payload
        entries.append((entry_id + draw(st.integers(0, 1)) * 100, data))
    lo = draw(st.integers(-2, max(pos, 0) + 2))
    hi = draw(st.integers(lo - 1, max(pos, 0) + 3))
    ids = [e for e, _ in entries] or [0]
    first_slot = (draw(st.sampled_from(ids)), draw(st.integers(0, 6))) if draw(st.booleans()) else None
    end_slot = (draw(st.sampled_from(ids)), draw(st.integers(0, 6))) if draw(st.booleans()) else None
    return {
        "entries": entries,
        "first_slot": first_slot,
        "end_slot": end_slot,
        "lssn": draw(st.integers(0, 2**40)),
        "start_sequence_id": draw(st.integers(-(2**62), 2**62)),
        "envelope": envelope,
        "lo": lo,
        "hi": hi,
        "batch_rows": draw(st.sampled_from([1, 3, 10, 10_000])),
    }


def _check_same(seg: dict[str, Any]) -> None:
    keys = ("lssn", "start_sequence_id", "envelope", "batch_rows", "first_slot", "end_slot")
    kw = {k: seg.get(k) for k in keys}
    want = simple_read(seg["entries"], lo=seg["lo"], hi=seg["hi"], **kw)
    got = list(entries_to_batches(iter(seg["entries"]), first_pos=seg["lo"], last_pos=seg["hi"], **kw))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.schema.equals(RECORD_SCHEMA)
        g.validate(full=True)
        assert g.equals(w), (g.to_pylist(), w.to_pylist())
        assert g.column(3).null_count == 0


@FUZZ
@given(segments())
def test_same_batches_as_simple_path(seg: dict[str, Any]) -> None:
    _check_same(seg)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_same_batches_plain_entries_partial_ranges(data: st.DataObject) -> None:
    """Many plain entries (the in-place path) with a position range cutting some of them."""
    entries = []
    pos = 0
    for entry_id in range(data.draw(st.integers(1, 20))):
        recs = []
        for _ in range(data.draw(st.integers(0, 30))):
            pos += 1
            recs.append(_record(_metadata(0, pos), pos * 7, data.draw(payloads)))
        if data.draw(st.integers(0, 9)) == 0:
            recs.append(_record(_metadata(CONTROL, pos), pos, b"control"))
        entries.append((entry_id, wrap_entry(b"".join(recs))))
    lo = data.draw(st.integers(0, pos + 1))
    hi = data.draw(st.integers(lo, pos + 2))
    seg = {"entries": entries, "lssn": 3, "start_sequence_id": 1000, "envelope": True}
    _check_same({**seg, "lo": lo, "hi": hi, "batch_rows": data.draw(st.sampled_from([1, 7, 50, 10_000]))})


@pytest.mark.parametrize("cut", [1, 5, 13, 20, 25, 40])
def test_malformed_entry_raises_like_decoder(cut: int) -> None:
    good = b"".join(_record(_metadata(0, p), p, b"abcdefghij") for p in range(1, 4))
    bad = wrap_entry(good)[:-cut]
    with pytest.raises(CorruptedEntryError):
        decode_entry_columns(bad)
    entries = [(0, wrap_entry(good)), (1, bad)]
    with pytest.raises(CorruptedEntryError):
        list(entries_to_batches(iter(entries), lssn=1, start_sequence_id=1, envelope=True, first_pos=1, last_pos=10))


def test_negative_length_is_not_scanned() -> None:
    bad = wrap_entry(_RECORD.pack(_metadata(0, 1), 1, -20) + bytes(30))
    assert RecordColumns(1, 0).add_plain_entry(0, bad, 1, 10) is None
    with pytest.raises(CorruptedEntryError):
        list(entries_to_batches(iter([(0, bad)]), lssn=1, start_sequence_id=1, envelope=True, first_pos=1, last_pos=10))


def test_batches_cut_by_rows_keep_whole_entries() -> None:
    entries = [
        (e, wrap_entry(b"".join(_record(_metadata(0, e * 4 + i), 0, b"v") for i in range(1, 5)))) for e in range(10)
    ]
    got = list(
        entries_to_batches(
            iter(entries),
            lssn=1,
            start_sequence_id=1,
            envelope=True,
            first_pos=1,
            last_pos=40,
            batch_rows=6,
        )
    )
    assert [b.num_rows for b in got] == [8, 8, 8, 8, 8]
    assert list(itertools.chain.from_iterable(b.column(2).to_pylist() for b in got)) == list(range(1, 41))


def _plain_entry(lengths: list[int], first_pos: int, fill: int = 0) -> bytes:
    return wrap_entry(
        b"".join(
            _record(_metadata(0, first_pos + i), 1000 + i, bytes([(fill + i) % 256]) * n) for i, n in enumerate(lengths)
        )
    )


@pytest.mark.parametrize(
    "lengths",
    [
        [1024] * 300,  # uniform: one strided view, no loop
        [0] * 50,  # uniform, empty payloads
        [7],  # one record
        [100, 3, 100, 3, 100],  # varying: the length chain is followed
        [30, 30, 30, 30, 10, 50],  # starts uniform, breaks later
        [8, 36, 8, 36],  # widths 28 and 56: the total divides by 28 though the records are not uniform
    ],
    ids=["uniform-1k", "uniform-empty", "single", "varying", "breaks-late", "divisible-not-uniform"],
)
def test_plain_entries_uniform_and_varying(lengths: list[int]) -> None:
    entries, pos = [], 0
    for entry_id in range(4):
        entries.append((entry_id, _plain_entry(lengths, pos + 1, fill=entry_id)))
        pos += len(lengths)
    seg = {"entries": entries, "lssn": 9, "start_sequence_id": 50, "envelope": True, "lo": 1, "hi": pos}
    for batch_rows in (1, len(lengths) + 1, 10_000):
        _check_same({**seg, "batch_rows": batch_rows})
    rows = RecordColumns(9, 49)
    assert rows.add_plain_entry(0, entries[0][1], 1, pos) == len(lengths)
    assert rows.batch().column("value").to_pylist() == [bytes([i % 256]) * n for i, n in enumerate(lengths)]
