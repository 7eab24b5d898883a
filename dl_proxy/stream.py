"""One stream owned by this proxy (DistributedLog's ``StreamImpl``): its states, its single core writer, its
idempotent producers.

States only move forward: ``INITIALIZING -> ACQUIRING -> INITIALIZED -> CLOSING -> CLOSED`` (or ``-> ERROR``
when acquiring fails). Acquiring takes the log's write lock with no waiting (``lockTimeoutSeconds=0``) and the
proxy's address as the lock owner id, recovers the log (fencing any previous owner) and rebuilds the producers'
state (:mod:`dl_proxy.dedup`); requests that arrive meanwhile wait for it (the queue of DistributedLog's stream
is the waiting request threads). A held lock fails acquiring with ``OwnershipAcquireFailedError`` naming the
holder (the service answers FOUND with its address, or STREAM_UNAVAILABLE if the holder looks like us).

Every write goes through the stream's lock to ONE :class:`storage.AsyncLogWriter`: the lock orders the txids
(non-decreasing millisecond timestamps, never below the log's last txid after a takeover), the producers'
sequence checks and the appends, so the log's order is the order of decisions. A request answers once its
records are durable.

The stream stops at once when it can no longer write: the lock is lost (session expired, or a newer owner
fenced the segment), or its writer failed. It aborts its writer (nothing more can be acknowledged; the next
owner's recovery settles what was in flight) and leaves the proxy's table; requests then get
STREAM_UNAVAILABLE (:class:`StreamUnavailableError`) and look the owner up again.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from dl_proxy.dedup import NO_PRODUCER, DedupTable, Plan, Verdict
from storage.common.conditions import LeanCondition, LeanEvent
from storage.config import Config
from storage.errors import (
    DLError,
    EndOfStreamError,
    InvalidArgumentError,
    LockingError,
    LogNotFoundError,
    LogRecordTooLongError,
    MetadataConnectionError,
    OutOfOrderSequenceError,
    OverCapacityError,
    ProducerFencedError,
    ProducerStateLostError,
    SequenceMismatchError,
    StreamNotReadyError,
    StreamUnavailableError,
)
from storage.formats.dlsn import DLSN
from storage.formats.record import MAX_LOGRECORDSET_SIZE, RECORD_HEADER_SIZE, RECORD_SET, LogRecord
from storage.log.log_manager import LogManager
from storage.log.namespace import Namespace
from storage.log.writer import AsyncLogWriter

log = logging.getLogger(__name__)

#: Room kept in an entry for the producer marker (its fixed part; snapshots use what the records leave).
MARKER_ROOM = 1024
#: How long a request that overtook an earlier one of its producer waits for it before OUT_OF_ORDER_SEQUENCE.
ORDER_WAIT_S = 0.05


class State(enum.Enum):
    INITIALIZING = "initializing"
    ACQUIRING = "acquiring"
    INITIALIZED = "initialized"
    CLOSING = "closing"
    CLOSED = "closed"
    ERROR = "error"


def now_ms() -> int:
    return int(time.time() * 1000)


class Stream:
    """A stream this proxy owns or is acquiring. ``on_gone(stream)`` is called once when it stops."""

    def __init__(self, name: str, ns: Namespace, conf: Config, on_gone: Callable[[Stream], None] | None = None) -> None:
        self.name = name
        self._ns = ns
        self._conf = conf
        self._on_gone = on_gone
        self.state = State.INITIALIZING
        self.error: DLError | None = None
        self._ready = LeanEvent()
        self._lock = threading.Lock()  # sequences writes (and the state changes that stop them)
        self._sequenced = LeanCondition(self._lock)  # a producer's request was stored (or the stream stopped)
        self._dlm: LogManager | None = None
        self._writer: AsyncLogWriter | None = None
        self.table = DedupTable(
            window=int(conf.get("proxyProducerWindow")),
            expiry_ms=int(conf.get("proxyProducerExpirySeconds")) * 1000,
            snapshot_interval=int(conf.get("proxyDedupSnapshotInterval")),
            max_producers=int(conf.get("proxyMaxProducersPerStream")),
        )
        self.acquired_at = 0.0
        self.last_used = time.monotonic()  # the last request of this stream (idle streams are released)
        self._waiting = 0  # requests of this stream inside the service (enter/leave)
        self._waiting_mu = threading.Lock()

    def __repr__(self) -> str:
        return f"Stream({self.name!r}, {self.state.value})"

    # --- acquiring ---------------------------------------------------------------------------------
    def acquire(self, *, create: bool) -> None:
        """Take the log (no waiting), recover it, rebuild its producers. Called once, by the request that made
        the stream; on failure the stream is in ERROR (and gone) with ``error`` set.

        Raises:
            OwnershipAcquireFailedError: another proxy (or writer) holds the lock (``current_owner``).
            LogNotFoundError: no such log and not ``create``. DLError: other failures (stores, bad name).
        """
        with self._lock:
            self.state = State.ACQUIRING
        try:
            overrides: dict[str, object] = {"lockTimeoutSeconds": 0, "createStreamIfNotExists": create}
            if not self._conf.is_set("enableImmediateFlush") and not self._conf.is_set(
                "periodicFlushFrequencyMilliSeconds"
            ):
                overrides["enableImmediateFlush"] = True  # readers see acknowledged writes at once
            dlm = self._ns.open_log(self.name, self._conf.with_overrides(overrides))
            try:
                try:
                    writer = dlm.open_async_writer()
                except LogNotFoundError as e:
                    raise LogNotFoundError(
                        f"log {self.name!r} does not exist (create it, or write with create_if_missing)"
                    ) from e
                try:
                    t0 = time.monotonic()
                    markers = self.table.rebuild(dlm)
                    log.info(
                        "acquired stream %r: %d producers from %d markers in %.3fs",
                        self.name,
                        len(self.table),
                        markers,
                        time.monotonic() - t0,
                    )
                except BaseException:
                    writer.abort()
                    raise
            except BaseException:
                dlm.close()
                raise
        except DLError as e:
            self._finish(State.ERROR, e)
            raise
        except BaseException as e:
            self._finish(State.ERROR, DLError(f"acquiring {self.name!r} failed: {e}"))
            raise
        with self._lock:
            self._dlm, self._writer = dlm, writer
            self.state = State.INITIALIZED
            self.acquired_at = time.monotonic()
        self._ready.set()

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the acquisition (a request queued while ACQUIRING).

        Raises:
            StreamNotReadyError: still acquiring after ``timeout_s``. The acquisition's error. StreamUnavailableError:
            the stream stopped.
        """
        if not self._ready.wait(timeout_s):
            raise StreamNotReadyError(f"stream {self.name!r} is still being acquired")
        if self.error is not None and self.state == State.ERROR:
            raise self.error
        if self.state != State.INITIALIZED:
            raise StreamUnavailableError(f"stream {self.name!r} is {self.state.value} on this proxy")

    def enter(self, limit: int) -> bool:
        """Count a request in; False (not counted) when ``limit`` requests of this stream are in already
        (``limit`` <= 0: no limit)."""
        with self._waiting_mu:
            if 0 < limit <= self._waiting:
                return False
            self._waiting += 1
            self.last_used = time.monotonic()
            return True

    def leave(self) -> None:
        with self._waiting_mu:
            self._waiting -= 1
            self.last_used = time.monotonic()

    def idle_for(self, now: float) -> float:
        """Seconds since the last request of this stream ended (0 while one is in)."""
        with self._waiting_mu:
            return 0.0 if self._waiting else now - self.last_used

    # --- writing -----------------------------------------------------------------------------------
    def _check_serving(self) -> AsyncLogWriter:
        """The writer, if the stream can write (``_lock`` held).

        Raises:
            StreamUnavailableError: closing, closed, or the lock was lost (the stream stops now).
        """
        w = self._writer
        if self.state != State.INITIALIZED or w is None:
            raise StreamUnavailableError(f"stream {self.name!r} is {self.state.value} on this proxy")
        if not w.ownership_held():
            self._stop_locked(LockingError(f"lost the write lock of {self.name!r}"))
            raise StreamUnavailableError(f"stream {self.name!r} lost its owner here (lock lost or fenced)")
        return w

    def write(
        self, payloads: list[bytes], producer: ProducerRequest | None, *, members: int = 0
    ) -> tuple[list[Future[DLSN]], bool, int]:
        """Store ``payloads`` in order as ONE entry (all of them or none). Returns a DLSN future per payload, whether
        they are a duplicate (already stored: the futures give the original DLSNs) and the producer's epoch (-1
        without a producer). Without ``producer``, at-least-once (no dedup).

        ``members > 0``: the one payload is a record set of that many members, stored as one record with the
        RECORD_SET flag; it takes the sequences ``sequence .. sequence+members-1`` (one per member, as if they
        were sent one by one), and its DLSN is its first member's (member ``i`` is at slot + ``i``).

        Raises (nothing stored, unless said):
            OutOfOrderSequenceError, ProducerFencedError (``outcome_unknown`` when its epoch is older than those
            remembered), ProducerStateLostError (outcome unknown), SequenceMismatchError: the idempotent producer's
            answers (see :mod:`dl_proxy.dedup`). StreamUnavailableError: not writable here (the stream stopped).
            OverCapacityError (a writer limit), LogRecordTooLongError (not one entry), EndOfStreamError,
            InvalidArgumentError, DLError.
        """
        with self._lock:
            return self._write_locked(payloads, producer, members)

    def _write_locked(
        self, payloads: list[bytes], producer: ProducerRequest | None, members: int
    ) -> tuple[list[Future[DLSN]], bool, int]:
        deadline = 0.0
        count = members or len(payloads)
        plan: Plan | None = None
        while True:
            w = self._check_serving()
            txid = max(now_ms(), w.last_txid)
            if producer is None:
                break
            p = producer
            plan = self.table.plan(p.producer_id, p.epoch, p.instance, p.sequence, count, p.crc, txid)
            if plan.verdict is not Verdict.OUT_OF_ORDER:
                break
            # the RPC threads serving one connection race to this lock: an earlier request of the producer may be
            # a moment away; wait for it a little before answering OUT_OF_ORDER_SEQUENCE (which costs a resend)
            now = time.monotonic()
            deadline = deadline or now + ORDER_WAIT_S
            if now >= deadline:
                raise OutOfOrderSequenceError(plan.message, expected_sequence=plan.expected)
            self._sequenced.wait(deadline - now)
        if plan is not None:
            _refuse(plan)
            if plan.verdict is Verdict.DUPLICATE:
                assert plan.original is not None
                return [dlsn_at(plan.original, i) for i in range(len(payloads))], True, plan.epoch
        flags = RECORD_SET if members else 0
        recs = [LogRecord(txid, p, flags=flags) for p in payloads]
        used = sum(RECORD_HEADER_SIZE + len(p) for p in payloads) + RECORD_HEADER_SIZE
        if producer is not None and plan is not None:
            marker = self.table.marker(
                producer.producer_id, plan, producer.instance, producer.sequence, count, producer.crc, txid,
                MAX_LOGRECORDSET_SIZE - used,
            )  # fmt: skip
        else:
            marker = NO_PRODUCER
        try:
            futs = w.write_marked(marker, recs)
        except (
            OverCapacityError,
            LogRecordTooLongError,
            EndOfStreamError,
            InvalidArgumentError,
            MetadataConnectionError,
        ):
            raise  # nothing of this request was written; the writer is fine (a roll that could not reach ZooKeeper
            # is tried again by the next write)
        except DLError as e:
            self._stop_locked(e)
            raise StreamUnavailableError(f"stream {self.name!r} stopped: {e}") from e
        if producer is not None and plan is not None:
            self.table.stored(
                producer.producer_id, plan, producer.instance, producer.sequence, count, producer.crc, futs[0], txid,
                marker, used,
            )  # fmt: skip
            self._sequenced.notify_all()
        for f in futs:
            f.add_done_callback(self._on_settled)
        return futs, False, -1 if plan is None else plan.epoch

    def _on_settled(self, f: Future[DLSN]) -> None:
        exc = f.exception()
        if exc is not None and self.state == State.INITIALIZED:
            # a failed append: the writer is in error (fenced, store failure); stop now, the next owner recovers
            threading.Thread(target=self.stop, args=(exc,), daemon=True, name=f"dl-proxy-stop-{self.name}").start()

    def heartbeat(self, *, to_readers: bool) -> DLSN:
        """Check ownership; with ``to_readers`` commit (a control record) so tailing readers advance.

        Raises:
            StreamUnavailableError, DLError.
        """
        with self._lock:
            w = self._check_serving()
        if not to_readers:
            return DLSN.INVALID
        try:
            return w.flush().result()
        except DLError as e:
            self.stop(e)
            raise StreamUnavailableError(f"stream {self.name!r} stopped: {e}") from e

    def truncate(self, dlsn: DLSN) -> bool:
        """Truncate the log before ``dlsn``.

        Raises:
            StreamUnavailableError, InvalidArgumentError, DLError.
        """
        with self._lock:
            w = self._check_serving()
        return bool(w.truncate(dlsn).result())

    def is_serving(self) -> bool:
        """INITIALIZED and still holding the lock."""
        w = self._writer
        return self.state == State.INITIALIZED and w is not None and w.ownership_held()

    # --- stopping ----------------------------------------------------------------------------------
    def release(self) -> None:
        """Close gracefully: commit, complete the segment, release the lock (another proxy may take it at once).
        Requests arriving meanwhile get STREAM_UNAVAILABLE. Idempotent; never raises."""
        with self._lock:
            if self.state in (State.CLOSING, State.CLOSED, State.ERROR):
                return
            self.state = State.CLOSING
            self._sequenced.notify_all()
            w = self._writer
        if w is not None:
            try:
                w.close()
            except DLError as e:
                log.warning("releasing %r: %s", self.name, e)
        self._finish(State.CLOSED, None)

    def delete(self) -> None:
        """Delete the log while still holding its write lock (so no other proxy or writer takes it between the
        release and the delete), then stop. Requests arriving meanwhile get STREAM_UNAVAILABLE; writes in flight
        fail with an unknown outcome (the log is gone with them).

        Raises:
            StreamUnavailableError: not serving here. LogNotFoundError, MetadataError: what deleting raises (the
            stream stops all the same).
        """
        with self._lock:
            self._check_serving()
            self.state = State.CLOSING
            self._sequenced.notify_all()
            w = self._writer
        try:
            self._ns.delete_log(self.name)
        finally:
            if w is not None:
                try:
                    w.abort()
                except DLError as e:
                    log.info("aborting the writer of deleted %r: %s", self.name, e)
            self._finish(State.CLOSED, None)

    def stop(self, cause: BaseException | None = None) -> None:
        """Stop at once (lock lost, writer failed): abort the writer, acknowledge nothing more. Idempotent."""
        with self._lock:
            self._stop_locked(cause)

    def _stop_locked(self, cause: BaseException | None) -> None:
        if self.state in (State.CLOSING, State.CLOSED, State.ERROR):
            return
        log.warning("stream %r stops on this proxy: %s", self.name, cause)
        self.state = State.CLOSING
        self._sequenced.notify_all()
        w = self._writer
        if w is not None:
            try:
                w.abort()
            except DLError as e:
                log.info("aborting the writer of %r: %s", self.name, e)
        self._finish(State.CLOSED, None, locked=True)

    def _finish(self, state: State, error: DLError | None, *, locked: bool = False) -> None:
        if not locked:
            with self._lock:
                self._finish(state, error, locked=True)
            return
        first = self.state not in (State.CLOSED, State.ERROR)
        self.state = state
        if error is not None:
            self.error = error
        dlm, self._dlm, self._writer = self._dlm, None, None
        self._ready.set()
        if dlm is not None:
            try:
                dlm.close()
            except DLError as e:
                log.info("closing the log manager of %r: %s", self.name, e)
        if first and self._on_gone is not None:
            self._on_gone(self)


