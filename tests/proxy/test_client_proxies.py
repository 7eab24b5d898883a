"""ProxyClient against real ``dlog proxy`` processes on a ZooKeeper namespace bound to a local segment path:
writes and read-back, redirects to the owner, the idempotent producer's resends, a reply lost after the durable
append, timeouts (outcome unknown), definitive errors, a proxy drained by SIGTERM."""

from __future__ import annotations

import signal
import time
from concurrent.futures import Future

import pytest

import storage
from dl_proxy import ProxyClient, WriteTimeoutError
from dl_proxy.ring import HashRing
from storage import errors
from tests.proxy.conftest import StartProxy
from tests.zk import free_port


@pytest.fixture
def zk_uri(zk_local_uri: str) -> str:
    return zk_local_uri


def read_all(uri: str, stream: str) -> list[storage.LogRecordWithDLSN]:
    out: list[storage.LogRecordWithDLSN] = []
    with (
        storage.open_namespace(uri, create=False) as ns,
        ns.open_log(stream) as dlm,
        dlm.open_reader(storage.DLSN.INITIAL) as reader,
    ):
        while got := reader.read_bulk(1000, non_blocking=True):
            out.extend(got)
    return out


def stream_routed_to(address: str, ring_members: list[str], prefix: str = "s") -> str:
    """A stream name the client's ring sends to ``address`` first."""
    ring = HashRing(ring_members)
    return next(f"{prefix}{i}" for i in range(10000) if ring.lookup(f"{prefix}{i}") == address)


def results(futures: list[Future[storage.DLSN]]) -> list[storage.DLSN]:
    return [f.result(timeout=120) for f in futures]


@pytest.mark.parametrize("record_sets", [True, False], ids=["record-sets", "separate-records"])
def test_write_flush_and_read_back_through_two_proxies(
    zk_uri: str, proxy_process: StartProxy, record_sets: bool
) -> None:
    """Batches travel as record sets (the default) or as writeBulk requests of separate records: the same records,
    the same DLSNs as read back."""
    _, a = proxy_process(zk_uri)
    _, b = proxy_process(zk_uri)
    streams = [f"events-{record_sets}-a", f"events-{record_sets}-b", f"events-{record_sets}-c"]
    opts = {"batch_max_records": 7, "max_inflight": 4, "record_sets": record_sets}
    with ProxyClient(uri=zk_uri, create_if_missing=True, **opts) as client:  # type: ignore[arg-type]
        futures = {s: [client.write(s, f"{s}-{i}".encode()) for i in range(300)] for s in streams}
        client.flush()
        dlsns = {s: results(fs) for s, fs in futures.items()}
        status = client.proxy_status()
    for s in streams:
        assert dlsns[s] == sorted(set(dlsns[s])), "DLSNs of one stream strictly increase in write order"
        got = read_all(zk_uri, s)
        assert [r.payload for r in got] == [f"{s}-{i}".encode() for i in range(300)]
        assert [r.dlsn for r in got] == dlsns[s]
    owned = {stream: st.address for st in status for stream in st.ownerships}
    assert set(owned) == set(streams)
    assert {st.address for st in status} == {a, b}
    assert all(st.status == "WRITE_AND_ACCEPT" for st in status)


def test_found_redirects_to_the_owner_and_is_remembered(zk_uri: str, proxy_process: StartProxy) -> None:
    _, a = proxy_process(zk_uri)
    _, b = proxy_process(zk_uri)
    with ProxyClient(proxies=[a], create_if_missing=True) as first:
        owned_dlsn = first.write("redirected", b"r0").result(timeout=60)
    # a client that only knows b: b answers FOUND with a's address, the client follows and remembers it
    with ProxyClient(proxies=[b]) as second:
        dlsn = second.write("redirected", b"r1").result(timeout=60)
        assert second.owners.get("redirected") == a
    assert dlsn > owned_dlsn
    assert [r.payload for r in read_all(zk_uri, "redirected")] == [b"r0", b"r1"]


def test_a_reused_producer_id_fences_the_earlier_client_and_stores_its_own_records(
    zk_uri: str, proxy_process: StartProxy
) -> None:
    """A second client with the producer id of a first one (a restarted service with a configured id) writes OTHER
    records: they are stored, and every acknowledged DLSN holds the record written; the first client, still
    open, is fenced on that stream (ProducerFencedError naming the newer epoch, definitive: not stored)."""
    _, a = proxy_process(zk_uri)
    first_payloads = [f"first-{i}".encode() for i in range(10)]
    second_payloads = [f"second-{i}".encode() for i in range(10)]
    first = ProxyClient(proxies=[a], producer_id="service-1", create_if_missing=True, batch_max_records=3)
    with first:
        original = results(first.write_bulk("reused", first_payloads))
        with ProxyClient(proxies=[a], producer_id="service-1", batch_max_records=4) as second:
            mine = results(second.write_bulk("reused", second_payloads))
        assert set(mine).isdisjoint(original)
        with pytest.raises(errors.ProducerFencedError) as fenced:
            first.write("reused", b"zombie").result(timeout=60)
        assert fenced.value.epoch == 1 and fenced.value.outcome_unknown is False
        assert fenced.value.retriable is False
        with pytest.raises(errors.ProducerFencedError):  # every later write to the stream fails at once
            first.write("reused", b"zombie-2")
    got = read_all(zk_uri, "reused")
    assert [r.payload for r in got] == [*first_payloads, *second_payloads]
    by_dlsn = {r.dlsn: r.payload for r in got}
    assert [by_dlsn[d] for d in original] == first_payloads
    assert [by_dlsn[d] for d in mine] == second_payloads


