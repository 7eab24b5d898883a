"""Spark from the JVM: a Java application (``tests/jvm/spark/SparkJvmJob.java``, compiled here against
pyspark's jars and run with the venv's ``spark-submit --class``) reads a log with
``spark.read().format("distributedlog")`` and runs a ``readStream`` -> ``writeStream.format("distributedlog")``
query twice with ``Trigger.AvailableNow`` — with no registration call: the JVM-started session finds the
Python data source through its Python worker (``spark.pyspark.python`` / ``PYSPARK_PYTHON``).

It takes about 20 s (one JVM, batch read and two streaming runs), 2 s for ``javac``; the test prints the time,
and bounds it only to catch a hang (the subprocess timeout).
"""

from __future__ import annotations

import base64
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

import storage
from tests.jvm.jdk import Jdk
from tests.spark_submit import SPARK_SUBMIT, spark_submit

ROOT = Path(__file__).resolve().parents[2]
JOB_SOURCE = Path(__file__).resolve().parent / "spark" / "SparkJvmJob.java"

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def launcher() -> Path:
    """``spark-submit`` next to this interpreter (pyspark installs it there); FAILS (does not skip) without it, as
    the JDK tests do without a JDK: a suite that skips this passes while Spark's JVM face is untested."""
    if not SPARK_SUBMIT.is_file():
        pytest.fail(
            f"this test needs spark-submit next to the interpreter, {SPARK_SUBMIT}: run it with the virtualenv that "
            "has pyspark (make venv, or pip install -e '.[test]' into it)",
            pytrace=False,
        )
    return SPARK_SUBMIT


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


@pytest.fixture(scope="module")
def job_jar(tmp_path_factory: pytest.TempPathFactory, jdk: Jdk) -> Path:
    """SparkJvmJob.java compiled against pyspark's jars, in a jar of its own (spark-submit wants one); the test
    fails (does not skip) without a JDK."""
    out = tmp_path_factory.mktemp("spark-jvm-job")
    classes = out / "classes"
    cmd = [jdk.javac, "--release", "17", "-cp", f"{pyspark_jars()}/*", "-d", str(classes), str(JOB_SOURCE)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    jar = out / "spark-jvm-job.jar"
    with zipfile.ZipFile(jar, "w") as zf:
        for f in sorted(classes.rglob("*.class")):
            zf.write(f, f.relative_to(classes).as_posix())
    return jar


def write_input(uri: str, log: str) -> None:
    """200 records in two log segments: 120 from a sync writer (closed: a completed segment), then
    80 from an async writer; txids non-decreasing with repeats, payloads of varied bytes."""
    with storage.open_namespace(uri) as ns, ns.open_log(log) as dlm:
        writer = dlm.open_writer()
        for i in range(120):
            writer.write(storage.LogRecord(1000 + i // 2, f"event-{i}".encode() + bytes([i % 256, 0, 255])))
        writer.flush()
        writer.close()
        async_writer = dlm.open_async_writer()
        futures = [async_writer.write(storage.LogRecord(2000 + i, f"late-{i}".encode())) for i in range(80)]
        async_writer.close()
        for f in futures:
            f.result(timeout=30)


def read_all(uri: str, log: str) -> list[storage.LogRecordWithDLSN]:
    with storage.open_namespace(uri) as ns, ns.open_log(log) as dlm:
        count = dlm.record_count()
        with dlm.open_reader(storage.DLSN.INITIAL) as reader:
            records: list[storage.LogRecordWithDLSN] = []
            while len(records) < count:
                records.extend(reader.read_bulk(count - len(records), non_blocking=True))
            return records


def _tail(data: bytes | str | None, n: int) -> str:
    if data is None:
        return ""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    return text[-n:]


def test_jvm_spark_reads_and_streams_exactly_once_without_registration(
    launcher: Path, job_jar: Path, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_input(uri, "events")
    expected = read_all(uri, "events")
    assert len(expected) == 200

    # What a spark-submit --class user sets: the interpreter that has this package. Nothing registers
    # the format; no jar but the job's own.
    env, submit = spark_submit(subprocess_env)
    cmd = [
        *submit,
        "--class",
        "SparkJvmJob",
        str(job_jar),
        uri,
        "events",
        "out",
        str(tmp_path / "checkpoint"),
    ]
    started = time.monotonic()
    try:
        out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=540)
    except subprocess.TimeoutExpired as e:  # say where it was: the job prints a line per step
        pytest.fail(
            f"spark-submit --class SparkJvmJob still running after {e.timeout:.0f} s; killed\n"
            f"--- stdout\n{_tail(e.stdout, 3000)}\n--- stderr\n{_tail(e.stderr, 8000)}"
        )
    elapsed = time.monotonic() - started
    assert out.returncode == 0, (
        f"exit {out.returncode}\n--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-5000:]}"
    )
    print(f"spark-submit --class SparkJvmJob: {elapsed:.1f} s")

    # batch: exactly the storage reader's records, with their DLSNs, txids and sequence ids
    rows = [line.split(" ") for line in out.stdout.splitlines() if line.startswith("ROW ")]
    got = [(int(t), int(s), storage.DLSN.parse(d), base64.b64decode(v)) for _, t, s, d, v in rows]
    assert got == [(r.txid, r.sequence_id, r.dlsn, r.payload) for r in expected]

    # streaming: the first run moves every record, the second (same checkpoint) finds nothing new
    assert "RUN 1 rows=200" in out.stdout
    assert "RUN 2 rows=0" in out.stdout
    assert "SPARK JVM OK batch=200 runs=2" in out.stdout

    # the output log holds each input record exactly once, in order, with its txid
    written = read_all(uri, "out")
    assert [(r.txid, r.payload) for r in written] == [(r.txid, b"out-" + r.payload) for r in expected]
