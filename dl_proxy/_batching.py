"""Client-side batching and the idempotent producer's per-stream state.

``write(stream, payload)`` appends to the stream's *open* batch; a batch is *sealed* when it reaches
``max_records`` or ``max_bytes`` or when its linger time is over (or on ``flush()``). Sealing gives it its
sequence numbers: the stream's next sequence for its first record, consecutive ones for the rest. A sealed
batch is one ``writeBulk`` request, resent with the SAME producer id and sequence numbers until the proxy
answers for it (that is what makes a resend after a lost reply or a failover safe: a proxy that already stored
it answers ``duplicate`` with the original DLSNs).

A batch of several records travels as ONE DistributedLog record set (``WriteContext.is_record_set``, the
records its members, stored as one record that every reader expands; a set of n members takes the sequences
``seq .. seq+n-1``), as DistributedLog's own client batches: the proxy then handles one payload per request,
and answers one DLSN (member ``i`` is at its slot + ``i``). With ``record_sets=False`` a batch is a
``writeBulk`` of separate records instead.

A stream keeps its sealed, unanswered batches in sequence order (``unacked``). The client sends them in that
order, several in flight at once when they are large (a small batch waits for the request in flight and grows
meanwhile, as Nagle's algorithm; a batch on an idle stream goes without lingering); one that overtook an earlier
one (OUT_OF_ORDER_SEQUENCE) waits until every earlier one is answered, then goes again. Consecutive batches
waiting to be sent for the first time are merged into one request (up to the batch limits) when it goes, so a
backlog (after a stall) drains in large requests; a batch that was sent once is resent as it was (a record set
is stored whole or not at all, so a resend then repeats all of a stored request or none of it). A set that does
not line up with what the proxy stored (a producer id reused by a client that batched differently) is answered
RECORD_SET_SPLIT and goes again as separate records, each answered on its own.

Epochs: the stream's first request carries no epoch, only the client's instance token; the proxy answers the
epoch it gave this instance (a new instance of the same producer id fences the older ones, see
:mod:`dl_proxy.dedup`), and every later request carries it.

The window: the proxy remembers the latest ``max_inflight`` requests of a producer (it says how many in every
answer) and the client never sends a new request while that many have gone out since its oldest unanswered one
(each first send takes an *ordinal*), so every request the client may resend is one the proxy remembers.

Delivery timeout: a batch not acknowledged within ``timeout_s`` fails (outcome unknown if it may have reached a
proxy, else definitively) and is abandoned: once nothing of the stream is in flight, it is dropped and the stream
*re-initialises*: a new instance token, hence a new epoch, and its unsent batches renumbered from 0. The same
happens when the proxy expects a sequence this client no longer holds (records that failed definitively leave a
gap) and when the proxy lost the producer's state (PRODUCER_STATE_LOST: the batches sent under the old epoch fail
as outcome unknown). Re-initialising only while nothing is in flight means no request of the old epoch can be
stored later.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from storage.errors import DLError
from storage.formats.dlsn import DLSN

__all__ = ["Batch", "BatchState", "StreamState"]


class BatchState(enum.Enum):
    OPEN = "open"  # still taking records
    WAITING = "waiting"  # sealed, to be sent
    IN_FLIGHT = "in_flight"  # a request is out
    DONE = "done"  # answered (or failed definitively)


@dataclass(eq=False)
class Batch:
    """Records of one stream sent as one ``writeBulk``: payloads and their futures, in write order."""

    stream: str
    created: float  # time.monotonic() of its first record
    deadline: float  # created + timeout_s: its futures fail then (outcome unknown)
    payloads: list[bytes] = field(default_factory=list)
    futures: list[Future[DLSN]] = field(default_factory=list)
    nbytes: int = 0
    state: BatchState = BatchState.OPEN
    producer_id: str = ""
    seq: int = -1  # sequence of the first payload, set when sealed
    attempts: int = 0  # requests sent
    redirects: int = 0  # FOUND answers followed in a row
    tried: list[str] = field(default_factory=list)  # every proxy asked (WriteContext.tried_hosts)
    avoid: set[str] = field(default_factory=set)  # proxies that said they cannot serve it
    target: str = ""  # the proxy of the request in flight (or the last one)
    after_ooo: bool = False  # overtook an earlier batch: resend once every earlier one is answered
    separate: bool = False  # send as separate records (writeBulk), not as a record set (RECORD_SET_SPLIT)
    last_error: str = ""
    ordinal: int = -1  # set at its first send (the window's count)
    #: an attempt may have stored it (a request that may have reached a proxy: a lost reply, an outcome-unknown
    #: answer); False: every attempt certainly did not store it
    maybe_stored: bool = False
    abandoned: bool = False  # its delivery timeout passed: its futures failed; dropped at the next re-init
    answered: bool = False  # a proxy answered one of its attempts (else no proxy was ever reached)

    def __len__(self) -> int:
        return len(self.payloads)

    @property
    def last_seq(self) -> int:
        return self.seq + len(self.payloads) - 1

    def seal(self, producer_id: str, seq: int) -> None:
        self.state = BatchState.WAITING
        self.producer_id = producer_id
        self.seq = seq

    def split(self, start: int, end: int) -> Batch:
        """A sealed batch of payloads ``[start, end)`` with their original sequence numbers (the part of a bulk
        answered with a retriable status while the rest was stored or failed)."""
        part = Batch(self.stream, self.created, self.deadline)
        part.payloads = self.payloads[start:end]
        part.futures = self.futures[start:end]
        part.nbytes = sum(len(p) for p in part.payloads)
        part.tried = list(self.tried)
        part.avoid = set(self.avoid)
        part.last_error = self.last_error
        part.attempts = self.attempts
        part.separate = self.separate
        part.ordinal = self.ordinal
        part.maybe_stored = self.maybe_stored
        part.seal(self.producer_id, self.seq + start)
        return part

    @property
    def waited_for(self) -> bool:
        """Some of its futures are still unresolved (not timed out): a caller waits for it."""
        return any(not f.done() for f in self.futures)

    def absorb(self, other: Batch) -> None:
        """Append ``other`` (sealed, the next sequences, same producer id) to this sealed batch."""
        assert other.producer_id == self.producer_id and other.seq == self.last_seq + 1, "not contiguous"
        self.payloads.extend(other.payloads)
        self.futures.extend(other.futures)
        self.nbytes += other.nbytes
        self.created = min(self.created, other.created)
        self.tried.extend(t for t in other.tried if t not in self.tried)
        other.state = BatchState.DONE

    def describe(self) -> str:
        seqs = f"seq {self.seq}..{self.last_seq}" if self.seq >= 0 else "not yet sequenced"
        via = f" via proxy {self.target}" if self.target else ""
        err = f", last error: {self.last_error}" if self.last_error else ""
        return f"{len(self)} records of stream {self.stream!r} ({seqs}{via}, {self.attempts} attempts{err})"


@dataclass(eq=False)
class StreamState:
    """One stream's batches and idempotent-producer state (guarded by the client's lock)."""

    name: str
    producer_id: str
    instance_base: str = ""
    open: Batch | None = None
    unacked: list[Batch] = field(default_factory=list)  # sealed, unanswered, in sequence order
    next_seq: int = 0
    inflight: int = 0
    #: the producer epoch the proxy gave this instance (-1: not yet known: requests ask for one)
    epoch: int = -1
    reinits: int = 0  # re-initialisations so far (the instance token's suffix)
    #: requests this client may have outstanding, as the proxy said (one until it answered)
    window: int = 1
    next_ordinal: int = 0
    #: only the first unanswered batch goes until one succeeds: at the start (the proxy gives the epoch with its
    #: first answer) and after a failure (the next proxy may be another one)
    recovering: bool = True
    backoff_s: float = 0.0
    retry_at: float = 0.0  # time.monotonic() before which nothing is sent
    retry_armed: bool = False
    #: why the stream must re-initialise once nothing is in flight ("" = no need)
    reinit_pending: str = ""
    #: a newer instance of this producer took the stream over: every write fails with it
    fenced: DLError | None = None
    confirmed: str = ""  # the proxy that answered the last success: only it gets several requests at once
    slow_logged: float = 0.0  # time.monotonic() of the last 'waiting' log line
    watch_armed: bool = False  # its delivery-timeout and slow-log timer is armed (the client's loop thread only)
    pending_bytes: int = 0  # bytes of this stream's open and unanswered batches

    @property
    def instance(self) -> str:
        """This instance's token for the proxy (a new one after every re-initialisation)."""
        return f"{self.instance_base}-{self.reinits}"

    def seal_open(self) -> Batch | None:
        """Seal the open batch (if any) and queue it; returns it."""
        b = self.open
        if b is None:
            return None
        self.open = None
        b.seal(self.producer_id, self.next_seq)
        self.next_seq += len(b)
        self.unacked.append(b)
        return b

    def replace(self, batch: Batch, parts: list[Batch]) -> None:
        """Put ``parts`` (sealed, in sequence order) where ``batch`` was in ``unacked``."""
        i = self.unacked.index(batch)
        self.unacked[i : i + 1] = parts

    def may_send_new(self, limit: int) -> bool:
        """Whether a batch never sent may go now: fewer than ``limit`` requests went out since the oldest
        unanswered one (the proxy remembers that many per producer)."""
        head = self.unacked[0] if self.unacked else None
        if head is None or head.ordinal < 0:
            return True
        return self.next_ordinal - head.ordinal < limit

    def reinitialise(self) -> list[Batch]:
        """Start a new epoch (nothing may be in flight): drop the abandoned batches and those an earlier attempt
        may have stored (renumbered, they could be stored twice: the caller fails them as outcome unknown), and
        renumber the rest (certainly not stored) from 0 under a new instance token. Returns the dropped batches."""
        assert self.inflight == 0, "re-initialising with requests in flight"
        dropped = [b for b in self.unacked if b.abandoned or b.maybe_stored]
        self.unacked = [b for b in self.unacked if not (b.abandoned or b.maybe_stored)]
        self.reinits += 1
        self.epoch = -1
        self.window = 1
        self.reinit_pending = ""
        self.recovering = True
        seq = 0
        for b in self.unacked:
            b.seal(self.producer_id, seq)
            b.ordinal = -1
            b.attempts = 0
            b.maybe_stored = False
            seq += len(b)
        self.next_seq = seq
        self.next_ordinal = 0
        return dropped

    def pending_futures(self, keep: Callable[[Batch], bool] = lambda b: True) -> list[Future[DLSN]]:
        """Futures of the open and unanswered batches that ``keep`` selects."""
        batches = [*self.unacked, *([self.open] if self.open is not None else [])]
        return [f for b in batches if keep(b) for f in b.futures]
