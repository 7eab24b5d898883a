"""The stream reader records its committed positions in each log's subscriptions store, so `dlog lag`
shows a running query's lag and 0 once it caught up (availableNow runs included)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import storage
from dl_spark import SourceOptionError
from dl_spark.options import default_subscriber_id, parse_source_options
from tests.spark.helpers import write_segments

DLOG = str(Path(sys.executable).parent / "dlog")


def _lag(uri: str, log: str) -> dict[str, int]:
    """`dlog lag LOG` in a process of its own: {subscriber: recordsBehind}."""
    out = subprocess.run([DLOG, "--uri", uri, "lag", log], capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines()[1:]:
        sid, _pos, behind, _bytes = line.split("\t")
        rows[sid] = int(behind.split("=")[1])
    return rows


def _wait_for(cond, timeout_s: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"condition not met within {timeout_s} s")


def test_running_query_lag_then_zero(spark, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    total = 3000
    write_segments(uri, "in", [[b"r%05d" % i for i in range(k, k + 1000)] for k in range(0, total, 1000)])
    q = (
        spark.readStream.format("distributedlog")
        .option("uri", uri)
        .option("streams", "in")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", 300)
        .option("subscriberId", "lagging-query")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        seen: list[int] = []

        def behind_midway() -> bool:
            n = _lag(uri, "in").get("lagging-query")
            if n is not None:
                seen.append(n)
            return n is not None and 0 < n < total

        _wait_for(behind_midway)
        q.processAllAvailable()
        _wait_for(lambda: _lag(uri, "in").get("lagging-query") == 0)
    finally:
        q.stop()
    assert seen and seen[0] <= total
    assert any(0 < n < total for n in seen)
    with storage.open_namespace(uri) as ns:
        dlm = ns.open_log("in")
        pos = dlm.subscriptions().get("lagging-query")
        assert pos is not None and pos > dlm.last_dlsn()  # the next record to read: after the last one


def test_available_now_records_its_last_batch(spark, tmp_path: Path) -> None:
    """Spark never calls commit() after an availableNow run's last batch: the position is recorded all the same."""
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "in", [[b"a"] * 500, [b"b"] * 500])
    q = (
        spark.readStream.format("distributedlog")
        .option("uri", uri)
        .option("streams", "in")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", 400)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    default_id = default_subscriber_id(uri, ("in",), None)
    assert _lag(uri, "in") == {default_id: 0}
    with storage.open_namespace(uri) as ns:
        (lag,) = ns.open_log("in").subscriber_lag()
    assert (lag.subscriber_id, lag.records_behind, lag.bytes_behind) == (default_id, 0, 0)


def test_subscriber_id_option() -> None:
    base = {"uri": "distributedlog-local:///x", "streams": "a,b"}
    assert parse_source_options(base).subscriber_id == default_subscriber_id(base["uri"], ("a", "b"), None)
    assert parse_source_options(base).subscriber_id == parse_source_options(dict(base)).subscriber_id
    other = parse_source_options({**base, "streams": "a"}).subscriber_id
    assert other.startswith("spark-") and other != parse_source_options(base).subscriber_id
    assert parse_source_options({**base, "subscriberid": "etl-1"}).subscriber_id == "etl-1"
    with pytest.raises(SourceOptionError, match="option subscriberId: invalid subscriber id 'a/b'"):
        parse_source_options({**base, "subscriberid": "a/b"})
