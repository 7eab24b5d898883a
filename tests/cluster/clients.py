"""The client programs of the fault tests, run inside simulated hosts; each records what it does in the shared
history directory (:mod:`tools.history_events`) for the checker (:mod:`tools.history`).

``python -m tests.cluster.clients writer --uri URI --log LOG --name NAME --history DIR [--rate N] [--conf JSON]``
    Owns ``LOG`` and appends unique values ``NAME-<n>`` with txids from the log's last txid on, ``--rate`` writes a
    second (async, several in flight), recording invoke / ok (acknowledged DLSN) / fail (certainly not written) /
    info (outcome unknown). After an error it closes the writer and opens a new one (a new epoch, recorded as
    ``owner``) once trying again can succeed; with ``--once`` it stops instead (a fenced writer that must not come
    back). Prints ``OWNER`` when it owns the log, ``ACK n`` every 100 acknowledgements; stops on SIGTERM.
``python -m tests.cluster.clients reader --uri URI --log LOG --name NAME --history DIR``
    Tails ``LOG`` from its first record, recording every record read; after an error it reopens at the next
    position under a new reader name. Stops on SIGTERM.
``python -m tests.cluster.clients final --uri URI --log LOG --history DIR``
    Reads the whole log once and records it as the final read. Prints ``FINAL n``.

Every process prints one line per event a test waits for (flushed) and its errors as ``ERROR <class> <retriable>
<message>`` lines, so a test can assert what the caller saw.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from storage.errors import DLError, LogEmptyError  # noqa: E402
from tools.history_events import HistoryRecorder  # noqa: E402

#: Client settings for the cluster: a short ZooKeeper session (a cut-off writer is fenced soon), short store
#: timeouts (a failed append is reported soon), a small buffer flushed often.
CLIENT_CONF: dict[str, object] = {
    "zkSessionTimeoutSeconds": 4,
    "lockTimeoutSeconds": 2,
    "radosOpTimeoutSeconds": 6,
    "radosConnectTimeoutSeconds": 10,
    "writerOutputBufferSize": 1024,
    "periodicFlushFrequencyMilliSeconds": 20,
    "readAheadWaitTime": 50,
    "logSegmentRollingMinutes": 0,
    "maxLogSegmentBytes": 256 * 1024,
    "logSegmentRetentionHours": 0,
}


_SAY = threading.Lock()


def say(*words: object) -> None:
    """One whole line on stdout in one write. ``print(*words)`` writes word by word when stdout is unbuffered
    (``tools.lanes`` runs the suite with PYTHONUNBUFFERED=1), and a library's log line on stderr, the same pipe
    here, landed between them once: ``ERROR`` + kazoo's "Connection dropped ..." + `` LockingError True ...``."""
    line = " ".join(str(w) for w in words) + "\n"
    with _SAY:
        sys.stdout.write(line)
        sys.stdout.flush()


def report(e: BaseException) -> None:
    """One ``ERROR`` line: what a caller of the API saw."""
    retriable = getattr(e, "retriable", None)
    say("ERROR", type(e).__name__, retriable, str(e).replace("\n", " ")[:300])


