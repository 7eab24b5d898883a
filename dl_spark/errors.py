"""Errors of the Spark layer; both are part of ``storage``'s error tree (root ``DLError``)."""

from __future__ import annotations

from storage.errors import AlreadyTruncatedTransactionError, InvalidArgumentError


class SourceOptionError(InvalidArgumentError):
    """A bad option of ``format("distributedlog")``: raised before any data is read."""


class DataLossError(AlreadyTruncatedTransactionError):
    """A position the query must read from was truncated or purged, or its log was deleted
    (raised only with ``failOnDataLoss=true``)."""


__all__ = ["DataLossError", "SourceOptionError"]
