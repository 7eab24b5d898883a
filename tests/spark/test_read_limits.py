"""Admission control at the reader level: the exact ends latestOffset chooses under each ReadLimit,
the maxTriggerDelay of minRecordsPerTrigger, and the frozen Trigger.AvailableNow target."""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

import storage
from dl_spark import DistributedLogDataSource, decode_offsets
from dl_spark.planning import allocate
from tests.spark.helpers import append_in_process, log_rows, write_segments


def _reader(uri: str, **opts: object):
    options = {"uri": uri, "streams": "a,b", "startingOffsets": "earliest", **{k: str(v) for k, v in opts.items()}}
    ds = DistributedLogDataSource(options)
    return ds.streamReader(schema=ds.schema())


def _rows_between(reader, start, end) -> int:
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
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "a", [[b"x"] * 3])
    write_segments(uri, "b", [[b"y"]])
    delay_s = 2.0
    r = _reader(uri, minRecordsPerTrigger=6, maxTriggerDelay=f"{delay_s:g}s")
    assert r.getDefaultReadLimit() == ReadMinRows(6)
    start = r.initialOffset()
    polls: list[tuple[float, object]] = []  # (when the call returned, its offset)
    with storage.open_namespace(uri) as ns, ns.open_log("a").open_writer() as w:  # open already: appends are quick
        before_first = time.time()  # the delay counts from the first trigger, which is later
        first = r.latestOffset(start, ReadMinRows(6))  # the first trigger fires at once (as Kafka's)
        for t in (10, 11, 12):
            w.write(storage.LogRecord(t, b"z"))
        w.flush()
        # 3 < 6: no batch until the delay has passed, then one with what there is (polled, not slept through)
        while not polls or polls[-1][1] == first:
            offset = r.latestOffset(first, ReadMinRows(6))
            polls.append((time.time(), offset))
            assert len(polls) < 2000, "no batch long after maxTriggerDelay"
            time.sleep(0.02)
    second = polls[-1][1]
    early = [offset for at, offset in polls if at < before_first + delay_s]
    assert early and all(offset == first for offset in early)  # asked before the delay passed: no batch
    assert polls[-1][0] >= before_first + delay_s  # the batch came once it had passed
    assert _rows_between(r, start, first) == 4
    assert _rows_between(r, first, second) == 3
    append_in_process(uri, "b", [b"w"] * 6, txid=10)
    third = r.latestOffset(second, ReadMinRows(6))  # enough records: no waiting
    assert _rows_between(r, second, third) == 6
    assert r.latestOffset(third, ReadAllAvailable()) == third


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
