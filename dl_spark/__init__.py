"""The Spark layer: ``format("distributedlog")``, a source and an exactly-once sink.

``spark.read`` / ``spark.readStream`` (the source) and ``df.write`` / ``df.writeStream`` (the
exactly-once sink, see :mod:`dl_spark.sink`) ``.format("distributedlog")`` work in
any SparkSession once this project is installed: Spark finds the top-level module
``pyspark_distributedlog`` by itself. :func:`register` registers the format explicitly (for a
session whose Python cannot see that module, e.g. an un-installed checkout).

Spark's Python workers must run the interpreter that has this package: from a virtualenv, set
``spark.pyspark.python`` (and ``spark.pyspark.driver.python``) to ``sys.executable``, or make the session with
:func:`spark_session`, which does that and binds the driver to loopback.
"""

from __future__ import annotations

from typing import Any

from dl_spark.errors import DataLossError, QueryFencedError, SinkOptionError, SourceOptionError
from dl_spark.offsets import decode_offsets, dlsn_to_offset, encode_offsets, offset_to_dlsn
from dl_spark.reading import SCHEMA, SCHEMA_DDL
from dl_spark.session import spark_session
from dl_spark.sink import (
    DistributedLogBatchWriter,
    DistributedLogStreamWriter,
    SinkCommitMessage,
    last_commit,
    writer_commits,
)
from dl_spark.source import DistributedLogDataSource, DistributedLogReader, DistributedLogStreamReader

__all__ = [
    "SCHEMA",
    "SCHEMA_DDL",
    "DataLossError",
    "DistributedLogBatchWriter",
    "DistributedLogDataSource",
    "DistributedLogReader",
    "DistributedLogStreamReader",
    "DistributedLogStreamWriter",
    "QueryFencedError",
    "SinkCommitMessage",
    "SinkOptionError",
    "SourceOptionError",
    "decode_offsets",
    "dlsn_to_offset",
    "encode_offsets",
    "last_commit",
    "offset_to_dlsn",
    "register",
    "spark_session",
    "writer_commits",
]


def register(spark: Any) -> None:
    """Register ``format("distributedlog")`` in ``spark`` (a SparkSession)."""
    spark.dataSource.register(DistributedLogDataSource)
