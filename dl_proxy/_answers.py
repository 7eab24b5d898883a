"""How :class:`dl_proxy.client.ProxyClient` treats the proxies' answers (a mixin of the client; every method runs on
the client's loop thread with the client's lock held, except :meth:`AnswerHandling._deliver`).

* success: the records resolve with their DLSNs; the proxy that answered owns the stream (cached), its answer
  carries the producer's epoch and window, and the stream leaves recovery;
* FOUND: follow the location at once (remembered as the owner), unless it is unreachable or the redirects go
  round: then back off and ask again (a dead owner's lock lasts until its ZooKeeper session expires);
* OUT_OF_ORDER_SEQUENCE: an earlier batch of ours is not stored yet: go after it; or the proxy wants sequences
  this client no longer holds: re-initialise (a new epoch, :mod:`dl_proxy._batching`); RECORD_SET_SPLIT: resend
  the set's records separately;
* PRODUCER_FENCED: a newer instance of this producer id took the stream over: the batch fails, and so does every
  later write to the stream; PRODUCER_STATE_LOST: the batch's outcome is unknown; the stream re-initialises (or,
  when the answer names a newer epoch, is fenced);
* STREAM_UNAVAILABLE and other refusals: forget the owner, avoid that proxy for this batch, back off;
  transient errors on the owner: back off and resend (same sequences); unreachable proxies: avoided a while;
* definitive errors fail the batch's futures. A failure is *outcome unknown* when any attempt of the batch may
  have stored it (a lost reply, an answer saying so), else definitive. Outcomes are queued and set by
  :meth:`_deliver` once the lock is released (a future's callback may call the client).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

import grpc

from dl_proxy._batching import Batch, BatchState, StreamState
from dl_proxy._client_metrics import ClientMetrics
from dl_proxy._transport import TransportError
from dl_proxy.errors import Disposition, disposition, error_for, status_name
from dl_proxy.ownership import OwnershipCache
from dl_proxy.proto import distributedlog_pb2 as pb
from storage.common.futures import FutureGroup
from storage.errors import DLError, ProducerFencedError
from storage.formats.dlsn import DLSN
from storage.formats.recordset import member_dlsns

__all__ = ["AnswerHandling"]

log = logging.getLogger("dl_proxy.client")

#: gRPC details of an UNAVAILABLE call that never left the client (no connection could be made).
_NOT_CONNECTED = ("failed to connect", "connection refused", "dns resolution", "name resolution", "no route to host",
                  "connect failed", "connection attempt timed out")  # fmt: skip


def never_sent(e: TransportError) -> bool:
    """True when the request certainly did not reach a proxy (no connection could be made)."""
    if e.code != grpc.StatusCode.UNAVAILABLE:
        return False
    text = str(e).lower()
    return any(s in text for s in _NOT_CONNECTED)


class AnswerHandling:
    """The answer side of the client; the attributes are the client's."""

    owners: OwnershipCache
    _mu: threading.Lock
    _space: threading.Condition
    _quarantine: dict[str, tuple[float, float]]
    _outcomes: list[tuple[Sequence[Future[DLSN]], Sequence[DLSN | DLError]]]
    _futures: FutureGroup
    _pending_bytes: int
    _max_redirects: int
    _backoff_start: float
    _backoff_max: float
    _rand: random.Random
    metrics: ClientMetrics

    def _back_off(self, st: StreamState) -> None:
        """Full-jitter exponential backoff of the stream (caller holds the lock)."""
        st.backoff_s = min(self._backoff_max, max(self._backoff_start, st.backoff_s * 2))
        st.retry_at = time.monotonic() + self._rand.uniform(st.backoff_s / 2, st.backoff_s)

    def _on_transport_error(self, st: StreamState, b: Batch, target: str, e: TransportError) -> None:
        with self._mu:
            st.inflight -= 1
            b.state = BatchState.WAITING
            b.last_error = f"{target}: {e}"
            if not never_sent(e) and not e.definite:
                b.maybe_stored = True  # the request may have been served (a lost reply, a broken connection)
            if e.definite:
                e.error.outcome_unknown = b.maybe_stored
                self._finish(st, b, [e.error] * len(b))
                return
            if b.abandoned:
                self._drop_abandoned(st, b)
                return
            if e.unreachable:
                self._mark_unreachable(target)
            b.avoid.add(target)
            self.owners.remove(st.name, target)
            st.recovering = True
            self._back_off(st)

    def _mark_unreachable(self, address: str) -> None:
        now = time.monotonic()
        until, length = self._quarantine.get(address, (0.0, 0.0))
        if until > now:
            return
        length = min(2.0, max(0.25, length * 2))
        self._quarantine[address] = (now + length, length)
        gone = self.owners.remove_owner(address)
        log.info("proxy %s unreachable: avoided for %.1fs (%d cached streams forgotten)", address, length, len(gone))

    def _on_response(
        self, st: StreamState, b: Batch, target: str, resp: pb.BulkWriteResponse | pb.WriteResponse
    ) -> None:
        head = resp.header
        code = int(head.code)
        with self._mu:
            st.inflight -= 1
            b.state = BatchState.WAITING
            b.answered = True
            kind = disposition(code)
            if kind is Disposition.SUCCESS:
                self._served(st, b, target, head)
                if isinstance(resp, pb.WriteResponse):
                    self._on_write_result(st, b, target, resp)
                else:
                    self._on_bulk_results(st, b, target, resp)
                return
            if head.outcome_unknown and kind not in (Disposition.FENCED, Disposition.STATE_LOST):
                b.maybe_stored = True  # (those two speak of earlier attempts, which the client knows better)
            b.last_error = f"{target}: {status_name(code)}" + (f" {head.err_msg}" if head.err_msg else "")
            detail = f"{head.err_msg} (stream {st.name!r}, proxy {target})"
            if kind is Disposition.FENCED:
                err = error_for(code, detail, epoch=int(head.producer_epoch), outcome_unknown=head.outcome_unknown)
                self._fence(st, err)
                self._finish(st, b, [err] * len(b))
            elif kind is Disposition.STATE_LOST:
                newer = 0 <= st.epoch < int(head.producer_epoch)
                if b.maybe_stored or newer:
                    # an earlier attempt may have stored it (or an older epoch's did): its outcome is unknown
                    err = error_for(code, detail, epoch=int(head.producer_epoch), outcome_unknown=True)
                    self._finish(st, b, [err] * len(b))
                if newer:
                    self._fence(
                        st,
                        ProducerFencedError(
                            f"{detail}: a newer instance holds epoch {head.producer_epoch}",
                            epoch=int(head.producer_epoch),
                        ),
                    )
                elif st.fenced is None:
                    # batches never stored are sent again under a new epoch (renumbered); see _batching
                    st.reinit_pending = st.reinit_pending or "the proxy lost this producer's state"
            elif b.abandoned:
                self._drop_abandoned(st, b)
            elif kind is Disposition.REDIRECT:
                self._on_found(st, b, target, head.location)
            elif kind is Disposition.RESEQUENCE:
                self._on_out_of_order(st, b, int(head.expected_sequence))
            elif kind is Disposition.SPLIT:
                b.separate = True  # goes again at once, as separate records
            elif kind is Disposition.REROUTE:
                self.owners.remove(st.name, target)
                b.avoid.add(target)
                st.recovering = True
                self._back_off(st)
            elif kind is Disposition.RETRY:
                st.recovering = True
                self._back_off(st)
            else:
                err = error_for(code, detail, location=head.location, outcome_unknown=b.maybe_stored)
                self._finish(st, b, [err] * len(b))

    def _fence(self, st: StreamState, err: DLError) -> None:
        """A newer instance of this producer took the stream over: fail every batch never sent (certainly not
        stored) and every later write; batches sent before are resent once to learn their outcome."""
        if st.fenced is None:
            log.warning("stream %r: %s", st.name, err)
        definitive = ProducerFencedError(str(err), epoch=getattr(err, "epoch", None))
        st.fenced = definitive
        for other in list(st.unacked):
            if other.attempts == 0 and other.state is BatchState.WAITING:
                self._finish(st, other, [definitive] * len(other))
        if st.open is not None:
            ob = st.open
            st.open = None
            ob.state = BatchState.DONE
            self._release_bytes(st, ob.nbytes)
            self._resolve(ob, [definitive] * len(ob))

    def _drop_abandoned(self, st: StreamState, b: Batch) -> None:
        """An abandoned batch (its delivery timeout passed; its futures have failed) got a non-success answer: it
        goes no more; the stream re-initialises once nothing is in flight."""
        st.reinit_pending = st.reinit_pending or "a batch passed its delivery timeout"

    def _on_found(self, st: StreamState, b: Batch, target: str, location: str) -> None:
        b.redirects += 1
        now = time.monotonic()
        owner_down = location in self._quarantine and self._quarantine[location][0] > now
        if location and location != target and not owner_down and b.redirects <= self._max_redirects:
            self.owners.update(st.name, location)  # follow at once
            b.avoid.discard(location)
            return
        # the owner is unreachable (its lock not yet expired), or redirects go round: wait, then ask again
        self.owners.remove(st.name)
        b.redirects = 0
        st.recovering = True
        self._back_off(st)

    def _on_out_of_order(self, st: StreamState, b: Batch, expected: int) -> None:
        first = st.unacked[0] if st.unacked else b
        if first.seq <= expected < b.seq:
            b.after_ooo = True  # an earlier batch of ours is not stored yet: go after it
        elif expected < first.seq:
            st.reinit_pending = st.reinit_pending or f"the proxy expects sequence {expected}, no longer held here"
        else:
            st.recovering = True  # the proxy is ahead of this batch yet did not call it a duplicate: ask again
            self._back_off(st)

    def _served(self, st: StreamState, b: Batch, target: str, head: pb.ResponseHeader) -> None:
        """``target`` answered success: it owns the stream; its epoch and window are the producer's now; the
        stream leaves recovery."""
        self.owners.update(st.name, target)
        self._quarantine.pop(target, None)
        st.confirmed = target
        st.recovering, st.backoff_s, b.redirects = False, 0.0, 0
        if b.producer_id:
            st.epoch = int(head.producer_epoch)
            st.window = max(1, int(head.max_inflight))

    def _on_write_result(self, st: StreamState, b: Batch, target: str, resp: pb.WriteResponse) -> None:
        """A record (set) stored: its DLSN is the first member's; member ``i`` is at its slot + ``i``."""
        try:
            first = DLSN.deserialize(resp.dlsn)
        except DLError as e:
            e.outcome_unknown = True
            self._finish(st, b, [e] * len(b))
            return
        self._finish(st, b, member_dlsns(first, len(b)))

    def _on_bulk_results(self, st: StreamState, b: Batch, target: str, resp: pb.BulkWriteResponse) -> None:
        """Per-record answers of a stored request (a request is stored whole: every record succeeded)."""
        results = list(resp.write_responses)
        outcomes: list[DLSN | DLError] = []
        if len(results) != len(b):
            err = error_for(pb.UNEXPECTED, f"proxy {target} answered {len(results)} results for {len(b)} records",
                            outcome_unknown=True)  # fmt: skip
            self._finish(st, b, [err] * len(b))
            return
        for r in results:
            try:
                outcomes.append(DLSN.deserialize(r.dlsn))
            except DLError as e:
                e.outcome_unknown = True
                outcomes.append(e)
        self._finish(st, b, outcomes)

    def _release_bytes(self, st: StreamState, nbytes: int) -> None:
        self._pending_bytes -= nbytes
        st.pending_bytes -= nbytes
        self._space.notify_all()

    def _finish(self, st: StreamState, b: Batch, outcomes: Sequence[DLSN | DLError]) -> None:
        """Resolve ``b``'s futures and drop it from the stream (caller holds the lock)."""
        b.state = BatchState.DONE
        if b in st.unacked:
            st.unacked.remove(b)
        self._release_bytes(st, b.nbytes)
        self._resolve(b, outcomes)

    def _resolve(self, b: Batch, outcomes: Sequence[DLSN | DLError]) -> None:
        """Queue the outcomes of ``b``'s futures; :meth:`_deliver` sets them once the lock is released (a
        future's callbacks may call back into the client)."""
        assert len(b.futures) == len(outcomes)
        self._outcomes.append((b.futures, outcomes))
        m = self.metrics
        if b.attempts:
            m.ack_latency.observe(time.monotonic() - b.created)
        acked = sum(1 for o in outcomes if isinstance(o, DLSN))
        if acked:
            m.records_acked.inc(acked)
        for o in outcomes:
            if isinstance(o, DLError):
                m.records_failed.labels("unknown" if o.outcome_unknown else "definitive").inc()

    def _deliver(self) -> None:
        """Set the queued outcomes (loop thread, lock NOT held)."""
        while self._outcomes:
            batch, self._outcomes = self._outcomes, []
            for futures, outcomes in batch:
                ok: list[Future[DLSN]] = []
                dlsns: list[DLSN] = []
                for f, o in zip(futures, outcomes, strict=True):
                    if isinstance(o, DLSN):
                        ok.append(f)
                        dlsns.append(o)
                    elif not f.done():
                        f.set_exception(o)
                self._futures.resolve(ok, dlsns)  # those already finished (timed out) are left alone
