"""Helpers of the Spark tests: write logs with the storage API (here or in another process) and
compute the exact expected rows with the storage core's own reader."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from chispa import assert_df_equality

import storage
from dl_spark import SCHEMA

ROOT = Path(__file__).resolve().parents[2]
Row = tuple[str, tuple[int, int, int], int, int, bytes]

CONF = {"writerOutputBufferSize": 0, "lockTimeoutSeconds": 5}


def write_segments(uri: str, log: str, segments: Sequence[Sequence[bytes]], txid: int = 1) -> int:
    """Write each list of payloads as one completed segment (a writer per segment); returns the
    next free txid."""
    with storage.open_namespace(uri, CONF) as ns:
        dlm = ns.open_log(log)
        for payloads in segments:
            with dlm.open_writer() as w:
                for p in payloads:
                    w.write(storage.LogRecord(txid, p))
                    txid += 1
                w.flush()
    return txid


def append_in_process(uri: str, log: str, payloads: Sequence[bytes], txid: int, *, close: bool = True) -> None:
    """Append from a separate Python process; ``close=False`` exits without closing the writer, so
    the segment stays in progress (the next writer recovers it)."""
    script = (
        "import os, sys, storage\n"
        "uri, log, txid, close = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == '1'\n"
        "payloads = [bytes.fromhex(h) for h in sys.argv[5:]]\n"
        f"ns = storage.open_namespace(uri, {CONF!r})\n"
        "w = ns.open_log(log).open_writer()\n"
        "for i, p in enumerate(payloads):\n"
        "    w.write(storage.LogRecord(txid + i, p))\n"
        "w.flush()\n"
        "if close:\n"
        "    w.close(); ns.close()\n"
        "    sys.exit(0)\n"
        "os._exit(0)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    subprocess.run(
        [sys.executable, "-c", script, uri, log, str(txid), "1" if close else "0", *(p.hex() for p in payloads)],
        check=True,
        env=env,
        timeout=120,
    )


def log_rows(uri: str, logs: Iterable[str], start: storage.DLSN = storage.DLSN.INITIAL) -> list[Row]:
    """Every record of ``logs`` readers can see now, as rows of the source's schema (read with the
    storage core's reader, not the Spark source)."""
    rows: list[Row] = []
    with storage.open_namespace(uri, CONF) as ns:
        for log in logs:
            if not ns.log_exists(log):
                continue
            with ns.open_log(log).open_reader(start) as r:
                while True:
                    try:
                        batch = r.read_bulk(1000, non_blocking=True)
                    except storage.EndOfStreamError:
                        break
                    if not batch:
                        break
                    for rec in batch:
                        d = rec.dlsn
                        rows.append(
                            (log, (d.lssn, d.entry_id, d.slot_id), rec.txid, rec.sequence_id, bytes(rec.payload))
                        )
    return rows


def off(dlsn: tuple[int, int, int]) -> str:
    """The offset text ``"lssn,entry,slot"`` of a row's DLSN tuple."""
    return ",".join(str(x) for x in dlsn)


def assert_rows(spark: Any, actual: Any, expected: Sequence[Row], *, ignore_nullable: bool = False) -> None:
    """chispa equality of ``actual`` with ``expected`` rows (both sorted by stream and DLSN)."""
    exp = spark.createDataFrame(list(expected), SCHEMA)
    order = ["stream", "dlsn.lssn", "dlsn.entry_id", "dlsn.slot_id"]
    assert_df_equality(
        actual.select(*SCHEMA.fieldNames()).orderBy(*order),
        exp.orderBy(*order),
        ignore_nullable=ignore_nullable,
    )


def upper_query(spark: Any, uri: str, ckpt: Path, source_log: str, per_trigger: int, **source_opts: str) -> Any:
    """One ``availableNow`` run of ``source_log`` → upper-cased values → log ``out``, with checkpoint ``ckpt``
    (``startingOffsets=earliest`` and ``maxRecordsPerTrigger=per_trigger`` unless given); the finished query."""
    from pyspark.sql import functions as sf

    r = spark.readStream.format("distributedlog").option("uri", uri).option("streams", source_log)
    for k, v in {"startingOffsets": "earliest", "maxRecordsPerTrigger": str(per_trigger), **source_opts}.items():
        r = r.option(k, v)
    df = r.load().select(sf.upper(sf.col("value").cast("string")).alias("value"))
    q = (
        df.writeStream.format("distributedlog")
        .option("uri", uri)
        .option("stream", "out")
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return q
