"""Idempotent producers: exactly-once writes through the write proxy (beyond DistributedLog, whose proxy is
at-least-once; the scheme is Kafka's idempotent producer with producer epochs, kept in the log itself).

**Identity.** A client names itself with a ``producer_id`` and, per client instance, a random
``producer_instance`` token. Its first request to a stream carries no epoch: the owning proxy gives the
instance an *epoch* for that stream (0 for a producer id it does not know, else the current epoch + 1) and
answers it in the response; every later request carries it. A new instance of the same producer id therefore
*fences* the older ones: their requests fail with PRODUCER_FENCED naming the newer epoch (and are not stored).
Sequences restart at 0 with every epoch. A request without an epoch from the instance that holds the current
epoch is a resend of its first request (whose answer was lost) and is treated as a request of that epoch.

**Sequences.** An instance numbers its payloads per stream from 0; a request carries the sequence of its
first payload and ``n`` payloads take ``s .. s+n-1`` (a record set of n members too). Every request is
stored as ONE entry (atomic: all of it or nothing). Per producer the proxy remembers ``last``, the highest
sequence stored in the current epoch, and its latest ``proxyProducerWindow`` requests (first sequence, count,
CRC32C of the payloads, DLSN); the proxy tells clients that window in every answer and a client never has
more requests outstanding than that, counting from its oldest unanswered one (so any request a client may
resend is in the window). For a request of sequences ``s .. e``:

* ``s == last + 1``: stored.
* ``s > last + 1``: OUT_OF_ORDER_SEQUENCE with ``expected_sequence = last + 1`` (an earlier request was lost or
  overtaken; the client resends in order).
* ``s <= last``: a resend. It is answered ``duplicate`` with the ORIGINAL DLSN only when it is exactly a
  remembered request (same first sequence, count and CRC32C); any other overlap of stored sequences is
  SEQUENCE_MISMATCH (not stored); a resend older than the window is PRODUCER_STATE_LOST (it was stored, once,
  but its DLSN is no longer known: the outcome the client can report is "unknown").

**Fencing is definitive.** Per producer the proxy also keeps the ``last`` of its few previous epochs: a request
of an older epoch above that epoch's ``last`` is answered PRODUCER_FENCED (certainly not stored); one at or
below it is PRODUCER_STATE_LOST with the newer epoch (stored earlier; the fenced client reports it as outcome
unknown). A request of an epoch older than those remembered is PRODUCER_FENCED with ``outcome_unknown``.

**Durable with the records.** Each request's entry starts with a control record
``dlproxy1:{"p": producer, "e": epoch, "i": instance, "s": first, "n": count, "c": crc32c}``, followed by the
data records: the marker and the records are durable together or not at all, across a crash at any point.
Control records are invisible to every reader (the storage readers, ``read_arrow``, the Spark source, the Java
shim). The marker's txid is the request's (a millisecond timestamp), which dates the producer's activity.

**Rebuilt by the next owner.** A proxy that takes a stream over first opens the core writer (recovery fences
the previous owner and completes its segment), then rebuilds the table before serving: it reads the log
*backwards* from its end, a chunk of entries at a time, to the last complete *snapshot* of every live producer's
state, then replays the markers from it on. A snapshot is taken on the first producer request after each
acquisition and then every ``proxyDedupSnapshotInterval`` requests or :data:`SNAPSHOT_EVERY_BYTES` bytes,
whichever comes first, so a rebuild reads about that much of the log whatever the segment's size. It is the
state before the request that carries its first piece: its JSON text travels in pieces (``"sc": {"id", "k",
"end"}``, ``"sd": text``) in the room the next requests' entries leave, so a snapshot of any size is written
without an entry of its own; a rebuild uses the newest snapshot whose pieces are all in the log.

**Bounded.** Per producer ``proxyProducerWindow`` requests; per stream at most ``proxyMaxProducersPerStream``
producers (the least recently active is evicted: its next request is answered PRODUCER_STATE_LOST and its
client starts a new epoch); a producer idle longer than ``proxyProducerExpirySeconds`` is forgotten the same
way. A snapshot is therefore at most about ``proxyMaxProducersPerStream`` x (300 bytes + the id's length).

**Limits.** (1) Without a ``producer_id`` a write is at-least-once, as in DistributedLog. (2) Truncating or
purging the segments that hold the last snapshot loses the forgotten part of the state: resends of those
producers are answered PRODUCER_STATE_LOST (outcome unknown), never stored twice. (3) A resend that arrives
after the stream was sealed or deleted is not deduplicated. (4) The first acquisition of a log written without
the proxy reads back to the expiry (it finds no snapshot).
"""

