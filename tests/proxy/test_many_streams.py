"""Many streams through the proxies: ``writeMulti`` (several streams' requests in one call, each answered alone),
the client packing the batches of many streams into such calls, streams acquired side by side, a stopped proxy's
streams taken over by the other, and idle streams released (``proxyStreamIdleSeconds``) and acquired again with
their producers' state: every record once, in order (the history checker), on real ``dlog proxy`` processes."""

from __future__ import annotations

import re
import time
import zlib
from concurrent.futures import Future
from pathlib import Path

import storage
from dl_proxy import ProxyClient
from dl_proxy.proto import distributedlog_pb2 as pb
from tests.proxy._fanin import check_history, final_read
from tests.proxy.conftest import ProxyProcess, StartProxy, stub
from tools.history import HistoryRecorder

T = 30  # RPC deadline, seconds


def _bulk(stream: str, data: list[bytes], producer_id: str = "", sequence: int = 0) -> pb.BulkWriteRequest:
    crc = 0
    for d in data:
        crc = zlib.crc32(d, crc)
    ctx = pb.WriteContext(crc32=crc, create_if_missing=True, producer_id=producer_id, sequence=sequence)
    return pb.BulkWriteRequest(stream=stream, data=data, ctx=ctx)


def test_write_multi_answers_each_stream_alone(zk_local_uri: str, proxy_process: StartProxy) -> None:
    _proc, addr = proxy_process(zk_local_uri)
    ch, s = stub(addr)
    with ch:
        ok = _bulk("m1", [b"a", b"b"], producer_id="p", sequence=0)
        bad_crc = pb.BulkWriteRequest(stream="m2", data=[b"x"], ctx=pb.WriteContext(crc32=1, create_if_missing=True))
        bad_name = _bulk("bad/../name", [b"y"])
        third = _bulk("m3", [b"c"], producer_id="p", sequence=0)
        got = s.writeMulti(pb.MultiWriteRequest(requests=[ok, bad_crc, bad_name, third]), timeout=T)
        codes = [r.header.code for r in got.responses]
        assert codes[0] == pb.SUCCESS and codes[3] == pb.SUCCESS, got
        assert codes[1] == pb.CHECKSUM_FAILED and not got.responses[1].header.outcome_unknown, got
        assert codes[2] in (pb.BAD_REQUEST, pb.INVALID_STREAM_NAME), got
        first = [w.dlsn for w in got.responses[0].write_responses]
        assert len(first) == 2 and not any(w.duplicate for w in got.responses[0].write_responses)
        # the same call again (a lost reply): the stored requests are duplicates with their DLSNs, nothing stored
        again = s.writeMulti(pb.MultiWriteRequest(requests=[ok, third]), timeout=T)
        assert [w.dlsn for w in again.responses[0].write_responses] == first
        assert all(w.duplicate for r in again.responses for w in r.write_responses), again
        # a stream twice in one call: refused whole, nothing stored
        twice = s.writeMulti(pb.MultiWriteRequest(requests=[_bulk("m4", [b"1"]), _bulk("m4", [b"2"])]), timeout=T)
        assert {r.header.code for r in twice.responses} == {pb.BAD_REQUEST}, twice
        # a bad token would be refused per request too (no token configured here: nothing to check)
    with storage.open_namespace(zk_local_uri, create=False) as ns:
        assert not ns.log_exists("m2") and not ns.log_exists("m4")
        for name, want in (("m1", [b"a", b"b"]), ("m3", [b"c"])):
            with ns.open_log(name) as dlm, dlm.open_reader(storage.DLSN.INITIAL) as r:
                assert [x.payload for x in r.read_bulk(100, non_blocking=True)] == want


def _calls(client: ProxyClient, method: str) -> float:
    m = re.search(rf'dl_proxy_client_calls_total{{method="{method}"}} ([0-9.e+]+)', client.metrics_text())
    return float(m.group(1)) if m else 0.0


def _write_round(
    client: ProxyClient, rec: HistoryRecorder, streams: list[str], tag: str, seq: dict[str, int]
) -> list[Future[storage.DLSN]]:
    futures = []
    for name in streams:
        value = f"{name}-{tag}"
        op = value
        rec.invoke(op, "write", value, log=name, producer=client.producer_id, seq=seq[name])
        seq[name] += 1
        f = client.write(name, value.encode())

        def done(f: Future[storage.DLSN], op: str = op) -> None:
            e = f.exception()
            if e is None:
                rec.ok(op, dlsn=f.result())
            else:
                rec.fail(op, error=e, definite=not getattr(e, "outcome_unknown", True))

        f.add_done_callback(done)
        futures.append(f)
    return futures


