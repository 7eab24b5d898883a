"""The stream reader's committed positions, recorded in each log's subscriptions store.

Spark keeps a query's positions in its checkpoint, where no one else can see them (Spark's Kafka
connector never commits them back to Kafka). This source also records them, under the query's
``subscriberId``, in DistributedLog's subscriptions store of every log it reads
(``<log root>/subscribers/<id>``), so ``dlog subscribers`` / ``dlog lag`` and
``dlm.subscriber_lag()`` show how far the query is behind. The position recorded is the DLSN of the
next record the query will read: the end offset of its last completed batch.

When: Spark's ``commit(end)`` arrives one batch late and is never called after the last batch of an
``availableNow`` run, so positions are also recorded from ``latestOffset(start, ...)``: Spark asks it
for the next batch only once the batch that ended at ``start`` completed (that last call is what
covers an ``availableNow`` run's final batch). Recording is advisory: a failure is logged and
retried at the next call, never fails the query; positions only move forward.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from dl_spark import _handles
from storage.errors import DLError
from storage.formats.dlsn import DLSN

__all__ = ["PositionRecorder"]

log = logging.getLogger(__name__)


class PositionRecorder:
    """Records positions of one query (``subscriber_id``) in the logs of one namespace, writing only
    when a log's position moved since the last write from this process."""

    def __init__(self, uri: str, subscriber_id: str) -> None:
        self.uri = uri
        self.subscriber_id = subscriber_id
        self._recorded: dict[str, DLSN] = {}

    def record(self, positions: Mapping[str, DLSN]) -> None:
        """Advance the subscriber to ``positions[log]`` in each log (never raises: logs a warning)."""
        for name, pos in sorted(positions.items()):
            if self._recorded.get(name) == pos:
                continue
            try:
                _handles.log_manager(self.uri, name).subscriptions().advance(self.subscriber_id, pos)
            except DLError as e:
                log.warning(
                    "could not record position %s of subscriber %r in log %r (retried next batch): %s",
                    pos,
                    self.subscriber_id,
                    name,
                    e,
                )
                continue
            self._recorded[name] = pos
