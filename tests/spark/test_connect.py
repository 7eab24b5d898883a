"""Spark Connect: a client session (``SparkSession.builder.remote``) against a Connect server started
from the installed pyspark (``spark-submit --class ...SparkConnectServer``, a JVM process of its own)
reads and writes ``format("distributedlog")``, batch and streaming, with no registration call."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import dl_spark
from tests.spark.conftest import ROOT
from tests.spark.helpers import log_rows, write_segments

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on loopback, from the installed pyspark; its Python workers run this
    interpreter. Stopped (SIGTERM, then SIGKILL) after the module."""
    from pyspark.find_spark_home import _find_spark_home

    home = _find_spark_home()
    port = _free_port()
    log_path = tmp_path_factory.mktemp("connect") / "server.log"
    env = dict(os.environ)
    env.update(
        SPARK_HOME=home,
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
    )
    cmd = [
        str(Path(home) / "bin" / "spark-submit"),
        "--class",
        SERVER_CLASS,
        "--master",
        "local[2]",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        "spark.driver.memory=512m",
        "spark-internal",
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Spark Connect server started" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Spark Connect server did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def remote(connect_url: str) -> Iterator[object]:
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(connect_url).create()
    assert type(session).__module__.startswith("pyspark.sql.connect")  # a Connect client, not a classic session
    try:
        yield session
    finally:
        session.stop()


def test_connect_batch_read_and_write(remote, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "in", [[b"a%03d" % i for i in range(100)], [b"b%03d" % i for i in range(50)]])
    df = remote.read.format("distributedlog").option("uri", uri).option("streams", "in").load()
    assert df.columns == ["stream", "dlsn", "txid", "sequence_id", "value"]
    rows = df.orderBy("sequence_id").collect()
    assert [bytes(r.value) for r in rows] == [r[4] for r in log_rows(uri, ["in"])]
    assert [r.sequence_id for r in rows] == list(range(150))
    df.select("value").write.format("distributedlog").option("uri", uri).option("stream", "copy").mode("append").save()
    assert [r[4] for r in log_rows(uri, ["copy"])] == [bytes(r.value) for r in rows]


def test_connect_stream_exactly_once(remote, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "in", [[b"s%03d" % i for i in range(300)]])
    q = (
        remote.readStream.format("distributedlog")
        .option("uri", uri)
        .option("streams", "in")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", 100)
        .load()
        .select("value")
        .writeStream.format("distributedlog")
        .option("uri", uri)
        .option("stream", "out")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert [r[4] for r in log_rows(uri, ["out"])] == [b"s%03d" % i for i in range(300)]
    last = dl_spark.last_commit(uri, "out")  # three batches of 100, published exactly once
    assert last is not None and last["batchId"] == 2 and last["rows"] == 100
