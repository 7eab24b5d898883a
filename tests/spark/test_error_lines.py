"""The first line of the error a user sees, with a real SparkSession: whatever Spark wraps around an error of
the data source, that line names the error class, the message and what to do (``dl_spark._reporting``).

Every method Spark calls is covered: the data source's constructor-time checks and ``schema`` (at ``load``),
``reader`` / ``writer`` (at the action), ``streamReader`` (the query's first call to the source),
``streamWriter`` (the query's first batch), the stream reader's planning (``latestOffset``), and the
executors' ``write``. And the streaming sink checks its input schema where PySpark first lets it, with the
same ``SinkOptionError`` as ``df.write``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException, PythonException, StreamingQueryException

import storage
from dl_spark import _reporting
from storage.log.staging import list_staged
from tests.spark.helpers import CONF, ROOT, log_rows, write_segments

VALUE_INT = (
    "dl_spark.errors.SinkOptionError: column value must be BINARY or STRING, got int: "
    "cast or serialize it, e.g. CAST(value AS STRING) or to_json(value)"
)
STREAM_FAILED = "[STREAM_FAILED] Query [id = "
WRITER_FAILED = "[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source writer: "


def first_line(err: BaseException) -> str:
    """The first line of what the user sees: ``str()`` of the exception PySpark raises (what an uncaught
    exception prints after its class name)."""
    return str(err).splitlines()[0]


@pytest.fixture
def uri(tmp_path: Path) -> str:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"a%d" % i for i in range(5)], [b"b%d" % i for i in range(5)]])
    return uri


def _stream(spark, uri: str, **options: str):
    reader = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "a")
    return reader.option("startingOffsets", "earliest").options(**options).load()


# --- item 1: the streaming sink's schema check --------------------------------------------------
def test_stream_sink_refuses_a_wrong_value_type_as_df_write_does(spark, uri: str, tmp_path: Path) -> None:
    """``df.write`` refuses at once; ``writeStream`` cannot fail in ``start()`` (PySpark runs no sink code
    there: ``streamWriter(schema, overwrite)`` is first called for the first micro-batch, in the query's
    thread), so the query fails at its first batch, before any task runs, with the same one line."""
    df = spark.range(3).selectExpr("CAST(id AS INT) AS value")
    with pytest.raises(AnalysisException) as err:
        df.write.format("distributedlog").option("uri", uri).option("stream", "out").mode("append").save()
    assert first_line(err.value) == WRITER_FAILED + VALUE_INT

    ckpt = tmp_path / "ckpt"
    src = _stream(spark, uri).selectExpr("CAST(txid AS INT) AS value")
    t0 = time.monotonic()
    q = (
        src.writeStream.format("distributedlog")
        .option("uri", uri)
        .option("stream", "out")
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()  # returns: no check can run here
    )
    started_s = time.monotonic() - t0
    with pytest.raises(StreamingQueryException) as serr:
        q.awaitTermination(120)
    line = first_line(serr.value)
    assert line.startswith(STREAM_FAILED), line
    assert line.endswith("terminated with exception: " + WRITER_FAILED + VALUE_INT), line
    assert q.exception() is not None and first_line(q.exception()) == WRITER_FAILED + VALUE_INT  # no prefix
    print(f"start() returned after {started_s:.1f}s; the query failed after {time.monotonic() - t0:.1f}s")
    # before any task: nothing staged, no output log, batch 0 planned but not committed
    with storage.open_namespace(uri) as ns:
        assert not ns.log_exists("out")
        assert list_staged(ns) == []
    assert (ckpt / "offsets" / "0").exists() and not (ckpt / "commits" / "0").exists()

    # a new query fails so even with nothing to read (startingOffsets=latest, no new record): its first batch runs
    q = (
        _stream(spark, uri, startingOffsets="latest")
        .selectExpr("CAST(txid AS INT) AS value")
        .writeStream.format("distributedlog")
        .option("uri", uri)
        .option("stream", "out")
        .option("checkpointLocation", str(tmp_path / "ckpt-latest"))
        .trigger(processingTime="1 second")
        .start()
    )
    with pytest.raises(StreamingQueryException) as serr:
        q.awaitTermination(120)
    assert first_line(serr.value).endswith(WRITER_FAILED + VALUE_INT)

    # fixed on the same checkpoint, the query runs batch 0 again and writes everything once
    q = (
        _stream(spark, uri)
        .selectExpr("CAST(txid AS STRING) AS value")
        .writeStream.format("distributedlog")
        .option("uri", uri)
        .option("stream", "out")
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    assert sorted(int(r[4]) for r in log_rows(uri, ["out"])) == list(range(1, 11))


# --- item 2: the first line, at every place Spark calls the data source --------------------------
def test_first_line_at_load_reader_and_writer(spark, uri: str, tmp_path: Path) -> None:
    create = "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: "
    for streaming in (False, True):  # the constructor-time option checks and schema()
        with pytest.raises(AnalysisException) as err:
            reader = spark.readStream if streaming else spark.read
            reader.format("distributedlog").option("uri", uri).option("streams", "a").option(
                "maxRecordsPerTriger", "5"
            ).load()
        assert first_line(err.value) == (
            create + "dl_spark.errors.SourceOptionError: unknown option maxrecordspertriger for format "
            "distributedlog; did you mean maxRecordsPerTrigger?"
        )
        missing = tmp_path / "typo"
        with pytest.raises(AnalysisException) as err:
            reader = spark.readStream if streaming else spark.read
            reader.format("distributedlog").option("uri", str(missing)).option("streams", "a").load()
        assert first_line(err.value) == (
            create + f"storage.errors.NamespaceNotFoundError: namespace {missing} does not exist "
            f"(no metadata/metadata.db in {missing}): check the URI; only writers create a namespace "
            "(dlog create, dlog write --create, the Spark sink)"
        )

    with pytest.raises(AnalysisException) as err:  # reader()
        spark.read.format("distributedlog").option("uri", uri).option("streams", "a").option(
            "startingOffsets", "latest"
        ).load().collect()
    assert first_line(err.value) == (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source reader: "
        "dl_spark.errors.SourceOptionError: option startingOffsets cannot be 'latest' for a batch query "
        "(it would read nothing): use 'earliest' (the default) or JSON offsets"
    )

    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(AnalysisException) as err:  # writer()
        df.write.format("distributedlog").option("uri", uri).option("stream", "o").mode("overwrite").save()
    assert first_line(err.value) == (
        WRITER_FAILED + "dl_spark.errors.SinkOptionError: format distributedlog appends to logs: use mode('append'), "
        "not 'overwrite'"
    )

    # an executor's write(): PySpark's PythonException puts its own header first, the error right after it
    df = spark.createDataFrame([("x",), (None,)], "value string").coalesce(1)
    with pytest.raises(PythonException) as perr:
        df.write.format("distributedlog").option("uri", uri).option("stream", "o").mode("append").save()
    assert str(perr.value).splitlines()[:2] == [
        "An exception was thrown from the Python worker:",
        "dl_spark.errors.SinkOptionError: column value must not be null: filter out or replace the null values",
    ]
    with storage.open_namespace(uri) as ns:
        assert list_staged(ns) == [] and not ns.log_exists("o")


def test_first_line_of_a_failed_stream(spark, uri: str, tmp_path: Path) -> None:
    def failure(df, **trigger: object) -> str:
        q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / uuid.uuid4().hex))
        q = q.trigger(**trigger).start()
        with pytest.raises(StreamingQueryException) as err:
            q.awaitTermination(120)
        line = first_line(err.value)
        assert line.startswith(STREAM_FAILED), line
        return line

    # streamReader() refuses: the query fails at the source's first call (see RefusedStreamReader)
    ending = "dl_spark.errors.SourceOptionError: option endingOffsets is for batch queries only (spark.read), "
    ending += "not readStream: remove it, or read with spark.read"
    line = failure(_stream(spark, uri, endingOffsets="latest"), availableNow=True)
    assert line.endswith(
        "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform "
        "prepareForTriggerAvailableNow: " + ending
    ), line
    line = failure(_stream(spark, uri, endingOffsets="latest"), processingTime="1 second")
    assert line.endswith(ending) and "UnboundLocalError" not in line, line

    # the reader's planning on the driver (latestOffset): a start that was truncated
    rows = log_rows(uri, ["a"])
    with storage.open_namespace(uri, CONF) as ns, ns.open_log("a").open_writer() as w:
        assert w.truncate(storage.DLSN(*rows[7][1]))
    start = json.dumps({"a": "1,0,1"})
    line = failure(_stream(spark, uri, startingOffsets=start), availableNow=True)
    assert "dl_spark.errors.DataLossError: log 'a': position 1,0,1 was truncated" in line, line
    assert "set failOnDataLoss=false" in line, line


# --- the means, without Spark ---------------------------------------------------------------------
REPORT = r"""
import os, sys
from pyspark.util import handle_worker_exception
from dl_spark import _reporting
from dl_spark.errors import SinkOptionError

