"""After installation, a fresh SparkSession finds format("distributedlog") with no registration call
and no hand-set PYSPARK_PYTHON: run as a user would, in a new interpreter outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import storage

SCRIPT = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
df = spark.read.format("distributedlog").option("uri", URI).option("streams", "log").load()
print("ROWS", sorted((r.txid, r.value) for r in df.select("txid", "value").collect()))
spark.stop()
"""


def test_fresh_session_finds_the_source_without_registration(tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    with storage.open_namespace(uri) as ns, ns.open_log("log").open_writer() as w:
        for t in (1, 2, 3):
            w.write(storage.LogRecord(t, b"v%d" % t))
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"  # stay on loopback
    out = subprocess.run(
        [sys.executable, "-c", f"URI = {uri!r}\n{SCRIPT}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ROWS [(1, b'v1'), (2, b'v2'), (3, b'v3')]" in out.stdout
