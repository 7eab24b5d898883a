"""``read_entries`` (in-place scan of plain entries, :mod:`dl_spark._columns`) gives exactly the
batches of the simple path: every entry decoded with ``decode_entry_columns`` and the lists turned
into Arrow arrays. No Spark needed."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dl_spark._columns import RowColumns, constant_string_column
from dl_spark.reading import ARROW_SCHEMA, read_entries
from storage.entry import decode_entry_columns, wrap_entry
from storage.errors import CorruptedEntryError
from storage.record import CONTROL, END_OF_STREAM, RECORD_SET
from storage.recordset import CompressionCodec, RecordSetWriter

_RECORD = struct.Struct(">qqi")
_NOT_USER = CONTROL | END_OF_STREAM
_DLSN_FIELDS = list(ARROW_SCHEMA.field("dlsn").type)

FUZZ = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])


# --- the simple path (the reader before the in-place scan) ------------------------------------
def _simple_batch(stream: str, lssn: int, seq_base: int, cols: dict[str, list[Any]]) -> pa.RecordBatch:
    n = len(cols["txids"])
    dlsn = pa.StructArray.from_arrays(
        [pa.array([lssn] * n, pa.int64()), pa.array(cols["entries"], pa.int64()), pa.array(cols["slots"], pa.int64())],
        fields=_DLSN_FIELDS,
    )
    seq = pc.add(pa.array(cols["positions"], pa.int64()), pa.scalar(seq_base, pa.int64()))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([stream] * n, pa.string()),
            dlsn,
            pa.array(cols["txids"], pa.int64()),
            seq,
            pa.array(cols["values"], pa.binary()),
        ],
        schema=ARROW_SCHEMA,
    )


def simple_read(
    entries: list[tuple[int, bytes]],
    *,
    stream: str,
    lssn: int,
    start_sequence_id: int,
    envelope: bool,
    lo: int,
    hi: int,
    batch_rows: int,
) -> list[pa.RecordBatch]:
    out = []
    keys = ("entries", "slots", "txids", "positions", "values")
    acc: dict[str, list[Any]] = {k: [] for k in keys}
    done = False
    for entry_id, data in entries:
        cols = decode_entry_columns(data, envelope=envelope, include_control=False)
        pos = cols.positions
        if not pos:
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
            out.append(_simple_batch(stream, lssn, start_sequence_id - 1, acc))
            acc = {k: [] for k in keys}
        if done or pos[-1] >= hi:
            break
    if acc["txids"]:
        out.append(_simple_batch(stream, lssn, start_sequence_id - 1, acc))
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
    return {
        "entries": entries,
        "stream": draw(st.sampled_from(["s", "log-é", "", "x" * 30])),
        "lssn": draw(st.integers(0, 2**40)),
        "start_sequence_id": draw(st.integers(-(2**62), 2**62)),
        "envelope": envelope,
        "lo": lo,
        "hi": hi,
        "batch_rows": draw(st.sampled_from([1, 3, 10, 10_000])),
    }


def _check_same(seg: dict[str, Any]) -> None:
    kw = {k: seg[k] for k in ("stream", "lssn", "start_sequence_id", "envelope", "batch_rows")}
    want = simple_read(seg["entries"], lo=seg["lo"], hi=seg["hi"], **kw)
    got = list(read_entries(iter(seg["entries"]), first_pos=seg["lo"], last_pos=seg["hi"], **kw))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.schema.equals(ARROW_SCHEMA)
        g.validate(full=True)
        assert g.equals(w), (g.to_pylist(), w.to_pylist())
        assert g.column(4).null_count == 0


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
    seg = {"entries": entries, "stream": "log", "lssn": 3, "start_sequence_id": 1000, "envelope": True}
    _check_same({**seg, "lo": lo, "hi": hi, "batch_rows": data.draw(st.sampled_from([1, 7, 50, 10_000]))})


@pytest.mark.parametrize("cut", [1, 5, 13, 20, 25, 40])
def test_malformed_entry_raises_like_decoder(cut: int) -> None:
    good = b"".join(_record(_metadata(0, p), p, b"abcdefghij") for p in range(1, 4))
    bad = wrap_entry(good)[:-cut]
    with pytest.raises(CorruptedEntryError):
        decode_entry_columns(bad)
    entries = [(0, wrap_entry(good)), (1, bad)]
    with pytest.raises(CorruptedEntryError):
        list(
            read_entries(
                iter(entries), stream="s", lssn=1, start_sequence_id=1, envelope=True, first_pos=1, last_pos=10
            )
        )


def test_negative_length_is_not_scanned() -> None:
    bad = wrap_entry(_RECORD.pack(_metadata(0, 1), 1, -20) + bytes(30))
    assert RowColumns("s", 1, 0).add_plain_entry(0, bad, 1, 10) is None
    with pytest.raises(CorruptedEntryError):
        list(
            read_entries(
                iter([(0, bad)]), stream="s", lssn=1, start_sequence_id=1, envelope=True, first_pos=1, last_pos=10
            )
        )


@pytest.mark.parametrize("value", ["", "a", "stream-é"])
@pytest.mark.parametrize("n", [0, 1, 5, 3000, 17])
def test_constant_string_column(value: str, n: int) -> None:
    col = constant_string_column(value, n)
    col.validate(full=True)
    assert col.equals(pa.array([value] * n, pa.string()))
    assert col.null_count == 0


def test_batches_cut_by_rows_keep_whole_entries() -> None:
    entries = [
        (e, wrap_entry(b"".join(_record(_metadata(0, e * 4 + i), 0, b"v") for i in range(1, 5)))) for e in range(10)
    ]
    got = list(
        read_entries(
            iter(entries),
            stream="s",
            lssn=1,
            start_sequence_id=1,
            envelope=True,
            first_pos=1,
            last_pos=40,
            batch_rows=6,
        )
    )
    assert [b.num_rows for b in got] == [8, 8, 8, 8, 8]
    assert list(itertools.chain.from_iterable(b.column(3).to_pylist() for b in got)) == list(range(1, 41))
