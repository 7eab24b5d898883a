"""The client API a Kafka producer user expects: per-record callbacks, flush/close with a timeout, callbacks that
call the client, metrics in Prometheus' format, awaitable writes (asyncio), and a stuck stream that does not
block the others. One real proxy process."""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
import time

import pytest

import storage
from dl_proxy import ProxyClient
from dl_proxy.aio import AsyncProxyClient
from storage import errors
from storage.common.futures import WriteFuture
from tests.proxy.conftest import StartProxy
from tests.proxy.test_client_proxies import read_all


@pytest.fixture
def proxy(zk_local_uri: str, proxy_process: StartProxy) -> tuple[str, str]:
    _p, address = proxy_process(zk_local_uri)
    return zk_local_uri, address


def test_callbacks_flush_close_and_metrics(proxy: tuple[str, str]) -> None:
    uri, a = proxy
    got: list[tuple[storage.DLSN | None, errors.DLError | None]] = []
    done = threading.Event()
    with ProxyClient(proxies=[a], create_if_missing=True) as client:
        futs = [client.write("api", b"r%d" % i, lambda d, e: got.append((d, e))) for i in range(20)]
        client.write_bulk("api", [b"x", b"y"], lambda d, e: got.append((d, e)))
        client.flush(timeout=60)
        assert all(f.done() for f in futs)

        # a callback that calls flush gets a clear error; one that closes the client closes it without waiting
        seen: list[BaseException] = []

        def flushing(_d: storage.DLSN | None, _e: errors.DLError | None) -> None:
            try:
                client.flush()
            except errors.IllegalStateError as e:
                seen.append(e)
            done.set()

        client.write("api", b"cb", flushing)
        assert done.wait(60) and seen and "callback" in str(seen[0])
        text = client.metrics_text()
    assert len(got) == 22 and all(d is not None and e is None for d, e in got)
    assert [d for d, _ in got[:20]] == [f.result() for f in futs]
    assert "dl_proxy_client_records_acked_total 23.0" in text
    assert "dl_proxy_client_requests_sent_total" in text and "dl_proxy_client_ack_latency_seconds_count" in text
    assert [r.payload for r in read_all(uri, "api")] == [*(b"r%d" % i for i in range(20)), b"x", b"y", b"cb"]


def test_answered_records_are_not_kept(proxy: tuple[str, str]) -> None:
    """Once answered, a record's future and payload belong to the caller alone: the client keeps nothing of them
    until the delivery timeout (a busy producer would otherwise hold rate x timeout_s futures, hundreds of
    thousands, and its memory and collector pauses would grow with them)."""
    _uri, a = proxy
    with ProxyClient(proxies=[a], create_if_missing=True, timeout_s=600) as client:
        client.write("kept", b"warm").result(timeout=60)
        chunk = b"k" * 512
        for _ in range(20):
            client.write_bulk("kept", [chunk] * 50)
            client.flush(timeout=60)
        gc.collect()
        futures = sum(1 for o in gc.get_objects() if isinstance(o, WriteFuture))
        payloads = sum(1 for o in gc.get_referrers(chunk) if isinstance(o, list))
        assert client.metrics.registry.get_sample_value("dl_proxy_client_records_acked_total") == 1001
    assert futures < 50, f"{futures} futures of answered records are still referenced"
    assert payloads == 0, f"{payloads} lists of answered payloads are still referenced"


