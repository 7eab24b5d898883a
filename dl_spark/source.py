"""``format("distributedlog")``: the Python data source, its batch reader and its stream reader.

Process model (PySpark 4.3): the :class:`DistributedLogDataSource` is built when the DataFrame is
defined (options are checked there), pickled, and re-created as readers in several processes: the
long-lived streaming runner (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``), the
planner, and the executors' Python workers (``read``). Readers therefore keep only plain option
values; storage handles live in :mod:`dl_spark._handles`, one namespace per process. The only
in-memory state of the stream reader is advisory and rebuilt after a restart: the
``Trigger.AvailableNow`` target, the last trigger time for ``minRecordsPerTrigger`` /
``maxTriggerDelay``, the latest offset it reports, and which positions it last recorded in the
logs' subscriptions stores (:mod:`dl_spark.subscribers`).

Errors: every method Spark calls is ``@reported`` (:mod:`dl_spark._reporting`): a ``DLError`` it raises reaches
the user as one line naming its class, message and fix, not under a Python traceback.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, Filter, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from dl_spark import _handles
from dl_spark._reporting import reported, reported_iter
from dl_spark.errors import DataLossError, SinkOptionError, SourceOptionError
from dl_spark.offsets import decode_offsets, encode_offsets, offset_to_dlsn
from dl_spark.options import LogStart, SourceOptions, StartSpec, parse_source_options
from dl_spark.planning import LogInspector, Slice, allocate, coalesce, plan_partitions
from dl_spark.pruning import Pushdown, called_by_pushdown_worker, push_filters, txid_position
from dl_spark.reading import SCHEMA, LogSlicePartition, read_partition
from dl_spark.sink import DistributedLogBatchWriter, DistributedLogStreamWriter, parse_sink_options
from dl_spark.subscribers import PositionRecorder
from storage.errors import DLError, LogEmptyError, LogNotFoundError
from storage.formats.dlsn import DLSN
from storage.log import positioning

__all__ = [
    "DistributedLogDataSource",
    "DistributedLogPushdownReader",
    "DistributedLogReader",
    "DistributedLogStreamReader",
    "RefusedStreamReader",
]

log = logging.getLogger(__name__)


# --- helpers shared by both readers -------------------------------------------------------------
def _inspectors(opts: SourceOptions, names: Sequence[str]) -> dict[str, LogInspector]:
    """Snapshots of the segments of ``names`` as of now (the logs that exist; read in bulk, and only
    where they changed since the last call: :class:`storage.log.catalog.LogCatalog`). Raises
    NamespaceNotFoundError if the namespace does not exist (a reader never creates it), MetadataError."""
    ns = _handles.namespace(opts.uri, opts.conf_dict(), create=False)
    return {n: LogInspector(n, ns.segstore, segs) for n, segs in ns.catalog().segments(names).items()}


def _current_logs(opts: SourceOptions) -> list[str]:
    """The source's logs that exist now (``streams`` in order given, or pattern matches sorted).
    Raises NamespaceNotFoundError if the namespace does not exist."""
    ns = _handles.namespace(opts.uri, opts.conf_dict(), create=False)
    if opts.streams is not None:
        found = ns.catalog().segments(opts.streams)
        return [s for s in opts.streams if s in found]
    return [name for name in ns.list_logs() if opts.matches(name)]


def _check_logs_exist(opts: SourceOptions) -> None:
    """Raises NamespaceNotFoundError if the namespace does not exist (nothing is created),
    SourceOptionError if a log named in ``streams`` does not."""
    if opts.streams is None:
        _handles.namespace(opts.uri, opts.conf_dict(), create=False)
        return
    present = set(_current_logs(opts))
    missing = [s for s in opts.streams if s not in present]
    if missing:
        raise SourceOptionError(
            f"option streams names log(s) that do not exist in {opts.uri}: {', '.join(missing)}; check the names "
            "(dlog list), or create the logs (dlog create NAME)"
        )


def _check_schema(schema: StructType | None) -> None:
    if schema is not None and schema != SCHEMA:
        raise SourceOptionError(
            "format distributedlog has a fixed schema and does not accept a user-specified one: remove .schema(...); "
            "the schema is " + SCHEMA.simpleString()
        )


def _committed_positions(opts: SourceOptions, out_log: str) -> dict[str, DLSN]:
    """The source positions of this source's logs recorded by the sink in ``out_log``
    (``startingOffsets=committed:<log>``): from the log's latest commit, else from the most recent
    commit of any writer of the log that holds some (several queries may write to one log).

    Raises:
        SourceOptionError: the sink is not available, ``out_log`` has no commit, or no commit
            holds positions of this source's logs.
    """
    import dl_spark

    last_commit = getattr(dl_spark, "last_commit", None)
    if last_commit is None:
        raise SourceOptionError("startingOffsets=committed:<log> needs dl_spark.last_commit (the sink)")
    commit = last_commit(opts.uri, out_log)
    if commit is None:
        raise SourceOptionError(f"startingOffsets=committed:{out_log}: log {out_log!r} has no sink commit")
    found = _positions_in(opts, commit)
    if not found:
        for other in dl_spark.writer_commits(opts.uri, out_log):
            found = _positions_in(opts, other)
            if found:
                break
    if not found:
        raise SourceOptionError(
            f"startingOffsets=committed:{out_log}: no commit of log {out_log!r} holds positions of this source's logs"
        )
    return found


def _positions_in(opts: SourceOptions, commit: Mapping[str, Any]) -> dict[str, DLSN]:
    """The positions of this source's logs in one commit record."""
    found: dict[str, DLSN] = {}

    def visit(value: Any) -> None:
        if isinstance(value, str) and value.lstrip().startswith(("{", "[")):
            try:
                value = json.loads(value)
            except ValueError:
                return
        if isinstance(value, Mapping):
            for k, v in value.items():
                if isinstance(k, str) and isinstance(v, str) and opts.matches(k):
                    try:
                        found.setdefault(k, offset_to_dlsn(v, k))
                        continue
                    except SourceOptionError:
                        pass
                visit(v)
        elif isinstance(value, list | tuple):
            for v in value:
                visit(v)

    visit(commit)
    return found


