"""The proxy's RPCs against a real ``dlog proxy`` process (ZooKeeper + shared local path; the write path also on
ZooKeeper + RADOS), driven with the generated gRPC stub: writes and DLSNs, bulk partial failure, checksums, unknown
streams, bad input, create/delete/getOwner/handshake/heartbeat/truncate, idempotent producers (duplicates answer
the original DLSN and store nothing), and that every reader reads only the data records."""

from __future__ import annotations

import zlib

import storage
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.writes import MAX_PAYLOAD
from storage.formats.recordset import RecordSetWriter, encode_record_set
from tests.proxy.conftest import StartProxy, stub

T = 30  # RPC deadline, seconds


def _read_all(uri: str, name: str) -> list[storage.LogRecordWithDLSN]:
    with (
        storage.open_namespace(uri, create=False) as ns,
        ns.open_log(name) as dlm,
        dlm.open_reader(storage.DLSN.INITIAL) as r,
    ):
        return r.read_bulk(100_000, non_blocking=True)


def _arrow_values(uri: str, name: str) -> list[bytes]:
    with storage.open_namespace(uri, create=False) as ns, ns.open_log(name) as dlm:
        return [row["value"] for b in dlm.read_arrow() for row in b.to_pylist()]


def test_writes_dedup_and_readers(proxy_ns_uri: str, proxy_process: StartProxy) -> None:
    _proc, addr = proxy_process(proxy_ns_uri)
    ch, s = stub(addr)
    with ch:
        r = s.write(pb.WriteRequest(stream="s1", data=b"plain", ctx=pb.WriteContext(create_if_missing=True)), timeout=T)
        assert r.header.code == pb.SUCCESS, r
        d0 = storage.DLSN.deserialize(r.dlsn)
        ctx = pb.WriteContext(producer_id="p1", sequence=0, crc32=zlib.crc32(b"ab"))
        b1 = s.writeBulk(pb.BulkWriteRequest(stream="s1", data=[b"a", b"b"], ctx=ctx), timeout=T)
        assert b1.header.code == pb.SUCCESS, b1
        first = [storage.DLSN.deserialize(w.dlsn) for w in b1.write_responses]
        assert first[0] > d0 and first[1] == first[0].next()
        assert not any(w.duplicate for w in b1.write_responses)
        # the retry (a lost reply): the same DLSNs, duplicate=true, nothing stored
        b2 = s.writeBulk(pb.BulkWriteRequest(stream="s1", data=[b"a", b"b"], ctx=ctx), timeout=T)
        assert [w.dlsn for w in b2.write_responses] == [w.dlsn for w in b1.write_responses]
        assert all(w.duplicate for w in b2.write_responses)
        assert b1.header.producer_epoch == 0 and b1.header.max_inflight == 5, b1.header
        # an overlapping resend is not the same request: SEQUENCE_MISMATCH, definitive, nothing stored
        b3 = s.writeBulk(
            pb.BulkWriteRequest(
                stream="s1", data=[b"b", b"c"], ctx=pb.WriteContext(producer_id="p1", sequence=1, producer_epoch=0)
            ),
            timeout=T,
        )
        assert b3.header.code == pb.SEQUENCE_MISMATCH and not b3.header.outcome_unknown, b3
        nxt = s.writeBulk(
            pb.BulkWriteRequest(
                stream="s1", data=[b"c"], ctx=pb.WriteContext(producer_id="p1", sequence=2, producer_epoch=0)
            ),
            timeout=T,
        )
        assert nxt.header.code == pb.SUCCESS and not nxt.write_responses[0].duplicate, nxt
        # a gap: OUT_OF_ORDER_SEQUENCE with the next expected sequence; nothing stored
        gap = s.write(
            pb.WriteRequest(
                stream="s1", data=b"e", ctx=pb.WriteContext(producer_id="p1", sequence=5, producer_epoch=0)
            ),
            timeout=T,
        )
        assert gap.header.code == pb.OUT_OF_ORDER_SEQUENCE and gap.header.expected_sequence == 3, gap
        # a producer the proxy does not know, claiming an epoch: its state is lost (outcome unknown)
        unknown = s.write(
            pb.WriteRequest(
                stream="s1", data=b"u", ctx=pb.WriteContext(producer_id="p2", sequence=7, producer_epoch=3)
            ),
            timeout=T,
        )
        assert unknown.header.code == pb.PRODUCER_STATE_LOST and unknown.header.outcome_unknown, unknown
        # a new instance must start at sequence 0
        bad_start = s.write(
            pb.WriteRequest(stream="s1", data=b"u", ctx=pb.WriteContext(producer_id="p2", sequence=7)), timeout=T
        )
        assert bad_start.header.code == pb.SEQUENCE_MISMATCH, bad_start
        hs0 = s.handshake(pb.ClientInfo(), timeout=T)
        assert hs0.max_inflight == 5 and hs0.max_request_records > 0 and hs0.max_request_bytes > 1_000_000
        hs = s.handshake(pb.ClientInfo(get_ownerships=True), timeout=T)
        assert dict(hs.ownerships) == {"s1": addr} and hs.server_status == pb.WRITE_AND_ACCEPT
        owner = s.getOwner(pb.StreamRequest(stream="s1"), timeout=T)
        assert owner.header.location == addr
        hb = s.heartbeat(
            pb.HeartbeatRequest(stream="s1", options=pb.HeartbeatOptions(send_heart_beat_to_reader=True)), timeout=T
        )
        assert hb.header.code == pb.SUCCESS, hb
    values = [b"plain", b"a", b"b", b"c"]
    recs = _read_all(proxy_ns_uri, "s1")
    assert [r.payload for r in recs] == values
    assert [r.sequence_id for r in recs] == [0, 1, 2, 3]
    assert _arrow_values(proxy_ns_uri, "s1") == values
    assert recs[1].dlsn == first[0]
    assert all(recs[i].txid <= recs[i + 1].txid for i in range(3))


