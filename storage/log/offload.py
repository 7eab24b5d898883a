"""Offload: copying completed log segments to the namespace's cold store.

For one segment (:func:`offload_segment`): read its ledger's entries from the hot store, write them as one object
(:mod:`storage.cold.segment_object`: entries, an index of their offsets and CRC32Cs, a description) at
``<log name>/<lssn, 18 digits>-<ledger id>.dlseg`` under the cold store's prefix, read the object back and compare
its SHA-256 (:meth:`storage.cold.base.ColdStore.put_verified`), and only then record it in the metadata
(:class:`storage.log.tiered.ColdRecord` at ``<ns>/.cold/<ledger id>``). DistributedLog's segment metadata is not
touched. Offloading an offloaded segment does nothing; two offloaders racing write the same bytes to the same key.

When: :class:`BackgroundOffloader` runs in a writer's process whenever the writer completes a segment (it rides on
the writer's retention trigger), for every completed segment of the log that completed ``offloadThresholdHours``
ago or more (0: at once; negative: never by itself). With 0, a writer's ``close()`` offloads the segment it just
completed before it returns (waiting at most ``coldStoreRequestTimeoutSeconds``), so a short-lived writer leaves
no segment hot-only. ``dlog offload NAME...|--all`` catches up by hand. An outage of
the cold store never blocks writes: the background run fails (a retriable ``ColdStoreError``, logged, counted in
``dlog_segstore_op_errors_total{store="cold",op="offload"}``) and tries again ``offloadRetryIntervalSeconds`` later,
until it succeeds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from storage.cold.segment_object import SegmentObjectWriter
from storage.common.stats import store_stats
from storage.config import Config
from storage.errors import ColdStoreError, DLError, IllegalStateError, LedgerNotFoundError, LogSegmentNotFoundError
from storage.formats.segment_metadata import LogSegmentMetadata
from storage.log.layout import LogMetadata
from storage.log.tiered import ColdRecord, TieredSegmentStore

__all__ = ["BackgroundOffloader", "OffloadReport", "object_key", "offload_log", "offload_segment"]

log = logging.getLogger(__name__)


def object_key(log_name: str, seg: LogSegmentMetadata) -> str:
    """The cold object key of ``seg`` of ``log_name`` (relative to the cold store's prefix)."""
    return f"{log_name}/{seg.lssn:018d}-{seg.ledger_id}.dlseg"


def _now_ms() -> int:
    return int(time.time() * 1000)


def offload_segment(tiered: TieredSegmentStore, meta: LogMetadata, seg: LogSegmentMetadata) -> ColdRecord:
    """Copy the completed segment ``seg`` to cold, verify it, record it; returns its record (the existing one if
    it was offloaded before).

    Raises:
        IllegalStateError: ``seg`` is in progress.
        LogSegmentNotFoundError: its hot ledger is gone and it was never offloaded (the data is lost).
        ColdStoreError: the write or its verification failed (retriable for an outage).
        CorruptedEntryError, SegmentStoreError: reading the hot ledger failed. MetadataError.
    """
    if seg.in_progress:
        raise IllegalStateError(
            f"log {meta.paths.name!r}: segment {seg.lssn} is in progress; only completed ones offload"
        )
    rec = tiered.index.get(seg.ledger_id)
    if rec is not None:
        return rec
    try:
        last = tiered.hot.info(seg.ledger_id).last_entry_id
    except LedgerNotFoundError:
        raise LogSegmentNotFoundError(
            f"log {meta.paths.name!r}: segment {seg.lssn} (ledger {seg.ledger_id}) has no hot copy and no cold copy"
        ) from None
    writer = SegmentObjectWriter(
        log=meta.paths.name, lssn=seg.lssn, ledger_id=seg.ledger_id, segment_metadata=seg.serialize()
    )
    entries: Iterator[tuple[int, bytes | memoryview]] = (
        tiered.hot.read_entry_buffers(seg.ledger_id, 0, last) if last >= 0 else iter(())
    )
    key = object_key(meta.paths.name, seg)
    stats = store_stats("cold")
    t0 = time.perf_counter()
    try:
        put = tiered.cold.put_verified(key, writer.chunks(entries))
    except BaseException:
        stats.error("offload")
        raise
    stats.observe("offload", time.perf_counter() - t0, put.size)
    rec = ColdRecord(
        log=meta.paths.name,
        lssn=seg.lssn,
        ledger_id=seg.ledger_id,
        key=key,
        size=put.size,
        sha256=put.sha256,
        entries=writer.entries,
        data_bytes=writer.data_bytes,
        offloaded_ms=_now_ms(),
    )
    tiered.index.add(rec)
    log.info(
        "offloaded segment %d of %r (%d entries, %d bytes) to %s", seg.lssn, meta.paths.name, rec.entries, rec.size, key
    )
    return rec


@dataclass
class OffloadReport:
    """What :func:`offload_log` did: records of the segments it offloaded, and how many were offloaded before."""

    offloaded: list[ColdRecord] = field(default_factory=list)
    already: int = 0
    not_due: list[LogSegmentMetadata] = field(default_factory=list)
    #: The highest LSSN of the completed segments looked at (-1: none).
    through_lssn: int = -1


def offload_log(
    tiered: TieredSegmentStore,
    meta: LogMetadata,
    *,
    completed_before_ms: int | None = None,
    from_lssn: int = 0,
) -> OffloadReport:
    """Offload every completed segment of the log not offloaded yet (oldest first), only those that completed
    before ``completed_before_ms`` if given, and only from LSSN ``from_lssn`` on (the caller knows the ones before
    are offloaded). Segments whose hot copy is gone without a cold copy are skipped (logged): nothing can be copied.

    Raises:
        ColdStoreError: at the first segment whose offload failed (those before it stay offloaded).
        LogNotFoundError, MetadataError, SegmentStoreError, CorruptedEntryError.
    """
    report = OffloadReport()
    segments = [s for s in meta.segments() if not s.in_progress and s.lssn >= from_lssn]
    done = tiered.index.get_many([s.ledger_id for s in segments])
    for seg in segments:
        report.through_lssn = max(report.through_lssn, seg.lssn)
        if seg.ledger_id in done:
            report.already += 1
            continue
        if completed_before_ms is not None and seg.completion_time_ms >= completed_before_ms:
            report.not_due.append(seg)
            continue
        try:
            report.offloaded.append(offload_segment(tiered, meta, seg))
        except LogSegmentNotFoundError as e:
            log.warning("%s", e)
    return report


class BackgroundOffloader:
    """Offloads a log's completed segments on a background thread of the writer's process (one run at a time;
    a trigger during a run makes one more run)."""

    def __init__(self, meta: LogMetadata, tiered: TieredSegmentStore, conf: Config) -> None:
        self._meta = meta
        self._tiered = tiered
        self._threshold_h = float(conf.get("offloadThresholdHours"))
        self._retry_s = max(0.05, float(conf.get("offloadRetryIntervalSeconds")))
        self._lock = threading.Lock()
        self._running = False
        self._again = False
        self._timer: threading.Timer | None = None
        self._from_lssn = 0  # every completed segment below this LSSN is offloaded (a run need not look again)
        self._idle = threading.Event()
        self._idle.set()
        #: Runs that failed (for tests and ``dlog stats``: also ``dlog_segstore_op_errors_total``).
        self.failures = 0
        self.last_error: DLError | None = None

    @property
    def enabled(self) -> bool:
        return self._threshold_h >= 0

    def trigger(self) -> None:
        """Start a run now (or after the current one)."""
        if not self.enabled:
            return
        with self._lock:
            if self._running:
                self._again = True
                return
            self._running = True
            self._idle.clear()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        threading.Thread(target=self._run, name=f"dl-offload-{self._meta.paths.name}", daemon=True).start()

    def _schedule(self, delay_s: float) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(delay_s, self.trigger)
            self._timer.daemon = True
            self._timer.start()

    def _run(self) -> None:
        while True:
            next_due_s: float | None = None
            try:
                now = _now_ms()
                cutoff = now - int(self._threshold_h * 3_600_000)
                report = offload_log(
                    self._tiered, self._meta, completed_before_ms=cutoff + 1, from_lssn=self._from_lssn
                )
                if report.not_due:
                    due = min(s.completion_time_ms for s in report.not_due) + int(self._threshold_h * 3_600_000)
                    next_due_s = max(0.05, (due - now) / 1000.0)
                    self._from_lssn = max(self._from_lssn, min(s.lssn for s in report.not_due))
                else:  # everything up to what it looked at is offloaded (or lost in both tiers)
                    self._from_lssn = max(self._from_lssn, report.through_lssn + 1)
            except ColdStoreError as e:
                self.failures += 1
                self.last_error = e
                log.warning(
                    "offload of %r failed (%s); trying again in %.1fs: %s",
                    self._meta.paths.name,
                    "retriable" if e.retriable else "not retriable",
                    self._retry_s,
                    e,
                )
                next_due_s = self._retry_s
            except DLError as e:  # the log was deleted, the namespace closed, the hot store failed ...
                self.failures += 1
                self.last_error = e
                log.warning("offload of %r failed: %s", self._meta.paths.name, e)
            with self._lock:
                if self._again:
                    self._again = False
                    continue
                self._running = False
                self._idle.set()
            if next_due_s is not None:
                self._schedule(next_due_s)
            return

    def offload_due_now(self, timeout_s: float) -> bool:
        """Run once for every segment due (its writer is closing, and would take the background run with it) and
        wait for that run, at most ``timeout_s``; True when it finished. A failure is logged and counted as in the
        background; the segments left go with the next writer's first roll, or ``dlog offload``."""
        if not self.enabled or self._threshold_h > 0:
            return True
        self.trigger()
        if self._idle.wait(min(1.0, timeout_s)):
            return True
        log.info(
            "closing the writer of %r: waiting up to %.0fs for the offload of its last segment to the cold store",
            self._meta.paths.name,
            timeout_s,
        )
        return self._idle.wait(max(0.0, timeout_s - 1.0))

    def close(self) -> None:
        """Cancel a scheduled retry (a run in progress finishes)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
