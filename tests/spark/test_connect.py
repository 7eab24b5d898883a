"""Spark Connect: a client session (``SparkSession.builder.remote``) against a Connect server started
from the installed pyspark (``spark-submit --class ...SparkConnectServer``, a JVM process of its own)
reads and writes ``format("distributedlog")``, batch and streaming, with no registration call."""

from __future__ import annotations

import json
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

pytestmark = pytest.mark.heavy  # a Spark Connect server JVM and Spark applications of its own

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
        deadline = time.monotonic() + 300
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


CLIENT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from pyspark.sql import SparkSession

url, uri, mode = sys.argv[2], sys.argv[3], sys.argv[4]
spark = SparkSession.builder.remote(url).create()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)  # a Connect client
out = {}
if mode == "batch":
    df = spark.read.format("distributedlog").option("uri", uri).option("streams", "in").load()
    out["columns"] = df.columns
    rows = df.orderBy("sequence_id").collect()
    out["values"] = [bytes(r.value).decode() for r in rows]
    out["sequence_ids"] = [r.sequence_id for r in rows]
    df.select("value").write.format("distributedlog").option("uri", uri).option("stream", "copy").mode(
        "append"
    ).save()
else:
    q = (
        spark.readStream.format("distributedlog")
        .option("uri", uri)
        .option("streams", "in")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", 100)
        .load()
        .select("value")
        .writeStream.format("distributedlog")
        .option("uri", uri)
        .option("stream", "out")
        .option("checkpointLocation", sys.argv[5])
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
spark.stop()
print(json.dumps(out))
"""


def _client(url: str, uri: str, mode: str, *extra: str) -> dict[str, object]:
    """Run a Connect client in a process of its own (a Connect session switches the whole Python
    process into Connect mode, which the other tests' classic session must not see)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, str(ROOT), url, uri, mode, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_connect_batch_read_and_write(connect_url: str, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "in", [[b"a%03d" % i for i in range(100)], [b"b%03d" % i for i in range(50)]])
    got = _client(connect_url, uri, "batch")
    assert got["columns"] == ["stream", "dlsn", "txid", "sequence_id", "value"]
    expected = [r[4] for r in log_rows(uri, ["in"])]
    assert [v.encode() for v in got["values"]] == expected  # type: ignore[union-attr]
    assert got["sequence_ids"] == list(range(150))
    assert [r[4] for r in log_rows(uri, ["copy"])] == expected


def test_connect_stream_exactly_once(connect_url: str, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    write_segments(uri, "in", [[b"s%03d" % i for i in range(300)]])
    _client(connect_url, uri, "stream", str(tmp_path / "ckpt"))
    assert [r[4] for r in log_rows(uri, ["out"])] == [b"s%03d" % i for i in range(300)]
    last = dl_spark.last_commit(uri, "out")  # three batches of 100, published exactly once
    assert last is not None and last["batchId"] == 2 and last["rows"] == 100