def test_bad_input_gets_a_status_never_a_crash(zk_local_uri: str, proxy_process: StartProxy) -> None:
    proc, addr = proxy_process(zk_local_uri)
    ch, s = stub(addr)
    with ch:
        missing = s.write(pb.WriteRequest(stream="nope", data=b"x"), timeout=T)
        assert missing.header.code == pb.LOG_NOT_FOUND, missing
        bad_name = s.write(pb.WriteRequest(stream="a b", data=b"x"), timeout=T)
        assert bad_name.header.code == pb.INVALID_STREAM_NAME, bad_name
        reserved = s.write(pb.WriteRequest(stream=".proxies", data=b"x"), timeout=T)
        assert reserved.header.code == pb.INVALID_STREAM_NAME, reserved
        crc = s.write(
            pb.WriteRequest(stream="c", data=b"x", ctx=pb.WriteContext(create_if_missing=True, crc32=1)), timeout=T
        )
        assert crc.header.code == pb.CHECKSUM_FAILED, crc
        big = s.write(
            pb.WriteRequest(stream="c", data=b"x" * (MAX_PAYLOAD + 1), ctx=pb.WriteContext(create_if_missing=True)),
            timeout=T,
        )
        assert big.header.code == pb.TOO_LARGE_RECORD, big
        # a request is stored whole or not at all: one too-large record refuses the whole bulk, nothing stored
        bulk = s.writeBulk(
            pb.BulkWriteRequest(
                stream="c",
                data=[b"one", b"y" * (MAX_PAYLOAD + 1), b"three"],
                ctx=pb.WriteContext(create_if_missing=True, producer_id="pp", sequence=0),
            ),
            timeout=T,
        )
        assert bulk.header.code == pb.TOO_LARGE_RECORD and not bulk.write_responses, bulk
        assert not bulk.header.outcome_unknown
        # more than one entry holds: refused whole
        over = s.writeBulk(
            pb.BulkWriteRequest(stream="c", data=[b"z" * 600_000] * 2, ctx=pb.WriteContext(create_if_missing=True)),
            timeout=T,
        )
        assert over.header.code == pb.BAD_REQUEST and "one entry" in over.header.err_msg, over
        empty = s.writeBulk(pb.BulkWriteRequest(stream="c", data=[]), timeout=T)
        assert empty.header.code == pb.BAD_REQUEST
        trunc = s.truncate(pb.TruncateRequest(stream="c", dlsn="not base64!"), timeout=T)
        assert trunc.header.code == pb.BAD_REQUEST, trunc
        neg = s.write(
            pb.WriteRequest(stream="c", data=b"x", ctx=pb.WriteContext(producer_id="q", sequence=-1)), timeout=T
        )
        assert neg.header.code == pb.BAD_REQUEST
        long_id = s.write(pb.WriteRequest(stream="c", data=b"x", ctx=pb.WriteContext(producer_id="q" * 300)), timeout=T)
        assert long_id.header.code == pb.BAD_REQUEST
        bad_regex = None
        try:
            s.handshake(pb.ClientInfo(get_ownerships=True, stream_name_regex="("), timeout=T)
        except Exception as e:  # grpc.RpcError INVALID_ARGUMENT
            bad_regex = e
        assert bad_regex is not None
        ok = s.write(pb.WriteRequest(stream="c", data=b"still fine", ctx=pb.WriteContext(create_if_missing=True)))
        assert ok.header.code == pb.SUCCESS
    assert proc.poll() is None
    assert [r.payload for r in _read_all(zk_local_uri, "c")] == [b"still fine"]


