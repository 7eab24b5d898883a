"""The sink under real failures, each in processes of its own: a task failing in write() on its
first attempt (retried), the example pipeline, and 20 SIGKILLs of the pipeline (tests/spark/faults.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.faults import run_kill_harness

ROOT = Path(__file__).resolve().parents[2]


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
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RETRY "))
    result = json.loads(line[len("RETRY ") :])
    assert result["failed_once"]  # the first attempt of partition 0 failed while write() consumed rows
    assert result["rows"] == result["distinct"] == 40000 and result["in_order"]
    assert result["staged_left"] == 0 and result["ledgers"] == result["published"]  # nothing leaked
    assert result["discarded_ids"]  # the failed attempt had staged a ledger: it was discarded


def test_pipeline_example(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "pipeline.py"),
            *("--uri", f"distributedlog-local://{tmp_path}/ns", "--checkpoint", str(tmp_path / "ckpt")),
            *("--events", "8000"),
        ],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "PIPELINE OK input=8000 output=8000 duplicates=0 missing=0 out_of_order=0" in out.stdout


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_twenty_sigkills_exactly_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """20 SIGKILLs of the whole pipeline (driver, JVM, Python workers), restarts on the same
    checkpoint; before the 11th start the checkpoint is deleted (resume from committed:<output>)."""
    result = run_kill_harness(tmp_path, kills=20, seed=20240501, checkpoint_loss_at=10)
    with capsys.disabled():
        print(f"\n{result.line()}")
    assert result.resumed_with == "committed:enriched", result.line()
    assert result.lost == 0 and result.duplicated == 0 and result.out_of_order == 0, result.line()
    assert result.output == result.input > 0
