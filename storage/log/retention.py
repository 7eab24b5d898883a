"""Truncation and retention (spec §6.8, §6.9).

* ``truncate(dlsn)`` only marks metadata: completed segments wholly before ``dlsn`` become
  TRUNCATED, the one containing it PARTIALLY_TRUNCATED with ``minActiveDLSN = dlsn``; an
  in-progress segment is never touched. All changes go in one multi.
* Purge deletes segments (ledger first, then znode) from the oldest while they qualify, and
  always keeps the newest completed segment.
"""

from __future__ import annotations

import logging
import threading

from storage.config import Config
from storage.errors import IllegalStateError, InvalidArgumentError
from storage.formats.dlsn import DLSN
from storage.formats.segment_metadata import LogSegmentMetadata, TruncationStatus
from storage.log.layout import LogMetadata
from storage.log.subscriptions import SubscriptionsStore
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
    needed_from = None  # lssn of the oldest segment a subscriber still needs
    if not conf.get("retentionIgnoresSubscribers"):
        positions = SubscriptionsStore(meta.store, meta.paths).list().values()
        needed_from = min((p.lssn for p in positions), default=None)
    purged = []
    for seg in purge_candidates(meta.segments()):
        truncated = seg.truncation_status == TruncationStatus.TRUNCATED
        if needed_from is not None and seg.lssn >= needed_from:
            break
        if (truncated or not explicit) and seg.completion_time_ms < timestamp_ms:
            if not dry_run:
                segstore.delete_ledger(seg.ledger_id)
                meta.delete_segment(seg)
            purged.append(seg)
        else:
            break
    if purged and not dry_run:
        log.info("purged %d log segments of %r", len(purged), meta.paths.name)
    return purged


class TtlPurger:
    """Runs a TTL purge (``logSegmentRetentionHours``) in the background, one at a time."""

    def __init__(self, meta: LogMetadata, segstore: SegmentStore, conf: Config) -> None:
        self._meta = meta
        self._segstore = segstore
        self._hours = float(conf.get("logSegmentRetentionHours"))
        self._conf = conf
        self._running = threading.Lock()
        self._thread: threading.Thread | None = None

    def set_retention_hours(self, hours: float) -> None:
        """Change ``logSegmentRetentionHours`` (dynamic configuration): the next trigger uses it."""
        self._hours = hours

    def trigger(self, now_ms: int) -> None:
        """Start a purge of segments older than ``now - retention`` unless one is running."""
        if self._hours <= 0 or not self._running.acquire(blocking=False):
            return
        cutoff = now_ms - int(self._hours * 3600 * 1000)
        if cutoff >= now_ms:
            self._running.release()
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
