"""Writing one log segment: records → entries → ledger appends (``BKLogSegmentWriter``).

Records are packed into the current enveloped entry until it holds more than
``writerOutputBufferSize`` bytes of user records (or would exceed ``MAX_LOGRECORDSET_SIZE``);
then the entry is *transmitted*: appended to the segment's ledger. A record's future resolves
to its DLSN ``(lssn, entry_id, slot)`` once its entry is durable.

Visibility follows BookKeeper's LAC rule (spec §6.4): an entry becomes readable only when a
later entry is appended. ``commit`` therefore writes a *control record* (payload
``"control"``, flag CONTROL, never packed with user records) after the data it publishes has
been acknowledged. Control records do not advance the position counter.

Thread model: callers hold the owning writer's lock for every method except the ack
callbacks, which run on the segment store's commit thread and touch only ``_ack_lock`` state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from storage._futures import FutureGroup
from storage.dlsn import DLSN
from storage.entry import EntryBuilder
from storage.errors import (
    DLError,
    LogRecordTooLongError,
    TransmitError,
    WriteCancelledError,
    WriteError,
    WriterFencedError,
)
from storage.record import (
    MAX_LOGRECORD_SIZE,
    MAX_LOGRECORDSET_SIZE,
    LogRecord,
    make_control_record,
    make_end_of_stream_record,
    record_set_count,
)
from storage.segment_metadata import LogSegmentMetadata
from storage.segstore.base import LedgerWriter

log = logging.getLogger(__name__)


@dataclass
class _Packet:
    """One transmitted entry and the futures of the records in it (slot of each future)."""

    futures: list[Future[DLSN]] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    has_user_records: bool = False
    last_user_slot: int = -1
    is_eos: bool = False


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
    ) -> None:
        self.metadata = metadata
        self.ledger = ledger
        self.lssn = metadata.lssn
        self._codec = codec
        self._threshold = min(max(transmit_threshold, 0), MAX_LOGRECORDSET_SIZE)
        self._builder = EntryBuilder()
        self._group = FutureGroup()
        self._packet = _Packet()
        self._outstanding_bytes = 0
        self.position = 0  # user records written to this segment so far
        self.last_txid = last_txid  # txid of the last user record written (writer-wide)
        self.num_user_records = 0
        self.stream_ended = False
        # --- ack-side state (segment store commit thread) ---
        self._ack_lock = threading.Lock()
        self._acks_done = threading.Condition(self._ack_lock)
        self._transmitted = 0  # entries handed to the ledger
        self._settled = 0  # entries whose ack (or failure) has been fully processed
        self.last_acked_user_dlsn = DLSN.INVALID
        self._last_acked_data_entry = -1  # last acked entry holding user (or EoS) records
        self._control_covers = -1  # data entries up to here are published by a control record
        self.error: DLError | None = None
        self.on_data_acked: list[Callable[[], None]] = []  # set by the owner (immediate flush)

    # --- writes -------------------------------------------------------------------------
    def check_writable(self) -> None:
        """Raises the segment's error (fencing, I/O) if it has one."""
        if self.error is not None:
            if isinstance(self.error, WriterFencedError):
                raise WriterFencedError(str(self.error))
            raise WriteError(f"log segment {self.lssn} is in error: {self.error}") from self.error

    def write(self, record: LogRecord) -> Future[DLSN]:
        """Add a user record to the current entry; transmit when over the threshold.

        Raises:
            LogRecordTooLongError, WriteError, WriterFencedError.
        """
        self.check_writable()
        size = record.persistent_size
        if size > MAX_LOGRECORD_SIZE:
            raise LogRecordTooLongError(f"record of {size} bytes exceeds MAX_LOGRECORD_SIZE {MAX_LOGRECORD_SIZE}")
        if self._builder.num_bytes + size > MAX_LOGRECORDSET_SIZE:
            self.transmit()
        members = record_set_count(record.payload) if record.is_record_set else 1
        slot = self._builder.add(record.with_position(self.position + 1))
        self.position += members  # a record set occupies one position per member
        fut: Future[DLSN] = self._group.new()
        self._packet.futures.append(fut)
        self._packet.slots.append(slot)
        self._packet.has_user_records = True
        self._packet.last_user_slot = slot + members - 1
        self.last_txid = record.txid
        self.num_user_records += 1
        self._outstanding_bytes += size
        if self._outstanding_bytes > self._threshold:
            self.transmit()
        return fut

    def write_control(self) -> Future[int] | None:
        """Transmit pending data, then a control record on its own (a commit).

        Returns the append future of the control entry.
        """
        self.check_writable()
        self.transmit()
        with self._ack_lock:
            # Every data entry acked now is durable before the control entry is written, so
            # the control entry's piggy-backed LAC covers it.
            self._control_covers = self._last_acked_data_entry
        self._builder.add(make_control_record(max(self.last_txid, 0), self.position))
        return self.transmit()

    def needs_control(self) -> bool:
        """True if acknowledged data is not yet published by a control record."""
        with self._ack_lock:
            return self._last_acked_data_entry > self._control_covers

    def write_end_of_stream(self) -> Future[DLSN]:
        """Write the end-of-stream record (txid MAX_TXID, not CONTROL, current position)."""
        self.check_writable()
        self.transmit()
        slot = self._builder.add(make_end_of_stream_record(self.position))
        fut: Future[DLSN] = self._group.new()
        self._packet.futures.append(fut)
        self._packet.slots.append(slot)
        self._packet.is_eos = True
        self.stream_ended = True
        self.transmit()
        return fut

    def has_pending(self) -> bool:
        return self._builder.num_records > 0

    def transmit(self) -> Future[int] | None:
        """Append the current entry to the ledger (no-op when empty); returns its future."""
        if self._builder.num_records == 0:
            return None
        data = self._builder.to_bytes(self._codec)
        packet = self._packet
        self._builder = EntryBuilder()
        self._packet = _Packet()
        self._outstanding_bytes = 0
        if self.error is not None:
            self._fail_packet(packet, self.error)
            return None
        try:
            fut = self.ledger.append_async(data)
        except DLError as e:
            self._set_error(e)
            self._fail_packet(packet, e)
            return None
        with self._ack_lock:
            self._transmitted += 1
        fut.add_done_callback(lambda f: self._on_ack(f, packet))
        return fut

    # --- acks -----------------------------------------------------------------------------
    def _on_ack(self, fut: Future[int], packet: _Packet) -> None:
        try:
            self._process_ack(fut, packet)
        finally:
            with self._acks_done:
                self._settled += 1
                self._acks_done.notify_all()

    def _process_ack(self, fut: Future[int], packet: _Packet) -> None:
        exc = fut.exception()
        if exc is not None:
            err = exc if isinstance(exc, DLError) else TransmitError(f"append to log segment {self.lssn} failed: {exc}")
            self._set_error(err)
            self._fail_packet(packet, err)
            return
        entry_id = fut.result()
        with self._ack_lock:
            if packet.is_eos:
                self.last_acked_user_dlsn = DLSN(self.lssn, entry_id, packet.slots[-1])
                self._last_acked_data_entry = entry_id
            elif packet.has_user_records:
                self.last_acked_user_dlsn = DLSN(self.lssn, entry_id, packet.last_user_slot)
                self._last_acked_data_entry = entry_id
        lssn = self.lssn
        self._group.resolve(packet.futures, [DLSN(lssn, entry_id, slot) for slot in packet.slots])
        if packet.has_user_records:
            for cb in self.on_data_acked:
                cb()

    def _set_error(self, err: DLError) -> None:
        with self._ack_lock:
            if self.error is None:
                self.error = err
                log.warning("log segment %s entered error state: %s", self.lssn, err)

    def _fail_packet(self, packet: _Packet, err: BaseException) -> None:
        self._group.resolve(packet.futures, exc=err)

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
        err = WriteCancelledError(f"write cancelled: {cause}")
        err.__cause__ = cause
        self._fail_packet(self._packet, err)
        self._builder = EntryBuilder()
        self._packet = _Packet()
