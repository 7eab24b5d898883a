"""Every example runs, so none can rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark_submit import spark_submit

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run(cmd: list[str], env: dict[str, str], timeout: float = 300, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, (
        f"exit {out.returncode}\n--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-5000:]}"
    )
    return out


def test_log_tour(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "log_tour.py"), "--uri", f"distributedlog-local://{tmp_path}/ns"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SUMMARY OK records=20000" in out.stdout
    assert "end of stream: True" in out.stdout


def test_producer_consumer(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    uri = f"distributedlog-local://{tmp_path}/ns"
    cmd = [sys.executable, str(EXAMPLES / "producer_consumer.py"), "--uri", uri]
    out = run(cmd, subprocess_env, timeout=120)
    assert "SUMMARY OK records=10000 end_of_stream=True" in out.stdout
    assert "in order: True, sequence ids contiguous: True, DLSNs increasing: True" in out.stdout

    # The log is sealed: a second run on it refuses, with a one-line reason and no traceback.
    again = subprocess.run(cmd, env=subprocess_env, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0
    assert "already exists" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.heavy
def test_spark_submit_job(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """The command the job's docstring gives, from the checkout: the venv's spark-submit with
    PYSPARK_PYTHON, plus conf/spark-defaults.conf (loopback, no UI)."""
    env, submit = spark_submit(subprocess_env)
    cmd = [
        *submit,
        "examples/spark_submit_job.py",
        "--uri",
        f"distributedlog-local://{tmp_path}/ns",
        "--stream",
        "events",
        "--demo",
    ]
    out = run(cmd, env, timeout=540)  # a hang guard: ~50 s here, 3x that on a loaded CI machine
    assert "JOB OK records=600 users=7 minutes=10 streamed=600 batches=3" in out.stdout
    assert "|user-0|86    |278.5 |" in out.stdout  # the per-user table
    assert "streaming: 600 rows in 3 micro-batches" in out.stdout


def test_spark_defaults_conf_is_valid() -> None:
    """Every active line of conf/spark-defaults.conf is `spark.key value`."""
    lines = [ln.strip() for ln in (ROOT / "conf" / "spark-defaults.conf").read_text().splitlines()]
    active = [ln for ln in lines if ln and not ln.startswith("#")]
    keys = [ln.split(None, 1)[0] for ln in active]
    assert all(k.startswith("spark.") and len(ln.split(None, 1)) == 2 for k, ln in zip(keys, active, strict=True))
    assert {"spark.pyspark.python", "spark.driver.bindAddress", "spark.sql.streaming.stopTimeout"} <= set(keys)


def test_sample_zoo_cfg_serves_a_namespace(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """conf/zoo.cfg, with only its port and data directory changed, runs a server that a
    ZooKeeper namespace (bound with `dlog bind`, as the README shows) works on."""
    from tests.cli.test_cli import dlog_command
    from tests.zk import ZooKeeperServer, free_port

    port = free_port()
    text = (ROOT / "conf" / "zoo.cfg").read_text()
    assert "clientPortAddress=127.0.0.1" in text and "forceSync=yes" in text
    assert "dataDir=zookeeper-data" in text  # relative: inside the directory the server starts in
    lines = [f"clientPort={port}" if line.startswith("clientPort=") else line for line in text.splitlines()]
    with ZooKeeperServer(workdir=tmp_path / "zk", port=port, config="\n".join(lines) + "\n") as server:
        server.start()
        assert (tmp_path / "zk" / "zookeeper-data" / "version-2").is_dir()  # the data stayed where it started
        uri = f"distributedlog://127.0.0.1:{port}/messaging/ns"
        dlog = [*dlog_command(), "--uri", uri]
        run([*dlog, "bind", "--segments", f"file://{tmp_path / 'segments'}"], subprocess_env)
        run([*dlog, "create", "events"], subprocess_env)
        out = subprocess.run(
            [*dlog, "write", "events"], input="a\nb\n", env=subprocess_env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert "recordCount: 2" in run([*dlog, "show", "events"], subprocess_env).stdout


@pytest.mark.heavy
def test_notebook(tmp_path: Path, subprocess_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The notebook, committed without outputs, runs top to bottom with nbclient on a kernel that is
    this interpreter."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code_cells), "clear the notebook's outputs"

    # A kernel spec of our own, so the kernel is this interpreter whatever kernels the machine has.
    kernels = tmp_path / "jupyter" / "kernels" / "dl-examples"
    kernels.mkdir(parents=True)
    kernel_env = {
        "PYTHONPATH": subprocess_env["PYTHONPATH"],
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "MPLBACKEND": "Agg",
    }
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "distributedlog examples",
        "language": "python",
        "env": kernel_env,
    }
    (kernels / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)

    client = NotebookClient(
        nb,
        kernel_name="dl-examples",
        timeout=540,  # per cell; a hang guard (a loaded CI machine runs Spark 3x slower than here)
        startup_timeout=180,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()

    text = "".join(
        out.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for out in c.outputs
        if out.output_type == "stream"
    )
    assert "NOTEBOOK OK batch=800 streamed=800+200" in text, text[-3000:]
    assert "first run streamed: 800 rows" in text
    assert "second run streamed: 200 rows" in text


def test_java_log_example(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """examples/java/LogExample.java, compiled and run with the commands of its header comment; then
    Python reads the log it wrote, and a second run on the same log refuses."""
    import storage
    from tests.jvm.jdk import require_jdk

    jdk = require_jdk()  # fails (does not skip) without a JDK
    javac, java = jdk.javac, jdk.java
    import jvm_shim

    header = (EXAMPLES / "java" / "LogExample.java").read_text()
    assert 'javac --release 17 -cp "$SHIM" -d /tmp/log-example examples/java/LogExample.java' in header
    classpath = [str(jvm_shim.jar_path()), str(jvm_shim.py4j_jar())]
    classes = tmp_path / "classes"
    run(
        [javac, "--release", "17", "-cp", classpath[0], "-d", str(classes), "examples/java/LogExample.java"],
        subprocess_env,
    )
    env = dict(subprocess_env, DLOG_PYTHON=sys.executable)
    env.pop("DLOG_GATEWAY", None)
    uri = f"distributedlog-local://{tmp_path}/ns"
    cmd = [java, "-cp", os.pathsep.join([*classpath, str(classes)]), "LogExample", uri, "events", "1000"]
    out = run(cmd, env, timeout=120)
    assert "SUMMARY OK records=2000 in order: true" in out.stdout
    assert "txid 1001 is at DLSN{logSegmentSequenceNo=2, entryId=0, slotId=0}: async-1" in out.stdout

    with storage.open_namespace(uri) as ns, ns.open_log("events") as dlm:
        assert dlm.record_count() == 2000 and dlm.last_txid() == 2000
        with dlm.open_reader(1001) as reader:
            first = reader.read_next(non_blocking=True)
        assert first is not None and first.payload == b"async-1"
        assert f"(serialized {first.dlsn.serialize()})" in out.stdout

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "already exists" in again.stderr
