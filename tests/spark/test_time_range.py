"""Time-range reads: ``endingTxId``, and filters on ``txid``, ``sequence_id``, ``stream`` and ``dlsn`` pushed down
to segment planning (``spark.sql.python.filterPushdown.enabled``), with the same rows as with pushdown off."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException

import storage
from dl_spark import DistributedLogDataSource, SourceOptionError
from dl_spark.options import parse_source_options
from dl_spark.source import DistributedLogPushdownReader
from tests.spark.helpers import Row, log_rows

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
#: Several records per entry (entries are cut by flush()), so slot ids and entry ids both vary.
BUFFERED = {"writerOutputBufferSize": 1 << 20, "lockTimeoutSeconds": 5}


@contextmanager
def pushdown(spark: Any, on: bool) -> Iterator[None]:
    old = spark.conf.get(PUSHDOWN)
    spark.conf.set(PUSHDOWN, "true" if on else "false")
    try:
        yield
    finally:
        spark.conf.set(PUSHDOWN, old)


def _rows(df: Any) -> list[Row]:
    return sorted(
        (r.stream, (r.dlsn.lssn, r.dlsn.entry_id, r.dlsn.slot_id), r.txid, r.sequence_id, bytes(r.value))
        for r in df.collect()
    )


def _read(spark: Any, uri: str, streams: str = "a,b", **options: Any) -> Any:
    reader = spark.read.format("distributedlog").option("uri", uri).option("streams", streams)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def write_log(
    uri: str, log: str, txids: Sequence[Sequence[int]], *, per_entry: int = 4, close_last: bool = True
) -> Any:
    """One segment per list of txids (payload ``<log>-<n>``), entries of ``per_entry`` records. With
    ``close_last=False`` the last segment stays in progress: ``(namespace, writer)`` are returned, to close later."""
    n = 0
    ns = storage.open_namespace(uri, BUFFERED)
    dlm = ns.open_log(log)
    for i, seg in enumerate(txids):
        w = dlm.open_writer()
        for k, t in enumerate(seg):
            w.write(storage.LogRecord(t, f"{log}-{n}".encode()))
            n += 1
            if (k + 1) % per_entry == 0:
                w.flush()
        w.flush()
        if i == len(txids) - 1 and not close_last:
            return ns, w
        w.close()
    ns.close()
    return None


@pytest.fixture(scope="module")
def two_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Log ``a``: 12 segments of 10 records, txid = n // 3 (ties, also across segment boundaries), the last
    segment in progress; log ``b``: 5 segments of 7 records, txids 20, 22, 24...; entries of 4 records."""
    uri = f"distributedlog-local://{tmp_path_factory.mktemp('tr') / 'ns'}"
    write_log(uri, "b", [[20 + 2 * (7 * s + k) for k in range(7)] for s in range(5)])
    ns, w = write_log(uri, "a", [[(10 * s + k) // 3 for k in range(10)] for s in range(12)], close_last=False)
    try:
        yield uri
    finally:
        w.close()
        ns.close()


# --- endingTxId -----------------------------------------------------------------------------------
def test_ending_txid_is_exclusive_and_combines_with_starting_txid(spark, two_logs: str) -> None:
    uri = two_logs
    every = log_rows(uri, ["a", "b"])
    assert len(every) == 120 + 35

    def expect(lo: int | None, hi: int | None) -> list[Row]:
        return sorted(r for r in every if (lo is None or r[2] >= lo) and (hi is None or r[2] < hi))

    assert _rows(_read(spark, uri, endingTxId=30)) == expect(None, 30)
    assert _rows(_read(spark, uri, startingTxId=13, endingTxId=31)) == expect(13, 31)  # 13 and 30 tie in log a
    assert _rows(_read(spark, uri, startingTxId=25, endingTxId=25)) == []
    assert _rows(_read(spark, uri, endingTxId=0)) == []
    assert _rows(_read(spark, uri, startingTxId=35, endingTxId=10**12)) == expect(35, None)  # into the in-progress one
    assert _rows(_read(spark, uri, "b", endingTxId=10**12)) == sorted(r for r in every if r[0] == "b")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"endingTxId": "soon"}, "option endingTxId must be an integer >= 0"),
        ({"endingTxId": "-5"}, "option endingTxId must be an integer >= 0"),
        ({"endingTxId": "9", "endingOffsets": "latest"}, "endingOffsets and endingTxId are exclusive"),
        ({"endingTxId": "9", "startingTxId": "10"}, "option endingTxId (9) is below startingTxId (10)"),
    ],
)
def test_bad_ending_txid_fails_at_load(spark, two_logs: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(AnalysisException) as err:
        spark.read.format("distributedlog").option("uri", two_logs).option("streams", "a").options(**options).load()
    assert any(message in line and "SourceOptionError" in line for line in str(err.value).splitlines())


def test_ending_txid_on_a_stream_is_refused_naming_the_option(two_logs: str) -> None:
    options = {"uri": two_logs, "streams": "a", "endingTxId": "10"}
    source = DistributedLogDataSource(options)
    reader = source.streamReader(schema=source.schema())
    with pytest.raises(SourceOptionError, match="option endingTxId is for batch queries only"):
        reader.initialOffset()


# --- pushdown: the same rows on and off -----------------------------------------------------------
FILTERS = [
    # txid
    "txid >= 10 AND txid < 20",
    "txid = 13",
    "txid > 36",
    "txid <= 3",
    "txid IN (0, 13, 30, 31, 64, 1000)",
    "txid BETWEEN 22 AND 26",
    "txid <=> 24",
    "txid > 100",
    "txid > 20 AND txid < 10",
    # sequence_id
    "sequence_id >= 15 AND sequence_id <= 42",
    "sequence_id IN (0, 9, 10, 34, 119, 500)",
    "sequence_id > 110",
    # stream
    "stream = 'b'",
    "stream IN ('a', 'zz')",
    "stream LIKE 'b%'",
    "startswith(stream, 'a') AND txid >= 30",
    # dlsn
    "dlsn.lssn = 3",
    "dlsn.lssn IN (2, 5) AND stream = 'a'",
    "dlsn.lssn >= 11",
    "dlsn.lssn = 3 AND dlsn.entry_id >= 1",
    "dlsn.lssn = 3 AND dlsn.entry_id = 2 AND dlsn.slot_id > 1",
    "dlsn.entry_id = 2",  # not pinned by lssn: Spark checks it
    "dlsn >= named_struct('lssn', 2L, 'entry_id', 1L, 'slot_id', 2L)"
    " AND dlsn < named_struct('lssn', 4L, 'entry_id', 2L, 'slot_id', 1L)",
    "dlsn = named_struct('lssn', 12L, 'entry_id', 0L, 'slot_id', 3L)",
    # combinations, and filters Spark keeps (not pushed, or returned by the source)
    "stream = 'a' AND txid >= 12 AND sequence_id < 60 AND dlsn.lssn <= 5",
    "NOT (txid = 5) AND txid < 8",
    "txid % 2 = 0 AND txid > 30",
    "txid > 35 OR stream = 'b'",
    "value = 'a-7' AND txid < 10",
]


def _per_filter(spark: Any, uri: str, filters: Sequence[str], *, pushed: bool) -> dict[str, list[Row]]:
    """The rows of each filter, in one Spark job (a union of the filtered reads, tagged).

    ``pushed``: a fresh DataFrame per filter, each planned with its own filters pushed down (a DataFrame of its
    own each: Spark 4.3 keeps one read plan per DataFrame, the last one pushed). Else the whole logs are read
    once (pushdown must be off) and Spark applies every filter to those rows."""
    from functools import reduce

    from pyspark.sql.functions import lit

    base = None if pushed else _read(spark, uri).coalesce(1).localCheckpoint()
    parts = [
        (_read(spark, uri) if base is None else base).where(f).withColumn("filter", lit(i))
        for i, f in enumerate(filters)
    ]
    got: dict[str, list[Row]] = {f: [] for f in filters}
    for r in reduce(lambda x, y: x.unionByName(y), parts).collect():
        row = (r.stream, (r.dlsn.lssn, r.dlsn.entry_id, r.dlsn.slot_id), r.txid, r.sequence_id, bytes(r.value))
        got[filters[r.filter]].append(row)
    return {f: sorted(rows) for f, rows in got.items()}


def test_pushdown_on_and_off_give_the_same_rows(spark, two_logs: str) -> None:
    uri = two_logs
    with pushdown(spark, False):
        off = _per_filter(spark, uri, FILTERS, pushed=False)
    with pushdown(spark, True):
        on = _per_filter(spark, uri, FILTERS, pushed=True)
    for f in FILTERS:
        assert on[f] == off[f], f
    # and the rows are the right ones (checked against the storage core's reader for a few)
    every = sorted(log_rows(uri, ["a", "b"]))
    assert off["txid >= 10 AND txid < 20"] == [r for r in every if 10 <= r[2] < 20]
    assert off["sequence_id IN (0, 9, 10, 34, 119, 500)"] == [r for r in every if r[3] in (0, 9, 10, 34, 119)]
    assert off["dlsn.lssn = 3 AND dlsn.entry_id = 2 AND dlsn.slot_id > 1"] == [
        r for r in every if r[1][0] == 3 and r[1][1] == 2 and r[1][2] > 1
    ]
    print("rows per filter:", {f: len(off[f]) for f in FILTERS})


def _planned(
    uri: str, streams: str, filters: list[Any], **options: str
) -> tuple[list[tuple[str, int, int, int]], list]:
    """``(log, lssn, first_pos, last_pos)`` of the partitions a pushdown reader plans, and the filters it returns."""
    reader = DistributedLogPushdownReader(parse_source_options({"uri": uri, "streams": streams, **options}))
    rest = reader.pushFilters(filters)
    parts = reader.partitions()
    return [(p.spec.log, p.spec.slice.lssn, p.spec.slice.first_pos, p.spec.slice.last_pos) for p in parts], rest


def test_only_the_segments_that_can_match_are_planned(spark, tmp_path: Path) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan, LessThanOrEqual, Not

    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_log(uri, "a", [[10 * s + k for k in range(10)] for s in range(30)])  # txid = n, 30 segments
    write_log(uri, "b", [[k for k in range(10)]])
    # txid 105..124: the last 5 records of segment 11, all of 12, the first 5 of 13
    planned, rest = _planned(uri, "a,b", [GreaterThanOrEqual(("txid",), 105), LessThan(("txid",), 125)])
    assert planned == [("a", 11, 6, 10), ("a", 12, 1, 10), ("a", 13, 1, 5)] and rest == []
    negated = Not(EqualTo(("txid",), 110))
    planned, rest = _planned(uri, "a", [LessThanOrEqual(("sequence_id",), 14), negated])
    assert planned == [("a", 1, 1, 10), ("a", 2, 1, 5)] and rest == [negated]
    planned, _ = _planned(uri, "a,b", [In(("stream",), ("b",)), EqualTo(("dlsn", "lssn"), 1)])
    assert planned == [("b", 1, 1, 10)]
    planned, _ = _planned(uri, "a", [In(("txid",), (3, 299, 150))], endingTxId="299")
    assert planned == [("a", 1, 4, 4), ("a", 16, 1, 1)]

    # the same through Spark: one partition per segment slice
    def partitions(on: bool, where: str) -> int:
        with pushdown(spark, on):
            return int(_read(spark, uri, "a").where(where).rdd.getNumPartitions())

    counts = {(on, w): partitions(on, w) for on in (False, True) for w in ("txid >= 105 AND txid < 125", "true")}
    print("partitions planned (pushdown, filter):", counts)
    assert counts[(False, "txid >= 105 AND txid < 125")] == 30
    assert counts[(True, "txid >= 105 AND txid < 125")] == 3
    assert counts[(True, "true")] == counts[(False, "true")] == 30
    with pushdown(spark, True):
        got = _rows(_read(spark, uri, "a").where("txid >= 105 AND txid < 125"))
    assert [r[2] for r in got] == list(range(105, 125))


# --- txids as timestamps: rewind to a specific time -----------------------------------------------
def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def test_txids_as_timestamps_rewind_to_a_time(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    t0 = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)
    # one record a minute for 6 hours, one segment per hour (as logSegmentRollingMinutes=60 would roll them)
    write_log(uri, "events", [[_ms(t0 + timedelta(minutes=60 * h + m)) for m in range(60)] for h in range(6)])
    lo, hi = t0 + timedelta(hours=2, minutes=30), t0 + timedelta(hours=3, minutes=15)
    expected = sorted(r for r in log_rows(uri, ["events"]) if _ms(lo) <= r[2] < _ms(hi))
    assert len(expected) == 45

    by_options = _read(spark, uri, "events", startingTxId=_ms(lo), endingTxId=_ms(hi))
    assert _rows(by_options) == expected
    assert by_options.rdd.getNumPartitions() == 2  # the 3rd and the 4th hour
    sql_lo, sql_hi = (f"unix_millis(timestamp'{t:%Y-%m-%d %H:%M:%S}+00:00')" for t in (lo, hi))
    where = f"txid >= {sql_lo} AND txid < {sql_hi}"
    for on in (False, True):
        with pushdown(spark, on):
            df = _read(spark, uri, "events").where(where)
            assert _rows(df) == expected
            df = _read(spark, uri, "events").where(where)
            assert df.rdd.getNumPartitions() == (2 if on else 6)

    # the sink's own txids are millisecond timestamps: rewind to the time between two writes
    spark.createDataFrame([(b"first",)], "value BINARY").write.format("distributedlog").option("uri", uri).option(
        "stream", "sunk"
    ).mode("append").save()
    time.sleep(0.01)
    between = int(time.time() * 1000)
    time.sleep(0.01)
    spark.createDataFrame([(b"second",)], "value BINARY").write.format("distributedlog").option("uri", uri).option(
        "stream", "sunk"
    ).mode("append").save()
    assert [r[4] for r in _rows(_read(spark, uri, "sunk", startingTxId=between))] == [b"second"]
    assert [r[4] for r in _rows(_read(spark, uri, "sunk", endingTxId=between))] == [b"first"]
    with pushdown(spark, True):
        assert [r[4] for r in _rows(_read(spark, uri, "sunk").where(f"txid >= {between}"))] == [b"second"]
