"""``format("distributedlog-rt")``: the JVM source that takes part in Spark's Real-Time Mode.

The Spark tests run in one Spark application of their own, started in a child process
(``python -m tests.jvm.test_realtime_source JOB_DIR``): ``spark.jars`` is read only when a session starts, and the
Spark tests of ``tests/spark`` share one session started without these jars. The job runs every scenario in that one
session and writes what it saw to ``JOB_DIR/result.json``; the tests below check it.

The sink is ``foreach`` with a writer that appends each row to a file at once (:class:`FileRows`): Spark 4.3 allows
only console, foreach and Kafka sinks in Real-Time Mode (its ``memory`` sink is not on that allowlist, and cannot
restart from a checkpoint in update mode). The job waits on what it can observe (rows in those files, the end offset
of the batch the query committed), with a deadline only against a hang.

Scenarios:

* the Python source ``format("distributedlog")`` in Real-Time Mode: refused by Spark, which is why the JVM source
  exists;
* a real-time query on two logs written beforehand, then appended to while the query runs: its rows are the logs'
  records (payloads, DLSNs, txids, sequence ids, order per log); its committed positions are recorded under its
  ``subscriberId`` for ``dlog lag`` (without one, under the Python source's default id);
* micro-batch-only options (``maxRecordsPerTrigger``, ``endingOffsets``), an unknown one and bad JSON: refused when
  the DataFrame is defined, naming the option;
* a real-time query stopped after a committed batch and restarted from its checkpoint: it goes on where it stopped
  and reads no record twice;
* a plain micro-batch query (``availableNow``) of the same source from JSON offsets;
* ``streamPattern`` with ``startingTxId`` in real time, and a matching log created while the query runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import storage
from dl_spark.options import default_subscriber_id
from jvm_shim import protocol
from jvm_shim.gateway import Gateway
from tests.jvm.jdk import Jdk

ROOT = Path(__file__).resolve().parents[2]
CONF: dict[str, object] = {"writerOutputBufferSize": 0, "lockTimeoutSeconds": 5}
#: Only against a hang: how long the job waits for an event it needs (rows, a committed batch).
HANG_S = 240.0

Row = tuple[str, tuple[int, int, int], int, int, bytes]


# --- the gateway operation the source records positions with ------------------------------------------------------
def test_advance_subscriber_operation_moves_positions_forward(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    with storage.open_namespace(uri, CONF) as ns:
        for log in ("a", "b"):
            with ns.open_log(log).open_writer() as w:
                for i in range(3):
                    w.write(storage.LogRecord(i + 1, b"x%d" % i))
                w.flush()
    gw = Gateway()
    try:

        def call(op: str, **args: Any) -> dict[str, Any]:
            result, _ = protocol.parse_response(gw.call(op, json.dumps(args), b""))
            return result

        h = call("namespace.open", uri=uri)["ns"]
        moved = call("namespace.advanceSubscriber", ns=h, subscriber="q1", positions={"a": "1,2,0", "b": "1,1,0"})
        assert moved == {"moved": ["a", "b"]}
        # a lower position changes nothing; a higher one moves only that log
        moved = call("namespace.advanceSubscriber", ns=h, subscriber="q1", positions={"a": "1,0,0", "b": "1,2,0"})
        assert moved == {"moved": ["b"]}
        with pytest.raises(storage.errors.LogNotFoundError):
            call("namespace.advanceSubscriber", ns=h, subscriber="q1", positions={"nope": "1,0,0"})
        with pytest.raises(storage.errors.InvalidArgumentError):
            call("namespace.advanceSubscriber", ns=h, subscriber="q1", positions={})
    finally:
        gw.close()
    with storage.open_namespace(uri, CONF) as ns:
        assert ns.open_log("a").subscriptions().get("q1") == storage.DLSN(1, 2, 0)
        assert ns.open_log("b").subscriptions().get("q1") == storage.DLSN(1, 2, 0)


def test_configure_adds_the_jars_to_a_builder(jdk: Jdk) -> None:
    from pyspark.sql import SparkSession

    from dl_spark import realtime

    builder = SparkSession.Builder().config("spark.jars", "/opt/other.jar")
    assert realtime.configure(builder) is builder
    jars = builder._options["spark.jars"].split(",")  # what getOrCreate() will pass to Spark
    assert jars[0] == "/opt/other.jar"
    names = [Path(j).name for j in jars[1:]]
    assert names[0] == "distributedlog-jvm-shim.jar"
    assert names[1] == "distributedlog-spark-rt.jar"
    assert names[2].startswith("py4j")
    assert all(Path(j).is_file() for j in jars[1:])
    realtime.configure(builder)  # twice: nothing added twice
    assert builder._options["spark.jars"].split(",") == jars


# --- the Spark job (child process) ---------------------------------------------------------------------------------
def _write(uri: str, log: str, payloads: list[bytes], txid: int) -> int:
    """Append ``payloads`` to ``log`` as one segment (a writer opened and closed); the next free txid."""
    with storage.open_namespace(uri, CONF) as ns, ns.open_log(log).open_writer() as w:
        for p in payloads:
            w.write(storage.LogRecord(txid, p))
            txid += 1
        w.flush()
    return txid


def _log_rows(uri: str, log: str) -> list[Row]:
    """Every record of ``log``, read with the storage core's reader."""
    rows: list[Row] = []
    with storage.open_namespace(uri, CONF) as ns, ns.open_log(log).open_reader(storage.DLSN.INITIAL) as r:
        while True:
            batch = r.read_bulk(1000, non_blocking=True)
            if not batch:
                return rows
            for rec in batch:
                d = rec.dlsn
                rows.append((log, (d.lssn, d.entry_id, d.slot_id), rec.txid, rec.sequence_id, bytes(rec.payload)))