def _resolve_start(opts: SourceOptions, insp: LogInspector, spec_pos: LogStart, *, check: bool = True) -> DLSN:
    """A log's start as a DLSN: ``earliest`` = first readable, ``latest`` = the tail, a DLSN checked
    for data loss (``failOnDataLoss``)."""
    if spec_pos == "earliest":
        return insp.earliest()
    if spec_pos == "latest":
        tail = insp.tail()
        return insp.earliest() if tail is None else tail
    return insp.check_start(spec_pos, fail_on_data_loss=opts.fail_on_data_loss) if check else spec_pos


def _initial_positions(opts: SourceOptions, logs: Sequence[str], default: str) -> dict[str, DLSN]:
    """Starting DLSNs of ``logs`` from ``startingOffsets`` / ``startingTxId`` (``default`` when
    neither is given)."""
    out: dict[str, DLSN] = {}
    committed: dict[str, DLSN] | None = None
    spec = opts.starting
    if spec is not None and spec.kind == "committed":
        committed = _committed_positions(opts, spec.committed_log)
    inspectors = _inspectors(opts, logs)
    for name in logs:
        insp = inspectors.get(name)
        if insp is None:
            raise LogNotFoundError(f"log {name!r} does not exist")
        if opts.starting_txid is not None:
            try:
                d = positioning.dlsn_for_txid(insp.store, insp.segments, opts.starting_txid)
            except LogEmptyError:
                d = insp.earliest()
            out[name] = max(d, insp.earliest())
            continue
        pos: LogStart
        if committed is not None:
            pos = committed.get(name, "earliest")
        elif spec is not None:
            pos = spec.position_of(name, default)  # type: ignore[arg-type]
        else:
            pos = default  # type: ignore[assignment]
        out[name] = _resolve_start(opts, insp, pos)
    return out


