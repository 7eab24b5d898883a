"""Several writers into one log under SIGKILLs (tests/spark/writers_faults.py): streaming queries and an
idempotent df.write job into one output log, drivers SIGKILLed at seeded moments, one query's checkpoint lost
half-way: the output is the union of the inputs, each exactly once, in each input's order.

CI runs a short schedule (2 queries, 2 driver kills, one checkpoint loss, the batch job killed and retried);
``make chaos`` a long one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.writers_faults import run_writers_harness

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def _say(capsys: pytest.CaptureFixture[str], text: str, lead: str = "\n") -> None:
    """Print past pytest's capture, so that the checker line is in the test run's output (and CI's log)."""
    with capsys.disabled():
        print(f"{lead}{text}", flush=True)


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, **schedule: Any) -> None:
    result = run_writers_harness(tmp_path, report=lambda text: _say(capsys, text, lead="\n  "), **schedule)
    _say(capsys, result.line())
    assert result.resumed_with == "committed:enriched", result.line()
    assert result.ok, result.line()


@pytest.mark.timeout(900)
def test_two_queries_and_a_batch_job_into_one_log_under_driver_kills(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _run(capsys, tmp_path, queries=2, kills=2, seed=11, checkpoint_loss_at=1, final_job_run=False)


@pytest.mark.chaos  # ~10 min: `make chaos`
@pytest.mark.timeout(2400)
def test_three_queries_and_a_batch_job_under_twelve_driver_kills(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _run(capsys, tmp_path, queries=3, kills=12, seed=5, checkpoint_loss_at=4, max_delay_s=4.0)
