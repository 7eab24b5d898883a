"""A log's segment list, cached for positioning (DistributedLog's ``LogSegmentMetadataCache``).

Opening a reader, positioning by txid, ``read_arrow`` and the log queries all start from the
log's segment list; reading it whole costs one metadata read per segment (a ZooKeeper ``get``
each), so the cost of opening grew with the log (measured: ``bench/bench_positioning.py``). The
cache keeps the parsed list and re-reads only what changed:

* every :meth:`SegmentListCache.get` lists the segment names (one round trip, names only) and
  compares them with the cached ones; new names are read, vanished ones dropped, so a segment
  started, completed or purged by any process is seen at once, with no window;
* a metadata watch on the log's ``ledgers`` node (registered before the first read) marks the
  whole list stale on any change there; the next ``get`` then re-reads every segment. This
  catches what names alone cannot: a truncation rewrites a segment's metadata under the same
  name. Until the watch event arrives (milliseconds) a reader may see the previous truncation
  status, as with DistributedLog's cache: data marked truncated but not yet purged stays readable.
  Changes made through the same :class:`~storage.impl.layout.LogMetadata` (this log manager's own
  writer truncating, rolling or purging) invalidate it at once.

Writers never use it: they read the metadata directly and act under versions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from storage.errors import LogNotFoundError, NoNodeError
from storage.impl.layout import LogMetadata
from storage.segment_metadata import LogSegmentMetadata, assign_start_sequence_ids

__all__ = ["SegmentListCache"]


class SegmentListCache:
    """The segment list of one log, kept up to date by name comparison and a metadata watch."""

    def __init__(self, meta: LogMetadata) -> None:
        self._meta = meta
        self._lock = threading.Lock()
        self._by_name: dict[str, LogSegmentMetadata] = {}
        self._assigned: list[LogSegmentMetadata] = []
        self._names: frozenset[str] = frozenset()
        self._stale = True
        self._cancel: Callable[[], None] | None = None
        self._closed = False
        meta.on_segments_changed.append(self.invalidate)

    def invalidate(self) -> None:
        """Mark the whole list stale (the next :meth:`get` re-reads every segment)."""
        self._stale = True

    def _changed(self, _path: str) -> None:
        self.invalidate()

    def get(self) -> list[LogSegmentMetadata]:
        """Every segment, ascending by LSSN, with start sequence ids assigned (a new list).

        Raises:
            LogNotFoundError: the log does not exist. MetadataError.
        """
        with self._lock:
            if self._cancel is None and not self._closed:
                self._cancel = self._meta.store.watch(self._meta.paths.ledgers, self._changed)
            stale, self._stale = self._stale, False
            try:
                segments = self._read(stale)
            except BaseException:
                self._stale = True
                raise
            return list(segments)

    def _read(self, stale: bool) -> list[LogSegmentMetadata]:
        paths = self._meta.paths
        try:
            names = frozenset(self._meta.store.children(paths.ledgers))
        except NoNodeError:
            raise LogNotFoundError(f"log {paths.name!r} does not exist") from None
        if not stale and names == self._names:
            return self._assigned
        keep = {} if stale else {n: s for n, s in self._by_name.items() if n in names}
        fetch = sorted(names - keep.keys())
        got = self._meta.store.get_many([paths.segment(n) for n in fetch]) if fetch else []
        for name, value in zip(fetch, got, strict=True):
            if value is not None:  # else removed between listing and reading (purge/complete)
                keep[name] = LogSegmentMetadata.parse(paths.segment(name), value.value)
        ordered = sorted(keep.values(), key=LogSegmentMetadata.sort_key)
        self._by_name = keep
        self._names = frozenset(keep)
        self._assigned = assign_start_sequence_ids(ordered)
        return self._assigned

    def close(self) -> None:
        """Cancel the watch. Idempotent."""
        with self._lock:
            self._closed = True
            cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()
        if self.invalidate in self._meta.on_segments_changed:
            self._meta.on_segments_changed.remove(self.invalidate)