@dataclass(frozen=True)
class ProducerRequest:
    """The idempotent producer's part of a request: its id, epoch (None: the instance asks for one), instance
    token, first sequence and the CRC32C of its payloads."""

    producer_id: str
    epoch: int | None
    instance: str
    sequence: int
    crc: int


def _refuse(plan: Plan) -> None:
    """Raise the error of a plan that stores nothing and answers no duplicate.

    Raises:
        ProducerFencedError, ProducerStateLostError, SequenceMismatchError, OutOfOrderSequenceError.
    """
    v = plan.verdict
    if v is Verdict.FENCED:
        raise ProducerFencedError(plan.message, epoch=plan.epoch, outcome_unknown=plan.outcome_unknown)
    if v is Verdict.STATE_LOST:
        raise ProducerStateLostError(plan.message, epoch=plan.epoch)
    if v is Verdict.MISMATCH:
        raise SequenceMismatchError(plan.message)
    if v is Verdict.OUT_OF_ORDER:
        raise OutOfOrderSequenceError(plan.message, expected_sequence=plan.expected)


def dlsn_at(first: Future[DLSN], offset: int) -> Future[DLSN]:
    """The DLSN ``offset`` records after ``first`` in the same entry (a future resolving with it)."""
    if offset == 0:
        return first
    out: Future[DLSN] = Future()

    def copy(f: Future[DLSN]) -> None:
        exc = f.exception()
        if exc is not None:
            out.set_exception(exc)
        else:
            d = f.result()
            out.set_result(DLSN(d.lssn, d.entry_id, d.slot_id + offset))

    first.add_done_callback(copy)
    return out
