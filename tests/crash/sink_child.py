"""The exactly-once sink's storage half on a crashing machine: stage a batch of the input log's records, then
publish it to the output log with its commit record (what the Spark sink's executors and driver do), batch after
batch, until SIGKILLed.

    python -m tests.crash.sink_child URI CYCLE SEED

Resumes from the output's commit record (the batch id and the input records consumed), and half of the time first
replays the last committed batch, as a query whose checkpoint lost that commit does: the replay must be skipped.
Prints ``{"event": "ready"}`` once it read the commit record, or ``{"event": "recovery-failed", ...}`` (exit 3).
"""

from __future__ import annotations

import json
import random
import sys
import traceback

import storage
from storage.log.staging import publish, read_commit, stage_records

INPUT, OUTPUT = "events", "out"
CONF = {"lockTimeoutSeconds": 20, "logSegmentRetentionHours": 0}


def emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _decide(batch: int):  # type: ignore[no-untyped-def]
    return lambda prev: prev is None or int(prev["batchId"]) < batch


def main(uri: str, cycle: int, seed: int) -> int:
    rng = random.Random(seed)
    try:
        ns = storage.open_namespace(uri, CONF, create=False)
        total = ns.open_log(INPUT).record_count()
        commit = read_commit(ns, OUTPUT)
    except BaseException as e:
        retriable = bool(getattr(e, "retriable", False))
        emit(event="recovery-failed", error=f"{type(e).__name__}: {e}", retriable=retriable,
             trace=traceback.format_exc()[-2000:])  # fmt: skip
        return 3
    emit(event="ready")
    batch = int(commit["batchId"]) + 1 if commit else 0
    consumed = int(commit["consumed"]) if commit else 0
    replay = 0
    if commit and rng.random() < 0.5:  # the last batch again (same input range): its checkpoint commit was lost
        batch, consumed, replay = batch - 1, int(commit["before"]), int(commit["consumed"]) - int(commit["before"])
    inp = ns.open_log(INPUT)
    while consumed < total:
        want = min(replay or rng.randint(1, 300), total - consumed)
        records: list[storage.LogRecordWithDLSN] = []
        with inp.open_reader(consumed + 1) as r:  # input txids are 1, 2, ...
            while len(records) < want:
                records += r.read_bulk(want - len(records), non_blocking=True)
        replay = 0
        staged = stage_records(ns, [(x.txid, x.payload) for x in records], tag={"cycle": cycle, "batch": batch})
        assert staged is not None
        after = consumed + len(records)
        publish(ns, OUTPUT, [staged], {"batchId": batch, "before": consumed, "consumed": after}, _decide(batch))
        batch, consumed = batch + 1, after
    emit(event="drained")
    return 0


def run(argv: list[str]) -> int:
    """``main`` from the command line's arguments (see the module docstring)."""
    return main(argv[0], int(argv[1]), int(argv[2]))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
