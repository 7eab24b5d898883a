"""A time-range read across hot and cold storage, with Spark and with the Python reader.

Transaction ids are often timestamps: here each record's txid is its event time in epoch milliseconds, one click
every 10 seconds from 2026-03-01T00:00:00Z. The example

1. binds a ZooKeeper namespace to a segment store and a cold store, both ``file://`` directories in a new temporary
   directory (``--segments`` / ``--cold`` to choose others),
2. writes 5 segments of 12 records to the log ``clicks`` (a writer per segment; ``offloadThresholdHours=-1``, so
   the writers leave offloading to the next step),
3. offloads the completed segments with ``dlog offload clicks`` and deletes the hot copies of the old ones with
   ``dlog purge clicks --older-than 0s`` (with a cold store a purge removes only hot copies, and keeps the newest
   completed segment hot): segments 1-4 then live only in the cold store, segment 5 in both
   (``dlog show clicks`` prints each segment's ``tier=``),
4. reads the time range ``[--start, --end)`` (default ``[00:02:30, 00:09:05)``: records 15..54, in segments 2-5)
   with Spark (``spark.read.format("distributedlog")`` with ``startingTxId`` / ``endingTxId``, ``--master``
   ``local[2]``) and with the Python reader (``open_reader(start_txid)``, stopping before the first txid >= end),
   prints the rows, and checks both are exactly the expected records, in log order. The last line::

       COLD TIME RANGE OK rows=40 spark=40 python=40 cold_only_segments=3

   (``FAILED`` and exit 1 otherwise).

Cold storage needs a ZooKeeper namespace (an embedded one has no cold store). Run it against a ZooKeeper server::

    python examples/cold_time_range.py --zookeeper 127.0.0.1:2181   # namespace /distributedlog-examples/cold-<random>
    python examples/cold_time_range.py --uri distributedlog://127.0.0.1:2181/cold-demo

``--uri`` takes a new namespace, or one already bound to the same ``--segments`` and ``--cold``; the log must not exist
yet. ``conf/zoo.cfg`` starts a server on 127.0.0.1:2181 (``zkServer.sh start-foreground conf/zoo.cfg``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from storage.errors import DLError, EndOfStreamError  # noqa: E402

#: The first click's time, and the time between two clicks.
BASE_MS = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000)
STEP_MS = 10_000
SEGMENTS = 5
PER_SEGMENT = 12
#: The writers' conf: no offloading by themselves (the example runs `dlog offload`).
WRITER_CONF: dict[str, object] = {"offloadThresholdHours": -1}


def iso(ms: int) -> str:
    """``ms`` (epoch milliseconds) as ``2026-03-01T00:02:30Z``."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> int:
    """An ISO 8601 time (``2026-03-01T00:02:30Z``; no zone: UTC) as epoch milliseconds."""
    t = datetime.fromisoformat(text)
    return int((t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp() * 1000)


def click(i: int) -> tuple[int, bytes]:
    """Click number ``i``: (txid = its time in epoch ms, payload)."""
    at = BASE_MS + i * STEP_MS
    return at, f"click-{i:03d} user-{i % 5} at {iso(at)}".encode()


def dlog(uri: str, *args: str) -> str:
    """Run ``dlog --uri URI ARGS`` (this interpreter, this checkout), print and return its output.

    Raises:
        RuntimeError: it exited non-zero (its stderr in the message).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    cmd = [sys.executable, "-m", "dlog", "--uri", uri, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    print(f"$ dlog {' '.join(args)}")
    for line in out.stdout.splitlines():
        print(f"  {line}")
    if out.returncode != 0:
        raise RuntimeError(f"dlog {' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def write_segments(uri: str, log: str) -> None:
    """SEGMENTS completed segments of PER_SEGMENT clicks each (a writer per segment)."""
    with storage.open_namespace(uri, WRITER_CONF) as ns:
        ns.create_log(log)
        with ns.open_log(log) as dlm:
            for s in range(SEGMENTS):
                with dlm.open_writer() as w:
                    for i in range(s * PER_SEGMENT, (s + 1) * PER_SEGMENT):
                        w.write(storage.LogRecord(*click(i)))
                    w.flush()


def tiers(show_output: str) -> dict[int, str]:
    """Each segment's ``tier=`` (hot, cold or both) from ``dlog show`` output, by segment number."""
    out: dict[int, str] = {}
    for line in show_output.splitlines():
        lssn, sep, fields = line.partition("\t: ")
        if sep and lssn.strip().isdigit():
            kv = dict(f.split("=", 1) for f in fields.split() if "=" in f)
            out[int(lssn)] = kv.get("tier", "hot")
    return out


def read_python(uri: str, log: str, start_ms: int, end_ms: int) -> list[tuple[int, int, bytes]]:
    """``(txid, segment, payload)`` of every record with ``start_ms <= txid < end_ms``, with the Python reader."""
    rows: list[tuple[int, int, bytes]] = []
    with (
        storage.open_namespace(uri, create=False) as ns,
        ns.open_log(log) as dlm,
        dlm.open_reader(start_ms) as reader,  # positioned at the first record with txid >= start_ms
    ):
        while True:
            try:
                batch = reader.read_bulk(100, non_blocking=True)
            except EndOfStreamError:
                break
            if not batch:
                break
            for rec in batch:
                if rec.txid >= end_ms:
                    return rows
                rows.append((rec.txid, rec.dlsn.lssn, bytes(rec.payload)))
    return rows


def read_spark(uri: str, log: str, start_ms: int, end_ms: int, master: str) -> list[tuple[int, int, bytes]]:
    """The same range with ``spark.read.format("distributedlog")``, ``startingTxId`` / ``endingTxId``; prints it."""
    from dl_spark.session import spark_session

    spark: Any = spark_session(master, app_name="distributedlog-cold-time-range", pythonpath=[str(ROOT)])
    try:
        df = (
            spark.read.format("distributedlog")
            .option("uri", uri)
            .option("streams", log)
            .option("startingTxId", str(start_ms))  # inclusive: the first record with txid >= start
            .option("endingTxId", str(end_ms))  # exclusive: stops before the first record with txid >= end
            .load()
            .selectExpr(
                "timestamp_millis(txid) AS time", "txid", "dlsn.lssn AS segment", "CAST(value AS STRING) AS click"
            )
            .orderBy("txid")
        )
        rows = df.collect()
        df.show(n=len(rows) + 1, truncate=False)
        return [(int(r.txid), int(r.segment), str(r.click).encode()) for r in rows]
    finally:
        spark.stop()


def run(args: argparse.Namespace) -> int:
    start_ms, end_ms = parse_time(args.start), parse_time(args.end)
    if end_ms < start_ms:
        print("--end is before --start", file=sys.stderr)
        return 2
    storage.bind_namespace(args.uri, segments=args.segments, cold=args.cold)
    print(f"namespace {args.uri}: segments {args.segments}, cold store {args.cold}")
    with storage.open_namespace(args.uri) as ns:
        if ns.log_exists(args.log):
            print(f"log {args.log!r} already exists in {args.uri}; pick another --log or --uri", file=sys.stderr)
            return 1
    write_segments(args.uri, args.log)
    last = click(SEGMENTS * PER_SEGMENT - 1)[0]
    print(f"wrote {SEGMENTS} segments of {PER_SEGMENT} clicks, {iso(click(0)[0])} .. {iso(last)}")
    dlog(args.uri, "offload", args.log)
    dlog(args.uri, "purge", args.log, "--older-than", "0s")
    tier = tiers(dlog(args.uri, "show", args.log))

    expected = [
        (txid, 1 + i // PER_SEGMENT, payload)
        for i in range(SEGMENTS * PER_SEGMENT)
        for txid, payload in [click(i)]
        if start_ms <= txid < end_ms
    ]
    in_range = sorted({seg for _, seg, _ in expected})
    cold_only = [seg for seg in in_range if tier.get(seg) == "cold"]
    print(f"time range [{iso(start_ms)}, {iso(end_ms)}): txids [{start_ms}, {end_ms}), segments {in_range}, "
          f"{len(cold_only)} of them cold only")  # fmt: skip
    spark_rows = read_spark(args.uri, args.log, start_ms, end_ms, args.master)
    python_rows = read_python(args.uri, args.log, start_ms, end_ms)
    print(f"python reader: {len(python_rows)} rows, first {python_rows[0][2].decode() if python_rows else '-'}, "
          f"last {python_rows[-1][2].decode() if python_rows else '-'}")  # fmt: skip
    ok = spark_rows == expected and python_rows == expected and bool(expected)
    if spark_rows != expected:
        print(f"spark rows differ from the expected {len(expected)} rows", file=sys.stderr)
    if python_rows != expected:
        print(f"python reader rows differ from the expected {len(expected)} rows", file=sys.stderr)
    print(
        f"COLD TIME RANGE {'OK' if ok else 'FAILED'} rows={len(expected)} spark={len(spark_rows)} "
        f"python={len(python_rows)} cold_only_segments={len(cold_only)}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--zookeeper", metavar="HOST:PORT", help="a ZooKeeper server: use a new namespace on it")
    where.add_argument("--uri", help="a ZooKeeper namespace URI, distributedlog://HOST:PORT/PATH")
    p.add_argument("--segments", help="segment store URI (default: file://<temporary directory>/segments)")
    p.add_argument(
        "--cold", help="cold store URI, file:///abs/path or s3://... (default: file://<temporary directory>/cold)"
    )
    p.add_argument("--log", default="clicks", help="the log to write (must not exist yet)")
    p.add_argument("--start", default=iso(BASE_MS + 150_000), help="range start, inclusive (ISO 8601; no zone: UTC)")
    p.add_argument("--end", default=iso(BASE_MS + 545_000), help="range end, exclusive (ISO 8601; no zone: UTC)")
    p.add_argument("--master", default="local[2]", help="Spark master")
    args = p.parse_args(argv)
    if args.zookeeper is not None:
        args.uri = f"distributedlog://{args.zookeeper}/distributedlog-examples/cold-{uuid.uuid4().hex[:8]}"
    workdir = Path(tempfile.mkdtemp(prefix="dl-cold-"))
    args.segments = args.segments or f"file://{workdir / 'segments'}"
    args.cold = args.cold or f"file://{workdir / 'cold'}"
    try:
        return run(args)
    except (DLError, RuntimeError, ValueError) as e:
        print(f"cold_time_range: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
