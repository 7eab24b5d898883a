"""What every ledger writer does the same way: a queue of entries taken by one background thread,
the writer's life cycle (open, closing, closed, aborted), a sticky first error, and reports of
settled entries to futures and the ack listener in entry-id order.

:class:`QueuedLedgerWriter` is that front; a store's writer supplies the thread body (how queued
entries become durable), what is in flight (for :meth:`~QueuedLedgerWriter.abort`) and sealing.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from typing import ClassVar, cast

from storage.common.conditions import LeanCondition
from storage.common.futures import FutureGroup
from storage.common.workers import WorkerPool
from storage.errors import AlreadyClosedError, DLError, InvalidArgumentError, TransmitError, WriteCancelledError
from storage.segstore.base import NO_ENTRY, AckListener, LedgerWriter

#: Entries taken from the queue together: each (entry id, payload) and its future (None: append_nowait).
Batch = tuple[list[tuple[int, bytes]], list[Future[int] | None]]

OPEN, CLOSING, CLOSED, ABORTED = "open", "closing", "closed", "aborted"

#: Seconds a writer's background thread stays with nothing queued or in flight before it exits; the next append
#: starts a new one. An open writer that is not written to then holds no thread.
IDLE_THREAD_EXIT_S = 2.0

#: Largest payload of one entry (also a sanity bound when parsing frame lengths).
MAX_ENTRY_SIZE = 64 * 1024 * 1024

_log = logging.getLogger(__name__)


def entry_bytes(data: object) -> bytes:
    """``data`` as bytes, checked (no copy for bytes).

    Raises:
        InvalidArgumentError: not bytes-like, or larger than ``MAX_ENTRY_SIZE``.
    """
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"entry data must be bytes, not {type(data).__name__}")
        data = bytes(data)
    if len(data) > MAX_ENTRY_SIZE:
        raise InvalidArgumentError(f"entry of {len(data)} bytes exceeds {MAX_ENTRY_SIZE}")
    return data


def copy_error(err: DLError) -> DLError:
    """A fresh exception like ``err`` (one instance per future keeps tracebacks apart), with the
    same ``retriable`` flag and cause."""
    fresh = type(err)(str(err), retriable=err.retriable)
    fresh.__cause__ = err.__cause__
    return fresh


def report_batch(
    ledger_id: int,
    entries: list[tuple[int, bytes]],
    futs: list[Future[int] | None],
    exc: DLError | None,
    listener: AckListener | None,
    futures: FutureGroup,
) -> None:
    """Settle ``entries`` in order: resolve each run of futures at once (to its entry ids, or
    ``exc``), and tell ``listener`` once per run of ``None`` futures (``append_nowait`` entries).
    The caller serializes reports."""
    n = len(futs)
    i = 0
    while i < n:
        j = i + 1
        if futs[i] is None:
            while j < n and futs[j] is None:
                j += 1
            assert listener is not None
            try:
                listener(j - i, entries[j - 1][0], exc)
            except Exception:  # a listener must not raise; never let it stop the writer
                _log.exception("ack listener of ledger %s failed", ledger_id)
        else:
            while j < n and futs[j] is not None:
                j += 1
            run = cast("list[Future[int]]", futs[i:j])
            if exc is None:
                futures.resolve(run, [entry_id for entry_id, _ in entries[i:j]])
            else:
                futures.resolve(run, exc=exc)
        i = j


class _PooledTurn:
    """What ``_thread`` holds while a writer's turn runs on a pool thread (or waits for one): ``join`` waits for the
    turn to end; ``thread`` is the pool thread once the turn started."""

    __slots__ = ("done", "thread")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def join(self) -> None:
        self.done.wait()


class QueuedLedgerWriter(LedgerWriter):
    """The front every ledger writer shares; the store's subclass writes what is queued.

    Subclasses implement :meth:`_run` (the background thread: wait with :meth:`_wait_for_work`,
    take ``_queue``/``_queue_futs`` under ``_cond``, make them durable, set ``_lac``, report with
    :meth:`_report` under ``_report_lock``; return when :meth:`_wait_for_work` says so),
    :meth:`_busy` (anything in flight), :meth:`_take_in_flight` (for abort) and :meth:`_seal`.

    The thread exists only while there is work: the first append starts it, and it exits once it
    has had nothing queued or in flight for ``IDLE_THREAD_EXIT_S`` while the writer is open (the
    next append starts another), or once the writer is closed or aborted and nothing is left. A
    store whose writers set ``_pool`` runs that body as a *turn* on a thread of the shared pool
    instead: no thread is started in the path of an append, and the turn ends as soon as nothing
    is queued or in flight (the pool's thread goes on to other writers' turns).

    Reports are serialized by ``_report_lock`` (taken before ``_cond``): whoever takes a batch
    out of flight under ``_cond`` -- the thread when its write finished, or :meth:`abort` --
    reports it before releasing ``_report_lock``, so reports never overtake each other and no
    entry is reported twice. The thread waits on ``_cond`` and is woken when the queue stops
    being empty or the state changes.
    """

    _thread_name = "ledger-writer"
    #: Threads shared by the writers of a store (None: a thread of its own per writer, see the class docstring).
    _pool: ClassVar[WorkerPool | None] = None

    def __init__(self, ledger_id: int) -> None:
        self._futures = FutureGroup()  # cheap futures resolved a batch at a time
        self._ledger_id = ledger_id
        self._cond = LeanCondition(threading.Lock())
        self._report_lock = threading.RLock()  # re-entrant: a listener may call abort()
        self._queue: list[tuple[int, bytes]] = []
        self._queue_futs: list[Future[int] | None] = []
        #: Whether an entry queued must be durable before it is acknowledged (``append_nowait(durable=False)``
        #: queues entries that need not be; a store may then skip the batch's durability barrier).
        self._queue_durable = False
        self._listener: AckListener | None = None
        self._state = OPEN
        self._error: DLError | None = None  # sticky: every later append fails like this
        self._next_id = 0
        self._lac = NO_ENTRY
        self._bytes = 0
        self._close_result: int | DLError | None = None
        self._thread: threading.Thread | _PooledTurn | None = None
        #: Durability barriers issued for appends so far (fdatasync calls, RADOS operations).
        self.sync_count = 0

    # --- hooks ----------------------------------------------------------------------------------
    @abstractmethod
    def _run(self) -> None:
        """The background thread's body (see the class docstring)."""

    @abstractmethod
    def _busy(self) -> bool:
        """Whether a batch is in flight (``_cond`` held)."""

    @abstractmethod
    def _take_in_flight(self) -> list[Batch]:
        """Take every batch in flight, oldest first, for :meth:`abort` to report (``_cond`` held)."""

    @abstractmethod
    def _seal(self) -> int | DLError:
        """Seal the ledger as closed, once, with ``_cond`` held and nothing queued or in flight;
        the last entry id, or the error to raise (``_error`` if one is set)."""

    def _release(self) -> None:
        """Free what the writer holds, after :meth:`abort` stopped the thread (``_cond`` held)."""

    # --- LedgerWriter ---------------------------------------------------------------------------
    @property
    def ledger_id(self) -> int:
        return self._ledger_id

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def bytes_written(self) -> int:
        return self._bytes

    def append_async(self, data: bytes) -> Future[int]:
        """Queue ``data`` as the next entry (see :meth:`LedgerWriter.append_async`).

        Raises:
            AlreadyClosedError: the writer was closed or aborted.
            InvalidArgumentError: ``data`` is not bytes-like or exceeds ``MAX_ENTRY_SIZE``.
        """
        payload = entry_bytes(data)
        fut: Future[int] = self._futures.new()
        with self._cond:
            if self._state != OPEN:
                raise AlreadyClosedError(f"writer of ledger {self._ledger_id} is {self._state}")
            if self._error is not None:
                fut.set_exception(copy_error(self._error))
                return fut
            self._enqueue(payload, fut)
            self._bytes += len(payload)
        return fut

    def set_ack_listener(self, listener: AckListener) -> None:
        """See :meth:`LedgerWriter.set_ack_listener`: the listener is called once per run of
        :meth:`append_nowait` entries in each group commit."""
        self._listener = listener

    def append_nowait(self, data: bytes, *, durable: bool = True) -> None:
        """Queue ``data`` as the next entry; the ack listener learns its outcome (see
        :meth:`LedgerWriter.append_nowait`, also for ``durable``). If the writer already failed, the entry is
        queued anyway and reported failed, in order, by the thread.

        Raises:
            AlreadyClosedError: the writer was closed or aborted.
            InvalidArgumentError: no listener was set, or ``data`` is not bytes-like or
                exceeds ``MAX_ENTRY_SIZE``.
        """
        payload = data if type(data) is bytes and len(data) <= MAX_ENTRY_SIZE else entry_bytes(data)
        if self._listener is None:
            raise InvalidArgumentError("append_nowait needs an ack listener (set_ack_listener)")
        with self._cond:  # _enqueue inlined: this runs once per entry
            if self._state != OPEN:
                raise AlreadyClosedError(f"writer of ledger {self._ledger_id} is {self._state}")
            if self._thread is None:
                self._start_thread()
            queue = self._queue
            queue.append((self._next_id, payload))
            self._queue_futs.append(None)
            self._next_id += 1
            if durable:
                self._queue_durable = True
            if self._error is None:
                self._bytes += len(payload)
            if len(queue) == 1:
                self._cond.notify_all()

    def _enqueue(self, payload: bytes, fut: Future[int] | None) -> None:
        """Queue one entry (``_cond`` held, state open) and wake the thread (start one if there is none)."""
        if self._thread is None:
            self._start_thread()
        queue = self._queue
        queue.append((self._next_id, payload))
        self._queue_futs.append(fut)
        self._next_id += 1
        self._queue_durable = True
        if len(queue) == 1:  # the thread waits on an empty queue (or on its writes)
            self._cond.notify_all()

    def _start_thread(self) -> None:
        """Start the background thread, or submit a turn to the pool (``_cond`` held; the body waits for ``_cond``
        before looking at the queue). When no thread can be started, nothing changes and the error propagates: the
        next append tries again."""
        pool = self._pool
        if pool is not None:
            turn = _PooledTurn()

            def run_turn() -> None:
                turn.thread = threading.current_thread()
                try:
                    self._run()
                finally:
                    turn.done.set()

            pool.submit(run_turn)
            self._thread = turn
            return
        thread = threading.Thread(target=self._run, name=f"{self._thread_name}-{self._ledger_id}", daemon=True)
        thread.start()
        self._thread = thread

    def close(self) -> int:
        """Wait for outstanding appends, seal the ledger as closed, return its last entry id.

        A second call returns the same result.

        Raises:
            WriterFencedError: the ledger was fenced before it could be sealed.
            SegmentStoreError: an append or the sealing failed (retriable where the store says).
            AlreadyClosedError: the writer was aborted.
        """
        with self._cond:
            if self._state == ABORTED:
                raise AlreadyClosedError(f"writer of ledger {self._ledger_id} was aborted")
            if self._state == OPEN:
                self._state = CLOSING
                self._cond.notify_all()
            while self._close_result is None and (self._queue or self._busy()):
                self._cond.wait()
            if self._state == ABORTED:
                raise AlreadyClosedError(f"writer of ledger {self._ledger_id} was aborted")
            if self._close_result is None:
                self._close_result = self._seal()
                self._state = CLOSED
            result = self._close_result
        self._join()
        if isinstance(result, DLError):
            raise copy_error(result)
        return result

    def abort(self) -> None:
        """Stop without sealing: every pending append fails at once. One still queued was never sent:
        ``WriteCancelledError`` (certainly not written). One in a batch being written may still become
        durable: ``TransmitError`` (outcome unknown; recovery decides). Waits for the thread, then
        releases what the writer holds. Idempotent; a no-op after close."""
        with self._report_lock:
            with self._cond:
                if self._state in (CLOSED, ABORTED):
                    return
                self._state = ABORTED
                in_flight = [b for b in self._take_in_flight() if b[0]]
                queued = [(self._queue, self._queue_futs)] if self._queue else []
                self._queue = []
                self._queue_futs = []
                self._cond.notify_all()
            unknown = TransmitError(
                f"writer of ledger {self._ledger_id} aborted while the append was in flight: its outcome is "
                "unknown until the log is recovered",
                retriable=True,
            )
            cancelled = WriteCancelledError(f"writer of ledger {self._ledger_id} aborted")
            for entries, futs in in_flight:  # in entry order: in-flight batches come before the queue
                self._report(entries, futs, unknown)
            for entries, futs in queued:
                self._report(entries, futs, cancelled)
        self._join()
        with self._cond:
            self._release()

    # --- for the subclasses ---------------------------------------------------------------------
    def _wait_for_work(self, ready: Callable[[], bool]) -> bool:
        """For :meth:`_run`, with ``_cond`` held: wait until ``ready()`` (then True: go on working) or until
        the thread is to exit (then False: return at once, touching nothing).

        The thread exits when the writer was aborted; when it is closing or closed and nothing is queued or in
        flight (``close`` waits for that); and when the writer is open but has had nothing queued or in flight
        for ``IDLE_THREAD_EXIT_S``: then ``_thread`` is cleared here, under ``_cond``, so the next append starts
        a new thread. Appends queue under ``_cond`` too, so an entry is either seen here or finds no thread."""
        idle_until: float | None = None
        while True:
            if self._state == ABORTED:
                return False
            if ready():
                return True
            if self._queue or self._busy():  # work that is not ready yet (e.g. a write in flight)
                idle_until = None
                self._cond.wait()
                continue
            if self._state != OPEN:
                self._cond.notify_all()
                return False
            if self._pool is not None:  # a turn ends when the work does; the pool's thread does the idle waiting
                self._thread = None
                return False
            now = time.monotonic()
            if idle_until is None:
                idle_until = now + IDLE_THREAD_EXIT_S
            elif now >= idle_until:
                self._thread = None
                return False
            self._cond.wait(idle_until - now)

    def _join(self) -> None:
        """Wait for the thread to end (after the state left open: no new one starts then). A no-op without a
        thread, and on the thread itself (a listener that closes or aborts the writer)."""
        thread = self._thread
        current = threading.current_thread()
        if thread is not None and (thread.thread if isinstance(thread, _PooledTurn) else thread) is not current:
            thread.join()

    def _report(self, entries: list[tuple[int, bytes]], futs: list[Future[int] | None], exc: DLError | None) -> None:
        """Resolve futures / call the listener for ``entries``, in order (``_report_lock`` held)."""
        report_batch(self._ledger_id, entries, futs, exc, self._listener, self._futures)