def _partitions_for(
    opts: SourceOptions,
    start: Mapping[str, DLSN],
    end: Mapping[str, DLSN],
    pushdown: Pushdown | None = None,
    inspectors: Mapping[str, LogInspector] | None = None,
) -> list[LogSlicePartition]:
    """Plan ``[start, end)`` (a log missing from ``start`` is read from its earliest record), only the parts
    of it that can hold rows matching ``pushdown`` (:mod:`dl_spark.pruning`) when given. ``inspectors``: the
    snapshot ``end`` was computed from, if at hand (a snapshot that contains ``end`` plans it as a newer one
    would: records before ``end`` never change)."""
    planned: list[tuple[LogInspector, list[Slice]]] = []
    names = sorted(end)
    if inspectors is None or any(n not in inspectors for n in names):
        inspectors = _inspectors(opts, names)
    for name in names:
        insp = inspectors.get(name)
        if insp is None:
            _deleted(opts, name, start.get(name))
            continue
        s = start.get(name)
        s = insp.earliest() if s is None else insp.check_start(s, fail_on_data_loss=opts.fail_on_data_loss)
        ranges = [(s, end[name])] if pushdown is None else pushdown.ranges(insp, s, end[name])
        planned.append((insp, [sl for lo, hi in ranges for sl in insp.slices(lo, hi)]))
    specs = plan_partitions(
        planned, max_records_per_partition=opts.max_records_per_partition, min_partitions=opts.min_partitions
    )
    groups = coalesce(
        specs,
        min_records_per_partition=opts.min_records_per_partition,
        max_partitions=opts.max_partitions,
        max_records_per_partition=opts.max_records_per_partition,
    )
    return [LogSlicePartition(opts.uri, g[0], opts.fail_on_data_loss, opts.conf, tuple(g[1:])) for g in groups]


def _deleted(opts: SourceOptions, name: str, pos: DLSN | None) -> None:
    msg = f"log {name!r} was deleted" + (f" (position {pos} can no longer be read)" if pos is not None else "")
    if opts.fail_on_data_loss:
        raise DataLossError(msg + "; set failOnDataLoss=false to ignore it")
    log.warning("%s; ignoring it (failOnDataLoss=false)", msg)


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, LogSlicePartition):  # Spark's InputPartition(None) for "no partitions"
        return iter(())
    return reported_iter(read_partition(partition))


# --- the data source ----------------------------------------------------------------------------
class DistributedLogDataSource(DataSource):
    """``spark.read`` / ``spark.readStream`` / ``df.write`` / ``df.writeStream``
    ``.format("distributedlog")``: the source's readers and the sink's writers."""

    def __init__(self, options: dict[str, str]) -> None:
        """Options are checked by the method that uses them: the source's by :meth:`schema` /
        :meth:`reader` / :meth:`streamReader` (see :func:`parse_source_options`), the sink's by
        :meth:`writer` / :meth:`streamWriter` (see :func:`dl_spark.sink.parse_sink_options`)."""
        super().__init__(options)
        self._source_options: SourceOptions | None = None

    @property
    def source_options(self) -> SourceOptions:
        """The source's options. Raises SourceOptionError for bad ones."""
        if self._source_options is None:
            self._source_options = parse_source_options(self.options)
        return self._source_options

    @classmethod
    def name(cls) -> str:
        return "distributedlog"

    @reported
    def schema(self) -> StructType:
        """The fixed row schema. Raises NamespaceNotFoundError if the namespace does not exist,
        SourceOptionError if a log named in ``streams`` does not."""
        _check_logs_exist(self.source_options)
        return SCHEMA

    @reported
    def reader(self, schema: StructType) -> DistributedLogReader:
        """The batch reader: a :class:`DistributedLogPushdownReader` for PySpark's filter pushdown worker, else a
        plain :class:`DistributedLogReader` (PySpark 4.3 fails the query if a reader implements ``pushFilters``
        while ``spark.sql.python.filterPushdown.enabled`` is off, and does not tell a source that setting).

        Raises SourceOptionError for options a batch query cannot take, or a missing log."""
        _check_schema(schema)
        if called_by_pushdown_worker():
            return DistributedLogPushdownReader(self.source_options)
        return DistributedLogReader(self.source_options)

    def streamReader(self, schema: StructType) -> DistributedLogStreamReader | RefusedStreamReader:
        """The micro-batch reader; for options or a schema it refuses (``endingOffsets``, which is batch only; a
        log of ``streams`` that does not exist; a user-specified schema; a namespace that does not exist) a
        :class:`RefusedStreamReader`, whose first call by Spark raises the SourceOptionError,
        NamespaceNotFoundError or other storage error (see there why it is not raised here)."""
        try:
            _check_schema(schema)
            return DistributedLogStreamReader(self.source_options)
        except DLError as e:
            return RefusedStreamReader(e)

    @reported
    def writer(self, schema: StructType, overwrite: bool) -> DistributedLogBatchWriter:
        """The batch sink (``df.write``): all rows of the job or none. Raises SinkOptionError for
        bad options or input columns, or ``mode("overwrite")`` (logs are append-only)."""
        if overwrite:
            raise SinkOptionError("format distributedlog appends to logs: use mode('append'), not 'overwrite'")
        return DistributedLogBatchWriter(parse_sink_options(self.options, schema))

    @reported
    def streamWriter(self, schema: StructType, overwrite: bool) -> DistributedLogStreamWriter:
        """The exactly-once streaming sink. Raises SinkOptionError for bad options or input columns
        (complete output mode included: logs are append-only)."""
        if overwrite:
            raise SinkOptionError("format distributedlog appends to logs: use outputMode('append') or 'update'")
        return DistributedLogStreamWriter(parse_sink_options(self.options, schema))


