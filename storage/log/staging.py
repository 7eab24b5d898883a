"""Stage-then-publish: write records where no reader can see them, then make them part of a log
atomically, together with a commit record. The storage half of the exactly-once Spark sink.

* :func:`stage_records` writes records into a new, sealed ledger and registers it under
  ``<ns>/.staging/<ledger id>`` (JSON: creation time, owner and the caller's ``tag``, written when
  the ledger is created so that even a writer killed half-way is recognisable). No segment
  references the ledger, so no reader sees it. :func:`list_staged` lists the registrations.
* :func:`publish` takes the log's write lock, recovers any in-progress segment, reads the log's
  commit record (``<log root>/commit``) and asks ``decide(previous)`` whether to go on; then ONE
  versioned multi-operation appends every staged ledger as a completed segment (in the given
  order, next LSSNs, chained start sequence ids), bumps ``/ledgers`` and ``/maxtxid``, writes the
  new commit record and deletes the staging registrations. All of it, or none of it.
  :func:`publish_many` does the same for several logs in one transaction. A log sealed with
  ``mark_end_of_stream`` refuses it (:class:`~storage.errors.EndOfStreamError`);
  :func:`check_not_sealed` tells before anything is staged.
* :func:`discard` deletes staged ledgers that will never be published; :func:`sweep` deletes
  those whose registration is older than a grace period (their writer died). A discarded ledger
  can never be published: the publishing transaction deletes its registration, and fails if it
  is gone.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from storage.config import Config
from storage.errors import (
    EndOfStreamError,
    InvalidArgumentError,
    LogNotFoundError,
    MetadataError,
    NodeExistsError,
    NoNodeError,
    TransactionIdOutOfOrderError,
    WriteCancelledError,
)
from storage.formats.arrow_entries import check_txids, encode_entries
from storage.formats.entry import decode_entry_columns
from storage.formats.record import MAX_LOGRECORDSET_SIZE, MAX_TXID
from storage.formats.recordset import codec_from_name
from storage.formats.segment_metadata import LogSegmentMetadata, compute_start_sequence_id
from storage.log import writer_state
from storage.log.layout import LogMetadata, join
from storage.log.names import validate_log_name
from storage.log.namespace import Namespace
from storage.log.retention import purge_older_than
from storage.log.write_handler import WriteHandler, now_ms
from storage.metastore.base import Create, Delete, Op, SetData
from storage.segstore.base import LedgerWriter

log = logging.getLogger(__name__)

STAGING_ROOT = "/.staging"
#: ``<ns>/.staging-aborted/<key>``: staging under ``key`` (e.g. one Spark job) was aborted.
ABORTED_ROOT = "/.staging-aborted"
COMMIT_NODE = "commit"
_ENTRY_BYTES = 256 * 1024
_CHUNK_RECORDS = 8192
_CHUNK_BYTES = 4 << 20


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


@dataclass(frozen=True)
class Registration:
    """A staged ledger's registration: when and by whom it was created, and the caller's tag."""

    ledger_id: int
    created_ms: int
    owner: str
    tag: dict[str, Any] = field(default_factory=dict)


def _staging_path(ns: Namespace, ledger_id: int) -> str:
    return join(ns.root, STAGING_ROOT, str(ledger_id))


def stage_records(
    ns: Namespace,
    records: Iterable[tuple[int, bytes]],
    *,
    tag: Mapping[str, Any] | None = None,
    codec: int | None = None,
) -> StagedSegment | None:
    """Write ``(txid, payload)`` records, in order, into a new sealed ledger; None if there were none.
    ``tag`` (JSON-able) is kept in the registration for :func:`list_staged`; ``codec`` as in
    :func:`stage_arrow`.

    Raises:
        TransactionIdOutOfOrderError: a txid is negative, MAX_TXID, or below the previous one.
        LogRecordTooLongError, InvalidArgumentError: a bad record or codec. SegmentStoreError, MetadataError.
    """
    return stage_arrow(ns, _record_chunks(records), tag=tag, codec=codec)


def _record_chunks(records: Iterable[tuple[int, bytes]]) -> Iterator[tuple[pa.Array, pa.Array | int]]:
    """``(txid, payload)`` records as Arrow ``(payloads, txids)`` chunks for :func:`stage_arrow`."""
    txids: list[int] = []
    payloads: list[bytes] = []
    size = 0
    for txid, payload in records:
        if type(txid) is not int or not isinstance(payload, bytes | bytearray | memoryview):
            raise InvalidArgumentError(
                f"a record is (int txid, bytes payload), got ({txid!r}, {type(payload).__name__})"
            )
        if txid < 0 or txid >= MAX_TXID:
            raise TransactionIdOutOfOrderError(f"staged txid {txid} out of range [0, {MAX_TXID})", txid=txid)
        txids.append(txid)
        payloads.append(payload)
        size += len(payload)
        if len(txids) >= _CHUNK_RECORDS or size >= _CHUNK_BYTES:
            yield pa.array(payloads, pa.binary()), pa.array(txids, pa.int64())
            txids, payloads, size = [], [], 0
    if txids:
        yield pa.array(payloads, pa.binary()), pa.array(txids, pa.int64())


def stage_arrow(
    ns: Namespace,
    batches: Iterable[tuple[pa.Array, pa.Array | int]],
    *,
    tag: Mapping[str, Any] | None = None,
    codec: int | None = None,
    abort_key: str | None = None,
) -> StagedSegment | None:
    """:func:`stage_records` for Arrow columns, in bulk (:mod:`storage.formats.arrow_entries`): each item is
    ``(payloads, txids)`` with payloads a non-null binary (or string) array and txids an integer
    array of the same length or one txid for all. Entries hold up to 256 KiB of records and never
    span two items. ``tag`` (JSON-able) is kept in the registration for :func:`list_staged`.
    ``codec`` (``CompressionCodec``) compresses each entry; None takes the namespace's
    ``compressionType``, as a log writer does. With ``abort_key``, staging refuses to start once
    :func:`mark_aborted` was called for that key (a task still running after its job was aborted).

    Raises:
        TransactionIdOutOfOrderError: a txid is negative, MAX_TXID, or below the previous one.
        LogRecordTooLongError, InvalidArgumentError: a bad record or codec. SegmentStoreError, MetadataError.
        WriteCancelledError: ``abort_key`` was aborted (nothing is left staged).
    """
    ns.check_open()
    if codec is None:
        codec = codec_from_name(str(ns.conf.get("compressionType")))
    ledger = None
    count, first, last, last_slot = 0, -1, -1, -1
    try:
        for payloads, txids in batches:
            n = len(payloads)
            if n == 0:
                continue
            if not isinstance(txids, int) and len(txids) != n:
                raise InvalidArgumentError(f"{len(txids)} txids for {n} payloads")
            low, high = check_txids(txids, n, last)
            if ledger is None:
                ledger = _new_staged_ledger(ns, tag, abort_key)
            for entry in encode_entries(payloads, txids, count + 1, min(_ENTRY_BYTES, MAX_LOGRECORDSET_SIZE), codec):
                ledger.append_async(entry.data)  # group-committed; close() waits for all
                last_slot = entry.records - 1
            count += n
            first = low if first < 0 else first
            last = high
        if ledger is None:
            return None
        last_entry = ledger.close()
    except BaseException:
        if ledger is not None:
            ledger.abort()
            discard(ns, [ledger.ledger_id])
        raise
    return StagedSegment(ledger.ledger_id, count, first, last, last_entry, last_slot)


def _new_staged_ledger(ns: Namespace, tag: Mapping[str, Any] | None, abort_key: str | None = None) -> LedgerWriter:
    """A new ledger, registered as staged before it exists: a crash at any point leaves either
    nothing or a registration that :func:`sweep` / :func:`discard` clean up (never an unknown ledger).

    With ``abort_key``: checked after registering, so that with :func:`mark_aborted` (marker first,
    then a sweep) either the sweep sees the registration or this check sees the marker.

    Raises:
        WriteCancelledError: ``abort_key`` was aborted. SegmentStoreError, MetadataError.
    """
    lid = ns.segstore.allocate_ledger_id()
    reg = {"created_ms": now_ms(), "owner": f"{socket.gethostname()}:{os.getpid()}", "tag": dict(tag or {})}
    ns.metastore.create(_staging_path(ns, lid), json.dumps(reg).encode(), make_parents=True)
    try:
        if abort_key is not None and is_aborted(ns, abort_key):
            raise WriteCancelledError(f"staging for {abort_key} was aborted")
        ledger = ns.segstore.create_ledger(lid)
    except BaseException:
        discard(ns, [lid])
        raise
    # again once the ledger exists: an abort's sweep between the check above and its creation
    # deleted a ledger that did not exist yet
    if abort_key is not None and is_aborted(ns, abort_key):
        ledger.abort()
        discard(ns, [lid])
        raise WriteCancelledError(f"staging for {abort_key} was aborted")
    return ledger


def _aborted_path(ns: Namespace, key: str) -> str:
    if not key or "/" in key:
        raise InvalidArgumentError(f"invalid abort key {key!r}")
    return join(ns.root, ABORTED_ROOT, key)


def mark_aborted(ns: Namespace, key: str) -> None:
    """Record that staging under ``key`` was aborted: :func:`stage_arrow` calls with that
    ``abort_key`` refuse to start from now on. Call it before the sweep that discards what was
    staged under ``key``. Markers older than a sweep's grace period are removed by :func:`sweep`.

    Raises:
        InvalidArgumentError: an empty key or one with ``/``. MetadataError.
    """
    try:
        ns.metastore.create(_aborted_path(ns, key), str(now_ms()).encode(), make_parents=True)
    except NodeExistsError:
        pass


def is_aborted(ns: Namespace, key: str) -> bool:
    """Whether :func:`mark_aborted` was called for ``key``. Raises MetadataError."""
    return ns.metastore.exists(_aborted_path(ns, key)) is not None


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


def list_staged(ns: Namespace) -> list[Registration]:
    """Every staged (not yet published or discarded) ledger's registration, by ledger id. An
    unreadable registration is listed with ``created_ms=0`` and no tag.

    Raises:
        MetadataError.
    """
    try:
        names = sorted((n for n in ns.metastore.children(join(ns.root, STAGING_ROOT)) if n.isdigit()), key=int)
    except NoNodeError:
        return []
    out = []
    for name, got in zip(names, ns.metastore.get_many([_staging_path(ns, int(n)) for n in names]), strict=True):
        if got is None:
            continue  # published or discarded meanwhile
        try:
            doc = json.loads(got.value)
            created, owner, tag = int(doc["created_ms"]), str(doc.get("owner", "")), doc.get("tag") or {}
        except (ValueError, KeyError, TypeError, AttributeError):
            created, owner, tag = 0, "", {}
        out.append(Registration(int(name), created, owner, tag if isinstance(tag, dict) else {}))
    return out


def sweep(
    ns: Namespace,
    older_than_ms: int,
    *,
    matching: Callable[[dict[str, Any]], bool] | None = None,
    keep: Collection[int] = (),
) -> list[int]:
    """Delete staged ledgers registered more than ``older_than_ms`` ago, and (with ``matching``)
    those whose tag it accepts unless their id is in ``keep``; one listing for both. Returns the
    ids deleted.

    Raises:
        SegmentStoreError, MetadataError.
    """
    cutoff = now_ms() - older_than_ms
    gone = [
        r.ledger_id
        for r in list_staged(ns)
        if r.created_ms < cutoff or (matching is not None and r.ledger_id not in keep and matching(r.tag))
    ]
    discard(ns, gone)
    _drop_old_abort_markers(ns, cutoff)
    return gone


def _drop_old_abort_markers(ns: Namespace, cutoff_ms: int) -> None:
    root = join(ns.root, ABORTED_ROOT)
    try:
        keys = ns.metastore.children(root)
    except NoNodeError:
        return
    for key in keys:
        path = join(root, key)
        try:
            created = int(ns.metastore.get(path).value.decode() or 0)
            if created < cutoff_ms:
                ns.metastore.delete(path)
        except (NoNodeError, ValueError, UnicodeDecodeError):
            continue


def _sealed(log: str) -> EndOfStreamError:
    return EndOfStreamError(f"log {log!r} is sealed (end of stream): no more records can be written")


def check_not_sealed(ns: Namespace, log: str) -> None:
    """Fail early, before staging anything for ``log``, if it was sealed with
    ``mark_end_of_stream`` (its max txid is ``MAX_TXID``). A log that does not exist is not sealed.
    :func:`publish_many` checks again under the log's lock.

    Raises:
        EndOfStreamError: the log is sealed. InvalidStreamNameError, MetadataError.
    """
    name = validate_log_name(log)
    try:
        sealed = LogMetadata(ns.metastore, ns.paths_of(name)).max_txid().value == MAX_TXID
    except LogNotFoundError:
        return
    if sealed:
        raise _sealed(name)


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
    """What :func:`publish` did on one log: the new segments (empty when skipped) and whether it skipped."""

    segments: list[LogSegmentMetadata]
    skipped: bool


@dataclass
class PublishItem:
    """One log's part of :func:`publish_many`: its staged ledgers (in order) and its commit record.

    ``writer``: the key of the publishing writer (a streaming query id, a batch job's writer id) when several
    writers may publish to the log: ``decide`` then gets that writer's own latest commit record
    (:mod:`storage.log.writer_state`), whatever others committed since, and it is updated in the same
    transaction. ``rebase_txids``: the staged txids were assigned by the publisher, not given by the user; if
    another writer published higher txids meanwhile, the records are restaged with the log's last txid (so a
    late or replayed batch never fails on txid order), compressed with ``codec``.
    """

    log: str
    staged: Sequence[StagedSegment]
    commit: dict[str, object]
    writer: str | None = None
    rebase_txids: bool = False
    codec: int | None = None


def publish(
    ns: Namespace,
    log: str,
    staged: Sequence[StagedSegment],
    commit: dict[str, object],
    decide: Callable[[dict[str, object] | None], bool],
    conf: Config | None = None,
) -> Published:
    """Append ``staged`` to ``log`` as completed segments, in order, together with ``commit``, in
    one versioned transaction (:func:`publish_many` for one log).

    Raises:
        As :func:`publish_many`.
    """
    return publish_many(ns, [PublishItem(log, staged, commit)], lambda _log, prev: decide(prev), conf)[log]


def publish_many(
    ns: Namespace,
    items: Sequence[PublishItem],
    decide: Callable[[str, dict[str, object] | None], bool],
    conf: Config | None = None,
) -> dict[str, Published]:
    """Publish several logs' staged ledgers and commit records in ONE versioned transaction: all
    logs or none. Takes every log's write lock (in name order), recovers any in-progress segment,
    then asks ``decide(log, previous commit)`` whether that log goes on: False skips it (its
    staged ledgers are discarded once the others are in), raising refuses all. ``decide`` may
    complete the log's commit dict, which is serialised only after it returns. The previous commit
    is the item's writer's own latest one when it names a ``writer`` that has one, else the log's
    latest commit record.

    Raises:
        InvalidArgumentError: a log named twice, a bad writer key. OwnershipAcquireFailedError: a writer owns a log.
        EndOfStreamError: a log was sealed (``mark_end_of_stream``): nothing is published.
        TransactionIdOutOfOrderError: staged txids (not ``rebase_txids``) below the log's last txid (the message
            names the writer of the log's latest commit) or out of order.
        WriterStateExpiredError: an item's writer comes back after its state expired.
        MetadataVersionError / NoNodeError: a log changed under the transaction, or a staged
        ledger was discarded meanwhile (nothing is published). Whatever ``decide`` raises.
    """
    cfg = conf or ns.conf
    names = [validate_log_name(item.log) for item in items]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"publish names a log twice: {sorted(names)}")
    ordered = sorted(zip(names, items, strict=True), key=lambda pair: pair[0])
    locks = []
    restaged: list[int] = []  # copies made by rebasing txids: discarded unless published
    try:
        ops: list[Op] = []
        results: dict[str, Published] = {}
        skipped: list[int] = []
        for name, item in ordered:
            ns.create_log(name, exist_ok=True)
            meta = LogMetadata(ns.metastore, ns.paths_of(name))
            lock = ns.metastore.lock(meta.paths.lock, ns.client_id, float(cfg.get("lockTimeoutSeconds")))
            locks.append(lock)
            WriteHandler(meta, ns.segstore, cfg, lock).recover()
            commit_path = join(meta.paths.root, COMMIT_NODE)
            current = ns.metastore.exists(commit_path)
            latest = read_commit(ns, name) if current is not None else None
            previous, state_version = latest, None
            if item.writer is not None:
                state, state_version = writer_state.read_state(ns.metastore, meta, item.writer)
                previous = state if state is not None else latest
            if not decide(name, previous):
                skipped += [s.ledger_id for s in item.staged]
                results[name] = Published([], skipped=True)
                continue
            staged = item.staged
            if item.rebase_txids:
                staged, replaced = _rebase_txids(ns, meta, staged, item.codec)
                restaged += [s.ledger_id for s in staged] if replaced else []
                skipped += replaced  # the originals: discarded once the copies are in
            try:
                log_ops, created = _publish_ops(ns, meta, staged, cfg)
            except TransactionIdOutOfOrderError as e:
                raise TransactionIdOutOfOrderError(
                    f"{e} (the log's latest commit: {_describe_writer(latest)}); txids of a log are non-decreasing "
                    "across every writer: give this writer's txid column values at or above the other writers', or "
                    "drop the column (the sink then assigns txids)",
                    txid=e.txid,
                    last_txid=e.last_txid,
                ) from None
            data = json.dumps(item.commit, sort_keys=True).encode()  # after decide(), which may complete it
            log_ops.append(SetData(commit_path, data, current) if current is not None else Create(commit_path, data))
            if item.writer is not None:
                log_ops += writer_state.state_ops(ns.metastore, meta, item.writer, item.commit, state_version)
            ops += log_ops
            results[name] = Published(created, skipped=False)
        if ops:
            ns.metastore.multi(ops)
        restaged = []
        discard(ns, skipped)
        for name, item in ordered:  # still under the locks: no writer of these logs runs a purge now
            if not results[name].skipped:
                _apply_retention(ns, name, cfg)
                if item.writer is not None:
                    _expire_writers(ns, name, cfg)
        return {item.log: results[name] for name, item in zip(names, items, strict=True)}
    finally:
        if restaged:
            discard(ns, restaged)
        for lock in reversed(locks):
            lock.release()


def _describe_writer(commit: Mapping[str, object] | None) -> str:
    """Who published ``commit`` (a log's latest commit record), for error messages."""
    if commit is None:
        return "none"
    if commit.get("queryId"):
        return f"streaming query {commit.get('queryId')} batch {commit.get('batchId')}"
    if commit.get("writerId"):
        return f"batch job with writer id {commit.get('writerId')!r} version {commit.get('writerVersion')}"
    return f"batch job {commit.get('jobId')}"


def _rebase_txids(
    ns: Namespace, meta: LogMetadata, staged: Sequence[StagedSegment], codec: int | None
) -> tuple[Sequence[StagedSegment], list[int]]:
    """``staged`` (publisher-assigned txids) as it can be published on the locked log: itself when its txids
    are at or above the log's last txid, else copies with every record at the log's last txid. Returns the
    segments to publish and the ledger ids they replace (empty: no copy).

    Raises:
        SegmentStoreError, MetadataError, CorruptedEntryError (an unreadable staged ledger).
    """
    last = meta.max_txid().value
    if not staged or staged[0].first_txid >= last or last == MAX_TXID:  # sealed: _publish_ops refuses it
        return staged, []
    copies: list[StagedSegment] = []
    try:
        for s in staged:
            chunks = ((pa.array(p, pa.binary()), last) for p in _staged_payloads(ns, s))
            copy = stage_arrow(ns, chunks, tag={"rebased": s.ledger_id}, codec=codec)
            if copy is not None:
                copies.append(copy)
    except BaseException:
        discard(ns, [c.ledger_id for c in copies])
        raise
    log.info(
        "log %r: %d staged ledger(s) restaged at txid %d (another writer published higher txids meanwhile)",
        meta.paths.name,
        len(copies),
        last,
    )
    return copies, [s.ledger_id for s in staged]


def _staged_payloads(ns: Namespace, s: StagedSegment) -> Iterator[list[bytes]]:
    """The payloads of a staged ledger's records, an entry at a time."""
    if s.record_count == 0 or s.last_entry_id < 0:
        return
    for _entry_id, data in ns.segstore.read_entries(s.ledger_id, 0, s.last_entry_id):
        payloads = decode_entry_columns(data, include_control=False).payloads
        if payloads:
            yield payloads


def _apply_retention(ns: Namespace, name: str, cfg: Config) -> None:
    """``logSegmentRetentionHours`` for a log that publishing, not a writer, appends to (a writer
    purges when it rolls): best effort, after the publishing transaction."""
    hours = float(cfg.get("logSegmentRetentionHours"))
    if hours <= 0:
        return
    now = now_ms()
    try:
        meta = LogMetadata(ns.metastore, ns.paths_of(name))
        purge_older_than(meta, ns.segstore, cfg, now - int(hours * 3_600_000), now_ms=now)
    except Exception as e:  # the next publish tries again
        log.warning("retention of log %r after publishing failed: %s", name, e)


def _expire_writers(ns: Namespace, name: str, cfg: Config) -> None:
    """``writerStateRetentionHours`` (:func:`storage.log.writer_state.expire`): best effort, after publishing."""
    try:
        meta = LogMetadata(ns.metastore, ns.paths_of(name))
        writer_state.expire(ns.metastore, meta, float(cfg.get("writerStateRetentionHours")))
    except Exception as e:  # the next publish tries again
        log.warning("expiry of writer states of log %r failed: %s", name, e)


def _publish_ops(
    ns: Namespace, meta: LogMetadata, staged: Sequence[StagedSegment], cfg: Config
) -> tuple[list[Op], list[LogSegmentMetadata]]:
    """The operations that append ``staged`` to one (locked, recovered) log as completed segments."""
    name = meta.paths.name
    max_lssn, max_txid = meta.max_lssn(), meta.max_txid()
    if max_txid.value == MAX_TXID:
        raise _sealed(name)
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
    ops: list[Op] = [Create(seg.path, seg.serialize()) for seg in created]
    ops += [
        SetData(meta.paths.ledgers, str(lssn).encode(), max_lssn.version),
        SetData(meta.paths.maxtxid, str(max(last, max_txid.value)).encode(), max_txid.version),
    ]
    ops += [Delete(_staging_path(ns, s.ledger_id)) for s in staged]
    return ops, created


__all__ = [
    "PublishItem",
    "Published",
    "Registration",
    "StagedSegment",
    "check_not_sealed",
    "discard",
    "list_staged",
    "publish",
    "publish_many",
    "read_commit",
    "stage_arrow",
    "stage_records",
    "sweep",
]
