"""spark.readStream.format("distributedlog"): exact rows across batches, restart from the
checkpoint, streamPattern discovery, read limits and Trigger.AvailableNow."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import storage
from dl_spark import SCHEMA
from tests.spark.helpers import CONF, append_in_process, assert_rows, log_rows, write_segments


def _stream(spark, uri: str, **options: object):
    r = spark.readStream.format("distributedlog").option("uri", uri)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def _memory_query(df, name: str | None = None):
    name = name or f"q_{uuid.uuid4().hex[:8]}"
    return df.writeStream.format("memory").queryName(name).start(), name


@pytest.mark.parametrize("backend", ["embedded", "zookeeper", "zookeeper-rados"], indirect=True)
def test_stream_exact_rows_with_growing_in_progress_segment(spark, ns_uri: str) -> None:
    uri = ns_uri
    write_segments(uri, "a", [[b"a%d" % i for i in range(6)], [b"b%d" % i for i in range(4)]])
    write_segments(uri, "b", [[b"c%d" % i for i in range(3)]], txid=50)
    df = _stream(spark, uri, streams="a,b", startingOffsets="earliest", maxRecordsPerPartition=4)
    q, name = _memory_query(df)
    try:
        q.processAllAvailable()
        assert_rows(spark, spark.table(name), log_rows(uri, ["a", "b"]))
        with storage.open_namespace(uri, CONF) as ns:
            w = ns.open_log("a").open_writer()
            for round_ in range(3):  # the in-progress segment grows between batches
                for i in range(5):
                    w.write(storage.LogRecord(1000 + round_ * 10 + i, b"live-%d-%d" % (round_, i)))
                w.flush()
                q.processAllAvailable()
                assert_rows(spark, spark.table(name), log_rows(uri, ["a", "b"]))
            w.close()
        append_in_process(uri, "b", [b"other-process-%d" % i for i in range(7)], txid=2000)
        q.processAllAvailable()
        assert_rows(spark, spark.table(name), log_rows(uri, ["a", "b"]))
    finally:
        q.stop()


def test_latest_start_skips_existing_records(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"old-%d" % i for i in range(5)]])
    q, name = _memory_query(_stream(spark, uri, streams="a"))  # startingOffsets defaults to latest
    try:
        q.processAllAvailable()
        before = len(log_rows(uri, ["a"]))
        append_in_process(uri, "a", [b"new-%d" % i for i in range(3)], txid=100)
        q.processAllAvailable()
        assert_rows(spark, spark.table(name), log_rows(uri, ["a"])[before:])
    finally:
        q.stop()


def test_restart_from_checkpoint_reads_every_record_once(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    write_segments(uri, "a", [[b"s1-%d" % i for i in range(8)]])

    def run() -> None:
        df = _stream(spark, uri, streams="a", startingOffsets="earliest", maxRecordsPerTrigger=3)
        q = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt).start()
        try:
            q.processAllAvailable()
        finally:
            q.stop()

    run()
    append_in_process(uri, "a", [b"stopped-%d" % i for i in range(5)], txid=100)  # added while stopped
    append_in_process(uri, "a", [b"stopped2-%d" % i for i in range(4)], txid=200, close=False)
    run()
    assert_rows(spark, spark.read.schema(SCHEMA).parquet(out), log_rows(uri, ["a"]), ignore_nullable=True)


def test_stream_pattern_picks_up_new_log_from_earliest(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "ev-1", [[b"one-%d" % i for i in range(3)]])
    write_segments(uri, "other", [[b"not-me"]])
    q, name = _memory_query(_stream(spark, uri, streamPattern="ev-.*", startingOffsets="earliest"))
    try:
        q.processAllAvailable()
        assert_rows(spark, spark.table(name), log_rows(uri, ["ev-1"]))
        write_segments(uri, "ev-2", [[b"two-%d" % i for i in range(4)], [b"two-b"]], txid=10)  # created meanwhile
        append_in_process(uri, "ev-3", [b"three"], txid=1)
        q.processAllAvailable()
        assert_rows(spark, spark.table(name), log_rows(uri, ["ev-1", "ev-2", "ev-3"]))
    finally:
        q.stop()


def _batch_sizes(q) -> list[int]:
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0]


def test_available_now_honours_max_records_per_trigger(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"x%d" % i for i in range(7)], [b"y%d" % i for i in range(5)]])
    df = _stream(spark, uri, streams="a", startingOffsets="earliest", maxRecordsPerTrigger=5)
    name = f"q_{uuid.uuid4().hex[:8]}"
    q = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert _batch_sizes(q) == [5, 5, 2]
    assert_rows(spark, spark.table(name), log_rows(uri, ["a"]))


def test_max_bytes_per_trigger_splits_batches(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[bytes(1000) for _ in range(10)]])
    df = _stream(spark, uri, streams="a", startingOffsets="earliest", maxBytesPerTrigger=3500)
    name = f"q_{uuid.uuid4().hex[:8]}"
    q = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    q.awaitTermination(120)
    sizes = _batch_sizes(q)
    assert sum(sizes) == 10 and len(sizes) >= 3 and max(sizes) <= 3
    assert_rows(spark, spark.table(name), log_rows(uri, ["a"]))