def test_lost_reply_after_the_durable_append_gives_the_original_dlsn(zk_uri: str, proxy_process: StartProxy) -> None:
    """The first proxy dies right after appending (before replying); the client resends to the other proxy,
    which rebuilt the producer's state from the log: same DLSN, stored once."""
    dying, a = proxy_process(zk_uri, env={"DLOG_PROXY_FAILPOINT": "after_append_before_reply"})
    _, b = proxy_process(zk_uri)
    stream = stream_routed_to(a, [a, b], prefix="lost")
    with ProxyClient(proxies=[a, b], create_if_missing=True, timeout_s=60) as client:
        dlsn = client.write(stream, b"only-once").result(timeout=90)
        assert dying.wait(timeout=30) is not None, "the failpoint did not stop the first proxy"
        assert client.owners.get(stream) == b
        after = client.write(stream, b"next").result(timeout=60)
    got = read_all(zk_uri, stream)
    assert [r.payload for r in got] == [b"only-once", b"next"]
    assert [r.dlsn for r in got] == [dlsn, after]


def test_a_write_no_proxy_can_take_fails_definitively() -> None:
    """Nothing listens: the record never left the client, so its failure is definitive (not stored)."""
    with ProxyClient(proxies=[f"127.0.0.1:{free_port()}"], timeout_s=1.0) as client:
        fut = client.write("nowhere", b"x")
        with pytest.raises(errors.NoProxyReachableError) as info:
            fut.result(timeout=30)
    assert info.value.retriable is True and info.value.outcome_unknown is False
    assert "no write proxy reachable" in str(info.value) and "nowhere" in str(info.value)


def test_a_write_a_frozen_proxy_never_answers_times_out_with_an_unknown_outcome(
    zk_uri: str, proxy_process: StartProxy
) -> None:
    """The proxy takes the request and never answers (SIGSTOP): the outcome is unknown at the delivery timeout;
    once the proxy runs again, the client has stopped sending the record and the next write goes on."""
    proc, a = proxy_process(zk_uri)
    with ProxyClient(proxies=[a], create_if_missing=True, timeout_s=2.0, request_timeout_s=1.0) as client:
        results([client.write("frozen", b"before")])
        proc.send_signal(signal.SIGSTOP)
        try:
            fut = client.write("frozen", b"x")
            with pytest.raises(WriteTimeoutError) as info:
                fut.result(timeout=30)
        finally:
            proc.send_signal(signal.SIGCONT)
        after = client.write("frozen", b"after").result(timeout=60)
    assert info.value.retriable is True and info.value.outcome_unknown is True
    assert "outcome is unknown" in str(info.value) and "frozen" in str(info.value)
    got = read_all(zk_uri, "frozen")
    assert [r.payload for r in got if r.payload != b"x"] == [b"before", b"after"]
    assert got[-1].dlsn == after


def test_definitive_errors_and_bad_input(zk_uri: str, proxy_process: StartProxy) -> None:
    _, a = proxy_process(zk_uri)
    client = ProxyClient(proxies=[a], timeout_s=30)
    with client:
        with pytest.raises(errors.LogNotFoundError) as missing:
            client.write("does-not-exist", b"x").result(timeout=60)
        assert missing.value.retriable is False
        with pytest.raises(errors.LogRecordTooLongError):
            client.write("any", b"x" * (1024 * 1024))
        with pytest.raises(errors.InvalidStreamNameError):
            client.write("bad name", b"x")
        with pytest.raises(errors.InvalidArgumentError):
            client.write("any", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(errors.AlreadyClosedError):
        client.write("any", b"x")
    with pytest.raises(errors.AlreadyClosedError):
        client.flush()
    client.close()  # idempotent


def test_a_drained_proxy_hands_its_streams_over(zk_uri: str, proxy_process: StartProxy) -> None:
    """SIGTERM: the proxy releases its streams and exits 0; writes go on through the other proxy, none lost."""
    first, a = proxy_process(zk_uri)
    _, b = proxy_process(zk_uri)
    stream = stream_routed_to(a, [a, b], prefix="drain")
    with ProxyClient(uri=zk_uri, create_if_missing=True) as client:
        before = results([client.write(stream, f"d-{i}".encode()) for i in range(50)])
        assert client.owners.get(stream) == a
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0
        after = results([client.write(stream, f"d-{i}".encode()) for i in range(50, 100)])
        assert client.owners.get(stream) == b
    got = read_all(zk_uri, stream)
    assert [r.payload for r in got] == [f"d-{i}".encode() for i in range(100)]
    assert [r.dlsn for r in got] == before + after


def test_a_forgotten_producer_starts_a_new_epoch(zk_uri: str, proxy_process: StartProxy) -> None:
    """The proxy forgets a producer idle past proxyProducerExpirySeconds: the client's next request is answered
    PRODUCER_STATE_LOST; that batch was never sent before, so it is certainly not stored: the client starts a new
    epoch and sends it again renumbered; every record is stored once, in order."""
    _, a = proxy_process(zk_uri, conf={"proxyProducerExpirySeconds": 1})
    with ProxyClient(proxies=[a], producer_id="idle", create_if_missing=True) as client:
        first = results(client.write_bulk("idle-stream", [b"i0", b"i1", b"i2"]))
        time.sleep(2.5)  # idle past the proxy's expiry (the condition under test, not a timing assertion)
        later = results(client.write_bulk("idle-stream", [b"i3", b"i4"]))
        assert client._streams["idle-stream"].reinits == 1
    got = read_all(zk_uri, "idle-stream")
    assert [r.payload for r in got] == [b"i0", b"i1", b"i2", b"i3", b"i4"]
    assert [r.dlsn for r in got] == first + later
