"""A stalled stream beside a healthy one on the same proxy: the stalled stream's requests hold at most
``proxyMaxWaitingRequestsPerStream`` of the proxy's RPC threads (the rest are answered OVER_CAPACITY at once), so
the healthy stream is served while they wait. The stall is the proxy's ``stall_writes`` failpoint (every write of
that stream held until its deadline, as a stuck segment store would hold it)."""

from __future__ import annotations

import grpc

import storage
from dl_proxy.proto import distributedlog_pb2 as pb
from tests.proxy.conftest import StartProxy, stub


def test_a_stalled_stream_does_not_starve_the_others(zk_local_uri: str, proxy_process: StartProxy) -> None:
    with storage.open_namespace(zk_local_uri) as ns:
        ns.create_log("stuck")
        ns.create_log("fine")
    _p, addr = proxy_process(
        zk_local_uri,
        "--threads",
        "8",
        conf={"proxyMaxWaitingRequestsPerStream": 4},
        env={"DLOG_PROXY_FAILPOINT": "stall_writes:stuck"},
    )
    ch, s = stub(addr)
    with ch:
        stalled = [s.write.future(pb.WriteRequest(stream="stuck", data=b"s%d" % i), timeout=15) for i in range(20)]
        # the healthy stream, with a deadline shorter than the stalled requests': served while they wait
        ok = s.write(pb.WriteRequest(stream="fine", data=b"ok"), timeout=10)
        assert ok.header.code == pb.SUCCESS, ok
        codes = [_code(f) for f in stalled]
    assert codes.count(pb.OVER_CAPACITY) >= 16, codes  # at most 4 waited
    # a waiting request is answered just before its deadline; on a busy machine that answer may arrive after it
    assert all(c in (pb.OVER_CAPACITY, pb.STREAM_NOT_READY, "deadline") for c in codes), codes


def _code(f: grpc.Future) -> int | str:
    """The request's status code, or ``"deadline"`` when its answer came after the caller's deadline."""
    try:
        return int(f.result().header.code)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
        return "deadline"
