"""spark.read.format("distributedlog"): exact rows, ranges, partition planning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import storage
from tests.spark.helpers import CONF, assert_rows, log_rows, off, write_segments


def _payloads(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


@pytest.mark.parametrize("backend", ["embedded", "zookeeper", "zookeeper-rados"], indirect=True)
def test_exact_rows_several_logs_and_segments_with_in_progress(spark, ns_uri: str) -> None:
    uri = ns_uri
    write_segments(uri, "a", [_payloads("a0", 7), _payloads("a1", 3), _payloads("a2", 11)])
    write_segments(uri, "b", [_payloads("b0", 4), [b""], _payloads("b2", 2)], txid=100)
    with storage.open_namespace(uri, CONF) as ns:
        w = ns.open_log("b").open_writer()  # an in-progress segment: visible up to the LAC
        for i in range(5):
            w.write(storage.LogRecord(200 + i, b"live-%d" % i))
        w.flush()
        expected = log_rows(uri, ["a", "b"])
        assert len(expected) == 7 + 3 + 11 + 4 + 1 + 2 + 5
        df = spark.read.format("distributedlog").option("uri", uri).option("streams", "a,b").load()
        assert_rows(spark, df, expected)
        w.write(storage.LogRecord(300, b"later"))
        w.flush()
        df2 = spark.read.format("distributedlog").option("uri", uri).option("streamPattern", "[ab]").load()
        assert_rows(spark, df2, log_rows(uri, ["a", "b"]))
        w.close()


def test_starting_and_ending_offsets(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [_payloads("x", 5), _payloads("y", 5)])
    rows = log_rows(uri, ["a"])
    start, end = rows[3][1], rows[8][1]
    df = (
        spark.read.format("distributedlog")
        .option("uri", uri)
        .option("streams", "a")
        .option("startingOffsets", json.dumps({"a": off(start)}))
        .option("endingOffsets", json.dumps({"a": off(end)}))
        .load()
    )
    assert_rows(spark, df, rows[3:8])
    by_txid = spark.read.format("distributedlog").option("uri", uri).option("streams", "a").option("startingTxId", 7)
    assert_rows(spark, by_txid.load(), rows[6:])


def test_partition_planning_caps_and_min_partitions(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [_payloads("x", 25), _payloads("y", 4)])
    write_segments(uri, "b", [_payloads("z", 3)])
    expected = log_rows(uri, ["a", "b"])
    reader = spark.read.format("distributedlog").option("uri", uri).option("streams", "a,b")
    df = reader.option("maxRecordsPerPartition", 10).load()
    # a: 25 -> 10+10+5 (3), 4 -> 1; b: 3 -> 1
    assert df.rdd.getNumPartitions() == 5
    sizes = df.rdd.glom().map(len).collect()
    assert max(sizes) <= 10 and sum(sizes) == 32
    assert_rows(spark, df, expected)
    df = reader.option("maxRecordsPerPartition", 1000).option("minPartitions", 8).load()
    assert df.rdd.getNumPartitions() >= 8
    assert_rows(spark, df, expected)
    one = spark.read.format("distributedlog").option("uri", uri).option("streams", "b").load()
    assert one.rdd.getNumPartitions() == 1


def test_empty_range_reads_no_rows(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    with storage.open_namespace(uri) as ns:
        ns.create_log("empty")
    df = spark.read.format("distributedlog").option("uri", uri).option("streams", "empty").load()
    assert df.count() == 0
