"""Recovery from the loss of the hot store: rebuild a log's segments in the (fresh) segment store from their cold
copies (DistributedLog's "backup for disaster recovery").

For each completed segment whose hot ledger is missing and that has a cold copy (:func:`restore_log`): a new
ledger is made in the hot store, every entry of the cold copy is appended to it (each checked against its CRC32C
on the way), the ledger is closed, and then one metadata transaction points the segment at the new ledger and moves
its cold record along (``<ns>/.cold/<old id>`` → ``<ns>/.cold/<new id>``). Only the segment znode's ledger id changes,
in DistributedLog's own format. A segment with neither copy is reported lost; an in-progress segment cannot be
restored (it was never offloaded).

Ledger ids: a fresh hot store hands out ids from its start again, and an id the metadata still names for a lost
ledger must never be reused (a reader would read another segment's data). Before restoring,
:func:`reserve_past` moves the hot store's allocator past every ledger id the namespace's cold index and the log's
segments name. Run ``dlog restore --all`` before any writer uses a namespace whose hot store was replaced.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field

from storage.errors import DLError
from storage.log.layout import LogMetadata
from storage.log.tiered import TieredSegmentStore
from storage.metastore.base import ANY_VERSION, Create, Delete, Op

__all__ = ["RestoreReport", "reserve_past", "restore_log"]

log = logging.getLogger(__name__)
_IN_FLIGHT = 256


@dataclass
class RestoreReport:
    """What :func:`restore_log` did, by LSSN."""

    restored: list[tuple[int, int, int]] = field(default_factory=list)  # (lssn, old ledger id, new ledger id)
    present: list[int] = field(default_factory=list)  # hot copy there already
    purged: list[int] = field(default_factory=list)  # hot copy deleted on purpose (retention, dlog purge): left so
    lost: list[int] = field(default_factory=list)  # neither copy (or in progress without a hot ledger)
    bytes_restored: int = 0


def reserve_past(tiered: TieredSegmentStore, ledger_id: int) -> None:
    """Allocate (and drop) hot ledger ids until the next one exceeds ``ledger_id``.

    Raises:
        SegmentStoreError.
    """
    while tiered.hot.allocate_ledger_id() <= ledger_id:
        pass


def restore_log(tiered: TieredSegmentStore, meta: LogMetadata, *, purged: bool = False) -> RestoreReport:
    """Rebuild the missing hot ledgers of the log's segments from cold (see the module docstring). A hot copy that
    retention or ``dlog purge`` deleted on purpose is left so (reported in ``purged``) unless ``purged`` is True.

    Raises:
        LogNotFoundError. CorruptedEntryError: a cold copy is damaged (that segment is not restored; those
        before it are). ColdStoreError, SegmentStoreError, MetadataError.
    """
    report = RestoreReport()
    segments = meta.segments()
    missing = []
    for seg in segments:
        if tiered.hot_exists(seg.ledger_id):
            report.present.append(seg.lssn)
        elif seg.in_progress or (rec := tiered.index.get(seg.ledger_id)) is None:
            report.lost.append(seg.lssn)
        elif rec.hot_purged_ms and not purged:
            report.purged.append(seg.lssn)
        else:
            missing.append(seg)
    if not missing:
        return report
    known = [seg.ledger_id for seg in segments] + tiered.index.ledger_ids()
    reserve_past(tiered, max(known))
    tiered.index.ensure_dir()
    for seg in missing:
        rec = tiered.index.get(seg.ledger_id)
        assert rec is not None
        cold = tiered.cold_segment(seg.ledger_id)
        new_id = tiered.hot.allocate_ledger_id()
        writer = tiered.hot.create_ledger(new_id)
        pending: deque[Future[int]] = deque()
        nbytes = 0
        try:
            last = cold.last_entry_id
            if last >= 0:
                for _, data in cold.entries(0, last):
                    pending.append(writer.append_async(bytes(data)))
                    nbytes += len(data)
                    while len(pending) > _IN_FLIGHT:
                        pending.popleft().result()
            while pending:
                pending.popleft().result()
            writer.close()
        except BaseException:
            writer.abort()
            try:
                tiered.hot.delete_ledger(new_id)
            except DLError as e:
                log.warning("restore of segment %d of %r: could not delete ledger %d: %s", seg.lssn, rec.log, new_id, e)
            raise
        path = meta.paths.segment(seg.znode_name)
        moved = dataclasses.replace(seg, ledger_id=new_id)
        index_ops, _ = tiered.index.move_ops(rec, new_id)
        ops: list[Op] = [Delete(path, ANY_VERSION), Create(path, moved.serialize()), *index_ops]
        meta.store.multi(ops)
        report.restored.append((seg.lssn, seg.ledger_id, new_id))
        report.bytes_restored += nbytes
        log.info("restored segment %d of %r from cold into ledger %d (%d bytes)", seg.lssn, rec.log, new_id, nbytes)
    return report
