"""The sink's commit records and the decision taken, under the log's lock, before publishing a batch.

A streaming batch publishes, atomically with its rows, a commit record on every log it writes::

    {"queryId": "<uuid>", "runId": "<uuid>", "batchId": 7, "batchTimestampMs": 1795330493530,
     "offsets": {"<source log>": "lssn,entry,slot", ...},   # end offsets of a single source
     "sources": [<end offset of source 0>, ...],            # every source, as in the checkpoint
     "runs": ["<older run id>", ..., "<runId>"],           # recent runs of this query id
     "rows": 1234}

A batch ``df.write`` job publishes ``{"queryId": null, "batchId": null, "jobId": "<uuid>", "rows": n}``, with
``"writerId"`` and ``"writerVersion"`` when it was given those options (an idempotent job).

Each writer's latest record is also kept as its own exactly-once state (:mod:`storage.log.writer_state`), under
the key ``query:<queryId>`` or ``job:<writerId>``: the rules below see the writer's own previous record, whatever
other writers published to the log after it.

:func:`decide_stream` is the exactly-once and fencing rule (Delta's ``SetTransaction`` idea plus a
run history): a batch id already in for the same query id is skipped; an older run of the query id
(one in the history that is not the latest) is refused with :class:`QueryFencedError`.

The checkpoint helpers read Spark's own files under ``checkpointLocation``: ``metadata`` (the
query id) and ``offsets/<batchId>`` (``v1``, a JSON line with ``batchTimestampMs``, then one line
per source with its end offset). Only local paths (``/abs``, ``file:``) can be read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from dl_spark.errors import QueryFencedError

__all__ = [
    "MAX_RUNS",
    "BatchInfo",
    "decide_batch",
    "decide_stream",
    "local_checkpoint_path",
    "read_batch_info",
    "read_query_id",
]

#: Run ids of a query id kept in its commit records (older ones can no longer be recognised as zombies).
MAX_RUNS = 64


def local_checkpoint_path(location: str | None) -> str | None:
    """``checkpointLocation`` as an absolute local path, or None if it is not on the local file system."""
    if not location:
        return None
    text = location.strip()
    if "://" in text or text.startswith("file:"):
        parsed = urlparse(text)
        if parsed.scheme != "file":
            return None
        text = unquote(parsed.path)
    return os.path.abspath(text)


@dataclass(frozen=True)
class BatchInfo:
    """What the checkpoint's ``offsets/<batchId>`` says about a micro-batch."""

    timestamp_ms: int | None
    sources: list[Any] = field(default_factory=list)

    def flat_offsets(self) -> dict[str, str] | None:
        """The end offsets of a single source shaped ``{log: "lssn,entry,slot"}`` (this project's
        source), else None."""
        if len(self.sources) != 1:
            return None
        only = self.sources[0]
        if isinstance(only, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in only.items()):
            return dict(only)
        return None


def read_batch_info(checkpoint: str | None, batch_id: int) -> BatchInfo | None:
    """Parse ``<checkpoint>/offsets/<batch_id>``; None if it cannot be read (no local checkpoint)."""
    root = local_checkpoint_path(checkpoint)
    if root is None:
        return None
    try:
        with open(os.path.join(root, "offsets", str(batch_id)), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    if len(lines) < 2 or not lines[0].startswith("v"):
        return None
    try:
        meta = json.loads(lines[1])
        ts = int(meta["batchTimestampMs"])
    except (ValueError, KeyError, TypeError):
        return None
    sources: list[Any] = []
    for line in lines[2:]:
        text = line.strip()
        try:
            sources.append(json.loads(text))
        except ValueError:
            sources.append(text)  # "-" (no offset yet) or a source's own non-JSON form
    return BatchInfo(ts, sources)


def read_query_id(checkpoint: str | None) -> str | None:
    """The query id in ``<checkpoint>/metadata`` (``{"id": ...}``), or None."""
    root = local_checkpoint_path(checkpoint)
    if root is None:
        return None
    try:
        with open(os.path.join(root, "metadata"), encoding="utf-8") as f:
            doc = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    value = doc.get("id") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def decide_batch(previous: Mapping[str, Any] | None, commit: Mapping[str, Any]) -> bool:
    """Whether a ``df.write`` job publishes on top of its writer's ``previous`` record: always without a
    ``writerId``; with one, only when its ``writerVersion`` is above the version last published under that id
    (a retried run is skipped, as Delta's ``txnAppId`` / ``txnVersion``)."""
    writer_id = commit.get("writerId")
    if writer_id is None or previous is None or previous.get("writerId") != writer_id:
        return True
    last = previous.get("writerVersion")
    return not (isinstance(last, int) and last >= int(commit["writerVersion"]))


def decide_stream(
    previous: Mapping[str, Any] | None, commit: dict[str, Any], *, log: str = "?", now_runs: int = MAX_RUNS
) -> bool:
    """Whether the streaming batch described by ``commit`` (``queryId``, ``runId``, ``batchId``) is
    published on top of the log's ``previous`` commit record. Completes ``commit["runs"]`` (the
    run history carried over from ``previous``). Called by :func:`storage.log.staging.publish` under
    the log's lock, before the record is written.

    * no previous record, or one of another query id: publish (a new history);
    * same query id, run id an older run (in the history, not the latest): refuse (zombie);
    * same query id, batch id already in (previous batch id >= this one): skip, nothing is added;
    * else publish; a run id not seen before is appended to the history.

    Raises:
        QueryFencedError: an older run of the same query id.
    """
    run_id = commit.get("runId")
    batch_id = int(commit["batchId"])
    if previous is None or previous.get("queryId") != commit.get("queryId"):
        commit["runs"] = [run_id] if run_id else []
        return True
    raw_runs = previous.get("runs")
    runs = [r for r in raw_runs if isinstance(r, str)] if isinstance(raw_runs, list) else []
    prev_run = previous.get("runId")
    latest = runs[-1] if runs else prev_run
    if run_id and run_id != latest and run_id in runs:
        raise QueryFencedError(
            f"query {commit.get('queryId')} run {run_id} is fenced on log {log!r}: a newer run ({latest}) of the same "
            f"query id committed batch {previous.get('batchId')}; batch {batch_id} of the old run is refused "
            "(stop the older query)"
        )
    prev_batch = previous.get("batchId")
    if isinstance(prev_batch, int) and prev_batch >= batch_id:
        return False  # replayed batch: already in, exactly once
    if run_id and run_id != latest:
        runs.append(run_id)
    commit["runs"] = runs[-now_runs:]
    return True