def test_create_delete_truncate_owner(zk_local_uri: str, proxy_process: StartProxy) -> None:
    _proc, addr = proxy_process(zk_local_uri)
    ch, s = stub(addr)
    with ch:
        assert s.create(pb.StreamRequest(stream="made"), timeout=T).header.code == pb.SUCCESS
        assert s.create(pb.StreamRequest(stream="made"), timeout=T).header.code == pb.LOG_EXISTS
        assert s.getOwner(pb.StreamRequest(stream="made"), timeout=T).header.location == ""
        dl = [s.write(pb.WriteRequest(stream="made", data=b"r%d" % i), timeout=T).dlsn for i in range(3)]
        t = s.truncate(pb.TruncateRequest(stream="made", dlsn=dl[1]), timeout=T)
        assert t.header.code == pb.SUCCESS, t
        assert s.release(pb.StreamRequest(stream="made"), timeout=T).header.code == pb.SUCCESS
        assert dict(s.handshake(pb.ClientInfo(get_ownerships=True), timeout=T).ownerships) == {}
        assert s.delete(pb.StreamRequest(stream="made"), timeout=T).header.code == pb.SUCCESS
        with storage.open_namespace(zk_local_uri, create=False) as ns:
            assert not ns.log_exists("made")
        assert s.delete(pb.StreamRequest(stream="made"), timeout=T).header.code == pb.LOG_NOT_FOUND


def test_record_sets(zk_local_uri: str, proxy_process: StartProxy) -> None:
    """A LogRecordSet travels as one payload (DistributedLog's record set writes): its members are read as records;
    a set of n members takes n sequences of its producer; a resend of the same set is a duplicate with its
    DLSN; anything else overlapping it (a member alone, a shifted set) is SEQUENCE_MISMATCH; a malformed set (its
    header or its body) is refused with INVALID_ENVELOPED_ENTRY and nothing is written."""
    _p, addr = proxy_process(zk_local_uri, conf={"proxyCreateStreamOnWrite": True})
    rs = RecordSetWriter()
    for m in (b"m0", b"m1", b"m2"):
        rs.write(m)
    ch, s = stub(addr)
    with ch:
        ctx = pb.WriteContext(is_record_set=True, producer_id="rs", sequence=0)
        ok = s.write(pb.WriteRequest(stream="sets", data=rs.to_bytes(), ctx=ctx), timeout=T)
        assert ok.header.code == pb.SUCCESS, ok
        dup = s.write(pb.WriteRequest(stream="sets", data=rs.to_bytes(), ctx=ctx), timeout=T)
        assert dup.duplicate and dup.dlsn == ok.dlsn
        one = s.write(
            pb.WriteRequest(stream="sets", data=b"m1", ctx=pb.WriteContext(producer_id="rs", sequence=1)), timeout=T
        )
        assert one.header.code == pb.SEQUENCE_MISMATCH, one

        def write_set(members: list[bytes], sequence: int) -> pb.WriteResponse:
            ctx = pb.WriteContext(is_record_set=True, producer_id="rs", sequence=sequence)
            resp: pb.WriteResponse = s.write(
                pb.WriteRequest(stream="sets", data=encode_record_set(members), ctx=ctx), timeout=T
            )
            return resp

        assert write_set([b"m1", b"m2"], 1).header.code == pb.SEQUENCE_MISMATCH
        assert write_set([b"m2", b"m3"], 2).header.code == pb.SEQUENCE_MISMATCH
        # a valid header, a body that is not what it declares (a member running past the data): refused
        broken = bytearray(encode_record_set([b"m3", b"m4"]))
        broken[-3] = 0x7F  # the second member's length
        refused = s.write(
            pb.WriteRequest(stream="sets", data=bytes(broken), ctx=pb.WriteContext(is_record_set=True)), timeout=T
        )
        assert refused.header.code == pb.INVALID_ENVELOPED_ENTRY and "member" in refused.header.err_msg, refused
        ooo = s.write(pb.WriteRequest(stream="sets", data=b"m9", ctx=pb.WriteContext(producer_id="rs", sequence=9)))
        assert ooo.header.code == pb.OUT_OF_ORDER_SEQUENCE and ooo.header.expected_sequence == 3, ooo
        bad = s.write(
            pb.WriteRequest(stream="sets", data=b"garbage!", ctx=pb.WriteContext(is_record_set=True)), timeout=T
        )
        assert bad.header.code == pb.INVALID_ENVELOPED_ENTRY, bad
        two = s.writeBulk(
            pb.BulkWriteRequest(stream="sets", data=[rs.to_bytes()] * 2, ctx=pb.WriteContext(is_record_set=True)),
            timeout=T,
        )
        assert two.header.code == pb.BAD_REQUEST
        after = s.write(pb.WriteRequest(stream="sets", data=b"after"), timeout=T)
        assert after.header.code == pb.SUCCESS
    recs = _read_all(zk_local_uri, "sets")
    assert [r.payload for r in recs] == [b"m0", b"m1", b"m2", b"after"]
    assert recs[0].dlsn == storage.DLSN.deserialize(ok.dlsn)
