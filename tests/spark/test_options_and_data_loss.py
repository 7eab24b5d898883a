"""Bad options fail when the DataFrame is defined (or the stream starts) with one clear line, and
failOnDataLoss decides what a truncated or purged start does."""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException

import storage
from dl_spark import DataLossError, DistributedLogDataSource
from tests.spark.helpers import CONF, assert_rows, log_rows, off, write_segments


@pytest.fixture
def uri(tmp_path: Path) -> str:
    u = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(
        u, "a", [[b"a%d" % i for i in range(5)], [b"b%d" % i for i in range(5)], [b"c%d" % i for i in range(5)]]
    )
    return u


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"streams": "a"}, "option uri is required"),
        ({"streams": "a", "streamPattern": "a.*"}, "streams and streamPattern are exclusive"),
        ({}, "one of the options streams"),
        ({"streams": "a", "startingOffsets": "{not json"}, "startingOffsets is not valid JSON"),
        ({"streams": "a", "startingOffsets": '{"a": "1,x,0"}'}, "offset of log 'a'"),
        ({"streams": "a", "startingOffsets": '{"zz": "1,0,0"}'}, "names log 'zz', which is not one of"),
        ({"streams": "a,nope"}, "do not exist"),
        ({"streams": "a", "maxRecordsPerTrigger": "lots"}, "maxRecordsPerTrigger must be an integer"),
        ({"streams": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss must be 'true' or 'false'"),
        ({"streams": "a", "dlog.nosuchkey": "1"}, "option dlog.nosuchkey"),
        ({"streams": "a", "dlog.readAheadMaxRecords": "many"}, "key 'readAheadMaxRecords': expected an integer"),
    ],
)
def test_bad_options_fail_at_load(spark, uri: str, options: dict[str, str], message: str) -> None:
    opts = dict(options)
    if "uri" not in message:
        opts["uri"] = uri
    for reader in (spark.read, spark.readStream):
        with pytest.raises(AnalysisException) as err:
            reader.format("distributedlog").options(**opts).load()
        assert message in str(err.value)
        assert any(message in line and "SourceOptionError" in line for line in str(err.value).splitlines())


def test_dlog_options_configure_the_namespace_the_source_opens(spark, uri: str) -> None:
    """``dlog.<key>`` options (as the sink's, and Kafka's ``kafka.<key>``) reach the source's namespace in the
    driver and in every reading task; the rows are the same."""
    from dl_spark.options import parse_source_options

    opts = parse_source_options({"uri": uri, "streams": "a", "dlog.readaheadmaxrecords": "7"})
    assert opts.conf == (("readAheadMaxRecords", 7),)
    df = spark.read.format("distributedlog").options(uri=uri, streams="a", **{"dlog.readAheadMaxRecords": "7"}).load()
    assert_rows(spark, df, log_rows(uri, ["a"]))


def test_ending_offsets_on_a_stream_fails_before_reading(spark, uri: str) -> None:
    df = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "a")
    df = df.option("endingOffsets", "latest").option("startingOffsets", "earliest").load()
    name = f"q_{uuid.uuid4().hex[:8]}"
    q = df.writeStream.format("memory").queryName(name).start()
    with pytest.raises(StreamingQueryException) as err:
        q.awaitTermination(60)
    assert "option endingOffsets is for batch queries only" in str(err.value)
    assert spark.table(name).count() == 0


def _truncate(uri: str, log: str, dlsn: storage.DLSN) -> None:
    with storage.open_namespace(uri, CONF) as ns, ns.open_log(log).open_writer() as w:
        assert w.truncate(dlsn)


def test_truncated_start_fails_or_skips(spark, uri: str) -> None:
    rows = log_rows(uri, ["a"])
    _truncate(uri, "a", storage.DLSN(*rows[7][1]))  # segment 1 truncated, segment 2 from its 3rd record
    start = json.dumps({"a": off(rows[1][1])})

    def stream(fail: bool):
        df = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "a")
        df = df.option("startingOffsets", start).option("failOnDataLoss", str(fail).lower()).load()
        return df.writeStream.format("memory").queryName(f"q_{uuid.uuid4().hex[:8]}").trigger(availableNow=True)

    q = stream(True).start()
    with pytest.raises(StreamingQueryException) as err:
        q.awaitTermination(60)
    text = str(err.value)
    assert "DataLossError" in text and f"log 'a': position {off(rows[1][1])} was truncated" in text
    q = stream(False).start()
    q.awaitTermination(60)
    assert_rows(spark, spark.table(q.name), rows[7:])
    batch = spark.read.format("distributedlog").option("uri", uri).option("streams", "a")
    assert_rows(spark, batch.option("startingOffsets", start).option("failOnDataLoss", "false").load(), rows[7:])


def _reader(uri: str, **opts: str):
    options = {"uri": uri, "streams": "a", **opts}
    return DistributedLogDataSource(options).streamReader(schema=DistributedLogDataSource(options).schema())


def test_data_loss_warning_and_purge(uri: str, caplog: pytest.LogCaptureFixture) -> None:
    rows = log_rows(uri, ["a"])
    _truncate(uri, "a", storage.DLSN(*rows[7][1]))
    start = {"a": off(rows[1][1])}
    with caplog.at_level(logging.WARNING, logger="dl_spark.planning"):
        r = _reader(uri, failOnDataLoss="false")
        r.latestOffset(start, r.getDefaultReadLimit())
    assert any("was truncated" in m and "failOnDataLoss=false" in m for m in caplog.messages)
    # purge the truncated segment: the position was purged (latestOffset recorded the reader's
    # position as a subscriber, which protects it from purges unless told to ignore subscribers)
    with storage.open_namespace(uri, {**CONF, "retentionIgnoresSubscribers": True}) as ns:
        dlm = ns.open_log("a")
        time.sleep(0.01)
        dlm.purge_older_than(int(time.time() * 1000) - 1)  # deletes every completed segment but the newest
        assert [s.lssn for s in dlm.log_segments()] == [3]
    with pytest.raises(DataLossError, match=r"log 'a': position 1,1,0 was purged"):
        r = _reader(uri)
        r.latestOffset(start, r.getDefaultReadLimit())


def test_deleted_log_is_data_loss(uri: str) -> None:
    r = _reader(uri, startingOffsets="earliest")
    start = r.initialOffset()
    with storage.open_namespace(uri, CONF) as ns:
        ns.delete_log("a")
    with pytest.raises(DataLossError, match="log 'a' was deleted"):
        r.latestOffset(start, r.getDefaultReadLimit())
