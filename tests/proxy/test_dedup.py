"""Idempotent producers across owners: the dedup state lives in the log (markers and snapshots) and the next owner
rebuilds it. Real proxies (release, SIGKILL, the lost-reply failpoint) and the table itself on a real log."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import grpc
import pytest

import storage
from dl_proxy.dedup import MAGIC, DedupTable
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.stream import Stream
from tests.proxy.conftest import StartProxy, stub

T = 30
RETRY_CODES = (pb.FOUND, pb.STREAM_UNAVAILABLE, pb.STREAM_NOT_READY, pb.SERVICE_UNAVAILABLE)


R = TypeVar("R", pb.WriteResponse, pb.BulkWriteResponse)


def until_served(call: Callable[[], R], what: str, deadline_s: float = 60.0) -> R:
    """Call until the answer is not a redirect / unavailable (the old owner's session may still hold the lock)."""
    end = time.monotonic() + deadline_s
    last = ""
    while True:
        try:
            r = call()
            last = f"{r.header.code} {r.header.err_msg} {r.header.location}"
            if r.header.code not in RETRY_CODES:
                return r
        except grpc.RpcError as e:
            if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            last = str(e.code())
        assert time.monotonic() < end, f"{what}: still not served, last answer: {last}"
        time.sleep(0.1)


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


def _table(window: int = 1000, expiry_ms: int = 60_000, interval: int = 1000) -> DedupTable:
    return DedupTable(window=window, expiry_ms=expiry_ms, snapshot_interval=interval)


def test_window_and_expiry() -> None:
    from concurrent.futures import Future

    t = _table(window=3, expiry_ms=10_000)
    f: Future[storage.DLSN] = Future()
    f.set_result(storage.DLSN(1, 5, 1))
    for seq in range(6):
        assert t.plan("p", seq, 1, 1000).error is None
        t.stored("p", seq, 1, f, 1000, t.marker("p", seq, 1, 1000, 10_000))
    plan = t.plan("p", 1, 1, 2000)  # older than the window: denied, not stored again
    assert plan.duplicates == {1: None}
    assert plan.duplicates.keys() == {1}
    kept = t.plan("p", 4, 2, 2000).duplicates
    assert set(kept) == {4, 5} and all(v is not None for v in kept.values())
    gone = t.plan("p", 6, 1, 1000 + 10_001)  # idle longer than the expiry: unknown, must restart at 0
    assert gone.error == "out_of_order" and gone.expected == 0
    assert t.plan("p", 0, 1, 1000 + 10_001).error is None


def test_rebuild_reads_from_the_last_snapshot(zk_local_uri: str) -> None:
    """Many batches of several producers through a Stream, snapshots every 5 batches: the next owner's table
    equals the first's, and it read markers only from the last snapshot on."""
    conf = storage.Config(proxyDedupSnapshotInterval=5, zkSessionTimeoutSeconds=4)
    with storage.open_namespace(zk_local_uri, conf, client_id="127.0.0.1:1") as ns:
        s = Stream("snap", ns, conf)
        s.acquire(create=True)
        futs = []
        for i in range(23):
            pid = f"p{i % 3}"
            seq = i // 3
            futs += [f for f, _d in s.write([(seq, b"%d" % i)], pid, seq, 1)]
        for f in futs:
            assert f is not None
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
            snaps = [i for i, m in enumerate(markers) if b'"snap"' in m.payload]
            assert snaps[0] == 0 and len(snaps) >= 4  # on the first batch, then every 5
            replayed = s2.table.rebuild(dlm)
        assert replayed == len(markers) - snaps[-1]
        s2.release()
    assert len(_records(zk_local_uri, "snap")) == 23


def _state(t: DedupTable) -> dict[str, tuple[int, list[tuple[int, int, storage.DLSN]]]]:
    out = {}
    for pid in sorted(t._producers):
        st = t._producers[pid]
        out[pid] = (st.last, [(b.first, b.count, b.dlsn.result()) for b in st.window])
    return out
