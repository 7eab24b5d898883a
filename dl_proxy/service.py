"""The gRPC servicer of the write proxy: DistributedLog's ``service DistributedLogService``
(dl_proxy/proto/distributedlog.proto) over the streams this proxy owns (:mod:`dl_proxy.stream`).

Every reply carries DistributedLog's status code in its ``ResponseHeader`` (the transport status stays OK, so
a client always learns what happened; only ``handshake``, whose reply has no header, fails a bad token with the
gRPC status UNAUTHENTICATED). A ``storage.errors`` class becomes the status of its ``code`` (its DistributedLog
code), and a few cases are the proxy's own:

=====================================  ==========================================================================
FOUND (302), ``location``              another proxy owns the stream (its lock owner id is that proxy's address)
STREAM_UNAVAILABLE (515)               not owned here (stopped: lock lost, fenced, released, closing, draining: not
                                       accepting new streams; or held by a writer that is not a proxy)
TOO_MANY_STREAMS (524)                 ``maxAcquiredPartitionsPerProxy`` reached
OVER_CAPACITY (517)                    ``rpsHardServiceLimit`` / ``bpsHardServiceLimit``, a stream's hard write limit,
                                       or ``proxyMaxWaitingRequestsPerStream`` requests of the stream already waiting
SERVICE_UNAVAILABLE (503)              the proxy is shutting down
REQUEST_DENIED (403)                   missing or bad ``authorization: Bearer <token>``; a producer's retry older
                                       than its dedup window
TOO_LARGE_RECORD (413)                 a payload above the record limit (a bulk's other payloads are still written)
CHECKSUM_FAILED (523)                  ``WriteContext.crc32`` does not match the payload(s)
LOG_NOT_FOUND (510)                    unknown stream, unless ``create_if_missing`` or ``proxyCreateStreamOnWrite``
OUT_OF_ORDER_SEQUENCE (530)            a producer's sequence above the next expected (``expected_sequence``)
RECORD_SET_SPLIT (531)                 a producer's record set repeating its stored requests unevenly (resend its
                                       records separately)
PRODUCER_FENCED (532)                  a newer instance of the producer id holds the stream (not stored)
PRODUCER_STATE_LOST (533)              the producer's state is gone (evicted, expired): outcome unknown
SEQUENCE_MISMATCH (534)                a resend that is not the stored request (not stored)
ZOOKEEPER_ERROR (505)                  ZooKeeper unreachable (MetadataConnectionError; retriable)
BAD_REQUEST (400) / INVALID_STREAM_NAME (602)  malformed input
=====================================  ==========================================================================

Isolation: a request waits (for its stream's acquisition, its turn, its durability) at most until its deadline, and
at most ``proxyMaxWaitingRequestsPerStream`` requests of one stream wait at once (more are answered OVER_CAPACITY at
once): a stalled stream holds a bounded share of the RPC threads, never all of them.

Failpoints (tests): ``DLOG_PROXY_FAILPOINT=after_append_before_reply[:N]`` ends the process (``os._exit(17)``) on
the N-th write request (default the first) once its records are durable, before it replies: the lost reply.
``DLOG_PROXY_FAILPOINT=stall_writes:NAME`` holds every write request of stream ``NAME`` until its deadline (a stuck
stream). ``DLOG_PROXY_FAILPOINT=no_write_multi`` answers ``writeMulti`` as a proxy of a version without it does
(gRPC UNIMPLEMENTED).
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from typing import Any

import grpc
from prometheus_client import Counter, Gauge, Histogram

from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.proto import distributedlog_pb2_grpc as pb_grpc
from dl_proxy.registry import Announcement, check_address
from dl_proxy.stream import State, Stream
from dl_proxy.writes import MAX_REQUEST_BYTES, MAX_REQUEST_RECORDS, WritePath
from storage.config import Config
from storage.errors import (
    DLError,
    InvalidArgumentError,
    MetadataConnectionError,
    OutOfOrderSequenceError,
    OwnershipAcquireFailedError,
    ProducerFencedError,
    ProducerStateLostError,
    StreamUnavailableError,
)
from storage.formats.dlsn import DLSN
from storage.log.limits import WriteLimiter, WriteLimits
from storage.log.names import validate_log_name
from storage.log.namespace import Namespace

log = logging.getLogger(__name__)

#: How long a request without a deadline waits for its stream's acquisition, and for its records to be durable
#: (a request's gRPC deadline bounds both, less a margin to answer in time).
ACQUIRE_WAIT_S = 30.0
WRITE_WAIT_S = 60.0
#: Owned streams whose lock the ownership monitor checks per tick (10 ticks a second).
OWNERSHIP_CHECKS_PER_TICK = 500
#: Streams released at once when the proxy shuts down.
RELEASE_THREADS = 32
#: Time kept to answer before a request's deadline.
DEADLINE_MARGIN_S = 0.05
FAILPOINT_ENV = "DLOG_PROXY_FAILPOINT"

REQUESTS = Counter("dl_proxy_requests", "Proxy requests by method and status code", ["method", "code"])
LATENCY = Histogram(
    "dl_proxy_request_seconds",
    "Proxy request latency by method",
    ["method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
OWNED = Gauge("dl_proxy_owned_streams", "Streams this proxy owns")
REDIRECTS = Counter("dl_proxy_redirects", "Requests answered FOUND (redirected to the owner)")

_KNOWN_CODES = set(pb.StatusCode.values())
_DENIED = pb.ResponseHeader(code=pb.REQUEST_DENIED, err_msg="missing or bad auth token")


class ProxyCore:
    """What the servicer serves: the owned streams, the service limits, the accept flag, the announcement."""

    def __init__(self, ns: Namespace, conf: Config, address: str, announcement: Announcement | None) -> None:
        self.ns = ns
        self.conf = conf
        self.address = address
        self.announcement = announcement
        self.accepting = True
        self.shutting_down = False
        self._mu = threading.Lock()
        self._streams: dict[str, Stream] = {}
        self._owners: dict[str, str] = {}  # stream -> last owner seen elsewhere (getOwner)
        self.max_streams = int(conf.get("maxAcquiredPartitionsPerProxy"))
        self.create_on_write = bool(conf.get("proxyCreateStreamOnWrite"))
        self.max_waiting = int(conf.get("proxyMaxWaitingRequestsPerStream"))
        self.idle_s = float(conf.get("proxyStreamIdleSeconds"))
        limits = WriteLimits(
            rps_soft=float(conf.get("rpsSoftServiceLimit")),
            rps_hard=float(conf.get("rpsHardServiceLimit")),
            bps_soft=float(conf.get("bpsSoftServiceLimit")),
            bps_hard=float(conf.get("bpsHardServiceLimit")),
        )
        self.limiter = WriteLimiter(f"proxy {address}", limits) if limits.active else None
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch_ownership, name="dl-proxy-ownership", daemon=True)
        self._monitor.start()

    # --- streams ---------------------------------------------------------------------------------
    def owned(self) -> dict[str, Stream]:
        with self._mu:
            return dict(self._streams)

    def get(self, name: str, *, create: bool, wait_s: float = 30.0) -> Stream:
        """The stream, acquiring it on first use (this thread acquires; concurrent requests wait for it).

        Raises:
            OwnershipAcquireFailedError, LogNotFoundError, StreamUnavailableError (shutting down, not accepting
            new streams), DLError (TOO_MANY_STREAMS as code 524), StreamNotReadyError.
        """
        with self._mu:
            stream = self._streams.get(name)
            mine = stream is None
            if mine:
                if self.shutting_down:
                    raise _status_error(503, "proxy is shutting down")
                if not self.accepting:
                    raise StreamUnavailableError(f"proxy {self.address} is not accepting new streams (draining)")
                if 0 < self.max_streams <= len(self._streams):
                    raise _status_error(
                        524, f"proxy {self.address} owns {len(self._streams)} streams (maxAcquiredPartitionsPerProxy)"
                    )
                stream = self._streams[name] = Stream(name, self.ns, self.conf, self._gone)
        assert stream is not None
        if mine:
            try:
                stream.acquire(create=create)
            except OwnershipAcquireFailedError as e:
                if e.current_owner:
                    with self._mu:
                        self._owners[name] = e.current_owner
                raise
            OWNED.set(len(self.owned()))
            return stream
        _wait_logged(lambda t: stream.wait_ready(t), wait_s, f"stream {name!r} being acquired")
        return stream

    def known(self, name: str) -> Stream | None:
        """The stream if this proxy owns it or is acquiring it (no waiting, no acquiring)."""
        return self._streams.get(name)

    def _gone(self, stream: Stream) -> None:
        with self._mu:
            if self._streams.get(stream.name) is stream:
                del self._streams[stream.name]
            n = len(self._streams)
        OWNED.set(n)

    def last_owner(self, name: str) -> str:
        with self._mu:
            return self._owners.get(name, "")

    def _watch_ownership(self) -> None:
        """Stop streams whose lock is gone (session expired) even when no request comes; release streams idle
        for ``proxyStreamIdleSeconds``. Each tick looks at :data:`OWNERSHIP_CHECKS_PER_TICK` streams, the next
        ones at the next tick, so thousands of owned streams cost a bounded share of the CPU (a request checks
        its own stream's lock anyway)."""
        next_idle_check = time.monotonic() + 1.0
        cursor = 0
        while not self._stop.wait(0.1):
            owned = list(self.owned().values())
            if cursor >= len(owned):
                cursor = 0
            for s in owned[cursor : cursor + OWNERSHIP_CHECKS_PER_TICK]:
                if s.state is State.INITIALIZED and not s.is_serving():
                    s.stop(StreamUnavailableError("the write lock is lost (ZooKeeper session expired or fenced)"))
            cursor += OWNERSHIP_CHECKS_PER_TICK
            now = time.monotonic()
            if self.idle_s > 0 and now >= next_idle_check:
                next_idle_check = now + max(1.0, self.idle_s / 10)
                idle = [s for s in owned if s.state is State.INITIALIZED and s.idle_for(now) >= self.idle_s]
                if idle:
                    log.info("releasing %d streams idle for %.0fs or more (proxyStreamIdleSeconds)", len(idle),
                             self.idle_s)  # fmt: skip
                    release_all(idle)

    def set_accepting(self, enabled: bool) -> None:
        self.accepting = enabled
        if self.announcement is not None:
            try:
                self.announcement.set_status("WRITE_AND_ACCEPT" if enabled else "WRITE_ONLY")
            except DLError as e:
                log.warning("could not announce the new status: %s", e)

    def shutdown(self) -> None:
        """Refuse new streams, release every owned stream (the next owner takes over at once)."""
        with self._mu:
            self.shutting_down = True
            self.accepting = False
        if self.announcement is not None:
            try:
                self.announcement.set_status("DOWN")
            except DLError as e:
                log.info("could not announce DOWN: %s", e)
        release_all(list(self.owned().values()))
        self._stop.set()
        OWNED.set(0)


def release_all(streams: list[Stream]) -> None:
    """Release ``streams`` side by side: each release commits and closes a segment (ZooKeeper round trips), and
    the next owner of each stream waits for it."""
    if not streams:
        return
    with ThreadPoolExecutor(min(RELEASE_THREADS, len(streams)), thread_name_prefix="dl-proxy-release") as pool:
        list(pool.map(Stream.release, streams))


def _status_error(code: int, message: str, *, retriable: bool = True) -> DLError:
    e = DLError(message, retriable=retriable)
    e.code = code
    return e


def _wait_logged(wait: Callable[[float], Any], total_s: float, what: str) -> Any:
    """``wait(timeout)``, logging what it waits for when that takes more than a second."""
    if total_s <= 1.0:
        return wait(total_s)
    try:
        return wait(1.0)
    except (FutureTimeout, DLError) as e:
        if isinstance(e, DLError) and e.code != 518:
            raise
    log.info("waiting for %s (more than 1s)", what)
    return wait(max(total_s - 1.0, 0.0))


class DistributedLogService(pb_grpc.DistributedLogServiceServicer):
    """The servicer. ``token``: the shared auth token (None: no token required)."""

    def __init__(self, core: ProxyCore, token: str | None = None) -> None:
        self.core = core
        self._token = None if token is None else f"Bearer {token}".encode()
        self.writes = WritePath(
            core, self._write_stream, self._header, _parse_failpoint(os.environ.get(FAILPOINT_ENV, ""))
        )

    # --- plumbing --------------------------------------------------------------------------------
    def _authorized(self, context: grpc.ServicerContext) -> bool:
        if self._token is None:
            return True
        for key, value in context.invocation_metadata():
            if key == "authorization":
                got = value.encode() if isinstance(value, str) else bytes(value)
                return hmac.compare_digest(got, self._token)
        return False

    @contextmanager
    def _timed(self, method: str) -> Iterator[dict[str, int]]:
        t0 = time.perf_counter()
        out = {"code": 200}
        try:
            yield out
        finally:
            LATENCY.labels(method).observe(time.perf_counter() - t0)
            REQUESTS.labels(method, str(out["code"])).inc()

    def _header(self, e: BaseException) -> pb.ResponseHeader:
        """The response header for an error."""
        if isinstance(e, OwnershipAcquireFailedError):
            owner = e.current_owner or ""
            if _is_address(owner) and owner != self.core.address:
                REDIRECTS.inc()
                return pb.ResponseHeader(code=pb.FOUND, err_msg=f"owned by {owner}", location=owner)
            return pb.ResponseHeader(
                code=pb.STREAM_UNAVAILABLE, err_msg=f"owned by {owner or 'another writer'} (not a proxy to redirect to)"
            )
        if isinstance(e, OutOfOrderSequenceError):
            expected = e.expected_sequence or 0
            return pb.ResponseHeader(code=pb.OUT_OF_ORDER_SEQUENCE, err_msg=str(e), expected_sequence=expected)
        if isinstance(e, ProducerFencedError | ProducerStateLostError):
            return pb.ResponseHeader(
                code=e.code,  # type: ignore[arg-type]
                err_msg=str(e),
                producer_epoch=max(e.epoch if e.epoch is not None else -1, 0),
                outcome_unknown=e.outcome_unknown,
            )
        if isinstance(e, MetadataConnectionError):  # ZooKeeper unreachable: retriable, as DistributedLog's 505
            return pb.ResponseHeader(code=pb.ZOOKEEPER_ERROR, err_msg=f"{type(e).__name__}: {e}")
        if isinstance(e, DLError):
            code = e.code if e.code in _KNOWN_CODES else None
            if code is None:
                code = pb.BAD_REQUEST if isinstance(e, InvalidArgumentError) else pb.INTERNAL_SERVER_ERROR
            return pb.ResponseHeader(
                code=code,  # type: ignore[arg-type]
                err_msg=f"{type(e).__name__}: {e}",
                outcome_unknown=e.outcome_unknown,
            )
        log.exception("unexpected error in a proxy request", exc_info=e)
        return pb.ResponseHeader(code=pb.INTERNAL_SERVER_ERROR, err_msg=f"{type(e).__name__}: {e}")

    def _reply(self, out: dict[str, int], header: pb.ResponseHeader, dlsn: str = "") -> pb.WriteResponse:
        out["code"] = header.code
        return pb.WriteResponse(header=header, dlsn=dlsn)

    def _stream(
        self, name: str, ctx: pb.WriteContext | None, *, for_write: bool, wait_s: float = ACQUIRE_WAIT_S
    ) -> Stream:
        norm = validate_log_name(name)
        create = bool(for_write and (self.core.create_on_write or (ctx is not None and ctx.create_if_missing)))
        return self.core.get(norm, create=create, wait_s=wait_s)

    def _write_stream(self, name: str, ctx: pb.WriteContext, wait_s: float) -> Stream:
        return self._stream(name, ctx, for_write=True, wait_s=wait_s)

    # --- writes (dl_proxy.writes) ------------------------------------------------------------------
    def write(self, request: pb.WriteRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        with self._timed("write") as out:
            if not self._authorized(context):
                return self._reply(out, _DENIED)
            done = self.writes.write(request.stream, [request.data], request.ctx, _budget(context))
            assert done.header is not None
            resp = done.per[0] if done.per else pb.WriteResponse(header=done.header)
            out["code"] = resp.header.code
            return resp

    def writeBulk(self, request: pb.BulkWriteRequest, context: grpc.ServicerContext) -> pb.BulkWriteResponse:
        with self._timed("writeBulk") as out:
            if not self._authorized(context):
                out["code"] = pb.REQUEST_DENIED
                return pb.BulkWriteResponse(header=_DENIED)
            done = self.writes.write(request.stream, list(request.data), request.ctx, _budget(context))
            out["code"] = done.header.code if done.header is not None else pb.INTERNAL_SERVER_ERROR
            return pb.BulkWriteResponse(header=done.header, write_responses=done.per)

    def writeMulti(self, request: pb.MultiWriteRequest, context: grpc.ServicerContext) -> pb.MultiWriteResponse:
        with self._timed("writeMulti") as out:
            if not self._authorized(context):
                out["code"] = pb.REQUEST_DENIED
                return pb.MultiWriteResponse(responses=[pb.BulkWriteResponse(header=_DENIED) for _ in request.requests])
            if self.writes.failpoint == "no_write_multi":
                out["code"] = pb.NOT_IMPLEMENTED
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found! (failpoint no_write_multi)")
            done = self.writes.write_multi(list(request.requests), _budget(context))
            responses = [pb.BulkWriteResponse(header=d.header, write_responses=d.per) for d in done]
            codes = {r.header.code for r in responses} - {pb.SUCCESS}
            out["code"] = min(codes) if codes else pb.SUCCESS
            return pb.MultiWriteResponse(responses=responses)

    # --- other stream operations -----------------------------------------------------------------
    def _op(self, method: str, context: grpc.ServicerContext, body: Callable[[], pb.WriteResponse]) -> pb.WriteResponse:
        with self._timed(method) as out:
            if not self._authorized(context):
                return self._reply(out, _DENIED)
            try:
                resp = body()
            except Exception as e:
                return self._reply(out, self._header(e))
            out["code"] = resp.header.code
            return resp

    def heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        def body() -> pb.WriteResponse:
            s = self._stream(request.stream, request.ctx, for_write=False)
            d = s.heartbeat(to_readers=request.options.send_heart_beat_to_reader)
            return pb.WriteResponse(
                header=pb.ResponseHeader(code=pb.SUCCESS), dlsn="" if d == DLSN.INVALID else d.serialize()
            )

        return self._op("heartbeat", context, body)

    def truncate(self, request: pb.TruncateRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        def body() -> pb.WriteResponse:
            dlsn = DLSN.deserialize(request.dlsn)
            s = self._stream(request.stream, request.ctx, for_write=False)
            s.truncate(dlsn)
            return pb.WriteResponse(header=pb.ResponseHeader(code=pb.SUCCESS), dlsn=request.dlsn)

        return self._op("truncate", context, body)

    def release(self, request: pb.StreamRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        def body() -> pb.WriteResponse:
            s = self.core.owned().get(validate_log_name(request.stream))
            if s is not None:
                s.release()
            return pb.WriteResponse(header=pb.ResponseHeader(code=pb.SUCCESS))

        return self._op("release", context, body)

    def create(self, request: pb.StreamRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        def body() -> pb.WriteResponse:
            self.core.ns.create_log(validate_log_name(request.stream))
            return pb.WriteResponse(header=pb.ResponseHeader(code=pb.SUCCESS))

        return self._op("create", context, body)

    def delete(self, request: pb.StreamRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        def body() -> pb.WriteResponse:
            s = self._stream(request.stream, request.ctx, for_write=False)  # FOUND if another proxy owns it
            s.delete()  # under the write lock: no other proxy can take the log between the two
            return pb.WriteResponse(header=pb.ResponseHeader(code=pb.SUCCESS))

        return self._op("delete", context, body)

    def getOwner(self, request: pb.StreamRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        def body() -> pb.WriteResponse:
            name = validate_log_name(request.stream)
            s = self.core.owned().get(name)
            if s is not None and s.is_serving():
                return pb.WriteResponse(header=pb.ResponseHeader(code=pb.SUCCESS, location=self.core.address))
            owner = self.core.last_owner(name)
            return pb.WriteResponse(header=pb.ResponseHeader(code=pb.SUCCESS, location=owner if owner else ""))

        return self._op("getOwner", context, body)

    def handshake(self, request: pb.ClientInfo, context: grpc.ServicerContext) -> pb.ServerInfo:
        with self._timed("handshake") as out:
            if not self._authorized(context):
                out["code"] = pb.REQUEST_DENIED
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "REQUEST_DENIED: missing or bad auth token")
            core = self.core
            status = pb.DOWN if core.shutting_down else pb.WRITE_AND_ACCEPT if core.accepting else pb.WRITE_ONLY
            info = pb.ServerInfo(
                server_status=status,
                max_inflight=int(core.conf.get("proxyProducerWindow")),
                max_request_bytes=MAX_REQUEST_BYTES,
                max_request_records=MAX_REQUEST_RECORDS,
            )
            if request.get_ownerships:
                try:
                    pattern = re.compile(request.stream_name_regex) if request.stream_name_regex else None
                except re.error as e:
                    out["code"] = pb.BAD_REQUEST
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"BAD_REQUEST: bad stream_name_regex: {e}")
                for name, s in sorted(core.owned().items()):
                    if s.is_serving() and (pattern is None or pattern.search(name)):
                        info.ownerships[name] = core.address
            return info

    def setAcceptNewStream(
        self, request: pb.SetAcceptNewStreamRequest, context: grpc.ServicerContext
    ) -> pb.SetAcceptNewStreamResponse:
        with self._timed("setAcceptNewStream") as out:
            if not self._authorized(context):
                out["code"] = pb.REQUEST_DENIED
                return pb.SetAcceptNewStreamResponse(
                    header=pb.ResponseHeader(code=pb.REQUEST_DENIED, err_msg="missing or bad auth token")
                )
            self.core.set_accepting(bool(request.enabled))
            return pb.SetAcceptNewStreamResponse(header=pb.ResponseHeader(code=pb.SUCCESS))


def _budget(context: grpc.ServicerContext) -> float:
    """Seconds a request may still wait: its deadline less a margin (WRITE_WAIT_S without one)."""
    left = context.time_remaining()
    if left is None:
        return WRITE_WAIT_S
    return max(0.0, min(WRITE_WAIT_S, float(left) - DEADLINE_MARGIN_S))


def _is_address(owner: str) -> bool:
    try:
        check_address(owner)
    except InvalidArgumentError:
        return False
    return owner.count(":") == 1 or owner.startswith("[")


def _parse_failpoint(value: str) -> tuple[str, str]:
    name, _, arg = value.partition(":")
    return name.strip(), arg.strip()
