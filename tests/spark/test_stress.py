"""A seeded stress test in the style of Spark's ``StreamTest.runStressTest``: random appends from
other processes, stops and restarts from the checkpoint, and checks of the cumulative exact answer
(every record exactly once, in a parquet file sink that is exactly-once itself)."""

from __future__ import annotations

import random
from pathlib import Path

from dl_spark import SCHEMA
from tests.spark.helpers import append_in_process, assert_rows, log_rows

#: Appends, stops, starts and checks of the seeded run.
ACTIONS = 24
SEED = 20240614


def test_random_appends_stops_restarts_and_checks(spark, tmp_path: Path) -> None:
    rnd = random.Random(SEED)
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    logs = ["s-a", "s-b", "s-c"]
    txids = dict.fromkeys(logs, 1)
    append_in_process(uri, "s-a", [b"seed"], txid=0)
    query = None

    def start():
        df = (
            spark.readStream.format("distributedlog")
            .option("uri", uri)
            .option("streamPattern", "s-.*")
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", str(rnd.choice([3, 10, 1000])))
            .option("maxRecordsPerPartition", str(rnd.choice([2, 5, 100])))
            .load()
        )
        return df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt).start()

    def check() -> None:
        assert query is not None
        query.processAllAvailable()
        assert_rows(spark, spark.read.schema(SCHEMA).parquet(out), log_rows(uri, logs), ignore_nullable=True)

    done = {"append": 0, "stop": 0, "start": 0, "check": 0}
    try:
        query = start()
        done["start"] += 1
        step = 0
        while sum(done.values()) < ACTIONS:
            step += 1
            action = rnd.choices(["append", "stop", "start", "check"], weights=[5, 1, 1, 2])[0]
            if action == "append":
                log = rnd.choice(logs)
                n = rnd.randint(1, 40)
                payloads = [b"%s-%d-%d" % (log.encode(), step, i) for i in range(n)]
                append_in_process(uri, log, payloads, txids[log], close=rnd.random() < 0.7)
                txids[log] += n
            elif action == "stop" and query is not None:
                query.stop()
                query = None
            elif action == "start" and query is None:
                query = start()
            elif action == "check":
                if query is None:
                    query = start()
                check()
            else:
                continue
            done[action] += 1
        if query is None:
            query = start()
        check()
    finally:
        if query is not None:
            query.stop()
    assert sum(done.values()) >= ACTIONS and done["append"] > 5 and done["stop"] > 0
