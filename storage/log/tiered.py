"""Tiered reads: the segment store of a namespace bound to a cold store.

:class:`TieredSegmentStore` wraps the hot segment store (local files or RADOS) and is what the namespace hands to
everything as ``ns.segstore``: writers, readers, ``read_arrow``, the Spark source's planning and reads, the Java
shim and ``dlog`` all go through it unchanged. Every operation goes to the hot store; a read of a ledger the hot
store does not have (purged by tiered retention, or lost) is served from the ledger's cold copy instead, if it was
offloaded: ``info``, ``read_entries``, ``read_entry_buffers``, ``wait_for_lac`` and ``fence`` answer as for a closed
ledger. ``delete_ledger`` deletes the hot copy only. A read that loses the hot ledger half-way (purged meanwhile)
continues from cold at the next entry.

Where offload state lives: one metadata node per offloaded ledger, ``<namespace root>/.cold/<ledger id>``, holding
a JSON :class:`ColdRecord` (log, LSSN, object key, size, SHA-256, entries). DistributedLog's segment metadata is not
changed; ``.cold`` is a reserved name (hidden from ``list_logs``). A record is written only after the object was
written and read back equal, so "has a record" means "offloaded and verified".
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass

from storage.cold.base import ColdStore
from storage.cold.segment_object import ColdSegment
from storage.common.stats import store_stats
from storage.errors import DLError, LedgerNotFoundError, MetadataError, NodeExistsError, NoNodeError
from storage.log.layout import join
from storage.metastore.base import ANY_VERSION, Create, Delete, MetadataStore, Op
from storage.segstore.base import LedgerInfo, LedgerWriter, SegmentStore

__all__ = ["COLD_INDEX", "ColdIndex", "ColdRecord", "TieredSegmentStore", "forget_cold_copies"]

log = logging.getLogger(__name__)

#: The namespace child holding one node per offloaded ledger.
COLD_INDEX = ".cold"
_OPEN_SEGMENTS = 32  # cold objects kept open (index read) per namespace


@dataclass(frozen=True)
class ColdRecord:
    """The offload of one ledger: where its verified cold copy is and what it holds."""

    log: str
    lssn: int
    ledger_id: int
    key: str
    size: int
    sha256: str
    entries: int
    data_bytes: int
    offloaded_ms: int
    #: When retention or ``dlog purge`` deleted the hot copy on purpose (0: it was not): ``dlog restore`` brings
    #: back lost hot copies, not purged ones, unless asked.
    hot_purged_ms: int = 0

    def to_bytes(self) -> bytes:
        return json.dumps({"version": 1, **asdict(self)}, sort_keys=True).encode()

    @staticmethod
    def from_bytes(path: str, data: bytes) -> ColdRecord:
        """Raises MetadataError: unreadable record."""
        try:
            doc = json.loads(data.decode())
            return ColdRecord(
                str(doc["log"]),
                int(doc["lssn"]),
                int(doc["ledger_id"]),
                str(doc["key"]),
                int(doc["size"]),
                str(doc["sha256"]),
                int(doc["entries"]),
                int(doc["data_bytes"]),
                int(doc["offloaded_ms"]),
                int(doc.get("hot_purged_ms", 0)),
            )
        except (ValueError, KeyError, TypeError):
            raise MetadataError(f"unreadable cold record at {path}: {data[:80]!r}") from None


class ColdIndex:
    """The ``.cold`` records of a namespace (see the module docstring). Positive lookups are cached."""

    def __init__(self, metastore: MetadataStore, root: str) -> None:
        self.store = metastore
        self.dir = join(root, COLD_INDEX)
        self._cache: dict[int, ColdRecord] = {}
        self._lock = threading.Lock()

    def path(self, ledger_id: int) -> str:
        return join(self.dir, str(ledger_id))

    def get(self, ledger_id: int) -> ColdRecord | None:
        """The record of ``ledger_id``, or None if it was not offloaded. Raises MetadataError."""
        with self._lock:
            rec = self._cache.get(ledger_id)
        if rec is not None:
            return rec
        try:
            got = self.store.get(self.path(ledger_id))
        except NoNodeError:
            return None
        rec = ColdRecord.from_bytes(self.path(ledger_id), got.value)
        with self._lock:
            self._cache[ledger_id] = rec
        return rec

    def get_many(self, ledger_ids: Sequence[int]) -> dict[int, ColdRecord]:
        """Records of those of ``ledger_ids`` that were offloaded (fresh reads). Raises MetadataError."""
        paths = [self.path(i) for i in ledger_ids]
        out: dict[int, ColdRecord] = {}
        for lid, path, got in zip(ledger_ids, paths, self.store.get_many(paths), strict=True):
            if got is not None:
                out[lid] = ColdRecord.from_bytes(path, got.value)
        return out

    def ledger_ids(self) -> list[int]:
        """Every offloaded ledger id of the namespace. Raises MetadataError."""
        try:
            return sorted(int(n) for n in self.store.children(self.dir) if n.isdigit())
        except NoNodeError:
            return []

    def add(self, rec: ColdRecord) -> None:
        """Record an offload (an existing record of the same ledger is kept). Raises MetadataError."""
        try:
            self.store.create(self.path(rec.ledger_id), rec.to_bytes(), make_parents=True)
        except NodeExistsError:
            pass

    def forget(self, ledger_id: int) -> None:
        """Delete the record of ``ledger_id`` (missing is fine). Raises MetadataError."""
        with self._lock:
            self._cache.pop(ledger_id, None)
        try:
            self.store.delete(self.path(ledger_id))
        except NoNodeError:
            pass

    def mark_hot_purged(self, rec: ColdRecord, now_ms: int) -> None:
        """Record that the hot copy of ``rec``'s ledger is deleted on purpose (before deleting it). Raises
        MetadataError."""
        marked = dataclasses.replace(rec, hot_purged_ms=now_ms)
        self.store.set(self.path(rec.ledger_id), marked.to_bytes(), ANY_VERSION)
        with self._lock:
            self._cache[rec.ledger_id] = marked

    def move_ops(self, rec: ColdRecord, new_ledger_id: int) -> tuple[list[Op], ColdRecord]:
        """Metadata ops that move ``rec`` to ``new_ledger_id`` (restore gave the segment a new hot ledger)."""
        moved = dataclasses.replace(rec, ledger_id=new_ledger_id, hot_purged_ms=0)
        with self._lock:
            self._cache.pop(rec.ledger_id, None)
        ops: list[Op] = [
            Delete(self.path(rec.ledger_id), ANY_VERSION),
            Create(self.path(new_ledger_id), moved.to_bytes()),
        ]
        return ops, moved

    def ensure_dir(self) -> None:
        """Create the index node if missing (before a multi that creates records in it)."""
        if self.store.exists(self.dir) is None:
            try:
                self.store.create(self.dir, b"", make_parents=True)
            except NodeExistsError:
                pass


class TieredSegmentStore(SegmentStore):
    """The hot segment store, with reads of offloaded ledgers the hot store no longer has served from cold."""

    def __init__(self, hot: SegmentStore, cold: ColdStore, metastore: MetadataStore, root: str = "/") -> None:
        self.hot = hot
        self.cold = cold
        self.index = ColdIndex(metastore, root)
        self._segments: OrderedDict[int, ColdSegment] = OrderedDict()
        self._lock = threading.Lock()
        self._stats = store_stats("cold")

    # --- cold side ---------------------------------------------------------------------------
    def cold_segment(self, ledger_id: int, cause: LedgerNotFoundError | None = None) -> ColdSegment:
        """The cold copy of ``ledger_id`` (opened lazily, cached).

        Raises:
            LedgerNotFoundError: the ledger was never offloaded (``cause``, or a new one). MetadataError.
        """
        with self._lock:
            seg = self._segments.get(ledger_id)
            if seg is not None:
                self._segments.move_to_end(ledger_id)
                return seg
        rec = self.index.get(ledger_id)
        if rec is None:
            if cause is not None:
                raise cause
            raise LedgerNotFoundError(f"ledger {ledger_id} does not exist (hot or cold)")
        seg = ColdSegment(self.cold, rec.key, ledger_id=ledger_id)
        with self._lock:
            seg = self._segments.setdefault(ledger_id, seg)
            while len(self._segments) > _OPEN_SEGMENTS:
                _, old = self._segments.popitem(last=False)
                old.close()
        return seg

    def hot_exists(self, ledger_id: int) -> bool:
        """Whether the hot store still has ``ledger_id``. Raises SegmentStoreError."""
        try:
            self.hot.info(ledger_id)
            return True
        except LedgerNotFoundError:
            return False

    def where(self, ledger_id: int) -> str:
        """``"hot"``, ``"cold"``, ``"both"`` or ``"none"``: where the data of ``ledger_id`` lives."""
        hot = self.hot_exists(ledger_id)
        cold = self.index.get(ledger_id) is not None
        return {(True, True): "both", (True, False): "hot", (False, True): "cold"}.get((hot, cold), "none")

    def _cold_last(self, ledger_id: int, cause: LedgerNotFoundError) -> int:
        rec = self.index.get(ledger_id)
        if rec is None:
            raise cause
        return rec.entries - 1

    def _from_cold(
        self, ledger_id: int, first: int, last: int, cause: LedgerNotFoundError
    ) -> Iterator[tuple[int, memoryview]]:
        seg = self.cold_segment(ledger_id, cause)  # raises the hot store's error if never offloaded
        return self._stats.timed_reads("cold_read", seg.entries(first, last))

    def _tiered(
        self,
        ledger_id: int,
        first: int,
        last: int,
        hot_read: Callable[[int, int, int], Iterator[tuple[int, bytes | memoryview]]],
    ) -> Iterator[tuple[int, bytes | memoryview]]:
        try:
            it = hot_read(ledger_id, first, last)
        except LedgerNotFoundError as e:
            return self._from_cold(ledger_id, first, last, e)
        return self._continue_from_cold(it, ledger_id, first, last)

    def _continue_from_cold(
        self, it: Iterator[tuple[int, bytes | memoryview]], ledger_id: int, first: int, last: int
    ) -> Iterator[tuple[int, bytes | memoryview]]:
        nxt = first
        try:
            for entry_id, data in it:
                yield entry_id, data
                nxt = entry_id + 1
        except LedgerNotFoundError as e:  # the hot copy went away (purged) while we read
            if nxt <= last:
                yield from self._from_cold(ledger_id, nxt, last, e)

    # --- SegmentStore ------------------------------------------------------------------------
    def allocate_ledger_id(self) -> int:
        return self.hot.allocate_ledger_id()

    def create_ledger(self, ledger_id: int | None = None) -> LedgerWriter:
        return self.hot.create_ledger(ledger_id)

    def fence(self, ledger_id: int) -> int:
        try:
            return self.hot.fence(ledger_id)
        except LedgerNotFoundError as e:
            return self._cold_last(ledger_id, e)

    def info(self, ledger_id: int) -> LedgerInfo:
        try:
            return self.hot.info(ledger_id)
        except LedgerNotFoundError as e:
            rec = self.index.get(ledger_id)
            if rec is None:
                raise e from None
            return LedgerInfo(
                ledger_id, closed=True, fenced=False, last_entry_id=rec.entries - 1, length_bytes=rec.data_bytes
            )

    def read_entries(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        for entry_id, data in self._tiered(ledger_id, first, last, self.hot.read_entries):
            yield entry_id, data if isinstance(data, bytes) else bytes(data)

    def read_entry_buffers(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes | memoryview]]:
        return self._tiered(ledger_id, first, last, self.hot.read_entry_buffers)

    def wait_for_lac(self, ledger_id: int, known_lac: int, timeout_s: float) -> int:
        try:
            return self.hot.wait_for_lac(ledger_id, known_lac, timeout_s)
        except LedgerNotFoundError as e:
            return self._cold_last(ledger_id, e)

    def delete_ledger(self, ledger_id: int) -> None:
        """Delete the HOT copy of a ledger (its cold copy stays; see :mod:`storage.log.retention`)."""
        self.hot.delete_ledger(ledger_id)

    def list_ledgers(self) -> list[int]:
        return self.hot.list_ledgers()

    def watch(self, callback: Callable[[int], None]) -> Callable[[], None]:
        return self.hot.watch(callback)

    def close(self) -> None:
        with self._lock:
            segments, self._segments = list(self._segments.values()), OrderedDict()
        for seg in segments:
            seg.close()
        try:
            self.hot.close()
        finally:
            self.cold.close()


def forget_cold_copies(tiered: TieredSegmentStore, log_name: str, ledger_ids: Sequence[int]) -> None:
    """After a log was deleted: delete the cold copies and records of its ledgers (failures are logged: at worst
    objects without a log remain)."""
    for ledger_id in ledger_ids:
        try:
            rec = tiered.index.get(ledger_id)
            if rec is not None:
                tiered.cold.delete(rec.key)
                tiered.index.forget(ledger_id)
        except DLError as e:
            log.warning("log %r deleted, but not the cold copy of its ledger %d: %s", log_name, ledger_id, e)
