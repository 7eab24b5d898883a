"""Many logs in one namespace: what 100, 1,000 and 10,000 logs cost the namespace and the Spark source.

For each size, in a fresh ZooKeeper namespace (one private ZooKeeper server, ``forceSync`` as shipped,
segments in local files) this measures:

* **create**: ``ns.create_log`` for every log, one after another (goal for 10,000: <= 30 s);
* **list**: ``dlog list`` as a user runs it (a new process: interpreter start included) and
  ``ns.list_logs()`` in a process that listed once before (goal for 10,000: ``dlog list`` <= 1 s);
* **source trigger**: what one micro-batch costs the stream reader's planning (``latestOffset`` +
  ``partitions`` + ``commit``, driven directly as Spark's streaming runner does) over ``streamPattern``
  matching every log, after a writer process wrote one record to every log (long-lived writers, as
  producers keep them: the segment lists do not change, the tails do). The median of several such
  triggers, the first trigger (every log read the first time), and a trigger with no new records.
  Goals: <= 0.2 s for 1,000 logs, <= 1.5 s for 10,000;
* **tasks**: Spark partitions of such a batch by default (one per segment slice) and with
  ``maxPartitions=8`` (small slices packed across logs);
* **query**: a real ``readStream`` query over all the logs (``Trigger.AvailableNow``, ``maxPartitions=8``,
  the ``noop`` sink): seconds from start to end, reading every record once.

Then the same sizes of streams on two write proxies (bench/_scale_proxy.py: first and steady rounds of one
client, memory per idle stream, failover, idle release, the history checker's line).

    .venv/bin/python bench/bench_scale.py [--sizes 100,1000,10000] [--rounds 3] [--parts source,proxy]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _common import REPO, local_spark_session, make_base, remove_base

import storage

GOALS = {"create_10000": 30.0, "list_10000": 1.0, "trigger_1000": 0.2, "trigger_10000": 1.5}


def log_names(n: int) -> list[str]:
    return [f"s{i:05d}" for i in range(n)]


# --- the writer process ----------------------------------------------------------------------------
#: Logs per writer process: a writer holds threads of its own, and thousands of them in one process slow
#: every one of them down (the proxy's concern; here the writers only have to write).
LOGS_PER_WRITER_PROCESS = 1000


def writer_main(uri: str, names: list[str], conn: Connection) -> None:
    """Open a writer on every log of ``names`` (8 at a time), then on each ``"round"`` message write and flush
    one record to every log and answer with the seconds it took."""
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with storage.open_namespace(uri) as ns, ThreadPoolExecutor(8) as pool:
        writers = list(pool.map(lambda name: ns.open_log(name).open_writer(), names))
        conn.send("ready")
        txid = 0
        while conn.recv() == "round":
            txid += 1
            started = time.perf_counter()

            def one(w: storage.LogWriter, t: int = txid) -> None:
                w.write(storage.LogRecord(t, b"record %d" % t))
                w.flush()

            list(pool.map(one, writers))
            conn.send(time.perf_counter() - started)
        for w in writers:
            w.close()


class Writers:
    """The writer processes of one namespace (:data:`LOGS_PER_WRITER_PROCESS` logs each)."""

    def __init__(self, uri: str, n: int) -> None:
        ctx = mp.get_context("forkserver")
        names = log_names(n)
        self.children: list[tuple[Connection, Any]] = []
        for i in range(0, n, LOGS_PER_WRITER_PROCESS):
            conn, child = ctx.Pipe()
            proc = ctx.Process(target=writer_main, args=(uri, names[i : i + LOGS_PER_WRITER_PROCESS], child))
            proc.daemon = True
            proc.start()
            self.children.append((conn, proc))
        for conn, _ in self.children:
            if conn.recv() != "ready":
                raise RuntimeError("a writer process failed to open its writers")

    def round(self) -> float:
        """Every process writes its round at once; the slowest one's seconds."""
        for conn, _ in self.children:
            conn.send("round")
        return max(float(conn.recv()) for conn, _ in self.children)

    def close(self) -> None:
        for conn, _ in self.children:
            conn.send("stop")
        for _, proc in self.children:
            proc.join(120)


# --- measurements ----------------------------------------------------------------------------------
def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - started, out


def stream_reader(uri: str, **opts: str) -> Any:
    from dl_spark import DistributedLogDataSource

    ds = DistributedLogDataSource({"uri": uri, "streamPattern": "s.*", "startingOffsets": "earliest", **opts})
    return ds.streamReader(schema=ds.schema())


