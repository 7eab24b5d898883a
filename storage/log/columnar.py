"""The columnar read path of a log: its records as Arrow record batches, no Python object per record.

Two ways in, one decoder (:func:`storage.formats.arrow_records.entries_to_batches`):

* :func:`read_log` (``LogManager.read_arrow``): from a DLSN or a transaction id, optionally up to an
  exclusive end DLSN and at most ``max_records`` rows, across segments, positioned as a reader is
  (truncated leading segments skipped, a truncated hole raises), reading what readers may
  see now (completed segments to their end, the in-progress one to its LAC) and returning: it does
  not wait at the tail.
* :func:`read_slice` (``LogManager.read_arrow_slice``): a :class:`SegmentSlice` a planner already
  resolved (the Spark source's partitions), with no metadata round trip.

pyarrow is imported here, so ``import storage`` does not load it.
"""

from __future__ import annotations

from collections.abc import Generator

import pyarrow as pa

from storage.config import Config
from storage.formats.arrow_records import BATCH_ROWS, entries_to_batches
from storage.formats.dlsn import DLSN
from storage.formats.segment_metadata import LogSegmentMetadata, SegmentSlice
from storage.log.cursor import position_segments
from storage.log.positioning import visible_last_entry
from storage.segstore.base import SegmentStore

__all__ = ["read_log", "read_slice"]


def _close(it: object) -> None:
    close = getattr(it, "close", None)
    if close is not None:
        close()


def read_slice(
    segstore: SegmentStore, s: SegmentSlice, batch_rows: int = BATCH_ROWS
) -> Generator[pa.RecordBatch, None, None]:
    """The records of slice ``s`` as batches of :data:`storage.formats.arrow_records.RECORD_SCHEMA`.

    Raises:
        LedgerNotFoundError: the segment's ledger is gone (purged). CorruptedEntryError,
            InvalidEnvelopedEntryError, SegmentStoreError.
    """
    entries = segstore.read_entry_buffers(s.ledger_id, s.first_entry, s.last_entry)
    try:
        yield from entries_to_batches(
            entries,
            lssn=s.lssn,
            start_sequence_id=s.start_sequence_id,
            envelope=s.envelope,
            first_pos=s.first_pos,
            last_pos=s.last_pos,
            batch_rows=batch_rows,
        )
    finally:
        _close(entries)


def read_log(
    segstore: SegmentStore,
    segments: list[LogSegmentMetadata],
    conf: Config,
    log_name: str,
    start: DLSN,
    end: DLSN | None,
    max_records: int | None,
    batch_rows: int = BATCH_ROWS,
) -> Generator[pa.RecordBatch, None, None]:
    """The user records from ``start`` (inclusive) to ``end`` (exclusive; None: what is visible now),
    at most ``max_records`` of them (None: no limit), as batches of
    :data:`storage.formats.arrow_records.RECORD_SCHEMA`. ``segments`` ascend by LSSN with start sequence ids
    assigned. Positioning is a reader's (see :func:`storage.log.cursor.position_segments`).

    Raises:
        AlreadyTruncatedTransactionError: ``start`` lies in truncated data (raised by this call, before
            any batch). CorruptedEntryError, InvalidEnvelopedEntryError, LedgerNotFoundError,
            SegmentStoreError: while iterating.
    """
    readable, start = position_segments(segments, start, conf, log_name)
    return _read_segments(segstore, readable, start, end, max_records, batch_rows)


def _read_segments(
    segstore: SegmentStore,
    readable: list[LogSegmentMetadata],
    start: DLSN,
    end: DLSN | None,
    max_records: int | None,
    batch_rows: int,
) -> Generator[pa.RecordBatch, None, None]:
    remaining = max_records
    if remaining is not None and remaining <= 0:
        return
    for seg in readable:
        if end is not None and (seg.lssn > end.lssn or (seg.lssn, 0, 0) >= (end.lssn, end.entry_id, end.slot_id)):
            return
        cut_end = end is not None and seg.lssn == end.lssn
        last_entry = visible_last_entry(segstore, seg)
        if cut_end and end is not None:
            last_entry = min(last_entry, end.entry_id)
        in_start = start.lssn == seg.lssn
        first_entry = max(start.entry_id, 0) if in_start else 0
        if first_entry <= last_entry:
            entries = segstore.read_entry_buffers(seg.ledger_id, first_entry, last_entry)
            try:
                for batch in entries_to_batches(
                    entries,
                    lssn=seg.lssn,
                    start_sequence_id=seg.effective_start_sequence_id,
                    envelope=seg.envelope_entries,
                    first_slot=(start.entry_id, start.slot_id) if in_start else None,
                    end_slot=(end.entry_id, end.slot_id) if cut_end and end is not None else None,
                    batch_rows=batch_rows,
                ):
                    if remaining is not None:
                        if batch.num_rows >= remaining:
                            yield batch.slice(0, remaining)
                            return
                        remaining -= batch.num_rows
                    yield batch
            finally:
                _close(entries)
        if cut_end or seg.in_progress:
            return  # nothing is visible after the in-progress segment
