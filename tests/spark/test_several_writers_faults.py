"""Several writers into one log under SIGKILLs (tests/spark/writers_faults.py): streaming queries and an
idempotent df.write job into one output log, drivers SIGKILLed at seeded moments, one query's checkpoint lost
half-way: the output is the union of the inputs, each exactly once, in each input's order.

CI runs a short schedule (2 queries, 2 driver kills, one checkpoint loss, the batch job killed and retried);
``make chaos`` a long one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spark.writers_faults import run_writers_harness

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def _check(result_line: str, ok: bool) -> None:
    print("\n" + result_line)
    assert ok, result_line


@pytest.mark.timeout(900)
def test_two_queries_and_a_batch_job_into_one_log_under_driver_kills(tmp_path: Path) -> None:
    result = run_writers_harness(tmp_path, queries=2, kills=2, seed=11, checkpoint_loss_at=1, final_job_run=False)
    assert result.resumed_with == "committed:enriched", result.line()
    _check(result.line(), result.ok)


@pytest.mark.chaos  # ~10 min: `make chaos`
@pytest.mark.timeout(2400)
def test_three_queries_and_a_batch_job_under_twelve_driver_kills(tmp_path: Path) -> None:
    result = run_writers_harness(tmp_path, queries=3, kills=12, seed=5, checkpoint_loss_at=4, max_delay_s=4.0)
    assert result.resumed_with == "committed:enriched", result.line()
    _check(result.line(), result.ok)