def test_a_batch_still_lingering_at_its_delivery_timeout_is_never_sent(
    zk_local_uri: str, proxy_process: StartProxy
) -> None:
    """A batch that lingers past its delivery timeout (linger longer than the timeout, behind a request the frozen
    proxy does not answer) fails definitively and is never sent; the stream goes on in a new epoch."""
    frozen, a = proxy_process(zk_local_uri)
    with storage.open_namespace(zk_local_uri) as ns:
        ns.create_log("linger")
    with ProxyClient(proxies=[a], timeout_s=1.0, linger_s=30.0) as client:
        client.write("linger", b"warm").result(timeout=60)
        frozen.send_signal(signal.SIGSTOP)
        try:
            in_flight = client.write("linger", b"in flight")  # sent at once (nothing in flight): no answer
            time.sleep(0.1)
            lingering = client.write("linger", b"lingering")  # waits behind it, for the 30 s linger
            with pytest.raises(errors.DLError) as never_sent:
                lingering.result(timeout=30)
            with pytest.raises(errors.DLError) as unknown:
                in_flight.result(timeout=30)
        finally:
            frozen.send_signal(signal.SIGCONT)
        assert not never_sent.value.outcome_unknown, never_sent.value
        assert unknown.value.outcome_unknown, unknown.value
        client.timeout_s = 60
        after = client.write("linger", b"after")
        client.flush(timeout=60)  # not the 30 s linger
        assert after.result(timeout=0) is not None
    payloads = [r.payload for r in read_all(zk_local_uri, "linger")]
    assert b"lingering" not in payloads and payloads[0] == b"warm" and payloads[-1] == b"after"
    assert payloads.count(b"in flight") <= 1


def test_close_from_a_callback(proxy: tuple[str, str]) -> None:
    uri, a = proxy
    closed = threading.Event()
    client = ProxyClient(proxies=[a], create_if_missing=True)
    client.write("api2", b"first").result(timeout=60)

    def closing(_d: storage.DLSN | None, _e: errors.DLError | None) -> None:
        client.close()  # on the client's own thread: closes without waiting for itself
        closed.set()

    client.write("api2", b"second", closing)
    assert closed.wait(60)
    with pytest.raises(errors.AlreadyClosedError):
        client.write("api2", b"third")
    assert [r.payload for r in read_all(uri, "api2")] == [b"first", b"second"]


def test_flush_timeout_and_a_stuck_stream_does_not_block_the_others(
    zk_local_uri: str, proxy_process: StartProxy
) -> None:
    """A frozen proxy owns one stream, a live one the other: writes to the live one go on while the frozen one's
    buffer is full (per-stream pending limit); flush(timeout) gives up waiting with OperationTimeoutError."""
    frozen, a = proxy_process(zk_local_uri)
    _live, b = proxy_process(zk_local_uri)
    with storage.open_namespace(zk_local_uri) as ns:
        ns.create_log("stuck")
        ns.create_log("fine")
    client = ProxyClient(proxies=[a], timeout_s=60, max_stream_pending_bytes=64 * 1024)
    other = ProxyClient(proxies=[b], timeout_s=60)
    try:
        client.write("stuck", b"warm").result(timeout=60)
        frozen.send_signal(signal.SIGSTOP)
        try:
            client.write_bulk("stuck", [b"s" * 1024] * 60)  # 60 KiB: the stream's buffer is nearly full
            with pytest.raises(errors.OperationTimeoutError):
                client.flush(timeout=0.5)
            with pytest.raises(errors.OverCapacityError) as full:
                write_waiting_briefly(client, "stuck", b"s" * 8192)
            assert "stuck" in str(full.value)
            assert other.write("fine", b"ok").result(timeout=60) is not None
        finally:
            frozen.send_signal(signal.SIGCONT)
        client.flush(timeout=120)
    finally:
        client.close()
        other.close()


def write_waiting_briefly(client: ProxyClient, stream: str, payload: bytes) -> None:
    """A write that waits for buffer space, from a thread of its own with a short delivery timeout."""
    client.timeout_s = 0.5  # the wait for space is bounded by it
    try:
        client.write(stream, payload)
    finally:
        client.timeout_s = 60


def test_asyncio_writes(proxy: tuple[str, str]) -> None:
    uri, a = proxy

    async def main() -> list[storage.DLSN]:
        async with await AsyncProxyClient.connect(proxies=[a], create_if_missing=True) as client:
            one = await client.write("aio", b"a0")
            more = await client.write_bulk("aio", [b"a1", b"a2"])
            await client.flush()
            return [one, *more]

    dlsns = asyncio.run(main())
    got = read_all(uri, "aio")
    assert [r.payload for r in got] == [b"a0", b"a1", b"a2"]
    assert [r.dlsn for r in got] == dlsns
