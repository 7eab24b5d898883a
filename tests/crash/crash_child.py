"""The writer process of the machine-crash tests: opens (and so recovers) the namespace on the crash file system,
then writes until it is SIGKILLed, recording every write in the history (``tools.history_events``).

    python -m tests.crash.crash_child URI HISTORY_DIR CYCLE SEED ROTATION

Prints ``{"event": "ready"}`` once the namespace and its writers are open (every log recovered), or
``{"event": "recovery-failed", "error": ..., "retriable": ...}`` and exits 3 when opening failed (the harness opens
again after a retriable error, as an application would). Two writers run side by side:
a synchronous one (records written, then ``flush()``; each acknowledged when the flush returns) and an async one
(each record acknowledged by its future). Logs rotate over ``ROTATION`` names, so that on ZooKeeper the lock of
a killed writer has expired with its session before that log is written again. Some cycles create a log of
their own just before writing (a name created shortly before the crash). The async writer truncates its log now
and then (recorded for the checker, which then allows records before that point to be gone).
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

import storage
from storage import DLSN, LogRecord
from tools.history_events import HistoryRecorder

CONF = {
    "writerOutputBufferSize": 512,
    "periodicFlushFrequencyMilliSeconds": 4,
    "logSegmentRollingMinutes": 0,
    "maxLogSegmentBytes": 8 * 1024,  # a segment roll every ~80 records
    "lockTimeoutSeconds": 20,
    "logSegmentRetentionHours": 0,
    "zkSessionTimeoutSeconds": 1,
}
#: Outstanding writes of the async writer at most.
WINDOW = 64
W = TypeVar("W")


def emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _next_txid(log: storage.LogManager) -> int:
    try:
        return log.last_txid() + 1
    except storage.LogEmptyError:
        return 1


def _failed(rec: HistoryRecorder, op: str, e: BaseException) -> None:
    if isinstance(e, storage.DLError) and not e.outcome_unknown:
        rec.fail(op, error=e)
    else:
        rec.info(op, error=e)


class _RefusedError(Exception):
    """A write refused at once (its record not buffered); the batch's buffered records are settled by a flush."""

    def __init__(self, error: storage.DLError) -> None:
        super().__init__(str(error))
        self.error = error


def _reopen(open_writer: Callable[[], W], what: str) -> W:
    """Open a writer again after its segment failed (a full or failing disk), until it works: the new writer
    recovers the failed segment."""
    while True:
        try:
            return open_writer()
        except storage.DLError as e:
            emit(event="reopen-failed", what=what, error=f"{type(e).__name__}: {e}", retriable=e.retriable)
            time.sleep(0.05)


def sync_writes(
    rec: HistoryRecorder, log: storage.LogManager, w: storage.LogWriter, tag: str, rng: random.Random, limit: int = 0
) -> None:
    """Batches of 1-8 records, each batch acknowledged when ``flush()`` returns; after an error the writer is
    opened again (``limit``: one batch of that many records, no reopen)."""
    n = 0
    txid = _next_txid(log)
    while limit == 0 or n < limit:
        ops: list[tuple[str, int]] = []  # buffered, not yet flushed
        try:
            for _ in range(rng.randint(1, 8) if limit == 0 else limit):
                op = f"{tag}-{n}"
                n += 1
                rec.invoke(op, "write", op, log=log.name, txid=txid)
                try:
                    w.write(LogRecord(txid, op.encode()))
                except storage.DLError as e:  # this record was not buffered; the others are the flush's
                    _failed(rec, op, e)
                    raise _RefusedError(e) from e
                ops.append((op, txid))
                txid += 1
            last = w.flush()
        except (storage.DLError, _RefusedError) as failure:
            e = failure.error if isinstance(failure, _RefusedError) else failure
            flush_error = e
            if isinstance(failure, _RefusedError) and ops:
                try:
                    w.flush()
                    flush_error = None
                except storage.DLError as later:
                    flush_error = later
            for op, t in ops:
                if flush_error is None:
                    rec.ok(op, txid=t)
                else:
                    _failed(rec, op, flush_error)
            if limit:
                raise
            emit(event="write-error", what=log.name, error=f"{type(e).__name__}: {e}", retriable=e.retriable)
            w.abort()
            w = _reopen(log.open_writer, log.name)
            txid = _next_txid(log)
            continue
        for i, (op, t) in enumerate(ops):
            rec.ok(op, dlsn=last if i == len(ops) - 1 else None, txid=t)


