"""How :class:`dl_proxy.client.ProxyClient` treats the proxies' answers (a mixin of the client; every method runs on
the client's loop thread with the client's lock held, except :meth:`AnswerHandling._deliver`).

* success: per-record results resolve (or fail, or go again when a bulk was answered partly); the proxy that
  answered is the stream's owner (cached) and the stream leaves recovery;
* FOUND: follow the location at once (remembered as the owner), unless it is unreachable or the redirects go
  round: then back off and ask again (a dead owner's lock lasts until its ZooKeeper session expires);
* OUT_OF_ORDER_SEQUENCE: an earlier batch of ours is not stored yet: go after it; or the proxy wants sequences
  this client no longer holds: a new producer generation (:mod:`dl_proxy._batching`); RECORD_SET_SPLIT: resend
  the set's records separately;
* STREAM_UNAVAILABLE and other refusals: forget the owner, avoid that proxy for this batch, back off;
  transient errors on the owner: back off and resend (same sequences); unreachable proxies: avoided a while;
* definitive errors fail the batch's futures. Outcomes are queued and set by :meth:`_deliver` once the lock is
  released (a future's callback may call the client).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from dl_proxy._batching import Batch, BatchState, StreamState
from dl_proxy._transport import TransportError
from dl_proxy.errors import Disposition, disposition, error_for, status_name
from dl_proxy.ownership import OwnershipCache
from dl_proxy.proto import distributedlog_pb2 as pb
from storage.common.futures import FutureGroup
from storage.errors import DLError
from storage.formats.dlsn import DLSN
from storage.formats.recordset import member_dlsns

__all__ = ["AnswerHandling"]

log = logging.getLogger("dl_proxy.client")


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

    def _back_off(self, st: StreamState) -> None:
        """Full-jitter exponential backoff of the stream (caller holds the lock)."""
        st.backoff_s = min(self._backoff_max, max(self._backoff_start, st.backoff_s * 2))
        st.retry_at = time.monotonic() + self._rand.uniform(st.backoff_s / 2, st.backoff_s)

    def _on_transport_error(self, st: StreamState, b: Batch, target: str, e: TransportError) -> None:
        with self._mu:
            st.inflight -= 1
            b.state = BatchState.WAITING
            b.last_error = f"{target}: {e}"
            if e.definite:
                self._finish(st, b, [e.error] * len(b))
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
            kind = disposition(code)
            if kind is Disposition.SUCCESS:
                self._served(st, b, target)
                if isinstance(resp, pb.WriteResponse):
                    self._on_write_result(st, b, target, resp)
                else:
                    self._on_bulk_results(st, b, target, resp)
                return
            b.last_error = f"{target}: {status_name(code)}" + (f" {head.err_msg}" if head.err_msg else "")
            if kind is Disposition.REDIRECT:
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
                err = error_for(code, f"{head.err_msg} (stream {st.name!r}, proxy {target})",
                                location=head.location)  # fmt: skip
                self._finish(st, b, [err] * len(b))

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
            st.bump_pending = True  # the proxy wants records we no longer hold
        else:
            st.recovering = True  # the proxy is ahead of this batch yet did not call it a duplicate: ask again
            self._back_off(st)

    def _served(self, st: StreamState, b: Batch, target: str) -> None:
        """``target`` answered success: it owns the stream; the stream leaves recovery."""
        self.owners.update(st.name, target)
        self._quarantine.pop(target, None)
        st.confirmed = target
        st.recovering, st.backoff_s, b.redirects = False, 0.0, 0

    def _on_write_result(self, st: StreamState, b: Batch, target: str, resp: pb.WriteResponse) -> None:
        """A record (set) stored: its DLSN is the first member's; member ``i`` is at its slot + ``i``."""
        try:
            first = DLSN.deserialize(resp.dlsn)
        except DLError as e:
            self._finish(st, b, [e] * len(b))
            return
        self._finish(st, b, member_dlsns(first, len(b)))

    def _on_bulk_results(self, st: StreamState, b: Batch, target: str, resp: pb.BulkWriteResponse) -> None:
        """Per-record answers: stored ones resolve, definitive failures fail, the rest is resent (same seqs)."""
        results = list(resp.write_responses)
        if len(results) != len(b):
            err = error_for(pb.UNEXPECTED, f"proxy {target} answered {len(results)} results for {len(b)} records")
            self._finish(st, b, [err] * len(b))
            return
        outcomes: list[DLSN | DLError | None] = []
        for r in results:
            code = int(r.header.code)
            kind = disposition(code)
            if kind is Disposition.SUCCESS:
                try:
                    outcomes.append(DLSN.deserialize(r.dlsn))
                except DLError as e:
                    outcomes.append(e)
            elif kind is Disposition.FAIL:
                outcomes.append(error_for(code, f"{r.header.err_msg} (stream {st.name!r}, proxy {target})"))
            else:
                outcomes.append(None)  # not stored: send again
        if all(o is not None for o in outcomes):
            self._finish(st, b, outcomes)  # type: ignore[arg-type]
            return
        parts: list[Batch] = []
        i = 0
        while i < len(b):
            j = i + 1
            while j < len(b) and (outcomes[j] is None) == (outcomes[i] is None):
                j += 1
            if outcomes[i] is None:
                parts.append(b.split(i, j))
            else:
                done = b.split(i, j)
                done.state = BatchState.DONE
                self._resolve(done, outcomes[i:j])  # type: ignore[arg-type]
            i = j
        st.replace(b, parts)
        b.state = BatchState.DONE
        self._pending_bytes -= b.nbytes - sum(p.nbytes for p in parts)
        self._space.notify_all()

    def _finish(self, st: StreamState, b: Batch, outcomes: Sequence[DLSN | DLError]) -> None:
        """Resolve ``b``'s futures and drop it from the stream (caller holds the lock)."""
        b.state = BatchState.DONE
        if b in st.unacked:
            st.unacked.remove(b)
        self._pending_bytes -= b.nbytes
        self._space.notify_all()
        self._resolve(b, outcomes)

    def _resolve(self, b: Batch, outcomes: Sequence[DLSN | DLError]) -> None:
        """Queue the outcomes of ``b``'s futures; :meth:`_deliver` sets them once the lock is released (a
        future's callbacks may call back into the client)."""
        assert len(b.futures) == len(outcomes)
        self._outcomes.append((b.futures, outcomes))

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
