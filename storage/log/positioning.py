"""Positioning by transaction id and the first/last-record queries, as DistributedLog does them.

``dlsn_for_txid`` finds the DLSN of the first user record with ``txid >= target``:
DistributedLog's segment choice (``findLogSegmentNotLessThanTxnId``, which walks back over
completed segments sharing a boundary txid so duplicates are found from their first copy),
then a search over the entries of that segment. Transaction ids are non-decreasing in a log,
so the search is a plain binary search over entries on "does this entry hold a user record
with txid >= target" — the same answer as DistributedLog's n-way search, in O(log n) reads.
"""

from __future__ import annotations

from storage.errors import LogEmptyError
from storage.formats.dlsn import DLSN
from storage.formats.entry import decode_entry
from storage.formats.record import LogRecordWithDLSN
from storage.formats.segment_metadata import LogSegmentMetadata, TruncationStatus
from storage.log.write_handler import last_record_of_ledger
from storage.segstore.base import SegmentStore


def visible_last_entry(segstore: SegmentStore, seg: LogSegmentMetadata) -> int:
    """Last entry readers may see: the LAC of an in-progress segment, else the last entry."""
    if seg.in_progress:
        return segstore.last_add_confirmed(seg.ledger_id)
    return segstore.info(seg.ledger_id).last_entry_id


def _user_records(segstore: SegmentStore, seg: LogSegmentMetadata, entry_id: int) -> list[LogRecordWithDLSN]:
    data = segstore.read_entry(seg.ledger_id, entry_id)
    recs = decode_entry(data, seg.lssn, entry_id, seg.effective_start_sequence_id, envelope=seg.envelope_entries)
    return [r for r in recs if not r.is_control and not r.is_end_of_stream]


def find_segment_index(segments: list[LogSegmentMetadata], txid: int) -> int:
    """``DLUtils.findLogSegmentNotLessThanTxnId``: index of the segment to search, or -1."""
    idx = -1
    for i in range(len(segments) - 1, -1, -1):
        if segments[i].first_txid <= txid:
            idx = i
            break
    if idx < 0:
        return -1
    seg = segments[idx]
    if seg.first_txid == txid:
        j = idx
        while j - 1 >= 0 and not segments[j - 1].in_progress and segments[j - 1].last_txid >= txid:
            j -= 1
        return j
    if seg.in_progress or idx == len(segments) - 1 or seg.last_txid >= txid:
        return idx
    return idx + 1


def first_record_not_less_than_txid(
    segstore: SegmentStore, seg: LogSegmentMetadata, txid: int
) -> LogRecordWithDLSN | None:
    """The first user record of ``seg`` with txid >= ``txid``, or None.

    Raises:
        CorruptedEntryError, SegmentStoreError.
    """
    if not seg.in_progress and seg.last_txid < txid:
        return None
    last = visible_last_entry(segstore, seg)

    def first_match_from(entry_id: int) -> LogRecordWithDLSN | None:
        # The first user record at or after ``entry_id`` with txid >= target, if the first
        # entry holding user records has one (entries of control records only are skipped).
        for eid in range(entry_id, last + 1):
            recs = _user_records(segstore, seg, eid)
            if recs:
                return next((r for r in recs if r.txid >= txid), None)
        return None

    lo, hi = 0, last
    best: LogRecordWithDLSN | None = None
    while lo <= hi:  # monotone predicate over entries: "first_match_from(mid) exists"
        mid = (lo + hi) // 2
        rec = first_match_from(mid)
        if rec is not None:
            best, hi = rec, mid - 1
        else:
            lo = mid + 1
    return best


def dlsn_for_txid(segstore: SegmentStore, segments: list[LogSegmentMetadata], txid: int) -> DLSN:
    """The DLSN a reader opened at ``txid`` starts from (``getDLSNNotLessThanTxId``).

    Raises:
        LogEmptyError: the log has no segments.
        CorruptedEntryError, SegmentStoreError.
    """
    if not segments:
        raise LogEmptyError("log has no log segments")
    idx = find_segment_index(segments, txid)
    if idx < 0:
        return DLSN(segments[0].lssn, 0, 0)
    while idx < len(segments):
        seg = segments[idx]
        rec = first_record_not_less_than_txid(segstore, seg, txid)
        if rec is not None:
            return rec.dlsn
        if idx == len(segments) - 1:
            last = last_user_record(segstore, [seg])
            if last is not None and last.txid >= txid:
                return last.dlsn
            if last is not None:
                return last.dlsn.next()
            return DLSN(seg.lssn, 0, 0)
        idx += 1
    return DLSN(segments[-1].lssn + 1, 0, 0)  # pragma: no cover


def last_user_record(
    segstore: SegmentStore, segments: list[LogSegmentMetadata], *, include_eos: bool = False
) -> LogRecordWithDLSN | None:
    """The last user record (control records never, end of stream optionally), scanning
    segments newest first (``getLastLogRecordAsync``)."""
    for seg in reversed(segments):
        last = visible_last_entry(segstore, seg)
        if last < 0:
            continue
        rec = last_record_of_ledger(segstore, seg, last, include_control=False, include_eos=include_eos)
        if rec is not None:
            return rec
    return None


def first_user_record(segstore: SegmentStore, segments: list[LogSegmentMetadata]) -> LogRecordWithDLSN:
    """The first user record of the first segment that is not TRUNCATED and has records
    (``asyncGetFirstLogRecord``; like DistributedLog it ignores ``minActiveDLSN``).

    Raises:
        LogEmptyError: there is none.
    """
    for seg in segments:
        if seg.truncation_status == TruncationStatus.TRUNCATED:
            continue
        if seg.record_count <= 0 and not seg.in_progress:
            continue
        last = visible_last_entry(segstore, seg)
        for entry_id, data in segstore.read_entries(seg.ledger_id, 0, last) if last >= 0 else ():
            recs = decode_entry(
                data, seg.lssn, entry_id, seg.effective_start_sequence_id, envelope=seg.envelope_entries
            )
            for r in recs:
                if not r.is_control and not r.is_end_of_stream and r.dlsn >= DLSN.INITIAL:
                    return r
        break
    raise LogEmptyError("log has no user records")
