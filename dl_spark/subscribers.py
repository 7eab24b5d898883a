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
from storage.errors import DLError, LogNotFoundError
from storage.formats.dlsn import DLSN
from storage.log.subscriptions import SubscriberPositions

__all__ = ["PositionRecorder"]

log = logging.getLogger(__name__)


class PositionRecorder:
    """Records positions of one query (``subscriber_id``) in the logs of one namespace, writing only
    the logs whose position moved since the last write from this process, in bulk
    (:class:`storage.log.subscriptions.SubscriberPositions`)."""

    def __init__(self, uri: str, subscriber_id: str) -> None:
        self.uri = uri
        self.subscriber_id = subscriber_id
        self._recorded: dict[str, DLSN] = {}
        self._positions: SubscriberPositions | None = None

    def record(self, positions: Mapping[str, DLSN]) -> None:
        """Advance the subscriber to ``positions[log]`` in each log (never raises: logs a warning)."""
        todo = {name: pos for name, pos in positions.items() if self._recorded.get(name) != pos}
        if not todo:
            return
        try:
            if self._positions is None:
                self._positions = _handles.namespace(self.uri).subscriber_positions(self.subscriber_id)
            self._positions.advance(todo)
        except DLError as e:
            self._positions = None
            log.warning(
                "could not record the positions of subscriber %r in %d log(s) (retried next batch): %s",
                self.subscriber_id,
                len(todo),
                e,
            )
            if not isinstance(e, LogNotFoundError):
                return
        self._recorded.update(todo)