class Out:
    data = b""
    def write(self, b): self.data += b
    def flush(self): pass

@_reporting.reported
def refuse(kind):
    if kind == "dl":
        raise SinkOptionError("column value must not be null: filter out or replace the null values")
    raise ZeroDivisionError("a bug")

try:
    refuse(sys.argv[1])
except BaseException as e:
    out = Out()
    handle_worker_exception(e, out)
    sys.stdout.write(out.data[8:].decode())  # after PYTHON_EXCEPTION_THROWN and the length
"""


@pytest.mark.parametrize("worker", [True, False])
def test_only_errors_meant_for_the_user_lose_their_traceback(worker: bool) -> None:
    """As PySpark's worker reports them: a DLError as one line, in a Spark worker process only; anything else
    (a bug) with its traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HIDE_TRACEBACK", "PYTHON_WORKER_FACTORY_SECRET")}
    env["PYTHONPATH"] = str(ROOT)
    if worker:
        env["PYTHON_WORKER_FACTORY_SECRET"] = "x"  # what Spark sets in every Python worker it starts

    def report(kind: str) -> str:
        cmd = [sys.executable, "-c", REPORT, kind]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=60).stdout

    dl = report("dl")
    if worker:
        assert dl == (
            "dl_spark.errors.SinkOptionError: column value must not be null: filter out or replace the null values\n"
        )
    else:
        assert dl.startswith("Traceback (most recent call last):")
    bug = report("bug")
    assert bug.startswith("Traceback (most recent call last):") and bug.endswith("ZeroDivisionError: a bug\n")
    assert not _reporting.in_spark_worker()  # this test process is not a worker