from __future__ import annotations

import enum
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from storage.errors import CorruptedEntryError
from storage.formats.dlsn import DLSN
from storage.formats.record import LogRecordWithDLSN
from storage.formats.segment_metadata import LogSegmentMetadata
from storage.log.log_manager import LogManager

log = logging.getLogger(__name__)

#: Prefix of the proxy's control records (commits are b"control", keep-alives b"keepalive").
MAGIC = b"dlproxy1:"
#: The marker of a write without a producer (it only makes the records one entry of their own).
NO_PRODUCER = MAGIC + b"{}"
#: Room below which a request's entry carries no snapshot piece (the next one will).
MIN_PIECE_ROOM = 1024
#: A snapshot is due after this many bytes of producer requests (bounds what a rebuild reads).
SNAPSHOT_EVERY_BYTES = 16 * 1024 * 1024
#: Entries read at a time by the backwards rebuild.
REBUILD_CHUNK = 64
#: Earlier epochs of a producer whose ``last`` is kept (for definitive PRODUCER_FENCED answers).
PAST_EPOCHS = 4


def _done(dlsn: DLSN) -> Future[DLSN]:
    f: Future[DLSN] = Future()
    f.set_result(dlsn)
    return f


@dataclass
class Request:
    """One stored request of a producer: sequences ``first .. first+count-1`` in one entry, the first at ``dlsn``."""

    first: int
    count: int
    crc: int
    dlsn: Future[DLSN]  # resolves once durable (already resolved for requests rebuilt from the log)

    @property
    def end(self) -> int:
        return self.first + self.count - 1


@dataclass
class Producer:
    epoch: int
    instance: str
    last: int = -1
    last_ms: int = 0
    requests: list[Request] = field(default_factory=list)  # the latest ``window``, oldest first
    past: list[tuple[int, int]] = field(default_factory=list)  # (epoch, last) of earlier epochs, oldest first


class Verdict(enum.Enum):
    STORE = "store"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out_of_order"
    FENCED = "fenced"
    STATE_LOST = "state_lost"
    MISMATCH = "mismatch"


@dataclass(frozen=True)
class Plan:
    """What to do with a request. ``epoch``: STORE: the epoch it is stored under (``bump``: a new instance starts
    it); DUPLICATE: the producer's epoch; FENCED / STATE_LOST: the current epoch (-1: none known).
    ``original``: DUPLICATE: the stored request's DLSN. ``expected``: OUT_OF_ORDER's next sequence.
    ``outcome_unknown``: FENCED for an epoch older than those remembered (it may be stored)."""

    verdict: Verdict
    epoch: int = -1
    bump: bool = False
    original: Future[DLSN] | None = None
    expected: int = 0
    message: str = ""
    outcome_unknown: bool = False