def test_many_streams_in_few_calls_failover_and_idle_release(
    zk_local_uri: str, proxy_process: StartProxy, proxy_processes: list[ProxyProcess], tmp_path: Path
) -> None:
    """300 streams on two proxies from one client: the client sends them in writeMulti calls; one proxy stops
    (SIGTERM: it releases its streams side by side) and the other takes them all; the proxies then release the
    idle streams after ``proxyStreamIdleSeconds`` and a later round acquires them again with the producers'
    state (a resend of the last request would be a duplicate); the history checker finds every acknowledged
    record once and in each stream's order."""
    conf = {"proxyStreamIdleSeconds": 2, "proxyCreateStreamOnWrite": True}
    p1, a1 = proxy_process(zk_local_uri, conf=conf)
    _p2, a2 = proxy_process(zk_local_uri, conf=conf)
    streams = [f"many-{i:03d}" for i in range(300)]
    history = tmp_path / "history"
    seq = dict.fromkeys(streams, 0)
    with HistoryRecorder(history, "client") as rec, ProxyClient(proxies=[a1, a2], timeout_s=120) as client:
        for r in range(2):
            for f in _write_round(client, rec, streams, f"r{r}", seq):
                f.result(timeout=120)
        multi = _calls(client, "writeMulti")
        singles = _calls(client, "write") + _calls(client, "writeBulk")
        assert multi >= 2, client.metrics_text()
        assert multi + singles < len(streams), f"{multi} writeMulti + {singles} single calls for {len(streams)} streams"

        p1.terminate()  # graceful: releases every stream it owns, side by side
        p1.wait(timeout=60)
        for f in _write_round(client, rec, streams, "after-stop", seq):
            f.result(timeout=120)

        # every stream idle for proxyStreamIdleSeconds is released by the remaining proxy
        deadline = time.monotonic() + 60
        released = False
        while time.monotonic() < deadline and not released:
            time.sleep(0.5)
            released = _owned(a2) == 0
        assert released, proxy_processes[1].log_text()[-3000:]
        for f in _write_round(client, rec, streams, "after-idle", seq):
            f.result(timeout=120)
    counts = final_read(zk_local_uri, streams, history)
    assert set(counts.values()) == {4}, counts
    report = check_history(history)
    assert report.ok, report


def _owned(address: str) -> int:
    ch, s = stub(address)
    with ch:
        info = s.handshake(pb.ClientInfo(get_ownerships=True), timeout=T)
        return len(info.ownerships)


def test_client_falls_back_to_one_call_per_stream_on_a_proxy_without_write_multi(
    zk_local_uri: str, proxy_process: StartProxy
) -> None:
    """A proxy of a version without ``writeMulti`` answers it UNIMPLEMENTED: the client sends those batches one
    call each, stored once, and sends no further writeMulti to that proxy."""
    _proc, addr = proxy_process(
        zk_local_uri, conf={"proxyCreateStreamOnWrite": True}, env={"DLOG_PROXY_FAILPOINT": "no_write_multi"}
    )
    streams = [f"old-{i:02d}" for i in range(40)]
    with ProxyClient(proxies=[addr], timeout_s=60) as client:
        tried = 0.0
        for r in range(3):
            futures = [client.write(name, f"{name}-{r}".encode()) for name in streams]
            for f in futures:
                f.result(timeout=60)
            if r == 0:
                tried = _calls(client, "writeMulti")
        assert tried >= 1 and _calls(client, "writeMulti") == tried, client.metrics_text()
        assert _calls(client, "write") >= 3 * len(streams), client.metrics_text()
    with storage.open_namespace(zk_local_uri, create=False) as ns:
        for name in streams:
            with ns.open_log(name) as dlm, dlm.open_reader(storage.DLSN.INITIAL) as rd:
                got = [x.payload for x in rd.read_bulk(100, non_blocking=True)]
            assert got == [f"{name}-{r}".encode() for r in range(3)], (name, got)
