"""Idempotent producers across owners: the dedup state lives in the log (markers and snapshots) and the next owner
rebuilds it. Real proxies (release, SIGKILL, the lost-reply failpoint) and the table itself on a real log."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

import grpc
import pytest

import storage
from dl_proxy.dedup import MAGIC, DedupTable, Plan, Verdict
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.stream import ProducerRequest, Stream
from tests.proxy.conftest import StartProxy, stub
from tests.storage.observe import GENEROUS_S, wait_until

T = 30
RETRY_CODES = (pb.FOUND, pb.STREAM_UNAVAILABLE, pb.STREAM_NOT_READY, pb.SERVICE_UNAVAILABLE)


R = TypeVar("R", pb.WriteResponse, pb.BulkWriteResponse)


def until_served(call: Callable[[], R], what: str, deadline_s: float = GENEROUS_S) -> R:
    """Call until the answer is not a redirect / unavailable (the old owner's session may still hold the lock)."""
    last: list[str] = [""]
    served: list[R] = []

    def answered() -> bool:
        try:
            r = call()
        except grpc.RpcError as e:
            if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            last[0] = str(e.code())
            return False
        last[0] = f"{r.header.code} {r.header.err_msg} {r.header.location}"
        if r.header.code in RETRY_CODES:
            return False
        served.append(r)
        return True

    try:
        wait_until(answered, f"{what} served", deadline_s, poll_s=0.1)
    except AssertionError as e:
        raise AssertionError(f"{e}; last answer: {last[0]}") from None
    return served[0]


def _records(uri: str, name: str) -> list[storage.LogRecordWithDLSN]:
    with (
        storage.open_namespace(uri, create=False) as ns,
        ns.open_log(name) as dlm,
        dlm.open_reader(storage.DLSN.INITIAL) as r,
    ):
        out: list[storage.LogRecordWithDLSN] = []
        while got := r.read_bulk(10_000, non_blocking=True):  # one call returns what is read ahead, not all
            out.extend(got)
        return out


def _bulk(stream: str, payloads: list[bytes], pid: str, seq: int, create: bool = True) -> pb.BulkWriteRequest:
    return pb.BulkWriteRequest(
        stream=stream, data=payloads, ctx=pb.WriteContext(producer_id=pid, sequence=seq, create_if_missing=create)
    )


def test_retry_after_release_is_deduplicated_by_the_next_owner(zk_local_uri: str, proxy_process: StartProxy) -> None:
    _pa, a = proxy_process(zk_local_uri)
    _pb, b = proxy_process(zk_local_uri)
    cha, sa = stub(a)
    chb, sb = stub(b)
    with cha, chb:
        first = sa.writeBulk(_bulk("moved", [b"m0", b"m1", b"m2"], "prod", 0), timeout=T)
        assert first.header.code == pb.SUCCESS, first
        redirect = sb.write(pb.WriteRequest(stream="moved", data=b"x"), timeout=T)
        assert redirect.header.code == pb.FOUND and redirect.header.location == a, redirect
        assert sa.release(pb.StreamRequest(stream="moved"), timeout=T).header.code == pb.SUCCESS
        # the client's retry of the same request lands on the new owner: same DLSNs, nothing stored
        retry = until_served(lambda: sb.writeBulk(_bulk("moved", [b"m0", b"m1", b"m2"], "prod", 0), timeout=T), "b")
        assert [w.dlsn for w in retry.write_responses] == [w.dlsn for w in first.write_responses]
        assert all(w.duplicate for w in retry.write_responses)
        nxt = sb.write(
            pb.WriteRequest(stream="moved", data=b"m3", ctx=pb.WriteContext(producer_id="prod", sequence=3)), timeout=T
        )
        assert nxt.header.code == pb.SUCCESS and not nxt.duplicate
        gap = sb.write(
            pb.WriteRequest(stream="moved", data=b"m9", ctx=pb.WriteContext(producer_id="prod", sequence=9)), timeout=T
        )
        assert gap.header.expected_sequence == 4
        back = sa.write(pb.WriteRequest(stream="moved", data=b"y"), timeout=T)
        assert back.header.code == pb.FOUND and back.header.location == b
    assert [r.payload for r in _records(zk_local_uri, "moved")] == [b"m0", b"m1", b"m2", b"m3"]


@pytest.mark.parametrize("how", ["failpoint", "sigkill"])
def test_lost_reply_retry_on_the_next_owner(
    how: str, proxy_ns_uri: str, proxy_process: StartProxy, request: pytest.FixtureRequest
) -> None:
    """The proxy dies right after the durable append (no reply): the retry on the next owner answers duplicate,
    with the DLSN the record was stored at; the record is stored once."""
    env = {"DLOG_PROXY_FAILPOINT": "after_append_before_reply:2"} if how == "failpoint" else None
    pa, a = proxy_process(proxy_ns_uri, env=env)
    _pb, b = proxy_process(proxy_ns_uri)
    cha, sa = stub(a)
    chb, sb = stub(b)
    with cha, chb:
        ok = sa.writeBulk(_bulk("lost", [b"r0", b"r1"], "prod", 0), timeout=T)
        assert ok.header.code == pb.SUCCESS
        if how == "failpoint":
            with pytest.raises(grpc.RpcError):
                sa.writeBulk(_bulk("lost", [b"r2", b"r3"], "prod", 2), timeout=T)
            assert pa.wait(30) == 17
        else:
            assert sa.writeBulk(_bulk("lost", [b"r2", b"r3"], "prod", 2), timeout=T).header.code == pb.SUCCESS
            pa.kill()
            pa.wait(30)
        retry = until_served(lambda: sb.writeBulk(_bulk("lost", [b"r2", b"r3"], "prod", 2), timeout=T), "takeover")
        assert [w.duplicate for w in retry.write_responses] == [True, True], retry
        old = until_served(lambda: sb.writeBulk(_bulk("lost", [b"r0", b"r1"], "prod", 0), timeout=T), "old")
        assert [w.dlsn for w in old.write_responses] == [w.dlsn for w in ok.write_responses]
        more = sb.writeBulk(_bulk("lost", [b"r4"], "prod", 4), timeout=T)
        assert more.header.code == pb.SUCCESS and not more.write_responses[0].duplicate
    recs = _records(proxy_ns_uri, "lost")
    assert [r.payload for r in recs] == [b"r0", b"r1", b"r2", b"r3", b"r4"]
    assert [storage.DLSN.deserialize(w.dlsn) for w in retry.write_responses] == [recs[2].dlsn, recs[3].dlsn]


def _table(window: int = 5, expiry_ms: int = 60_000, interval: int = 1000, max_producers: int = 100) -> DedupTable:
    return DedupTable(window=window, expiry_ms=expiry_ms, snapshot_interval=interval, max_producers=max_producers)


def _done(d: storage.DLSN) -> Future[storage.DLSN]:
    f: Future[storage.DLSN] = Future()
    f.set_result(d)
    return f


def _store(t: DedupTable, pid: str, epoch: int | None, inst: str, seq: int, n: int = 1, crc: int = 7,
           now: int = 1000) -> Plan:  # fmt: skip
    plan = t.plan(pid, epoch, inst, seq, n, crc, now)
    assert plan.verdict is Verdict.STORE, plan
    marker = t.marker(pid, plan, inst, seq, n, crc, now, 100_000)
    t.stored(pid, plan, inst, seq, n, crc, _done(storage.DLSN(1, seq, 0)), now, marker)
    return plan


def test_epochs_fence_older_instances_definitively() -> None:
    t = _table()
    assert _store(t, "p", None, "a", 0, 2).epoch == 0  # a new producer: epoch 0
    assert _store(t, "p", 0, "a", 2).epoch == 0
    # a resend of instance a's first request without its epoch (the answer was lost): a duplicate, not a bump
    again = t.plan("p", None, "a", 0, 2, 7, 1000)
    assert again.verdict is Verdict.DUPLICATE and again.epoch == 0
    # instance b with the same id: epoch 1, sequences from 0
    assert t.plan("p", None, "b", 5, 1, 7, 1000).verdict is Verdict.MISMATCH  # a new instance starts at 0
    assert _store(t, "p", None, "b", 0).epoch == 1
    # a's new records: fenced, certainly not stored
    new = t.plan("p", 0, "a", 3, 1, 7, 1000)
    assert new.verdict is Verdict.FENCED and new.epoch == 1 and not new.outcome_unknown
    # a's resend of what epoch 0 stored: not fenced as "not stored" (it is): state lost, naming the newer epoch
    old = t.plan("p", 0, "a", 2, 1, 7, 1000)
    assert old.verdict is Verdict.STATE_LOST and old.epoch == 1
    # epochs older than those remembered: fenced, outcome unknown
    for inst in "cdefg":
        _store(t, "p", None, inst, 0)
    ancient = t.plan("p", 0, "a", 3, 1, 7, 1000)
    assert ancient.verdict is Verdict.FENCED and ancient.outcome_unknown
    # an epoch this proxy never gave (its state was rebuilt from less than the client saw): fenced, outcome unknown
    never = t.plan("p", 99, "z", 0, 1, 7, 1000)
    assert never.verdict is Verdict.FENCED and never.outcome_unknown


def test_a_resend_is_a_duplicate_only_when_it_is_the_same_request() -> None:
    t = _table(window=3)
    for seq in range(0, 12, 2):
        _store(t, "p", None if seq == 0 else 0, "a", seq, 2, crc=100 + seq)
    dup = t.plan("p", 0, "a", 8, 2, 108, 1000)
    assert dup.verdict is Verdict.DUPLICATE and dup.original is not None
    assert dup.original.result() == storage.DLSN(1, 8, 0)
    assert t.plan("p", 0, "a", 8, 2, 999, 1000).verdict is Verdict.MISMATCH  # same sequences, other data
    assert t.plan("p", 0, "a", 8, 3, 108, 1000).verdict is Verdict.MISMATCH  # other boundaries
    assert t.plan("p", 0, "a", 9, 1, 108, 1000).verdict is Verdict.MISMATCH
    assert t.plan("p", 0, "a", 0, 2, 100, 1000).verdict is Verdict.STATE_LOST  # older than the window of 3
    ooo = t.plan("p", 0, "a", 14, 1, 1, 1000)
    assert ooo.verdict is Verdict.OUT_OF_ORDER and ooo.expected == 12


def test_expiry_and_eviction_forget_producers() -> None:
    t = _table(expiry_ms=10_000, max_producers=3)
    for i in range(5):
        _store(t, f"p{i}", None, "a", 0, now=1000 + i)
    assert len(t) == 3 and t.evicted == 2
    assert t.plan("p0", 0, "a", 1, 1, 7, 2000).verdict is Verdict.STATE_LOST  # evicted: the least recent
    assert t.plan("p4", 0, "a", 1, 1, 7, 2000).verdict is Verdict.STORE
    gone = t.plan("p4", 0, "a", 1, 1, 7, 1004 + 10_001)  # idle longer than the expiry
    assert gone.verdict is Verdict.STATE_LOST
    assert t.plan("p4", None, "b", 0, 1, 7, 1004 + 10_001).verdict is Verdict.STORE


def test_rebuild_reads_from_the_last_snapshot(zk_local_uri: str) -> None:
    """Many requests of several producers through a Stream, snapshots every 5 requests: the next owner's table
    equals the first's, and it replayed markers only from the last snapshot on."""
    conf = storage.Config(proxyDedupSnapshotInterval=5, zkSessionTimeoutSeconds=4)
    with storage.open_namespace(zk_local_uri, conf, client_id="127.0.0.1:1") as ns:
        s = Stream("snap", ns, conf)
        s.acquire(create=True)
        futs = []
        for i in range(23):
            pid = f"p{i % 3}"
            seq = i // 3
            req = ProducerRequest(pid, None if seq == 0 else 0, "inst", seq, i)
            got, dup, _epoch = s.write([b"%d" % i], req)
            assert not dup
            futs += got
        for f in futs:
            f.result(30)
        before = _state(s.table)
        s.release()
    with storage.open_namespace(zk_local_uri, conf, client_id="127.0.0.1:2") as ns2:
        s2 = Stream("snap", ns2, conf)
        s2.acquire(create=False)
        after = _state(s2.table)
        assert after == before
        with ns2.open_log("snap") as dlm:
            markers = [c for seg in dlm.log_segments() for c in dlm.control_records(seg) if c.payload.startswith(MAGIC)]
            snaps = [i for i, m in enumerate(markers) if b'"sc":' in m.payload]
            assert snaps[0] == 0 and len(snaps) >= 4  # on the first request, then every 5
            replayed = s2.table.rebuild(dlm)
        assert replayed == len(markers) - snaps[-1]
        s2.release()
    assert len(_records(zk_local_uri, "snap")) == 23


def _state(t: DedupTable) -> dict[str, tuple[int, str, int, list[tuple[int, int, int, storage.DLSN]]]]:
    out = {}
    for pid in sorted(t._producers):
        st = t._producers[pid]
        out[pid] = (st.epoch, st.instance, st.last, [(r.first, r.count, r.crc, r.dlsn.result()) for r in st.requests])
    return out


def test_five_thousand_producers_bounded_and_rebuilt(zk_local_uri: str) -> None:
    """5,000 producers write to one stream whose proxy keeps at most 4,000: the least recent are evicted, every
    producer keeps at most its window, the snapshot (written in pieces in the requests' entries) stays within its
    bound, and the next owner rebuilds the same table from the last complete snapshot on."""
    conf = storage.Config(
        proxyMaxProducersPerStream=4000,
        proxyDedupSnapshotInterval=1500,
        proxyProducerWindow=3,
        zkSessionTimeoutSeconds=4,
    )
    with storage.open_namespace(zk_local_uri, conf, client_id="127.0.0.1:1") as ns:
        s = Stream("many", ns, conf)
        s.acquire(create=True)
        futs = []
        for i in range(5000):
            for seq in range(2 if i % 10 == 0 else 1):  # some producers write twice
                req = ProducerRequest(f"producer-{i:05d}-{'x' * 20}", None if seq == 0 else 0, "inst", seq, i)
                futs += s.write([b"%d.%d" % (i, seq)], req)[0]
        for f in futs:
            f.result(60)
        t = s.table
        assert len(t) == 4000 and t.evicted == 1000
        assert all(len(p.requests) <= 3 for p in t._producers.values())
        assert t.snapshots_written >= 3
        before = _state(t)
        s.release()
    with storage.open_namespace(zk_local_uri, conf, client_id="127.0.0.1:2") as ns2:
        with ns2.open_log("many") as dlm:
            markers = [c for seg in dlm.log_segments() for c in dlm.control_records(seg) if c.payload.startswith(MAGIC)]
        pieces = [m for m in markers if b'"sc":' in m.payload]
        last_start = max(i for i, m in enumerate(pieces) if b'"k":0' in m.payload)
        snapshot_bytes = sum(len(m.payload) for m in pieces[last_start:])
        assert 4000 * 100 < snapshot_bytes <= 4000 * 400, snapshot_bytes  # ~ per producer: id, epoch, window
        s2 = Stream("many", ns2, conf)
        s2.acquire(create=False)
        assert _state(s2.table) == before
        s2.release()
