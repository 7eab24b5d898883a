"""Admission control at the reader level: the exact ends latestOffset chooses under each ReadLimit,
the maxTriggerDelay of minRecordsPerTrigger, and the frozen Trigger.AvailableNow target."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

import storage
from dl_spark import DistributedLogDataSource, decode_offsets
from dl_spark.planning import allocate
from tests.spark.helpers import append_in_process, log_rows, write_segments
from tests.storage.observe import wait_until


def _reader(uri: str, **opts: object) -> Any:
    options = {"uri": uri, "streams": "a,b", "startingOffsets": "earliest", **{k: str(v) for k, v in opts.items()}}
    ds = DistributedLogDataSource(options)
    return ds.streamReader(schema=ds.schema())


def _rows_between(reader: Any, start: Any, end: Any) -> int:
    return sum(b.num_rows for p in reader.partitions(start, end) for b in reader.read(p))


def test_allocate_is_proportional_exact_and_deterministic() -> None:
    assert allocate(10, [30, 10]) == [8, 2]
    assert allocate(5, [1, 1, 1, 1, 1, 1, 1]) == [1, 1, 1, 1, 1, 0, 0]
    assert allocate(100, [3, 4]) == [3, 4]
    assert sum(allocate(7, [5, 5, 5])) == 7


def test_max_rows_split_over_logs_and_segments(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"a"] * 6, [b"b"] * 6, [b"c"] * 6])
    write_segments(uri, "b", [[b"d"] * 6])
    r = _reader(uri, maxRecordsPerTrigger=8)
    start = r.initialOffset()
    seen = 0
    sizes = []
    while True:
        end = r.latestOffset(start, r.getDefaultReadLimit())
        if end == start:
            break
        n = _rows_between(r, start, end)
        sizes.append(n)
        seen += n
        start = end
    assert sizes == [8, 8, 8]
    assert seen == len(log_rows(uri, ["a", "b"]))
    assert r.reportLatestOffset() == start


def test_min_rows_waits_until_enough_or_max_trigger_delay(tmp_path: Path) -> None:
    """Below minRecordsPerTrigger no batch while maxTriggerDelay has not passed (a delay of an hour: it cannot
    have); once it has (two seconds), one batch with what there is, never before it; enough records: a batch at once."""
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"x"] * 3])
    write_segments(uri, "b", [[b"y"]])
    r = _reader(uri, minRecordsPerTrigger=6, maxTriggerDelay="1h")
    assert r.getDefaultReadLimit() == ReadMinRows(6)
    start = r.initialOffset()
    first = r.latestOffset(start, ReadMinRows(6))  # the first trigger fires at once (as Kafka's)
    assert _rows_between(r, start, first) == 4
    append_in_process(uri, "a", [b"z"] * 3, txid=10)
    assert r.latestOffset(first, ReadMinRows(6)) == first  # 3 < 6 and the hour has not passed: no batch
    append_in_process(uri, "b", [b"w"] * 3, txid=10)
    second = r.latestOffset(first, ReadMinRows(6))  # 6 records: enough, no waiting
    assert _rows_between(r, first, second) == 6
    assert r.latestOffset(second, ReadAllAvailable()) == second

    # a delay of a second: polled (not slept through) until the batch comes, which is not before the delay
    uri2 = f"distributedlog-local://{tmp_path / 'ns2'}"
    write_segments(uri2, "a", [[b"x"] * 3])
    write_segments(uri2, "b", [[b"y"]])
    delay_s = 2.0
    r2 = _reader(uri2, minRecordsPerTrigger=6, maxTriggerDelay=f"{delay_s:g}s")
    polls: list[tuple[float, object]] = []  # (when the call returned, its offset)
    with storage.open_namespace(uri2) as ns, ns.open_log("a").open_writer() as w:  # open already: appends are quick
        before_first = time.time()  # the delay counts from the first trigger, which is later
        first2 = r2.latestOffset(r2.initialOffset(), ReadMinRows(6))
        for t in (10, 11, 12):
            w.write(storage.LogRecord(t, b"z"))
        w.flush()

        def batch() -> bool:
            offset = r2.latestOffset(first2, ReadMinRows(6))
            polls.append((time.time(), offset))
            return bool(offset != first2)

        wait_until(batch, "a batch once maxTriggerDelay passed")
    assert polls[-1][0] >= before_first + delay_s  # not before the delay had passed
    assert all(offset == first2 for _, offset in polls[:-1])
    assert _rows_between(r2, first2, polls[-1][1]) == 3


def test_available_now_target_is_frozen_and_limits_still_apply(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"x"] * 7])
    write_segments(uri, "b", [[b"y"] * 5])
    r = _reader(uri, maxRecordsPerTrigger=5)
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    append_in_process(uri, "a", [b"late"] * 4, txid=100)  # after the target: never read by this run
    sizes = []
    while True:
        end = r.latestOffset(start, ReadMaxRows(5))
        if end == start:
            break
        sizes.append(_rows_between(r, start, end))
        start = end
    assert sizes == [5, 5, 2]
    assert decode_offsets(r.reportLatestOffset()) != decode_offsets(start)  # the late records exist


def test_partitions_are_deterministic(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"x%d" % i for i in range(40)], [b"y"] * 9])
    r = _reader(uri, streams="a", maxRecordsPerPartition=7, minPartitions=3)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    first = r.partitions(start, end)
    append_in_process(uri, "a", [b"more"] * 5, txid=1000, close=False)
    again = _reader(uri, streams="a", maxRecordsPerPartition=7, minPartitions=3).partitions(start, end)
    assert first == again and len(first) == 6 + 2
    assert all(p.spec.size <= 7 for p in first)
    assert r.partitions(end, end) == []
