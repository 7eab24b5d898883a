"""The public readers: :class:`LogReader` (sync, ``BKSyncLogReader``) and
:class:`AsyncLogReader` (``BKAsyncLogReader``), both thin shells around a :class:`Cursor`.

* ``LogReader.read_next(non_blocking)``: non-blocking returns what is readable now or None;
  blocking also waits up to ``readAheadWaitTime`` for new data at the tail, then returns None
  (DistributedLog's semantics: "blocking" means "caught up", not "forever").
* ``AsyncLogReader.read_next()`` resolves when a record arrives (it may wait forever);
  ``read_bulk(n, timeout_s)`` resolves with 1..n records: with a timeout it waits up to that
  long for n, then returns what it has once it has at least one.
* Requests are served in FIFO order by one thread per async reader. ``close()`` fails every
  pending and later read with ``ReadCancelledError``. End of stream is sticky.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future

from storage.errors import AlreadyClosedError, DLError, IdleReaderError, InvalidArgumentError, ReadCancelledError
from storage.formats.record import LogRecordWithDLSN
from storage.log.cursor import Cursor


class LogReader:
    """Synchronous reader (not thread-safe: one thread per reader)."""

    def __init__(self, cursor: Cursor, wait_s: float) -> None:
        self._c = cursor
        self._wait_s = wait_s
        self._closed = False

    def read_next(self, non_blocking: bool = False) -> LogRecordWithDLSN | None:
        """The next record, or None if none is readable (after a short wait when blocking).

        Raises:
            EndOfStreamError:
            AlreadyTruncatedTransactionError:
            LogNotFoundError:
            CorruptedEntryError:
            ReadCancelledError: closed.
        """
        recs = self.read_bulk(1, non_blocking=non_blocking)
        return recs[0] if recs else None

    def read_bulk(self, n: int, non_blocking: bool = False) -> list[LogRecordWithDLSN]:
        """Up to ``n`` records readable now (see :meth:`read_next`).

        Raises:
            InvalidArgumentError: ``n`` < 1. Otherwise as :meth:`read_next`.
        """
        self._check(n)
        recs = self._c.poll(n)
        if recs or non_blocking:
            return recs
        deadline = time.monotonic() + self._wait_s
        while not recs:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._c.wait(left)
            recs = self._c.poll(n)
        return recs

    def _check(self, n: int) -> None:
        if self._closed:
            raise ReadCancelledError("reader is closed")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InvalidArgumentError(f"number of records must be a positive int, got {n!r}")

    @property
    def position(self) -> object:
        return self._c.position

    def close(self) -> None:
        """Close the reader; later reads raise ``ReadCancelledError``."""
        if not self._closed:
            self._closed = True
            self._c.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Request:
    def __init__(self, n: int, timeout_s: float | None, single: bool) -> None:
        self.n = n
        self.timeout_s = timeout_s
        self.single = single
        self.future: Future = Future()  # type: ignore[type-arg]


class AsyncLogReader:
    """Asynchronous reader: every read returns a future, served FIFO by one thread."""

    def __init__(self, cursor: Cursor, *, poll_s: float, idle_error_ms: int) -> None:
        self._c = cursor
        self._poll_s = poll_s
        self._idle_error_s = idle_error_ms / 1000.0 if 0 < idle_error_ms < 2**31 - 1 else None
        self._q: queue.Queue[_Request | None] = queue.Queue()
        self._closed = threading.Event()
        self._error: DLError | None = None
        self._thread = threading.Thread(target=self._serve, name="dl-async-reader", daemon=True)
        self._thread.start()

    def read_next(self) -> Future[LogRecordWithDLSN]:
        """A future of the next record (fails with the reader's error, e.g. EndOfStreamError)."""
        return self._submit(_Request(1, None, True))

    def read_bulk(self, n: int, timeout_s: float | None = None) -> Future[list[LogRecordWithDLSN]]:
        """A future of 1..n records (see the module docstring).

        Raises:
            InvalidArgumentError: ``n`` < 1 or a negative timeout.
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InvalidArgumentError(f"number of records must be a positive int, got {n!r}")
        if timeout_s is not None and timeout_s < 0:
            raise InvalidArgumentError(f"timeout must be >= 0, got {timeout_s!r}")
        return self._submit(_Request(n, timeout_s, False))

    def _submit(self, req: _Request) -> Future:  # type: ignore[type-arg]
        if self._closed.is_set():
            req.future.set_exception(ReadCancelledError("reader is closed"))
        else:
            self._q.put(req)
        return req.future

    def close(self) -> None:
        """Close the reader: pending and later reads fail with ``ReadCancelledError``."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._q.put(None)
        self._c.close()
        self._thread.join(timeout=10)
        while True:
            try:
                req = self._q.get_nowait()
            except queue.Empty:
                break
            if req is not None and not req.future.done():
                req.future.set_exception(ReadCancelledError("reader is closed"))

    def __enter__(self) -> AsyncLogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- serving thread ---------------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            req = self._q.get()
            if req is None or self._closed.is_set():
                if req is not None:
                    req.future.set_exception(ReadCancelledError("reader is closed"))
                return
            if not req.future.set_running_or_notify_cancel():
                continue
            try:
                recs = self._collect(req)
            except DLError as e:
                self._error = self._error or e
                req.future.set_exception(e)
                continue
            except Exception as e:  # never leave a future hanging
                req.future.set_exception(AlreadyClosedError(f"reader failed: {e}"))
                continue
            if recs is None:
                req.future.set_exception(ReadCancelledError("reader is closed"))
            else:
                req.future.set_result(recs[0] if req.single else recs)

    def _collect(self, req: _Request) -> list[LogRecordWithDLSN] | None:
        if self._error is not None:
            raise self._error
        out: list[LogRecordWithDLSN] = []
        start = time.monotonic()
        deadline = None if req.timeout_s is None else start + req.timeout_s
        last_progress = start
        while not self._closed.is_set():
            try:
                got = self._c.poll(req.n - len(out))
            except DLError as e:
                if not out:
                    raise
                self._error = e  # deliver what was read; the error comes with the next read
                return out
            if got:
                out.extend(got)
                last_progress = time.monotonic()
            now = time.monotonic()
            if len(out) >= req.n or (out and (deadline is None or now >= deadline)):
                return out
            if self._idle_error_s is not None and now - last_progress > self._idle_error_s:
                raise IdleReaderError(f"reader idle for more than {self._idle_error_s:.0f} s")
            wait = self._poll_s if deadline is None or now >= deadline else min(self._poll_s, deadline - now)
            self._c.wait(wait)
        return None
