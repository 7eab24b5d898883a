"""The writer process of the machine-crash tests: opens (and so recovers) the namespace on the crash file system,
then writes until it is SIGKILLed, recording every write in the history (``tools.history_events``).

    python -m tests.crash.crash_child URI HISTORY_DIR CYCLE SEED ROTATION

Prints ``{"event": "ready"}`` once the namespace and its writers are open (every log recovered), or
``{"event": "recovery-failed", "error": ...}`` and exits 3 when opening failed. Two writers run side by side:
a synchronous one (records written, then ``flush()``; each acknowledged when the flush returns) and an async one
(each record acknowledged by its future). Logs rotate over ``ROTATION`` names, so that on ZooKeeper the lock of
a killed writer has expired with its session before that log is written again. Some cycles create a log of
their own just before writing (a name created shortly before the crash).
"""

from __future__ import annotations

import json
import random
import sys
import threading
import traceback
from concurrent.futures import Future

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


def sync_writes(
    rec: HistoryRecorder, log: storage.LogManager, w: storage.LogWriter, tag: str, rng: random.Random, limit: int = 0
) -> None:
    """Batches of 1-8 records, each batch acknowledged when ``flush()`` returns."""
    txid = _next_txid(log)
    n = 0
    while limit == 0 or n < limit:
        ops = []
        for _ in range(rng.randint(1, 8) if limit == 0 else limit):
            op = f"{tag}-{n}"
            rec.invoke(op, "write", op, log=log.name, txid=txid)
            ops.append((op, txid))
            w.write(LogRecord(txid, op.encode()))
            txid += 1
            n += 1
        try:
            last = w.flush()
        except BaseException as e:
            for op, _ in ops:
                _failed(rec, op, e)
            raise
        for i, (op, t) in enumerate(ops):
            rec.ok(op, dlsn=last if i == len(ops) - 1 else None, txid=t)


def async_writes(rec: HistoryRecorder, log: storage.LogManager, w: storage.AsyncLogWriter, tag: str) -> None:
    """Records written as fast as the window allows, each acknowledged by its future."""
    txid = _next_txid(log)
    window = threading.BoundedSemaphore(WINDOW)

    def done(op: str, t: int, f: Future[DLSN]) -> None:
        window.release()
        e = f.exception()
        if e is None:
            rec.ok(op, dlsn=f.result(), txid=t)
        else:
            _failed(rec, op, e)

    n = 0
    while True:
        window.acquire()
        op = f"{tag}-{n}"
        rec.invoke(op, "write", op, log=log.name, txid=txid)
        f = w.write(LogRecord(txid, op.encode()))
        f.add_done_callback(lambda f, op=op, t=txid: done(op, t, f))
        txid += 1
        n += 1


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
        emit(event="recovery-failed", error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-2000:])
        return 3
    emit(event="ready")
    t = threading.Thread(target=async_writes, args=(rec, async_log, aw, f"c{cycle}-a"), daemon=True)
    t.start()
    try:
        sync_writes(rec, sync_log, sw, f"c{cycle}-s", rng)
    except storage.DLError as e:
        emit(event="write-error", error=f"{type(e).__name__}: {e}")
    t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
