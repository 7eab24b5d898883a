"""A ZooKeeper blip shorter than the session costs a write proxy none of its streams.

A real ``dlog -v proxy`` subprocess (as the ``proxy_process`` fixture starts one, plus ``-v`` so that its log tells
when it acquires a stream; stopped by the ``proxy_processes`` fixture) whose namespace URI points at a loopback TCP
relay to a private ZooKeeper server (:mod:`tests.storage.zk_relay`; a private server, so that the cut disturbs no
other test), with a 4 s ZooKeeper session. A :class:`dl_proxy.ProxyClient` writes continuously; the relay cuts the
proxy's connection to ZooKeeper for 1.5 s. Every write is acknowledged, everything acknowledged is read back once in
order, and the proxy acquired the stream once and never stopped it (before the storage change, the writer refused
writes while the connection was SUSPENDED, and the proxy stopped the stream and acquired it again by a full
recovery).
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

import storage
from dl_proxy import ProxyClient
from storage import DLSN
from tests.proxy.conftest import ProxyProcess, StartProxy
from tests.proxy.test_client_proxies import read_all
from tests.storage.observe import GENEROUS_S, finishes, wait_until
from tests.storage.zk_relay import TcpRelay
from tests.zk import _SERVER_KEY, ZooKeeperServer, started_server

CUT_S = 1.5
ACKS = 200


@pytest.fixture(scope="module")
def private_zk() -> Iterator[ZooKeeperServer]:
    """A ZooKeeper server of this module's own (its connections are cut here)."""
    server = started_server()
    yield server
    server.close()


class _Writer:
    """Writes ``blip-<n>`` continuously through the client (up to 64 in flight); records acknowledgements in
    acknowledgement order and every error."""

    def __init__(self, client: ProxyClient, stream: str) -> None:
        self.client, self.stream = client, stream
        self.acked: list[tuple[bytes, DLSN]] = []
        self.errors: list[BaseException] = []
        self._mu = threading.Lock()
        self._window = threading.Semaphore(64)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="blip-writer", daemon=True)

    def acks(self) -> int:
        with self._mu:
            return len(self.acked)

    def wait_for(self, n: int, what: str) -> None:
        wait_until(lambda: self.acks() >= n or bool(self.errors), what)

    def stop(self) -> None:
        self._stop.set()
        finishes(lambda: self.thread.join(GENEROUS_S), "the writer to stop")
        for _ in range(64):
            assert self._window.acquire(timeout=GENEROUS_S)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            if not self._window.acquire(timeout=0.1):
                continue
            n += 1
            payload = b"blip-%d" % n
            try:
                fut = self.client.write(self.stream, payload)
            except BaseException as e:
                self.errors.append(e)
                self._window.release()
                return
            fut.add_done_callback(functools.partial(self._settled, payload=payload))

    def _settled(self, f: Future[DLSN], payload: bytes) -> None:
        exc = f.exception()
        with self._mu:
            if exc is None:
                self.acked.append((payload, f.result()))
            else:
                self.errors.append(exc)
        self._window.release()


def test_proxy_keeps_its_stream_through_a_short_zookeeper_disconnect(
    private_zk: ZooKeeperServer,
    proxy_process: StartProxy,
    proxy_processes: list[ProxyProcess],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """zkSessionTimeoutSeconds=4, the proxy's connection to ZooKeeper cut for 1.5 s under continuous writes: every
    write acknowledged, read back once in order; the proxy log shows the stream acquired once, never stopped."""
    request.node.stash[_SERVER_KEY] = private_zk
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    direct = f"distributedlog://{private_zk.hosts}{chroot}"
    storage.bind_namespace(direct, segments=f"file://{tmp_path / 'segments'}")
    with TcpRelay(private_zk.hosts) as relay:
        _proc, address = proxy_process(
            f"distributedlog://{relay.hosts}{chroot}", conf={"zkSessionTimeoutSeconds": 4}, verbose=True
        )
        proxy = proxy_processes[-1]
        client = ProxyClient(proxies=[address], create_if_missing=True, record_sets=False, timeout_s=GENEROUS_S)
        try:
            writer = _Writer(client, "blip")
            writer.thread.start()
            writer.wait_for(ACKS, "writes acknowledged before the cut")
            dropped = relay.dropped
            relay.cut()
            try:
                assert relay.dropped > dropped  # the proxy's ZooKeeper connection was cut
                time.sleep(CUT_S)
            finally:
                relay.heal()
            writer.wait_for(writer.acks() + ACKS, "writes acknowledged after the cut")
            writer.stop()
            client.flush(GENEROUS_S)
        finally:
            client.close(GENEROUS_S)
        log_text = proxy.log_text()
        assert writer.errors == [], (writer.errors[:3], log_text[-3000:])
        assert log_text.count("acquired stream 'blip'") == 1, log_text[-3000:]
        assert "stops on this proxy" not in log_text, log_text[-3000:]
    read = [(r.payload, r.dlsn) for r in read_all(direct, "blip")]
    assert read == sorted(writer.acked, key=lambda a: a[1])  # each acknowledged record once, at its DLSN
    assert [p for p, _ in read] == [b"blip-%d" % n for n in range(1, len(read) + 1)]  # in send order
