"""Writing one log segment: records → entries → ledger appends (``BKLogSegmentWriter``).

Records are packed into the current enveloped entry until it holds more than
``writerOutputBufferSize`` bytes of user records (or would exceed ``MAX_LOGRECORDSET_SIZE``);
then the entry is *transmitted*: appended to the segment's ledger. A record's future resolves
to its DLSN ``(lssn, entry_id, slot)`` once its entry is durable.

Visibility follows BookKeeper's LAC rule (last add confirmed): an entry becomes readable only when a
later entry is appended. ``commit`` therefore writes a *control record* (payload
``"control"``, flag CONTROL, never packed with user records) after the data it publishes has
been acknowledged. Control records do not advance the position counter. Any entry transmitted
after an acknowledgement publishes it too (its frame carries the ledger's LAC, which the store
advances before it reports), so an acknowledged entry needs a control record only when nothing
was transmitted after it: the immediate-flush commit is asked for only then.

Acknowledgements: the writer registers one ack listener on its ledger writer and appends
with ``append_nowait``, so the segment store reports each group commit once (a run of entry
ids) instead of resolving a future per entry. Transmitted entries wait in ``_unacked`` (oldest
first; acks arrive in entry-id order), and the futures of every record of a reported run are
resolved in one :meth:`FutureGroup.resolve` call.

Thread model: callers hold the owning writer's lock for every method except the ack
listener, which runs on the segment store's commit thread and touches only ``_unacked``
(a list: appended at the end by the caller, taken from the front by the listener, each step atomic) and
``_ack_lock`` state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from storage.common.conditions import LeanCondition
from storage.common.futures import FutureGroup
from storage.common.stats import WriterStats
from storage.errors import (
    CorruptedEntryError,
    DLError,
    InvalidArgumentError,
    LogRecordTooLongError,
    TransmitError,
    WriteCancelledError,
    WriteError,
    WriterFencedError,
)
from storage.formats.dlsn import DLSN, _dlsn_unchecked
from storage.formats.entry import EntryBuilder
from storage.formats.record import (
    MAX_LOGRECORD_SIZE,
    MAX_LOGRECORDSET_SIZE,
    RECORD_HEADER_SIZE,
    RECORD_SET,
    LogRecord,
    make_control_record,
    make_end_of_stream_record,
)
from storage.formats.recordset import validate_record_set
from storage.formats.segment_metadata import LogSegmentMetadata
from storage.segstore.base import LedgerWriter

log = logging.getLogger(__name__)

#: A transmitted entry: (futures of its records, slot of each future, slot of the last user
#: record or of the end-of-stream record (-1: a control entry), holds user records, size in
#: bytes, when its first record was written, when it was transmitted (``perf_counter``)).
_Packet = tuple[list[Future[DLSN]], list[int], int, bool, int, float, float]


def record_set_slots(payload: bytes) -> int:
    """The member count (slots, positions) of the payload of a record with the RECORD_SET flag, after checking the
    whole set as a reader decodes it (:func:`~storage.formats.recordset.validate_record_set`): a set no reader could
    decode is never stored.

    Raises:
        InvalidArgumentError: the payload is not a well-formed record set; the message names the fault.
    """
    try:
        return validate_record_set(payload)
    except CorruptedEntryError as e:
        raise InvalidArgumentError(f"record has the RECORD_SET flag but an invalid payload: {e}") from None


class SegmentWriter:
    """The writer of one in-progress segment."""

    def __init__(
        self,
        metadata: LogSegmentMetadata,
        ledger: LedgerWriter,
        *,
        codec: int,
        transmit_threshold: int,
        last_txid: int,
        on_settled: Callable[[int], None] | None = None,
        stats: WriterStats | None = None,
    ) -> None:
        """``on_settled(n)``: called when ``n`` more futures of this writer are settled (acknowledged or
        failed), for outstanding-write accounting. ``stats``: where acknowledged entries are counted."""
        self.metadata = metadata
        self.ledger = ledger
        self.lssn = metadata.lssn
        self._codec = codec
        self._threshold = min(max(transmit_threshold, 0), MAX_LOGRECORDSET_SIZE)
        self._builder = EntryBuilder()
        self._group = FutureGroup(on_settled)
        self._new_future = self._group.new
        # --- the entry being built (see _Packet) ---
        self._futs: list[Future[DLSN]] = []
        self._slots: list[int] = []
        self._dlsn_slot = -1
        self._has_user = False
        self._outstanding_bytes = 0
        self._first_write = 0.0  # perf_counter of the current entry's first user record
        self._stats = stats
        self.position = 0  # user records written to this segment so far
        self.last_txid = last_txid  # txid of the last user record written (writer-wide)
        self.num_user_records = 0
        self.stream_ended = False
        # --- ack-side state (segment store commit thread) ---
        # transmitted, not yet reported, oldest first (a list: it is short, and an empty deque costs 600 bytes for
        # every idle stream); only this writer appends, only the ack listener takes from the front
        self._unacked: list[_Packet] = []
        self._ack_lock = threading.Lock()
        self._acks_done = LeanCondition(self._ack_lock)
        self._transmitted = 0  # entries handed to the ledger (written by the caller only)
        self._settled = 0  # entries whose ack (or failure) has been fully processed
        self.last_acked_user_dlsn = DLSN.INVALID
        self._last_acked_data_entry = -1  # last acked entry holding user (or EoS) records
        self._control_covers = -1  # data entries up to here are published by a control record
        self.error: DLError | None = None
        self.on_data_acked: list[Callable[[], None]] = []  # set by the owner (immediate flush)
        ledger.set_ack_listener(self._on_acks)

    # --- writes -------------------------------------------------------------------------
    def set_transmit_threshold(self, transmit_threshold: int) -> None:
        """Change the buffer size at which an entry is transmitted (dynamic ``writerOutputBufferSize``)."""
        self._threshold = min(max(transmit_threshold, 0), MAX_LOGRECORDSET_SIZE)

    def check_writable(self) -> None:
        """Raises the segment's error (fencing, I/O) if it has one.

        A writer whose segment failed writes nothing more (the outcome of its unacknowledged writes is unknown until
        recovery decides it). The error is retriable when the cause was (a store timeout, an unreachable cluster): a
        writer opened again later recovers the segment and can write.

        Raises:
            WriterFencedError, WriteError.
        """
        err = self.error
        if err is not None:
            if isinstance(err, WriterFencedError):
                raise WriterFencedError(str(err))
            hint = (
                "; close this writer and open a new one to go on (recovery settles the writes not acknowledged)"
                if err.retriable
                else ""
            )
            raise WriteError(f"log segment {self.lssn} is in error: {err}{hint}", retriable=err.retriable) from err

    def write(self, record: LogRecord, members: int | None = None) -> Future[DLSN]:
        """Add a user record to the current entry; transmit when over the threshold.

        ``members``: the slots the record occupies when the caller has already checked it (1, or the count
        :func:`record_set_slots` returned for a record set); None: a RECORD_SET record's payload is checked here.

        Raises:
            LogRecordTooLongError, InvalidArgumentError (a RECORD_SET record with a malformed payload), WriteError,
            WriterFencedError; nothing is buffered when it raises.
        """
        if self.error is not None:
            self.check_writable()
        payload = record.payload
        size = RECORD_HEADER_SIZE + len(payload)  # record.persistent_size
        if size > MAX_LOGRECORD_SIZE:
            raise LogRecordTooLongError(f"record of {size} bytes exceeds MAX_LOGRECORD_SIZE {MAX_LOGRECORD_SIZE}")
        if members is None:
            members = record_set_slots(payload) if record.flags & RECORD_SET else 1
        if self._builder.num_bytes + size > MAX_LOGRECORDSET_SIZE:
            self.transmit()
        if not self._futs and self._stats is not None:
            self._first_write = time.perf_counter()
        slot = self._builder.add(record, self.position + 1)
        self.position += members  # a record set occupies one position per member
        fut = self._new_future()
        self._futs.append(fut)
        self._slots.append(slot)
        self._has_user = True
        self._dlsn_slot = slot + members - 1
        self.last_txid = record.txid
        self.num_user_records += 1
        self._outstanding_bytes += size
        if self._outstanding_bytes > self._threshold:
            self.transmit()
        return fut

    def write_group(
        self, marker: LogRecord, records: list[LogRecord], members: list[int] | None = None
    ) -> list[Future[DLSN]]:
        """Transmit pending data, then ``marker`` (a control record: invisible to readers) followed by ``records``
        as ONE entry: durable together or not at all (the write proxy's producer markers).

        ``members``: the slots of each record when the caller has already checked them (see :meth:`write`); None:
        RECORD_SET payloads are checked here.

        Raises:
            LogRecordTooLongError: the group does not fit in one entry (``MAX_LOGRECORDSET_SIZE``); nothing written.
            InvalidArgumentError: a RECORD_SET record with a malformed payload (the message names the fault); nothing
            written. WriteError, WriterFencedError.
        """
        self.check_writable()
        if members is None:  # a bad record must fail before the marker is buffered
            members = [record_set_slots(r.payload) if r.flags & RECORD_SET else 1 for r in records]
        total = sum(RECORD_HEADER_SIZE + len(r.payload) for r in [marker, *records])
        if total > MAX_LOGRECORDSET_SIZE:
            raise LogRecordTooLongError(
                f"a group of {len(records)} records ({total} bytes) exceeds one entry (MAX_LOGRECORDSET_SIZE "
                f"{MAX_LOGRECORDSET_SIZE})"
            )
        self.transmit()
        self._builder.add(marker.with_position(self.position))
        threshold, self._threshold = self._threshold, MAX_LOGRECORDSET_SIZE  # no transmit inside the group
        try:
            futs = [self.write(r, n) for r, n in zip(records, members, strict=True)]
        finally:
            self._threshold = threshold
        self.transmit()
        return futs

    def write_control(self) -> None:
        """Transmit pending data, then a control record on its own (a commit)."""
        self.check_writable()
        self.transmit()
        with self._ack_lock:
            # Every data entry acked now is durable before the control entry is written, so
            # the control entry's piggy-backed LAC covers it.
            self._control_covers = self._last_acked_data_entry
        self._builder.add(make_control_record(max(self.last_txid, 0), self.position))
        # Not durable on its own: it only publishes entries that are durable already, so a crash that loses it
        # loses nothing (recovery publishes them); the next data entry's barrier, or the seal, makes it durable.
        self.transmit(durable=False)

    def needs_control(self) -> bool:
        """True if acknowledged data is not yet published by a control record."""
        with self._ack_lock:
            return self._last_acked_data_entry > self._control_covers

    def write_end_of_stream(self) -> Future[DLSN]:
        """Write the end-of-stream record (txid MAX_TXID, not CONTROL, current position)."""
        self.check_writable()
        self.transmit()
        slot = self._builder.add(make_end_of_stream_record(self.position))
        fut = self._new_future()
        self._futs.append(fut)
        self._slots.append(slot)
        self._dlsn_slot = slot
        self.stream_ended = True
        self.transmit()
        return fut

    def has_pending(self) -> bool:
        return self._builder.num_records > 0

    def transmit(self, *, durable: bool = True) -> None:
        """Append the current entry to the ledger (no-op when empty); ``durable=False`` for a commit record alone
        (see :meth:`storage.segstore.base.LedgerWriter.append_nowait`)."""
        builder = self._builder
        if builder.num_records == 0:
            return
        data = builder.to_bytes(self._codec)
        now = time.perf_counter() if self._stats is not None else 0.0
        packet: _Packet = (self._futs, self._slots, self._dlsn_slot, self._has_user, len(data), self._first_write, now)
        builder.clear()
        self._futs = []
        self._slots = []
        self._dlsn_slot = -1
        self._has_user = False
        self._outstanding_bytes = 0
        if self.error is not None:
            self._group.resolve(packet[0], exc=self.error)
            return
        with self._ack_lock:
            # this entry's frame carries the LAC, which covers every entry acked so far: it publishes them
            self._control_covers = self._last_acked_data_entry
        self._unacked.append(packet)  # before the append: its ack may come at once
        try:
            self.ledger.append_nowait(data, durable=durable)
        except DLError as e:
            self._unacked.pop()  # not queued, so never reported (only this thread appends)
            e.outcome_unknown = True  # an append that failed part way (a full disk) may have stored some of it
            self._set_error(e)
            self._group.resolve(packet[0], exc=e)
            return
        self._transmitted += 1

    # --- acks -----------------------------------------------------------------------------
    def _on_acks(self, count: int, last_entry_id: int, error: BaseException | None) -> None:
        """The ledger's ack listener: the ``count`` oldest transmitted entries are settled."""
        unacked = self._unacked
        packets = [unacked.pop(0) for _ in range(count)]
        try:
            self._process_acks(packets, last_entry_id, error)
        except Exception:  # pragma: no cover - a bug; the futures must not hang
            log.exception("log segment %s: processing acks failed", self.lssn)
            err = TransmitError(f"log segment {self.lssn}: processing acks failed")
            self._set_error(err)
            self._group.resolve([f for p in packets for f in p[0]], exc=err)
        finally:
            with self._acks_done:
                self._settled += count
                self._acks_done.notify_all()

    def _process_acks(self, packets: list[_Packet], last_entry_id: int, error: BaseException | None) -> None:
        if error is not None:
            if isinstance(error, DLError):
                err = error
            else:
                err = TransmitError(f"append to log segment {self.lssn} failed: {error}")
            err.outcome_unknown = True  # transmitted entries may be durable: the next writer's recovery decides
            self._set_error(err)
            if self._stats is not None:
                self._stats.error(err)
            self._group.resolve([f for p in packets for f in p[0]], exc=err)
            return
        if self._stats is not None:
            self._count_acked(packets)
        lssn = self.lssn
        entry_id = last_entry_id - len(packets) + 1
        futures: list[Future[DLSN]] = []
        results: list[DLSN] = []
        last_data = None  # (entry id, slot) of the last user or end-of-stream record
        user_acked = False
        for futs, slots, dlsn_slot, has_user, _size, _first, _sent in packets:
            if futs:
                futures += futs
                if len(slots) == 1:
                    results.append(_dlsn_unchecked(lssn, entry_id, slots[0]))
                else:
                    results += [_dlsn_unchecked(lssn, entry_id, s) for s in slots]
            if dlsn_slot >= 0:
                last_data = (entry_id, dlsn_slot)
                user_acked = user_acked or has_user
            entry_id += 1
        last_one = True
        if last_data is not None:
            with self._ack_lock:
                self.last_acked_user_dlsn = DLSN(lssn, last_data[0], last_data[1])
                self._last_acked_data_entry = last_data[0]
                # entries transmitted after these publish them (piggy-backed LAC): no commit needed now
                last_one = self._transmitted <= entry_id
        self._group.resolve(futures, results)
        if user_acked and last_one:
            for cb in self.on_data_acked:
                cb()

    def _count_acked(self, packets: list[_Packet]) -> None:
        stats = self._stats
        assert stats is not None
        now = time.perf_counter()
        for futs, _slots, _dlsn_slot, has_user, size, first, sent in packets:
            stats.entries += 1
            stats.bytes += size
            stats.transmit_latency.observe(now - sent)
            if has_user:
                stats.records += len(futs)
                stats.write_latency.observe(now - first)

    def _set_error(self, err: DLError) -> None:
        with self._ack_lock:
            if self.error is None:
                self.error = err
                log.warning("log segment %s entered error state: %s", self.lssn, err)

    def wait_inflight(self) -> None:
        """Wait until every transmitted entry's ack (or failure) has been processed; raise the
        segment's error if it has one.

        Raises:
            WriterFencedError, WriteError.
        """
        with self._acks_done:
            self._acks_done.wait_for(lambda: self._settled >= self._transmitted)
        self.check_writable()

    def cancel_pending(self, cause: DLError) -> None:
        """Fail buffered (not yet transmitted) records with ``WriteCancelledError``."""
        err = WriteCancelledError(f"write cancelled: {cause}", retriable=cause.retriable)
        err.__cause__ = cause
        self._group.resolve(self._futs, exc=err)
        self._builder = EntryBuilder()
        self._futs = []
        self._slots = []
        self._dlsn_slot = -1
        self._has_user = False
        self._outstanding_bytes = 0