class DedupTable:
    """The idempotent producers of ONE stream, owned by the stream's single writer (callers serialize every method
    under the stream's lock)."""

    def __init__(self, *, window: int, expiry_ms: int, snapshot_interval: int, max_producers: int = 10_000) -> None:
        self.window = max(1, int(window))
        self.expiry_ms = max(1, int(expiry_ms))
        self.snapshot_interval = max(1, int(snapshot_interval))
        self.max_producers = max(1, int(max_producers))
        self._producers: OrderedDict[str, Producer] = OrderedDict()  # least recently stored first
        self._since_snapshot = 0
        self._bytes_since_snapshot = 0
        self._snapshot_due = True  # the first request after an acquisition carries one
        self._pending: _PendingSnapshot | None = None  # a snapshot being written, piece by piece
        self._snap_ids = 0
        self.evicted = 0
        self.snapshots_written = 0

    def __len__(self) -> int:
        return len(self._producers)

    def producer(self, pid: str) -> Producer | None:
        return self._producers.get(pid)

    def _live(self, pid: str, now_ms: int) -> Producer | None:
        st = self._producers.get(pid)
        if st is not None and now_ms - st.last_ms > self.expiry_ms:
            del self._producers[pid]
            return None
        return st

    # --- deciding ----------------------------------------------------------------------------------
    def plan(self, pid: str, epoch: int | None, instance: str, seq: int, count: int, crc: int, now_ms: int) -> Plan:
        """Decide a request of sequences ``seq .. seq+count-1`` (payload checksum ``crc``) of producer ``pid``;
        ``epoch`` None: the instance asks for an epoch."""
        st = self._live(pid, now_ms)
        end = seq + count - 1
        if epoch is None or epoch < 0:
            if st is None or st.instance != instance:
                if seq != 0:
                    return Plan(
                        Verdict.MISMATCH,
                        message=f"producer {pid!r}: the first request of a new instance must start at sequence 0, "
                        f"not {seq}",
                    )
                return Plan(Verdict.STORE, epoch=0 if st is None else st.epoch + 1, bump=True)
            epoch = st.epoch  # a resend of this instance's first request (its answer was lost)
        if st is None:
            return Plan(
                Verdict.STATE_LOST,
                message=f"producer {pid!r} (epoch {epoch}) is unknown on this stream: forgotten after "
                f"{self.expiry_ms // 1000}s idle, evicted (more than {self.max_producers} producers), or its state "
                "was truncated away; the outcome of this request is unknown",
            )
        if epoch != st.epoch or instance != st.instance:
            return self._fenced(pid, st, epoch, seq, end)
        if seq > st.last + 1:
            return Plan(
                Verdict.OUT_OF_ORDER,
                epoch=st.epoch,
                expected=st.last + 1,
                message=f"producer {pid!r}: sequence {seq} received, {st.last + 1} expected (resend from it)",
            )
        if seq == st.last + 1:
            return Plan(Verdict.STORE, epoch=st.epoch)
        for r in st.requests:
            if r.first == seq:
                if r.count == count and r.crc == crc:
                    return Plan(Verdict.DUPLICATE, epoch=st.epoch, original=r.dlsn)
                break
        oldest = st.requests[0].first if st.requests else st.last + 1
        if seq < oldest and end < oldest:
            return Plan(
                Verdict.STATE_LOST,
                epoch=st.epoch,
                message=f"producer {pid!r}: sequences {seq}..{end} were stored, but they are older than the "
                f"{self.window} requests this proxy remembers (proxyProducerWindow): their DLSNs are unknown",
            )
        return Plan(
            Verdict.MISMATCH,
            epoch=st.epoch,
            message=f"producer {pid!r} epoch {st.epoch}: sequences {seq}..{end} overlap what is stored (up to "
            f"{st.last}) but are not one stored request with the same data (checksum or boundaries differ): "
            "not stored",
        )

    def _fenced(self, pid: str, st: Producer, epoch: int, seq: int, end: int) -> Plan:
        if epoch >= st.epoch:
            # an epoch this proxy never gave (its state was rebuilt from less than the client saw), or the
            # same epoch number from another instance (the state was forgotten and started again at 0)
            outcome_unknown = True
            stored_up_to: int | None = None
        else:
            past = dict(st.past)
            stored_up_to = past.get(epoch)
            outcome_unknown = stored_up_to is None
        if stored_up_to is not None and seq <= stored_up_to:
            return Plan(
                Verdict.STATE_LOST,
                epoch=st.epoch,
                message=f"producer {pid!r}: epoch {epoch} was fenced by epoch {st.epoch} (a newer instance); "
                f"sequences {seq}..{end} of epoch {epoch} were stored before that, their DLSNs are no longer known",
            )
        return Plan(
            Verdict.FENCED,
            epoch=st.epoch,
            outcome_unknown=outcome_unknown,
            message=f"producer {pid!r}: epoch {epoch} is fenced: a newer instance holds epoch {st.epoch} on this "
            "stream; " + ("this request may have been stored earlier" if outcome_unknown else "not stored"),
        )

    # --- storing -----------------------------------------------------------------------------------
    def snapshot_due(self) -> bool:
        return self._pending is None and (
            self._snapshot_due
            or self._since_snapshot >= self.snapshot_interval
            or self._bytes_since_snapshot >= SNAPSHOT_EVERY_BYTES
        )

    def marker(
        self, pid: str, plan: Plan, instance: str, first: int, count: int, crc: int, now_ms: int, room: int
    ) -> bytes:
        """The control record payload for a request about to be stored under ``plan`` (a STORE), with the next
        piece of a snapshot when one is being written (a new one starts when due: the state before this
        request) and the entry has room for it (``room`` bytes)."""
        doc: dict[str, object] = {"p": pid, "e": plan.epoch, "i": instance, "s": first, "n": count, "c": crc}
        base = MAGIC + json.dumps(doc, separators=(",", ":")).encode()
        if room - len(base) < MIN_PIECE_ROOM:
            return base
        if self.snapshot_due():
            self._snap_ids += 1
            text = json.dumps(self._snapshot(now_ms), separators=(",", ":"))
            self._pending = _PendingSnapshot(f"{now_ms:x}.{self._snap_ids}", text)
        pending = self._pending
        if pending is None:
            return base
        size = min(room - len(base) - 64, len(pending.text) - pending.offset)
        while True:
            piece = pending.text[pending.offset : pending.offset + size]
            end = pending.offset + len(piece) >= len(pending.text)
            doc["sc"] = {"id": pending.id, "k": pending.k, "end": end}
            doc["sd"] = piece
            full = MAGIC + json.dumps(doc, separators=(",", ":")).encode()
            if len(full) <= room or size <= 1:
                break
            size = max(1, size * room // len(full) - 64)  # escaping made it larger: shrink
        return full if len(full) <= room else base

    def _snapshot(self, now_ms: int) -> dict[str, object]:
        for pid in list(self._producers):
            self._live(pid, now_ms)
        snap: dict[str, object] = {}
        for pid, st in self._producers.items():
            reqs = []
            for r in st.requests:
                d = r.dlsn.result() if r.dlsn.done() and r.dlsn.exception() is None else None
                reqs.append([r.first, r.count, r.crc, None if d is None else str(d)])
            snap[pid] = {"e": st.epoch, "i": st.instance, "last": st.last, "ms": st.last_ms, "w": reqs,
                         "past": [list(p) for p in st.past]}  # fmt: skip
        return snap

    def stored(
        self,
        pid: str,
        plan: Plan,
        instance: str,
        first: int,
        count: int,
        crc: int,
        dlsn: Future[DLSN],
        now_ms: int,
        marker: bytes,
        nbytes: int = 0,
    ) -> None:
        """Remember a request just handed to the writer under ``plan`` with ``marker`` (from :meth:`marker`)."""
        pending = self._pending
        if pending is not None and b'"sc":' in marker:
            if pending.k == 0:
                self._snapshot_due = False
                self._since_snapshot = 0
                self._bytes_since_snapshot = 0
            doc = json.loads(marker[len(MAGIC) :])
            pending.offset += len(doc["sd"])
            pending.k += 1
            if doc["sc"]["end"]:
                self._pending = None
                self.snapshots_written += 1
        self._since_snapshot += 1
        self._bytes_since_snapshot += nbytes
        self._apply(pid, plan.epoch, instance, first, count, crc, dlsn, now_ms)

    def _apply(
        self, pid: str, epoch: int, instance: str, first: int, count: int, crc: int, dlsn: Future[DLSN], now_ms: int
    ) -> None:
        st = self._producers.get(pid)
        if st is None:
            st = self._producers[pid] = Producer(epoch, instance)
            while len(self._producers) > self.max_producers:
                old, _ = self._producers.popitem(last=False)
                self.evicted += 1
                log.debug("producer %r evicted (more than %d producers on this stream)", old, self.max_producers)
        elif epoch != st.epoch or instance != st.instance:
            st.past.append((st.epoch, st.last))
            del st.past[:-PAST_EPOCHS]
            st.epoch, st.instance, st.last = epoch, instance, -1
            st.requests.clear()
        self._producers.move_to_end(pid)
        st.last = max(st.last, first + count - 1)
        st.last_ms = max(st.last_ms, now_ms)
        st.requests.append(Request(first, count, crc, dlsn))
        if len(st.requests) > self.window:
            del st.requests[: len(st.requests) - self.window]

    # --- rebuild -----------------------------------------------------------------------------------
    def rebuild(self, dlm: LogManager) -> int:
        """Rebuild from the log (the writer is open, so every segment is complete): read backwards to the newest
        complete snapshot, then replay the markers from the one carrying its first piece. Returns the number of
        markers replayed.

        Raises:
            CorruptedEntryError: a marker or a snapshot cannot be parsed. What reading the segments raises
            (SegmentStoreError...).
        """
        later: list[list[LogRecordWithDLSN]] = []  # newest chunk first
        pieces: dict[str, dict[int, str]] = {}
        ends: dict[str, int] = {}
        found: tuple[str, LogSegmentMetadata, int, list[LogRecordWithDLSN]] | None = None
        oldest_ms = int(time.time() * 1000) - self.expiry_ms
        for seg in reversed(dlm.log_segments()):
            if not seg.in_progress and 0 < seg.completion_time_ms < oldest_ms:
                break  # every request here and before is older than the expiry: its producers are forgotten anyway
            hi = dlm.visible_last_entry(seg)
            while hi >= 0 and found is None:
                lo = max(0, hi - REBUILD_CHUNK + 1)
                markers = _markers(dlm, seg, lo, hi)
                for i in range(len(markers) - 1, -1, -1):
                    doc = _parse(markers[i])
                    sc = doc.get("sc")
                    if not isinstance(sc, dict):
                        continue
                    sid, k = str(sc["id"]), int(sc["k"])
                    pieces.setdefault(sid, {})[k] = str(doc["sd"])
                    if sc.get("end"):
                        ends[sid] = k
                    if k == 0 and sid in ends and len(pieces[sid]) == ends[sid] + 1:
                        found = (sid, seg, lo, markers[:i])
                        later.append(markers[i:])
                        break
                else:
                    later.append(markers)
                hi = lo - 1
            if found is not None:
                break
        self._producers.clear()
        if found is not None:
            sid, seg, lo, before_markers = found
            try:
                snap = json.loads("".join(pieces[sid][k] for k in range(ends[sid] + 1)))
            except ValueError as e:
                raise CorruptedEntryError(f"bad producer snapshot {sid}: {e}") from e
            if not isinstance(snap, dict):
                raise CorruptedEntryError(f"bad producer snapshot {sid}: not an object")
            before = self._pending_before(dlm, seg, lo, before_markers, snap)
            self._load_snapshot(snap, before)
        n = 0
        for markers in reversed(later):
            for r in markers:
                doc = _parse(r)
                if "p" not in doc:
                    continue  # a write without a producer (at-least-once)
                self._apply(
                    str(doc["p"]),
                    int(str(doc.get("e", 0))),
                    str(doc.get("i", "")),
                    int(str(doc["s"])),
                    int(str(doc["n"])),
                    int(str(doc.get("c", 0))),
                    _done(r.dlsn.next()),
                    r.txid,
                )
                n += 1
        self._snapshot_due = True
        self._pending = None
        self._since_snapshot = 0
        self._bytes_since_snapshot = 0
        return n

    @staticmethod
    def _pending_before(
        dlm: LogManager, seg: LogSegmentMetadata, lo: int, markers: list[LogRecordWithDLSN], snap: dict[str, Any]
    ) -> list[LogRecordWithDLSN]:
        """The markers before a snapshot of the requests it lists without a DLSN (in flight when it was taken: in
        the same segment, before it), reading further back in the segment only as far as needed."""
        wanted = {
            (str(pid), int(r[0]))
            for pid, st in snap.items()
            if isinstance(st, dict)
            for r in st.get("w", [])
            if r[3] is None
        }
        found = list(markers)
        have = {_key(r) for r in found}
        hi = lo - 1
        while hi >= 0 and not wanted <= have:
            lo = max(0, hi - REBUILD_CHUNK + 1)
            chunk = _markers(dlm, seg, lo, hi)
            found = chunk + found
            have |= {_key(r) for r in chunk}
            hi = lo - 1
        return found

    def _load_snapshot(self, snap: dict[str, Any], before: Iterable[LogRecordWithDLSN]) -> None:
        earlier: dict[tuple[str, int], DLSN] = {}
        for r in before:  # requests in flight when the snapshot was taken
            key = _key(r)
            if key is not None:
                earlier[key] = r.dlsn.next()
        try:
            for pid, st in snap.items():
                p = Producer(int(st.get("e", 0)), str(st.get("i", "")), int(st["last"]), int(st["ms"]))
                p.past = [(int(e), int(last)) for e, last in st.get("past", [])]
                for first, count, crc, d in st["w"]:
                    if d is not None:
                        dlsn = DLSN.parse(d)
                    elif (pid, int(first)) in earlier:
                        dlsn = earlier[(pid, int(first))]
                    else:
                        continue  # its DLSN is unknown: a resend of it is answered PRODUCER_STATE_LOST
                    p.requests.append(Request(int(first), int(count), int(crc), _done(dlsn)))
                self._producers[str(pid)] = p
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptedEntryError(f"bad producer snapshot: {e}") from e


@dataclass
class _PendingSnapshot:
    """A snapshot being written: its id, JSON text, how much of it is stored, and the next piece's number."""

    id: str
    text: str
    offset: int = 0
    k: int = 0


def _markers(dlm: LogManager, seg: LogSegmentMetadata, lo: int, hi: int) -> list[LogRecordWithDLSN]:
    return [
        r
        for r in dlm.control_records(seg, first_entry=lo, last_entry=hi)
        if r.payload.startswith(MAGIC) and r.payload != NO_PRODUCER
    ]


def _key(r: LogRecordWithDLSN) -> tuple[str, int] | None:
    doc = _parse(r)
    return (str(doc["p"]), int(str(doc["s"]))) if "p" in doc else None


def _parse(r: LogRecordWithDLSN) -> dict[str, object]:
    try:
        doc = json.loads(r.payload[len(MAGIC) :].decode())
        if not isinstance(doc, dict) or ("p" in doc and ("s" not in doc or "n" not in doc)):
            raise ValueError("missing fields")
        return doc
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptedEntryError(f"bad proxy marker at {r.dlsn}: {e}") from e


__all__ = [
    "MAGIC",
    "NO_PRODUCER",
    "DedupTable",
    "Plan",
    "Producer",
    "Request",
    "Verdict",
]
