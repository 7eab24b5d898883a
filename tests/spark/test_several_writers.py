"""Several writers into one log, exactly once: each writer's own state (a streaming query id, a batch job's
writerId) is found whatever others committed since: a replayed batch after another writer committed is
skipped, a zombie run is fenced, a late batch never fails on txid order, committed:<log> finds the query's own
positions, idempotent df.write jobs, and expired writer state."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

import dl_spark
import storage
from dl_spark.sink import DistributedLogBatchWriter, DistributedLogStreamWriter, SinkCommitMessage, parse_sink_options
from storage.log.staging import stage_records
from tests.spark.helpers import log_rows, upper_query, write_segments

VALUE = StructType([StructField("value", BinaryType())])


def _payloads(uri: str, log: str) -> list[bytes]:
    return [r[4] for r in log_rows(uri, [log])]


def _txids(uri: str, log: str) -> list[int]:
    return [r[2] for r in log_rows(uri, [log])]


def _query(spark, uri: str, source: str, ckpt: Path, **source_opts: str):  # type: ignore[no-untyped-def]
    return upper_query(spark, uri, ckpt, source, 5, **source_opts)


def _drop_last_commit(ckpt: Path) -> int:
    """What a driver crash between the sink's commit and Spark's own checkpoint commit leaves."""
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (ckpt / "commits" / name).unlink(missing_ok=True)
    return last


def test_replayed_batch_after_another_query_committed_is_skipped(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"a%02d" % i for i in range(12)]])
    write_segments(uri, "c", [[b"c%02d" % i for i in range(8)]])
    ckpt_a, ckpt_b = tmp_path / "ckpt-a", tmp_path / "ckpt-b"
    qa = _query(spark, uri, "a", ckpt_a)
    _query(spark, uri, "c", ckpt_b)  # B commits last
    last = dl_spark.last_commit(uri, "out")
    assert last is not None and last["queryId"] != str(qa.id)
    replayed = _drop_last_commit(ckpt_a)
    # A again: Spark replays its last batch, which is in the log although B's commit is the latest
    _query(spark, uri, "a", ckpt_a)
    expected = sorted([b"A%02d" % i for i in range(12)] + [b"C%02d" % i for i in range(8)])
    assert sorted(_payloads(uri, "out")) == expected
    mine = {c["queryId"]: c for c in dl_spark.writer_commits(uri, "out")}
    assert mine[str(qa.id)]["batchId"] == replayed  # A's own state, still at its last batch
    # new input for A after B's commit: A's next batch is published (its txids raised to B's), none lost
    write_segments(uri, "a", [[b"n%02d" % i for i in range(3)]], txid=10_000)
    _query(spark, uri, "a", ckpt_a)
    assert sorted(_payloads(uri, "out")) == sorted(expected + [b"N%02d" % i for i in range(3)])
    txids = _txids(uri, "out")
    assert txids == sorted(txids)


def test_committed_offsets_recover_a_query_whose_log_another_query_committed_last(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"a%02d" % i for i in range(7)]])
    write_segments(uri, "c", [[b"c%02d" % i for i in range(4)]])
    ckpt_a = tmp_path / "ckpt-a"
    _query(spark, uri, "a", ckpt_a)
    _query(spark, uri, "c", tmp_path / "ckpt-b")  # the latest commit holds no positions of log a
    write_segments(uri, "a", [[b"y%02d" % i for i in range(3)]], txid=10_000)
    ckpt_a.rename(tmp_path / "lost")  # A's checkpoint is lost: resume from what A committed
    _query(spark, uri, "a", ckpt_a, startingOffsets="committed:out")
    got = sorted(_payloads(uri, "out"))
    assert got == sorted([b"A%02d" % i for i in range(7)] + [b"C%02d" % i for i in range(4)] + [b"Y00", b"Y01", b"Y02"])


def _message(
    ns: storage.Namespace, query: str, run: str, batch: int, rows: list[bytes], txid: int
) -> SinkCommitMessage:
    seg = stage_records(ns, [(txid, r) for r in rows])
    assert seg is not None
    return SinkCommitMessage(0, 0, query, run, batch, {"out": [seg.to_dict()]}, len(rows))


def test_zombie_is_fenced_and_late_batches_restaged_after_another_writer(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    opts = parse_sink_options({"uri": uri, "stream": "out"}, VALUE)
    ns = dl_spark._handles.namespace(uri)

    def commit(query: str, run: str, batch: int, rows: list[bytes], txid: int) -> None:
        DistributedLogStreamWriter(opts).commit([_message(ns, query, run, batch, rows, txid)], batch)

    commit("A", "a-old", 0, [b"a0"], 1000)
    commit("A", "a-new", 1, [b"a1"], 2000)  # a newer run of A
    commit("B", "b", 0, [b"b0"], 9000)  # another writer commits, with higher txids
    commit("A", "a-new", 1, [b"a1"], 2000)  # A's replay after B: skipped (before: a txid error for ever)
    with pytest.raises(dl_spark.QueryFencedError, match="a-old is fenced on log 'out'"):
        commit("A", "a-old", 2, [b"zombie"], 3000)  # the zombie of A, after B committed
    commit("A", "a-new", 2, [b"a2"], 3000)  # A's late batch, staged below B's txids: restaged at B's txid
    assert _payloads(uri, "out") == [b"a0", b"a1", b"b0", b"a2"]
    assert _txids(uri, "out") == [1000, 2000, 9000, 9000]
    assert ns.metastore.children("/.staging") == []  # originals of restaged ledgers and refused ones gone
    with storage.open_namespace(uri) as check:
        published = {s.ledger_id for s in check.open_log("out").log_segments()}
        assert set(check.segstore.list_ledgers()) == published
    states = {c["queryId"]: c for c in dl_spark.writer_commits(uri, "out")}
    assert states["A"]["batchId"] == 2 and states["A"]["runs"] == ["a-old", "a-new"]
    assert states["B"]["batchId"] == 0


def test_user_txids_below_another_writers_are_refused_naming_it(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    ns = dl_spark._handles.namespace(uri)
    plain = parse_sink_options({"uri": uri, "stream": "out"}, VALUE)
    DistributedLogStreamWriter(plain).commit([_message(ns, "B", "b", 4, [b"b"], 9000)], 4)
    with_txids = parse_sink_options(
        {"uri": uri, "stream": "out"}, StructType([*VALUE, StructField("txid", LongType())])
    )
    with pytest.raises(storage.TransactionIdOutOfOrderError, match="streaming query B batch 4") as got:
        DistributedLogStreamWriter(with_txids).commit([_message(ns, "A", "a", 0, [b"a"], 10)], 0)
    assert "give this writer's txid column values at or above the other writers'" in str(got.value)
    assert _payloads(uri, "out") == [b"b"]


def test_idempotent_batch_jobs_with_writer_id_and_version(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"

    def job(rows: list[str], **opts: str) -> None:
        w = spark.createDataFrame([(r,) for r in rows], "value string").coalesce(1).write.format("distributedlog")
        w = w.option("uri", uri).option("stream", "out")
        for k, v in opts.items():
            w = w.option(k, v)
        w.mode("append").save()

    job(["d1-a", "d1-b"], writerId="daily-load", writerVersion="20261127")
    job(["d1-a", "d1-b"], writerId="daily-load", writerVersion="20261127")  # the retried job: skipped
    job(["other"])  # a job without a writer id in between
    job(["d0"], writerId="daily-load", writerVersion="20261126")  # an older version: skipped
    job(["d2"], writerId="daily-load", writerVersion="20261128")  # the next version: published
    assert _payloads(uri, "out") == [b"d1-a", b"d1-b", b"other", b"d2"]
    state = next(c for c in dl_spark.writer_commits(uri, "out") if c.get("writerId") == "daily-load")
    assert state["writerVersion"] == 20261128
    for opts, message in (
        ({"writerId": "x"}, "options writerId and writerVersion go together"),
        ({"writerVersion": "3"}, "options writerId and writerVersion go together"),
        ({"writerId": "x", "writerVersion": "v3"}, "writerVersion must be a non-negative integer, got 'v3'"),
        ({"writerId": " ", "writerVersion": "3"}, "option writerId must be 1 to"),
    ):
        with pytest.raises(dl_spark.SinkOptionError, match=message):
            parse_sink_options({"uri": uri, "stream": "out", **opts}, VALUE)
    streaming = parse_sink_options({"uri": uri, "stream": "out", "writerId": "x", "writerVersion": "1"}, VALUE)
    with pytest.raises(dl_spark.SinkOptionError, match=r"are for df\.write jobs"):
        DistributedLogStreamWriter(streaming)
    with pytest.raises(PySparkException, match="go together"):
        job(["z"], writerId="x")


def test_expired_writer_state_is_refused_then_forgotten(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    retention_s = 0.6
    conf = {"uri": uri, "stream": "out", "dlog.writerStateRetentionHours": str(retention_s / 3600)}
    opts = parse_sink_options(conf, VALUE)
    ns = opts.namespace()

    def job(version: int, row: bytes, writer: str = "nightly") -> None:
        w = DistributedLogBatchWriter(
            parse_sink_options({**conf, "writerId": writer, "writerVersion": str(version)}, VALUE)
        )
        w.commit([w.write(iter([pa.RecordBatch.from_pydict({"value": [row]})]))])

    job(1, b"v1")
    time.sleep(retention_s * 1.2)
    job(1, b"other", writer="hourly")  # another writer's commit runs the expiry pass: nightly's state expires
    with pytest.raises(storage.WriterStateExpiredError, match="state of writer 'job:nightly' on log 'out' expired"):
        job(1, b"v1-retried")
    assert isinstance(storage.WriterStateExpiredError("x"), storage.AlreadyTruncatedTransactionError)
    assert not storage.WriterStateExpiredError("x").retriable
    assert [c.get("writerId") for c in dl_spark.writer_commits(uri, "out")] == ["hourly"]
    time.sleep(retention_s * 1.2)
    job(2, b"h2", writer="hourly")  # the tombstone is older than the retention: deleted
    job(1, b"v1-new")  # nightly is a new writer again
    assert _payloads(uri, "out") == [b"v1", b"other", b"h2", b"v1-new"]
    assert ns.metastore.children("/.staging") == []
