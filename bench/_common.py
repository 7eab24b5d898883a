"""What the benchmarks share: the records, writer settings, statistics, formatting, the data
directory, the timed async-writer loop and the pacing of a writer at a given rate.

Importing this module puts the checkout on ``sys.path`` (the benchmarks run from a checkout without
``pip install -e .``), so a benchmark imports it before ``storage``.
"""

from __future__ import annotations

import gc
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # runnable from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

import storage  # noqa: E402

RECORD_SIZE = 1024
PAYLOAD = bytes(range(256)) * (RECORD_SIZE // 256)
KIB = 1024
MIB = 1024 * 1024
GIB = 1024 * MIB


def writer_conf(**overrides: object) -> dict[str, object]:
    """64 KiB output buffer, one segment up to 1 GiB, no time-based rolling, no periodic or
    immediate flush; ``overrides`` on top."""
    conf: dict[str, object] = {
        "writerOutputBufferSize": 64 * KIB,
        "logSegmentRollingMinutes": 0,
        "maxLogSegmentBytes": GIB,
        "enableImmediateFlush": False,
        "periodicFlushFrequencyMilliSeconds": 0,
    }
    conf.update(overrides)
    return conf


class Throttle:
    """Paces a loop at ``rate`` iterations per second from ``start`` (``time.perf_counter()``) the way Kafka's
    ``ProducerPerformance`` throttles a producer: the loop sleeps only once it is at least ``MIN_SLEEP_S`` ahead
    of the rate, so records go out in short bursts, not one sleep per record (a sleep of a few microseconds costs
    a wake-up and a thread switch each, which would load the machine more than the writes being measured)."""

    MIN_SLEEP_S = 0.002

    def __init__(self, rate: float, start: float) -> None:
        self.rate, self.start = rate, start

    def wait(self, i: int) -> None:
        """Before the ``i``-th iteration (from 0)."""
        ahead = self.start + i / self.rate - time.perf_counter()
        if ahead >= self.MIN_SLEEP_S:
            time.sleep(ahead)


# --- statistics and formatting ----------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def fmt_rate(records_per_s: float) -> str:
    mb_s = records_per_s * RECORD_SIZE / 1e6
    return f"{records_per_s:,.0f} rec/s ({mb_s:,.1f} MB/s)"


def fmt_bytes(n: float) -> str:
    return f"{n / MIB:.2f} MiB" if n >= MIB else f"{n / KIB:.1f} KiB"


def yes_no(ok: bool) -> str:
    return "**yes**" if ok else "**NO**"


# --- the timed write loop -----------------------------------------------------------------------
def wait_all(futures: Sequence[Future[Any]]) -> Any:
    """Wait for every future; the last one's result."""
    last: Any = None
    for f in futures:
        last = f.result()
    return last


def timed_async_writes(aw: storage.AsyncLogWriter, records: Sequence[storage.LogRecord]) -> tuple[float, Any]:
    """Seconds to hand every record to ``aw``, flush and see every future resolved (after a
    ``gc.collect()``, untimed); and the last record's DLSN."""
    write = aw.write
    futures: list[Future[storage.DLSN]] = []
    append = futures.append
    gc.collect()
    t0 = time.perf_counter()
    for rec in records:
        append(write(rec))
    aw.flush().result()
    last = wait_all(futures)
    return time.perf_counter() - t0, last


# --- the data directory -------------------------------------------------------------------------
def make_base(prefix: str, parent: Path | None) -> tuple[Path, bool]:
    """A fresh data directory named ``<prefix>-...``: under ``parent`` (created if missing) when
    given, else under ``<repo>/bench-data`` (or the system temp dir); and whether ``bench-data``
    itself was created here (then :func:`remove_base` removes it too if left empty)."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=parent)), False
    bench_data = REPO / "bench-data"
    created = False
    try:
        if not bench_data.exists():
            bench_data.mkdir()
            created = True
        return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=bench_data)), created
    except OSError:
        return Path(tempfile.mkdtemp(prefix=f"dl-bench-{prefix}-")), False


def remove_base(base: Path, created_parent: bool) -> None:
    """Delete the data directory (and ``bench-data`` if :func:`make_base` created it and it is empty)."""
    shutil.rmtree(base, ignore_errors=True)
    if created_parent:
        try:
            base.parent.rmdir()
        except OSError:
            pass


def local_spark_session(master: str) -> Any:
    """A local SparkSession for the Spark benches (:func:`dl_spark.session.spark_session`: Python workers run
    this interpreter and import this checkout, loopback, no UI, no progress bars), 4 shuffle partitions."""
    from dl_spark.session import spark_session

    return spark_session(
        master, app_name="distributedlog-bench", shuffle_partitions=4, pythonpath=[str(REPO)], log_level="ERROR"
    )


def segstore_read(store: Any, ledgers: Sequence[tuple[int, int]]) -> int:
    """Read every entry of ``ledgers`` (``(ledger id, last entry id)``) from a segment store; payload bytes."""
    total = 0
    for ledger_id, last in ledgers:
        if last < 0:
            continue
        for _entry_id, data in store.read_entries(ledger_id, 0, last):
            total += len(data)
    return total


def reader_read(dlm: Any, bulk: int) -> int:
    """Read a whole log from the start with ``read_bulk(bulk, non_blocking=True)``; the record count."""
    import storage

    count = 0
    reader = dlm.open_reader(storage.DLSN.INITIAL)
    try:
        while True:
            recs = reader.read_bulk(bulk, non_blocking=True)
            if not recs:
                break
            count += len(recs)
    finally:
        reader.close()
    return count


def arrow_read(dlm: Any) -> int:
    """Read a whole log from the start with ``read_arrow()`` (Arrow batches, no object per record); the row count."""
    return sum(batch.num_rows for batch in dlm.read_arrow())
