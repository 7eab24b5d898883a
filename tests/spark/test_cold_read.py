"""spark.read and spark.readStream across the hot/cold boundary: a log whose older segments live only in the cold
store (their hot copies purged), a hot completed segment and an in-progress one, read with exact rows and positioned
by txid inside a cold segment."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

import storage
from storage.log.layout import LogMetadata
from storage.log.offload import offload_log
from storage.log.tiered import TieredSegmentStore
from tests.ceph import RadosGateway, radosgw  # noqa: F401
from tests.spark.helpers import CONF, assert_rows, log_rows, write_segments
from tests.zk import ZooKeeperServer


# The filesystem tier gets the same reads from every core reader in tests/storage/cold (its behaviour suite runs on
# both tiers); Spark's partitions read through the same TieredSegmentStore, so here the tier that needs options
# passed to the workers (S3 credentials) is enough, and a Spark read costs half a minute on a loaded machine.
@pytest.mark.parametrize("cold_kind", ["s3"])
def test_batch_read_across_hot_and_cold_segments(
    spark: object,
    zk_server: ZooKeeperServer,
    zk_chroot: str,
    tmp_path: Path,
    cold_kind: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On S3 (the session Ceph's radosgw; ``cold_kind="file"`` runs the same on a filesystem tier). Spark's Python
    workers get the S3 credentials from the source's ``dlog.coldStoreAccessKey`` / ``dlog.coldStoreSecretKey``
    options; this test process (writing, offloading, reading with the core library) from the usual AWS variables."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    cold, options = f"file://{tmp_path / 'cold'}", {}
    if cold_kind == "s3":
        gw: RadosGateway = request.getfixturevalue("radosgw")
        cold = gw.cold_uri(f"spark-{uuid.uuid4().hex[:12]}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", gw.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", gw.secret_key)
        options = {"dlog.coldStoreAccessKey": gw.access_key, "dlog.coldStoreSecretKey": gw.secret_key}
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}", cold=cold)
    segments = [[f"s{s}-{i}".encode() for i in range(n)] for s, n in enumerate((40, 25, 30))]
    write_segments(uri, "c", segments)
    before = log_rows(uri, ["c"])  # read from the hot store, before anything was offloaded
    assert [r[4] for r in before] == [p for seg in segments for p in seg]
    with storage.open_namespace(uri, dict(CONF)) as ns:
        tiered = ns.segstore
        assert isinstance(tiered, TieredSegmentStore)
        dlm = ns.open_log("c")
        offload_log(tiered, LogMetadata(ns.metastore, ns.paths_of("c")))
        time.sleep(0.01)
        dlm.purge_segments(int(time.time() * 1000) - 1)
        assert [tiered.where(s.ledger_id) for s in dlm.log_segments()] == ["cold", "cold", "both"]
        w = dlm.open_writer()  # an in-progress segment, hot only
        for i in range(5):
            w.write(storage.LogRecord(1000 + i, f"live-{i}".encode()))
        w.flush()
        try:
            live = log_rows(uri, ["c"], start=storage.DLSN(4, 0, 0))
            assert [r[4] for r in live] == [f"live-{i}".encode() for i in range(5)]
            expected = before + live
            df = spark.read.format("distributedlog").option("uri", uri).option("streams", "c").options(**options).load()  # type: ignore[attr-defined]
            assert_rows(spark, df, expected)
            mid = (
                spark.read.format("distributedlog")  # type: ignore[attr-defined]
                .option("uri", uri)
                .option("streams", "c")
                .option("startingTxId", 50)  # inside the second segment, a cold one
                .options(**options)
                .load()
            )
            assert_rows(spark, mid, expected[49:])
            name = f"cold_stream_{cold_kind}"  # the streaming source plans and reads the cold segments too
            query = (
                spark.readStream.format("distributedlog")  # type: ignore[attr-defined]
                .option("uri", uri)
                .option("streams", "c")
                .option("startingOffsets", "earliest")
                .option("maxRecordsPerTrigger", 40)
                .options(**options)
                .load()
                .writeStream.format("memory")
                .queryName(name)
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(300)
            assert_rows(spark, spark.table(name), expected)  # type: ignore[attr-defined]
            print(
                f"spark read {len(expected)} rows, {len(segments[0]) + len(segments[1])} of them from {cold_kind} cold"
            )
        finally:
            w.close()
