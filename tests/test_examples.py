"""Every example runs, so none can rot."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import storage
from tests.spark_submit import spark_submit
from tests.zk import ZooKeeperServer, free_port

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run(
    cmd: list[str], env: dict[str, str], timeout: float = 300, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
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


@pytest.mark.heavy
def test_realtime_pipeline(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """The Real-Time Mode example: every click in the output log once, in order, before its first batch ends."""
    cmd = [sys.executable, str(EXAMPLES / "realtime_pipeline.py"), "--uri", f"distributedlog-local://{tmp_path}/ns"]
    out = run(cmd, subprocess_env, timeout=540)
    assert "SUMMARY OK records=500 once_in_order=True txid_is_position=True" in out.stdout, out.stdout[-2000:]


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
    from tests.cli.conftest import dlog_command

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

    nb = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)  # type: ignore[no-untyped-call]
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


# --- the write proxy ------------------------------------------------------------------------------------------
def test_proxy_fan_in(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """The embedded default: a `dlog proxy` subprocess, four producer processes, every record once, in order."""
    out = run([sys.executable, str(EXAMPLES / "proxy_fan_in.py")], subprocess_env, timeout=180)
    assert "FAN-IN OK records=4000 producers=4 per_producer=1000 in_order=True duplicates=0 missing=0" in out.stdout
    assert re.search(r"^proxy listening on 127\.0\.0\.1:\d+ ", out.stdout, re.M), out.stdout
    assert out.stdout.count('"acked": 1000, "failed": 0') == 4
    assert "proxy stopped: exit 0" in out.stdout

    # a log that exists already is refused, with a one-line reason
    uri = f"distributedlog-local://{tmp_path}/ns"
    with storage.open_namespace(uri) as ns:
        ns.create_log("fanin")
    again = subprocess.run(
        [sys.executable, str(EXAMPLES / "proxy_fan_in.py"), "--uri", uri],
        env=subprocess_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert again.returncode == 1 and "already exists" in again.stderr and "Traceback" not in again.stderr


def test_proxy_fan_in_on_zookeeper(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path,
                                   subprocess_env: dict[str, str]) -> None:  # fmt: skip
    """The docstring's ZooKeeper use: the producers find the proxy through its announcement (ProxyClient(uri=))."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    cmd = [sys.executable, str(EXAMPLES / "proxy_fan_in.py"), "--uri", uri, "--producers", "3", "--records", "500"]
    out = run(cmd, subprocess_env, timeout=180)
    assert "FAN-IN OK records=1500 producers=3 per_producer=500 in_order=True duplicates=0 missing=0" in out.stdout
    with storage.open_namespace(uri, create=False) as ns, ns.open_log("fanin") as dlm:
        assert dlm.record_count() == 1500


# --- cold storage and time ranges -----------------------------------------------------------------------------
@pytest.mark.heavy
def test_cold_time_range(zk_server: ZooKeeperServer, tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """Segments 1-4 cold only, 5 in both tiers; the default range [00:02:30, 00:09:05) is clicks 15..54, the same
    40 rows from Spark and from the Python reader."""
    cold = tmp_path / "cold"
    cmd = [sys.executable, str(EXAMPLES / "cold_time_range.py"), "--zookeeper", zk_server.hosts,
           "--segments", f"file://{tmp_path / 'segments'}", "--cold", f"file://{cold}"]  # fmt: skip
    out = run(cmd, subprocess_env, timeout=540)  # a hang guard: the SparkSession's start is most of it
    assert "COLD TIME RANGE OK rows=40 spark=40 python=40 cold_only_segments=3" in out.stdout
    assert "clicks: 5 segments offloaded" in out.stdout and "purged 4 segments (48 records) of clicks" in out.stdout
    assert [ln.rsplit("tier=", 1)[1] for ln in out.stdout.splitlines() if "tier=" in ln] == ["cold"] * 4 + ["both"]
    assert "|2026-03-01 00:02:30|1772323350000|2      |click-015 user-0 at 2026-03-01T00:02:30Z|" in out.stdout
    assert "|2026-03-01 00:09:00|1772323740000|5      |click-054 user-4 at 2026-03-01T00:09:00Z|" in out.stdout
    assert len(list(cold.rglob("*.dlseg"))) == 5  # the cold copies are where the example said

    # without a ZooKeeper namespace the example refuses (an embedded namespace has no cold store)
    usage = subprocess.run([sys.executable, str(EXAMPLES / "cold_time_range.py")], env=subprocess_env,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert usage.returncode == 2 and "one of the arguments --zookeeper --uri is required" in usage.stderr


# --- the pipeline on a Spark standalone cluster ---------------------------------------------------------------
@dataclass
class SparkDaemonProcess:
    """A Spark master or worker started with pyspark's ``bin/spark-class``; ``ready`` is set when its log shows
    ``ready_line``."""

    proc: subprocess.Popen[str]
    log_path: Path
    ready_line: str
    ready: threading.Event = field(default_factory=threading.Event)

    def pump(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log_path, "w") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                if self.ready_line in line:
                    self.ready.set()
        self.ready.set()  # it exited: wait_ready() sees the exit

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        self.ready.wait(timeout_s)
        if self.proc.poll() is not None or not self.ready.is_set():
            raise AssertionError(f"not ready ({self.ready_line!r}):\n{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM to its process group (a worker's executors too), SIGKILL after 30 s."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@dataclass(frozen=True)
class Standalone:
    master_url: str
    work_dir: Path


def _spark_class() -> Path:
    import pyspark

    script = Path(pyspark.__file__).parent / "bin" / "spark-class"
    assert os.access(script, os.X_OK), f"no executable {script}"
    return script


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """A Spark standalone master and one worker (2 cores, 1 GiB) on 127.0.0.1, free ports, no REST server."""
    base = tmp_path_factory.mktemp("standalone")
    for sub in ("conf", "work", "tmp"):
        (base / sub).mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_", "_JAVA_OPTIONS"))}
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS="-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true",
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        SPARK_CONF_DIR=str(base / "conf"),
        SPARK_WORKER_DIR=str(base / "work"),
        SPARK_LOCAL_DIRS=str(base / "tmp"),
        PYSPARK_PYTHON=sys.executable,
    )
    spark_class = str(_spark_class())
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": (
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(free_port())],
            "I have been elected leader",
        ),
        "worker": (
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
             "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(base / "work"), master_url],
            "Successfully registered with master",
        ),
    }  # fmt: skip
    daemons: list[SparkDaemonProcess] = []
    try:
        for name, (argv, ready_line) in commands.items():
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)  # fmt: skip
            daemon = SparkDaemonProcess(proc, base / f"{name}.log", ready_line)
            daemons.append(daemon)
            threading.Thread(target=daemon.pump, daemon=True).start()
            daemon.wait_ready()
        yield Standalone(master_url, base / "work")
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


