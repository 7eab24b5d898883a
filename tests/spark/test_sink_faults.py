"""The sink under real failures, each in processes of its own: a task failing in write() on its
first attempt (retried), an older run of a query fenced by a newer one, and 20 SIGKILLs of the
pipeline (tests/spark/faults.py, ``make chaos``). The example pipeline's whole run (producer process,
query, its exactly-once check) is tests/spark/test_multi_executor.py's, on two executors."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import dl_spark
import storage
from examples.pipeline import event_payload, read_log, start_query
from tests.spark.faults import _descendants, _kill_group, run_kill_harness
from tests.storage.observe import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.heavy
def test_task_failing_in_write_on_first_attempt_is_retried_without_duplicates(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.spark.faults",
            "retry",
            f"distributedlog-local://{tmp_path / 'ns'}",
            str(tmp_path / "ckpt"),
            str(tmp_path / "marker"),
        ],
        cwd=ROOT,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RETRY "))
    result = json.loads(line[len("RETRY ") :])
    assert result["failed_once"]  # the first attempt of partition 0 failed while write() consumed rows
    assert result["rows"] == result["distinct"] == 40000 and result["in_order"]
    assert result["staged_left"] == 0 and result["ledgers"] == result["published"]  # nothing leaked
    assert result["discarded_ids"]  # the failed attempt had staged a ledger: it was discarded


def _append_events(uri: str, first: int, n: int) -> None:
    with storage.open_namespace(uri) as ns, ns.open_log("events").open_writer() as w:
        for i in range(first, first + n):
            w.write(storage.LogRecord(i + 1, event_payload(i)))
        w.flush()


def _stop_tree(root: int) -> list[int]:
    """SIGSTOP ``root`` and every descendant, listing them again until no new one appears (a process forked
    between a listing and the stop of its parent is caught by the next listing). A process that exits
    meanwhile (a short-lived helper of Spark's launcher, a forked worker ending) is skipped: it can act no more."""
    stopped: list[int] = []
    while True:
        fresh = [pid for pid in [root, *_descendants(root)] if pid not in stopped]
        if not fresh:
            return stopped
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)


def _continue(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def _freeze(root: int, uri: str) -> list[int]:
    """SIGSTOP ``root``'s process tree, but never while it holds the output log's lock (mid-publish); returns the
    stopped pids."""
    while True:
        pids = _stop_tree(root)
        with storage.open_namespace(uri) as ns:
            path = ns.paths_of("enriched").lock
            try:
                ns.metastore.lock(path, "probe", 0.2).release()
                return pids
            except storage.OwnershipAcquireFailedError:
                pass
        _continue(pids)
        time.sleep(0.05)


@pytest.mark.heavy
def test_older_run_of_the_same_query_id_is_fenced(spark: Any, tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """Run 1 of the pipeline (its own process) is frozen after committing; a copy of its checkpoint
    (same query id) runs as run 2 here and commits; run 1, resumed, must fail on its next commit
    with QueryFencedError and add nothing."""
    uri, ckpt = f"distributedlog-local://{tmp_path}/ns", tmp_path / "ckpt"
    _append_events(uri, 0, 600)
    log_path = tmp_path / "run1.log"
    with open(log_path, "wb") as out:
        cmd = [sys.executable, str(ROOT / "examples" / "pipeline.py"), "--uri", uri, "--checkpoint", str(ckpt)]
        old = subprocess.Popen(
            [*cmd, "--no-producer", "--max-per-trigger", "200"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=subprocess_env,
            start_new_session=True,
        )
    pids: list[int] = []
    try:

        def second_batch_committed() -> bool:
            assert old.poll() is None, log_path.read_text()[-3000:]
            return (dl_spark.last_commit(uri, "enriched") or {}).get("batchId", -1) >= 1  # type: ignore[operator,no-any-return]

        wait_until(second_batch_committed, "run 1's second batch committed", timeout_s=120, poll_s=0.2)
        pids = _freeze(old.pid, uri)  # run 1 stalls (a long GC pause, a partitioned driver)
        run1 = dl_spark.last_commit(uri, "enriched")
        assert run1 is not None
        shutil.copytree(ckpt, tmp_path / "ckpt2")
        args = argparse.Namespace(
            uri=uri, input="events", output="enriched", checkpoint=str(tmp_path / "ckpt2"), committed=False
        )
        args.max_per_trigger = 100_000
        start_query(spark, args, available_now=True).awaitTermination()  # run 2: same query id
        run2 = dl_spark.last_commit(uri, "enriched")
        assert run2 is not None and run2["queryId"] == run1["queryId"] and run2["runId"] != run1["runId"]
        assert run2["runs"] == [run1["runId"], run2["runId"]]
        after_run2 = read_log(uri, "enriched")
        assert sorted(json.loads(p)["id"] for _, p in after_run2) == list(range(600))  # exactly once so far
        _append_events(uri, 600, 200)  # new input for run 1 to (try to) commit
    except BaseException:  # the test failed: run 1 must not outlive it, frozen or not
        _kill_group(old)
        raise
    finally:
        _continue(pids)
    try:
        old.wait(120)
    finally:
        if old.poll() is None:
            os.killpg(old.pid, signal.SIGKILL)
    text = log_path.read_text(errors="replace")
    assert old.returncode != 0 and "QueryFencedError" in text and f"run {run1['runId']} is fenced" in text, text[-3000:]
    assert read_log(uri, "enriched") == after_run2  # the old run added nothing
    assert dl_spark.last_commit(uri, "enriched") == run2


@pytest.mark.slow
@pytest.mark.chaos  # ~17 min (a JVM per start): `make chaos`, as is the 3-kill run in test_multi_executor.py
@pytest.mark.timeout(1800)
def test_twenty_sigkills_exactly_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """20 SIGKILLs of the whole pipeline (driver, JVM, Python workers), restarts on the same
    checkpoint; before the 11th start the checkpoint is deleted (resume from committed:<output>)."""
    result = run_kill_harness(tmp_path, kills=20, seed=20240501, checkpoint_loss_at=10)
    with capsys.disabled():
        print(f"\n{result.line()}")
    assert result.resumed_with == "committed:enriched", result.line()
    assert result.lost == 0 and result.duplicated == 0 and result.out_of_order == 0, result.line()
    assert result.output == result.input > 0
    assert result.leaked_ledgers == 0, result.line()  # killed tasks' staged ledgers were all cleaned up
