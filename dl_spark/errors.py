"""Errors of the Spark layer; all are part of ``storage``'s error tree (root ``DLError``)."""

from __future__ import annotations

from storage.errors import AlreadyTruncatedTransactionError, InvalidArgumentError, WriterFencedError


class SourceOptionError(InvalidArgumentError):
    """A bad option of ``format("distributedlog")``: raised before any data is read."""


class DataLossError(AlreadyTruncatedTransactionError):
    """A position the query must read from was truncated or purged, or its log was deleted
    (raised only with ``failOnDataLoss=true``)."""


class SinkOptionError(InvalidArgumentError):
    """A bad option or input schema of the ``distributedlog`` sink: raised before any row is written."""


class QueryFencedError(WriterFencedError):
    """An older run of a streaming query tried to commit after a newer run of the same query id
    committed to the log (a zombie): its batch is refused and nothing of it becomes visible."""


__all__ = ["DataLossError", "QueryFencedError", "SinkOptionError", "SourceOptionError"]