def _payload(op: str, rng: random.Random) -> bytes:
    """The record of write ``op``: its name, and one time in ten a few KiB after a ``|`` (entries spanning pages)."""
    return op.encode() + (b"|" + b"x" * rng.randint(1000, 6000) if rng.random() < 0.1 else b"")


def async_writes(
    rec: HistoryRecorder, log: storage.LogManager, w: storage.AsyncLogWriter, tag: str, rng: random.Random
) -> None:
    """Records written as fast as the window allows, each acknowledged by its future; every 50 writes the log is
    truncated before a record acknowledged a while ago; after an error, once every outstanding future settled, the
    writer is opened again."""
    window = threading.BoundedSemaphore(WINDOW)
    broken = threading.Event()
    acked: list[DLSN] = []

    def done(op: str, t: int, f: Future[DLSN]) -> None:
        e = f.exception()
        if e is None:
            acked.append(f.result())
            rec.ok(op, dlsn=f.result(), txid=t)
        else:
            _failed(rec, op, e)
            broken.set()
        window.release()

    n = 0
    txid = _next_txid(log)
    while True:
        if broken.is_set():
            for _ in range(WINDOW):  # every outstanding write settled
                window.acquire()
            w.abort()
            w = _reopen(log.open_async_writer, log.name)
            txid = _next_txid(log)
            broken.clear()
            for _ in range(WINDOW):
                window.release()
        if n % 50 == 49 and len(acked) > 60:
            _truncate(rec, log, w, acked[-40])
        window.acquire()
        op = f"{tag}-{n}"
        n += 1
        rec.invoke(op, "write", op, log=log.name, txid=txid)
        try:
            f = w.write(LogRecord(txid, _payload(op, rng)))
        except storage.DLError as e:  # refused at once: the writer is in error
            _failed(rec, op, e)
            broken.set()
            window.release()
            continue
        f.add_done_callback(lambda f, op=op, t=txid: done(op, t, f))
        txid += 1


def _truncate(rec: HistoryRecorder, log: storage.LogManager, w: storage.AsyncLogWriter, at: DLSN) -> None:
    """Truncate the log before ``at`` (an acknowledged record); recorded before the call, since the machine may
    crash once the truncation is stored but before it returned."""
    rec.truncated(log.name, at)
    try:
        w.truncate(at).result(timeout=30)
    except (storage.DLError, TimeoutError) as e:  # a disk fault meanwhile: the writes report it
        emit(event="truncate-error", what=log.name, error=f"{type(e).__name__}: {e}")


def main(uri: str, history_dir: str, cycle: int, seed: int, rotation: int) -> int:
    rng = random.Random(seed)
    rec = HistoryRecorder(history_dir, f"cycle-{cycle}")
    try:
        ns = storage.open_namespace(uri, CONF, create=cycle == 0)  # later cycles find it (or fail)
        sync_name, async_name = f"sync-{cycle % rotation}", f"async-{cycle % rotation}"
        for name in (sync_name, async_name):
            ns.create_log(name, exist_ok=True)
        sync_log, async_log = ns.open_log(sync_name), ns.open_log(async_name)
        sw = sync_log.open_writer()
        rec.owner(sync_log.name)
        aw = async_log.open_async_writer()
        rec.owner(async_log.name)
        if rng.random() < 0.3:  # a log created, written and acknowledged just before the crash
            new = f"new-{cycle}"
            ns.create_log(new)
            fresh = ns.open_log(new)
            with fresh.open_writer() as nw:
                rec.owner(new)
                sync_writes(rec, fresh, nw, f"c{cycle}-n", rng, limit=3)
    except BaseException as e:  # what a reopen after the crash met
        retriable = bool(getattr(e, "retriable", False))
        emit(event="recovery-failed", error=f"{type(e).__name__}: {e}", retriable=retriable,
             trace=traceback.format_exc()[-2000:])  # fmt: skip
        return 3
    emit(event="ready")
    t = threading.Thread(
        target=async_writes, args=(rec, async_log, aw, f"c{cycle}-a", random.Random(seed + 1)), daemon=True
    )
    t.start()
    sync_writes(rec, sync_log, sw, f"c{cycle}-s", rng)
    return 0


def run(argv: list[str]) -> int:
    """``main`` from the command line's arguments (see the module docstring)."""
    return main(argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4]))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
