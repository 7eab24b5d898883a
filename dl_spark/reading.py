"""``read(partition)``: one partition's records, straight from the segment store, as Arrow batches.

The row schema is fixed (CONTRACT §4)::

    stream STRING NOT NULL, dlsn STRUCT<lssn BIGINT, entry_id BIGINT, slot_id BIGINT> NOT NULL,
    txid BIGINT NOT NULL, sequence_id BIGINT NOT NULL, value BINARY

Rows are gathered by :class:`dl_spark._columns.RowColumns` and turned into Arrow arrays once per
batch of about :data:`BATCH_ROWS` rows (whole entries; fewer if the batch reaches
:data:`~dl_spark._columns.MAX_BATCH_BYTES`). Uncompressed entries of user records that lie wholly
inside the partition are scanned in place, without a Python object per record; other entries
(the partition's first and last, LZ4, record sets, control or end-of-stream records) are decoded
with :func:`storage.entry.decode_entry_columns` and filtered row by row.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from dl_spark import _handles
from dl_spark._columns import MAX_BATCH_BYTES, RowColumns
from dl_spark.errors import DataLossError
from dl_spark.planning import PartitionSpec
from storage.entry import decode_entry_columns
from storage.errors import LedgerNotFoundError

__all__ = ["ARROW_SCHEMA", "BATCH_ROWS", "SCHEMA", "SCHEMA_DDL", "LogSlicePartition", "read_entries", "read_partition"]

log = logging.getLogger(__name__)

#: The source's row schema as DDL.
SCHEMA_DDL = (
    "stream STRING NOT NULL, "
    "dlsn STRUCT<lssn: BIGINT, entry_id: BIGINT, slot_id: BIGINT> NOT NULL, "
    "txid BIGINT NOT NULL, sequence_id BIGINT NOT NULL, value BINARY"
)


def _schema() -> StructType:
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField

    dlsn = StructType(
        [
            StructField("lssn", LongType(), True),
            StructField("entry_id", LongType(), True),
            StructField("slot_id", LongType(), True),
        ]
    )
    return StructType(
        [
            StructField("stream", StringType(), False),
            StructField("dlsn", dlsn, False),
            StructField("txid", LongType(), False),
            StructField("sequence_id", LongType(), False),
            StructField("value", BinaryType(), True),
        ]
    )


#: The source's row schema.
SCHEMA = _schema()


def _arrow_schema() -> pa.Schema:
    # Exactly what Spark checks the batches against (``to_arrow_schema(schema, timezone="UTC")``).
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SCHEMA, timezone="UTC")


#: The Arrow schema of the batches ``read`` yields.
ARROW_SCHEMA = _arrow_schema()
_DLSN_FIELDS = list(ARROW_SCHEMA.field("dlsn").type)

#: Rows per Arrow batch (about; whole entries are never split across batches).
BATCH_ROWS = 10_000


@dataclass(frozen=True)
class LogSlicePartition(InputPartition):
    """An input partition: user records ``spec.first_pos..spec.last_pos`` of one log segment, with
    what ``read`` needs to go straight to the segment store (picklable, plain values)."""

    uri: str
    spec: PartitionSpec
    fail_on_data_loss: bool = True
    conf: tuple[tuple[str, Any], ...] = field(default=())

    def __repr__(self) -> str:
        s = self.spec
        return (
            f"LogSlicePartition({s.log!r}, lssn={s.lssn}, positions={s.first_pos}..{s.last_pos}, "
            f"entries={s.first_entry}..{s.last_entry})"
        )


def read_partition(part: LogSlicePartition, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Yield the partition's rows as Arrow record batches (schema :data:`ARROW_SCHEMA`).

    Raises:
        DataLossError: the segment's ledger was deleted (purged) since planning and
            ``failOnDataLoss`` is true (otherwise a warning is logged and nothing is read).
        CorruptedEntryError, SegmentStoreError, MetadataError: from the stores.
    """
    spec = part.spec
    ns = _handles.namespace(part.uri, dict(part.conf))
    try:
        entries = ns.segstore.read_entries(spec.ledger_id, spec.first_entry, spec.last_entry)
    except LedgerNotFoundError:
        msg = (
            f"log {spec.log!r}: log segment {spec.lssn} (positions {spec.first_pos}..{spec.last_pos}) "
            "was purged before it could be read"
        )
        if part.fail_on_data_loss:
            raise DataLossError(msg + "; set failOnDataLoss=false to skip lost data") from None
        log.warning("%s; skipping it (failOnDataLoss=false)", msg)
        return
    try:
        yield from read_entries(
            entries,
            stream=spec.log,
            lssn=spec.lssn,
            start_sequence_id=spec.start_sequence_id,
            envelope=spec.envelope,
            first_pos=spec.first_pos,
            last_pos=spec.last_pos,
            batch_rows=batch_rows,
        )
    finally:
        close = getattr(entries, "close", None)
        if close is not None:
            close()


def read_entries(
    entries: Iterable[tuple[int, bytes]],
    *,
    stream: str,
    lssn: int,
    start_sequence_id: int,
    envelope: bool,
    first_pos: int,
    last_pos: int,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The rows of user records ``first_pos..last_pos`` found in ``entries`` (``(entry_id, data)``
    of segment ``lssn`` of log ``stream``, in order), as record batches of :data:`ARROW_SCHEMA`.

    Reading stops after the first entry whose last record is at or past ``last_pos``.

    Raises:
        InvalidEnvelopedEntryError, CorruptedEntryError: a malformed entry.
    """
    lo, hi = first_pos, last_pos
    rows = RowColumns(stream, lssn, start_sequence_id - 1)
    for entry_id, data in entries:
        last = rows.add_plain_entry(entry_id, data, lo, hi) if envelope and type(data) is bytes else None
        if last is None:
            cols = decode_entry_columns(data, envelope=envelope, include_control=False)
            if not cols.positions:
                continue
            done = rows.add_rows(entry_id, cols, lo, hi)
            last = cols.positions[-1]
        else:
            done = False
        if rows.num_rows >= batch_rows or rows.num_bytes >= MAX_BATCH_BYTES:
            yield rows.batch(ARROW_SCHEMA)
        if done or last >= hi:
            break
    if rows.num_rows:
        yield rows.batch(ARROW_SCHEMA)
