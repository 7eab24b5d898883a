"""Ownership, recovery and the segment lifecycle of one log (``BKLogWriteHandler``).

* **Ownership**: the handler takes the log's write lock (``<root>/lock``) for its whole life.
  Data appends only check that it is not lost (:meth:`WriteHandler.check_ownership`): a ZooKeeper
  connection that is down for less than the session timeout does not stop them (the segment store's
  fencing keeps a stale owner out). The metadata writes (recovery, start, complete) first wait for
  ownership to be confirmed (:meth:`WriteHandler.confirm_ownership`): for the reconnection, at most
  until the session times out.
* **Recovery** (when a writer opens): every in-progress segment left by a dead or fenced writer is
  fenced in the segment store, its real last record is read back, and its metadata is
  completed from it. A ledger that was allocated but never attached to a segment (the writer
  died between the two steps) is deleted.
* **Start** (``doStartLogSegment``): txid sanity against ``/maxtxid``, the next LSSN, a fresh ledger recorded in
  ``/allocation`` first (so a crash cannot leak it), then one versioned multi.
* **Complete** (a roll or a close): seal the ledger, compute the start sequence id, one multi.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol, runtime_checkable

from storage.config import Config
from storage.errors import (
    EndOfStreamError,
    IllegalStateError,
    LedgerNotFoundError,
    MetadataConnectionError,
    MetadataVersionError,
    TransactionIdOutOfOrderError,
    UnexpectedError,
)
from storage.formats.dlsn import DLSN
from storage.formats.entry import decode_entry
from storage.formats.record import INVALID_TXID, MAX_TXID, LogRecordWithDLSN
from storage.formats.segment_metadata import LogSegmentMetadata, compute_start_sequence_id
from storage.log.layout import LogMetadata
from storage.metastore.base import OwnershipLock
from storage.segstore.base import NO_ENTRY, LedgerWriter, SegmentStore

log = logging.getLogger(__name__)

#: Attempts of a segment start or completion whose metadata write the connection to ZooKeeper failed under
#: (each after the reconnection, in the lock's session, and a look at whether the previous one was applied).
METADATA_ATTEMPTS = 5


def now_ms() -> int:
    return int(time.time() * 1000)


class _NotAppliedError(Exception):
    """An attempt to start a segment failed with the connection to ZooKeeper, and left nothing behind."""

    def __init__(self, error: MetadataConnectionError) -> None:
        super().__init__(str(error))
        self.error = error


@runtime_checkable
class _ConfirmableLock(Protocol):
    """A lock that can wait for its ownership to be confirmed (the ZooKeeper lock's ``confirm``)."""

    def confirm(self, what: str) -> None: ...


def last_record_of_ledger(
    segstore: SegmentStore, seg: LogSegmentMetadata, last_entry: int, *, include_control: bool, include_eos: bool = True
) -> LogRecordWithDLSN | None:
    """Scan backwards from ``last_entry`` for the last record of the segment
    (DistributedLog's backward scan of recovery and of the last-record queries).

    Raises:
        CorruptedEntryError, SegmentStoreError.
    """
    batch = 2
    hi = last_entry
    while hi >= 0:
        lo = max(0, hi - batch + 1)
        entries = list(segstore.read_entries(seg.ledger_id, lo, hi))
        for entry_id, data in reversed(entries):
            recs = decode_entry(data, seg.lssn, entry_id, 0, envelope=seg.envelope_entries)
            for r in reversed(recs):
                if r.is_control and not include_control:
                    continue
                if r.is_end_of_stream and not include_eos:
                    continue
                return r
        hi = lo - 1
        batch = min(batch * 2, 16)
    return None


class WriteHandler:
    """Segment lifecycle of one log, under its write lock."""

    def __init__(self, meta: LogMetadata, segstore: SegmentStore, conf: Config, lock: OwnershipLock | None) -> None:
        self.meta = meta
        self.segstore = segstore
        self.conf = conf
        self.lock = lock
        self.last_rollover_ms = now_ms()
        #: The log's segments as this handler last read or changed them (None: read them again). Only the lock's
        #: holder adds or completes segments; others (a purge, a truncation) only remove or mark old completed
        #: ones, which starting and completing do not go by.
        self._known: list[LogSegmentMetadata] | None = None
        #: The version of ``/allocation`` as recovery left it (empty), for the first segment start; None: read it.
        self._allocation: int | None = None

    @property
    def name(self) -> str:
        return self.meta.paths.name

    def check_ownership(self) -> None:
        """Raise ``LockingError`` if the write lock was lost (before every write and transmit).

        A ZooKeeper connection that is merely suspended (down for less than the session timeout) does
        not count as lost: data appends and their acknowledgements go on. That is safe because a
        writer that took the lock over (the session did expire server-side) fenced this writer's
        in-progress ledger during its recovery: no append of ours succeeds after that.

        Raises:
            LockingError: the lock was released, or its session is lost (not retriable).
        """
        if self.lock is not None:
            self.lock.check()

    def confirm_ownership(self, what: str) -> None:
        """Before a metadata write (recovery, start, complete, truncation): return once ownership is
        confirmed. With a ZooKeeper lock whose connection is suspended, this waits for the reconnection
        in the lock's session (a WARNING naming ``what`` after a second), at most until the session
        times out; other locks are only checked. Waiting rather than failing keeps a roll during a
        short ZooKeeper blip from putting the writer into an error state (its ledger already closed,
        its segment not yet completed).

        Raises:
            LockingError: the lock was released, or its session is lost, before or during the wait
            (not retriable).
        """
        lock = self.lock
        if lock is None:
            return
        if isinstance(lock, _ConfirmableLock):
            lock.confirm(what)
        else:
            lock.check()

    # --- recovery -------------------------------------------------------------------------
    def recover(self) -> int:
        """Complete every in-progress segment; returns the log's last txid (-1 if none).

        Raises:
            LockingError, UnexpectedError (unrecoverable corruption), DLError from the stores.
        """
        self.confirm_ownership(f"recovering log {self.name!r}")
        self._cleanup_allocation()
        last_txid = -1
        segments = self.meta.segments()
        recovered = False
        for seg in segments:
            if seg.in_progress:
                seg = self.recover_segment(seg)
                recovered = True
            last_txid = max(last_txid, seg.last_txid)
        if recovered:
            segments = self.meta.segments()
        self._known = segments
        completed = [s for s in segments if not s.in_progress]
        if completed:
            self.last_rollover_ms = max(s.completion_time_ms for s in completed)
        return last_txid

    def recover_segment(self, seg: LogSegmentMetadata) -> LogSegmentMetadata:
        """Fence the segment's ledger and complete its metadata from its real last record."""
        try:
            last_entry = self.segstore.fence(seg.ledger_id)
        except LedgerNotFoundError:
            last_entry = NO_ENTRY
        rec = None
        if last_entry >= 0:
            rec = last_record_of_ledger(self.segstore, seg, last_entry, include_control=True)
        if rec is None:
            last_txid, count, last_dlsn = seg.first_txid, 0, DLSN(seg.lssn, -1, -1)
        else:
            if rec.txid == INVALID_TXID:
                raise UnexpectedError(f"unrecoverable corruption in log segment {seg.lssn} of {self.name!r}")
            last_txid, count, last_dlsn = rec.txid, rec.last_position_within_segment, rec.dlsn
            user = last_record_of_ledger(self.segstore, seg, last_entry, include_control=False, include_eos=True)
            # unlike DistributedLog's recovery: lastDLSN is the last user (or EoS) record, as after a close
            if user is not None:
                last_dlsn = user.dlsn
        log.info("recovering log segment %s of %r: last txid %s, %s records", seg.lssn, self.name, last_txid, count)
        return self._complete(seg, last_txid, count, last_dlsn)

    def _cleanup_allocation(self) -> None:
        alloc = self.meta.allocation()
        if not alloc.value:
            self._allocation = alloc.version
            return
        ledger_id = int(alloc.value)
        if all(s.ledger_id != ledger_id for s in self.meta.segments()):
            self.segstore.delete_ledger(ledger_id)
        self._allocation = self.meta.set_allocation(None, alloc.version)

    # --- start ----------------------------------------------------------------------------
    def start_segment(self, txid: int, *, for_eos: bool = False) -> tuple[LogSegmentMetadata, LedgerWriter]:
        """Start a new in-progress segment with first txid ``txid``; returns it and its ledger.

        Waits for ownership to be confirmed first (:meth:`confirm_ownership`: for the reconnection
        while the connection to ZooKeeper is suspended). If the connection fails under one of its
        metadata writes (outcome unknown), it waits for the reconnection, looks whether the segment
        was started, and if it was not, starts over (up to :data:`METADATA_ATTEMPTS` attempts).

        Raises:
            TransactionIdOutOfOrderError, EndOfStreamError, IllegalStateError, LockingError (the
            lock is lost: not retriable), MetadataVersionError (lost a race: another writer),
            MetadataConnectionError (ZooKeeper failed under every attempt), DLError from the stores.
        """
        what = f"starting a log segment of {self.name!r}"
        attempt = 0
        while True:
            attempt += 1
            self.confirm_ownership(what)
            try:
                return self._try_start_segment(txid, for_eos, what)
            except _NotAppliedError as e:
                if attempt >= METADATA_ATTEMPTS:
                    raise e.error from None
                log.info("%s: the connection to ZooKeeper failed under it (%s); starting over", what, e.error)

    def _try_start_segment(self, txid: int, for_eos: bool, what: str) -> tuple[LogSegmentMetadata, LedgerWriter]:
        """One attempt of :meth:`start_segment`. Raises :class:`_NotAppliedError` when the connection to
        ZooKeeper failed and nothing of the attempt is left behind (another attempt may follow)."""
        if txid < 0 or (txid == MAX_TXID and not for_eos):
            raise TransactionIdOutOfOrderError(f"invalid transaction id {txid}", txid=txid)
        try:
            max_txid = self.meta.max_txid()
            if txid < max_txid.value:
                if max_txid.value == MAX_TXID:
                    raise EndOfStreamError(f"log {self.name!r} was marked end of stream: no more writes")
                raise TransactionIdOutOfOrderError(
                    f"transaction id {txid} is below the log's last transaction id {max_txid.value}",
                    txid=txid,
                    last_txid=max_txid.value,
                )
            max_lssn = self.meta.max_lssn()
            segments = self._segments()
            if segments and segments[-1].lssn != max_lssn.value:  # changed behind this handler: read them
                segments = self.meta.segments()
            if any(s.in_progress for s in segments):
                raise IllegalStateError(f"log {self.name!r} still has an in-progress segment")
            nxt = self._next_lssn(segments)
            if (segments or max_lssn.value != 0) and max_lssn.value + 1 != nxt:
                raise IllegalStateError(
                    f"unexpected max log segment sequence number {max_lssn.value} for {self.name!r}: expected {nxt - 1}"
                )
            known, self._allocation = self._allocation, None
            version = self.meta.allocation().version if known is None else known
            # id first, recorded in /allocation, then the ledger: a crash anywhere leaves no ledger
            # that recovery (_cleanup_allocation) does not know about
            ledger_id = self.segstore.allocate_ledger_id()
            try:
                alloc_version = self.meta.set_allocation(ledger_id, version)
            except MetadataVersionError:
                if known is None:
                    raise
                # changed since recovery (a writer that has not yet learned it lost the log): as when read now
                alloc_version = self.meta.set_allocation(ledger_id, self.meta.allocation().version)
        except MetadataConnectionError as e:
            raise _NotAppliedError(e) from e  # no ledger made yet; a later attempt overwrites /allocation
        ledger = self.segstore.create_ledger(ledger_id)
        try:
            seg = LogSegmentMetadata.new_inprogress(
                path=self.meta.paths.segment(LogSegmentMetadata.inprogress_name(nxt)),
                version=self.conf.get("ledgerMetadataLayoutVersion"),
                ledger_id=ledger.ledger_id,
                first_txid=txid,
                lssn=nxt,
                region_id=0,
            )
            self.meta.start_segment(seg, max_lssn, max_txid, alloc_version)
        except MetadataConnectionError as e:
            return self._settle_start(seg, ledger, e, what)
        except BaseException:
            ledger.abort()
            self.segstore.delete_ledger(ledger.ledger_id)
            raise
        self._known = sorted([*segments, seg], key=LogSegmentMetadata.sort_key)
        return seg, ledger

    def _settle_start(
        self, seg: LogSegmentMetadata, ledger: LedgerWriter, error: MetadataConnectionError, what: str
    ) -> tuple[LogSegmentMetadata, LedgerWriter]:
        """The start's transaction may or may not have been applied: once reconnected in the lock's
        session, look. Applied: the segment and its ledger are ours. Not applied: delete the ledger
        and raise :class:`_NotAppliedError`."""
        try:
            self.confirm_ownership(what)
            applied = any(
                s.in_progress and s.lssn == seg.lssn and s.ledger_id == seg.ledger_id for s in self.meta.segments()
            )
        except BaseException:
            ledger.abort()  # the next owner's recovery settles it (the in-progress segment, or /allocation)
            raise
        if applied:
            log.info("%s: done, although the connection to ZooKeeper failed under it", what)
            return seg, ledger
        ledger.abort()
        self.segstore.delete_ledger(ledger.ledger_id)
        raise _NotAppliedError(error)

    def _next_lssn(self, segments: list[LogSegmentMetadata]) -> int:
        desc = sorted(segments, key=LogSegmentMetadata.sort_key, reverse=True)
        for i, s in enumerate(desc):
            if s.version >= 2:
                return s.lssn + i + 1
        return int(self.conf.get("firstLogsegmentSequenceNumber"))

    # --- complete -------------------------------------------------------------------------
    def complete_segment(self, seg: LogSegmentMetadata, last_txid: int, count: int, last_dlsn: DLSN) -> None:
        """Complete an in-progress segment written by this handler.

        Waits for ownership to be confirmed first (:meth:`confirm_ownership`: for the reconnection
        while the connection to ZooKeeper is suspended). If the connection fails under the
        completing transaction (outcome unknown), it waits for the reconnection, looks whether the
        segment was completed, and if not tries again (up to :data:`METADATA_ATTEMPTS` attempts).

        Raises:
            LockingError (the lock is lost: not retriable), MetadataConnectionError (ZooKeeper
            failed under every attempt), MetadataError.
        """
        what = f"completing log segment {seg.lssn} of {self.name!r}"
        attempt = 0
        while True:
            attempt += 1
            self.confirm_ownership(what)
            try:
                self._complete(seg, last_txid, count, last_dlsn)
                break
            except MetadataConnectionError as e:
                self.confirm_ownership(what)
                if any(
                    not s.in_progress and s.lssn == seg.lssn and s.ledger_id == seg.ledger_id
                    for s in self.meta.segments()
                ):
                    log.info("%s: done, although the connection to ZooKeeper failed under it", what)
                    break
                if attempt >= METADATA_ATTEMPTS:
                    raise
                log.info("%s: the connection to ZooKeeper failed under it (%s); trying again", what, e)
        self.last_rollover_ms = now_ms()

    @property
    def known_segments(self) -> list[LogSegmentMetadata] | None:
        """The log's segments as this handler last read or changed them (None: not known now); right after a
        segment start, with the new in-progress segment last."""
        return self._known

    def _segments(self) -> list[LogSegmentMetadata]:
        """The log's segments: as this handler knows them, else read. Forgets them until a change of this
        handler's succeeds and says what they are now."""
        known, self._known = self._known, None
        return known if known is not None else self.meta.segments()

    def _complete(self, seg: LogSegmentMetadata, last_txid: int, count: int, last_dlsn: DLSN) -> LogSegmentMetadata:
        segments = self._segments()
        start_seq = compute_start_sequence_id(segments, seg)
        done = seg.complete(
            last_txid=last_txid,
            record_count=count,
            last_entry_id=last_dlsn.entry_id,
            last_slot_id=last_dlsn.slot_id,
            completion_time_ms=now_ms(),
            start_sequence_id=start_seq,
            path=self.meta.paths.segment(LogSegmentMetadata.completed_name(seg.lssn)),
        )
        self.meta.complete_segment(seg, done)
        self._known = sorted(
            (done if s.lssn == seg.lssn and s.in_progress else s for s in segments), key=LogSegmentMetadata.sort_key
        )
        return done
