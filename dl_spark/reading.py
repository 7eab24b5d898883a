"""``read(partition)``: one partition's records, straight from the segment store, as Arrow batches.

The row schema is fixed (CONTRACT §4)::

    stream STRING NOT NULL, dlsn STRUCT<lssn BIGINT, entry_id BIGINT, slot_id BIGINT> NOT NULL,
    txid BIGINT NOT NULL, sequence_id BIGINT NOT NULL, value BINARY

Entries are decoded with :func:`storage.entry.decode_entry_columns` (parallel lists, no record
objects); the lists of whole entries are concatenated and turned into Arrow arrays once per batch
of about :data:`BATCH_ROWS` rows. Only the first and last entries of a partition, and entries that
hold control or end-of-stream records, are filtered row by row.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from dl_spark import _handles
from dl_spark.errors import DataLossError
from dl_spark.planning import PartitionSpec
from storage.entry import decode_entry_columns
from storage.errors import LedgerNotFoundError
from storage.record import CONTROL, END_OF_STREAM

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


#: The Arrow schema of the batches ``read`` yields.
ARROW_SCHEMA = _arrow_schema()
_DLSN_FIELDS = list(ARROW_SCHEMA.field("dlsn").type)

#: Rows per Arrow batch (about; whole entries are never split across batches).
BATCH_ROWS = 10_000

_NOT_USER = CONTROL | END_OF_STREAM


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


def _string_column(value: str, n: int) -> pa.Array:
    data = value.encode()
    offsets = pa.array(range(0, len(data) * (n + 1), len(data)) if data else [0] * (n + 1), pa.int32())
    return pa.StringArray.from_buffers(n, offsets.buffers()[1], pa.py_buffer(data * n))


def _batch(
    stream: str,
    lssn: int,
    seq_base: int,
    entry_col: list[int],
    slots: list[int],
    txids: list[int],
    positions: list[int],
    values: list[bytes],
) -> pa.RecordBatch:
    n = len(txids)
    dlsn = pa.StructArray.from_arrays(
        [pa.repeat(pa.scalar(lssn, pa.int64()), n), pa.array(entry_col, pa.int64()), pa.array(slots, pa.int64())],
        fields=_DLSN_FIELDS,
    )
    seq = pc.add(pa.array(positions, pa.int64()), pa.scalar(seq_base, pa.int64()))
    return pa.RecordBatch.from_arrays(
        [_string_column(stream, n), dlsn, pa.array(txids, pa.int64()), seq, pa.array(values, pa.binary())],
        schema=ARROW_SCHEMA,
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
    lo, hi = spec.first_pos, spec.last_pos
    seq_base = spec.start_sequence_id - 1
    envelope = spec.envelope
    entry_col: list[int] = []
    slots: list[int] = []
    txids: list[int] = []
    positions: list[int] = []
    values: list[bytes] = []
    done = False
    for entry_id, data in entries:
        cols = decode_entry_columns(data, envelope=envelope, include_control=False)
        pos = cols.positions
        if not pos:
            continue
        if pos[0] >= lo and pos[-1] <= hi and not any(cols.flags):
            n = len(pos)
            entry_col.extend(itertools.repeat(entry_id, n))
            slots.extend(cols.slots)
            txids.extend(cols.txids)
            positions.extend(pos)
            values.extend(cols.payloads)
        else:
            for i, p in enumerate(pos):
                if p > hi:
                    done = True
                    break
                if p < lo or cols.flags[i] & _NOT_USER:
                    continue
                entry_col.append(entry_id)
                slots.append(cols.slots[i])
                txids.append(cols.txids[i])
                positions.append(p)
                values.append(cols.payloads[i])
        if len(txids) >= batch_rows:
            yield _batch(spec.log, spec.lssn, seq_base, entry_col, slots, txids, positions, values)
            entry_col, slots, txids, positions, values = [], [], [], [], []
        if done or pos[-1] >= hi:
            break
    close = getattr(entries, "close", None)
    if close is not None:
        close()
    if txids:
        yield _batch(spec.log, spec.lssn, seq_base, entry_col, slots, txids, positions, values)
