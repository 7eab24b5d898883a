"""``ProxyClient``: write to DistributedLog logs through write proxies (CONTRACT §7), as an idempotent producer.

::

    with dl_proxy.ProxyClient(uri="distributedlog://127.0.0.1:2181/ns") as client:   # or proxies=["h:p", ...]
        fut = client.write("events", b"payload")        # Future[storage.DLSN], resolves when durable
        client.flush()                                   # send everything, wait for the answers
        print(fut.result())

Routing (DistributedLog's write client): a stream goes to its cached owner, else to the proxy a consistent-hash
ring (:mod:`dl_proxy.ring`) picks; a FOUND answer names the owner (remembered, :mod:`dl_proxy.ownership`);
STREAM_UNAVAILABLE, a refusing proxy or an unreachable one drops the cached owner and the request goes to the
next proxy on the ring (an unreachable proxy also leaves the ring for a while; discovery puts back one that
announces itself again). Retries back off exponentially with jitter; each write has an overall ``timeout_s``.

Exactly once (beyond DistributedLog): every request carries ``producer_id`` and the sequence of its first record
(:mod:`dl_proxy._batching`); resends reuse the same numbers, so a proxy that already stored a batch (a lost
reply, a timeout, a failover) answers with its original DLSNs instead of storing it again, and a producer's
records to one stream land in the order written. A write that times out fails with
:class:`~dl_proxy.errors.WriteTimeoutError` (retriable): its outcome is unknown; the client keeps sending it
in order, so it is stored at most once, but writing the same payload again is a new record.

Threads: the caller's threads only append to batches; one background thread runs an asyncio loop with the gRPC
channels and every state change of the network side. Every wait longer than a second logs what it waits for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import threading
import time
import uuid
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from dl_proxy._answers import AnswerHandling
from dl_proxy._batching import Batch, BatchState, StreamState
from dl_proxy._transport import Transport, TransportError
from dl_proxy.discovery import Discovery, Membership, StaticDiscovery, ZooKeeperDiscovery
from dl_proxy.errors import (
    ClientClosedError,
    WriteTimeoutError,
)
from dl_proxy.ownership import OwnershipCache
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.ring import DEFAULT_VNODES, HashRing
from storage.common.futures import FutureGroup
from storage.errors import AlreadyClosedError, DLError, InvalidArgumentError, LogRecordTooLongError, OverCapacityError
from storage.formats.dlsn import DLSN
from storage.formats.record import MAX_LOGRECORD_SIZE, RECORD_HEADER_SIZE
from storage.formats.recordset import HEADER_LEN, encode_record_set
from storage.log.names import validate_log_name

__all__ = ["ProxyClient", "ProxyStatus"]

log = logging.getLogger(__name__)

#: The largest payload a record may carry (DistributedLog's MAX_LOGRECORD_SIZE less the record header).
MAX_PAYLOAD = MAX_LOGRECORD_SIZE - RECORD_HEADER_SIZE
#: Bytes a member adds to a record set besides its payload (its length).
RECORD_SET_OVERHEAD = 4
#: A wait longer than this logs what it waits for.
LOG_WAIT_S = 1.0


@dataclass(frozen=True)
class ProxyStatus:
    """One proxy's handshake: its status (``WRITE_AND_ACCEPT`` / ``WRITE_ONLY`` / ``DOWN``) and the streams it
    owns (stream -> owner address); ``error`` instead when it did not answer."""

    address: str
    status: str
    ownerships: dict[str, str]
    error: str | None = None


class ProxyClient(AnswerHandling):
    """A client of the write proxies of one namespace. See the module docstring.

    Exactly one of ``uri`` (a ZooKeeper namespace: proxies found under its ``.proxies``) and ``proxies``
    (``["host:port", ...]``). Keyword options:

    * ``producer_id``: the idempotent producer's id (default a fresh random one: a new producer per client).
      A client given the id of an earlier client continues that client's sequences from 0: records whose
      sequence the proxy already holds are taken as resends of the earlier ones (use that only to resend a
      journal after a crash). ``""`` turns deduplication off (DistributedLog's at-least-once).
    * ``timeout_s`` (30): each write's overall time to be acknowledged; then its future fails with
      :class:`~dl_proxy.errors.WriteTimeoutError` (outcome unknown).
    * batching: ``batch_max_records`` (1000), ``batch_max_bytes`` (512 KiB), ``linger_s`` (0.002: how long an
      open batch waits for more records); ``record_sets`` (True: a batch of several records travels and is stored
      as one DistributedLog record set, as DistributedLog's client batches; False: a ``writeBulk`` of separate
      records, each its own record in the log); ``max_inflight`` (4 requests per stream, as Kafka's
      producer allows 5: a request that reaches the proxy before an earlier one waits there for it a moment; one
      that waited too long is answered OUT_OF_ORDER_SEQUENCE and sent again); ``max_pending_bytes``
      (64 MiB buffered before ``write`` blocks, up to ``timeout_s``, then raises OverCapacityError).
    * retries: ``request_timeout_s`` (5: one request), ``backoff_start_s`` (0.02), ``backoff_max_s`` (0.5),
      ``max_redirects`` (3 FOUND answers followed in a row before backing off).
    * ``create_if_missing`` (False): ask the proxy to create a missing log on first write.
    * security: ``token`` (sent as ``authorization: Bearer``), ``tls`` (force TLS; default: as each proxy
      announces it), ``tls_ca`` / ``tls_cert`` / ``tls_key`` (PEM file paths: the CA to trust, a client
      certificate and key).

    Raises:
        InvalidArgumentError: both or neither of ``uri``/``proxies``, a bad address or option.
        NamespaceNotFoundError, MetadataError: the ZooKeeper namespace cannot be read.
    """

    def __init__(
        self,
        uri: str | None = None,
        proxies: Sequence[str] | None = None,
        *,
        producer_id: str | None = None,
        timeout_s: float = 30.0,
        batch_max_records: int = 1000,
        batch_max_bytes: int = 512 * 1024,
        linger_s: float = 0.002,
        record_sets: bool = True,
        max_inflight: int = 4,
        max_pending_bytes: int = 64 * 1024 * 1024,
        request_timeout_s: float = 5.0,
        backoff_start_s: float = 0.02,
        backoff_max_s: float = 0.5,
        max_redirects: int = 3,
        create_if_missing: bool = False,
        token: str | None = None,
        tls: bool = False,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        vnodes: int = DEFAULT_VNODES,
    ) -> None:
        if (uri is None) == (proxies is None):
            raise InvalidArgumentError("ProxyClient needs exactly one of uri= (ZooKeeper) and proxies=['host:port']")
        if isinstance(proxies, str):
            proxies = [p for p in proxies.split(",") if p.strip()]
        for name, value in (("timeout_s", timeout_s), ("request_timeout_s", request_timeout_s)):
            if not value > 0:
                raise InvalidArgumentError(f"{name} must be > 0, got {value!r}")
        if batch_max_records < 1 or batch_max_bytes < 1 or max_inflight < 1 or linger_s < 0:
            raise InvalidArgumentError("batch_max_records, batch_max_bytes, max_inflight must be >= 1, linger_s >= 0")
        if record_sets and batch_max_bytes + RECORD_SET_OVERHEAD * batch_max_records + HEADER_LEN > MAX_PAYLOAD:
            raise InvalidArgumentError(
                f"with record_sets, batch_max_bytes + {RECORD_SET_OVERHEAD} * batch_max_records must stay within "
                f"{MAX_PAYLOAD - HEADER_LEN} (a set is one record); got {batch_max_bytes} and {batch_max_records}"
            )
        self.producer_id = uuid.uuid4().hex if producer_id is None else str(producer_id)
        self.timeout_s = float(timeout_s)
        self._max_records = batch_max_records
        self._max_bytes = batch_max_bytes
        self._linger_s = linger_s
        self._record_sets = bool(record_sets)
        self._max_inflight = max_inflight
        self._max_pending = max_pending_bytes
        self._request_timeout_s = request_timeout_s
        self._backoff_start = backoff_start_s
        self._backoff_max = backoff_max_s
        self._max_redirects = max_redirects
        self._create = create_if_missing
        self._rand = random.Random()

        self._mu = threading.Lock()
        self._space = threading.Condition(self._mu)
        self._streams: dict[str, StreamState] = {}
        self._names: dict[str, str] = {}  # stream name as written -> validated name
        self._futures = FutureGroup()
        self._pending_bytes = 0
        self._closing = False
        self._closed = False
        self._no_proxy_logged = 0.0

        self.ring = HashRing(vnodes=vnodes)
        self.owners = OwnershipCache()
        self._quarantine: dict[str, tuple[float, float]] = {}  # address -> (until, length)
        self._started: dict[str, int] = {}
        self._outcomes: list[tuple[Sequence[Future[DLSN]], Sequence[DLSN | DLError]]] = []  # loop thread only

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="dl-proxy-client", daemon=True)
        self._thread.start()
        creds = _read_pem(tls_ca), _read_pem(tls_key), _read_pem(tls_cert)
        self._transport = Transport(self._loop, token=token, tls=tls, credentials=creds)
        try:
            self.discovery: Discovery = (
                StaticDiscovery(proxies, tls=tls) if proxies is not None else ZooKeeperDiscovery(str(uri))
            )
            self.discovery.start(self._on_membership)
        except BaseException:
            self._stop_loop()
            raise

    # ------------------------------------------------------------------------------------------------ public API
    def write(self, stream: str, payload: bytes) -> Future[DLSN]:
        """Queue one record; the future resolves to its DLSN once a proxy acknowledged it durable.

        Raises at once:
            AlreadyClosedError: the client is closing or closed. InvalidStreamNameError: a bad stream name.
            LogRecordTooLongError: the payload exceeds DistributedLog's record size. InvalidArgumentError: not bytes.
            OverCapacityError (retriable): ``max_pending_bytes`` stayed full for ``timeout_s``.
        The future fails with a :class:`storage.errors.DLError`: WriteTimeoutError (outcome unknown), or the
        proxy's definitive answer (LogNotFoundError, EndOfStreamError, RequestDeniedError, ...).
        """
        if type(payload) is not bytes:
            return self.write_bulk(stream, [payload])[0]
        n = len(payload)
        if n > MAX_PAYLOAD:
            raise _too_long(n)
        return self._append(self._name(stream), (payload,), n)[0]

    def write_bulk(self, stream: str, payloads: Iterable[bytes]) -> list[Future[DLSN]]:
        """Queue several records of one stream, in order; one future each. Raises as :meth:`write`."""
        name = self._name(stream)
        items = [bytes(p) if isinstance(p, bytearray | memoryview) else p for p in payloads]
        for p in items:
            if not isinstance(p, bytes):
                raise InvalidArgumentError(f"a payload must be bytes, not {type(p).__name__}")
            if len(p) > MAX_PAYLOAD:
                raise _too_long(len(p))
        return self._append(name, items, sum(map(len, items)))

    def _name(self, stream: str) -> str:
        """The validated name of ``stream`` (cached). Raises InvalidStreamNameError."""
        name = self._names.get(stream)
        if name is None:
            name = validate_log_name(stream)
            if len(self._names) < 10_000:
                self._names[stream] = name
        return name

    def _append(self, name: str, items: Sequence[bytes], need: int) -> list[Future[DLSN]]:
        """Append checked payloads (``need`` bytes in all) to the stream's open batch(es); one future each."""
        futures: list[Future[DLSN]] = []
        sealed = False
        arm: list[Batch] = []
        max_records, max_bytes, new = self._max_records, self._max_bytes, self._futures.new
        with self._mu:
            self._check_open()
            self._wait_for_space(name, need)
            st = self._streams.get(name)
            if st is None:
                st = self._streams[name] = StreamState(name, self.producer_id)
            for p in items:
                n = len(p)
                b = st.open
                if b is not None and (len(b.payloads) >= max_records or b.nbytes + n > max_bytes):
                    st.seal_open()
                    sealed = True
                    b = None
                if b is None:
                    now = time.monotonic()
                    b = st.open = Batch(name, now, now + self.timeout_s)
                    arm.append(b)
                fut: Future[DLSN] = new()
                b.payloads.append(p)
                b.futures.append(fut)
                b.written.append(fut)
                b.nbytes += n
                futures.append(fut)
            self._pending_bytes += need
            if st.open is not None and len(st.open.payloads) >= max_records:
                st.seal_open()
                sealed = True
        if arm or sealed:
            self._loop.call_soon_threadsafe(self._after_write, st, arm, sealed)
        return futures

    def flush(self) -> None:
        """Send every queued record and wait until each has an outcome (acknowledged, failed or timed out).

        Outcomes are in the futures; flush itself raises only AlreadyClosedError (after :meth:`close`).
        """
        with self._mu:
            if self._closed:
                raise AlreadyClosedError("ProxyClient is closed")
            streams = list(self._streams.values())
            for st in streams:
                self._seal(st)
            futures = [f for st in streams for f in st.pending_futures() if not f.done()]
        self._loop.call_soon_threadsafe(self._pump_all)
        self._wait_futures(futures, "flush")

    def close(self) -> None:
        """Flush, then release the connections; later calls raise AlreadyClosedError. Idempotent.

        Records whose write timed out and are still unanswered are given up (their outcome stays unknown).
        """
        with self._mu:
            if self._closing:
                already = True
            else:
                already, self._closing = False, True
        if already:
            return
        try:
            with self._mu:
                streams = list(self._streams.values())
                for st in streams:
                    self._seal(st)
                futures = [f for st in streams for f in st.pending_futures() if not f.done()]
            self._loop.call_soon_threadsafe(self._pump_all)
            self._wait_futures(futures, "close")
        finally:
            with self._mu:
                self._closed = True
                self._space.notify_all()
            self.discovery.close()
            self._stop_loop()

    def proxy_status(self, timeout_s: float = 5.0) -> list[ProxyStatus]:
        """Handshake with every known proxy (ownerships included), sorted by address.

        Raises:
            AlreadyClosedError: the client is closed.
        """
        with self._mu:
            if self._closed:
                raise AlreadyClosedError("ProxyClient is closed")
        addresses = sorted(self.discovery.current().known | self.ring.members())
        fut = asyncio.run_coroutine_threadsafe(self._handshake_all(addresses, timeout_s), self._loop)
        return fut.result()

    def __enter__(self) -> ProxyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ProxyClient({self.discovery.describe()}, producer_id={self.producer_id!r})"

    # ------------------------------------------------------------------------------------------------ caller side
    def _check_open(self) -> None:
        if self._closing or self._closed:
            raise AlreadyClosedError("ProxyClient is closed")

    def _wait_for_space(self, stream: str, need: int) -> None:
        """Block (holding nothing but the condition) while the buffered bytes exceed ``max_pending_bytes``; never
        on the client's own thread (a future's callback that writes), which must keep answering."""
        if self._pending_bytes + need <= self._max_pending or self._pending_bytes == 0:
            return
        block = threading.current_thread() is not self._thread
        start = time.monotonic()
        logged = start
        while self._pending_bytes + need > self._max_pending and self._pending_bytes > 0:
            now = time.monotonic()
            if not block or now - start >= self.timeout_s:
                raise OverCapacityError(
                    f"{self._pending_bytes} bytes wait to be written through the proxies "
                    f"(max_pending_bytes={self._max_pending}) for {self.timeout_s}s: not written"
                )
            if now - logged >= LOG_WAIT_S:
                logged = now
                log.warning("write to %r waits %.1fs for buffer space (%d bytes pending)", stream, now - start,
                            self._pending_bytes)  # fmt: skip
            self._space.wait(min(LOG_WAIT_S, self.timeout_s - (now - start)))
            self._check_open()

    @staticmethod
    def _seal(st: StreamState) -> Batch | None:
        return st.seal_open()

    def _wait_futures(self, futures: list[Future[DLSN]], what: str) -> None:
        """Wait for every one of ``futures`` (in order: each wait is cheap), logging what waits every second."""
        start = time.monotonic()
        for f in futures:
            while True:
                try:
                    f.exception(timeout=LOG_WAIT_S)
                    break
                except concurrent.futures.TimeoutError:
                    pending = sum(1 for g in futures if not g.done())
                    log.warning("%s waits %.1fs for %d records: %s", what, time.monotonic() - start, pending,
                                self._describe_waiting())  # fmt: skip

    def _describe_waiting(self) -> str:
        with self._mu:
            waiting = [b for st in self._streams.values() for b in st.unacked if b.waited_for]
        return "; ".join(b.describe() for b in waiting[:3]) + (" ..." if len(waiting) > 3 else "")

    # ------------------------------------------------------------------------------------------------ loop side
    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _stop_loop(self) -> None:
        if self._loop.is_closed():
            return
        with self._mu:
            self._closed = True
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        try:
            fut.result(timeout=10)
        except (concurrent.futures.TimeoutError, RuntimeError) as e:
            log.warning("closing the proxy connections: %s", e)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        with self._mu:
            left = [f for st in self._streams.values() for f in st.pending_futures()]
        for f in left:
            if not f.done():
                f.set_exception(ClientClosedError("ProxyClient closed before this write was acknowledged"))
        await self._transport.close()

    def _after_write(self, st: StreamState, arm: list[Batch], sealed: bool) -> None:
        for b in arm:
            self._loop.call_at(b.created + self._linger_s, self._linger_over, st, b)
            self._loop.call_at(b.deadline, self._expire, st.name, b.written)
            self._loop.call_at(b.created + LOG_WAIT_S, self._log_slow, st, b)
        if sealed:
            self._pump(st)

    def _linger_over(self, st: StreamState, b: Batch) -> None:
        with self._mu:
            if st.open is not b:
                return
            self._seal(st)
        self._pump(st)

    def _pump_all(self) -> None:
        with self._mu:
            streams = list(self._streams.values())
        for st in streams:
            self._pump(st)

    def _pump(self, st: StreamState) -> None:
        """Send what may go now: batches in sequence order, at most ``max_inflight`` out, only the first one
        while recovering, nothing before ``retry_at``."""
        sends: list[tuple[Batch, str]] = []
        with self._mu:
            if self._closed:
                return
            now = time.monotonic()
            if st.bump_pending and st.inflight == 0:
                log.warning("stream %r: the proxy expects a sequence this client no longer holds (records failed "
                            "definitively); moving to producer id %s.%d", st.name, self.producer_id,
                            st.generation + 1)  # fmt: skip
                st.bump_generation()
            if st.bump_pending:
                return
            if st.retry_at > now:
                if not st.retry_armed:
                    st.retry_armed = True
                    self._loop.call_at(st.retry_at, self._retry_timer, st)
                return
            for i, b in enumerate(st.unacked):
                if st.inflight >= self._max_inflight:
                    break
                if b.state is BatchState.IN_FLIGHT:
                    continue
                if i > 0 and (st.recovering or b.after_ooo):
                    break
                target = self._route(st.name, b)
                if target is None:
                    self._no_proxy(st, b)
                    break
                if i > 0 and target != st.confirmed:
                    break  # a proxy new to this stream gets one request until it answers (it may not know us yet)
                self._merge_following(st, i)
                b.state, b.target, b.after_ooo = BatchState.IN_FLIGHT, target, False
                b.attempts += 1
                if target not in b.tried:
                    b.tried.append(target)
                st.inflight += 1
                sends.append((b, target))
                if st.recovering:
                    break
        for b, target in sends:
            self._loop.create_task(self._send(st, b, target))

    def _merge_following(self, st: StreamState, i: int) -> None:
        """Merge into ``st.unacked[i]`` (about to be sent) the waiting batches right after it, and the open batch
        when everything before it was merged, up to the batch limits (caller holds the lock)."""
        b = st.unacked[i]
        while True:
            if i + 1 < len(st.unacked):
                nxt = st.unacked[i + 1]
                if nxt.state is not BatchState.WAITING or nxt.producer_id != b.producer_id:
                    return
            elif st.open is not None:
                nxt = st.open
            else:
                return
            if len(b) + len(nxt) > self._max_records or b.nbytes + nxt.nbytes > self._max_bytes:
                return
            if b.attempts or nxt.attempts:
                return  # a batch sent before is resent as it was (stored whole or not at all)
            if nxt is st.open:
                st.seal_open()
            if nxt.seq != b.last_seq + 1:
                return
            b.absorb(nxt)
            del st.unacked[i + 1]

    def _retry_timer(self, st: StreamState) -> None:
        with self._mu:
            st.retry_armed = False
        self._pump(st)

    def _route(self, stream: str, b: Batch) -> str | None:
        now = time.monotonic()
        down = {a for a, (until, _) in self._quarantine.items() if until > now}
        owner = self.owners.get(stream)
        if owner is not None and owner not in down and owner not in b.avoid:
            return owner
        found = self.ring.lookup(stream, down | b.avoid)
        if found is None and b.avoid:
            b.avoid.clear()
            found = self.ring.lookup(stream, down)
        return found

    def _no_proxy(self, st: StreamState, b: Batch) -> None:
        self._back_off(st)
        now = time.monotonic()
        if now - self._no_proxy_logged >= LOG_WAIT_S:
            self._no_proxy_logged = now
            log.warning("no write proxy available (%s; %d on the ring, %d unreachable): %s waits",
                        self.discovery.describe(), len(self.ring), len(self._quarantine), b.describe())  # fmt: skip
        b.last_error = b.last_error or "no write proxy available"
        if not st.retry_armed:
            st.retry_armed = True
            self._loop.call_at(st.retry_at, self._retry_timer, st)

    async def _send(self, st: StreamState, b: Batch, target: str) -> None:
        ctx = pb.WriteContext(
            tried_hosts=b.tried, producer_id=b.producer_id, sequence=b.seq, create_if_missing=self._create
        )
        response: pb.WriteResponse | pb.BulkWriteResponse
        try:
            if len(b) == 1 or (self._record_sets and not b.separate):
                data = b.payloads[0] if len(b) == 1 else encode_record_set(b.payloads)
                ctx.is_record_set = len(b) > 1
                ctx.crc32 = zlib.crc32(data)
                request = pb.WriteRequest(stream=st.name, data=data, ctx=ctx)
                response = await self._transport.write(target, request, self._request_timeout_s)
            else:
                crc = 0
                for p in b.payloads:
                    crc = zlib.crc32(p, crc)
                ctx.crc32 = crc
                bulk = pb.BulkWriteRequest(stream=st.name, data=b.payloads, ctx=ctx)
                response = await self._transport.write_bulk(target, bulk, self._request_timeout_s)
        except TransportError as e:
            self._on_transport_error(st, b, target, e)
        except Exception as e:  # never leave a batch in flight forever
            log.exception("unexpected error sending %s", b.describe())
            self._on_transport_error(st, b, target, TransportError(grpc.StatusCode.UNKNOWN, str(e), unknown=True))
        else:
            self._on_response(st, b, target, response)
        self._deliver()
        self._pump(st)

    def _expire(self, stream: str, futures: list[Future[DLSN]]) -> None:
        """The deadline of the records written together with ``futures``: fail those not yet answered."""
        late = [f for f in futures if not f.done()]
        if not late:
            return
        with self._mu:
            st = self._streams.get(stream)
            head = st.unacked[0].describe() if st is not None and st.unacked else "nothing queued"
        err = WriteTimeoutError(
            f"{len(late)} records of stream {stream!r} not acknowledged within {self.timeout_s}s; their outcome is "
            f"unknown (they may be stored, once; the client keeps resending them in order). Waiting: {head}"
        )
        log.warning("%s", err)
        for f in late:
            if not f.done():
                f.set_exception(err)

    def _log_slow(self, st: StreamState, b: Batch) -> None:
        """A batch unanswered for a second: log it (at most one line per stream and second; then again every
        few seconds while it waits)."""
        if not b.waited_for:
            return
        now = time.monotonic()
        if now - st.slow_logged >= LOG_WAIT_S:
            st.slow_logged = now
            head = st.unacked[0] if st.unacked else b
            log.warning("waiting %.1fs for %s", now - head.created, head.describe())
        self._loop.call_at(now + 5 * LOG_WAIT_S, self._log_slow, st, b)

    # ------------------------------------------------------------------------------------------------ membership
    def _on_membership(self, m: Membership) -> None:
        """Discovery's callback (any thread): the ring holds the proxies that take new streams."""
        self.ring.set(m.writable)
        for address in set(self.owners.snapshot().values()) - m.known:
            self.owners.remove_owner(address)
        started = dict(m.started_ms)
        with self._mu:
            for address, ms in started.items():
                if self._started.get(address) not in (None, ms):
                    self._quarantine.pop(address, None)  # restarted: try it again at once
            self._started = started
        self._transport.set_tls(m.tls)
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._pump_all)

    async def _handshake_all(self, addresses: list[str], timeout_s: float) -> list[ProxyStatus]:
        async def one(address: str) -> ProxyStatus:
            try:
                info = await self._transport.handshake(address, timeout_s)
            except TransportError as e:
                return ProxyStatus(address, "UNREACHABLE", {}, str(e))
            self.owners.update_all(dict(info.ownerships))
            return ProxyStatus(address, str(pb.ServerStatus.Name(info.server_status)), dict(info.ownerships))

        return list(await asyncio.gather(*(one(a) for a in addresses)))


def _too_long(n: int) -> LogRecordTooLongError:
    return LogRecordTooLongError(f"payload of {n} bytes: a record may carry at most {MAX_PAYLOAD}")


def _read_pem(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InvalidArgumentError(f"cannot read {path}: {e}") from e
