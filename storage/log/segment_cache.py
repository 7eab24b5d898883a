"""A log's segment list, cached for positioning (DistributedLog's ``LogSegmentMetadataCache``).

Opening a reader, positioning by txid, ``read_arrow`` and the log queries all start from the log's
segment list; reading it whole costs one metadata read per segment (a ZooKeeper ``get`` each), so without
a cache the cost of opening grows with the log (``bench/bench_positioning.py`` measures it). The cache keeps the
parsed list and checks it with one request per use: the ``ledgers`` node's children together with
their version (:meth:`~storage.metastore.base.MetadataStore.children_with_version`: ZooKeeper's
``cversion``, bumped by every child created or deleted). Segment metadata is only ever changed by
creating and deleting children (a segment started, completed, truncated — rewritten as delete +
create — or purged), so an unchanged version means an unchanged list: the cache is never stale, for
changes by this process or any other. A changed version re-reads the list.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from storage.errors import LogNotFoundError, NoNodeError
from storage.formats.segment_metadata import LogSegmentMetadata, assign_start_sequence_ids
from storage.log.layout import SEGMENT_LIST_ATTEMPTS, LogMetadata, LogPaths
from storage.metastore.base import Versioned

__all__ = ["SegmentListCache", "segment_list"]


class SegmentListCache:
    """The segment list of one log, re-read only when the children version of its ``ledgers`` node moved."""

    def __init__(self, meta: LogMetadata) -> None:
        self._meta = meta
        self._lock = threading.Lock()
        self._version: int | None = None
        self._names: list[str] = []
        self._segments: list[LogSegmentMetadata] = []

    def get(self) -> list[LogSegmentMetadata]:
        """Every segment, ascending by LSSN, with start sequence ids assigned (a new list).

        Raises:
            LogNotFoundError: the log does not exist. MetadataError.
        """
        paths = self._meta.paths
        store = self._meta.store
        with self._lock:
            for attempt in range(SEGMENT_LIST_ATTEMPTS):
                try:
                    names, version = store.children_with_version(paths.ledgers)
                except NoNodeError:
                    raise LogNotFoundError(f"log {paths.name!r} does not exist") from None
                if version == self._version and names == self._names:
                    return list(self._segments)
                self._segments, complete = segment_list(
                    paths,
                    names,
                    store.get_many([paths.segment(n) for n in names]),
                    skip_min_version_check=self._meta.skip_min_version_check,
                )
                self._version, self._names = (version, names) if complete else (None, [])
                # a node listed and gone when read was purged, or completed (its completed node replaces it, and
                # a list without either would hide the segment): list again
                if complete or attempt == SEGMENT_LIST_ATTEMPTS - 1:
                    break
            return list(self._segments)


def segment_list(
    paths: LogPaths,
    names: Sequence[str],
    values: Iterable[Versioned[bytes] | None],
    *,
    skip_min_version_check: bool = False,
) -> tuple[list[LogSegmentMetadata], bool]:
    """The read-side segment list (start sequence ids assigned) from the segment nodes ``names`` of a log and their
    values as read, and whether every one was still there (one removed between listing and reading moved the
    children version: read again next time).

    Raises:
        UnexpectedError: bad segment metadata.
    """
    segments = [
        LogSegmentMetadata.parse(paths.segment(n), v.value, skip_min_version_check=skip_min_version_check)
        for n, v in zip(names, values, strict=True)
        if v is not None
    ]
    ordered = assign_start_sequence_ids(sorted(segments, key=LogSegmentMetadata.sort_key))
    return ordered, len(segments) == len(names)