class DistributedLogReader(DataSourceReader):
    """The batch reader: ``[startingOffsets | startingTxId, endingOffsets | endingTxId)`` (defaults earliest,
    latest)."""

    #: The filters taken by :meth:`DistributedLogPushdownReader.pushFilters` (None: no pushdown).
    pushdown: Pushdown | None = None

    def __init__(self, opts: SourceOptions) -> None:
        """Raises SourceOptionError for ``startingOffsets`` = latest, or a missing log."""
        for spec in (opts.starting,):
            if spec is not None and any(p == "latest" for p in [spec.kind, *(p for _, p in spec.per_log)]):
                raise SourceOptionError(
                    "option startingOffsets cannot be 'latest' for a batch query (it would read nothing): "
                    "use 'earliest' (the default) or JSON offsets"
                )
        _check_logs_exist(opts)
        self.opts = opts

    @reported
    def partitions(self) -> Sequence[InputPartition]:
        """Plan the whole range now (offsets resolved against the logs as they are).

        Raises:
            DataLossError: a start was truncated or purged (``failOnDataLoss``).
        """
        opts = self.opts
        logs = [name for name in _current_logs(opts) if self.pushdown is None or self.pushdown.matches(name)]
        start = _initial_positions(opts, logs, "earliest")
        ending = opts.ending or StartSpec("latest")
        end: dict[str, DLSN] = {}
        inspectors = _inspectors(opts, logs)
        for name in logs:
            insp = inspectors.get(name)
            if insp is None:
                raise LogNotFoundError(f"log {name!r} does not exist")
            pos = ending.position_of(name, "latest")
            if pos == "latest":
                tail = insp.tail()
                end[name] = start[name] if tail is None else max(tail, start[name])
                if opts.ending_txid is not None:  # exclusive: before the first record with txid >= endingTxId
                    end[name] = max(min(end[name], txid_position(insp, opts.ending_txid)), start[name])
            else:
                assert isinstance(pos, DLSN)
                end[name] = max(pos, start[name])
        return list(_partitions_for(opts, start, end, self.pushdown))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Rows of one partition (see :func:`dl_spark.reading.read_partition`)."""
        return _read(partition)


class DistributedLogPushdownReader(DistributedLogReader):
    """The batch reader PySpark's pushdown worker gets: it takes filters on ``stream``, ``txid``,
    ``sequence_id`` and ``dlsn`` (see :func:`dl_spark.pruning.push_filters`) and plans only the logs,
    segments and records that can match them."""

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        """Take what this source can apply exactly; return the rest (the same objects) for Spark to check."""
        self.pushdown, rest = push_filters(filters)
        return rest


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """What :meth:`DistributedLogDataSource.streamReader` returns when it refuses the query: every call Spark
    makes raises ``error``, so the query fails at its first call (``STREAM_FAILED``, first line ending in
    ``dl_spark.errors.SourceOptionError: ...``).

    Why not raise from ``streamReader``: PySpark 4.3's streaming source runner calls it inside
    ``try: reader = ... finally: reader.stop()``, so an error there is replaced by ``UnboundLocalError:
    cannot access local variable 'reader'``, and the user would see that instead of what is wrong.
    """

    def __init__(self, error: DLError) -> None:
        #: What every call raises: SourceOptionError (bad options or schema), NamespaceNotFoundError, or the
        #: storage error that opening the namespace raised (e.g. MetadataError).
        self.error = error

    @reported
    def _refuse(self) -> NoReturn:
        raise self.error

    def initialOffset(self) -> dict[str, str]:
        """Raises :attr:`error`."""
        self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:
        """Raises :attr:`error`."""
        self._refuse()

    def prepareForTriggerAvailableNow(self) -> None:
        """Raises :attr:`error`."""
        self._refuse()

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        """Raises :attr:`error`."""
        self._refuse()

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        """Raises :attr:`error`."""
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Raises :attr:`error`."""
        self._refuse()

    def commit(self, end: dict[str, str]) -> None:
        """Raises :attr:`error`."""
        self._refuse()


class DistributedLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The micro-batch reader with admission control and ``Trigger.AvailableNow``."""

    def __init__(self, opts: SourceOptions) -> None:
        """Raises SourceOptionError for ``endingOffsets`` / ``endingTxId`` or a log of ``streams`` that does not
        exist."""
        for given, key in ((opts.ending is not None, "endingOffsets"), (opts.ending_txid is not None, "endingTxId")):
            if given:
                raise SourceOptionError(
                    f"option {key} is for batch queries only (spark.read), not readStream: remove it, or read with "
                    "spark.read"
                )
        _check_logs_exist(opts)
        self.opts = opts
        self._target: dict[str, DLSN] | None = None
        self._last_trigger_ms = 0.0
        self._latest: dict[str, str] | None = None
        self._positions = PositionRecorder(opts.uri, opts.subscriber_id)
        #: The end offset the last ``latestOffset`` returned and the snapshot it was computed from:
        #: ``partitions`` of the batch that ends there plans from it instead of reading the logs again.
        self._snapshot: tuple[dict[str, str], dict[str, LogInspector]] | None = None

    # --- offsets ----------------------------------------------------------------------------
    @reported
    def initialOffset(self) -> dict[str, str]:
        """Positions of the source's current logs from ``startingOffsets`` (default latest) or
        ``startingTxId``.

        Raises:
            DataLossError: a given position was truncated or purged (``failOnDataLoss``).
            SourceOptionError: ``committed:<log>`` cannot be resolved.
        """
        logs = _current_logs(self.opts)
        return encode_offsets(_initial_positions(self.opts, logs, "latest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMinRows`` / ``ReadMaxRows`` / ``ReadMaxBytes`` from the options, in that order of
        preference (the others are applied too: Python has no composite limit); else all."""
        o = self.opts
        if o.min_records_per_trigger is not None:
            return ReadMinRows(o.min_records_per_trigger)
        if o.max_records_per_trigger is not None:
            return ReadMaxRows(o.max_records_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        return ReadAllAvailable()

    @reported
    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the target: the tails of the source's logs now; nothing after them is read."""
        target: dict[str, DLSN] = {}
        for insp in _inspectors(self.opts, _current_logs(self.opts)).values():
            name, tail = insp.name, insp.tail()
            if tail is not None:
                target[name] = tail
        self._target = target

    @reported
    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        """The end of the next batch from ``start`` under ``limit`` (and the option caps), capped at
        the ``AvailableNow`` target; logs matching ``streamPattern`` that appeared are added.

        Raises:
            DataLossError: a position of ``start`` was truncated or purged, or its log deleted
                (``failOnDataLoss``).
        """
        opts = self.opts
        begin = decode_offsets(start)
        self._positions.record(begin)  # the batch that ended at ``start`` is complete
        names = sorted(set(_current_logs(opts)) | set(begin))
        inspectors: list[LogInspector] = []
        starts: list[DLSN] = []
        uppers: list[DLSN] = []
        latest: dict[str, DLSN] = {}
        found = _inspectors(opts, names)
        for name in names:
            insp = found.get(name)
            if insp is None:
                _deleted(opts, name, begin.get(name))
                continue
            if name in begin:
                s = insp.check_start(begin[name], fail_on_data_loss=opts.fail_on_data_loss)
            elif not insp.segments:
                continue  # a new log without data yet: added once it has some
            else:
                s = insp.earliest()
            tail = insp.tail()
            upper = s if tail is None else max(s, tail)
            latest[name] = upper
            if self._target is not None:
                t = self._target.get(name)
                upper = s if t is None else max(s, min(upper, t))
            inspectors.append(insp)
            starts.append(s)
            uppers.append(upper)
        self._latest = encode_offsets(latest)
        row_cap: int | None = None
        byte_cap: int | None = None
        min_rows: int | None = None
        if not isinstance(limit, ReadAllAvailable):
            row_cap = opts.max_records_per_trigger
            byte_cap = opts.max_bytes_per_trigger
            if isinstance(limit, ReadMaxRows):
                row_cap = limit.max_rows if row_cap is None else min(row_cap, limit.max_rows)
            elif isinstance(limit, ReadMaxBytes):
                byte_cap = limit.max_bytes if byte_cap is None else min(byte_cap, limit.max_bytes)
            elif isinstance(limit, ReadMinRows):
                min_rows = limit.min_rows

        if row_cap is None and byte_cap is None and min_rows is None:  # everything available: no counting
            end = {insp.name: u for insp, u in zip(inspectors, uppers, strict=True)}
        else:
            capped = self._capped_ends(inspectors, starts, uppers, row_cap, byte_cap, min_rows)
            if capped is None:
                return dict(start)  # not enough yet: no batch (maxTriggerDelay not reached)
            end = capped
        result = encode_offsets(end)
        if result != encode_offsets(begin):
            self._last_trigger_ms = time.time() * 1000.0
        self._snapshot = (result, {insp.name: insp for insp in inspectors})
        return result

    def _capped_ends(
        self,
        inspectors: list[LogInspector],
        starts: list[DLSN],
        uppers: list[DLSN],
        row_cap: int | None,
        byte_cap: int | None,
        min_rows: int | None,
    ) -> dict[str, DLSN] | None:
        """Each log's end under the row and byte caps (shared in proportion to the backlogs), or None when
        ``min_rows`` are not there yet and ``maxTriggerDelay`` has not passed."""
        backlogs = [insp.count_between(s, u) for insp, s, u in zip(inspectors, starts, uppers, strict=True)]
        total = sum(backlogs)
        if min_rows is not None and self._target is None and total > 0:
            waited = time.time() * 1000.0 - self._last_trigger_ms
            if total < min_rows and waited < self.opts.max_trigger_delay_ms:
                return None
        shares = list(backlogs)
        if row_cap is not None:
            shares = allocate(row_cap, backlogs)
        if byte_cap is not None:
            sizes = [insp.bytes_between(s, u) for insp, s, u in zip(inspectors, starts, uppers, strict=True)]
            total_bytes = sum(sizes)
            if total_bytes > byte_cap:
                by_bytes = [
                    insp.rows_within_bytes(s, u, byte_cap * size / total_bytes)
                    for insp, s, u, size in zip(inspectors, starts, uppers, sizes, strict=True)
                ]
                shares = [min(a, b) for a, b in zip(shares, by_bytes, strict=True)]
        if total > 0 and sum(shares) == 0:  # always make progress: at least one record
            i = next(i for i, b in enumerate(backlogs) if b > 0)
            shares[i] = 1
        return {
            insp.name: u if share >= backlog else insp.offset_after(s, u, share)
            for insp, s, u, share, backlog in zip(inspectors, starts, uppers, shares, backlogs, strict=True)
        }

    def reportLatestOffset(self) -> dict[str, str] | None:
        """The tails seen by the last ``latestOffset`` (before limits), for the query progress."""
        return self._latest

    # --- batches ----------------------------------------------------------------------------
    @reported
    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        """Partitions of ``[start, end)``; ``[]`` when they are equal. Deterministic: a restarted
        query re-planning a checkpointed batch gets the same partitions.

        Raises:
            DataLossError: a position of ``start`` was truncated or purged (``failOnDataLoss``).
        """
        if start == end:
            return []
        snap = self._snapshot
        inspectors = snap[1] if snap is not None and snap[0] == end else None
        return list(_partitions_for(self.opts, decode_offsets(start), decode_offsets(end), inspectors=inspectors))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Rows of one partition (see :func:`dl_spark.reading.read_partition`)."""
        return _read(partition)

    @reported
    def commit(self, end: dict[str, str]) -> None:
        """Record ``end`` under ``subscriberId`` in each log's subscriptions store (positions live in
        Spark's checkpoint; this makes them visible to ``dlog lag``; ``commit`` arrives a batch late)."""
        self._positions.record(decode_offsets(end))

    def stop(self) -> None:
        """Nothing to release: handles are per process (Spark may not call this at all)."""
