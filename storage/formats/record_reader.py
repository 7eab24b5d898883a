"""Reading the records of one entry's payload, as DistributedLog's ``LogRecord.Reader`` does.

The piece between :mod:`storage.formats.record` (one record's layout) and :mod:`storage.formats.recordset` (a
record set's layout): a payload buffer is a concatenation of records, some of them record sets, and the record at index
``i`` (counting record-set members) gets the DLSN ``(lssn, entry_id, slot)``. Both layouts are needed to count slots,
so this module imports both and neither imports it.

Errors: malformed bytes raise :class:`~storage.errors.CorruptedEntryError`; bad arguments
:class:`~storage.errors.InvalidArgumentError`.
"""

from __future__ import annotations

from storage.errors import CorruptedEntryError, InvalidArgumentError
from storage.formats.dlsn import DLSN, _dlsn_unchecked
from storage.formats.record import (
    _HEADER,
    _INT32_MAX,
    _INT64_MAX,
    _INT64_MIN,
    _POSITION_MASK,
    _POSITION_SHIFT,
    CONTROL,
    FLAGS_MASK,
    RECORD_HEADER_SIZE,
    RECORD_SET,
    LogRecordWithDLSN,
    _check_int,
    _new,
    _position_of,
    _record_unchecked,
    _short,
    as_view,
    iter_raw_records,
    record_set_count,
)
from storage.formats.recordset import decode_record_set

__all__ = ["read_records"]


def _entry_min_slot(lssn: int, entry_id: int, target: DLSN) -> int | None:
    """First slot of entry (lssn, entry_id) at or after ``target``; None if the whole entry is before it."""
    if (lssn, entry_id) > (target.lssn, target.entry_id):
        return 0
    if (lssn, entry_id) < (target.lssn, target.entry_id):
        return None
    return max(target.slot_id, 0)


def read_records(
    buf: bytes | bytearray | memoryview,
    lssn: int,
    entry_id: int,
    start_sequence_id: int,
    *,
    deserialize_record_set: bool = True,
    skip_to: DLSN | None = None,
    skip_to_txid: int | None = None,
    skip_control: bool = True,
) -> list[LogRecordWithDLSN]:
    """Read the records of one entry's payload buffer (no envelope) as ``LogRecord.Reader`` does.

    * Record ``i`` gets ``DLSN(lssn, entry_id, slot)``; slots count from 0 and advance by 1 per record, or by the
      member count for a record set that is not expanded.
    * With ``deserialize_record_set`` (the default) a record set is expanded into its members: member ``i`` gets slot
      ``set slot + i``, position ``set position + i``, the set's txid and flags 0.
    * ``skip_to``: start at the first record whose DLSN is ``>= skip_to`` (``skipTo(DLSN)``). If it lands inside a
      record set, the remaining members are returned one by one even when sets are not expanded. An entry that lies
      wholly before ``skip_to`` yields nothing.
    * ``skip_to_txid``: start at the first record with ``txid >= skip_to_txid`` that (if ``skip_control``) is not a
      control record (``skipTo(txid, skipControl)``); nothing if there is none.

    Raises :class:`~storage.errors.CorruptedEntryError` on malformed bytes (including a malformed record set) and
    :class:`~storage.errors.InvalidArgumentError` on non-int positions, a non-DLSN ``skip_to`` or if both ``skip_to``
    and ``skip_to_txid`` are given.
    """
    if skip_to is not None and skip_to_txid is not None:
        raise InvalidArgumentError("give at most one of skip_to and skip_to_txid")
    if not (type(lssn) is int and type(entry_id) is int and type(start_sequence_id) is int):
        lssn = _check_int(lssn, "lssn", _INT64_MIN, _INT64_MAX)
        entry_id = _check_int(entry_id, "entry_id", _INT64_MIN, _INT64_MAX)
        start_sequence_id = _check_int(start_sequence_id, "start_sequence_id", _INT64_MIN, _INT64_MAX)
    if skip_to_txid is not None and type(skip_to_txid) is not int:
        skip_to_txid = _check_int(skip_to_txid, "skip_to_txid", _INT64_MIN, _INT64_MAX)
    min_slot = 0
    if skip_to is not None:
        if not isinstance(skip_to, DLSN):
            raise InvalidArgumentError(f"skip_to must be a DLSN, got {_short(skip_to)}")
        first = _entry_min_slot(lssn, entry_id, skip_to)
        if first is None:
            return []
        min_slot = first
    if skip_to is None and skip_to_txid is None:
        return _read_all(buf, 0, None, lssn, entry_id, start_sequence_id, deserialize_record_set)
    txid_pending = skip_to_txid is not None
    target_txid = skip_to_txid if skip_to_txid is not None else 0

    out: list[LogRecordWithDLSN] = []
    append = out.append
    slot = 0
    for metadata, txid, payload in iter_raw_records(buf):
        flags = metadata & FLAGS_MASK
        position = _position_of(metadata)
        if txid_pending:
            if txid < target_txid or (skip_control and flags & CONTROL):
                # skipped: advance by one slot, or by the member count of a set
                slot += record_set_count(payload) if flags & RECORD_SET else 1
                continue
            txid_pending = False
        if flags & RECORD_SET:
            count = record_set_count(payload)
            if slot < min_slot and slot + count <= min_slot:
                slot += count
                continue
            if deserialize_record_set or slot < min_slot:
                members = decode_record_set(payload)
                skip = min_slot - slot if slot < min_slot else 0
                for i in range(skip, len(members)):
                    append(
                        _record_unchecked(
                            txid,
                            members[i],
                            0,
                            position + i,
                            _dlsn_unchecked(lssn, entry_id, slot + i),
                            start_sequence_id,
                        )
                    )
            else:
                append(
                    _record_unchecked(
                        txid, payload, flags, position, _dlsn_unchecked(lssn, entry_id, slot), start_sequence_id
                    )
                )
            slot += count
            continue
        if slot >= min_slot:
            append(
                _record_unchecked(
                    txid, payload, flags, position, _dlsn_unchecked(lssn, entry_id, slot), start_sequence_id
                )
            )
        slot += 1
    return out


