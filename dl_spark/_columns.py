"""The source's Arrow rows: storage's record batches with the ``stream`` column in front.

The records themselves are decoded into Arrow by storage (:mod:`storage.formats.arrow_records`, through
:meth:`storage.LogManager.read_arrow_slice`); the source only adds the log's name as a constant
column, without one Python object per row (buffers sliced from a per-value cache).
"""

from __future__ import annotations

from array import array

import pyarrow as pa

__all__ = ["constant_string_column", "with_stream"]

_string_cache: dict[str, tuple[int, pa.Buffer, pa.Buffer]] = {}


def constant_string_column(value: str, n: int) -> pa.Array:
    """A non-null string array of ``n`` copies of ``value`` (buffers sliced from a per-value cache)."""
    data = value.encode()
    size = len(data)
    hit = _string_cache.get(value)
    if hit is None or hit[0] < n:
        cap = max(n, 2 * hit[0] if hit else 0, 1024)
        offsets = pa.py_buffer(array("i", range(0, size * (cap + 1), size)) if size else bytes(4 * (cap + 1)))
        hit = (cap, offsets, pa.py_buffer(data * cap))
        if len(_string_cache) > 64:
            _string_cache.clear()
        _string_cache[value] = hit
    _, offsets, chars = hit
    return pa.StringArray.from_buffers(n, offsets.slice(0, 4 * (n + 1)), chars.slice(0, size * n))


def with_stream(batch: pa.RecordBatch, stream: str, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (of :data:`storage.formats.arrow_records.RECORD_SCHEMA`) with the constant ``stream`` column in
    front, as a batch of ``schema`` (the source's Arrow schema); no data is copied."""
    return pa.RecordBatch.from_arrays([constant_string_column(stream, batch.num_rows), *batch.columns], schema=schema)
