"""Spark with separate executor processes on a ZooKeeper + RADOS namespace.

Each test runs a Spark driver of its own (a SparkContext per process: a ``local-cluster`` driver
cannot share the test session's JVM) on ``local-cluster[2,1,1024]``: two executor JVMs, each with
its own Python workers, so every task reads and writes the namespace from a process other than the
driver's, through its own ZooKeeper session and RADOS client.

* the source: exact rows of a streaming read (``Trigger.AvailableNow``) of logs with completed and
  in-progress segments, and proof that the tasks ran in both executors
  (``tests/spark/multi_executor_job.py``);
* the exactly-once sink: ``examples/pipeline.py`` (a producer process appending while the query
  runs), each input exactly once and in order in the output log;
* the kill harness (``tests/spark/faults.py``): the whole pipeline (driver, master, workers,
  executor JVMs, Python workers) SIGKILLed a few times, then caught up: exactly once, no leaked
  ledger in the test's RADOS namespace (``make chaos``: five minutes of restarts; CI's run kills a
  standalone worker host under the same query in ``tests/cluster/test_spark_faults.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import storage
from storage.log.staging import read_commit
from tests.spark.faults import run_kill_harness
from tests.spark.helpers import log_rows

ROOT = Path(__file__).resolve().parents[2]
MASTER = "local-cluster[2,1,1024]"
JOB = ROOT / "tests" / "spark" / "multi_executor_job.py"
PIPELINE = ROOT / "examples" / "pipeline.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.heavy,
    pytest.mark.parametrize("backend", ["zookeeper-rados"], indirect=True),
]


def _say(capsys: pytest.CaptureFixture[str], text: str, lead: str = "\n") -> None:
    with capsys.disabled():
        print(f"{lead}{text}", flush=True)


def _sorted(rows: list[list]) -> list[list]:  # type: ignore[type-arg]
    return sorted(rows, key=lambda r: (r[0], r[1]))


def test_streaming_read_exact_rows_on_two_executors(
    ns_uri: str, tmp_path: Path, subprocess_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    result_path = tmp_path / "result.json"
    out = subprocess.run(
        [
            sys.executable,
            str(JOB),
            ns_uri,
            str(result_path),
            "--master",
            MASTER,
            "--checkpoint",
            str(tmp_path / "ckpt"),
        ],
        cwd=ROOT,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    r = json.loads(result_path.read_text())
    line = next(x for x in out.stdout.splitlines() if x.startswith("MULTI_EXECUTOR "))
    _say(capsys, f"{line} (test {time.monotonic() - started:.0f}s)")

    # the data: completed segments, an in-progress one left by a dead writer, one with a live writer
    assert r["executors_registered"] == 2
    assert [s["in_progress"] for s in r["segments"]["a"]] == [False, False, False]
    assert [s["in_progress"] for s in r["segments"]["b"]] == [False, False, True]
    assert [s["in_progress"] for s in r["segments"]["c"]] == [True]

    # exact rows (stream, DLSN, txid, sequence id, value): run 1 everything readers saw then,
    # run 2 (from the checkpoint) exactly the rest, nothing twice
    rows = r["rows"]
    run1 = [x["row"] for x in rows if x["run"] == 1]
    run2 = [x["row"] for x in rows if x["run"] == 2]
    assert _sorted(run1) == _sorted(r["expected_run1"])
    assert len(r["expected_run1"]) == 100 + 50 + 15 + 25
    expected_rest = [x for x in r["expected_all"] if x not in r["expected_run1"]]
    assert _sorted(run2) == _sorted(expected_rest) and len(run2) == 12
    assert _sorted(run1 + run2) == _sorted(r["expected_all"])
    # ... which is what the storage core's reader gives now, in this process
    mine = [[s, list(d), t, q, v.hex()] for s, d, t, q, v in log_rows(ns_uri, ["a", "b", "c"])]
    assert _sorted(mine) == _sorted(r["expected_all"])
    assert r["batches"][0] >= 2 and r["batches"][1] == 1

    # where the tasks ran: two executor JVMs, none the driver's; Python workers that are neither
    assert all(x["attempt"] == 0 and x["task_partition"] == x["spark_partition"] for x in rows)
    executors = Counter(x["executor_id"] for x in rows)
    assert set(executors) == {"0", "1"}, executors
    jvm_of = {x["executor_id"]: x["executor_jvm_pid"] for x in rows}
    assert all(x["executor_jvm_pid"] == jvm_of[x["executor_id"]] for x in rows)  # one JVM per executor
    assert len(set(jvm_of.values())) == 2 and r["driver_jvm_pid"] not in jvm_of.values()
    workers = {x["worker_pid"] for x in rows}
    assert r["driver_pid"] not in workers and not workers & set(jvm_of.values())
    workers_of = {e: {x["worker_pid"] for x in rows if x["executor_id"] == e} for e in executors}
    assert not workers_of["0"] & workers_of["1"]  # each executor has Python workers of its own
    for run in (1, 2):  # each run's tasks spread over both executors
        assert {x["executor_id"] for x in rows if x["run"] == run} == {"0", "1"}


def test_pipeline_exactly_once_on_two_executors(
    ns_uri: str, tmp_path: Path, subprocess_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """readStream -> transform -> writeStream.format("distributedlog") while a producer process
    appends: every input exactly once, in input order (the pipeline checks and prints it)."""
    started = time.monotonic()
    out = subprocess.run(
        [
            *(sys.executable, str(PIPELINE), "--master", MASTER),
            *("--uri", ns_uri, "--checkpoint", str(tmp_path / "ckpt"), "--events", "3000"),
        ],
        cwd=ROOT,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    line = "PIPELINE OK input=3000 output=3000 duplicates=0 missing=0 out_of_order=0"
    assert line in out.stdout, out.stdout[-3000:]
    _say(capsys, f"{line} (test {time.monotonic() - started:.0f}s)")
    with storage.open_namespace(ns_uri) as ns:  # every ledger of the test's RADOS namespace is published
        commit = read_commit(ns, "enriched")  # (not dl_spark.last_commit: no namespace cached in this process)
        assert commit is not None and commit["offsets"] is not None
        published = {s.ledger_id for name in ns.list_logs() for s in ns.open_log(name).log_segments()}
        assert set(ns.segstore.list_ledgers()) == published
        assert ns.list_logs() == ["enriched", "events"]


@pytest.mark.chaos  # ~5 min (a local cluster per start): `make chaos`; CI kills whole Spark hosts in tests/cluster
@pytest.mark.timeout(900)
def test_sigkills_exactly_once_on_two_executors(
    ns_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 SIGKILLs of the whole local-cluster pipeline (seed 12: two after a batch went through, one
    while the run starts), the checkpoint deleted before the 3rd start (resume from
    committed:enriched), then a catch-up run. Leaked ledgers are counted in the test's own RADOS
    namespace (``list_ledgers`` of the namespace's segment store)."""
    result = run_kill_harness(
        tmp_path,
        kills=3,
        seed=12,
        checkpoint_loss_at=2,
        uri=ns_uri,
        master=MASTER,
        max_per_trigger=3000,
        report=lambda text: _say(capsys, text, lead="\n  "),
    )
    _say(capsys, result.line())
    assert result.resumed_with == "committed:enriched", result.line()
    assert result.lost == 0 and result.duplicated == 0 and result.out_of_order == 0, result.line()
    assert result.output == result.input > 0, result.line()
    assert result.leaked_ledgers == 0, result.line()
