"""Owned streams against real proxies: DistributedLog's proxy cases (fence-write, failing requests during close,
accept-new-stream off, the stream cap, the service's hard limit) and a zombie owner: a proxy frozen with SIGSTOP past
its ZooKeeper session timeout whose late appends are fenced, none visible; after SIGCONT it drops the stream and
redirects to the new owner."""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

import storage
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.registry import list_proxies
from tests.proxy.conftest import StartProxy, stub
from tests.proxy.test_dedup import _bulk, _records, until_served
from tests.storage.metastore._stores import until
from tests.storage.observe import flocks_held_by, wait_stopped, wait_until

T = 30


def _freeze_idle(pid: int) -> None:
    """SIGSTOP process ``pid`` at a moment it holds no file lock: stopped, it is looked at in the kernel's lock table;
    caught inside an append (the commit that follows a write takes the ledger file's flock), it goes on until it
    let go, and is stopped again."""
    for _ in range(100):
        os.kill(pid, signal.SIGSTOP)
        wait_stopped(pid)
        if not flocks_held_by(pid):
            return
        os.kill(pid, signal.SIGCONT)
        wait_until(lambda: not flocks_held_by(pid), f"process {pid} out of its append")
    raise AssertionError(f"process {pid} was inside an append each of 100 times it was stopped")


def test_fence_write_by_an_external_writer(proxy_ns_uri: str, proxy_process: StartProxy) -> None:
    """An external core writer takes the log between two batches: the proxy's next batch fails (fenced), the
    reader sees every stored record once and in order, and the client's retry is stored after the external ones."""
    _p, a = proxy_process(proxy_ns_uri)
    ch, s = stub(a)
    with ch:
        assert s.writeBulk(_bulk("fenced", [b"a0", b"a1"], "prod", 0), timeout=T).header.code == pb.SUCCESS
        # the external writer recovers (fences) the proxy's segment without the lock, as a rogue writer would
        with storage.open_namespace(proxy_ns_uri, {"writeLockEnabled": False}) as ns, ns.open_log("fenced") as dlm:
            w = dlm.open_writer()
            w.write(storage.LogRecord(max(dlm.last_txid(), 1), b"ext"))
            w.flush()
            late = s.writeBulk(_bulk("fenced", [b"b2", b"b3"], "prod", 2), timeout=T)
            assert late.header.code == pb.STREAM_UNAVAILABLE or all(
                r.header.code == pb.STREAM_UNAVAILABLE for r in late.write_responses
            ), late
            w.close()
        assert [r.payload for r in _records(proxy_ns_uri, "fenced")] == [b"a0", b"a1", b"ext"]
        retry = until_served(lambda: s.writeBulk(_bulk("fenced", [b"b2", b"b3"], "prod", 2), timeout=T), "retry")
        assert [w.duplicate for w in retry.write_responses] == [False, False], retry
    recs = _records(proxy_ns_uri, "fenced")
    assert [r.payload for r in recs] == [b"a0", b"a1", b"ext", b"b2", b"b3"]
    assert [r.dlsn for r in recs] == sorted(r.dlsn for r in recs)


def test_failing_requests_during_close(zk_local_uri: str, proxy_process: StartProxy) -> None:
    """Writes race a release: each answers SUCCESS (and is stored once) or STREAM_UNAVAILABLE (not stored)."""
    _p, a = proxy_process(zk_local_uri)
    ch, s = stub(a)
    answers: dict[bytes, int] = {}
    mu = threading.Lock()
    stop = threading.Event()
    with ch:
        assert s.create(pb.StreamRequest(stream="closing"), timeout=T).header.code == pb.SUCCESS

        def writer(k: int) -> None:
            i = 0
            while not stop.is_set():
                payload = b"w%d-%d" % (k, i)
                r = s.write(pb.WriteRequest(stream="closing", data=payload), timeout=T)
                with mu:
                    answers[payload] = r.header.code
                i += 1

        with ThreadPoolExecutor(4) as pool:
            futs = [pool.submit(writer, k) for k in range(4)]
            until_served(lambda: s.write(pb.WriteRequest(stream="closing", data=b"first"), timeout=T), "first")
            for _ in range(3):
                assert s.release(pb.StreamRequest(stream="closing"), timeout=T).header.code == pb.SUCCESS
            stop.set()
            for f in futs:
                f.result()
    codes = set(answers.values())
    assert codes <= {pb.SUCCESS, pb.STREAM_UNAVAILABLE}, codes
    stored = [r.payload for r in _records(zk_local_uri, "closing")]
    acked = {p for p, c in answers.items() if c == pb.SUCCESS} | {b"first"}
    assert sorted(stored) == sorted(acked)  # every acknowledged write once; no failed one stored
    print(f"during close: {len(acked)} acknowledged, {len(answers) - len(acked) + 1} refused")


