"""The source's ``stream`` column: a constant string column without a Python object per row, put in
front of storage's record batches (:func:`dl_spark._columns.with_stream`) to give the source's Arrow
schema. No Spark session needed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dl_spark._columns import constant_string_column, with_stream
from dl_spark.reading import ARROW_SCHEMA
from storage.formats.arrow_records import RECORD_SCHEMA, entries_to_batches
from storage.formats.entry import EntryBuilder
from storage.formats.record import LogRecord


@pytest.mark.parametrize("value", ["", "a", "stream-é"])
@pytest.mark.parametrize("n", [0, 1, 5, 3000, 17])
def test_constant_string_column(value: str, n: int) -> None:
    col = constant_string_column(value, n)
    col.validate(full=True)
    assert col.equals(pa.array([value] * n, pa.string()))
    assert col.null_count == 0


def test_source_schema_is_stream_then_storage_columns() -> None:
    assert ARROW_SCHEMA.field(0).name == "stream" and list(ARROW_SCHEMA)[1:] == list(RECORD_SCHEMA)


def test_with_stream_shares_the_storage_batch_columns() -> None:
    b = EntryBuilder()
    for t in range(1, 6):
        b.add(LogRecord(t, f"v{t}".encode()), t)
    (batch,) = entries_to_batches([(0, b.to_bytes())], lssn=4, start_sequence_id=10, envelope=True)
    out = with_stream(batch, "my-log", ARROW_SCHEMA)
    out.validate(full=True)
    assert out.schema.equals(ARROW_SCHEMA)
    assert out.column(0).to_pylist() == ["my-log"] * 5
    assert all(out.column(i + 1) is batch.column(i) or out.column(i + 1).equals(batch.column(i)) for i in range(4))
    assert out.column("sequence_id").to_pylist() == list(range(10, 15))
