"""``ProxyClient``: write to DistributedLog logs through write proxies (``dlog proxy``), as an idempotent producer.

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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from dl_proxy._answers import AnswerHandling
from dl_proxy._batching import Batch, BatchState, StreamState
from dl_proxy._client_metrics import ClientMetrics
from dl_proxy._transport import Transport, TransportError
from dl_proxy.discovery import Discovery, Membership, StaticDiscovery, ZooKeeperDiscovery
from dl_proxy.errors import (
    ClientClosedError,
    ProducerFencedError,
    ProducerStateLostError,
    WriteTimeoutError,
)
from dl_proxy.ownership import OwnershipCache
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.ring import DEFAULT_VNODES, HashRing
from storage.common.futures import FutureGroup
from storage.errors import (
    AlreadyClosedError,
    DLError,
    IllegalStateError,
    InvalidArgumentError,
    LogRecordTooLongError,
    NoProxyReachableError,
    OperationTimeoutError,
    OverCapacityError,
)
from storage.formats.dlsn import DLSN
from storage.formats.record import MAX_LOGRECORD_SIZE, RECORD_HEADER_SIZE
from storage.formats.recordset import HEADER_LEN, encode_record_set
from storage.log.names import validate_log_name

__all__ = ["ProxyClient", "ProxyStatus"]

log = logging.getLogger(__name__)

#: The largest payload a record may carry (DistributedLog's MAX_LOGRECORD_SIZE less the record header).
MAX_PAYLOAD = MAX_LOGRECORD_SIZE - RECORD_HEADER_SIZE
#: Most streams, and bytes, in one ``writeMulti`` call.
MULTI_MAX_STREAMS = 256
MULTI_MAX_BYTES = 4 * 1024 * 1024
#: Bytes a member adds to a record set besides its payload (its length).
RECORD_SET_OVERHEAD = 4
#: A wait longer than this logs what it waits for.
LOG_WAIT_S = 1.0
#: How often a stream's oldest waiting batch is logged again while it waits.
SLOW_REPEAT_S = 5.0


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
      Every client instance gets its own *epoch* per stream from the proxy (as Kafka's producer epochs): a new
      client with the id of an earlier one (a restarted service with a configured id) fences the earlier one,
      whose later writes to that stream fail with :class:`~storage.errors.ProducerFencedError`; the new one's
      records are new records. ``""`` turns deduplication off (DistributedLog's at-least-once).
    * ``timeout_s`` (30): the delivery timeout: each write's overall time to be acknowledged; then its future
      fails and the client stops sending it: :class:`~dl_proxy.errors.WriteTimeoutError` (outcome unknown when
      an attempt may have stored it, else definitive), or :class:`~storage.errors.NoProxyReachableError` when no
      proxy could be reached at all (definitive).
    * batching: ``batch_max_records`` (1000), ``batch_max_bytes`` (512 KiB), ``linger_s`` (0.002: how long an
      open batch waits for more records while a request of its stream is in flight; on an idle stream a batch
      goes at once); ``record_sets`` (True: a batch of several records travels and is stored as one
      DistributedLog record set, as DistributedLog's client batches; False: a ``writeBulk`` of separate records,
      each its own record in the log); ``max_inflight`` (4 requests per stream, as Kafka's producer allows 5;
      never more than the proxy's window, which it tells the client: every request the client may resend is one
      the proxy remembers; only batches of at least half the batch limits are pipelined, a smaller one waits for
      the request in flight and grows meanwhile); ``max_pending_bytes`` (64 MiB buffered before ``write``
      blocks, up to ``timeout_s``, then raises OverCapacityError) and ``max_stream_pending_bytes`` (16 MiB: the
      same for one stream, so a stuck stream never blocks writes to the others).
      Batches of several streams ready for the same proxy at once travel in one ``writeMulti`` call (up to
      256 streams; a proxy without it gets one call per stream).
    * retries: ``request_timeout_s`` (5: one request), ``backoff_start_s`` (0.02), ``backoff_max_s`` (0.5),
      ``max_redirects`` (3 FOUND answers followed in a row before backing off).
    * ``create_if_missing`` (False): ask the proxy to create a missing log on first write.
    * security: ``token`` (sent as ``authorization: Bearer``), ``tls`` (force TLS; default: as each proxy
      announces it), ``tls_ca`` / ``tls_cert`` / ``tls_key`` (PEM file paths: the CA to trust, a client
      certificate and key), ``allow_plaintext_token`` (False: a write or handshake that would send the token to a
      proxy not announced with TLS, on a non-loopback address, is not sent and fails with InvalidArgumentError).

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
        max_stream_pending_bytes: int = 16 * 1024 * 1024,
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
        allow_plaintext_token: bool = False,
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
        self._max_stream_pending = max_stream_pending_bytes
        self._instance_base = uuid.uuid4().hex[:16]
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
        self._outbox: dict[str, list[tuple[StreamState, Batch, int, str]]] = {}  # loop thread only
        self._outbox_armed = False
        self._no_multi: set[str] = set()  # proxies without writeMulti
        self._slow_logged = 0.0  # loop thread only: the last "waiting" line, and batches left out of it since
        self._slow_others = 0
        self.metrics = ClientMetrics(
            lambda: float(sum(st.inflight for st in list(self._streams.values()))), lambda: float(self._pending_bytes)
        )

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="dl-proxy-client", daemon=True)
        self._thread.start()
        creds = _read_pem(tls_ca), _read_pem(tls_key), _read_pem(tls_cert)
        self._transport = Transport(
            self._loop, token=token, tls=tls, credentials=creds, allow_plaintext_token=allow_plaintext_token
        )
        try:
            self.discovery: Discovery = (
                StaticDiscovery(proxies, tls=tls) if proxies is not None else ZooKeeperDiscovery(str(uri))
            )
            self.discovery.start(self._on_membership)
        except BaseException:
            self._stop_loop()
            raise

    # ------------------------------------------------------------------------------------------------ public API
    def write(self, stream: str, payload: bytes, callback: Callback | None = None) -> Future[DLSN]:
        """Queue one record; the future resolves to its DLSN once a proxy acknowledged it durable.
        ``callback(dlsn, error)``, if given, is called once with the outcome (one of the two is None), on the
        client's own thread: it must not block (it may call :meth:`write` and :meth:`close`, not :meth:`flush`).

        Raises at once:
            AlreadyClosedError: the client is closing or closed. InvalidStreamNameError: a bad stream name.
            LogRecordTooLongError: the payload exceeds DistributedLog's record size. InvalidArgumentError: not bytes.
            OverCapacityError (retriable): ``max_pending_bytes`` stayed full for ``timeout_s``.
            ProducerFencedError: a newer instance of this producer id took the stream over.
        The future fails with a :class:`storage.errors.DLError` whose ``outcome_unknown`` says whether the record
        may be stored: WriteTimeoutError, NoProxyReachableError, ProducerFencedError, ProducerStateLostError, or
        the proxy's definitive answer (LogNotFoundError, EndOfStreamError, RequestDeniedError, ...).
        """
        if type(payload) is not bytes:
            return self.write_bulk(stream, [payload], callback)[0]
        n = len(payload)
        if n > MAX_PAYLOAD:
            raise _too_long(n)
        fut = self._append(self._name(stream), (payload,), n)[0]
        if callback is not None:
            fut.add_done_callback(_calling(callback))
        return fut

    def write_bulk(
        self, stream: str, payloads: Iterable[bytes], callback: Callback | None = None
    ) -> list[Future[DLSN]]:
        """Queue several records of one stream, in order; one future each (``callback`` is called for each).
        Raises as :meth:`write`."""
        name = self._name(stream)
        items = [bytes(p) if isinstance(p, bytearray | memoryview) else p for p in payloads]
        for p in items:
            if not isinstance(p, bytes):
                raise InvalidArgumentError(f"a payload must be bytes, not {type(p).__name__}")
            if len(p) > MAX_PAYLOAD:
                raise _too_long(len(p))
        futs = self._append(name, items, sum(map(len, items)))
        if callback is not None:
            call = _calling(callback)
            for f in futs:
                f.add_done_callback(call)
        return futs

    def metrics_text(self) -> str:
        """This client's metrics in Prometheus' text format (:mod:`dl_proxy._client_metrics` lists them)."""
        return self.metrics.text()

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
            st = self._streams.get(name)
            if st is None:
                st = self._streams[name] = StreamState(name, self.producer_id, self._instance_base)
            if st.fenced is not None:
                raise ProducerFencedError(str(st.fenced), epoch=getattr(st.fenced, "epoch", None))
            self._wait_for_space(st, need)
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
                b.nbytes += n
                futures.append(fut)
            self._pending_bytes += need
            st.pending_bytes += need
            if st.open is not None and len(st.open.payloads) >= max_records:
                st.seal_open()
                sealed = True
        if arm or sealed:
            self._loop.call_soon_threadsafe(self._after_write, st, arm, sealed)
        return futures

    def flush(self, timeout: float | None = None) -> None:
        """Send every queued record and wait until each has an outcome (acknowledged, failed or timed out), at most
        ``timeout`` seconds (None: until each has one, which the delivery timeout ``timeout_s`` bounds).

        Outcomes are in the futures.

        Raises:
            AlreadyClosedError: after :meth:`close`.
            OperationTimeoutError: ``timeout`` passed first (the records go on being sent).
            IllegalStateError: called from a write's callback (the client's own thread, which must keep running
                for the records to be answered).
        """
        if threading.current_thread() is self._thread:
            raise IllegalStateError(
                "ProxyClient.flush() called from a write's callback: the callbacks run on the client's own thread, "
                "which flush would wait for; call it from another thread (or close(), which does not wait there)"
            )
        with self._mu:
            if self._closed:
                raise AlreadyClosedError("ProxyClient is closed")
            futures = self._seal_all()
        self._loop.call_soon_threadsafe(self._pump_all)
        if not self._wait_futures(futures, "flush", timeout):
            raise OperationTimeoutError(
                f"flush: {sum(1 for f in futures if not f.done())} records still unanswered after {timeout}s "
                "(they go on being sent)"
            )

    def _seal_all(self) -> list[Future[DLSN]]:
        """Seal every open batch; the futures still unanswered (caller holds the lock)."""
        streams = list(self._streams.values())
        for st in streams:
            self._seal(st)
        return [f for st in streams for f in st.pending_futures() if not f.done()]

    def close(self, timeout: float | None = None) -> None:
        """Flush (at most ``timeout`` seconds; None: until every record has an outcome), then release the
        connections; later calls raise AlreadyClosedError. Idempotent. Records still unanswered at the end fail
        with ClientClosedError (``outcome_unknown`` when a request of theirs may have been stored).

        Called from a write's callback (the client's own thread), it does not wait: it closes at once, as with
        ``timeout=0`` (Kafka's producer does the same), and the connections are released right after.
        """
        with self._mu:
            if self._closing:
                already = True
            else:
                already, self._closing = False, True
        if already:
            return
        own_thread = threading.current_thread() is self._thread
        try:
            with self._mu:
                futures = self._seal_all()
            if not own_thread:
                self._loop.call_soon_threadsafe(self._pump_all)
                self._wait_futures(futures, "close", timeout)
        finally:
            with self._mu:
                self._closed = True
                self._space.notify_all()
            if own_thread:
                threading.Thread(target=self._finish_close, name="dl-proxy-client-close", daemon=True).start()
            else:
                self._finish_close()

    def _finish_close(self) -> None:
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

    def _wait_for_space(self, st: StreamState, need: int) -> None:
        """Block (holding nothing but the condition) while the buffered bytes exceed ``max_pending_bytes``, or the
        stream's exceed ``max_stream_pending_bytes``; never on the client's own thread (a future's callback that
        writes), which must keep answering.

        Raises:
            OverCapacityError: still full after ``timeout_s`` (or at once on the client's thread).
        """

        def full() -> bool:
            over_all = self._pending_bytes + need > self._max_pending and self._pending_bytes > 0
            over_stream = st.pending_bytes + need > self._max_stream_pending and st.pending_bytes > 0
            return over_all or over_stream

        if not full():
            return
        block = threading.current_thread() is not self._thread
        start = time.monotonic()
        logged = start
        while full():
            now = time.monotonic()
            if not block or now - start >= self.timeout_s:
                raise OverCapacityError(
                    f"{st.pending_bytes} bytes of stream {st.name!r} and {self._pending_bytes} in all wait to be "
                    f"written through the proxies (max_stream_pending_bytes={self._max_stream_pending}, "
                    f"max_pending_bytes={self._max_pending}) for {self.timeout_s}s: not written"
                )
            if now - logged >= LOG_WAIT_S:
                logged = now
                log.warning("write to %r waits %.1fs for buffer space (%d bytes pending for it, %d in all)",
                            st.name, now - start, st.pending_bytes, self._pending_bytes)  # fmt: skip
            self._space.wait(min(LOG_WAIT_S, self.timeout_s - (now - start)))
            self._check_open()

    @staticmethod
    def _seal(st: StreamState) -> Batch | None:
        return st.seal_open()

    def _wait_futures(self, futures: list[Future[DLSN]], what: str, timeout: float | None = None) -> bool:
        """Wait for every one of ``futures`` (in order: each wait is cheap), at most ``timeout`` seconds, logging
        what waits every second; True when all are done."""
        start = time.monotonic()
        end = None if timeout is None else start + max(0.0, timeout)
        for f in futures:
            while True:
                step = LOG_WAIT_S if end is None else min(LOG_WAIT_S, end - time.monotonic())
                try:
                    f.exception(timeout=max(0.0, step))
                    break
                except concurrent.futures.TimeoutError:
                    if end is not None and time.monotonic() >= end:
                        return False
                    pending = sum(1 for g in futures if not g.done())
                    log.warning("%s waits %.1fs for %d records: %s", what, time.monotonic() - start, pending,
                                self._describe_waiting())  # fmt: skip
        return True

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
            left = [
                (f, b.maybe_stored or b.state is BatchState.IN_FLIGHT)
                for st in self._streams.values()
                for b in [*st.unacked, *([st.open] if st.open is not None else [])]
                for f in b.futures
            ]
        for f, unknown in left:
            if not f.done():
                f.set_exception(
                    ClientClosedError(
                        "ProxyClient closed before this write was acknowledged"
                        + (" (it may be stored)" if unknown else " (it was not sent, so it is not stored)"),
                        outcome_unknown=unknown,
                    )
                )
        await self._transport.close()

    def _after_write(self, st: StreamState, arm: list[Batch], sealed: bool) -> None:
        for b in arm:
            with self._mu:
                idle = st.open is b and st.inflight == 0 and not st.unacked
            if idle:  # nothing of the stream is in flight or waiting: lingering would only delay this batch
                self._loop.call_soon(self._linger_over, st, b)
            else:
                self._loop.call_at(b.created + self._linger_s, self._linger_over, st, b)
        if arm and not st.watch_armed:
            first = arm[0]
            st.watch_armed = True
            self._loop.call_at(min(first.deadline, first.created + LOG_WAIT_S), self._watch, st)
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
        """Send what may go now: batches in sequence order, at most ``max_inflight`` (and the proxy's window) out,
        a batch never sent only while fewer than the window went out since the oldest unanswered one (and, while a
        request is in flight, only if it is large: :meth:`_pipelines`), only the first one while recovering,
        nothing before ``retry_at``; re-initialise first when that is due."""
        sends: list[tuple[Batch, str]] = []
        with self._mu:
            if self._closed:
                return
            now = time.monotonic()
            if st.reinit_pending and st.inflight == 0:
                if st.fenced is None:
                    self._reinitialise(st)
                else:  # a fenced client never starts a new epoch (it would fence the newer instance)
                    self._fail_fenced(st)
            if st.reinit_pending:
                return
            if st.retry_at > now:
                if not st.retry_armed:
                    st.retry_armed = True
                    self._loop.call_at(st.retry_at, self._retry_timer, st)
                return
            limit = min(self._max_inflight, st.window)
            for i, b in enumerate(st.unacked):
                if st.inflight >= limit:
                    break
                if b.state is not BatchState.WAITING or b.abandoned:
                    continue
                if i > 0 and (st.recovering or b.after_ooo):
                    break
                if b.attempts == 0 and (st.fenced is not None or not st.may_send_new(limit)):
                    break
                target = self._route(st.name, b)
                if target is None:
                    self._no_proxy(st, b)
                    break
                if i > 0 and target != st.confirmed:
                    break  # a proxy new to this stream gets one request until it answers (it may not know us yet)
                if b.attempts == 0:
                    self._merge_following(st, i)
                    if st.inflight and not self._pipelines(b):
                        break  # a small batch waits for the request in flight, taking what is written meanwhile
                    b.ordinal = st.next_ordinal
                    st.next_ordinal += 1
                b.state, b.target, b.after_ooo = BatchState.IN_FLIGHT, target, False
                b.attempts += 1
                if target not in b.tried:
                    b.tried.append(target)
                st.inflight += 1
                sends.append((b, target))
                if st.recovering:
                    break
        for b, target in sends:
            self._queue_send(st, b, target)

    def _fail_fenced(self, st: StreamState) -> None:
        """Fail every batch left on a fenced stream (caller holds the lock; nothing in flight)."""
        fenced = st.fenced
        assert fenced is not None
        for b in list(st.unacked):
            if b.abandoned:
                st.unacked.remove(b)
                self._release_bytes(st, b.nbytes)
                b.state = BatchState.DONE
                continue
            err = ProducerFencedError(str(fenced), epoch=getattr(fenced, "epoch", None), outcome_unknown=b.maybe_stored)
            self._finish(st, b, [err] * len(b))
        st.reinit_pending = ""

    def _reinitialise(self, st: StreamState) -> None:
        """Start a new producer epoch on the stream (caller holds the lock; nothing in flight)."""
        log.warning("stream %r: %s; starting a new producer epoch (instance %s)", st.name, st.reinit_pending,
                    f"{st.instance_base}-{st.reinits + 1}")  # fmt: skip
        reason = st.reinit_pending
        for b in st.reinitialise():
            if b.abandoned:
                self._release_bytes(st, b.nbytes)
                b.state = BatchState.DONE
                continue
            err = ProducerStateLostError(
                f"{len(b)} records of stream {st.name!r} were sent under producer epoch {b.producer_id}/"
                f"{b.seq}.. and may be stored; the stream starts a new epoch ({reason}), so they are not sent "
                "again (they could be stored twice): their outcome is unknown"
            )
            self._finish(st, b, [err] * len(b))

    def _pipelines(self, b: Batch) -> bool:
        """Whether ``b`` (never sent, merged) may go while another request of its stream is in flight: when it
        holds at least half the batch limits (records or bytes). A smaller batch waits for the answer and grows
        meanwhile (as Nagle's algorithm), so a stream under moderate load sends one request per round trip instead
        of several small ones, each costing the proxy a request; under full load the batches fill and pipeline."""
        return 2 * len(b) >= self._max_records or 2 * b.nbytes >= self._max_bytes

    def _merge_following(self, st: StreamState, i: int) -> None:
        """Merge into ``st.unacked[i]`` (about to be sent) the waiting batches right after it, and the open batch
        when everything before it was merged, up to the batch limits (caller holds the lock)."""
        b = st.unacked[i]
        while True:
            if i + 1 < len(st.unacked):
                nxt = st.unacked[i + 1]
                if nxt.state is not BatchState.WAITING or nxt.producer_id != b.producer_id or nxt.abandoned:
                    return
            elif st.open is not None and not st.open.abandoned:
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

    def _queue_send(self, st: StreamState, b: Batch, target: str) -> None:
        """Send ``b`` to ``target`` once this turn of the loop is over: the batches of several streams that go to
        the same proxy in one turn travel in one ``writeMulti`` call (one RPC instead of one per stream)."""
        self._outbox.setdefault(target, []).append((st, b, st.epoch, st.instance))
        if not self._outbox_armed:
            self._outbox_armed = True
            self._loop.call_soon(self._drain_outbox)

    def _drain_outbox(self) -> None:
        self._outbox_armed = False
        boxes, self._outbox = self._outbox, {}
        for target, sends in boxes.items():
            if len(sends) == 1 or target in self._no_multi:
                for st, b, epoch, instance in sends:
                    self._loop.create_task(self._send(st, b, target, epoch, instance))
                continue
            chunk: list[tuple[StreamState, Batch, int, str]] = []
            later: list[tuple[StreamState, Batch, int, str]] = []
            names: set[str] = set()
            nbytes = 0
            for send in sends:
                st, b, epoch, instance = send
                if st.name in names:  # a later batch of a stream in this turn (pipelined): a call of its own,
                    later.append(send)  # sent after the call holding the stream's earlier batch
                    continue
                if chunk and (len(chunk) >= MULTI_MAX_STREAMS or nbytes + b.nbytes > MULTI_MAX_BYTES):
                    self._loop.create_task(self._send_multi(target, chunk))
                    chunk, names, nbytes = [], set(), 0
                chunk.append(send)
                names.add(st.name)
                nbytes += b.nbytes
            if len(chunk) == 1:
                st, b, epoch, instance = chunk[0]
                self._loop.create_task(self._send(st, b, target, epoch, instance))
            elif chunk:
                self._loop.create_task(self._send_multi(target, chunk))
            for st, b, epoch, instance in later:
                self._loop.create_task(self._send(st, b, target, epoch, instance))

    def _request(
        self, st: StreamState, b: Batch, epoch: int, instance: str
    ) -> tuple[pb.WriteRequest | pb.BulkWriteRequest, bool]:
        """The request of ``b``, and whether it is a single ``write`` (one record or a record set)."""
        m = self.metrics
        m.requests_sent.inc()
        m.records_sent.inc(len(b))
        if b.attempts > 1:
            m.requests_retried.inc()
        ctx = pb.WriteContext(
            tried_hosts=b.tried, producer_id=b.producer_id, sequence=b.seq, create_if_missing=self._create
        )
        if b.producer_id:
            ctx.producer_instance = instance
            if epoch >= 0:
                ctx.producer_epoch = epoch
        if len(b) == 1 or (self._record_sets and not b.separate):
            data = b.payloads[0] if len(b) == 1 else encode_record_set(b.payloads)
            ctx.is_record_set = len(b) > 1
            ctx.crc32 = zlib.crc32(data)
            return pb.WriteRequest(stream=st.name, data=data, ctx=ctx), True
        crc = 0
        for p in b.payloads:
            crc = zlib.crc32(p, crc)
        ctx.crc32 = crc
        return pb.BulkWriteRequest(stream=st.name, data=b.payloads, ctx=ctx), False

    async def _send(self, st: StreamState, b: Batch, target: str, epoch: int, instance: str) -> None:
        response: pb.WriteResponse | pb.BulkWriteResponse
        try:
            request, _ = self._request(st, b, epoch, instance)
            if isinstance(request, pb.WriteRequest):
                self.metrics.calls.labels("write").inc()
                response = await self._transport.write(target, request, self._request_timeout_s)
            else:
                self.metrics.calls.labels("writeBulk").inc()
                response = await self._transport.write_bulk(target, request, self._request_timeout_s)
        except TransportError as e:
            self._on_transport_error(st, b, target, e)
        except Exception as e:  # never leave a batch in flight forever
            log.exception("unexpected error sending %s", b.describe())
            self._on_transport_error(st, b, target, TransportError(grpc.StatusCode.UNKNOWN, str(e), unknown=True))
        else:
            self._on_response(st, b, target, response)
        self._deliver()
        self._pump(st)

    async def _send_multi(self, target: str, sends: list[tuple[StreamState, Batch, int, str]]) -> None:
        """Several streams' batches in one ``writeMulti``; each answered as if sent alone. A proxy without
        ``writeMulti`` (an older version) gets them one call each, from then on."""
        singles: list[bool] = []
        try:
            requests = []
            for st, b, epoch, instance in sends:
                request, single = self._request(st, b, epoch, instance)
                singles.append(single)
                if isinstance(request, pb.WriteRequest):
                    request = pb.BulkWriteRequest(stream=request.stream, data=[request.data], ctx=request.ctx)
                requests.append(request)
            multi = pb.MultiWriteRequest(requests=requests)
            self.metrics.calls.labels("writeMulti").inc()
            resp = await self._transport.write_multi(target, multi, self._request_timeout_s)
            if len(resp.responses) != len(sends):
                raise TransportError(
                    grpc.StatusCode.UNKNOWN,
                    f"writeMulti answered {len(resp.responses)} requests of {len(sends)}",
                    unknown=True,
                )
        except TransportError as e:
            if e.code == grpc.StatusCode.UNIMPLEMENTED:
                log.info("proxy %s has no writeMulti: one call per stream from now on", target)
                self._no_multi.add(target)
                for st, b, epoch, instance in sends:
                    self._loop.create_task(self._send(st, b, target, epoch, instance))
                return
            for st, b, _, _ in sends:
                self._on_transport_error(st, b, target, e)
        except Exception as e:  # never leave a batch in flight forever
            log.exception("unexpected error sending %d streams' batches to %s", len(sends), target)
            for st, b, _, _ in sends:
                self._on_transport_error(st, b, target, TransportError(grpc.StatusCode.UNKNOWN, str(e), unknown=True))
        else:
            for (st, b, _, _), single, r in zip(sends, singles, resp.responses, strict=True):
                answer: pb.WriteResponse | pb.BulkWriteResponse = r
                if single:
                    answer = r.write_responses[0] if r.write_responses else pb.WriteResponse(header=r.header)
                self._on_response(st, b, target, answer)
        self._deliver()
        for st, _, _, _ in sends:
            self._pump(st)

    def _watch(self, st: StreamState) -> None:
        """The stream's one timer, armed while it has unanswered records (it holds the stream, never a batch: a
        timer per batch would keep every batch's futures alive until its delivery timeout, hundreds of thousands
        of them for a busy producer): fail what passed its delivery timeout, log the oldest batch still waited
        for once it has waited a second (and every few seconds after), then arm itself for the next of these."""
        st.watch_armed = False
        now = time.monotonic()
        self._expire_due(st, now)
        with self._mu:
            waiting = [b for b in [*st.unacked, *([st.open] if st.open is not None else [])] if b.waited_for]
            if not waiting or self._closed:
                return
            head = waiting[0]
            due = min(b.deadline for b in waiting)
            if now - head.created >= LOG_WAIT_S and now - st.slow_logged >= SLOW_REPEAT_S:
                self._log_slow(st, head, now)
            if now - head.created < LOG_WAIT_S:
                due = min(due, head.created + LOG_WAIT_S)
            else:
                due = min(due, st.slow_logged + SLOW_REPEAT_S)
        st.watch_armed = True
        self._loop.call_at(max(due, now), self._watch, st)

    def _expire_due(self, st: StreamState, now: float) -> None:
        """The delivery timeout: fail the records of ``st``'s batches whose deadline passed and abandon those
        batches (the client stops sending them; the stream then starts a new epoch)."""
        errors: list[tuple[Future[DLSN], DLError]] = []
        with self._mu:
            for b in st.unacked:
                if b.deadline > now or b.abandoned or not b.waited_for:
                    continue
                b.abandoned = True
                err = self._timeout_error(st.name, b)
                errors += [(f, err) for f in b.futures]
                if b.state is not BatchState.IN_FLIGHT:
                    st.reinit_pending = st.reinit_pending or "a batch passed its delivery timeout"
            opened = st.open
            if opened is not None and opened.deadline <= now and opened.waited_for:
                # never sent (it lingers longer than the delivery timeout): abandoned, it never will be; sealed now,
                # so the new epoch drops it with the others and numbers what follows without a gap
                opened.abandoned = True
                err = self._timeout_error(st.name, opened)
                errors += [(f, err) for f in opened.futures]
                st.seal_open()
                st.reinit_pending = st.reinit_pending or "a batch passed its delivery timeout"
        for f, err in errors:
            if not f.done():
                f.set_exception(err)
        if errors:
            log.warning("%s", errors[0][1])
            self._pump(st)

    def _timeout_error(self, stream: str, b: Batch) -> DLError:
        """The error of ``b``'s futures at its delivery timeout: outcome unknown if an attempt may have stored it;
        else definitive, and "no write proxy reachable" when no proxy ever answered."""
        if b.maybe_stored or b.state is BatchState.IN_FLIGHT:  # a request on its way may still be served
            return WriteTimeoutError(
                f"{len(b)} records of stream {stream!r} not acknowledged within {self.timeout_s}s; their outcome is "
                f"unknown (they may be stored, once; the client no longer sends them): {b.describe()}"
            )
        if not b.answered:
            return NoProxyReachableError(
                f"no write proxy reachable for {self.timeout_s}s ({self.discovery.describe()}): {len(b)} records of "
                f"stream {stream!r} were not sent, so they are not stored"
                + (f"; last error: {b.last_error}" if b.last_error else "")
            )
        return WriteTimeoutError(
            f"{len(b)} records of stream {stream!r} not stored within {self.timeout_s}s (every attempt was refused, "
            f"so they are not stored): {b.describe()}",
            outcome_unknown=False,
        )

    def _log_slow(self, st: StreamState, head: Batch, now: float) -> None:
        """Log the stream's oldest batch still waited for (caller holds the lock). One line per second for the whole
        client: with thousands of streams waiting (a proxy failing over, the first writes of every stream), the
        line names the oldest of them and counts the others."""
        st.slow_logged = now
        if now - self._slow_logged < LOG_WAIT_S:
            self._slow_others += 1
            return
        others, self._slow_others, self._slow_logged = self._slow_others, 0, now
        also = f"; {others} more batches of other streams waited more than 1s since the last line" if others else ""
        log.warning("waiting %.1fs for %s%s", now - head.created, head.describe(), also)

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


#: A per-record callback: ``callback(dlsn, None)`` once stored, ``callback(None, error)`` once failed.
Callback = Callable[[DLSN | None, DLError | None], None]


def _calling(callback: Callback) -> Callable[[Future[DLSN]], None]:
    def done(f: Future[DLSN]) -> None:
        exc = f.exception()
        if exc is None:
            callback(f.result(), None)
        else:
            callback(None, exc if isinstance(exc, DLError) else DLError(str(exc), outcome_unknown=True))

    return done


def _too_long(n: int) -> LogRecordTooLongError:
    return LogRecordTooLongError(f"payload of {n} bytes: a record may carry at most {MAX_PAYLOAD}")


def _read_pem(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InvalidArgumentError(f"cannot read {path}: {e}") from e
