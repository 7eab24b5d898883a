"""Bulk encoding from Arrow columns gives byte for byte what EntryBuilder gives, and bulk staging
publishes the same records as record-by-record staging."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage.formats.arrow_entries import check_txids, encode_entries
from storage.formats.entry import HEADER_LENGTH, EntryBuilder
from storage.formats.record import MAX_LOGRECORD_SIZE, MAX_TXID, LogRecord
from storage.formats.recordset import CompressionCodec
from storage.log.staging import discard, publish, stage_arrow, stage_records
from tests.conftest import BASE_CONF
from tests.storage.test_writer_reader import read_all


def builder_entries(
    payloads: list[bytes], txids: list[int], first_position: int, limit: int, codec: int = CompressionCodec.NONE
) -> list[bytes]:
    """EntryBuilder with the same cut rule: an entry takes records while it stays within ``limit``."""
    out, b = [], EntryBuilder()
    for i, (p, t) in enumerate(zip(payloads, txids, strict=True)):
        rec = LogRecord(t, p)
        if b.num_records and b.num_bytes + rec.persistent_size > limit:
            out.append(b.to_bytes(codec))
            b.clear()
        b.add(rec, first_position + i)
    if b.num_records:
        out.append(b.to_bytes(codec))
    return out


@settings(max_examples=150, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), min_size=1, max_size=60),
    first_position=st.integers(1, 1 << 20),
    limit=st.integers(HEADER_LENGTH + 1, 2000),
    constant=st.booleans(),
    base=st.integers(0, 1 << 40),
    codec=st.sampled_from([CompressionCodec.NONE, CompressionCodec.LZ4]),
    data=st.data(),
)
def test_bulk_entries_equal_entry_builder(
    payloads: list[bytes],
    first_position: int,
    limit: int,
    constant: bool,
    base: int,
    codec: CompressionCodec,
    data: st.DataObject,
) -> None:
    n = len(payloads)
    if constant:
        txids: list[int] = [base] * n
        arg: pa.Array | int = base
    else:
        steps = data.draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n))
        txids = [base + sum(steps[: i + 1]) for i in range(n)]
        arg = pa.array(txids, pa.int64())
    values = pa.array(payloads, pa.binary())
    if data.draw(st.booleans()):  # a sliced array (non-zero offsets) encodes the same
        values = pa.array([b"pad", *payloads], pa.binary()).slice(1)
        if not constant:
            arg = pa.array([0, *txids], pa.int64()).slice(1)
    got = list(encode_entries(values, arg, first_position, limit, codec))
    assert [e.data for e in got] == builder_entries(payloads, txids, first_position, limit, codec)
    assert sum(e.records for e in got) == n
    assert check_txids(arg, n, 0) == (txids[0], txids[-1])


def test_encode_rejects_bad_input() -> None:
    with pytest.raises(storage.InvalidArgumentError, match="null"):
        list(encode_entries(pa.array([b"a", None]), 1, 1, 1000))
    with pytest.raises(storage.InvalidArgumentError, match="binary"):
        list(encode_entries(pa.array([1, 2]), 1, 1, 1000))
    with pytest.raises(storage.LogRecordTooLongError):
        list(encode_entries(pa.array([b"x" * MAX_LOGRECORD_SIZE]), 1, 1, 1 << 21))
    with pytest.raises(storage.InvalidArgumentError, match="codec"):
        list(encode_entries(pa.array([b"a"]), 1, 1, 1000, CompressionCodec.UNKNOWN))
    (entry,) = encode_entries(pa.array(["é"], pa.string()), 1, 1, 1000)
    assert entry.data.endswith("é".encode())
    for txids, last, match in [
        (pa.array([3, 2], pa.int64()), 0, "txid 2 after 3"),
        (pa.array([3, 4], pa.int64()), 5, "txid 3 after 5"),
        (pa.array([-1, 4], pa.int64()), 0, "out of range"),
        (pa.array([1, MAX_TXID], pa.int64()), 0, "out of range"),
        (4, 5, "txid 4 after 5"),
    ]:
        with pytest.raises(storage.TransactionIdOutOfOrderError, match=match):
            check_txids(txids, 2, last)
    with pytest.raises(storage.InvalidArgumentError):
        check_txids(pa.array([1, None], pa.int64()), 2, 0)


def test_stage_arrow_publishes_what_stage_records_would(ns: storage.Namespace) -> None:
    chunks = [[b"a%d" % i for i in range(k, k + 700)] for k in range(0, 2100, 700)]
    items: list[tuple[pa.Array, pa.Array | int]] = [
        (pa.array(chunks[0]), 7),
        (pa.array(chunks[1]), pa.array(range(7, 707), pa.int64())),
        (pa.array([], pa.binary()), 9),
        (pa.array(chunks[2], pa.binary()), 800),
    ]
    staged = stage_arrow(ns, items, tag={"t": 1})
    assert staged is not None and staged.record_count == 2100 and (staged.first_txid, staged.last_txid) == (7, 800)
    same = stage_records(
        ns, [*((7, p) for p in chunks[0]), *zip(range(7, 707), chunks[1], strict=True), *((800, p) for p in chunks[2])]
    )
    assert same is not None and same.record_count == staged.record_count
    publish(ns, "bulk", [staged], {}, lambda prev: True)
    publish(ns, "slow", [same], {}, lambda prev: True)
    bulk, slow = read_all(ns.open_log("bulk")), read_all(ns.open_log("slow"))
    key = [(r.txid, r.sequence_id, bytes(r.payload)) for r in slow]
    assert [(r.txid, r.sequence_id, bytes(r.payload)) for r in bulk] == key
    assert bulk[-1].dlsn.slot_id == staged.last_slot_id and bulk[-1].dlsn.entry_id == staged.last_entry_id
    assert stage_arrow(ns, [(pa.array([], pa.binary()), 1)]) is None
    with pytest.raises(storage.TransactionIdOutOfOrderError):
        stage_arrow(ns, [(pa.array([b"x"]), 5), (pa.array([b"y"]), 4)])
    assert ns.metastore.children("/.staging") == []  # the failed staging removed its ledger


def test_stage_arrow_lz4_entries_read_back(ns: storage.Namespace, ns_uri: str) -> None:
    """Staged with LZ4 (the argument, or the namespace's compressionType): smaller ledgers, the same records."""
    payloads = [b"%06d" % i + b"z" * 1000 for i in range(3000)]
    plain = stage_arrow(ns, [(pa.array(payloads), 5)], codec=CompressionCodec.NONE)
    packed = stage_arrow(ns, [(pa.array(payloads), 5)], codec=CompressionCodec.LZ4)
    assert plain is not None and packed is not None
    size = {s.ledger_id: ns.segstore.info(s.ledger_id).length_bytes for s in (plain, packed)}
    assert size[packed.ledger_id] * 20 < size[plain.ledger_id]
    publish(ns, "plain", [plain], {}, lambda prev: True)
    publish(ns, "packed", [packed], {}, lambda prev: True)
    got = [(r.dlsn, r.txid, bytes(r.payload)) for r in read_all(ns.open_log("packed"))]
    assert got == [(r.dlsn, r.txid, bytes(r.payload)) for r in read_all(ns.open_log("plain"))]
    assert [p for _d, _t, p in got] == payloads
    table = pa.Table.from_batches(list(ns.open_log("packed").read_arrow(storage.DLSN(1, 0, 0))))
    assert table.column("value").to_pylist() == payloads
    with storage.open_namespace(ns_uri, {**BASE_CONF, "compressionType": "lz4"}) as lz4_ns:
        by_conf = stage_arrow(lz4_ns, [(pa.array(payloads), 5)])
        assert by_conf is not None and lz4_ns.segstore.info(by_conf.ledger_id).length_bytes == size[packed.ledger_id]
        discard(lz4_ns, [by_conf.ledger_id])
