"""The exactly-once sink: ``df.writeStream.format("distributedlog")`` and ``df.write.format("distributedlog")``.

Stage, then publish:

* Each task (``write`` on an executor) stages its rows with :func:`storage.log.staging.stage_arrow`
  into new sealed ledgers that no reader can see, one per target log, and returns a
  :class:`SinkCommitMessage` naming them (plus partition id, attempt, query id, run id, batch id).
  A task that fails discards what it staged before re-raising.
* The driver's ``commit(messages, batchId)`` (a fresh writer in a fresh Python worker: no state is
  kept in memory between calls) publishes, per target log, the staged ledgers in partition order
  together with the commit record (:mod:`dl_spark.commits`) in ONE versioned metadata transaction
  (:func:`storage.log.staging.publish_many`); a batch that targets several logs (``stream`` column)
  publishes on all of them in that one transaction. A replayed batch id is skipped, an older run
  of the same query id is fenced.
* ``abort`` discards the staged ledgers that were not published; every commit also sweeps staged
  ledgers older than ``stagingRetentionMs`` (orphans of tasks whose process died).

Options: ``uri`` (required), ``stream`` (target log; wins over a ``stream`` column),
``checkpointLocation`` (Spark passes it; the sink reads the batch's end offsets and timestamp from
it), ``stagingRetentionMs`` (default one hour), ``compressionType`` (``none`` or ``lz4``: each
entry's records as one LZ4 block, DistributedLog's key; default the namespace's ``compressionType``).
Columns: ``value`` BINARY or STRING (UTF-8), required; ``stream`` STRING (without the option);
``txid`` integral, optional: otherwise every row of a micro-batch gets the batch's timestamp
(``batchTimestampMs``, the same on every task and on a replay, non-decreasing across batches), and
every row of a batch job the time its writer was created on the driver. Other columns are ignored.

A target log sealed with ``mark_end_of_stream`` is refused with ``EndOfStreamError``: with the
``stream`` option when the writer is created on the driver, before any task writes; with a
``stream`` column at commit, before anything is published (what was staged is discarded).

The input schema is checked when the writer is created: for ``df.write`` when the job starts; for
``df.writeStream`` when the query's first micro-batch runs, the first time PySpark hands a Python sink the
schema (it runs no sink code in ``start()``). Errors reach the user as one line (:mod:`dl_spark._reporting`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from dl_spark import _handles
from dl_spark._option_names import CONF_PREFIX, check_sink_option_names, conf_options
from dl_spark._reporting import reported
from dl_spark.commits import decide_batch, decide_stream, read_batch_info, read_query_id
from dl_spark.errors import SinkOptionError
from storage.errors import EndOfStreamError, InvalidStreamNameError, LogNotFoundError, NoNodeError
from storage.formats.recordset import CompressionCodec, codec_from_name
from storage.log.layout import LogMetadata, join
from storage.log.names import validate_log_name
from storage.log.namespace import Namespace
from storage.log.staging import (
    STAGING_ROOT,
    PublishItem,
    StagedSegment,
    check_not_sealed,
    discard,
    mark_aborted,
    publish_many,
    read_commit,
    stage_arrow,
    sweep,
)
from storage.log.writer_state import MAX_KEY_LENGTH, list_states

__all__ = [
    "DistributedLogBatchWriter",
    "DistributedLogStreamWriter",
    "SinkCommitMessage",
    "SinkOptions",
    "check_target_not_sealed",
    "last_commit",
    "parse_sink_options",
    "writer_commits",
]

log = logging.getLogger(__name__)

#: ``stagingRetentionMs`` default: staged ledgers older than this are orphans (their task died).
DEFAULT_STAGING_RETENTION_MS = 60 * 60 * 1000
#: writer keys of the per-writer exactly-once state (storage.log.writer_state)
_QUERY_PREFIX = "query:"
_JOB_PREFIX = "job:"
_INTEGRAL = (LongType, IntegerType, ShortType, ByteType)


# --- options and schema -------------------------------------------------------------------------
@dataclass(frozen=True)
class SinkOptions:
    """The sink's options and the input columns it uses, checked (plain values: pickled)."""

    uri: str
    stream: str | None
    checkpoint: str | None
    staging_retention_ms: int
    value_is_string: bool
    has_stream_column: bool
    has_txid_column: bool
    #: ``CompressionCodec`` of the staged entries; None: the namespace's ``compressionType``.
    codec: int | None = None
    #: DistributedLog configuration of the namespace (``dlog.<key>`` options), checked.
    conf: tuple[tuple[str, Any], ...] = ()
    #: ``writerId`` + ``writerVersion``: an idempotent batch job (Delta's txnAppId + txnVersion).
    writer_id: str | None = None
    writer_version: int | None = None

    def namespace(self) -> Namespace:
        """This process's namespace handle for these options (see :mod:`dl_spark._handles`)."""
        return _handles.namespace(self.uri, dict(self.conf) or None)