def trigger(reader: Any, start: dict[str, str]) -> tuple[dict[str, str], dict[str, float], int]:
    """One micro-batch's planning: (end, seconds by step, partitions)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    t0 = time.perf_counter()
    end = reader.latestOffset(start, ReadAllAvailable())
    t1 = time.perf_counter()
    parts = reader.partitions(start, end)
    t2 = time.perf_counter()
    reader.commit(end)
    t3 = time.perf_counter()
    return end, {"latestOffset": t1 - t0, "partitions": t2 - t1, "commit": t3 - t2, "trigger": t3 - t0}, len(parts)


def measure(spark: Any, zk_hosts: str, base: Path, n: int, rounds: int) -> dict[str, Any]:
    uri = f"distributedlog://{zk_hosts}/scale-{n}-{uuid.uuid4().hex[:8]}"
    storage.bind_namespace(uri, segments=f"file://{base / f'segments-{n}'}")
    row: dict[str, Any] = {"logs": n}
    with storage.open_namespace(uri) as ns:
        names = log_names(n)
        row["create"], _ = timed(lambda: [ns.create_log(x) for x in names])
        ns.list_logs()
        row["list_api"], listed = timed(ns.list_logs)
        assert len(listed) == n
    dlog = str(Path(sys.executable).parent / "dlog")
    row["dlog_list"], out = timed(lambda: subprocess.run([dlog, "--uri", uri, "list"], capture_output=True, check=True))
    assert len(out.stdout.splitlines()) >= n
    print(f"  {n:,} logs: created in {row['create']:.1f} s; opening writers ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    writers = Writers(uri, n)
    row["writers_open"] = time.perf_counter() - started
    try:
        writers.round()
        reader = stream_reader(uri)
        packed = stream_reader(uri, maxPartitions="8")
        start = reader.initialOffset()
        pstart = packed.initialOffset()
        start, row["first"], row["tasks_first"] = trigger(reader, start)
        pstart, _, row["tasks_packed_first"] = trigger(packed, pstart)
        steady: list[dict[str, float]] = []
        for _ in range(rounds):
            writers.round()
            start, took, row["tasks"] = trigger(reader, start)
            pstart, _, row["tasks_packed"] = trigger(packed, pstart)
            steady.append(took)
        row["steady"] = {k: statistics.median(t[k] for t in steady) for k in steady[0]}
        _, row["idle"], _ = trigger(reader, start)
    finally:
        writers.close()
    query = (
        spark.readStream.format("distributedlog")
        .option("uri", uri)
        .option("streamPattern", "s.*")
        .option("startingOffsets", "earliest")
        .option("maxPartitions", 8)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(base / f"ckpt-{n}"))
        .trigger(availableNow=True)
    )
    started = time.perf_counter()
    q = query.start()
    q.awaitTermination()
    row["query"] = time.perf_counter() - started
    row["query_rows"] = sum(p["numInputRows"] for p in q.recentProgress)
    expected = n * (rounds + 1)
    if row["query_rows"] != expected:
        raise AssertionError(f"the query read {row['query_rows']} records, not {expected}")
    return row


# --- the table -------------------------------------------------------------------------------------
def verdict(row: dict[str, Any], key: str, value: float) -> str:
    goal = GOALS.get(f"{key}_{row['logs']}")
    if goal is None:
        return f"{value:.2f} s"
    return f"{value:.2f} s ({'meets' if value <= goal else 'MISSES'} <= {goal:g} s)"


def render(rows: Sequence[dict[str, Any]], rounds: int) -> str:
    lines = [
        "| logs | create all | `dlog list` (process) | `list_logs()` | source trigger (median) "
        "| latestOffset / partitions / commit | first trigger | idle trigger | Spark tasks (default / "
        "`maxPartitions=8`) | availableNow query |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["steady"]
        lines.append(
            f"| {r['logs']:,} | {verdict(r, 'create', r['create'])} | {verdict(r, 'list', r['dlog_list'])} "
            f"| {r['list_api']:.3f} s | {verdict(r, 'trigger', s['trigger'])} "
            f"| {s['latestOffset']:.3f} / {s['partitions']:.3f} / {s['commit']:.3f} s | {r['first']['trigger']:.2f} s "
            f"| {r['idle']['trigger']:.3f} s | {r['tasks']:,} / {r['tasks_packed']} "
            f"| {r['query']:.1f} s, {r['query_rows']:,} rows |"
        )
    lines += [
        "",
        f"Source trigger: the median of {rounds} micro-batches, each after a writer process wrote one record to "
        "every log; the first trigger reads every log's metadata once (and creates the query's subscriber "
        "positions); an idle trigger finds nothing new. One private ZooKeeper server (forceSync=yes), segments "
        "in local files, one machine.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100,1000,10000", help="numbers of logs (default 100,1000,10000)")
    parser.add_argument("--rounds", type=int, default=3, help="steady triggers per size (default 3)")
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: under bench-data)")
    parser.add_argument("--parts", default="source,proxy", help="what to measure (default source,proxy)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    sys.path.insert(0, str(REPO / "bench"))
    from bench_zookeeper import start_zookeeper

    base, created_parent = make_base("scale", args.dir)
    server = start_zookeeper(base / "zk", True)
    parts = set(args.parts.split(","))
    spark = local_spark_session("local[2]") if "source" in parts else None
    try:
        if spark is not None:
            rows = [measure(spark, server.hosts, base, n, args.rounds) for n in sizes]
            print(render(rows, args.rounds))
        if "proxy" in parts:
            from _scale_proxy import measure_proxies, render_proxies

            proxy_rows = []
            for n in sizes:
                print(f"  {n:,} streams on two proxies ...", file=sys.stderr, flush=True)
                proxy_rows.append(measure_proxies(server.hosts, base, n, args.rounds))
            print()
            print(render_proxies(proxy_rows, args.rounds))
    finally:
        if spark is not None:
            spark.stop()
        server.stop()
        remove_base(base, created_parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
