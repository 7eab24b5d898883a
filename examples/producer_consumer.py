"""A producer process and a consumer tailing it, with the storage API's asynchronous writer and reader.

* The producer (a separate process) appends ``--records`` JSON orders to a new log with
  ``open_async_writer()`` in bursts; ``periodicFlushFrequencyMilliSeconds`` commits them (makes them
  visible) every few milliseconds without an explicit flush. It waits for every write's future (its
  DLSN, once durable), then seals the log with ``mark_end_of_stream()``.
* The consumer (this process) tails the log from the start with ``open_async_reader()``:
  ``read_bulk(n, timeout_s)`` futures deliver what arrives, and the reader's ``EndOfStreamError`` says the
  producer is done. It checks every order arrived once, in order, at increasing DLSNs with contiguous
  sequence ids, and that the amounts add up.

Run: ``python examples/producer_consumer.py --uri distributedlog-local:///tmp/dl-pc`` (the log, ``orders``
by default, must not exist yet: a sealed log takes no more writes). The last line is checkable:
``SUMMARY OK records=N end_of_stream=True ...``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import statistics
import sys
import time

import storage

CONF = {
    "periodicFlushFrequencyMilliSeconds": 5,  # the writer commits (makes visible) every 5 ms
    "lockTimeoutSeconds": 5,
}


def order(i: int) -> dict[str, object]:
    """Order number ``i`` (1-based) without its send time."""
    return {"order": i, "customer": f"c{i % 13}", "cents": 100 + (i * 37) % 900}


def produce(uri: str, log: str, records: int, burst: int) -> None:
    """The producer process: orders 1..records, txid = order number, ``burst`` writes at a time."""
    with storage.open_namespace(uri, CONF) as ns, ns.open_log(log) as dlm:
        writer = dlm.open_async_writer()
        futures = []
        for first in range(1, records + 1, burst):
            batch = [
                storage.LogRecord(i, json.dumps({**order(i), "sent": time.time()}).encode())
                for i in range(first, min(first + burst, records + 1))
            ]
            futures.extend(writer.write_bulk(batch))
            time.sleep(0.002)  # a steady stream rather than one block
        last = [f.result(timeout=60) for f in futures][-1]
        eos = writer.mark_end_of_stream()
        writer.close()
        print(f"producer: {records} orders acknowledged, last DLSN {last}; end of stream at {eos}", flush=True)


def consume(dlm: storage.LogManager, producer: mp.process.BaseProcess) -> tuple[list, list[float], bool]:
    """Tail ``dlm`` until end of stream; returns (records, latencies in ms, ended by end of stream)."""
    records: list = []
    latencies: list[float] = []
    with dlm.open_async_reader(storage.DLSN.INITIAL) as reader:
        while True:
            future = reader.read_bulk(500, timeout_s=0.05)
            while True:
                try:
                    got = future.result(timeout=1.0)
                    break
                except TimeoutError:
                    if not producer.is_alive() and producer.exitcode != 0:
                        print(f"producer failed with exit code {producer.exitcode}", file=sys.stderr)
                        return records, latencies, False
                except storage.EndOfStreamError:
                    return records, latencies, True
            now = time.time()
            for rec in got:
                latencies.append((now - json.loads(rec.payload)["sent"]) * 1000)
            records.extend(got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="namespace URI, e.g. distributedlog-local:///tmp/dl")
    parser.add_argument("--log", default="orders", help="a log that does not exist yet (default: orders)")
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--burst", type=int, default=100, help="orders per write_bulk call")
    args = parser.parse_args()

    with storage.open_namespace(args.uri, CONF) as ns:
        if ns.log_exists(args.log):
            sys.exit(f"log {args.log!r} already exists in {args.uri}; pick another --log or --uri")
        ns.create_log(args.log)
        with ns.open_log(args.log) as dlm:
            producer = mp.get_context("spawn").Process(
                target=produce, args=(args.uri, args.log, args.records, args.burst)
            )
            started = time.monotonic()
            producer.start()
            records, latencies, sealed = consume(dlm, producer)
            elapsed = time.monotonic() - started
            producer.join(timeout=60)

            orders = [json.loads(r.payload) for r in records]
            in_order = all(o["order"] == r.txid == i + 1 for i, (o, r) in enumerate(zip(orders, records, strict=True)))
            contiguous = all(r.sequence_id == i for i, r in enumerate(records))
            increasing = all(a.dlsn < b.dlsn for a, b in itertools.pairwise(records))
            cents = sum(int(o["cents"]) for o in orders)
            expected_cents = sum(int(order(i)["cents"]) for i in range(1, args.records + 1))
            per_customer = len({o["customer"] for o in orders})
            count_in_log = dlm.record_count()

    print(
        f"consumer: {len(records)} orders in {elapsed:.2f}s ({len(records) / max(elapsed, 1e-9):,.0f}/s), "
        f"{per_customer} customers, {cents / 100:,.2f} total; in order: {in_order}, "
        f"sequence ids contiguous: {contiguous}, DLSNs increasing: {increasing}"
    )
    if latencies:
        print(
            f"producer -> consumer latency: median {statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms"
        )
    ok = (
        sealed
        and producer.exitcode == 0
        and len(records) == args.records == count_in_log
        and in_order
        and contiguous
        and increasing
        and cents == expected_cents
    )
    print(
        "SUMMARY",
        "OK" if ok else "MISMATCH",
        f"records={len(records)}",
        f"end_of_stream={sealed}",
        f"cents={cents}",
    )
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