def parse_sink_options(options: Mapping[str, str], schema: StructType) -> SinkOptions:
    """Check the options and the input schema before any row is written.

    Raises:
        SinkOptionError: no ``uri``; an invalid ``stream`` name; no ``value`` column or one that is
            not BINARY/STRING; neither a ``stream`` option nor a STRING ``stream`` column; a
            ``txid`` column that is not integral; a bad ``stagingRetentionMs`` or ``compressionType``;
            ``writerId`` without ``writerVersion`` (or the other way round), an empty or too long
            ``writerId``, a ``writerVersion`` that is not a non-negative integer; an unknown option
            (naming the closest valid one).
    """
    conf = conf_options(options, SinkOptionError)
    check_sink_option_names({k: v for k, v in options.items() if not str(k).lower().startswith(CONF_PREFIX)})
    opts = {str(k).lower(): v for k, v in options.items()}
    uri = str(opts.get("uri") or "").strip()
    if not uri:
        raise SinkOptionError("option uri is required: the namespace URI, e.g. distributedlog-local:///abs/path")
    stream = opts.get("stream")
    if stream is not None:
        try:
            stream = validate_log_name(str(stream).strip())
        except InvalidStreamNameError as e:
            raise SinkOptionError(f"option stream: invalid log name {stream!r}: {e}") from None
    fields = {f.name.lower(): f for f in schema.fields}
    value = fields.get("value")
    if value is None:
        got = schema.simpleString()
        raise SinkOptionError(
            f"the distributedlog sink needs a 'value' column (BINARY or STRING); got {got}: "
            "select or alias one as value, e.g. selectExpr('CAST(x AS STRING) AS value')"
        )
    if not isinstance(value.dataType, BinaryType | StringType):
        raise SinkOptionError(
            f"column value must be BINARY or STRING, got {value.dataType.simpleString()}: "
            "cast or serialize it, e.g. CAST(value AS STRING) or to_json(value)"
        )
    stream_col = fields.get("stream")
    if stream_col is not None and not isinstance(stream_col.dataType, StringType):
        if stream is None:
            got = stream_col.dataType.simpleString()
            raise SinkOptionError(f"column stream must be STRING, got {got}: cast it, or set the option stream")
        stream_col = None
    if stream is None and stream_col is None:
        raise SinkOptionError("the distributedlog sink needs the option stream (target log) or a STRING column stream")
    txid = fields.get("txid")
    if txid is not None and not isinstance(txid.dataType, _INTEGRAL):
        raise SinkOptionError(
            f"column txid must be BIGINT (an integral type), got {txid.dataType.simpleString()}: "
            "cast it, e.g. CAST(txid AS BIGINT), or drop it (the sink then assigns txids)"
        )
    raw_ret = str(opts.get("stagingretentionms", DEFAULT_STAGING_RETENTION_MS)).strip()
    if not raw_ret.isdigit() or int(raw_ret) < 1:
        raise SinkOptionError(f"option stagingRetentionMs must be a positive integer (milliseconds), got {raw_ret!r}")
    checkpoint = opts.get("checkpointlocation")
    codec = None
    if "compressiontype" in opts:
        raw_codec = str(opts["compressiontype"]).strip()
        codec = codec_from_name(raw_codec.lower())
        if codec is CompressionCodec.UNKNOWN:
            raise SinkOptionError(f"option compressionType must be none or lz4, got {raw_codec!r}")
    writer_id, writer_version = _writer_options(opts)
    return SinkOptions(
        uri=uri,
        stream=stream,
        writer_id=writer_id,
        writer_version=writer_version,
        checkpoint=str(checkpoint) if checkpoint else None,
        staging_retention_ms=int(raw_ret),
        value_is_string=isinstance(value.dataType, StringType),
        has_stream_column=stream is None and stream_col is not None,
        has_txid_column=txid is not None,
        codec=None if codec is None else int(codec),
        conf=tuple(sorted(conf.items())),
    )


