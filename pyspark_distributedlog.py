"""Spark finds ``format("distributedlog")`` here with no registration call.

On its first data-source lookup PySpark scans the importable top-level modules named
``pyspark_*`` and registers each one's ``DefaultSource`` (a ``DataSource`` subclass) under
``DefaultSource.name()``.
"""

from __future__ import annotations

from dl_spark.source import DistributedLogDataSource


class DefaultSource(DistributedLogDataSource):
    """``format("distributedlog")``: see :class:`dl_spark.source.DistributedLogDataSource`."""


__all__ = ["DefaultSource"]
