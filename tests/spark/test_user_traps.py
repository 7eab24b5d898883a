"""Traps a new user falls into, each one clear error: reading a namespace that does not exist
(nothing is created), writing to a sealed log (refused before anything is written or published,
nothing staged is left), and a misspelt option (the closest valid name is suggested)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import functions as sf
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

import dl_spark
import storage
from dl_spark.sink import DistributedLogStreamWriter, parse_sink_options
from storage.log.staging import list_staged
from tests.spark.helpers import CONF, log_rows, write_segments

SEALED = "log 'out' is sealed (end of stream): no more records can be written"


def _missing_message(uri: str, where: Path) -> str:
    return (
        f"namespace {uri} does not exist (no metadata/metadata.db in {where}): check the URI; "
        "only writers create a namespace (dlog create, dlog write --create, the Spark sink)"
    )


def _one_error_line(text: str, needle: str, kind: str) -> None:
    """``needle`` is in ``text`` on a line that names the error class ``kind``."""
    assert any(needle in line and kind in line for line in text.splitlines()), text


# --- reading never creates a namespace ----------------------------------------------------------
def test_reading_a_missing_namespace_fails_and_creates_nothing(spark, tmp_path: Path) -> None:
    where = tmp_path / "typo" / "ns"
    uri = f"distributedlog-local://{where}"
    for streaming in (False, True):
        for selector in ({"streams": "a"}, {"streamPattern": "a.*"}):
            reader = spark.readStream if streaming else spark.read
            with pytest.raises(AnalysisException) as err:
                reader.format("distributedlog").option("uri", uri).options(**selector).load()
            _one_error_line(str(err.value), _missing_message(uri, where), "NamespaceNotFoundError")
            assert not (tmp_path / "typo").exists()
    with pytest.raises(storage.NamespaceNotFoundError):
        dl_spark.last_commit(uri, "out")
    assert not (tmp_path / "typo").exists()
    # the sink creates it, as before; then it reads
    spark.createDataFrame([("x",)], "value string").write.format("distributedlog").option("uri", uri).option(
        "stream", "a"
    ).mode("append").save()
    rows = spark.read.format("distributedlog").option("uri", uri).option("streams", "a").load().collect()
    assert [bytes(r.value) for r in rows] == [b"x"]


# --- a sealed log refuses the sink --------------------------------------------------------------
def _sealed_namespace(tmp_path: Path) -> str:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "in", [[b"i%d" % i for i in range(10)]])
    write_segments(uri, "out", [[b"o0", b"o1"]])
    with storage.open_namespace(uri, CONF) as ns:
        w = ns.open_log("out").open_writer()
        w.mark_end_of_stream()
        w.close()
    return uri


def _nothing_left(uri: str, out_rows: int = 2) -> None:
    """``out`` holds only what it had when sealed; no staged ledger, no ledger outside a segment."""
    assert [r[4] for r in log_rows(uri, ["out"])] == [b"o0", b"o1"][:out_rows]
    with storage.open_namespace(uri) as ns:
        assert list_staged(ns) == []
        published = {s.ledger_id for log in ns.list_logs() for s in ns.open_log(log).log_segments()}
        assert set(ns.segstore.list_ledgers()) == published


def test_sink_refuses_a_sealed_log_before_writing(spark, tmp_path: Path) -> None:
    uri = _sealed_namespace(tmp_path)
    df = spark.range(5).select(sf.format_string("v%d", "id").alias("value"))

    # df.write with the stream option: refused on the driver, when the writer is created
    with pytest.raises(PySparkException) as err:
        df.write.format("distributedlog").option("uri", uri).option("stream", "out").mode("append").save()
    _one_error_line(str(err.value), SEALED, "EndOfStreamError")
    assert "TransactionIdOutOfOrderError" not in str(err.value)
    _nothing_left(uri)

    # df.writeStream with the stream option: the query fails with the same error
    src = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "in")
    src = src.option("startingOffsets", "earliest").load().select("value")
    with pytest.raises(PySparkException) as err:
        q = (
            src.writeStream.format("distributedlog")
            .option("uri", uri)
            .option("stream", "out")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
    _one_error_line(str(err.value), SEALED, "EndOfStreamError")
    _nothing_left(uri)


def test_sink_refuses_a_sealed_log_from_the_stream_column_at_commit(spark, tmp_path: Path) -> None:
    uri = _sealed_namespace(tmp_path)
    rows = [("fresh" if i % 2 else "out", f"v{i}") for i in range(20)]
    df = spark.createDataFrame(rows, "stream string, value string").repartition(2)
    with pytest.raises(PySparkException) as err:
        df.write.format("distributedlog").option("uri", uri).mode("append").save()
    _one_error_line(str(err.value), SEALED, "EndOfStreamError")
    _nothing_left(uri)
    with storage.open_namespace(uri) as ns:  # all or none: nothing reached the other log either
        assert not ns.log_exists("fresh") or ns.open_log("fresh").log_segments() == []

    # a streaming query with the column: its first batch fails at commit, nothing is published
    src = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "in")
    src = src.option("startingOffsets", "earliest").load()
    src = src.select(sf.when(sf.col("txid") % 2 == 0, "out").otherwise("fresh").alias("stream"), "value")
    with pytest.raises(PySparkException) as err:
        q = (
            src.writeStream.format("distributedlog")
            .option("uri", uri)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
    _one_error_line(str(err.value), SEALED, "EndOfStreamError")
    _nothing_left(uri)


def test_writer_made_for_a_commit_discards_what_the_query_staged(tmp_path: Path) -> None:
    """The log is sealed while a batch's tasks run: the writer Spark makes for the commit refuses,
    and what the query staged goes."""
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    query_id = str(uuid.uuid4())
    (ckpt / "metadata").write_text(f'{{"id":"{query_id}"}}\n')
    opts = parse_sink_options(
        {"uri": uri, "stream": "out", "checkpointLocation": str(ckpt)}, StructType([StructField("value", BinaryType())])
    )
    task_writer = DistributedLogStreamWriter(opts)
    staged = task_writer._write(iter([pa.RecordBatch.from_pydict({"value": [b"a", b"b"]})]))
    assert staged.rows == 2
    with storage.open_namespace(uri) as ns:  # the tags the sink's tasks register (no task context here)
        (reg,) = list_staged(ns)
        doc = json.loads(ns.metastore.get(f"/.staging/{reg.ledger_id}").value)
        doc["tag"]["query"] = query_id
        ns.metastore.set(f"/.staging/{reg.ledger_id}", json.dumps(doc).encode())
        w = ns.open_log("out").open_writer()
        w.mark_end_of_stream()
        w.close()
    with pytest.raises(storage.EndOfStreamError, match=re.escape(SEALED)):
        DistributedLogStreamWriter(opts)
    with storage.open_namespace(uri) as ns:
        assert list_staged(ns) == []
        assert ns.segstore.list_ledgers() == [s.ledger_id for s in ns.open_log("out").log_segments()]


# --- unknown options --------------------------------------------------------------------------
def test_unknown_options_name_the_closest_valid_one(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"x", b"y"]])
    for streaming in (False, True):
        for key, value, message in [
            (
                "maxRecordsPerTriger",
                "10",
                "unknown option maxrecordspertriger for format distributedlog; did you mean maxRecordsPerTrigger?",
            ),
            ("startingOffset", "earliest", "did you mean startingOffsets?"),
            ("failOnDataLos", "false", "did you mean failOnDataLoss?"),
            ("frobnicate", "1", "unknown option frobnicate for format distributedlog; valid options: endingOffsets,"),
        ]:
            reader = spark.readStream if streaming else spark.read
            with pytest.raises(AnalysisException) as err:
                reader.format("distributedlog").option("uri", uri).option("streams", "a").option(key, value).load()
            _one_error_line(str(err.value), message, "SourceOptionError")
        # `stream` (the sink's) instead of `streams`: the name is what is wrong, so that is what is said
        reader = spark.readStream if streaming else spark.read
        with pytest.raises(AnalysisException) as err:
            reader.format("distributedlog").option("uri", uri).option("stream", "a").load()
        _one_error_line(
            str(err.value),
            "unknown option stream for format distributedlog; did you mean streams?",
            "SourceOptionError",
        )

    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException) as err:
        df.write.format("distributedlog").option("uri", uri).option("streams", "o").mode("append").save()
    _one_error_line(
        str(err.value), "unknown option streams for format distributedlog; did you mean stream?", "SinkOptionError"
    )
    with pytest.raises(PySparkException) as err:
        df.write.format("distributedlog").option("uri", uri).option("stream", "o").option("compression", "lz4").mode(
            "append"
        ).save()
    _one_error_line(str(err.value), "did you mean compressionType?", "SinkOptionError")

    # the names Spark passes by itself are accepted: path (load/save/start), checkpointLocation, queryName
    rows = spark.read.format("distributedlog").option("uri", uri).option("streams", "a").load(str(tmp_path / "p"))
    assert rows.count() == 2
    df.write.format("distributedlog").option("uri", uri).option("stream", "o").mode("append").save(str(tmp_path / "p"))
    src = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "a")
    src = src.option("startingOffsets", "earliest").load(str(tmp_path / "p")).select("value")
    q = (
        src.writeStream.format("distributedlog")
        .option("uri", uri)
        .option("stream", "o")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .queryName(f"q_{uuid.uuid4().hex[:8]}")
        .trigger(availableNow=True)
        .start(str(tmp_path / "out-path"))
    )
    q.awaitTermination(120)
    assert q.exception() is None
    assert sorted(r[4] for r in log_rows(uri, ["o"])) == [b"v", b"x", b"y"]


def test_unknown_option_names_without_spark() -> None:
    from dl_spark.options import parse_source_options

    with pytest.raises(dl_spark.SourceOptionError) as err:
        parse_source_options({"uri": "/x", "streams": "a", "maxRecordsPerTriger": "10"})
    assert str(err.value) == (
        "unknown option maxRecordsPerTriger for format distributedlog; did you mean maxRecordsPerTrigger?"
    )
    schema = StructType([StructField("value", StringType())])
    with pytest.raises(dl_spark.SinkOptionError) as serr:
        parse_sink_options({"uri": "/x", "stream": "o", "stagingRetention": "5"}, schema)
    assert (
        str(serr.value) == "unknown option stagingRetention for format distributedlog; did you mean stagingRetentionMs?"
    )
    for name in ("subscriberId", "subscriberid", "path", "PATH"):
        parse_source_options({"uri": "/x", "streams": "a", name: "s1"})
    for name in ("checkpointLocation", "queryName", "path", "stagingRetentionMs", "compressionType"):
        parse_sink_options({"uri": "/x", "stream": "o", name: "1" if "Ms" in name else "none"}, schema)