def test_accept_new_stream_off_and_stream_cap(zk_local_uri: str, proxy_process: StartProxy) -> None:
    _p, a = proxy_process(zk_local_uri, conf={"maxAcquiredPartitionsPerProxy": 2, "proxyCreateStreamOnWrite": True})
    ch, s = stub(a)
    with ch:
        assert s.write(pb.WriteRequest(stream="kept", data=b"1"), timeout=T).header.code == pb.SUCCESS
        off = s.setAcceptNewStream(pb.SetAcceptNewStreamRequest(enabled=False), timeout=T)
        assert off.header.code == pb.SUCCESS
        assert s.write(pb.WriteRequest(stream="kept", data=b"2"), timeout=T).header.code == pb.SUCCESS
        refused = s.write(pb.WriteRequest(stream="new", data=b"x"), timeout=T)
        assert refused.header.code == pb.STREAM_UNAVAILABLE, refused
        assert s.handshake(pb.ClientInfo(), timeout=T).server_status == pb.WRITE_ONLY
        assert [p.status for p in list_proxies(zk_local_uri)] == ["WRITE_ONLY"]
        s.setAcceptNewStream(pb.SetAcceptNewStreamRequest(enabled=True), timeout=T)
        assert [p.status for p in list_proxies(zk_local_uri)] == ["WRITE_AND_ACCEPT"]
        assert s.write(pb.WriteRequest(stream="new", data=b"x"), timeout=T).header.code == pb.SUCCESS
        capped = s.write(pb.WriteRequest(stream="third", data=b"x"), timeout=T)
        assert capped.header.code == pb.TOO_MANY_STREAMS, capped
    with storage.open_namespace(zk_local_uri, create=False) as ns:
        assert not ns.log_exists("third")


def test_hard_service_limit_answers_over_capacity(zk_local_uri: str, proxy_process: StartProxy) -> None:
    _p, a = proxy_process(zk_local_uri, conf={"rpsHardServiceLimit": 1, "proxyCreateStreamOnWrite": True})
    ch, s = stub(a)
    with ch:
        codes = [s.write(pb.WriteRequest(stream="limited", data=b"%d" % i), timeout=T).header.code for i in range(20)]
    assert codes[0] == pb.SUCCESS and pb.OVER_CAPACITY in codes and set(codes) <= {pb.SUCCESS, pb.OVER_CAPACITY}
    assert len(_records(zk_local_uri, "limited")) == codes.count(pb.SUCCESS)


def test_sigstopped_owner_is_fenced_then_redirects(proxy_ns_uri: str, proxy_process: StartProxy) -> None:
    """A zombie owner: frozen past its session timeout while producers go on through another proxy."""
    pa, a = proxy_process(proxy_ns_uri)
    _pb, b = proxy_process(proxy_ns_uri)
    cha, sa = stub(a)
    chb, sb = stub(b)
    with cha, chb, ThreadPoolExecutor(1) as pool:
        assert sa.writeBulk(_bulk("zombie", [b"z0"], "prod", 0), timeout=T).header.code == pb.SUCCESS
        # Freeze it idle, not inside an append: on a shared local path an append holds the ledger file's flock, and
        # a process frozen there would hold up the next owner's fencing until it resumes (RADOS has no such wait).
        assert until(lambda: len(_records(proxy_ns_uri, "zombie")) == 1)
        _freeze_idle(pa.pid)
        try:
            moved = until_served(lambda: sb.writeBulk(_bulk("zombie", [b"z1"], "prod", 1), timeout=T), "takeover")
            assert moved.header.code == pb.SUCCESS and not moved.write_responses[0].duplicate
            # a write still queued at the frozen proxy (another producer, so the sequence check cannot refuse it)
            late = pool.submit(lambda: sa.writeBulk(_bulk("zombie", [b"LATE"], "other", 0), timeout=T))
            assert sb.writeBulk(_bulk("zombie", [b"z2"], "prod", 2), timeout=T).header.code == pb.SUCCESS
        finally:
            os.kill(pa.pid, signal.SIGCONT)
        try:
            late_code = late.result().header.code
        except grpc.RpcError as e:
            late_code = e.code()
        assert late_code != pb.SUCCESS
        redirect = None
        for _ in range(600):
            redirect = sa.write(pb.WriteRequest(stream="zombie", data=b"x"), timeout=T)
            if redirect.header.code == pb.FOUND:
                break
        assert redirect is not None and redirect.header.code == pb.FOUND and redirect.header.location == b
        assert dict(sa.handshake(pb.ClientInfo(get_ownerships=True), timeout=T).ownerships) == {}
    assert [r.payload for r in _records(proxy_ns_uri, "zombie")] == [b"z0", b"z1", b"z2"]
    print(f"zombie's late write answered {late_code}")
