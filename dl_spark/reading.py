"""``read(partition)``: one partition's records, straight from the segment store, as Arrow batches.

The row schema is fixed, for batch and streaming reads alike::

    stream STRING NOT NULL, dlsn STRUCT<lssn BIGINT, entry_id BIGINT, slot_id BIGINT> NOT NULL,
    txid BIGINT NOT NULL, sequence_id BIGINT NOT NULL, value BINARY

The log decodes the partition's entries into Arrow itself (:meth:`storage.LogManager.read_arrow_slice`,
:mod:`storage.formats.arrow_records`: batches of about :data:`BATCH_ROWS` rows, whole entries, no Python
object per record); the source adds the ``stream`` column (:func:`dl_spark._columns.with_stream`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from dl_spark import _handles
from dl_spark._columns import with_stream
from dl_spark.errors import DataLossError
from dl_spark.planning import PartitionSpec
from storage.errors import LedgerNotFoundError
from storage.formats.arrow_records import BATCH_ROWS

__all__ = ["ARROW_SCHEMA", "BATCH_ROWS", "SCHEMA", "SCHEMA_DDL", "LogSlicePartition", "read_partition"]

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


#: The Arrow schema of the batches ``read`` yields: ``stream``, then storage's
#: :data:`~storage.formats.arrow_records.RECORD_SCHEMA` columns.
ARROW_SCHEMA = _arrow_schema()


@dataclass(frozen=True)
class LogSlicePartition(InputPartition):
    """An input partition: user records ``spec.slice.first_pos..spec.slice.last_pos`` of one log segment, then
    those of each slice of ``more`` (small slices packed together: ``minRecordsPerPartition``, ``maxPartitions``),
    with what ``read`` needs to go straight to the segment store (picklable, plain values)."""

    uri: str
    spec: PartitionSpec
    fail_on_data_loss: bool = True
    conf: tuple[tuple[str, Any], ...] = field(default=())
    more: tuple[PartitionSpec, ...] = field(default=())

    @property
    def specs(self) -> tuple[PartitionSpec, ...]:
        """Every slice of the partition, in the order they are read."""
        return (self.spec, *self.more)

    def __repr__(self) -> str:
        log, s = self.spec.log, self.spec.slice
        extra = f", and {len(self.more)} more slice(s)" if self.more else ""
        return (
            f"LogSlicePartition({log!r}, lssn={s.lssn}, positions={s.first_pos}..{s.last_pos}, "
            f"entries={s.first_entry}..{s.last_entry}{extra})"
        )


def read_partition(part: LogSlicePartition, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Yield the partition's rows as Arrow record batches (schema :data:`ARROW_SCHEMA`), slice after slice.

    Raises:
        DataLossError: a segment's ledger was deleted (purged) since planning and
            ``failOnDataLoss`` is true (otherwise a warning is logged and that slice is skipped).
        CorruptedEntryError, SegmentStoreError, MetadataError: from the stores.
        NamespaceNotFoundError: the namespace is gone (a reader never creates it).
    """
    for spec in part.specs:
        yield from _read_slice(part, spec, batch_rows)


def _read_slice(part: LogSlicePartition, spec: PartitionSpec, batch_rows: int) -> Iterator[pa.RecordBatch]:
    s = spec.slice
    dlm = _handles.log_manager(part.uri, spec.log, dict(part.conf), create=False)
    batches = dlm.read_arrow_slice(s, batch_rows=batch_rows)
    try:
        first = next(batches, None)
    except LedgerNotFoundError:
        msg = (
            f"log {spec.log!r}: log segment {s.lssn} (positions {s.first_pos}..{s.last_pos}) "
            "was purged before it could be read"
        )
        if part.fail_on_data_loss:
            raise DataLossError(msg + "; set failOnDataLoss=false to skip lost data") from None
        log.warning("%s; skipping it (failOnDataLoss=false)", msg)
        return
    try:
        if first is not None:
            yield with_stream(first, spec.log, ARROW_SCHEMA)
        for batch in batches:
            yield with_stream(batch, spec.log, ARROW_SCHEMA)
    finally:
        batches.close()
