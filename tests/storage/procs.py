"""Child-process programs for the crash, zombie, ownership and tail tests.

Run as ``python -m tests.storage.procs <command> <uri> <log> [args]``. Each prints one line
per event to stdout (flushed), so the parent can see exactly what was acknowledged before it
SIGKILLs the child.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent.futures import Future

import storage
from storage import DLSN, LogRecord

CRASH_CONF = {
    "writerOutputBufferSize": 512,
    "periodicFlushFrequencyMilliSeconds": 4,
    "logSegmentRollingMinutes": 0,
    "maxLogSegmentBytes": 16 * 1024,
    "lockTimeoutSeconds": 20,
    "logSegmentRetentionHours": 0,
    "zkSessionTimeoutSeconds": 2,  # a SIGKILLed owner's ZooKeeper lock goes with its session
}


def emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def writer(uri: str, log: str, limit: str = "0", overrides: str = "{}") -> None:
    """Take over the log, then write txids last+1, last+2, ... reporting each ack in order."""
    n = int(limit)
    with storage.open_namespace(uri, {**CRASH_CONF, **json.loads(overrides)}) as ns:
        dlm = ns.open_log(log)
        w = dlm.open_async_writer()
        try:
            txid = dlm.last_txid() + 1
        except storage.LogEmptyError:
            txid = 1
        emit(event="open", next_txid=txid, segments=len(dlm.log_segments()))
        lock = threading.Lock()

        def acked(t: int, f: Future[DLSN]) -> None:
            exc = f.exception()
            with lock:
                if exc is None:
                    d = f.result()
                    emit(event="ack", txid=t, dlsn=str(d))
                else:
                    emit(event="fail", txid=t, error=type(exc).__name__)

        written = 0
        while n == 0 or written < n:
            try:
                f = w.write(LogRecord(txid, f"rec-{txid}".encode() * 8))
            except storage.DLError as e:
                emit(event="write-error", txid=txid, error=type(e).__name__)
                time.sleep(0.05)
                if isinstance(e, storage.WriterFencedError):
                    break
                continue
            f.add_done_callback(lambda fut, t=txid: acked(t, fut))
            txid += 1
            written += 1
            if written % 200 == 0:
                time.sleep(0.001)  # let the periodic flusher in
        w.close()
        emit(event="closed")


def hold(uri: str, log: str, count: str) -> None:
    """Open the writer, write and flush ``count`` records, report, then sleep forever."""
    with storage.open_namespace(uri, {"lockTimeoutSeconds": 5, "zkSessionTimeoutSeconds": 2}) as ns:
        w = ns.open_log(log).open_writer()
        for t in range(1, int(count) + 1):
            w.write(LogRecord(t, f"held-{t}".encode()))
        last = w.flush()
        emit(event="holding", last=str(last))
        while True:
            time.sleep(1)


def tail(uri: str, log: str, count: str) -> None:
    """Tail the log from the start until ``count`` records arrived; report order checks."""
    total = int(count)
    with storage.open_namespace(uri) as ns:
        r = ns.open_log(log).open_reader(DLSN.INITIAL)
        emit(event="ready")
        seen = 0
        ok = True
        start = time.monotonic()
        while seen < total:
            for rec in r.read_bulk(2000):
                ok = ok and rec.txid == seen + 1 and rec.sequence_id == seen and rec.payload == b"t%d" % rec.txid
                seen += 1
            if time.monotonic() - start > 300:
                break
        emit(event="done", seen=seen, in_order=ok, seconds=round(time.monotonic() - start, 2))


def produce(uri: str, log: str, count: str) -> None:
    """Write ``count`` records (txid i, payload ``t<i>``) with the async writer, then close."""
    conf = {"writerOutputBufferSize": 16 * 1024, "periodicFlushFrequencyMilliSeconds": 10}
    with storage.open_namespace(uri, conf) as ns:
        w = ns.open_log(log).open_async_writer()
        futures = [w.write(LogRecord(t, b"t%d" % t)) for t in range(1, int(count) + 1)]
        futures[-1].result()
        w.close()
        emit(event="produced", count=len(futures))


if __name__ == "__main__":
    cmd, *argv = sys.argv[1:]
    {"writer": writer, "hold": hold, "tail": tail, "produce": produce}[cmd](*argv)