def _read_all(
    buf: bytes | bytearray | memoryview,
    start: int,
    end: int | None,
    lssn: int,
    entry_id: int,
    start_sequence_id: int,
    deserialize_record_set: bool,
) -> list[LogRecordWithDLSN]:
    """:func:`read_records` without ``skip_to``/``skip_to_txid`` over ``buf[start:end]``: the reader's hot path.

    Same records, slots and errors as the general loop; it parses headers in place (no generator, no per-record
    helper calls) and builds each :class:`LogRecordWithDLSN` and its :class:`DLSN` inline, without validation (every
    value comes from a fixed-width field). Payloads are sliced straight out of ``buf`` when it is ``bytes``.
    """
    if type(buf) is not bytes:
        buf = as_view(buf)
        if end is None:
            end = len(buf)
        buf = buf[start:end].tobytes()
        start, end = 0, len(buf)
    elif end is None:
        end = len(buf)
    out: list[LogRecordWithDLSN] = []
    append = out.append
    unpack = _HEADER.unpack_from
    new = _new
    record_cls = LogRecordWithDLSN
    at_entry = (lssn, entry_id)  # shared by the records of this entry (see LogRecordWithDLSN)
    off = start
    slot = 0
    while off < end:
        if end - off < RECORD_HEADER_SIZE:
            raise CorruptedEntryError(f"truncated record header at offset {off - start}: {end - off} bytes left")
        metadata, txid, length = unpack(buf, off)
        off += RECORD_HEADER_SIZE
        if length < 0:
            raise CorruptedEntryError(
                f"record at offset {off - start - RECORD_HEADER_SIZE} has a negative length {length}"
            )
        if length > end - off:
            at = off - start - RECORD_HEADER_SIZE
            raise CorruptedEntryError(f"truncated record at offset {at}: length {length}, {end - off} bytes left")
        payload = buf[off : off + length]
        off += length
        flags = metadata & FLAGS_MASK
        position = (metadata & _POSITION_MASK) >> _POSITION_SHIFT
        if position > _INT32_MAX:
            position -= 1 << 32  # Java casts to int
        if flags & RECORD_SET:
            count = record_set_count(payload)
            if deserialize_record_set:
                members = decode_record_set(payload)
                for i, member in enumerate(members):
                    append(
                        _record_unchecked(
                            txid,
                            member,
                            0,
                            position + i,
                            _dlsn_unchecked(lssn, entry_id, slot + i),
                            start_sequence_id,
                        )
                    )
            else:
                append(
                    _record_unchecked(
                        txid, payload, flags, position, _dlsn_unchecked(lssn, entry_id, slot), start_sequence_id
                    )
                )
            slot += count
            continue
        r = new(record_cls)
        r.txid = txid
        r.payload = payload
        r.flags = flags
        r.position_within_segment = position
        r._dlsn = None
        r._entry = at_entry
        r._slot = slot
        r.start_sequence_id_of_segment = start_sequence_id
        append(r)
        slot += 1
    return out
