"""writeStream / write .format("distributedlog"): exactly once across restarts and replays, a lost
checkpoint resumed from committed:<log>, zombie fencing, all-or-none batch jobs, failed writes
leave nothing staged, option and schema errors."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as sf
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

import dl_spark
import storage
from dl_spark.commits import read_batch_info
from dl_spark.sink import DistributedLogBatchWriter, DistributedLogStreamWriter, SinkCommitMessage, parse_sink_options
from storage.log.staging import stage_records
from tests.spark.helpers import log_rows, upper_query, write_segments


def _staged(uri: str) -> list[str]:
    with storage.open_namespace(uri) as ns:
        try:
            return ns.metastore.children("/.staging")
        except storage.DLError:
            return []


def _payloads(uri: str, log: str) -> list[bytes]:
    return [r[4] for r in log_rows(uri, [log])]


def _run(spark, uri: str, ckpt: Path, *, source_log: str = "in", **source_opts: str):  # type: ignore[no-untyped-def]
    return upper_query(spark, uri, ckpt, source_log, 7, **source_opts)


@pytest.mark.parametrize("backend", ["embedded", "zookeeper-rados"], indirect=True)
def test_stream_exactly_once_across_restarts_and_replayed_batch(spark, ns_uri: str, tmp_path: Path) -> None:
    uri = ns_uri
    ckpt = tmp_path / "ckpt"
    write_segments(uri, "in", [[b"a%02d" % i for i in range(20)]])
    q = _run(spark, uri, ckpt)
    assert _payloads(uri, "out") == [b"A%02d" % i for i in range(20)]
    commit = dl_spark.last_commit(uri, "out")
    assert commit is not None and commit["queryId"] == str(q.id) and commit["runId"] == str(q.runId)
    last_batch = commit["batchId"]
    assert last_batch == 2  # 7 + 7 + 6 rows
    assert commit["offsets"] == {"in": "2,0,0"}  # the next record to read: after the completed segment
    info = read_batch_info(str(ckpt), last_batch)
    assert info is not None and commit["offsets"] == info.flat_offsets() and commit["sources"] == info.sources
    # txids: the batch timestamp of every batch (non-decreasing), the same for all rows of a batch
    txids = [r[2] for r in log_rows(uri, ["out"])]
    assert txids == sorted(txids) and len(set(txids)) == 3

    write_segments(uri, "in", [[b"b%02d" % i for i in range(10)]], txid=100)
    q2 = _run(spark, uri, ckpt)  # restart from the checkpoint: only the new rows
    expected = [b"A%02d" % i for i in range(20)] + [b"B%02d" % i for i in range(10)]
    assert _payloads(uri, "out") == expected
    commit2 = dl_spark.last_commit(uri, "out")
    assert commit2 is not None and commit2["runs"] == [str(q.runId), str(q2.runId)]

    # Spark replays a batch whose commit file is missing: the sink adds nothing the second time.
    last = int(commit2["batchId"])
    for name in (str(last), f".{last}.crc"):
        (ckpt / "commits" / name).unlink(missing_ok=True)
    _run(spark, uri, ckpt)
    assert _payloads(uri, "out") == expected
    assert dl_spark.last_commit(uri, "out") == commit2
    assert _staged(uri) == []


def test_lost_checkpoint_resumes_from_committed_offsets(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    ckpt = tmp_path / "ckpt"
    write_segments(uri, "in", [[b"x%02d" % i for i in range(15)]])
    _run(spark, uri, ckpt)
    write_segments(uri, "in", [[b"y%02d" % i for i in range(9)]], txid=100)
    shutil.rmtree(ckpt)  # checkpoint lost mid-run
    q = _run(spark, uri, ckpt, startingOffsets="committed:out")
    assert _payloads(uri, "out") == [b"X%02d" % i for i in range(15)] + [b"Y%02d" % i for i in range(9)]
    commit = dl_spark.last_commit(uri, "out")
    assert commit is not None and commit["queryId"] == str(q.id)  # a new query id
    assert commit["offsets"] == {"in": "3,0,0"}
    # nothing new: a further committed:out run adds nothing
    shutil.rmtree(ckpt)
    _run(spark, uri, ckpt, startingOffsets="committed:out")
    assert len(_payloads(uri, "out")) == 24


def _message(ns: storage.Namespace, pid: int, run: str, batch: int, rows: list[bytes]) -> SinkCommitMessage:
    seg = stage_records(ns, [(1000 + batch, r) for r in rows])
    assert seg is not None
    return SinkCommitMessage(pid, 0, "query-1", run, batch, {"out": [seg.to_dict()]}, len(rows))


def test_zombie_with_the_same_query_id_is_fenced(ns_uri: str, tmp_path: Path) -> None:
    schema = StructType([StructField("value", BinaryType())])
    opts = parse_sink_options({"uri": ns_uri, "stream": "out"}, schema)
    ns = dl_spark._handles.namespace(ns_uri)

    def commit(run: str, batch: int, rows: list[bytes]) -> None:
        DistributedLogStreamWriter(opts).commit([_message(ns, 0, run, batch, rows)], batch)

    commit("old-run", 0, [b"a", b"b"])
    commit("old-run", 1, [b"c"])
    commit("new-run", 1, [b"c"])  # the newer run replays batch 1: skipped
    commit("new-run", 2, [b"d"])  # ... and goes on
    before = _payloads(ns_uri, "out")
    assert before == [b"a", b"b", b"c", b"d"]
    for batch in (2, 3):  # the old run, resumed (a zombie): refused, whatever its batch id
        with pytest.raises(dl_spark.QueryFencedError, match="old-run is fenced on log 'out'"):
            commit("old-run", batch, [b"zombie"])
    assert isinstance(dl_spark.QueryFencedError("x"), storage.LockingError)
    assert _payloads(ns_uri, "out") == before
    last = dl_spark.last_commit(ns_uri, "out")
    assert last is not None and last["runs"] == ["old-run", "new-run"] and last["batchId"] == 2
    assert ns.metastore.children("/.staging") == []  # the refused batch's staged data is gone
    # another query id starts its own history
    DistributedLogStreamWriter(opts).commit(
        [SinkCommitMessage(0, 0, "query-2", "r", 0, {"out": [stage_records(ns, [(5000, b"q2")]).to_dict()]})],  # type: ignore[union-attr]
        0,
    )
    assert _payloads(ns_uri, "out")[-1] == b"q2"


def test_failed_write_discards_what_it_staged(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    for options, columns in (
        ({"uri": uri, "stream": "out"}, ["value"]),
        ({"uri": uri}, ["value", "stream"]),  # several logs from a column: one stager per log
    ):
        schema = StructType([StructField(c, StringType()) for c in columns])
        writer = DistributedLogStreamWriter(parse_sink_options(options, schema))

        def batches(columns: list[str] = columns):  # type: ignore[no-untyped-def]
            for i in range(3):
                data = {"value": [f"v{i}-{j}" for j in range(100)], "stream": [f"out{j % 2}" for j in range(100)]}
                yield pa.RecordBatch.from_pydict({c: data[c] for c in columns})
            raise RuntimeError("input failed half-way")

        with pytest.raises(RuntimeError, match="half-way"):
            writer.write(batches())
        assert _staged(uri) == []
        with storage.open_namespace(uri) as ns:
            assert ns.segstore.list_ledgers() == []


def test_stream_column_routing_and_txid_column(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    rows = [(f"log{i % 3}", 10 + i, f"v{i}") for i in range(30)]
    df = spark.createDataFrame(rows, "stream string, txid bigint, value string")
    df = df.repartitionByRange(2, "txid").sortWithinPartitions("txid")  # txids ascend per log
    df.write.format("distributedlog").option("uri", uri).mode("append").save()
    for k in range(3):
        got = log_rows(uri, [f"log{k}"])
        assert sorted(r[4] for r in got) == sorted(f"v{i}".encode() for i in range(30) if i % 3 == k)
        assert {r[2] for r in got} == {10 + i for i in range(30) if i % 3 == k}
    # the option wins over the column
    df.write.format("distributedlog").option("uri", uri).option("stream", "all").mode("append").save()
    assert len(log_rows(uri, ["all"])) == 30


def test_batch_write_is_all_or_none(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    n = 5000
    df = spark.range(0, n, numPartitions=4).select(sf.format_string("row-%05d", "id").alias("value"))
    df.write.format("distributedlog").option("uri", uri).option("stream", "out").mode("append").save()
    assert _payloads(uri, "out") == [b"row-%05d" % i for i in range(n)]
    commit = dl_spark.last_commit(uri, "out")
    assert commit is not None and commit["queryId"] is None and commit["rows"] == n and commit["jobId"]

    @sf.udf(StringType())  # type: ignore[misc]
    def boom(v: str) -> str:
        if v == "row-04000":  # the last partition fails after the others wrote
            raise RuntimeError("job fails half-way")
        return v

    with pytest.raises(PySparkException, match="job fails half-way"):
        df.select(boom("value").alias("value")).write.format("distributedlog").option("uri", uri).option(
            "stream", "out"
        ).mode("append").save()
    assert len(_payloads(uri, "out")) == n  # none of the failed job's rows
    assert _staged(uri) == []
    with storage.open_namespace(uri) as ns:
        published = {s.ledger_id for s in ns.open_log("out").log_segments()}
        assert set(ns.segstore.list_ledgers()) == published


def test_compression_type_lz4_stores_less_and_reads_the_same(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    df = spark.range(0, 4000, numPartitions=2).select(
        sf.format_string("row-%05d-%0500d", "id", sf.lit(0)).alias("value")
    )
    for log, codec in (("plain", "none"), ("packed", "LZ4")):
        df.write.format("distributedlog").option("uri", uri).option("stream", log).option(
            "compressionType", codec
        ).mode("append").save()
    assert _payloads(uri, "packed") == _payloads(uri, "plain") == [b"row-%05d-%0500d" % (i, 0) for i in range(4000)]
    with storage.open_namespace(uri) as ns:
        size = {
            log: sum(ns.segstore.info(s.ledger_id).length_bytes for s in ns.open_log(log).log_segments())
            for log in ("plain", "packed")
        }
    assert size["packed"] * 10 < size["plain"], size


def test_options_and_schema_errors(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    value = StructField("value", BinaryType())
    cases = [
        ({}, [value], "option uri is required"),
        ({"uri": uri}, [value], "needs the option stream"),
        ({"uri": uri, "stream": "o"}, [StructField("v", BinaryType())], "needs a 'value' column"),
        ({"uri": uri, "stream": "o"}, [StructField("value", LongType())], "column value must be BINARY or STRING"),
        ({"uri": uri, "stream": "o"}, [value, StructField("txid", StringType())], "column txid must be BIGINT"),
        ({"uri": uri, "stream": "bad\x00name"}, [value], "option stream: invalid log name"),
        ({"uri": uri, "stream": "o", "stagingRetentionMs": "-1"}, [value], "stagingRetentionMs"),
        (
            {"uri": uri, "stream": "o", "compressionType": "zip"},
            [value],
            "compressionType must be none or lz4, got 'zip'",
        ),
    ]
    for options, fields, message in cases:
        with pytest.raises(dl_spark.SinkOptionError, match=message):
            parse_sink_options(options, StructType(fields))
    df = spark.range(3).selectExpr("id as value")
    with pytest.raises(PySparkException, match="column value must be BINARY or STRING"):
        df.write.format("distributedlog").option("uri", uri).option("stream", "o").mode("append").save()
    with pytest.raises(PySparkException, match="use mode"):
        df.selectExpr("cast(value as string) as value").write.format("distributedlog").option("uri", uri).option(
            "stream", "o"
        ).mode("overwrite").save()


def test_batch_writer_commit_record_and_abort(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    schema = StructType([StructField("value", BinaryType())])
    w = DistributedLogBatchWriter(parse_sink_options({"uri": uri, "stream": "o"}, schema))
    msg = w.write(iter([pa.RecordBatch.from_pydict({"value": [b"1", b"2"]})]))
    assert _staged(uri) != []
    w.abort([msg, None])
    assert _staged(uri) == [] and _payloads(uri, "o") == []
    with pytest.raises(storage.WriteCancelledError, match="was aborted"):  # a straggler of the aborted job
        w.write(iter([pa.RecordBatch.from_pydict({"value": [b"3"]})]))
    assert _staged(uri) == []
    w = DistributedLogBatchWriter(parse_sink_options({"uri": uri, "stream": "o"}, schema))  # the next job
    msg = w.write(iter([pa.RecordBatch.from_pydict({"value": [b"1", b"2"]})]))
    w.commit([msg])
    assert _payloads(uri, "o") == [b"1", b"2"]
    assert json.loads(json.dumps(dl_spark.last_commit(uri, "o")))["jobId"] == w.job_id


def test_dlog_conf_options_and_retention_of_published_logs(spark, tmp_path: Path) -> None:
    """``dlog.<key>`` options configure the sink's namespace; logSegmentRetentionHours purges what
    commits published (no writer rolls these logs), keeping the newest completed segment."""
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    for batch in range(3):
        df = spark.createDataFrame([(f"b{batch}-{i}",) for i in range(4)], "value string").coalesce(1)
        df.write.format("distributedlog").option("uri", uri).option("stream", "kept").option(
            "dlog.logSegmentRetentionHours", str(0.5 / 3600)
        ).mode("append").save()
        time.sleep(0.7)
    assert _payloads(uri, "kept") == [b"b2-%d" % i for i in range(4)]  # older batches' segments purged
    with pytest.raises(dl_spark.SinkOptionError, match=r"option dlog\.nosuchkey: unknown configuration key"):
        parse_sink_options(
            {"uri": uri, "stream": "o", "dlog.nosuchkey": "1"}, StructType([StructField("value", BinaryType())])
        )
    with pytest.raises(dl_spark.SinkOptionError, match=r"option dlog\.compressiontype"):
        parse_sink_options(
            {"uri": uri, "stream": "o", "dlog.compressiontype": "zip"}, StructType([StructField("value", BinaryType())])
        )