@pytest.mark.heavy
def test_pipeline_on_spark_standalone(
    spark_standalone: Standalone, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """The pipeline on a standalone master + worker, the driver on another loopback address (--driver-host): the
    executor reaches it there, and every event lands once, in order."""
    cmd = [sys.executable, str(EXAMPLES / "pipeline.py"), "--uri", f"distributedlog-local://{tmp_path}/ns",
           "--checkpoint", str(tmp_path / "ckpt"), "--events", "2000", "--master", spark_standalone.master_url,
           "--driver-host", "127.0.0.2"]  # fmt: skip
    out = run(cmd, subprocess_env, timeout=540)  # a hang guard
    assert "PIPELINE OK input=2000 output=2000 duplicates=0 missing=0 out_of_order=0" in out.stdout
    events = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith('{"event": "executors"')]
    assert len(events) == 1 and events[0]["registered"] == 1, out.stdout
    assert re.fullmatch(r"127\.0\.0\.2:\d+", events[0]["driver"]), events


@pytest.mark.heavy
def test_pipeline_fails_loudly_when_executors_cannot_reach_the_driver(
    spark_standalone: Standalone, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """The driver listens on 127.0.0.1 but tells the executors 127.0.0.9 (nothing listens there: their connection
    is refused, as across a firewall or from a container's private address). Instead of waiting for ever, the run
    exits 3 within --startup-timeout, naming the address the executors were told and the option that fixes it."""
    cmd = [sys.executable, str(EXAMPLES / "pipeline.py"), "--uri", f"distributedlog-local://{tmp_path}/ns",
           "--checkpoint", str(tmp_path / "ckpt"), "--events", "500", "--master", spark_standalone.master_url,
           "--driver-host", "127.0.0.9", "--driver-bind-address", "127.0.0.1", "--startup-timeout", "60"]  # fmt: skip
    out = subprocess.run(cmd, env=subprocess_env, capture_output=True, text=True, timeout=540)  # a hang guard
    assert out.returncode == 3, f"exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    failed = [ln for ln in out.stderr.splitlines() if ln.startswith("PIPELINE FAILED: ")]
    assert len(failed) == 1, out.stderr[-3000:]
    message = failed[0]
    assert "no executor registered with the driver within 60 s" in message
    port = re.search(r"connect to the driver at 127\.0\.0\.9:(\d+) ", message)
    assert port is not None, message
    assert "the driver listens on 127.0.0.1" in message and "--driver-host" in message
    # the executors were indeed told that address (the worker writes each executor's command line first)
    driver_url = f"spark://CoarseGrainedScheduler@127.0.0.9:{port.group(1)}"
    told = [p for p in spark_standalone.work_dir.glob("app-*/*/stderr") if driver_url in p.read_text(errors="replace")]
    assert told, f"no executor of {spark_standalone.work_dir} was given {driver_url}"