class FileRows:
    """A ``foreach`` writer (a sink Real-Time Mode allows): each row becomes a JSON line, flushed at once, in a file
    of its own task and batch under ``directory``, so the rows can be seen while the query runs."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def open(self, partition_id: int, epoch_id: int) -> bool:
        import uuid

        name = f"{epoch_id:08d}-{partition_id:04d}-{uuid.uuid4().hex}.jsonl"
        self.fh = open(os.path.join(self.directory, name), "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        return True

    def process(self, row: Any) -> None:
        d = row.dlsn
        line = [row.stream, [d.lssn, d.entry_id, d.slot_id], row.txid, row.sequence_id, bytes(row.value).hex()]
        self.fh.write(json.dumps(line) + "\n")
        self.fh.flush()

    def close(self, error: BaseException | None) -> None:
        self.fh.close()


def _sink_rows(directory: Path) -> list[list[Any]]:
    """Every row the ``FileRows`` writers wrote so far, batch by batch (each task's rows in its order)."""
    rows: list[list[Any]] = []
    for f in sorted(directory.glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.endswith("]"):
                rows.append(json.loads(line))
    return rows


def _wait(what: str, ready: Callable[[], bool], query: Any = None) -> None:
    """Wait until ``ready()``; fail when the query died, or after :data:`HANG_S` (a hang)."""
    deadline = time.monotonic() + HANG_S
    while not ready():
        if query is not None and query.exception() is not None:
            raise RuntimeError(f"the query failed while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} after {HANG_S} s")
        time.sleep(0.2)


def _committed_end(query: Any) -> dict[str, str] | None:
    """The end offset of the query's last completed batch (from its progress), or None."""
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return None
    end = progress["sources"][0].get("endOffset")
    parsed = json.loads(end) if isinstance(end, str) else end
    return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else None


def _error_text(e: BaseException) -> dict[str, str]:
    cond = getattr(e, "getCondition", None)
    return {"type": type(e).__name__, "condition": str(cond() if cond else ""), "message": str(e)}


def _rt_query(df: Any, out: Path, ckpt: Path) -> Any:
    """A real-time query (5 s batches) of ``df`` into ``FileRows(out)``."""
    out.mkdir(parents=True, exist_ok=True)
    return (
        df.writeStream.foreach(FileRows(str(out)))
        .outputMode("update")
        .trigger(realTime="5 seconds")
        .option("checkpointLocation", str(ckpt))
        .start()
    )


def _query_error(start: Any) -> dict[str, str]:
    """The error that ends the query ``start()`` starts (or that starting it raises); ``ran`` if it runs on."""
    try:
        q = start()
    except Exception as e:  # refused when the query starts
        return _error_text(e)
    try:
        q.awaitTermination(HANG_S)
        exc = q.exception()
        return _error_text(exc) if exc is not None else {"condition": "", "message": "ran"}
    except Exception as e:  # awaitTermination raises the query's failure
        return _error_text(e)
    finally:
        q.stop()


def _run_to_tail(query: Any, uri: str, log: str, sink: Path, rows: int) -> list[list[Any]]:
    """Let ``query`` run until ``sink`` has ``rows`` rows and a batch that ends at the tail of ``log`` is committed;
    stop it and return the sink's rows."""
    try:
        _wait(f"{rows} records of {log}", lambda: len(_sink_rows(sink)) >= rows, query)
        end = {log: _after_last(uri, log)}
        _wait(f"a committed batch that ends at the tail of {log}", lambda: _committed_end(query) == end, query)
    finally:
        query.stop()
    return _sink_rows(sink)


def run_job(work: Path) -> dict[str, Any]:
    """Every scenario in one SparkSession; what was seen, as JSON-able values."""
    from dl_spark import realtime
    from dl_spark.session import spark_session

    os.environ["DLOG_PYTHON"] = sys.executable
    os.environ["DLOG_GATEWAY_QUIET"] = "1"
    uri = f"distributedlog-local://{work / 'ns'}"
    storage.open_namespace(uri, CONF).close()
    jars = ",".join(str(p) for p in realtime.jar_paths())
    conf = {"spark.jars": jars}
    spark = spark_session("local[4]", app_name="dl-rt-tests", pythonpath=[str(ROOT)], conf=conf)
    realtime.configure(spark)  # the running session has the jars
    import dl_spark

    dl_spark.register(spark)
    out: dict[str, Any] = {"uri": uri}

    # (a) the Python source in real-time mode
    txa = _write(uri, "rt-a", [b"a-%d" % i for i in range(20)], 1)
    txb = _write(uri, "rt-b", [b"b-%d" % i for i in range(20)], 1)
    py = spark.readStream.format("distributedlog").option("uri", uri).option("streams", "rt-a").load()
    out["python_source"] = _query_error(lambda: _rt_query(py, work / "out-py", work / "ck-py"))

    # (b) a real-time query: records written before, then appended while it runs
    sink_b = work / "out-b"
    df = realtime.read_stream(spark, uri, ["rt-a", "rt-b"], startingOffsets="earliest", subscriberId="rt-test")
    q = _rt_query(df, sink_b, work / "ck-b")
    try:
        _wait("the 40 records written before the query", lambda: len(_sink_rows(sink_b)) >= 40, q)
        out["rows_before_append"] = len(_sink_rows(sink_b))
        _write(uri, "rt-a", [b"a-%d" % i for i in range(20, 35)], txa)
        _write(uri, "rt-b", [b"b-%d" % i for i in range(20, 35)], txb)
        _wait("the 30 records appended while the query runs", lambda: len(_sink_rows(sink_b)) >= 70, q)
        want = {log: _after_last(uri, log) for log in ("rt-a", "rt-b")}
        _wait("a committed batch that ends at the tails", lambda: _committed_end(q) == want, q)
        out["rt_rows"] = _sink_rows(sink_b)
        out["rt_end"] = _committed_end(q)
    finally:
        q.stop()
    out["expected_rows"] = [_jsonable(r) for log in ("rt-a", "rt-b") for r in _log_rows(uri, log)]
    with storage.open_namespace(uri, CONF) as ns:
        out["subscriber"] = {log: str(ns.open_log(log).subscriptions().get("rt-test")) for log in ("rt-a", "rt-b")}

    # (c) options refused
    refused: dict[str, dict[str, str]] = {}
    for name, opts in {
        "maxRecordsPerTrigger": {"maxRecordsPerTrigger": "10"},
        "endingOffsets": {"endingOffsets": "latest"},
        "unknown": {"maxRecordsPerTrigers": "10"},
        "startingOffsets": {"startingOffsets": "{bad json"},
        "dlog": {"dlog.noSuchKey": "1"},
        "missing": {},
    }.items():
        try:
            bad = realtime.read_stream(spark, uri, "rt-a,nope" if name == "missing" else "rt-a", **opts)
            q = _rt_query(bad, work / f"out-bad-{name}", work / f"ck-bad-{name}")
            try:
                q.awaitTermination(120)
                exc = q.exception()
                refused[name] = _error_text(exc) if exc is not None else {"condition": "", "message": "ran"}
            finally:
                q.stop()
        except Exception as e:
            refused[name] = _error_text(e)
    out["refused"] = refused

    # (d) restart from the checkpoint
    txc = _write(uri, "rt-c", [b"c-%d" % i for i in range(10)], 1)
    ck = work / "ck-d"
    first, second = work / "out-d1", work / "out-d2"
    df_c = realtime.read_stream(spark, uri, "rt-c", startingOffsets="earliest")
    out["first_run"] = _run_to_tail(_rt_query(df_c, first, ck), uri, "rt-c", first, 10)
    _write(uri, "rt-c", [b"c-%d" % i for i in range(10, 16)], txc)
    df_c = realtime.read_stream(spark, uri, "rt-c", startingOffsets="earliest")
    out["second_run"] = _run_to_tail(_rt_query(df_c, second, ck), uri, "rt-c", second, 6)
    out["expected_c"] = [_jsonable(r) for r in _log_rows(uri, "rt-c")]

    with storage.open_namespace(uri, CONF) as ns:  # no subscriberId: the Python source's default id
        out["default_subscriber"] = str(
            ns.open_log("rt-c").subscriptions().get(default_subscriber_id(uri, ("rt-c",), None))
        )

    # (e) plain micro-batches of the same source, from JSON offsets
    sink_e = work / "out-e"
    sink_e.mkdir()
    starting = json.dumps({"rt-a": "2,0,0", "rt-c": "earliest"})
    mb = realtime.read_stream(spark, uri, ["rt-a", "rt-c"], startingOffsets=starting)
    q = (
        mb.writeStream.foreach(FileRows(str(sink_e)))
        .trigger(availableNow=True)
        .option("checkpointLocation", str(work / "ck-e"))
        .start()
    )
    q.awaitTermination()
    out["micro_batch_rows"] = _sink_rows(sink_e)

    # (f) streamPattern and startingTxId in real time; a log that matches the pattern appears while the query runs
    _write(uri, "pat-1", [b"p1-%d" % i for i in range(10)], 1)
    sink_f = work / "out-f"
    df = realtime.read_stream(spark, uri, streamPattern="pat-.*", startingTxId=5)
    q = _rt_query(df, sink_f, work / "ck-f")
    try:
        _wait("the records of pat-1 from txid 5", lambda: len(_sink_rows(sink_f)) >= 6, q)
        _write(uri, "pat-2", [b"p2-%d" % i for i in range(3)], 100)
        _wait("the records of the new log pat-2", lambda: len(_sink_rows(sink_f)) >= 9, q)
        want = {log: _after_last(uri, log) for log in ("pat-1", "pat-2")}
        _wait("a committed batch that ends at the tails", lambda: _committed_end(q) == want, q)
    finally:
        q.stop()
    out["pattern_rows"] = _sink_rows(sink_f)
    out["expected_pattern"] = [_jsonable(r) for log in ("pat-1", "pat-2") for r in _log_rows(uri, log)]

    # (g) failOnDataLoss: a start position in a segment retention purged
    txg = _write(uri, "rt-g", [b"g-%d" % i for i in range(5)], 1)
    txg = _write(uri, "rt-g", [b"g-%d" % i for i in range(5, 10)], txg)
    _write(uri, "rt-g", [b"g-%d" % i for i in range(10, 15)], txg)
    time.sleep(0.01)  # every segment completed before the purge's time; the newest completed one stays anyway
    with storage.open_namespace(uri, CONF) as ns:
        out["purged_g"] = ns.open_log("rt-g").purge_older_than(int(time.time() * 1000) - 1)
    purged_start = json.dumps({"rt-g": "1,0,0"})
    df_g = realtime.read_stream(spark, uri, "rt-g", startingOffsets=purged_start)
    out["data_loss_fail"] = _query_error(lambda: _rt_query(df_g, work / "out-g-fail", work / "ck-g-fail"))
    df_g = realtime.read_stream(spark, uri, "rt-g", startingOffsets=purged_start, failOnDataLoss=False)
    sink_g = work / "out-g-skip"
    out["data_loss_skip"] = _run_to_tail(_rt_query(df_g, sink_g, work / "ck-g-skip"), uri, "rt-g", sink_g, 5)
    out["expected_g"] = [_jsonable(r) for r in _log_rows(uri, "rt-g")]
    spark.stop()
    return out


def _jsonable(r: Row) -> list[Any]:
    return [r[0], list(r[1]), r[2], r[3], r[4].hex()]


def _after_last(uri: str, log: str) -> str:
    """The offset text just past the last record of ``log``."""
    d = _log_rows(uri, log)[-1][1]
    return f"{d[0]},{d[1]},{d[2] + 1}"


def run_job_process(module: str, work: Path, *args: str) -> dict[str, Any]:
    """Run ``python -m <module> <work> <args>`` (a Spark job writing ``work/result.json``) and return that result;
    fails the test with the job's output if it failed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", module, str(work), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    print(f"{module}: {time.monotonic() - started:.1f} s")
    result = work / "result.json"
    if done.returncode != 0 or not result.is_file():
        pytest.fail(f"the job failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}")
    loaded: dict[str, Any] = json.loads(result.read_text())
    return loaded


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, jdk: Jdk) -> Iterator[dict[str, Any]]:
    """The job's result (the child process's ``result.json``)."""
    yield run_job_process("tests.jvm.test_realtime_source", tmp_path_factory.mktemp("rt-job"))


def _by_log(rows: list[list[Any]]) -> dict[str, list[list[Any]]]:
    out: dict[str, list[list[Any]]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    return out


@pytest.mark.heavy
def test_python_source_is_refused_in_real_time_mode(job: dict[str, Any]) -> None:
    refused = job["python_source"]
    # the query fails at its first batch (STREAM_FAILED), for this reason
    assert refused["condition"] == "STREAM_FAILED", refused
    assert "[STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED]" in refused["message"]
    assert (
        "The input stream org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream"
        in (refused["message"])
    )


@pytest.mark.heavy
def test_real_time_query_reads_the_log_and_what_is_appended_while_it_runs(job: dict[str, Any]) -> None:
    expected = job["expected_rows"]
    assert len(expected) == 70
    assert job["rows_before_append"] == 40  # the records written before, and nothing else yet
    rows = job["rt_rows"]
    # every record once, with its DLSN, txid, sequence id and payload; per log in DLSN order (the memory sink keeps
    # the order each task returned them in)
    assert _by_log(rows) == _by_log(expected)
    assert job["rt_end"] == {
        log: f"{r[-1][1][0]},{r[-1][1][1]},{r[-1][1][2] + 1}" for log, r in _by_log(expected).items()
    }


@pytest.mark.heavy
def test_real_time_query_records_its_positions_for_dlog_lag(job: dict[str, Any]) -> None:
    # the position after each log's last record, recorded under subscriberId when the batch was committed
    for log, rows in _by_log(job["expected_rows"]).items():
        last = rows[-1][1]
        assert job["subscriber"][log] == f"{last[0]},{last[1]},{last[2] + 1}", job["subscriber"]


@pytest.mark.heavy
def test_micro_batch_only_and_unknown_options_are_refused(job: dict[str, Any]) -> None:
    refused = job["refused"]
    assert (
        "option maxRecordsPerTrigger is not supported by format distributedlog-rt"
        in refused["maxRecordsPerTrigger"]["message"]
    )
    assert "option endingOffsets is not supported by format distributedlog-rt" in refused["endingOffsets"]["message"]
    assert "unknown option maxRecordsPerTrigers for format distributedlog-rt" in refused["unknown"]["message"]
    assert "option startingOffsets is not valid JSON" in refused["startingOffsets"]["message"]
    assert "noSuchKey" in refused["dlog"]["message"]
    assert "log 'nope' of option streams does not exist" in refused["missing"]["message"]
    for r in refused.values():  # when the DataFrame is defined (load()), as Java's IllegalArgumentException
        assert r["type"] == "IllegalArgumentException", r


@pytest.mark.heavy
def test_restart_from_the_checkpoint_goes_on_where_it_stopped(job: dict[str, Any]) -> None:
    expected = job["expected_c"]
    assert len(expected) == 16
    assert job["first_run"] == expected[:10]
    assert job["second_run"] == expected[10:]  # nothing twice, nothing lost


@pytest.mark.heavy
def test_default_subscriber_id_is_the_python_sources(job: dict[str, Any]) -> None:
    last = job["expected_c"][-1][1]
    assert job["default_subscriber"] == f"{last[0]},{last[1]},{last[2] + 1}"


@pytest.mark.heavy
def test_plain_micro_batches_from_json_offsets(job: dict[str, Any]) -> None:
    by_log = _by_log(job["micro_batch_rows"])
    assert by_log["rt-a"] == [r for r in _by_log(job["expected_rows"])["rt-a"] if r[1][0] >= 2]
    assert len(by_log["rt-a"]) == 15
    assert by_log["rt-c"] == job["expected_c"]


@pytest.mark.heavy
def test_stream_pattern_from_a_txid_with_a_log_that_appears(job: dict[str, Any]) -> None:
    expected = _by_log(job["expected_pattern"])
    got = _by_log(job["pattern_rows"])
    assert got["pat-1"] == [r for r in expected["pat-1"] if r[2] >= 5]  # startingTxId=5
    assert got["pat-2"] == expected["pat-2"]  # a new log: from its first record
    assert sorted(got) == ["pat-1", "pat-2"]


@pytest.mark.heavy
def test_a_purged_start_position_fails_the_query_or_is_skipped_on_request(job: dict[str, Any]) -> None:
    assert job["purged_g"] == 2
    failed = job["data_loss_fail"]
    assert "position 1,0,0 of log 'rt-g' was purged: the log now starts at 3,0,0" in failed["message"], failed
    assert "set failOnDataLoss=false" in failed["message"], failed
    # failOnDataLoss=false: from the first readable position, the newest segment's five records
    assert job["data_loss_skip"] == job["expected_g"]
    assert [r[4] for r in job["data_loss_skip"]] == [(b"g-%d" % i).hex() for i in range(10, 15)]


def main(argv: list[str]) -> int:
    """``python -m tests.jvm.test_realtime_source JOB_DIR``: run the job, write ``JOB_DIR/result.json``."""
    work = Path(argv[0])
    result = run_job(work)
    (work / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