class Stop:
    """SIGTERM/SIGINT ask the program to stop (it finishes what is in flight)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.event.set())

    def wait(self, seconds: float) -> bool:
        return self.event.wait(seconds)

    @property
    def set(self) -> bool:
        return self.event.is_set()


def _definite(exc: BaseException) -> bool:
    """True when a failed write certainly took no effect, as the error itself says (``outcome_unknown`` False:
    cancelled while buffered, refused by a limit or a closed writer); the checker's ``failed_visible`` then holds
    the library's classification against the log. Everything else (a timeout, a fenced or failed append) is an
    unknown outcome: recovery decides."""
    return isinstance(exc, DLError) and not exc.outcome_unknown


def writer(args: argparse.Namespace, stop: Stop, rec: HistoryRecorder) -> int:
    conf = {**CLIENT_CONF, **json.loads(args.conf)}
    n = 0
    period = 1.0 / args.rate
    in_flight = threading.Semaphore(args.window)
    acked = 0
    lock = threading.Lock()
    epoch = 0
    while not stop.set:
        try:
            ns = storage.open_namespace(args.uri, conf)
        except DLError as e:
            report(e)
            if args.once or not e.retriable:
                return 1
            stop.wait(1.0)
            continue
        try:
            dlm = ns.open_log(args.log)
            try:
                w = dlm.open_async_writer()
            except DLError as e:
                report(e)
                if args.once:
                    return 1
                stop.wait(0.5)
                continue
            epoch += 1
            rec.owner(args.log, writer=f"{args.name}#{epoch}")
            say("OWNER", epoch)
            try:
                txid = dlm.last_txid() + 1
            except LogEmptyError:
                txid = 1
            failed = threading.Event()
            next_at = time.monotonic()
            while not stop.set and not failed.is_set():
                in_flight.acquire()
                value = f"{args.name}-{n}"
                op = n
                n += 1  # every invoke has an id of its own, also one refused at once
                rec.invoke(op, "write", value, log=args.log, txid=txid, writer=f"{args.name}#{epoch}")
                try:
                    fut = w.write(storage.LogRecord(txid, value.encode()))
                except DLError as e:  # refused at once: never accepted
                    in_flight.release()
                    rec.fail(op, error=e, definite=True)
                    report(e)
                    failed.set()
                    break

                def done(
                    f: Future[storage.DLSN], op: int = op, txid: int = txid, failed: threading.Event = failed
                ) -> None:
                    nonlocal acked
                    in_flight.release()
                    exc = f.exception()
                    if exc is None:
                        rec.ok(op, dlsn=f.result(), txid=txid)
                        with lock:
                            acked += 1
                            if acked % 100 == 0:
                                say("ACK", acked)
                    else:
                        if _definite(exc):
                            rec.fail(op, error=exc, definite=True)
                        else:
                            rec.info(op, error=exc)
                        if not failed.is_set():
                            report(exc)
                        failed.set()

                fut.add_done_callback(done)
                txid += 1
                next_at += period
                delay = next_at - time.monotonic()
                if delay > 0:
                    stop.wait(delay)
                else:
                    next_at = time.monotonic()
            try:
                w.close()  # on error: leaves the segment for recovery
            except DLError as e:
                report(e)
            if failed.is_set() and args.once:
                return 1
        finally:
            ns.close()
        if not stop.set:
            stop.wait(0.5)
    say("STOPPED", n, acked)
    return 0


def reader(args: argparse.Namespace, stop: Stop, rec: HistoryRecorder) -> int:
    conf = {**CLIENT_CONF, **json.loads(args.conf)}
    start: storage.DLSN = storage.DLSN.INITIAL
    generation = 0
    count = 0
    while not stop.set:
        generation += 1
        name = f"{args.name}.{generation}"
        try:
            with storage.open_namespace(args.uri, conf) as ns:
                dlm = ns.open_log(args.log)
                with dlm.open_reader(start) as r:
                    rec.reader_start(name, args.log, None if generation == 1 else start)
                    say("READING", generation)
                    while not stop.set:
                        got = r.read_bulk(100, non_blocking=True)
                        if not got:
                            stop.wait(0.05)
                            continue
                        for x in got:
                            rec.read(name, args.log, x.payload, x.dlsn, x.txid, seq=x.sequence_id)
                        count += len(got)
                        start = got[-1].dlsn.next()
        except DLError as e:
            report(e)
            stop.wait(0.5)
    say("STOPPED", count)
    return 0


def final(args: argparse.Namespace, stop: Stop, rec: HistoryRecorder) -> int:
    conf = {**CLIENT_CONF, **json.loads(args.conf)}
    with storage.open_namespace(args.uri, conf) as ns:
        dlm = ns.open_log(args.log)
        count = 0
        with dlm.open_reader(storage.DLSN.INITIAL) as r:
            while True:
                got = r.read_bulk(1000, non_blocking=True)
                if not got:
                    break
                for x in got:
                    rec.final_read(args.log, x.payload, x.dlsn, x.txid, seq=x.sequence_id)
                count += len(got)
    say("FINAL", count)
    return 0


PROGRAMS: dict[str, Callable[[argparse.Namespace, Stop, HistoryRecorder], int]] = {
    "writer": writer,
    "reader": reader,
    "final": final,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.cluster.clients")
    p.add_argument("program", choices=sorted(PROGRAMS))
    p.add_argument("--uri", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--name", default="")
    p.add_argument("--history", required=True)
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--once", action="store_true")
    p.add_argument("--conf", default="{}")
    args = p.parse_args(argv)
    args.name = args.name or f"{args.program}-{os.getpid()}"
    stop = Stop()
    with HistoryRecorder(args.history, args.name) as rec:
        try:
            return PROGRAMS[args.program](args, stop, rec)
        except DLError as e:
            report(e)
            return 1


if __name__ == "__main__":
    sys.exit(main())
