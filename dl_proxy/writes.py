"""The proxy's write path: one request (``write``, ``writeBulk``) or several streams' requests in one call
(``writeMulti``), checked, admitted, handed to their streams and answered once durable.

A write goes in two steps. :meth:`WritePath.begin` checks the request, admits it against the service limits,
finds (or acquires) its stream and hands its records to the stream's writer, which returns at once with futures;
:meth:`WritePath.end` waits for them (until the request's deadline) and builds the answer. ``write`` and
``writeBulk`` run both steps in their RPC thread. ``writeMulti`` begins every request whose stream is serving here
in its own thread, one after another (each only queues an entry); those of a stream this proxy does not own yet go
to the proxy's acquisition pool, which acquires many streams at once (a client sending the first writes of
thousands of streams, or failing over thousands of streams from a stopped proxy, has them acquired side by side
instead of one RPC thread per stream); those of a stream being acquired for another request wait for it in the
call's thread, after the others were begun (never holding a pool thread to wait). Then it ends them all: one
thread waits for every stream's entry, and the entries of different streams are made durable concurrently by
their writers.

One stream's refusal never affects another's. A request left in the acquisition pool at the deadline is answered
STREAM_NOT_READY: not stored if it had not started (it never will be), outcome unknown if it had (an idempotent
producer's resend is then answered as a duplicate if it was stored).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c
from prometheus_client import Counter

from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.stream import ProducerRequest, State, Stream
from storage.errors import CorruptedEntryError, OverCapacityError
from storage.formats.dlsn import DLSN
from storage.formats.record import MAX_LOGRECORD_SIZE, MAX_LOGRECORDSET_SIZE, RECORD_HEADER_SIZE, record_set_count
from storage.formats.recordset import validate_record_set
from storage.log.names import validate_log_name

log = logging.getLogger(__name__)

#: Largest payload the proxy stores (a record, with its producer marker, must fit one entry).
MAX_PAYLOAD = min(MAX_LOGRECORD_SIZE, MAX_LOGRECORDSET_SIZE - 2048) - RECORD_HEADER_SIZE
#: Longest producer id accepted.
MAX_PRODUCER_ID = 256
#: Most records in one request (a request is one entry: see MAX_REQUEST_BYTES).
MAX_REQUEST_RECORDS = 10_000
#: Most bytes of one request's records, record headers included: every request is stored as ONE entry (with
#: its producer marker), so it is stored whole or not at all.
MAX_REQUEST_BYTES = MAX_LOGRECORDSET_SIZE - RECORD_HEADER_SIZE - 2048
#: Most requests (streams) in one ``writeMulti``.
MAX_MULTI_REQUESTS = 4096
#: Streams acquired at once for ``writeMulti`` requests (each acquisition waits mostly on ZooKeeper).
ACQUIRE_THREADS = 32
#: How long a request without a deadline waits for its stream's acquisition and its records to be durable.
WRITE_WAIT_S = 60.0

DEDUP_HITS = Counter("dl_proxy_dedup_hits", "Idempotent producers: payloads already stored, answered duplicate")
LIMIT_HITS = Counter("dl_proxy_service_limit_hits", "Requests over a service limit", ["limit"])
MULTI_STREAMS = Counter("dl_proxy_multi_write_streams", "Streams' requests received inside writeMulti calls")


@dataclass
class Started:
    """A request after :meth:`WritePath.begin`: answered already (``header``/``per``), or handed to ``stream``
    (``futures``; the stream counts it in until :meth:`leave`)."""

    header: pb.ResponseHeader | None = None
    per: list[pb.WriteResponse] = field(default_factory=list)
    stream: Stream | None = None
    name: str = ""
    futures: list[Future[DLSN]] = field(default_factory=list)
    duplicate: bool = False
    epoch: int = -1
    _left: bool = False

    def leave(self) -> None:
        """Count the request out of its stream (once)."""
        if self.stream is not None and not self._left:
            self._left = True
            self.stream.leave()


def answered(header: pb.ResponseHeader) -> Started:
    return Started(header=header)


class WritePath:
    """The write requests of one servicer. ``get_stream(name, ctx, wait_s)`` finds or acquires a stream (raising
    what acquiring raises); ``error_header(e)`` turns an error into its response header."""

    def __init__(
        self,
        core: Any,
        get_stream: Callable[[str, pb.WriteContext, float], Stream],
        error_header: Callable[[BaseException], pb.ResponseHeader],
        failpoint: tuple[str, str],
    ) -> None:
        self.core = core
        self._get_stream = get_stream
        self._error_header = error_header
        self.failpoint, self._failpoint_arg = failpoint
        self._failpoint_n = int(self._failpoint_arg) if self._failpoint_arg.isdigit() else 1
        self._writes = 0
        self._writes_mu = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_mu = threading.Lock()

    def close(self) -> None:
        """Stop the acquisition pool (requests in it finish first)."""
        with self._pool_mu:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    # --- one request ------------------------------------------------------------------------------
    def write(self, stream: str, payloads: list[bytes], ctx: pb.WriteContext, budget_s: float) -> Started:
        """Begin and end one request in this thread."""
        deadline = time.monotonic() + budget_s
        return self.end(self.begin(stream, payloads, ctx, deadline), deadline)

    def begin(self, stream: str, payloads: list[bytes], ctx: pb.WriteContext, deadline: float) -> Started:
        """Check, admit and hand the request to its stream (acquiring it, or waiting for its acquisition, first)."""
        refused = check_request(payloads, ctx)
        if refused is not None:
            return answered(refused)
        if time.monotonic() >= deadline:
            return answered(
                pb.ResponseHeader(code=pb.STREAM_NOT_READY, err_msg="the request's deadline passed before its turn")
            )
        members = record_set_count(payloads[0]) if ctx.is_record_set else 0
        producer = None
        if ctx.producer_id:
            crc = 0
            for p in payloads:
                crc = crc32c(p, crc)
            epoch = ctx.producer_epoch if ctx.HasField("producer_epoch") else None
            producer = ProducerRequest(ctx.producer_id, epoch, ctx.producer_instance, ctx.sequence, crc)
        try:
            self._admit(sum(len(p) for p in payloads))
            s = self._get_stream(stream, ctx, max(0.0, deadline - time.monotonic()))
        except Exception as e:
            return answered(self._error_header(e))
        if not s.enter(self.core.max_waiting):
            return answered(
                pb.ResponseHeader(
                    code=pb.OVER_CAPACITY,
                    err_msg=f"stream {s.name!r} has {self.core.max_waiting} requests waiting on proxy "
                    f"{self.core.address} (proxyMaxWaitingRequestsPerStream): not stored, back off and retry",
                )
            )
        started = Started(stream=s, name=stream)
        try:
            if self.failpoint == "stall_writes" and self._failpoint_arg == s.name:
                time.sleep(max(0.0, deadline - time.monotonic()))
                started.header = pb.ResponseHeader(code=pb.STREAM_NOT_READY, err_msg="failpoint stall_writes")
            else:
                started.futures, started.duplicate, started.epoch = s.write(payloads, producer, members=members)
        except Exception as e:
            started.header = self._error_header(e)
        if started.header is not None:
            started.leave()
        return started

    def end(self, started: Started, deadline: float) -> Started:
        """Wait (until ``deadline``) for a begun request's records to be durable; fill in its answer."""
        if started.header is not None:
            return started
        try:
            futs = started.futures
            # one entry: every record is durable at once (the last future resolves last)
            if not _settled(futs[-1], max(0.0, deadline - time.monotonic()), started.name):
                started.header = pb.ResponseHeader(
                    code=pb.FLUSH_TIMEOUT,
                    err_msg="not durable within the request's deadline: the outcome is unknown (a resend with the same "
                    "sequence is answered as a duplicate if it was stored)",
                    outcome_unknown=True,
                )
                return started
            dlsns = [f.result(0) for f in futs]
        except Exception as e:
            started.header = write_failure(e)
            return started
        finally:
            started.leave()
        if started.duplicate:
            DEDUP_HITS.inc(len(dlsns))
        self._check_failpoint()
        assert started.stream is not None
        window = started.stream.table.window
        per = [pb.WriteResponse(header=pb.ResponseHeader(code=pb.SUCCESS), dlsn=d.serialize(),
                                duplicate=started.duplicate) for d in dlsns]  # fmt: skip
        header = pb.ResponseHeader(code=pb.SUCCESS, producer_epoch=max(started.epoch, 0), max_inflight=window)
        per[0].header.CopyFrom(header)
        started.header, started.per = header, per
        return started

    # --- several streams ----------------------------------------------------------------------------
    def write_multi(self, requests: list[pb.BulkWriteRequest], budget_s: float) -> list[Started]:
        """Serve several streams' requests (see the module docstring); one answer per request, in order."""
        deadline = time.monotonic() + budget_s
        if len(requests) > MAX_MULTI_REQUESTS or len({r.stream for r in requests}) != len(requests):
            bad = pb.ResponseHeader(
                code=pb.BAD_REQUEST,
                err_msg=f"writeMulti takes at most {MAX_MULTI_REQUESTS} requests, one per stream; got "
                f"{len(requests)} for {len({r.stream for r in requests})} streams: nothing stored",
            )
            return [answered(bad) for _ in requests]
        MULTI_STREAMS.inc(len(requests))
        slots: list[Started | Future[Started] | Callable[[], Started]] = []
        for r in requests:
            payloads = list(r.data)
            try:
                known = self.core.known(validate_log_name(r.stream))
            except Exception as e:
                slots.append(answered(self._error_header(e)))
                continue
            if known is not None and known.state is State.INITIALIZED:
                slots.append(self.begin(r.stream, payloads, r.ctx, deadline))
            elif known is not None:  # being acquired (by another request): wait for it here, after the others
                slots.append(functools.partial(self.begin, r.stream, payloads, r.ctx, deadline))
            else:
                slots.append(self._acquirer().submit(self.begin, r.stream, payloads, r.ctx, deadline))
        out = []
        for slot in slots:
            if isinstance(slot, Started):
                started = slot
            elif isinstance(slot, Future):
                started = self._collect(slot, deadline)
            else:
                started = slot()
            out.append(self.end(started, deadline))
        return out

    def _acquirer(self) -> ThreadPoolExecutor:
        with self._pool_mu:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(ACQUIRE_THREADS, thread_name_prefix="dl-proxy-acquire")
            return self._pool

    @staticmethod
    def _collect(fut: Future[Started], deadline: float) -> Started:
        """The begun request from the acquisition pool, or STREAM_NOT_READY at the deadline."""
        try:
            return fut.result(max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            pass
        if fut.cancel():
            return answered(
                pb.ResponseHeader(
                    code=pb.STREAM_NOT_READY, err_msg="the stream was not acquired within the request's deadline"
                )
            )
        fut.add_done_callback(lambda f: f.result().leave())  # it may still write: count it out when it has
        return answered(
            pb.ResponseHeader(
                code=pb.STREAM_NOT_READY,
                err_msg="the stream was still being acquired at the request's deadline; the request may still be "
                "stored (a resend with the same sequence is answered as a duplicate if it was)",
                outcome_unknown=True,
            )
        )

    # --- checks -------------------------------------------------------------------------------------
    def _admit(self, nbytes: int) -> None:
        lim = self.core.limiter
        if lim is None:
            return
        before = dict(lim.hits)
        try:
            lim.acquire(1, nbytes)
        except OverCapacityError as e:
            LIMIT_HITS.labels("hard").inc()
            raise OverCapacityError(str(e).replace("for stream proxy", "for proxy")) from None
        finally:
            if lim.hits["rps_soft"] != before["rps_soft"] or lim.hits["bps_soft"] != before["bps_soft"]:
                LIMIT_HITS.labels("soft").inc()

    def _check_failpoint(self) -> None:
        if self.failpoint != "after_append_before_reply":
            return
        with self._writes_mu:
            self._writes += 1
            if self._writes == self._failpoint_n:
                log.warning("failpoint after_append_before_reply: exiting before the reply")
                logging.shutdown()
                os._exit(17)


def _settled(fut: Future[DLSN], timeout_s: float, stream: str) -> bool:
    """Wait for ``fut`` to settle, waking only this thread (a storage future's own wait sleeps on the condition
    all futures of its writer share, so every acknowledgement of a stream would wake every request thread waiting
    on that stream); a line every few seconds while it waits more than a second. False at the timeout."""
    settled = threading.Event()
    fut.add_done_callback(lambda _f: settled.set())
    end = time.monotonic() + timeout_s
    step = 1.0
    while not settled.wait(max(0.0, min(step, end - time.monotonic()))):
        now = time.monotonic()
        if now >= end:
            return False
        log.info("waiting for the append of %r to be durable (%.1fs left)", stream, end - now)
        step = 5.0
    return True


def check_request(payloads: list[bytes], ctx: pb.WriteContext) -> pb.ResponseHeader | None:
    """The refusal of a malformed or oversized request (nothing stored), or None."""
    if not payloads:
        return pb.ResponseHeader(code=pb.BAD_REQUEST, err_msg="no payload")
    if ctx.HasField("crc32"):
        crc = 0
        for p in payloads:
            crc = zlib.crc32(p, crc)
        if crc != (ctx.crc32 & 0xFFFFFFFF):
            return pb.ResponseHeader(
                code=pb.CHECKSUM_FAILED, err_msg=f"crc32 {ctx.crc32} does not match the payload(s) ({crc})"
            )
    pid = ctx.producer_id
    if len(pid) > MAX_PRODUCER_ID or len(ctx.producer_instance) > MAX_PRODUCER_ID:
        return pb.ResponseHeader(
            code=pb.BAD_REQUEST, err_msg=f"producer_id or producer_instance longer than {MAX_PRODUCER_ID}"
        )
    if pid and ctx.sequence < 0:
        return pb.ResponseHeader(code=pb.BAD_REQUEST, err_msg=f"negative sequence {ctx.sequence}")
    if len(payloads) > MAX_REQUEST_RECORDS:
        return pb.ResponseHeader(
            code=pb.BAD_REQUEST, err_msg=f"{len(payloads)} records in one request; at most {MAX_REQUEST_RECORDS}"
        )
    big = next((p for p in payloads if len(p) > MAX_PAYLOAD), None)
    if big is not None:
        return pb.ResponseHeader(
            code=pb.TOO_LARGE_RECORD, err_msg=f"record of {len(big)} bytes > {MAX_PAYLOAD}: request not stored"
        )
    size = sum(RECORD_HEADER_SIZE + len(p) for p in payloads)
    if size > MAX_REQUEST_BYTES:
        return pb.ResponseHeader(
            code=pb.BAD_REQUEST,
            err_msg=f"request of {size} bytes (with record headers) is more than one entry holds "
            f"({MAX_REQUEST_BYTES}): send fewer records per request",
        )
    if ctx.is_record_set:
        if len(payloads) != 1:
            return pb.ResponseHeader(code=pb.BAD_REQUEST, err_msg="a record set travels alone (write)")
        try:
            members = validate_record_set(payloads[0])
        except CorruptedEntryError as e:
            return pb.ResponseHeader(code=pb.INVALID_ENVELOPED_ENTRY, err_msg=f"bad record set, not stored: {e}")
        if members < 1:
            return pb.ResponseHeader(code=pb.INVALID_ENVELOPED_ENTRY, err_msg="bad record set, not stored: no members")
    return None


def write_failure(e: BaseException) -> pb.ResponseHeader:
    """A write that failed after it was handed to the writer: its outcome is unknown; the stream stopped."""
    return pb.ResponseHeader(
        code=pb.STREAM_UNAVAILABLE,
        err_msg=f"the write failed ({type(e).__name__}: {e}); its outcome is unknown and the stream stopped "
        "here: an idempotent producer's resend is stored at most once",
        outcome_unknown=True,
    )


__all__ = ["MAX_PAYLOAD", "MAX_REQUEST_BYTES", "MAX_REQUEST_RECORDS", "WritePath", "check_request"]
