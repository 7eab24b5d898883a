"""A source over many logs: small slices packed into few partitions (every record exactly once, in DLSN order
per log), a stream reader that keeps its positions through a ZooKeeper session loss (never backwards, no
record skipped), and a streaming query over 2,000 logs on ZooKeeper end to end."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import storage
from dl_spark import DistributedLogDataSource, _handles, decode_offsets
from dl_spark.planning import PartitionSpec, coalesce
from storage.formats.segment_metadata import SegmentSlice
from tests.spark.helpers import write_segments
from tests.zk import ZooKeeperServer, expire_session


def _reader(uri: str, **opts: object) -> Any:
    options = {"uri": uri, "startingOffsets": "earliest", **{k: str(v) for k, v in opts.items()}}
    ds = DistributedLogDataSource(options)
    return ds.streamReader(schema=ds.schema())


def _rows(reader: Any, parts: list[Any]) -> list[tuple[str, tuple[int, int, int], int]]:
    """(stream, dlsn, txid) of every row of ``parts``, in the order the partitions yield them."""
    out = []
    for p in parts:
        for b in reader.read(p):
            d = b.to_pydict()
            for s, dl, t in zip(d["stream"], d["dlsn"], d["txid"], strict=True):
                out.append((s, (dl["lssn"], dl["entry_id"], dl["slot_id"]), t))
    return out


def _spec(log: str, size: int) -> PartitionSpec:
    return PartitionSpec(log, SegmentSlice(1, 1, False, 0, 0, 0, 1, size))


def test_coalesce_packs_small_slices_only() -> None:
    specs = [_spec("a", 3), _spec("b", 50), _spec("c", 2), _spec("d", 2), _spec("e", 4)]
    assert coalesce(specs, min_records_per_partition=None, max_partitions=None) == [[s] for s in specs]
    sizes = [[s.size for s in g] for g in coalesce(specs, min_records_per_partition=5, max_partitions=None)]
    assert sizes == [[50], [3, 2], [2, 4]]
    two = coalesce(specs, min_records_per_partition=None, max_partitions=2)
    assert len(two) <= 2 and [s for g in two for s in g if s.size < 50] == [specs[0], *specs[2:]]
    capped = coalesce(specs, min_records_per_partition=100, max_partitions=None, max_records_per_partition=6)
    assert all(sum(s.size for s in g) <= 6 for g in capped if len(g) > 1)
    assert sorted(s.log for g in capped for s in g) == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("opts", [{"minRecordsPerPartition": 40}, {"maxPartitions": 3}, {"maxPartitions": 1}])
def test_packed_partitions_read_every_record_once_in_order(tmp_path: Path, opts: dict[str, int]) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    expected: dict[str, list[int]] = {}
    for i in range(30):
        segments = [[b"x"] * (1 + (i * 7 + k) % 9) for k in range(1 + i % 3)]
        if i == 5:
            segments.append([b"big"] * 120)  # a large slice keeps a partition of its own
        end = write_segments(uri, f"log{i:02d}", segments, txid=1000 * i + 1)
        expected[f"log{i:02d}"] = list(range(1000 * i + 1, end))
    r = _reader(uri, streamPattern="log.*", **opts)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    parts = r.partitions(start, end)
    slices = sum(len(p.specs) for p in parts)
    assert slices > 60 and len(parts) < 12
    if "maxPartitions" in opts:
        assert len(parts) <= opts["maxPartitions"]
    by_log: dict[str, list[tuple[tuple[int, int, int], int]]] = defaultdict(list)
    for p in parts:
        in_part: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        for s, d, t in _rows(r, [p]):
            by_log[s].append((d, t))
            in_part[s].append(d)
        assert all(v == sorted(v) for v in in_part.values())  # a partition yields each log in DLSN order
    assert {s: sorted(t for _, t in v) for s, v in by_log.items()} == expected  # every record once
    for v in by_log.values():  # and txids follow DLSNs
        assert [t for _, t in sorted(v)] == sorted(t for _, t in v)
    again = _reader(uri, streamPattern="log.*", **opts).partitions(start, end)
    assert again == parts  # deterministic: a restarted query plans the same batch the same way


@pytest.fixture
def zk_uri(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> Iterator[str]:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    yield uri
    _handles.close_all()


def test_stream_reader_through_a_session_loss(zk_uri: str, zk_server: ZooKeeperServer) -> None:
    """Writers write 15 rounds to 40 logs while the reader triggers; its ZooKeeper session is expired once a
    quarter and once two thirds of the records were read: the reader's ends never move backwards, and the
    batches read every record exactly once, in order."""
    names = [f"w{i:02d}" for i in range(40)]
    rounds = 15
    total = rounds * len(names)
    with storage.open_namespace(zk_uri, {"logSegmentRollingMinutes": 0, "maxLogSegmentBytes": 4096}) as wns:
        writers = {n: wns.open_log(n).open_writer() for n in names}

        def produce() -> None:
            for txid in range(1, rounds + 1):
                for n, w in writers.items():
                    w.write(storage.LogRecord(txid, b"%s-%d" % (n.encode(), txid)))
                    w.flush()

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        r = _reader(zk_uri, streamPattern="w.*", maxRecordsPerTrigger=100, minRecordsPerPartition=50)
        start = r.initialOffset()
        seen: list[tuple[str, tuple[int, int, int], int]] = []
        store = _handles.namespace(zk_uri, create=False).metastore
        expiries = [total // 4, 2 * total // 3]
        try:
            for _ in range(5000):  # until every record was read (a bound, not a time)
                if expiries and len(seen) >= expiries[0]:
                    expiries.pop(0)
                    expire_session(store, zk_server.hosts)
                end = r.latestOffset(start, ReadMaxRows(100))
                s, e = decode_offsets(start), decode_offsets(end)
                assert all(e[n] >= s[n] for n in s if n in e), "a position moved backwards"
                seen += _rows(r, r.partitions(start, end))
                r.commit(end)
                idle, start = end == start, end
                if len(seen) >= total:
                    break
                if idle:
                    time.sleep(0.01)  # nothing new yet: let the writers run
        finally:
            t.join(120)
            for w in writers.values():
                w.close()
    assert not expiries, "the session was not expired twice"
    got: dict[str, list[int]] = defaultdict(list)
    for s_, _, txid in seen:
        got[s_].append(txid)
    assert got == {n: list(range(1, rounds + 1)) for n in names}


def test_streaming_query_over_2000_logs(spark: Any, zk_uri: str, tmp_path: Path) -> None:
    """2,000 logs on ZooKeeper, a streamPattern query packing them into few partitions; 100 logs appear and
    others get records while it runs: every record is delivered exactly once, and each batch is a handful of
    tasks, not hundreds."""
    names = [f"m{i:04d}" for i in range(2000)]
    with storage.open_namespace(zk_uri) as ns, ThreadPoolExecutor(8) as pool:
        for n in names:
            ns.create_log(n)

        def write(name: str, txid: int) -> None:
            with ns.open_log(name).open_writer() as w:
                w.write(storage.LogRecord(txid, b"%s/%d" % (name.encode(), txid)))

        first = names[::5]
        list(pool.map(lambda n: write(n, 1), first))
        expected = {(n, 1) for n in first}
        q = (
            spark.readStream.format("distributedlog")
            .option("uri", zk_uri)
            .option("streamPattern", "m.*")
            .option("startingOffsets", "earliest")
            .option("maxPartitions", 4)
            .load()
            .selectExpr("stream", "txid")
            .writeStream.format("memory")
            .queryName("many_logs")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start()
        )
        try:
            q.processAllAvailable()
            more = names[1::10] + [f"m{i:04d}" for i in range(2000, 2100)]
            list(pool.map(lambda n: write(n, 2), more))
            expected |= {(n, 2) for n in more}
            q.processAllAvailable()
            batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
        finally:
            q.stop()
    rows = [(r["stream"], r["txid"]) for r in spark.sql("SELECT stream, txid FROM many_logs").collect()]
    assert len(rows) == len(set(rows)) == len(expected) == 400 + 300
    assert set(rows) == expected
    assert sum(p["numInputRows"] for p in batches) == 700
    written = sorted({n for n, _ in expected})
    with storage.open_namespace(zk_uri) as ns:  # the query's positions, recorded in bulk: nothing left behind
        lags = [lag for n in written for lag in ns.open_log(n).subscriber_lag()]
    assert len(lags) == len(written) == 700 and all(lag.records_behind == 0 for lag in lags)
