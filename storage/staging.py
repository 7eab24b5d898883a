"""Stage-then-publish: write records where no reader can see them, then make them part of a log
atomically, together with a commit record. The storage half of the exactly-once Spark sink.

* :func:`stage_records` writes records into a new, sealed ledger and registers it under
  ``<ns>/.staging/<ledger id>`` (JSON: creation time, owner). No segment references the ledger,
  so no reader sees it.
* :func:`publish` takes the log's write lock, recovers any in-progress segment, reads the log's
  commit record (``<log root>/commit``) and asks ``decide(previous)`` whether to go on; then ONE
  versioned multi-operation appends every staged ledger as a completed segment (in the given
  order, next LSSNs, chained start sequence ids), bumps ``/ledgers`` and ``/maxtxid``, writes the
  new commit record and deletes the staging registrations. All of it, or none of it.
* :func:`discard` deletes staged ledgers that will never be published; :func:`sweep` deletes
  those whose registration is older than a grace period (their writer died).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

from storage.config import Config
from storage.entry import EntryBuilder
from storage.errors import (
    InvalidArgumentError,
    LogRecordTooLongError,
    MetadataError,
    NoNodeError,
    TransactionIdOutOfOrderError,
)
from storage.impl.layout import LogMetadata, join
from storage.impl.names import validate_log_name
from storage.impl.namespace import Namespace
from storage.impl.write_handler import WriteHandler, now_ms
from storage.metastore.base import Create, Delete, Op, SetData
from storage.record import MAX_LOGRECORD_SIZE, MAX_LOGRECORDSET_SIZE, MAX_TXID, LogRecord
from storage.segment_metadata import LogSegmentMetadata, compute_start_sequence_id

STAGING_ROOT = "/.staging"
COMMIT_NODE = "commit"
_ENTRY_BYTES = 256 * 1024


@dataclass(frozen=True)
class StagedSegment:
    """A sealed ledger of records waiting to be published (picklable, JSON-able)."""

    ledger_id: int
    record_count: int
    first_txid: int
    last_txid: int
    last_entry_id: int
    last_slot_id: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, int]) -> StagedSegment:
        """Raises InvalidArgumentError on a malformed dict."""
        try:
            return cls(**{k: int(d[k]) for k in cls.__dataclass_fields__})
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgumentError(f"malformed staged segment {d!r}: {e}") from None


def _staging_path(ns: Namespace, ledger_id: int) -> str:
    return join(ns.root, STAGING_ROOT, str(ledger_id))


def stage_records(ns: Namespace, records: Iterable[tuple[int, bytes]]) -> StagedSegment | None:
    """Write ``(txid, payload)`` records, in order, into a new sealed ledger; None if there were none.

    Raises:
        TransactionIdOutOfOrderError: a txid is negative, MAX_TXID, or below the previous one.
        LogRecordTooLongError, InvalidArgumentError: a bad record. SegmentStoreError, MetadataError.
    """
    ns.check_open()
    ledger = None
    builder = EntryBuilder()
    count, first, last, position = 0, -1, -1, 0
    last_slot = -1

    def transmit() -> None:
        nonlocal last_slot
        assert ledger is not None
        if builder.num_records:
            last_slot = builder.num_slots - 1
            ledger.append_async(builder.to_bytes())  # group-committed; close() waits for all
            builder.clear()

    try:
        for txid, payload in records:
            rec = LogRecord(txid, payload)
            if txid < 0 or txid >= MAX_TXID or txid < last:
                raise TransactionIdOutOfOrderError(f"staged txid {txid} after {last}", txid=txid, last_txid=last)
            if rec.persistent_size > MAX_LOGRECORD_SIZE:
                raise LogRecordTooLongError(f"record of {rec.persistent_size} bytes exceeds {MAX_LOGRECORD_SIZE}")
            if ledger is None:
                ledger = ns.segstore.create_ledger()
                reg = {"created_ms": now_ms(), "owner": f"{socket.gethostname()}:{os.getpid()}"}
                ns.metastore.create(_staging_path(ns, ledger.ledger_id), json.dumps(reg).encode(), make_parents=True)
            if builder.num_bytes + rec.persistent_size > min(_ENTRY_BYTES, MAX_LOGRECORDSET_SIZE):
                transmit()
            position += 1
            builder.add(rec, position)
            count += 1
            first = txid if first < 0 else first
            last = txid
        if ledger is None:
            return None
        transmit()
        last_entry = ledger.close()
    except BaseException:
        if ledger is not None:
            ledger.abort()
            discard(ns, [ledger.ledger_id])
        raise
    return StagedSegment(ledger.ledger_id, count, first, last, last_entry, last_slot)


def discard(ns: Namespace, ledger_ids: Sequence[int]) -> None:
    """Delete staged ledgers and their registrations (missing ones are fine).

    Raises:
        SegmentStoreError, MetadataError.
    """
    for lid in ledger_ids:
        ns.segstore.delete_ledger(lid)
        try:
            ns.metastore.delete(_staging_path(ns, lid))
        except NoNodeError:
            pass


def sweep(ns: Namespace, older_than_ms: int) -> list[int]:
    """Delete staged ledgers registered more than ``older_than_ms`` ago; returns their ids."""
    try:
        names = ns.metastore.children(join(ns.root, STAGING_ROOT))
    except NoNodeError:
        return []
    cutoff = now_ms() - older_than_ms
    stale = []
    for name, got in zip(names, ns.metastore.get_many([_staging_path(ns, int(n)) for n in names]), strict=True):
        try:
            created = int(json.loads(got.value)["created_ms"]) if got is not None else 0
        except (ValueError, KeyError, TypeError):
            created = 0
        if got is not None and created < cutoff:
            stale.append(int(name))
    discard(ns, stale)
    return stale


def read_commit(ns: Namespace, log: str) -> dict[str, object] | None:
    """The log's latest commit record, or None.

    Raises:
        LogNotFoundError, MetadataError (unreadable record).
    """
    meta = LogMetadata(ns.metastore, ns.paths_of(validate_log_name(log)))
    meta.ensure_exists()
    try:
        raw = ns.metastore.get(join(meta.paths.root, COMMIT_NODE)).value
    except NoNodeError:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        raise MetadataError(f"unreadable commit record of log {log!r}") from None
    return doc if isinstance(doc, dict) else None


@dataclass(frozen=True)
class Published:
    """What :func:`publish` did: the new segments (empty when skipped) and whether it skipped."""

    segments: list[LogSegmentMetadata]
    skipped: bool


def publish(
    ns: Namespace,
    log: str,
    staged: Sequence[StagedSegment],
    commit: dict[str, object],
    decide: Callable[[dict[str, object] | None], bool],
    conf: Config | None = None,
) -> Published:
    """Append ``staged`` to ``log`` as completed segments, in order, together with ``commit``, in
    one versioned transaction. ``decide(previous commit)`` returns False to skip (the staged
    ledgers are then discarded) or raises to refuse.

    Raises:
        OwnershipAcquireFailedError: a writer owns the log. TransactionIdOutOfOrderError: the
        staged txids are below the log's or out of order. MetadataVersionError: the log changed
        under the transaction. Whatever ``decide`` raises.
    """
    cfg = conf or ns.conf
    name = validate_log_name(log)
    ns.create_log(name, exist_ok=True)
    meta = LogMetadata(ns.metastore, ns.paths_of(name))
    lock = ns.metastore.lock(meta.paths.lock, ns.client_id, float(cfg.get("lockTimeoutSeconds")))
    try:
        WriteHandler(meta, ns.segstore, cfg, lock).recover()
        commit_path = join(meta.paths.root, COMMIT_NODE)
        current = ns.metastore.exists(commit_path)
        previous = read_commit(ns, name) if current is not None else None
        if not decide(previous):
            discard(ns, [s.ledger_id for s in staged])
            return Published([], skipped=True)
        max_lssn, max_txid = meta.max_lssn(), meta.max_txid()
        last = max_txid.value
        for s in staged:
            if s.first_txid < last:
                raise TransactionIdOutOfOrderError(
                    f"staged ledger {s.ledger_id} starts at txid {s.first_txid}, below {last} in log {name!r}",
                    txid=s.first_txid,
                    last_txid=last,
                )
            last = s.last_txid
        segments = meta.segments()
        created: list[LogSegmentMetadata] = []
        lssn = max_lssn.value
        for s in staged:
            lssn += 1
            inprog = LogSegmentMetadata.new_inprogress(
                path=meta.paths.segment(LogSegmentMetadata.inprogress_name(lssn)),
                version=int(cfg.get("ledgerMetadataLayoutVersion")),
                ledger_id=s.ledger_id,
                first_txid=s.first_txid,
                lssn=lssn,
                region_id=0,
            )
            start_seq = compute_start_sequence_id([*segments, *created], inprog)
            done = inprog.complete(
                last_txid=s.last_txid,
                record_count=s.record_count,
                last_entry_id=s.last_entry_id,
                last_slot_id=s.last_slot_id,
                completion_time_ms=now_ms(),
                start_sequence_id=start_seq,
                path=meta.paths.segment(LogSegmentMetadata.completed_name(lssn)),
            )
            created.append(done)
        data = json.dumps(commit, sort_keys=True).encode()
        ops: list[Op] = [Create(seg.path, seg.serialize()) for seg in created]
        ops += [
            SetData(meta.paths.ledgers, str(lssn).encode(), max_lssn.version),
            SetData(meta.paths.maxtxid, str(max(last, max_txid.value)).encode(), max_txid.version),
            SetData(commit_path, data, current) if current is not None else Create(commit_path, data),
        ]
        ops += [Delete(_staging_path(ns, s.ledger_id)) for s in staged]
        ns.metastore.multi(ops)
        return Published(created, skipped=False)
    finally:
        lock.release()


__all__ = ["Published", "StagedSegment", "discard", "publish", "read_commit", "stage_records", "sweep"]
