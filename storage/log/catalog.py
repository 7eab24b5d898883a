"""The names and segment lists of many logs at once, kept current by watches: what a reader that polls
thousands of logs (the Spark source's every trigger, ``dlog list``) asks the metadata store.

Asked one log at a time, a namespace of 10,000 logs costs 10,000 round trips or more per question.
This view asks the store only about what changed, as DistributedLog's readers keep their segment
caches: each log's ``ledgers`` node (and each node of the namespace's tree) is read with a one-shot
watch (:meth:`~storage.metastore.base.MetadataStore.children_many`), and a node is read again only
after its watch fired. Before answering, one :meth:`~storage.metastore.base.MetadataStore.settle`
round trip makes sure that every change committed before the call has fired its watch, so an answer
is never older than the call (a writer's segment completed before the call is seen; what a writer
acknowledged inside a segment is the segment store's business: the in-progress segment's LAC).
Reads that are needed are pipelined: one round trip for all changed logs, one for their segments.

A reconnect (a new ZooKeeper session included) fires every pending watch, so everything is read
again then: changes made while disconnected are never missed. Backends without a watch barrier (the
embedded store, whose reads are local) are simply read again in full on every call, still in bulk.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from storage.formats.segment_metadata import LogSegmentMetadata
from storage.log.layout import LOG_ROOT, LogPaths, join
from storage.log.names import is_reserved
from storage.log.segment_cache import segment_list
from storage.metastore.base import MetadataStore

__all__ = ["LogCatalog"]


class LogCatalog:
    """A namespace's log names and the segment lists of the logs asked about, read in bulk and re-read
    only where a watch fired. Thread-safe: one refresh at a time."""

    def __init__(self, store: MetadataStore, root: str, *, skip_min_version_check: bool = False) -> None:
        self._store = store
        self._root = root
        self._skip_min_version_check = skip_min_version_check
        self._lock = threading.Lock()
        self._flag_lock = threading.Lock()
        # the namespace tree: node path -> its children (directories and the root) or None (a log)
        self._tree: dict[str, list[str] | None] = {}
        self._tree_dirty: set[str] = {root}
        # segment lists: log name -> (children version of its ledgers node, its znode names, segments)
        self._segs: dict[str, tuple[int, list[str], list[LogSegmentMetadata]]] = {}
        self._segs_dirty: set[str] = set()
        self._ledgers_of: dict[str, str] = {}  # ledgers path -> log name

    # --- watches ------------------------------------------------------------------------------
    def _tree_changed(self, path: str) -> None:
        with self._flag_lock:
            self._tree_dirty.add(path)

    def _segments_changed(self, path: str) -> None:
        name = self._ledgers_of.get(path)
        if name is not None:
            with self._flag_lock:
                self._segs_dirty.add(name)

    # --- names --------------------------------------------------------------------------------
    def list_logs(self) -> list[str]:
        """Every log's name, sorted (nested names included; reserved names hidden), as of this call.

        Raises:
            MetadataError (MetadataConnectionError: the store cannot be reached). AlreadyClosedError.
        """
        with self._lock:
            watched = self._store.settle()
            with self._flag_lock:
                todo = set(self._tree_dirty) if watched else {self._root}
                self._tree_dirty.clear()
            if not watched:
                self._tree.clear()
            while todo:
                found: set[str] = set()
                self._read_nodes(sorted(todo), watched, found)
                todo = found
            return sorted(self._names_under(self._root, ""))

    def _read_nodes(self, paths: list[str], watched: bool, todo: set[str]) -> None:
        """Read the children of ``paths``; record logs and directories; put unknown children in ``todo``."""
        got = self._store.children_many(paths, watch=self._tree_changed if watched else None)
        for path, res in zip(paths, got, strict=True):
            if res is None:
                self._forget_subtree(path)
                continue
            kids = res[0]
            if path != self._root and LOG_ROOT in kids:
                self._forget_subtree(path)
                self._tree[path] = None
                continue
            kept = [k for k in kids if not is_reserved(k)]
            before = self._tree.get(path)
            for gone in set(before or ()) - set(kept):
                self._forget_subtree(join(path, gone))
            self._tree[path] = kept
            todo.update(join(path, k) for k in kept if join(path, k) not in self._tree)

    def _forget_subtree(self, path: str) -> None:
        kids = self._tree.pop(path, None)
        for k in kids or ():
            self._forget_subtree(join(path, k))

    def _names_under(self, path: str, prefix: str) -> list[str]:
        out: list[str] = []
        for k in self._tree.get(path) or ():
            child = join(path, k)
            if child not in self._tree:
                continue  # not read yet (a failed refresh): the next call reads it
            if self._tree[child] is None:
                out.append(prefix + k)
            else:
                out.extend(self._names_under(child, f"{prefix}{k}/"))
        return out

    # --- segments -----------------------------------------------------------------------------
    def segments(self, names: Sequence[str]) -> dict[str, list[LogSegmentMetadata]]:
        """The segment lists of ``names`` (ascending by LSSN, start sequence ids assigned as readers see
        them), as of this call; logs that do not exist are left out. Only logs whose list changed since
        the last call are read (in two pipelined round trips in all).

        Raises:
            UnexpectedError: bad segment metadata. MetadataError (MetadataConnectionError: the store cannot
            be reached). AlreadyClosedError.
        """
        with self._lock:
            watched = self._store.settle()
            with self._flag_lock:
                dirty = set(self._segs_dirty)
                self._segs_dirty.difference_update(names)
            stale = [n for n in names if not watched or n in dirty or n not in self._segs]
            if stale:
                self._read_segments(stale, watched)
            out: dict[str, list[LogSegmentMetadata]] = {}
            for n in names:
                hit = self._segs.get(n)
                if hit is not None:
                    out[n] = list(hit[2])
            return out

    def _read_segments(self, names: list[str], watched: bool) -> None:
        paths = [LogPaths(self._root, n) for n in names]
        for n, p in zip(names, paths, strict=True):
            self._ledgers_of[p.ledgers] = n
        listed = self._store.children_many(
            [p.ledgers for p in paths], watch=self._segments_changed if watched else None
        )
        changed: list[tuple[str, LogPaths, int, list[str]]] = []
        for n, p, res in zip(names, paths, listed, strict=True):
            if res is None:
                self._segs.pop(n, None)
                self._ledgers_of.pop(p.ledgers, None)
                continue
            kids, version = res
            hit = self._segs.get(n)
            if hit is not None and hit[0] == version and hit[1] == kids:
                continue
            changed.append((n, p, version, kids))
        wanted = [p.segment(k) for _, p, _, kids in changed for k in kids]
        values = iter(self._store.get_many(wanted))
        for n, p, version, kids in changed:
            ordered, complete = segment_list(
                p, kids, (next(values) for _ in kids), skip_min_version_check=self._skip_min_version_check
            )
            self._segs[n] = (version if complete else -2, kids if complete else [], ordered)
            if not complete:
                with self._flag_lock:
                    self._segs_dirty.add(n)
