"""The segment store interface: ledgers of entries, as BookKeeper offers them to DistributedLog.

A *ledger* holds the data of one log segment: an append-only sequence of opaque entries with
ids 0, 1, 2, ... Exactly one :class:`LedgerWriter` appends to a ledger. Readers see entries up
to the *last add confirmed* (LAC): the writer piggy-backs, on every entry it appends, the id of
the last entry that was durable and acknowledged before it (BookKeeper's rule), so an entry
becomes visible only when a later entry is appended or the ledger is closed or fenced.

Contract of every implementation (local files, Ceph RADOS):

* ``append`` resolves only once the entry is durable (fsync or a write quorum).
* Every entry carries a checksum verified on every read: a damaged entry raises
  :class:`~storage.errors.CorruptedEntryError`, never wrong data.
* ``fence`` (BookKeeper's "open with recovery") is linearizable with appends across
  processes: once it returns, no append of the old writer can succeed, and every append that
  was acknowledged before is readable (``fence`` returns the last entry id, which is >= the id
  of every acknowledged entry).
* Readers never see entries beyond the LAC of an open ledger; after close/fence they see
  everything up to the last entry id.

Writers and readers only use this interface, so the local and the replicated (RADOS) stores are
interchangeable under them.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

_S = TypeVar("_S", bound="SegmentStore")

#: LAC of a ledger that has no confirmed entry yet.
NO_ENTRY = -1

#: ``listener(count, last_entry_id, error)``: see :meth:`LedgerWriter.set_ack_listener`.
AckListener = Callable[[int, int, BaseException | None], None]


@dataclass(frozen=True)
class LedgerInfo:
    """What is known of a ledger without reading its entries.

    ``last_entry_id`` is the id of the last entry for a closed or fenced ledger, else the LAC.
    """

    ledger_id: int
    closed: bool
    fenced: bool
    last_entry_id: int
    length_bytes: int


class LedgerWriter(ABC):
    """The single writer of one ledger."""

    @property
    @abstractmethod
    def ledger_id(self) -> int:
        """The ledger id (unique in the store, never reused)."""

    @abstractmethod
    def append_async(self, data: bytes) -> Future[int]:
        """Queue ``data`` as the next entry; the future resolves to its entry id once durable.

        Entry ids are assigned in call order. Appends are group-committed: one durability
        barrier covers every entry queued meanwhile. Futures resolve in entry-id order.
        The future fails with ``WriterFencedError`` if the ledger was fenced, or
        ``SegmentStoreError`` on I/O failure; after a failure every later append fails too.

        Raises:
            AlreadyClosedError: the writer was closed.
        """

    def append(self, data: bytes) -> int:
        """Append ``data`` and wait until it is durable; returns its entry id.

        Raises:
            WriterFencedError, SegmentStoreError, AlreadyClosedError.
        """
        return self.append_async(data).result()

    # --- acknowledgement by listener (optional fast path) ----------------------------------
    # A writer that appends many small entries pays for one future and one callback per
    # entry. With a listener it is told once per durability barrier instead. The defaults
    # below are built on ``append_async`` so every implementation supports the protocol;
    # an implementation may override both methods (the local one reports per group commit).

    def set_ack_listener(self, listener: AckListener) -> None:
        """Set the listener told of the outcome of every :meth:`append_nowait` (set it once,
        before the first such append).

        ``listener(count, last_entry_id, error)`` reports that the next ``count`` entries
        appended with :meth:`append_nowait` (in call order) are settled: durable, with ids
        ``last_entry_id - count + 1 .. last_entry_id``, when ``error`` is None; else failed
        with ``error`` (as :meth:`append_async`'s future would fail; ``last_entry_id`` is then
        ``NO_ENTRY`` if unknown). Every such entry is reported exactly once, reports arrive
        in entry-id order and never concurrently. The listener runs on a background thread
        (or, for entries failed by :meth:`abort`, on the aborting thread); it must not block
        on the ledger writer and must not raise.
        """
        self.__listener = listener
        self.__pending: deque[Future[int]] = deque()
        self.__report_lock = threading.RLock()

    def append_nowait(self, data: bytes, *, durable: bool = True) -> None:
        """Queue ``data`` as the next entry; its outcome goes to the ack listener.

        ``durable=False`` allows the store to acknowledge the entry once it is written, before it is durable: the
        next durable append, or sealing the ledger, makes it durable along with the entries after it. A crash may
        lose it (and only it and later such entries), so it is for an entry whose loss loses nothing, such as a
        commit record that only publishes entries already durable. The LAC never covers such an entry before it is
        durable. A store with no separate durability barrier (each append durable when acknowledged) ignores it.

        Raises:
            AlreadyClosedError: the writer was closed.
            InvalidArgumentError: no ack listener was set, or bad ``data``.
        """
        try:
            listener = self.__listener
        except AttributeError:
            from storage.errors import InvalidArgumentError

            raise InvalidArgumentError("append_nowait needs an ack listener (set_ack_listener)") from None
        fut = self.append_async(data)
        with self.__report_lock:
            self.__pending.append(fut)
        fut.add_done_callback(lambda _f: self.__report(listener))

    def __report(self, listener: AckListener) -> None:
        # Futures may finish on different threads; report the finished head of the queue in
        # order, one report at a time.
        with self.__report_lock:
            pending = self.__pending
            while pending and pending[0].done():
                f = pending.popleft()
                exc = f.exception()
                listener(1, NO_ENTRY if exc is not None else f.result(), exc)

    @property
    @abstractmethod
    def last_add_confirmed(self) -> int:
        """The id of the last entry acknowledged as durable, or ``NO_ENTRY``."""

    @property
    @abstractmethod
    def bytes_written(self) -> int:
        """Payload bytes appended so far (the size the rolling policy looks at)."""

    @abstractmethod
    def close(self) -> int:
        """Wait for outstanding appends, seal the ledger, return its last entry id.

        After close every entry is visible to readers and no append can succeed.

        Raises:
            WriterFencedError: the ledger was fenced before it could be sealed.
            SegmentStoreError: I/O failure.
        """

    @abstractmethod
    def abort(self) -> None:
        """Stop without sealing: pending appends fail with ``WriteCancelledError``."""


class SegmentStore(ABC):
    """A store of ledgers. Safe to use from several threads and several processes."""

    @abstractmethod
    def allocate_ledger_id(self) -> int:
        """Reserve a fresh ledger id (never handed out again) without creating the ledger, so that
        a caller can record the id in its metadata first and a crash leaves no unrecorded ledger.

        Raises:
            SegmentStoreError: I/O failure.
        """

    @abstractmethod
    def create_ledger(self, ledger_id: int | None = None) -> LedgerWriter:
        """Create a new, empty ledger with ``ledger_id`` (from :meth:`allocate_ledger_id`) or a
        fresh id, and return its writer.

        Raises:
            SegmentStoreError: I/O failure, or a ledger with that id exists.
        """

    @abstractmethod
    def fence(self, ledger_id: int) -> int:
        """Fence the ledger (recovery open): returns its last entry id (``NO_ENTRY`` if empty).

        Any torn entry at the tail (a writer killed mid-append) is discarded. Idempotent;
        on a closed ledger it returns the closed last entry id.

        Raises:
            LedgerNotFoundError, SegmentStoreError.
        """

    @abstractmethod
    def info(self, ledger_id: int) -> LedgerInfo:
        """State and LAC (or last entry id) of a ledger.

        Raises:
            LedgerNotFoundError, SegmentStoreError.
        """

    def last_add_confirmed(self, ledger_id: int) -> int:
        """The LAC of an open ledger, or the last entry id of a closed/fenced one.

        Raises:
            LedgerNotFoundError, SegmentStoreError.
        """
        return self.info(ledger_id).last_entry_id

    @abstractmethod
    def read_entries(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Yield ``(entry_id, data)`` for ``first..last`` inclusive, in order.

        ``last`` must not exceed the LAC (or the last entry id of a closed ledger).

        Raises:
            CorruptedEntryError: an entry failed its checksum (raised at that entry).
            InvalidArgumentError: the range is beyond what readers may see.
            LedgerNotFoundError, SegmentStoreError.
        """

    def read_entry_buffers(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes | memoryview]]:
        """As :meth:`read_entries` (same checks and errors), for bulk decoders: an entry may be a
        ``memoryview`` into a larger read buffer instead of its own ``bytes`` (no copy per entry). The
        default is :meth:`read_entries`."""
        return self.read_entries(ledger_id, first, last)

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        """Read one entry (see :meth:`read_entries`)."""
        for _, data in self.read_entries(ledger_id, entry_id, entry_id):
            return data
        raise AssertionError("read_entries yielded nothing")  # pragma: no cover

    @abstractmethod
    def wait_for_lac(self, ledger_id: int, known_lac: int, timeout_s: float) -> int:
        """Long-poll: return the LAC as soon as it exceeds ``known_lac``, or the current
        value after ``timeout_s``. Returns at once if the ledger is closed or fenced.

        Raises:
            LedgerNotFoundError, SegmentStoreError.
        """

    @abstractmethod
    def delete_ledger(self, ledger_id: int) -> None:
        """Delete a ledger and its data. Deleting a missing ledger is not an error.

        Raises:
            SegmentStoreError: I/O failure.
        """

    @abstractmethod
    def list_ledgers(self) -> list[int]:
        """Ids of every ledger in the store (for sweeps and audits)."""

    @abstractmethod
    def watch(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(ledger_id)`` from a background thread whenever a ledger gains
        entries or changes state (in any process). Returns a function that cancels the watch."""

    @abstractmethod
    def close(self) -> None:
        """Release resources (background threads, file handles)."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_id(value: int, what: str) -> int:
    """``value`` if it is a non-negative int (a ledger or entry id).

    Raises:
        InvalidArgumentError: anything else, naming ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        from storage.errors import InvalidArgumentError

        raise InvalidArgumentError(f"{what} must be a non-negative int, not {value!r}")
    return value