def _writer_options(opts: Mapping[str, object]) -> tuple[str | None, int | None]:
    """``(writerId, writerVersion)``, both or neither. Raises SinkOptionError (see parse_sink_options)."""
    raw_id, raw_version = opts.get("writerid"), opts.get("writerversion")
    if raw_id is None and raw_version is None:
        return None, None
    if raw_id is None or raw_version is None:
        raise SinkOptionError(
            "options writerId and writerVersion go together: writerId names the job, writerVersion (a number that "
            "grows with each new run of it) says which run; a run whose version is not above the last published "
            "one is skipped"
        )
    writer_id = str(raw_id).strip()
    if not writer_id or len(writer_id) > MAX_KEY_LENGTH - len(_JOB_PREFIX):
        raise SinkOptionError(f"option writerId must be 1 to {MAX_KEY_LENGTH - len(_JOB_PREFIX)} characters")
    text = str(raw_version).strip()
    if not text.isdigit():
        raise SinkOptionError(f"option writerVersion must be a non-negative integer, got {raw_version!r}")
    return writer_id, int(text)


def writer_commits(uri: str, log: str) -> list[dict[str, object]]:
    """The latest commit record of every writer that published to ``log`` with exactly-once state (streaming
    queries, batch jobs with a ``writerId``), most recent first; empty when there is none or no such log.

    Raises:
        InvalidStreamNameError, MetadataError. NamespaceNotFoundError: no namespace at ``uri``.
    """
    ns = _handles.namespace(uri, create=False)
    try:
        meta = LogMetadata(ns.metastore, ns.paths_of(validate_log_name(log)))
        meta.ensure_exists()
    except LogNotFoundError:
        return []
    states: list[dict[str, object]] = list(list_states(ns.metastore, meta).values())
    return sorted(states, key=_committed_ms, reverse=True)


def _committed_ms(state: Mapping[str, object]) -> int:
    at = state.get("committedMs")
    return at if isinstance(at, int) else 0


def last_commit(uri: str, log: str) -> dict[str, object] | None:
    """The latest commit record the sink published on ``log`` (None: no commit, or no such log).

    Raises:
        InvalidStreamNameError, MetadataError. NamespaceNotFoundError: no namespace at ``uri``
            (it is not created).
    """
    try:
        return read_commit(_handles.namespace(uri, create=False), log)
    except LogNotFoundError:
        return None


def check_target_not_sealed(opts: SinkOptions) -> None:
    """On the driver, when a writer is created: with the ``stream`` option, fail before any task
    writes if the target log was sealed (``mark_end_of_stream``). With a ``stream`` column the
    targets are known only at commit, which refuses a sealed one before publishing anything.

    A streaming writer is also created for each commit and abort: if the log was sealed while a
    batch's tasks ran, what this query staged can never be published there, so it is discarded
    before the error is raised.

    Raises:
        EndOfStreamError: the target log is sealed. MetadataError: the namespace cannot be opened.
    """
    if opts.stream is None:
        return
    ns = opts.namespace()
    try:
        check_not_sealed(ns, opts.stream)
    except EndOfStreamError:
        query_id = read_query_id(opts.checkpoint)
        if query_id is not None:
            try:
                sweep(ns, opts.staging_retention_ms, matching=lambda tag: tag.get("query") == query_id)
            except Exception:
                log.warning("could not discard what query %s staged; a later sweep removes it", query_id)
        raise


