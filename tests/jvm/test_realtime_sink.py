"""The JVM ``ForeachWriter`` sink of Spark's Real-Time Mode (``dl_spark.realtime.write_stream``): each row appended to a
DistributedLog log as it arrives, exactly once for a stateless query of one source log.

As in ``test_realtime_source``, the Spark scenarios run in one Spark application of their own, started in a child
process (``python -m tests.jvm.test_realtime_sink JOB_DIR ZK_HOSTS``) whose ``result.json`` the tests check. The job
waits on what it can observe (records in the output log, the end offset of a committed batch), with a deadline only
against a hang.

Scenarios:

* a real-time query from a source log into an output log, with a batch longer than the scenario: the output holds
  every record (payload, in order, transaction id = the source record's sequence id) while the first batch is still
  running, also the records appended while it runs;
* that query stopped in the middle of its first batch (nothing committed) and restarted on the same checkpoint: the
  source reads the log again from its start, the sink skips what the first run wrote, and the output log equals the
  source log (nothing twice, nothing lost) once a batch that ends at the source's tail is committed; the restarted
  query's writer stays open across a batch boundary (its records before and after it share one segment);
* a zombie: a writer of an earlier attempt holds the output log (ZooKeeper) with records written and its segment in
  progress, then loses its session; the sink's writer takes the log over (its lock, the in-progress segment fenced
  and recovered), skips the zombie's records and writes the rest; the zombie's next write fails with a locking error
  and nothing of it is visible;
* refused: rows without the position columns or without ``value``, a source of two logs or of a ``streamPattern``, an
  unknown option (when the query is defined, ``IllegalArgumentException``), two output rows for one source record
  (the query fails); two source logs into one output log with ``atLeastOnce=true``: every record written;
* a checkpoint holding the temporary offsets file of a first batch whose driver died while writing it: Spark alone
  refuses to start the query; ``write_stream`` removes the file and the query runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import storage
from tests.jvm.jdk import Jdk
from tests.jvm.test_realtime_source import (
    CONF,
    ROOT,
    _after_last,
    _committed_end,
    _error_text,
    _log_rows,
    _wait,
    _write,
    run_job_process,
)
from tests.zk import ZooKeeperServer, expire_session

#: (txid, payload hex) of each record of a log.
Records = list[list[Any]]


def _records(uri: str, log: str) -> Records:
    """``[txid, payload hex]`` of every record of ``log`` (none when it does not exist yet)."""
    with storage.open_namespace(uri, CONF) as ns:
        if not ns.log_exists(log):
            return []
        out: Records = []
        with ns.open_log(log).open_reader(storage.DLSN.INITIAL) as r:
            while True:
                batch = r.read_bulk(1000, non_blocking=True)
                if not batch:
                    return out
                out += [[rec.txid, bytes(rec.payload).hex()] for rec in batch]


def _final_records(uri: str, log: str) -> Records:
    """:func:`_records` once the stopped query's writer has closed ``log`` (no segment in progress): a reader that
    opens while the writer completes the segment may find nothing readable at that instant."""

    def closed() -> bool:
        with storage.open_namespace(uri, CONF) as ns:
            return all(not s.in_progress for s in ns.open_log(log).log_segments())

    _wait(f"the writer of {log} to close", closed)
    return _records(uri, log)


def _source(uri: str, log: str) -> Records:
    """``[sequence id, payload hex]`` of every record of the source log ``log``: what the output log should hold."""
    with storage.open_namespace(uri, CONF) as ns, ns.open_log(log).open_reader(storage.DLSN.INITIAL) as r:
        out: Records = []
        while True:
            batch = r.read_bulk(1000, non_blocking=True)
            if not batch:
                return out
            out += [[rec.sequence_id, bytes(rec.payload).hex()] for rec in batch]


def _refusal(make: Any) -> dict[str, str]:
    """The error of defining (or running) the query ``make()`` starts; ``ran`` if it ran on."""
    try:
        q = make()
    except Exception as e:
        return _error_text(e)
    try:
        q.awaitTermination(120)
        exc = q.exception()
        return _error_text(exc) if exc is not None else {"type": "", "condition": "", "message": "ran"}
    except Exception as e:
        return _error_text(e)
    finally:
        q.stop()


def run_job(work: Path, zk_hosts: str) -> dict[str, Any]:
    """Every scenario in one SparkSession; what was seen, as JSON-able values."""
    from pyspark.sql import functions as sf

    from dl_spark import realtime
    from dl_spark.session import spark_session

    os.environ["DLOG_PYTHON"] = sys.executable
    os.environ["DLOG_GATEWAY_QUIET"] = "1"
    uri = f"distributedlog-local://{work / 'ns'}"
    storage.open_namespace(uri, CONF).close()
    jars = ",".join(str(p) for p in realtime.jar_paths())
    spark = spark_session("local[4]", app_name="dl-rt-sink-tests", pythonpath=[str(ROOT)], conf={"spark.jars": jars})
    out: dict[str, Any] = {}

    # (a) rows written as they arrive: a 60 s batch, stopped before it ends
    txa = _write(uri, "in-a", [b"a-%d" % i for i in range(20)], 1)
    ck_a = str(work / "ck-a")

    def source_a() -> Any:
        return realtime.read_stream(spark, uri, "in-a", startingOffsets="earliest")

    q = realtime.write_stream(source_a(), uri, "out-a", ck_a, trigger="60 seconds")
    try:
        _wait("the 20 records written before the query, in out-a", lambda: len(_records(uri, "out-a")) >= 20, q)
        out["batches_done_at_20"] = len(q.recentProgress)
        txa = _write(uri, "in-a", [b"a-%d" % i for i in range(20, 35)], txa)
        _wait("the 15 records appended while the query runs", lambda: len(_records(uri, "out-a")) >= 35, q)
        out["batches_done_at_35"] = len(q.recentProgress)
    finally:
        q.stop()  # in the middle of the first batch: nothing committed
    out["first_run"] = _final_records(uri, "out-a")
    out["commits_after_first_run"] = sorted(os.listdir(os.path.join(ck_a, "commits")))

    # (b) restarted on the same checkpoint: the source reads in-a from its start again
    q = realtime.write_stream(source_a(), uri, "out-a", ck_a)
    try:
        txa = _write(uri, "in-a", [b"a-%d" % i for i in range(35, 45)], txa)
        want = {"in-a": _after_last(uri, "in-a")}
        _wait("a committed batch that ends at the tail of in-a", lambda: _committed_end(q) == want, q)
        # one more batch boundary, then one more record: written by the same (cached) writer
        batches = len(q.recentProgress)
        _wait("the next batch", lambda: len(q.recentProgress) > batches, q)
        txa = _write(uri, "in-a", [b"a-45"], txa)
        want = {"in-a": _after_last(uri, "in-a")}
        _wait("a committed batch that ends at the new tail of in-a", lambda: _committed_end(q) == want, q)
    finally:
        q.stop()
    out["out_a"] = _final_records(uri, "out-a")
    out["segments_a"] = sorted({row[1][0] for row in _log_rows(uri, "out-a")})
    out["in_a"] = _source(uri, "in-a")

    # (c) a zombie writer of an earlier attempt, on a ZooKeeper namespace
    zk_uri = f"distributedlog://{zk_hosts}/rt-sink-{uuid.uuid4().hex[:12]}"
    storage.bind_namespace(zk_uri, segments=f"file://{work / 'zk-segments'}")
    _write(uri, "in-c", [b"c-%d" % i for i in range(10)], 1)
    zombie_ns = storage.open_namespace(zk_uri, {**CONF, "zkSessionTimeoutSeconds": 4})
    try:
        zombie = zombie_ns.open_log("out-c").open_async_writer()
        for seq in range(4):  # what the earlier attempt wrote: source records 0..3, txid = sequence id
            zombie.write(storage.LogRecord(seq, b"c-%d" % seq)).result(30)
        zombie.flush().result(30)
        expire_session(zombie_ns.metastore, zk_hosts)  # its lock is gone; it has not closed anything
        ck_c = str(work / "ck-c")
        q = realtime.write_stream(
            realtime.read_stream(spark, uri, "in-c", startingOffsets="earliest"), zk_uri, "out-c", ck_c
        )
        try:
            _wait("the 10 records of in-c in out-c", lambda: len(_records(zk_uri, "out-c")) >= 10, q)
            try:
                zombie.write(storage.LogRecord(100, b"zombie")).result(30)
                out["zombie_write"] = {"error": "", "locking": False}
            except storage.errors.DLError as e:
                out["zombie_write"] = {"error": type(e).__name__, "locking": isinstance(e, storage.LockingError)}
            want = {"in-c": _after_last(uri, "in-c")}
            _wait("a committed batch that ends at the tail of in-c", lambda: _committed_end(q) == want, q)
        finally:
            q.stop()
        with contextlib.suppress(storage.errors.DLError):
            zombie.close()
    finally:
        zombie_ns.close()
    out["out_c"] = _final_records(zk_uri, "out-c")
    out["in_c"] = _source(uri, "in-c")

    # (d) refused, and the at-least-once opt-in
    refused: dict[str, dict[str, str]] = {}
    for name, make in {
        "no_position": lambda: realtime.write_stream(source_a().select("value"), uri, "out-x", str(work / "ck-x1")),
        "no_value": lambda: realtime.write_stream(
            source_a().select("stream", "sequence_id"), uri, "out-x", str(work / "ck-x2")
        ),
        "two_logs": lambda: realtime.write_stream(
            realtime.read_stream(spark, uri, ["in-a", "in-c"]), uri, "out-x", str(work / "ck-x3")
        ),
        "pattern": lambda: realtime.write_stream(
            realtime.read_stream(spark, uri, streamPattern="in-.*"), uri, "out-x", str(work / "ck-x4")
        ),
        "unknown": lambda: realtime.write_stream(source_a(), uri, "out-x", str(work / "ck-x5"), atLeastOnse=True),
        "two_rows": lambda: realtime.write_stream(
            source_a().withColumn("value", sf.explode(sf.array(sf.col("value"), sf.col("value")))),
            uri,
            "out-dup",
            str(work / "ck-x6"),
            trigger=None,  # a plain micro-batch query: one batch, its task fails
        ),
    }.items():
        refused[name] = _refusal(make)
    out["refused"] = refused

    both = realtime.read_stream(spark, uri, ["in-a", "in-c"], startingOffsets="earliest")
    q = realtime.write_stream(both, uri, "out-multi", str(work / "ck-multi"), atLeastOnce=True)
    try:
        _wait("the 56 records of in-a and in-c in out-multi", lambda: len(_records(uri, "out-multi")) >= 56, q)
    finally:
        q.stop()
    out["out_multi"] = _final_records(uri, "out-multi")

    # (e) a driver stopped while writing its first batch's offsets left Spark's temporary file in the checkpoint
    ck_e = work / "ck-e"
    (ck_e / "offsets").mkdir(parents=True)
    leftover = f".0.{uuid.uuid4()}.tmp"
    (ck_e / "offsets" / leftover).write_text("v1\n")  # cut short: the driver died while writing it
    (ck_e / "offsets" / f".{leftover}.crc").write_bytes(b"crc\x00")
    _write(uri, "in-e", [b"e-%d" % i for i in range(5)], 1)

    def source_e() -> Any:
        return realtime.read_stream(spark, uri, "in-e", startingOffsets="earliest")

    clear = realtime.clear_unfinished_first_batch
    setattr(realtime, "clear_unfinished_first_batch", lambda spark, checkpoint: [])  # noqa: B010  # Spark alone
    try:
        out["leftover_spark_alone"] = _refusal(lambda: realtime.write_stream(source_e(), uri, "out-e", str(ck_e)))
    finally:
        setattr(realtime, "clear_unfinished_first_batch", clear)  # noqa: B010
    q = realtime.write_stream(source_e(), uri, "out-e", str(ck_e))
    try:
        _wait("the 5 records of in-e in out-e", lambda: len(_records(uri, "out-e")) >= 5, q)
    finally:
        q.stop()
    out["leftover_after"] = [n for n in os.listdir(ck_e / "offsets") if leftover in n]
    out["out_e"] = _final_records(uri, "out-e")
    out["in_e"] = _source(uri, "in-e")
    spark.stop()
    return out


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, jdk: Jdk, zk_server: ZooKeeperServer) -> Iterator[dict[str, Any]]:
    """The job's result (the child process's ``result.json``)."""
    yield run_job_process("tests.jvm.test_realtime_sink", tmp_path_factory.mktemp("rt-sink-job"), zk_server.hosts)


@pytest.mark.heavy
def test_rows_are_written_as_they_arrive(job: dict[str, Any]) -> None:
    source = job["in_a"]
    assert [r[0] for r in source] == list(range(46))  # sequence ids 0..45
    # the output log held every record, in order, with txid = the source's sequence id, before any batch ended
    assert job["first_run"] == source[:35]
    assert job["batches_done_at_20"] == 0
    assert job["batches_done_at_35"] == 0


@pytest.mark.heavy
def test_restart_in_the_middle_of_a_batch_writes_each_record_once(job: dict[str, Any]) -> None:
    assert job["commits_after_first_run"] == []
    # the second run read in-a from its start again (batch 0 was not committed): nothing twice, nothing lost
    assert job["out_a"] == job["in_a"]


@pytest.mark.heavy
def test_the_writer_stays_open_across_batch_boundaries(job: dict[str, Any]) -> None:
    # a writer that takes the log starts a segment of its own: one for the first run, one for the whole second run
    # (its records written before and after a batch boundary)
    assert job["segments_a"] == [1, 2]


@pytest.mark.heavy
def test_a_zombie_writer_of_an_earlier_attempt_is_fenced(job: dict[str, Any]) -> None:
    assert job["zombie_write"]["locking"], job["zombie_write"]
    assert job["zombie_write"]["error"] in ("LockingError", "WriterFencedError")
    # the zombie's records 0..3 kept (the sink skipped them), the rest written by the sink, nothing of the zombie's
    # write after the takeover
    assert job["out_c"] == job["in_c"]
    assert len(job["in_c"]) == 10
    assert b"zombie".hex() not in [r[1] for r in job["out_c"]]


@pytest.mark.heavy
def test_what_cannot_be_written_exactly_once_is_refused(job: dict[str, Any]) -> None:
    refused = job["refused"]
    for name in ("no_position", "no_value", "two_logs", "pattern", "unknown"):  # when the query is defined
        assert refused[name]["type"] == "IllegalArgumentException", (name, refused[name])
    assert "needs the source position columns 'stream' (string) and 'sequence_id'" in refused["no_position"]["message"]
    assert "need a column 'value' of type binary or string" in refused["no_value"]["message"]
    assert "source reads streams 'in-a,in-c'" in refused["two_logs"]["message"]
    assert "streamPattern 'in-.*'" in refused["pattern"]["message"]
    assert "unknown option atLeastOnse" in refused["unknown"]["message"]
    # two rows for one source record: the query fails at the second
    assert "two rows for record 0 of source log 'in-a'" in refused["two_rows"]["message"]


@pytest.mark.heavy
def test_several_source_logs_at_least_once(job: dict[str, Any]) -> None:
    got = job["out_multi"]
    want = sorted(r[1] for r in job["in_a"] + job["in_c"])
    assert sorted(r[1] for r in got) == want  # every record (no restart here: once each)
    txids = [r[0] for r in got]
    assert txids == sorted(txids)


@pytest.mark.heavy
def test_a_first_batch_its_driver_never_finished_does_not_block_the_restart(job: dict[str, Any]) -> None:
    # Spark alone refuses to start on a checkpoint holding the temporary file of an unfinished first batch
    alone = job["leftover_spark_alone"]
    assert "[STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY]" in alone["message"], alone
    # write_stream removes it (it holds no finished batch) and the query runs: every record once
    assert job["leftover_after"] == []
    assert job["out_e"] == job["in_e"] and len(job["in_e"]) == 5


def main(argv: list[str]) -> int:
    """``python -m tests.jvm.test_realtime_sink JOB_DIR ZK_HOSTS``: run the job, write ``JOB_DIR/result.json``."""
    work = Path(argv[0])
    result = run_job(work, argv[1])
    (work / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
