"""A tour of a DistributedLog log on the embedded default (no server needed).

1. A producer *process* appends records to ``events`` with the async writer, flushing as it
   goes, while this process tails the log with a reader that wakes on notifications.
2. The log is read back from the start, by DLSN and by transaction id.
3. Everything before the midpoint is truncated and purged; a reader from the start then
   begins at the first record that survived.
4. The log is sealed with end of stream.

It ends with a short, checkable summary. Run: ``python examples/log_tour.py --uri distributedlog-local:///tmp/dl``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import storage

CONF = {
    "logSegmentRollingMinutes": 0,  # roll by size, so the tour shows several segments
    "maxLogSegmentBytes": 64 * 1024,
    "periodicFlushFrequencyMilliSeconds": 10,  # commit (make visible) every few ms
    "lockTimeoutSeconds": 5,
    "explicitTruncationByApp": True,  # purge only deletes segments the application truncated
}


def produce(uri: str, log: str, count: int) -> None:
    """The producer process: ``count`` records, txids 1..count, payload ``event-<i>``."""
    with storage.open_namespace(uri, CONF) as ns, ns.open_log(log) as dlm:
        writer = dlm.open_async_writer()
        futures = [writer.write(storage.LogRecord(i, f"event-{i}".encode())) for i in range(1, count + 1)]
        for f in futures:
            f.result()
        writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="namespace URI, e.g. distributedlog-local:///tmp/dl")
    parser.add_argument("--count", type=int, default=20_000)
    args = parser.parse_args()
    log_name = "events"

    with storage.open_namespace(args.uri, CONF) as ns:
        ns.create_log(log_name, exist_ok=True)
        dlm = ns.open_log(log_name)

        # 1. tail while another process writes
        producer = mp.get_context("spawn").Process(target=produce, args=(args.uri, log_name, args.count))
        started = time.monotonic()
        producer.start()
        tailed = []
        with dlm.open_reader(storage.DLSN.INITIAL) as reader:
            while len(tailed) < args.count:
                batch = reader.read_bulk(1000)
                tailed.extend(batch)
                if not batch and not producer.is_alive() and producer.exitcode != 0:
                    raise SystemExit(f"producer failed with exit code {producer.exitcode}")
        producer.join()
        elapsed = time.monotonic() - started
        in_order = all(r.txid == i + 1 and r.sequence_id == i for i, r in enumerate(tailed))
        print(f"tailed {len(tailed)} records from a producer process in {elapsed:.2f}s; in order: {in_order}")

        segments = dlm.log_segments()
        print(
            f"segments: {len(segments)} (lssn {segments[0].lssn}..{segments[-1].lssn}), records: {dlm.record_count()}"
        )
        print(f"first DLSN {dlm.first_dlsn()}  last DLSN {dlm.last_dlsn()}  last txid {dlm.last_txid()}")

        # 2. position by DLSN and by txid
        mid = tailed[len(tailed) // 2]
        with dlm.open_reader(mid.dlsn) as r:
            by_dlsn = r.read_next()
        with dlm.open_reader(mid.txid) as r:
            by_txid = r.read_next()
        assert by_dlsn is not None and by_txid is not None
        print(f"reader at DLSN {mid.dlsn} -> txid {by_dlsn.txid}; reader at txid {mid.txid} -> DLSN {by_txid.dlsn}")

        # 3. truncate before the midpoint, purge what is fully truncated
        with dlm.open_writer() as w:
            w.truncate(mid.dlsn)
        states = [s.truncation_status.value for s in dlm.log_segments()]
        purged = dlm.purge_older_than(int(time.time() * 1000) - 1) if len(segments) > 1 else 0
        with dlm.open_reader(storage.DLSN.INITIAL) as r:
            first_left = r.read_next()
        assert first_left is not None
        print(
            f"truncated at {mid.dlsn}: statuses {sorted(set(states))}; purged {purged} segments; "
            f"a reader from the start now begins at txid {first_left.txid}"
        )

        # 4. seal
        with dlm.open_writer() as w:
            w.mark_end_of_stream()
        print(f"end of stream: {dlm.is_end_of_stream()}")

        ok = in_order and len(tailed) == args.count and by_txid.txid == mid.txid and first_left.txid <= mid.txid
        print("SUMMARY", "OK" if ok else "MISMATCH", f"records={len(tailed)}", f"segments={len(segments)}")
        if not ok:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