# --- commit messages ----------------------------------------------------------------------------
@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task staged: ``staged[log]`` = StagedSegment dicts in row order."""

    partition_id: int
    attempt: int
    query_id: str | None
    run_id: str | None
    batch_id: int | None
    staged: dict[str, list[dict[str, int]]] = field(default_factory=dict)
    rows: int = 0

    def ledger_ids(self) -> list[int]:
        return [int(d["ledger_id"]) for segs in self.staged.values() for d in segs]


def _messages(messages: Sequence[WriterCommitMessage | None]) -> list[SinkCommitMessage]:
    out = [m for m in messages if isinstance(m, SinkCommitMessage)]
    return sorted(out, key=lambda m: m.partition_id)


def _discard_unpublished(ns: Namespace, ledger_ids: Iterable[int]) -> None:
    """Discard staged ledgers that are still registered as staged (a published ledger's
    registration went away in the publishing transaction, so it is never touched)."""
    for lid in ledger_ids:
        try:
            if ns.metastore.exists(join(ns.root, STAGING_ROOT, str(lid))) is None:
                continue
            discard(ns, [lid])
        except NoNodeError:
            continue
        except Exception:  # best effort: the sweep removes it later
            log.warning("could not discard staged ledger %s; the sweep will remove it", lid, exc_info=True)


# --- staging (executors) ------------------------------------------------------------------------
_END = object()
_Item = tuple[pa.Array, "pa.Array | int"]


class _CancelledError(Exception):
    pass


class _LogStager(threading.Thread):
    """Stages the records of one log from ``(payloads, txids)`` Arrow chunks fed by the task's
    thread (a ``stream`` column spreads one task's rows over several logs; each gets one ledger)."""

    def __init__(
        self, ns: Namespace, log_name: str, tag: dict[str, Any], codec: int | None, abort_key: str | None
    ) -> None:
        super().__init__(name=f"dl-stage-{log_name}", daemon=True)
        self.ns = ns
        self.codec = codec
        self.abort_key = abort_key
        self.tag = tag
        self.log_name = log_name
        self.chunks: queue.Queue[object] = queue.Queue(maxsize=4)
        self.staged: StagedSegment | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.staged = stage_arrow(self.ns, self._items(), tag=self.tag, codec=self.codec, abort_key=self.abort_key)
        except BaseException as e:
            self.error = e
        finally:
            while True:  # unblock a feeder after a failure
                try:
                    self.chunks.get_nowait()
                except queue.Empty:
                    break

    def _items(self) -> Iterator[_Item]:
        while True:
            chunk = self.chunks.get()
            if chunk is _END:
                return
            if chunk is None:
                raise _CancelledError()
            yield chunk  # type: ignore[misc]

    def feed(self, chunk: object) -> None:
        while True:
            if self.error is not None:
                raise self.error
            if not self.is_alive() and chunk is not None:
                raise RuntimeError(f"stager of log {self.log_name!r} stopped")
            try:
                self.chunks.put(chunk, timeout=0.1)
                return
            except queue.Full:
                continue

    def finish(self) -> StagedSegment | None:
        self.feed(_END)
        self.join()
        if self.error is not None:
            raise self.error
        return self.staged

    def cancel(self) -> None:
        if self.is_alive():
            try:
                self.chunks.put(None, timeout=5)
            except queue.Full:
                pass
            self.join(timeout=30)


def _item(batch: pa.RecordBatch, opts: SinkOptions, default_txid: int) -> _Item:
    """``(payloads, txids)`` of a batch: the ``value`` column and the ``txid`` column or the default."""
    values = batch.column("value")
    if values.null_count:
        raise SinkOptionError("column value must not be null: filter out or replace the null values")
    if not opts.has_txid_column:
        return values, default_txid
    txids = batch.column("txid")
    if txids.null_count:
        raise SinkOptionError("column txid must not be null: fill it in, or drop the column (the sink assigns txids)")
    return values, txids


def _lower_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    names = [n.lower() for n in batch.schema.names]
    if names == batch.schema.names:
        return batch
    return pa.RecordBatch.from_arrays(batch.columns, names=names)


def stage_task(
    opts: SinkOptions,
    batches: Iterable[pa.RecordBatch],
    default_txid: int,
    tag: dict[str, Any] | None = None,
    abort_key: str | None = None,
) -> tuple[dict[str, list[StagedSegment]], int]:
    """Stage one task's rows: ``({log: [StagedSegment]}, rows)``; every staged ledger's
    registration carries ``tag``. Rows go to the segment store in bulk, column by column
    (:func:`storage.log.staging.stage_arrow`). On any failure every ledger this task staged is
    discarded before the error is raised; a task of an aborted job (``abort_key``) stages nothing.

    Raises:
        SinkOptionError: a null value, stream or txid. TransactionIdOutOfOrderError: txids of the
        ``txid`` column decrease within the task. InvalidStreamNameError: a bad ``stream`` value.
        Storage errors.
    """
    ns = opts.namespace()
    rows = 0
    if opts.stream is not None:
        target = opts.stream

        def items() -> Iterator[_Item]:
            nonlocal rows
            for raw in batches:
                item = _item(_lower_batch(raw), opts, default_txid)
                rows += len(item[0])
                yield item

        seg = stage_arrow(
            ns, items(), tag=tag, codec=opts.codec, abort_key=abort_key
        )  # discards its own ledger on failure
        return ({target: [seg]} if seg is not None else {}), rows

    stagers: dict[str, _LogStager] = {}
    done: dict[str, list[StagedSegment]] = {}
    try:
        for raw in batches:
            batch = _lower_batch(raw)
            values, txids = _item(batch, opts, default_txid)
            streams = batch.column("stream")
            if streams.null_count:
                raise SinkOptionError("column stream must not be null (or set the option stream)")
            rows += len(values)
            for name in pc.unique(streams).to_pylist():
                stager = stagers.get(name)
                if stager is None:
                    validate_log_name(name)
                    stager = stagers[name] = _LogStager(ns, name, dict(tag or {}), opts.codec, abort_key)
                    stager.start()
                mask = pc.equal(streams, name)
                stager.feed((values.filter(mask), txids if isinstance(txids, int) else txids.filter(mask)))
        for name, stager in stagers.items():
            seg = stager.finish()
            if seg is not None:
                done[name] = [seg]
        return done, rows
    except BaseException:
        for stager in stagers.values():
            stager.cancel()
        _discard_unpublished(ns, [s.ledger_id for segs in done.values() for s in segs])
        _discard_unpublished(ns, [s.staged.ledger_id for s in stagers.values() if s.staged is not None])
        raise


def _task_context() -> tuple[int, int, str | None, str | None, int | None]:
    """(partition id, attempt, query id, run id, batch id) of the running task."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return 0, 0, None, None, None
    batch = tc.getLocalProperty("streaming.sql.batchId")
    return (
        tc.partitionId(),
        tc.attemptNumber(),
        tc.getLocalProperty("sql.streaming.queryId"),
        tc.getLocalProperty("spark.jobGroup.id"),  # StreamExecution sets the job group to the run id
        int(batch) if batch not in (None, "") else None,
    )


# --- the writers --------------------------------------------------------------------------------
class _Writer:
    opts: SinkOptions
    created_ms: int
    job_id: str | None = None

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        partition, attempt, query_id, run_id, batch_id = _task_context()
        txid = self.created_ms
        if batch_id is not None and not self.opts.has_txid_column:
            info = read_batch_info(self.opts.checkpoint, batch_id)
            if info is not None and info.timestamp_ms is not None:
                txid = info.timestamp_ms
        # A failed or killed attempt leaves staged ledgers no commit message names (Spark drops
        # its message, or it never returns). The tag, registered with each ledger as it is
        # created, lets commit/abort find and discard them.
        tag: dict[str, Any] = {"partition": partition, "attempt": attempt}
        tag.update({"job": self.job_id} if self.job_id is not None else {"query": query_id, "batch": batch_id})
        staged, rows = stage_task(self.opts, iterator, txid, tag, self._abort_key())
        return SinkCommitMessage(
            partition_id=partition,
            attempt=attempt,
            query_id=query_id,
            run_id=run_id,
            batch_id=batch_id,
            staged={name: [s.to_dict() for s in segs] for name, segs in staged.items()},
            rows=rows,
        )

    def _targets(self, msgs: list[SinkCommitMessage]) -> dict[str, list[StagedSegment]]:
        targets: dict[str, list[StagedSegment]] = {}
        if self.opts.stream is not None:
            targets[self.opts.stream] = []  # an empty batch still commits (its offsets advance)
        for m in msgs:
            for name, segs in m.staged.items():
                targets.setdefault(name, []).extend(StagedSegment.from_dict(d) for d in segs)
        return targets

    def _abort_key(self) -> str | None:
        """The key under which aborting this batch job stops its straggling tasks (streaming
        batches have none: the next batch's commit sweeps what their failed attempts staged)."""
        return None if self.job_id is None else f"job-{self.job_id}"

    def _abort(self, messages: Sequence[WriterCommitMessage | None], match: Callable[[dict[str, Any]], bool]) -> None:
        ns = self.opts.namespace()
        key = self._abort_key()
        if key is not None:  # first: a task of this job still running registers, then sees it (or is swept)
            try:
                mark_aborted(ns, key)
            except Exception:
                log.warning("could not mark job %s aborted; the sweep removes what it leaves", key, exc_info=True)
        ids = [lid for m in _messages(messages) for lid in m.ledger_ids()]
        if ids:
            _discard_unpublished(ns, ids)
        self._sweep(ns, match, keep=set())

    def _sweep(self, ns: Namespace, match: Callable[[dict[str, Any]], bool], keep: set[int]) -> None:
        """Best effort, one listing: discard orphans older than ``stagingRetentionMs`` (their
        task's process died) and what failed or killed attempts of this batch/job staged (tag
        ``match``, not in ``keep``: Spark drops their commit messages)."""
        try:
            swept = sweep(ns, older_than_ms=self.opts.staging_retention_ms, matching=match, keep=keep)
            if swept:
                log.info("discarded %d unpublished staged ledger(s)", len(swept))
        except Exception:
            log.warning("sweep of staged ledgers failed; a later one removes them", exc_info=True)

    def _publish_all(
        self,
        targets: dict[str, list[StagedSegment]],
        make_commit: Callable[[str, list[StagedSegment]], dict[str, object]],
        decide: Callable[[dict[str, object] | None, dict[str, object], str], bool],
        match: Callable[[dict[str, Any]], bool],
        writer: str | None,
    ) -> None:
        """Publish every target log in one transaction; ``writer``: the key of this writer's exactly-once state
        (``decide`` then sees its own latest commit, whatever other writers published since). Txids the sink
        assigned are raised to the log's last one when another writer published higher ones meanwhile."""
        ns = self.opts.namespace()
        self._sweep(ns, match, keep={s.ledger_id for segs in targets.values() for s in segs})
        rebase = not self.opts.has_txid_column
        items = [
            PublishItem(name, segs, make_commit(name, segs), writer=writer, rebase_txids=rebase, codec=self.opts.codec)
            for name, segs in targets.items()
        ]
        commits = {item.log: item.commit for item in items}

        def decide_one(name: str, prev: dict[str, object] | None) -> bool:
            return decide(prev, commits[name], name)  # may complete the commit: written after

        try:
            publish_many(ns, items, decide_one)  # every target log in one transaction
        except BaseException:
            _discard_unpublished(ns, [s.ledger_id for segs in targets.values() for s in segs])
            raise


def _batch_match(query_id: str | None, batch_id: int) -> Callable[[dict[str, Any]], bool]:
    """Tags of attempts of this query's batches up to ``batch_id``."""

    def match(tag: dict[str, Any]) -> bool:
        b = tag.get("batch")
        return query_id is not None and tag.get("query") == query_id and isinstance(b, int) and b <= batch_id

    return match


class DistributedLogStreamWriter(_Writer, DataSourceStreamArrowWriter):
    """The micro-batch writer. A new instance is made on the driver for every batch (its tasks
    get a pickled copy) and for every ``commit``/``abort`` call."""

    def __init__(self, opts: SinkOptions) -> None:
        """Raises EndOfStreamError: the ``stream`` option names a sealed log (see
        :func:`check_target_not_sealed`). SinkOptionError: ``writerId`` was given (a streaming query's
        identity is its checkpoint's query id)."""
        if opts.writer_id is not None:
            raise SinkOptionError(
                "options writerId and writerVersion are for df.write jobs: a streaming query is already exactly "
                "once under its checkpoint's query id; remove them"
            )
        check_target_not_sealed(opts)
        self.opts = opts
        self.created_ms = int(time.time() * 1000)

    @reported
    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        """Stage this task's rows (see :func:`stage_task`)."""
        return self._write(iterator)

    @reported
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        """Publish the batch on every target log with its commit record (skipped if already in).

        Raises:
            QueryFencedError: an older run of the same query id.
            TransactionIdOutOfOrderError: ``txid`` values below the log's last one.
            EndOfStreamError: a target log is sealed (nothing is published; what the batch staged is discarded).
            DLError: storage errors.
        """
        msgs = _messages(messages)
        query_id = next((m.query_id for m in msgs if m.query_id), None) or read_query_id(self.opts.checkpoint)
        run_id = next((m.run_id for m in msgs if m.run_id), None)
        info = read_batch_info(self.opts.checkpoint, batchId)
        targets = self._targets(msgs)

        def make_commit(name: str, segs: list[StagedSegment]) -> dict[str, object]:
            return {
                "queryId": query_id,
                "runId": run_id,
                "batchId": int(batchId),
                "batchTimestampMs": info.timestamp_ms if info is not None else None,
                "offsets": info.flat_offsets() if info is not None else None,
                "sources": info.sources if info is not None else None,
                "rows": sum(s.record_count for s in segs),
                "runs": [],
            }

        def decide(prev: dict[str, object] | None, commit: dict[str, object], name: str) -> bool:
            go = decide_stream(prev, commit, log=name)
            if not go:
                log.info("batch %s of query %s is already in log %r: skipped", batchId, query_id, name)
            return go

        writer = _QUERY_PREFIX + query_id if query_id else None
        self._publish_all(targets, make_commit, decide, _batch_match(query_id, batchId), writer)

    @reported
    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        """Discard what the batch's tasks staged (never anything published)."""
        msgs = _messages(messages)
        query_id = next((m.query_id for m in msgs if m.query_id), None) or read_query_id(self.opts.checkpoint)
        self._abort(messages, _batch_match(query_id, batchId))


class DistributedLogBatchWriter(_Writer, DataSourceArrowWriter):
    """The ``df.write`` writer: all rows of the job, or none (per target log)."""

    def __init__(self, opts: SinkOptions) -> None:
        """Raises EndOfStreamError: the ``stream`` option names a sealed log."""
        check_target_not_sealed(opts)
        self.opts = opts
        self.created_ms = int(time.time() * 1000)
        self.job_id = str(uuid.uuid4())

    @reported
    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        """Stage this task's rows (see :func:`stage_task`)."""
        return self._write(iterator)

    @reported
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        """Publish every staged ledger on its log with ``{"queryId": null, "batchId": null, "jobId"}``.

        Raises:
            TransactionIdOutOfOrderError: txids below the log's last one.
            EndOfStreamError: a target log is sealed (nothing is published; what the job staged is discarded).
            DLError: storage errors.
        """
        targets = self._targets(_messages(messages))
        opts = self.opts

        def make_commit(name: str, segs: list[StagedSegment]) -> dict[str, object]:
            commit: dict[str, object] = {"queryId": None, "batchId": None, "jobId": self.job_id}
            if opts.writer_id is not None:
                commit.update(writerId=opts.writer_id, writerVersion=opts.writer_version)
            commit["rows"] = sum(s.record_count for s in segs)
            return commit

        def decide(prev: dict[str, object] | None, commit: dict[str, object], name: str) -> bool:
            go = decide_batch(prev, commit)
            if not go:
                log.info(
                    "writer %r version %s is already in log %r (version %s): skipped",
                    opts.writer_id,
                    opts.writer_version,
                    name,
                    None if prev is None else prev.get("writerVersion"),
                )
            return go

        writer = None if opts.writer_id is None else _JOB_PREFIX + opts.writer_id
        self._publish_all(targets, make_commit, decide, self._job_match, writer)

    @reported
    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        """Discard what the job's tasks staged."""
        self._abort(messages, self._job_match)

    def _job_match(self, tag: dict[str, Any]) -> bool:
        return tag.get("job") == self.job_id
