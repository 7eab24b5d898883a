"""A producer process for the fan-in and failover tests: writes unique records round-robin to some streams through
the write proxies (one :class:`dl_proxy.ProxyClient`) and records every write in the shared history
(:mod:`tools.history`): ``invoke`` with ``producer`` and ``seq`` (its send order), then ``ok`` with the DLSN,
``info`` (timed out: unknown) or ``fail``.

    python -m tests.proxy._producer --name p1 --history DIR --streams s0,s1 (--uri URI | --proxies H:P,...)
        [--count N] [--rate R] [--stop-file PATH] [--seed S]

Stops after ``--count`` records, or when ``--stop-file`` exists, or on SIGTERM; then flushes, closes and prints one
JSON line: {"name", "written", "acked", "failed", "unknown", "longest_stall_s", "seconds"}; exit 0. The longest stall
is the longest time the producer had a write outstanding and saw no acknowledgement. A failed write is recorded as
``info`` (outcome unknown) or ``fail`` (definitive) by its error's ``outcome_unknown``: the checker's
``failed_visible`` then holds every definitive failure against the log.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dl_proxy import ProxyClient  # noqa: E402
from storage.errors import DLError  # noqa: E402
from storage.formats.dlsn import DLSN  # noqa: E402
from tools.history import HistoryRecorder  # noqa: E402


class _Stats:
    def __init__(self) -> None:
        self.mu = threading.Lock()
        self.acked = self.failed = self.unknown = 0
        self.outstanding = 0
        self.last_progress = time.monotonic()
        self.longest_stall = 0.0

    def sent(self) -> None:
        with self.mu:
            if self.outstanding == 0:
                self.last_progress = time.monotonic()
            self.outstanding += 1

    def done(self, kind: str) -> None:
        now = time.monotonic()
        with self.mu:
            self.longest_stall = max(self.longest_stall, now - self.last_progress)
            self.last_progress = now
            self.outstanding -= 1
            setattr(self, kind, getattr(self, kind) + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--streams", required=True)
    ap.add_argument("--uri")
    ap.add_argument("--proxies")
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--rate", type=float, default=0.0, help="records per second (0: as fast as possible)")
    ap.add_argument("--stop-file")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--payload-bytes", type=int, default=0, help="pad values to this size")
    ap.add_argument("--tls-ca", help="PEM file of the CA the proxies' certificates are signed by (TLS)")
    ap.add_argument("--token-file", help="file holding the proxies' auth token")
    ap.add_argument("--batch-records", type=int, default=1000, help="the client's batch_max_records")
    ap.add_argument("--max-inflight", type=int, default=4, help="the client's max_inflight")
    ap.add_argument("--linger", type=float, default=0.002, help="the client's linger_s")
    ap.add_argument("--request-timeout", type=float, default=5.0, help="the client's request_timeout_s")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format=f"{args.name}: %(levelname)s %(name)s: %(message)s")

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    streams = args.streams.split(",")
    rec = HistoryRecorder(args.history, args.name)
    stats = _Stats()
    token = Path(args.token_file).read_text().strip() if args.token_file else None
    security: dict[str, Any] = {"token": token, "tls": bool(args.tls_ca), "tls_ca": args.tls_ca}
    security.update(batch_max_records=args.batch_records, max_inflight=args.max_inflight, linger_s=args.linger,
                    request_timeout_s=args.request_timeout)  # fmt: skip
    if args.uri:
        client = ProxyClient(uri=args.uri, timeout_s=args.timeout, **security)
    else:
        client = ProxyClient(proxies=args.proxies.split(","), timeout_s=args.timeout, **security)

    def on_done(op: int, fut: Future[DLSN]) -> None:
        try:
            dlsn = fut.result()
        except DLError as e:  # outcome unknown: may be stored (once); else definitive: never in the log
            if e.outcome_unknown:
                rec.info(op, error=e)
                stats.done("unknown")
            else:
                rec.fail(op, error=e)
                stats.done("failed")
        except Exception as e:
            rec.fail(op, error=e)
            stats.done("failed")
        else:
            rec.ok(op, dlsn=dlsn)
            stats.done("acked")

    start = time.monotonic()
    i = 0
    while not stop.is_set() and (args.count == 0 or i < args.count):
        if args.stop_file and i % 50 == 0 and os.path.exists(args.stop_file):
            break
        if args.rate > 0:
            delay = start + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        stream = streams[i % len(streams)]
        value = f"{args.name}-{i}"
        payload = value.encode().ljust(args.payload_bytes, b".") if args.payload_bytes else value.encode()
        rec.invoke(i, "write", payload.decode(), log=stream, producer=args.name, seq=i)
        stats.sent()
        fut = client.write(stream, payload)
        fut.add_done_callback(functools.partial(on_done, i))
        i += 1
    client.close()
    rec.close()
    summary = {
        "name": args.name,
        "written": i,
        "acked": stats.acked,
        "failed": stats.failed,
        "unknown": stats.unknown,
        "longest_stall_s": round(stats.longest_stall, 3),
        "seconds": round(time.monotonic() - start, 3),
    }
    sys.stdout.write(json.dumps(summary) + "\n")  # one write: a log line on stderr (same pipe) cannot split it
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
