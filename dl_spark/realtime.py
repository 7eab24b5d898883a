"""Spark Real-Time Mode from Python: ``format("distributedlog-rt")``, the JVM source that reads DistributedLog logs.

Spark's Real-Time Mode (``trigger(realTime="5 seconds")``) runs one long task per input partition for the whole
batch and hands each record to the sink as soon as it is read. Only JVM sources take part: a Python data source
such as ``format("distributedlog")`` is refused (``STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED``). The
source ``distributedlog-rt`` is written in Java against DistributedLog's Java API (the ``jvm_shim`` jar, which starts
one Python gateway process per driver or executor JVM), with the rows, offsets and option names of
``format("distributedlog")``. Its jars must be on the session's ``spark.jars`` before the session starts::

    from dl_spark import realtime

    spark = realtime.configure(SparkSession.builder).getOrCreate()
    df = realtime.read_stream(spark, "distributedlog-local:///data/ns", ["events"], startingOffsets="earliest")
    df.writeStream.format("console").outputMode("update").trigger(realTime="5 seconds") \\
        .option("checkpointLocation", "/tmp/ckpt").start()

The jars are built on first use (a JDK >= 17 is needed then: :mod:`jvm_shim.build`).

:func:`write_stream` is the matching sink: a JVM ``ForeachWriter`` (a ``foreach`` sink, which Real-Time Mode allows)
that appends each row to a log as it arrives, exactly once for a stateless query of one source log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = [
    "FORMAT",
    "SINK_CLASS",
    "clear_unfinished_first_batch",
    "configure",
    "jar_paths",
    "read_stream",
    "write_stream",
]

#: The short name of the real-time source.
FORMAT = "distributedlog-rt"
#: The JVM ``ForeachWriter`` that :func:`write_stream` writes through (in the source's jar).
SINK_CLASS = "org.apache.distributedlog.spark.rt.DistributedLogForeachWriter"

_Target = TypeVar("_Target")

log = logging.getLogger(__name__)

#: A file Spark writes first and renames into the checkpoint's ``offsets`` or ``commits`` once complete
#: (``.<batch>.<uuid>.tmp``), and its checksum (``..<batch>.<uuid>.tmp.crc``).
_SPARK_TEMP_FILE = re.compile(r"^\.\.?\d+\.[0-9a-f-]+\.tmp(\.crc)?$")


def jar_paths() -> list[Path]:
    """The jars the real-time source needs on the driver and the executors: the ``jvm_shim`` jar (DistributedLog's
    Java API), the source's own jar and py4j's jar; the first two are built when missing or out of date.

    Raises:
        storage.errors.UnexpectedError: a jar must be built and cannot be (no JDK, no pyspark, a compile error),
            or there is no py4j jar.
    """
    import jvm_shim
    from jvm_shim import build
    from storage.errors import UnexpectedError

    shim = jvm_shim.jar_path()
    try:
        rt = build.spark_rt_jar_path(shim)
    except build.JavaBuildError as e:
        raise UnexpectedError(f"cannot build the {FORMAT} jar: {e}") from e
    return [shim, rt, jvm_shim.py4j_jar()]


def configure(target: _Target) -> _Target:
    """Add :func:`jar_paths` to ``spark.jars`` of ``target``, a ``SparkSession.Builder`` (returned, to chain
    ``.getOrCreate()``); jars already listed there are kept. For a ``SparkSession`` that is running, check that its
    ``spark.jars`` has them (Spark loads ``spark.jars`` only when the session starts) and return it.

    Raises:
        storage.errors.InvalidArgumentError: ``target`` is a running session whose ``spark.jars`` lacks the
            source's jars (the message says to configure the builder before the session starts), or is neither a
            builder nor a session.
        storage.errors.UnexpectedError: as :func:`jar_paths`.
    """
    from pyspark.sql import SparkSession

    from storage.errors import InvalidArgumentError

    jars = [str(p) for p in jar_paths()]
    if isinstance(target, SparkSession):
        have = [j for j in target.sparkContext.getConf().get("spark.jars", "").split(",") if j]
        names = {Path(j.removeprefix("file:")).name for j in have}
        missing = [j for j in jars if Path(j).name not in names]
        if missing:
            raise InvalidArgumentError(
                f"this SparkSession was started without the jars of format {FORMAT} ({', '.join(missing)}): "
                "spark.jars is read only when a session starts; call realtime.configure(SparkSession.builder) "
                "before getOrCreate() (or pass them to spark-submit --jars)"
            )
        return target
    if not isinstance(target, SparkSession.Builder):
        raise InvalidArgumentError(
            f"configure() takes a SparkSession.Builder or a SparkSession, got {type(target).__name__}"
        )
    options = getattr(target, "_options", {})
    existing = [j for j in str(options.get("spark.jars", "")).split(",") if j]
    merged = existing + [j for j in jars if j not in existing]
    target.config("spark.jars", ",".join(merged))
    return target


def read_stream(
    spark: SparkSession,
    uri: str,
    streams: str | Sequence[str] | None = None,
    **options: str | int | bool,
) -> DataFrame:
    """``spark.readStream.format("distributedlog-rt")`` on the logs ``streams`` (a list, or a comma-separated
    string; None: give ``streamPattern=...``) of the namespace ``uri``, with ``options`` (``startingOffsets``,
    ``startingTxId``, ``failOnDataLoss``, ``subscriberId``, ``streamPattern``, ``dlog.<key>`` as
    ``**{"dlog.key": value}``). Booleans are passed as ``true`` / ``false``.

    The source checks its options when the query starts: a bad or micro-batch-only one (``maxRecordsPerTrigger``,
    ``endingOffsets``...) fails it with ``IllegalArgumentException`` naming the option.
    """
    reader = spark.readStream.format(FORMAT).option("uri", uri)
    if streams is not None:
        reader = reader.option("streams", streams if isinstance(streams, str) else ",".join(streams))
    for key, value in options.items():
        reader = reader.option(key, ("true" if value else "false") if isinstance(value, bool) else str(value))
    return reader.load()


def write_stream(
    df: DataFrame,
    uri: str,
    log: str,
    checkpoint: str,
    trigger: str | None = "5 seconds",
    **options: str | int | bool,
) -> StreamingQuery:
    """Start a query that appends each row's ``value`` (binary or string) to the log ``log`` of the namespace ``uri``
    as the row arrives, through the JVM ``ForeachWriter`` :data:`SINK_CLASS` (a ``foreach`` sink, which Real-Time
    Mode allows); returns the started ``StreamingQuery`` (``outputMode("update")``, ``checkpointLocation``
    ``checkpoint``, ``trigger(realTime=trigger)``; ``trigger=None``: Spark's default micro-batch trigger).

    Exactly once by default, for a stateless query of one source log of ``format("distributedlog-rt")`` that gives at
    most one row per source record and keeps the source's ``stream`` and ``sequence_id`` columns: the output record's
    transaction id is the source record's sequence id, and a restarted query skips what an earlier attempt wrote.
    ``options``: ``atLeastOnce=True`` (write every row: several source logs, rows without those columns),
    ``writerIdleTimeoutMs`` (how long an unused writer stays open between tasks, default 10000), ``dlog.<key>``
    (DistributedLog configuration of the writer's namespace, as ``**{"dlog.key": value}``). Booleans are passed as
    ``true`` / ``false``.

    Raises:
        pyspark.errors.IllegalArgumentException: the rows or the source cannot be written exactly once (no
            ``value``, ``stream`` or ``sequence_id`` column, a source of several logs or of a ``streamPattern``) and
            ``atLeastOnce`` is not set, or an unknown or bad option (the message names it).
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import convert_exception

    spark = df.sparkSession
    jvm = spark._jvm
    assert jvm is not None
    jopts = jvm.java.util.HashMap()
    for key, value in options.items():
        jopts.put(key, ("true" if value else "false") if isinstance(value, bool) else str(value))
    sink = jvm
    for part in SINK_CLASS.split("."):
        sink = getattr(sink, part)
    try:
        jwriter = sink.forStream(df._jdf, uri, log, jopts)
    except Py4JJavaError as e:
        raise convert_exception(e.java_exception) from None
    clear_unfinished_first_batch(spark, checkpoint)
    writer = df.writeStream
    writer._jwrite = writer._jwrite.foreach(jwriter)
    writer = writer.outputMode("update").option("checkpointLocation", checkpoint)
    if trigger is not None:
        writer = writer.trigger(realTime=trigger)  # type: ignore[call-overload]  # pyspark's overloads lack it
    return writer.start()


def clear_unfinished_first_batch(spark: SparkSession, checkpoint: str) -> list[str]:
    """Remove what a driver that stopped while writing a query's *first* batch left in the checkpoint: Spark's
    temporary files in ``offsets`` and ``commits`` when neither holds a finished batch. Returns the removed paths.

    Spark writes each checkpoint file under a temporary name and renames it when complete. A driver killed between
    the two leaves the temporary file, and a query whose first batch was never finished must start from an empty
    ``offsets`` directory: Spark's Real-Time Mode then refuses every restart
    (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). Those files hold no finished batch, so nothing is lost by
    removing them. A checkpoint with a finished batch is left as it is. Works on any Hadoop file system.
    """
    jvm = spark._jvm
    assert jvm is not None
    hadoop_fs: Any = jvm.org.apache.hadoop.fs
    root = hadoop_fs.Path(checkpoint)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[union-attr]
    leftovers = []
    for name in ("offsets", "commits"):
        directory = hadoop_fs.Path(root, name)
        if not fs.exists(directory):
            continue
        for status in fs.listStatus(directory):
            path = status.getPath()
            if path.getName().isdigit():
                return []  # a finished batch: not a first batch, nothing to clear
            if _SPARK_TEMP_FILE.match(path.getName()):
                leftovers.append(path)
    for path in leftovers:
        fs.delete(path, False)
    if leftovers:
        log.warning(
            "checkpoint %s: removed %d temporary files of a first batch its driver never finished: %s",
            checkpoint,
            len(leftovers),
            ", ".join(str(p.getName()) for p in leftovers),
        )
    return [str(p.toString()) for p in leftovers]
