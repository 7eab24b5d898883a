"""Idempotent producers: exactly-once writes through the write proxy (beyond DistributedLog, whose proxy is
at-least-once; the scheme is Kafka's idempotent producer, kept in the log itself).

**The protocol.** A client names itself with a ``producer_id`` and numbers its payloads per stream from 0:
every request carries the sequence number of its first payload (``WriteContext.sequence``; a bulk's payloads
take consecutive numbers). Per (producer, stream) the owning proxy remembers ``last``, the highest sequence
stored, and for the latest ``proxyProducerWindow`` sequences the DLSN each was stored at. For a request of
sequences ``s .. s+n-1``:

* ``s == last + 1``: stored; ``last`` becomes ``s + n - 1``.
* ``s <= last``: the part up to ``last`` is NOT stored again: those payloads answer SUCCESS with
  ``duplicate=true`` and their ORIGINAL DLSN (waiting for it if the original write is still in flight); the
  rest, if any, is stored. A duplicate older than the window answers REQUEST_DENIED (it was stored, but its
  DLSN is forgotten), never a second copy.
* ``s > last + 1``: OUT_OF_ORDER_SEQUENCE with ``expected_sequence = last + 1``: an earlier request was lost
  or overtaken; the client resends from there, in order (so a producer's records land in the order it sent them,
  even with several requests in flight).
* an unknown producer (new, or forgotten: below) must start at sequence 0; anything else is
  OUT_OF_ORDER_SEQUENCE with ``expected_sequence = 0`` and a message saying the producer is unknown.
* a record set (``WriteContext.is_record_set``, how the client sends a batch) of n members takes the sequences
  ``s .. s+n-1``, one per member, and is stored whole as one record. A set above ``last`` is stored; a set
  inside ONE stored request answers ``duplicate`` with its first member's original DLSN (the members are
  consecutive slots); any other set at or below ``last`` (part new, or stored across several requests: its
  members' DLSNs are not consecutive) answers RECORD_SET_SPLIT, and the client resends its records
  separately (``writeBulk``), each answered as above.

**Durable with the records.** Each stored request is written as ONE entry (``AsyncLogWriter.write_marked``): a
control record ``dlproxy1:{"p": producer, "s": first sequence, "n": count}`` followed by the data records. The
marker and the records are durable together or not at all, so "stored" and "remembered" cannot diverge, across a
crash at any point (after the append and before the reply included). Control records are invisible to every
reader (the storage readers, ``read_arrow``, the Spark source, the Java shim): they read the log exactly as if
one writer had written the data records. The marker's txid is the batch's (a millisecond timestamp), which
dates the producer's activity.

**Rebuilt by the next owner.** A proxy that takes a stream over (after a release, a SIGKILL, a lost session)
first opens the core writer (recovery fences the previous owner and completes its segment), then rebuilds the
table before serving: it walks segments backwards to the last *snapshot* (or to the first segment completed
longer than the expiry ago) and replays the markers after it.
Snapshots ride on a marker (``"snap"``: every live producer's ``last``, last activity and window) on the first
producer batch after each acquisition and every ``proxyDedupSnapshotInterval`` batches, so a rebuild reads
about one interval of the log, never all of it. Batches still in flight when a snapshot is taken are in the
same segment before it (a roll waits for every acknowledgement), and the rebuild reads them from there.

**Bounded.** Per producer, ``proxyProducerWindow`` sequences keep their DLSN; a producer idle on a stream longer
than ``proxyProducerExpirySeconds`` is forgotten (dropped lazily, and from snapshots); a snapshot larger than
:data:`SNAPSHOT_MAX_BYTES` keeps the newest part of each window.

**Limits.** (1) Dedup is per stream and per producer id: two clients sharing an id break it; the client makes a
fresh id per instance. (2) A retry older than the window gets REQUEST_DENIED, and a producer resuming after the
expiry is unknown (it must use a new id). (3) Without a ``producer_id`` a write is at-least-once, as in
DistributedLog. (4) Truncating or purging the segment that holds the last snapshot loses the forgotten part of
the state: a rebuild then starts at the first readable segment, so only producers active since are known (older
retries are answered "unknown producer", never stored twice if the window is still readable). (5) A retry that
arrives after the stream was sealed or deleted is not deduplicated. (6) The first acquisition of a log written
without the proxy reads the segments completed within the expiry (it finds no snapshot): a large, young log
takes that long to acquire once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field

from storage.errors import CorruptedEntryError
from storage.formats.dlsn import DLSN
from storage.formats.record import LogRecordWithDLSN
from storage.log.log_manager import LogManager

log = logging.getLogger(__name__)

#: Prefix of the proxy's control records (commits are b"control", keep-alives b"keepalive").
MAGIC = b"dlproxy1:"
#: The marker of a write without a producer (it only makes the records one entry of their own).
NO_PRODUCER = MAGIC + b"{}"
_NO_PRODUCER = NO_PRODUCER
#: Largest snapshot written (windows are trimmed to fit).
SNAPSHOT_MAX_BYTES = 256 * 1024


def _done(dlsn: DLSN) -> Future[DLSN]:
    f: Future[DLSN] = Future()
    f.set_result(dlsn)
    return f


@dataclass
class Batch:
    """One stored request of a producer: sequences ``first .. first+count-1``, the first at ``dlsn``."""

    first: int
    count: int
    dlsn: Future[DLSN]  # resolves once durable (already resolved for batches rebuilt from the log)

    @property
    def end(self) -> int:
        return self.first + self.count - 1


@dataclass
class Producer:
    last: int = -1
    last_ms: int = 0
    window: deque[Batch] = field(default_factory=deque)


@dataclass(frozen=True)
class Plan:
    """What to do with a request: ``error`` (``"out_of_order"`` with ``expected``), else ``duplicates``: for each
    sequence already stored, its original DLSN future (None: older than the window, denied); the sequences above
    ``last`` are new."""

    duplicates: dict[int, Future[DLSN] | None]
    last: int
    error: str | None = None
    expected: int = 0
    message: str = ""


def dlsn_at(first: Future[DLSN], offset: int) -> Future[DLSN]:
    """The DLSN ``offset`` records after ``first`` in the same entry (a future resolving with it)."""
    if offset == 0:
        return first
    out: Future[DLSN] = Future()

    def copy(f: Future[DLSN]) -> None:
        exc = f.exception()
        if exc is not None:
            out.set_exception(exc)
        else:
            d = f.result()
            out.set_result(DLSN(d.lssn, d.entry_id, d.slot_id + offset))

    first.add_done_callback(copy)
    return out


def _dlsn_in_window(st: Producer, start: int, end: int) -> Future[DLSN] | None:
    """The DLSN of sequence ``start`` if one remembered request of ``st`` holds ``start .. end``, else None."""
    found = next((b for b in st.window if b.first <= start and end <= b.end), None)
    return None if found is None else dlsn_at(found.dlsn, start - found.first)


class DedupTable:
    """The idempotent producers of ONE stream, owned by the stream's single writer (callers serialize
    :meth:`plan` and :meth:`stored` under the stream's lock)."""

    def __init__(self, *, window: int, expiry_ms: int, snapshot_interval: int) -> None:
        self.window = max(1, int(window))
        self.expiry_ms = max(1, int(expiry_ms))
        self.snapshot_interval = max(1, int(snapshot_interval))
        self._producers: dict[str, Producer] = {}
        self._since_snapshot = 0
        self._snapshot_due = True  # the first batch after an acquisition carries one
        self._mu = threading.Lock()

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

    def plan(self, pid: str, seq: int, count: int, now_ms: int) -> Plan:
        """Decide a request of sequences ``seq .. seq+count-1`` of producer ``pid``."""
        st = self._live(pid, now_ms)
        if st is None:
            if seq != 0:
                return Plan(
                    {},
                    -1,
                    error="out_of_order",
                    expected=0,
                    message=f"unknown producer {pid!r} on this stream (new, or forgotten after "
                    f"{self.expiry_ms // 1000}s idle): its first sequence must be 0, got {seq}",
                )
            return Plan({}, -1)
        if seq > st.last + 1:
            return Plan(
                {},
                st.last,
                error="out_of_order",
                expected=st.last + 1,
                message=f"producer {pid!r}: sequence {seq} received, {st.last + 1} expected (resend from it)",
            )
        dups: dict[int, Future[DLSN] | None] = {}
        for s in range(seq, min(seq + count, st.last + 1)):
            dups[s] = _dlsn_in_window(st, s, s)
        return Plan(dups, st.last)

    def covering(self, pid: str, start: int, end: int) -> Future[DLSN] | None:
        """The DLSN of sequence ``start`` when ONE stored request of ``pid`` holds ``start .. end`` (their DLSNs are
        then consecutive slots of one entry), else None."""
        st = self._producers.get(pid)
        return None if st is None else _dlsn_in_window(st, start, end)

    def denied_message(self, pid: str, seq: int) -> str:
        st = self._producers.get(pid)
        last = -1 if st is None else st.last
        return (
            f"producer {pid!r}: sequence {seq} is at or below the last stored ({last}) but not in the dedup window "
            f"(proxyProducerWindow={self.window}, or a record that failed alone): not stored again"
        )

    def marker(self, pid: str, first: int, count: int, now_ms: int, room: int) -> bytes:
        """The control record payload for a batch about to be stored; carries a snapshot when one is due and
        fits in ``room`` bytes (else it waits for a later batch)."""
        doc: dict[str, object] = {"p": pid, "s": first, "n": count}
        base = MAGIC + json.dumps(doc, separators=(",", ":")).encode()
        if not (self._snapshot_due or self._since_snapshot >= self.snapshot_interval):
            return base
        snap = self._snapshot(now_ms)
        doc["snap"] = snap
        full = MAGIC + json.dumps(doc, separators=(",", ":")).encode()
        return full if len(full) <= room else base

    def _snapshot(self, now_ms: int) -> dict[str, object]:
        for pid in list(self._producers):
            self._live(pid, now_ms)
        keep = self.window
        while True:
            snap: dict[str, object] = {}
            for pid, st in self._producers.items():
                w = []
                for b in list(st.window)[-keep:]:
                    d = b.dlsn.result() if b.dlsn.done() and b.dlsn.exception() is None else None
                    w.append([b.first, b.count, None if d is None else str(d)])
                snap[pid] = {"last": st.last, "ms": st.last_ms, "w": w}
            if keep <= 1 or len(json.dumps(snap)) <= SNAPSHOT_MAX_BYTES:
                return snap
            keep //= 2

    def stored(self, pid: str, first: int, count: int, dlsn: Future[DLSN], now_ms: int, marker: bytes) -> None:
        """Remember a batch just handed to the writer with ``marker`` (from :meth:`marker`)."""
        if b'"snap"' in marker:
            self._snapshot_due = False
            self._since_snapshot = 0
        self._since_snapshot += 1
        self._apply(pid, first, count, dlsn, now_ms)

    def _apply(self, pid: str, first: int, count: int, dlsn: Future[DLSN], now_ms: int) -> None:
        st = self._producers.get(pid)
        if st is None:
            st = self._producers[pid] = Producer()
        st.last = max(st.last, first + count - 1)
        st.last_ms = max(st.last_ms, now_ms)
        st.window.append(Batch(first, count, dlsn))
        while st.window and st.window[0].end <= st.last - self.window:
            st.window.popleft()

    # --- rebuild -----------------------------------------------------------------------------------
    def rebuild(self, dlm: LogManager) -> int:
        """Rebuild from the log (the writer is open, so every segment is complete): from the last snapshot on.
        Returns the number of markers read.

        Raises:
            CorruptedEntryError: a marker cannot be parsed. What reading the segments raises (SegmentStoreError...).
        """
        segments = dlm.log_segments()
        later: list[list[LogRecordWithDLSN]] = []
        start_snap: dict[str, object] | None = None
        before: list[LogRecordWithDLSN] = []
        oldest_ms = int(time.time() * 1000) - self.expiry_ms
        for seg in reversed(segments):
            if not seg.in_progress and 0 < seg.completion_time_ms < oldest_ms:
                break  # every batch here and before is older than the expiry: its producers are forgotten anyway
            markers = [r for r in dlm.control_records(seg) if r.payload.startswith(MAGIC) and r.payload != _NO_PRODUCER]
            idx = max((i for i, r in enumerate(markers) if b'"snap"' in r.payload), default=-1)
            if idx >= 0:
                start_snap = _parse(markers[idx])
                before = markers[:idx]
                later.append(markers[idx:])
                break
            later.append(markers)
        self._producers.clear()
        if start_snap is not None:
            self._load_snapshot(start_snap, before)
        n = 0
        for markers in reversed(later):
            for r in markers:
                doc = _parse(r)
                if "p" not in doc:
                    continue  # a write without a producer (at-least-once)
                self._apply(str(doc["p"]), int(str(doc["s"])), int(str(doc["n"])), _done(r.dlsn.next()), r.txid)
                n += 1
        self._snapshot_due = True
        self._since_snapshot = 0
        return n

    def _load_snapshot(self, marker: dict[str, object], before: Iterable[LogRecordWithDLSN]) -> None:
        snap = marker.get("snap")
        if not isinstance(snap, dict):
            raise CorruptedEntryError(f"bad producer snapshot {str(snap)[:80]}")
        earlier: dict[tuple[str, int], DLSN] = {}
        for r in before:  # batches in flight when the snapshot was taken
            doc = _parse(r)
            if "p" not in doc:
                continue
            earlier[(str(doc["p"]), int(str(doc["s"])))] = r.dlsn.next()
        for pid, st in snap.items():
            p = Producer(last=int(st["last"]), last_ms=int(st["ms"]))
            for first, count, d in st["w"]:
                if d is not None:
                    dlsn = DLSN.parse(d)
                elif (pid, int(first)) in earlier:
                    dlsn = earlier[(pid, int(first))]
                else:
                    continue  # its DLSN is unknown: a retry of it is denied, never stored twice
                p.window.append(Batch(int(first), int(count), _done(dlsn)))
            self._producers[str(pid)] = p


def _parse(r: LogRecordWithDLSN) -> dict[str, object]:
    try:
        doc = json.loads(r.payload[len(MAGIC) :].decode())
        if not isinstance(doc, dict) or ("p" in doc and ("s" not in doc or "n" not in doc)):
            raise ValueError("missing fields")
        return doc
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptedEntryError(f"bad proxy marker at {r.dlsn}: {e}") from e


__all__ = ["MAGIC", "SNAPSHOT_MAX_BYTES", "Batch", "DedupTable", "Plan", "Producer", "dlsn_at"]
