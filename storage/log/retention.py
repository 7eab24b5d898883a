"""Truncation and retention (DistributedLog's ``truncate`` and purge).

* ``truncate(dlsn)`` only marks metadata: completed segments wholly before ``dlsn`` become
  TRUNCATED, the one containing it PARTIALLY_TRUNCATED with ``minActiveDLSN = dlsn``; an
  in-progress segment is never touched. All changes go in one multi.
* Purge deletes segments (ledger first, then znode) from the oldest while they qualify, and
  always keeps the newest completed segment.
* With a cold store (the namespace's segment store is a :class:`~storage.log.tiered.TieredSegmentStore`),
  retention is by tier: a purge deletes only the HOT copy of a qualifying segment, and only once its cold copy is
  verified (a segment not offloaded yet is offloaded first; if that fails it is kept, with everything after it):
  the segment's metadata stays and its records stay readable from cold. The cold copy (and with it the segment)
  goes once the segment completed ``coldSegmentRetentionHours`` ago (<= 0: never). Truncation
  (``explicitTruncationByApp``), subscriber positions and "keep the newest completed segment" apply to both tiers.
"""

from __future__ import annotations

import logging
import threading

from storage.config import Config
from storage.errors import DLError, IllegalStateError, InvalidArgumentError
from storage.formats.dlsn import DLSN
from storage.formats.segment_metadata import LogSegmentMetadata, TruncationStatus
from storage.log.layout import LogMetadata
from storage.log.offload import BackgroundOffloader, offload_segment
from storage.log.subscriptions import SubscriptionsStore
from storage.log.tiered import TieredSegmentStore
from storage.segstore.base import SegmentStore

log = logging.getLogger(__name__)


def truncate(meta: LogMetadata, dlsn: DLSN) -> bool:
    """Mark everything before ``dlsn`` truncated. Returns False (and does nothing) for
    ``DLSN.INVALID``.

    Raises:
        InvalidArgumentError: ``dlsn`` is not a DLSN.
        IllegalStateError: two segments would become partially truncated.
        MetadataError: the metadata changed under the multi.
    """
    if not isinstance(dlsn, DLSN):
        raise InvalidArgumentError(f"truncate needs a DLSN, got {type(dlsn).__name__}")
    if dlsn == DLSN.INVALID:
        return False
    changes: list[tuple[LogSegmentMetadata, LogSegmentMetadata]] = []
    partial: LogSegmentMetadata | None = None
    for seg in meta.segments():
        if seg.in_progress:
            break
        if seg.last_dlsn < dlsn:
            if seg.truncation_status != TruncationStatus.TRUNCATED:
                changes.append((seg, seg.with_truncation(TruncationStatus.TRUNCATED)))
        elif seg.first_dlsn < dlsn:
            if partial is not None:
                raise IllegalStateError(
                    f"two log segments ({partial.lssn}, {seg.lssn}) to partially truncate at {dlsn}"
                )
            partial = seg
            if seg.truncation_status == TruncationStatus.ACTIVE or (
                seg.truncation_status == TruncationStatus.PARTIALLY_TRUNCATED and seg.min_active_dlsn < dlsn
            ):
                changes.append((seg, seg.with_truncation(TruncationStatus.PARTIALLY_TRUNCATED, dlsn)))
        else:
            break
    meta.replace_segments(changes)
    return True


def purge_candidates(segments: list[LogSegmentMetadata]) -> list[LogSegmentMetadata]:
    """Completed segments before the first in-progress one, minus the newest of them."""
    completed: list[LogSegmentMetadata] = []
    for s in segments:
        if s.in_progress:
            break
        completed.append(s)
    return completed[:-1]


def purge_older_than(
    meta: LogMetadata,
    segstore: SegmentStore,
    conf: Config,
    timestamp_ms: int,
    *,
    now_ms: int,
    dry_run: bool = False,
) -> list[LogSegmentMetadata]:
    """Delete segments completed before ``timestamp_ms`` (TTL purge), oldest first; returns the
    purged ones (with ``dry_run``: the ones that would be, deleting nothing).

    The newest completed segment is always kept. With ``explicitTruncationByApp`` only segments
    already marked TRUNCATED go. A segment a subscriber of the log still needs (its position is in
    or before it, see :mod:`storage.log.subscriptions`) is kept, and so is every later one, unless
    ``retentionIgnoresSubscribers``.

    Raises:
        InvalidArgumentError: ``timestamp_ms`` is not an int, or not in the past.
        MetadataError, SegmentStoreError.
    """
    if not isinstance(timestamp_ms, int) or isinstance(timestamp_ms, bool):
        raise InvalidArgumentError(f"purge timestamp must be an int (ms since epoch), got {timestamp_ms!r}")
    if timestamp_ms >= now_ms:
        raise InvalidArgumentError(f"purge timestamp {timestamp_ms} is not in the past (now is {now_ms})")
    explicit = bool(conf.get("explicitTruncationByApp"))
    candidates = purge_candidates(meta.segments())
    if not any(seg.completion_time_ms < timestamp_ms for seg in candidates):
        return []  # nothing old enough (the cold purge's cutoff is no later): no need to read the subscribers
    needed_from = None  # lssn of the oldest segment a subscriber still needs
    if not conf.get("retentionIgnoresSubscribers"):
        positions = SubscriptionsStore(meta.store, meta.paths).list().values()
        needed_from = min((p.lssn for p in positions), default=None)
    purged = []
    tiered = segstore if isinstance(segstore, TieredSegmentStore) else None
    for seg in candidates:
        truncated = seg.truncation_status == TruncationStatus.TRUNCATED
        if needed_from is not None and seg.lssn >= needed_from:
            break
        if (truncated or not explicit) and seg.completion_time_ms < timestamp_ms:
            if tiered is not None:
                if not tiered.hot_exists(seg.ledger_id):
                    continue  # only the cold copy is left: its own retention decides (below)
                if not _offloaded(tiered, meta, seg, dry_run=dry_run):
                    break  # never delete the only copy
                if not dry_run:
                    rec = tiered.index.get(seg.ledger_id)
                    if rec is not None:  # on purpose: `dlog restore` brings back what was lost, not this
                        tiered.index.mark_hot_purged(rec, now_ms)
                    tiered.hot.delete_ledger(seg.ledger_id)
            elif not dry_run:
                segstore.delete_ledger(seg.ledger_id)
                meta.delete_segment(seg)
            purged.append(seg)
        else:
            break
    if tiered is not None:
        purged += _purge_cold(meta, tiered, conf, candidates, timestamp_ms, now_ms, needed_from, dry_run=dry_run)
    if purged and not dry_run:
        what = "hot copies of log segments" if tiered is not None else "log segments"
        log.info("purged %d %s of %r", len(purged), what, meta.paths.name)
    return purged


