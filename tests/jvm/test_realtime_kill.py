"""Exactly once under SIGKILL: a Real-Time Mode query (``distributedlog-rt`` into the exactly-once real-time sink) on
``local-cluster[2,1,1024]`` (two executor JVMs), its driver and the executor running the sink's task SIGKILLed at
seeded moments inside batches, batch 0 included, each time started again on the same checkpoint
(:mod:`tests.jvm.rt_kill`). The history checker then finds every source record once in the output, in order, with
the source's sequence id as its transaction id.

CI runs four kills (the driver in batch 0, an executor in the batch that follows, an executor in a later batch, the
driver in a later batch); ``make chaos`` runs a longer seeded schedule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jvm import rt_kill
from tests.jvm.jdk import Jdk

#: The kills CI runs, in order: (what, which batch).
PLAN = [("driver", "batch0"), ("executor", "batch0"), ("executor", "later"), ("driver", "later")]


def _say(capsys: pytest.CaptureFixture[str], text: str) -> None:
    with capsys.disabled():
        print(f"\n  {text}", flush=True)


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_sigkills_of_the_driver_and_the_sinks_executor_keep_exactly_once(
    tmp_path: Path, jdk: Jdk, capsys: pytest.CaptureFixture[str]
) -> None:
    result = rt_kill.run(tmp_path, PLAN, seed=11)
    _say(capsys, result.line())
    assert result.ok, result.line()
    assert len(result.kills) == len(PLAN), result.line()
    assert result.kills[0] == "driver@batch0", result.line()  # before the query's first commit
    assert result.starts >= 3, result.line()  # the first driver and one after each driver kill


@pytest.mark.chaos  # about 4 minutes: `make chaos`
@pytest.mark.heavy
@pytest.mark.timeout(2400)
def test_a_long_seeded_kill_schedule_keeps_exactly_once(
    tmp_path: Path, jdk: Jdk, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = [(who, when) for _ in range(4) for who in ("driver", "executor") for when in ("batch0", "later")]
    result = rt_kill.run(tmp_path, plan, seed=23)
    _say(capsys, result.line())
    assert result.ok, result.line()
    assert len(result.kills) == len(plan), result.line()