def _offloaded(tiered: TieredSegmentStore, meta: LogMetadata, seg: LogSegmentMetadata, *, dry_run: bool) -> bool:
    """Whether ``seg`` has a verified cold copy, offloading it now if not (a dry run only looks)."""
    if tiered.index.get(seg.ledger_id) is not None:
        return True
    if dry_run:
        return True  # a real purge would offload it first
    try:
        offload_segment(tiered, meta, seg)
        return True
    except DLError as e:
        log.warning("keeping the hot copy of segment %d of %r: its offload failed: %s", seg.lssn, meta.paths.name, e)
        return False


def _purge_cold(
    meta: LogMetadata,
    tiered: TieredSegmentStore,
    conf: Config,
    candidates: list[LogSegmentMetadata],
    timestamp_ms: int,
    now_ms: int,
    needed_from: int | None,
    *,
    dry_run: bool,
) -> list[LogSegmentMetadata]:
    """Delete whole segments (cold copy, any hot copy, metadata) older than ``coldSegmentRetentionHours`` (and
    than ``timestamp_ms``), oldest first, under the same rules as the hot purge."""
    hours = float(conf.get("coldSegmentRetentionHours"))
    if hours <= 0:
        return []
    cutoff = min(timestamp_ms, now_ms - int(hours * 3_600_000))
    explicit = bool(conf.get("explicitTruncationByApp"))
    out: list[LogSegmentMetadata] = []
    for seg in candidates:
        if needed_from is not None and seg.lssn >= needed_from:
            break
        truncated = seg.truncation_status == TruncationStatus.TRUNCATED
        if not ((truncated or not explicit) and seg.completion_time_ms < cutoff):
            break
        if not dry_run:
            rec = tiered.index.get(seg.ledger_id)
            tiered.hot.delete_ledger(seg.ledger_id)
            meta.delete_segment(seg)
            if rec is not None:
                tiered.cold.delete(rec.key)
                tiered.index.forget(seg.ledger_id)
        out.append(seg)
    return out


class TtlPurger:
    """Runs a TTL purge (``logSegmentRetentionHours``) in the background, one at a time."""

    def __init__(self, meta: LogMetadata, segstore: SegmentStore, conf: Config) -> None:
        self._meta = meta
        self._segstore = segstore
        self._hours = float(conf.get("logSegmentRetentionHours"))
        self._conf = conf
        self._running = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Offloads completed segments in the background when the namespace has a cold store (else None).
        self.offloader = BackgroundOffloader(meta, segstore, conf) if isinstance(segstore, TieredSegmentStore) else None

    def set_retention_hours(self, hours: float) -> None:
        """Change ``logSegmentRetentionHours`` (dynamic configuration): the next trigger uses it."""
        self._hours = hours

    def trigger(self, now_ms: int, segments: list[LogSegmentMetadata] | None = None) -> None:
        """Start a purge of segments older than ``now - retention`` unless one is running (and, with a cold store,
        a background offload). ``segments``: the log's segments as the caller knows them, if it does; when none of
        them may be purged yet, no purge starts (and nothing is read)."""
        if self.offloader is not None:
            self.offloader.trigger()
        if self._hours <= 0:
            return
        cutoff = now_ms - int(self._hours * 3600 * 1000)
        if cutoff >= now_ms:
            return
        if segments is not None and not any(s.completion_time_ms < cutoff for s in purge_candidates(segments)):
            return
        if not self._running.acquire(blocking=False):
            return

        def run() -> None:
            try:
                purge_older_than(self._meta, self._segstore, self._conf, cutoff, now_ms=now_ms)
            except Exception as e:  # a failed background purge is retried after the next roll
                log.warning("TTL purge of %r failed: %s", self._meta.paths.name, e)
            finally:
                self._running.release()

        self._thread = threading.Thread(target=run, name=f"ttl-purge-{self._meta.paths.name}", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
