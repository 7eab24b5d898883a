"""The gateway object in-process: every operation of :mod:`jvm_shim.protocol` through ``Gateway.call``,
exactly as py4j invokes it for a JVM (``call(op, args, data)`` -> response bytes), on an embedded namespace.

Covers: the op table served in full, records written in batches and read back with exact DLSNs, txids,
sequence ids and payloads (and the same as a Python reader sees), pipelined write/await on two threads,
several logs at once, read waits, shared and per-call namespaces, every error as the protocol's envelope
with the storage class name (ownership, truncation, end of stream, bad input, closed handles, unexpected
exceptions), and ``close()`` releasing the write lock.
"""

from __future__ import annotations

import json
import logging
import queue
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import storage
from jvm_shim import protocol
from jvm_shim.gateway import Gateway
from storage import DLSN, LogRecord
from storage.common import stats
from tests.storage.observe import GENEROUS_S, finishes, wait_parked_in

#: Small, prompt settings (DistributedLog's test base config style): no lock waits, every write transmitted.
CONF: dict[str, object] = {
    "lockTimeoutSeconds": 0,
    "writerOutputBufferSize": 0,
    "readAheadWaitTime": 50,
    "logSegmentRollingMinutes": 0,
}


class Client:
    """Calls a gateway the way py4j does, decoding responses with the protocol's helpers."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw

    def raw(self, op: str, data: bytes = b"", **args: Any) -> bytes:
        out = self.gw.call(op, json.dumps(args), data)
        assert isinstance(out, bytes)
        return out

    def __call__(self, op: str, data: bytes = b"", **args: Any) -> dict[str, Any]:
        return protocol.parse_response(self.raw(op, data, **args))[0]

    def data(self, op: str, data: bytes = b"", **args: Any) -> tuple[dict[str, Any], bytes]:
        return protocol.parse_response(self.raw(op, data, **args))

    def error(self, op: str, data: bytes = b"", **args: Any) -> dict[str, Any]:
        """The error envelope of a call that must fail."""
        return envelope(self.raw(op, data, **args))

    # shortcuts
    def open_log(self, name: str, ns: int | None = None, uri: str | None = None) -> int:
        if ns is None:
            assert uri is not None
            ns = self("namespace.open", uri=uri)["ns"]
        return int(self("log.open", ns=ns, name=name)["log"])

    def write(self, writer: int, records: list[LogRecord]) -> int:
        res = self("writer.write", protocol.encode_records(records), writer=writer)
        assert res["count"] == len(records)
        return int(res["batch"])

    def await_batch(self, writer: int, batch: int) -> list[DLSN]:
        res, data = self.data("writer.await", writer=writer, batch=batch)
        dlsns = protocol.decode_dlsns(data)
        assert res["count"] == len(dlsns)
        return dlsns

    def read_all(self, reader: int, n: int, chunk: int = 256) -> list[tuple[DLSN, int, int, bytes]]:
        out: list[tuple[DLSN, int, int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            res, data = self.data("reader.read", reader=reader, max=chunk, waitMs=200)
            got = list(protocol.decode_read(data))
            assert res["count"] == len(got) <= chunk
            out.extend(got)
        return out


def envelope(raw: bytes) -> dict[str, Any]:
    assert raw[:1] == bytes([protocol.ERROR]), f"not an error response: {raw[:200]!r}"
    doc = json.loads(raw[1:].decode())
    assert {"class", "code", "retriable", "message"} <= set(doc) <= {"class", "code", "retriable", "message", "details"}
    return dict(doc)


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return f"distributedlog-local://{tmp_path / 'ns'}"


@pytest.fixture
def gw(uri: str) -> Iterator[Gateway]:
    gateway = Gateway(uri, CONF)
    try:
        yield gateway
    finally:
        gateway.close()


@pytest.fixture
def c(gw: Gateway) -> Client:
    return Client(gw)


@pytest.fixture
def py_ns(uri: str) -> Iterator[storage.Namespace]:
    """The same namespace opened by plain Python (another client of the same logs)."""
    ns = storage.open_namespace(uri, CONF)
    try:
        yield ns
    finally:
        ns.close()


def records(first_txid: int, n: int, step: int = 3) -> list[LogRecord]:
    out = []
    for i in range(n):
        payload = b"" if i % 97 == 0 else bytes(range(256))[: i % 256] + f"record-{i}".encode()
        out.append(LogRecord(first_txid + i * step, payload))
    return out


# --- the op table -------------------------------------------------------------------------------
def test_every_operation_of_the_protocol_is_served(gw: Gateway) -> None:
    doc = protocol.__doc__ or ""
    table = set(re.findall(r"^``([a-zA-Z]+\.[a-zA-Z]+)``", doc, flags=re.MULTILINE))
    assert len(table) == 28
    assert set(gw.operations) == table


def test_ping_and_shutdown(c: Client, gw: Gateway) -> None:
    assert c("gateway.ping") == {"version": storage.__version__}
    assert c.gw.call("gateway.ping", None, None)[:1] == bytes([protocol.OK])  # null args and data from Java
    assert not gw.shutdown_requested.is_set()
    assert c("gateway.shutdown") == {}
    assert gw.shutdown_requested.is_set()


# --- writing and reading ------------------------------------------------------------------------
def test_1000_records_in_batches_read_back_exactly(c: Client, uri: str, py_ns: storage.Namespace) -> None:
    log = c.open_log("events", uri=uri)
    writer = c("writer.open", log=log)["writer"]
    recs = records(1000, 1000)
    # pipelined: every batch submitted before any is awaited; batches are numbered 1, 2, ... in order
    batches = [c.write(writer, recs[i : i + 100]) for i in range(0, 1000, 100)]
    assert batches == list(range(1, 11))
    dlsns = [d for b in batches for d in c.await_batch(writer, b)]
    assert len(dlsns) == 1000
    assert dlsns == sorted(dlsns) and len(set(dlsns)) == 1000
    assert c("writer.flush", writer=writer) == {"dlsn": str(dlsns[-1])}

    reader = c("reader.open", log=log, dlsn="1,0,0")["reader"]
    got = c.read_all(reader, 1000)
    assert [g[0] for g in got] == dlsns
    assert [g[1] for g in got] == [r.txid for r in recs]
    assert [g[2] for g in got] == list(range(1000))  # sequence ids contiguous from 0
    assert [g[3] for g in got] == [r.payload for r in recs]
    # nothing more now: waitMs 0 answers at once with no records
    assert c.data("reader.read", reader=reader, max=10, waitMs=0) == ({"count": 0}, b"")

    # a plain Python reader of the same log sees the same records
    with py_ns.open_log("events") as dlm, dlm.open_reader(DLSN.INITIAL) as r:
        py = r.read_bulk(1000, non_blocking=True)
        while len(py) < 1000:
            more = r.read_bulk(1000 - len(py))
            assert more, "python reader stalled"
            py.extend(more)
    assert [(x.dlsn, x.txid, x.sequence_id, x.payload) for x in py] == got

    # positioned by transaction id: the first record with txid >= 1000 + 500 * 3
    by_txid = c("reader.open", log=log, txid=1000 + 500 * 3)["reader"]
    first = c.read_all(by_txid, 1, chunk=1)[0]
    assert first == got[500]
    by_txid = c("reader.open", log=log, txid=1000 + 500 * 3 - 1)["reader"]
    assert c.read_all(by_txid, 1, chunk=1)[0] == got[500]

    assert c("log.lastDLSN", log=log) == {"dlsn": str(dlsns[-1])}
    assert c("log.firstDLSN", log=log) == {"dlsn": str(dlsns[0])}
    assert c("log.lastTxId", log=log) == {"txid": recs[-1].txid}
    assert c("log.recordCount", log=log) == {"count": 1000}
    assert c("log.recordCount", log=log, **{"from": str(dlsns[500])}) == {"count": 500}
    assert c("log.isEndOfStreamMarked", log=log) == {"eos": False}
    c("reader.close", reader=reader)
    c("writer.close", writer=writer)


def test_write_and_await_pipelined_on_two_threads(c: Client, uri: str) -> None:
    log = c.open_log("pipelined", uri=uri)
    writer = c("writer.open", log=log)["writer"]
    submitted: queue.Queue[int | None] = queue.Queue()
    acked: list[DLSN] = []
    errors: list[BaseException] = []

    def awaiter() -> None:
        try:
            while (b := submitted.get()) is not None:
                acked.extend(c.await_batch(writer, b))
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=awaiter)
    t.start()
    for k in range(50):
        submitted.put(c.write(writer, [LogRecord(k * 20 + i + 1, b"p%d" % (k * 20 + i)) for i in range(20)]))
    submitted.put(None)
    t.join(60)
    assert not errors and not t.is_alive()
    assert len(acked) == 1000 and acked == sorted(acked)
    c("writer.close", writer=writer)
    assert c("log.recordCount", log=log) == {"count": 1000}


def test_several_logs_on_several_threads(c: Client, uri: str) -> None:
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            log = c.open_log(name, uri=uri)
            writer = c("writer.open", log=log)["writer"]
            dlsns: list[DLSN] = []
            for k in range(5):
                dlsns += c.await_batch(writer, c.write(writer, records(k * 1000 + 1, 40, step=1)))
            c("writer.flush", writer=writer)
            reader = c("reader.open", log=log, dlsn="1,0,0")["reader"]
            assert [g[0] for g in c.read_all(reader, 200)] == dlsns
            c("log.close", log=log)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(f"log-{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    ns = c("namespace.open", uri=uri)["ns"]
    assert c("namespace.getLogs", ns=ns) == {"logs": [f"log-{i}" for i in range(6)]}


def _waits(log: str) -> int:
    """Blocking waits of readers of ``log`` in this process so far (the reader stats' wait histogram)."""
    return sum(stats.reader_stats(log).wait.counts)


def _wait_for_records(t: threading.Thread) -> None:
    """Until the read on ``t`` is really waiting: parked in its reader's wait for a commit."""
    wait_parked_in(t, "wait", "storage/log/cursor.py")


def test_read_waits(c: Client, uri: str) -> None:
    log = c.open_log("waits", uri=uri)
    writer = c("writer.open", log=log)["writer"]
    reader = c("reader.open", log=log, dlsn="1,0,0")["reader"]
    waits = _waits("waits")
    assert c("reader.read", reader=reader, max=5, waitMs=0) == {"count": 0}
    assert _waits("waits") == waits  # waitMs 0 answers at once: no wait at all
    t0 = time.monotonic()
    assert finishes(lambda: c("reader.read", reader=reader, max=5, waitMs=300), "a read with waitMs 300") == {
        "count": 0
    }
    assert time.monotonic() - t0 >= 0.29  # it waited the time asked (in readAheadWaitTime slices), then answered
    assert _waits("waits") > waits

    # waitMs -1: until a record arrives
    result: list[tuple[dict[str, Any], bytes]] = []
    t = threading.Thread(target=lambda: result.append(c.data("reader.read", reader=reader, max=5, waitMs=-1)))
    t.start()
    _wait_for_records(t)
    d = c.await_batch(writer, c.write(writer, [LogRecord(7, b"hello")]))
    assert not result  # nothing is visible before the writer commits
    c("writer.flush", writer=writer)
    t.join(GENEROUS_S)
    assert not t.is_alive()
    assert [(g[0], g[1], g[3]) for g in protocol.decode_read(result[0][1])] == [(d[0], 7, b"hello")]

    # reader.close ends a waiting read with ReadCancelledError
    raw: list[bytes] = []
    t = threading.Thread(target=lambda: raw.append(c.raw("reader.read", reader=reader, max=5, waitMs=-1)))
    t.start()
    _wait_for_records(t)
    assert finishes(lambda: c("reader.close", reader=reader), "reader.close of a waiting reader") == {}
    t.join(GENEROUS_S)
    assert not t.is_alive()
    assert envelope(raw[0])["class"] == "ReadCancelledError"
    assert c.error("reader.read", reader=reader, max=1)["class"] == "AlreadyClosedError"


def test_mark_end_of_stream(c: Client, uri: str) -> None:
    log = c.open_log("sealed", uri=uri)
    writer = c("writer.open", log=log)["writer"]
    d = c.await_batch(writer, c.write(writer, [LogRecord(1, b"a"), LogRecord(2, b"b")]))
    eos = c("writer.markEndOfStream", writer=writer)["dlsn"]
    assert DLSN.parse(eos) > d[-1]
    assert c("log.isEndOfStreamMarked", log=log) == {"eos": True}
    err = c.error("writer.write", protocol.encode_records([LogRecord(3, b"c")]), writer=writer)
    assert (err["class"], err["code"]) == ("EndOfStreamError", 512)
    reader = c("reader.open", log=log, dlsn="1,0,0")["reader"]
    assert [g[3] for g in c.read_all(reader, 2)] == [b"a", b"b"]
    assert c.error("reader.read", reader=reader, max=5, waitMs=-1)["class"] == "EndOfStreamError"
    c("writer.close", writer=writer)


def test_namespace_operations(c: Client, uri: str) -> None:
    ns = c("namespace.open", uri=uri)["ns"]
    assert c("namespace.logExists", ns=ns, name="a") == {"exists": False}
    c("namespace.createLog", ns=ns, name="a")
    c("namespace.createLog", ns=ns, name="nested/b")
    assert c("namespace.logExists", ns=ns, name="a") == {"exists": True}
    assert c("namespace.getLogs", ns=ns) == {"logs": ["a", "nested/b"]}
    err = c.error("namespace.createLog", ns=ns, name="a")
    assert (err["class"], err["code"]) == ("LogExistsError", 522)
    c("namespace.deleteLog", ns=ns, name="a")
    assert c("namespace.logExists", ns=ns, name="a") == {"exists": False}
    log = c("log.open", ns=ns, name="nested/b")["log"]
    c("log.delete", log=log)
    assert c("namespace.getLogs", ns=ns) == {"logs": []}
    assert c.error("namespace.deleteLog", ns=ns, name="a")["class"] == "LogNotFoundError"


# --- errors -------------------------------------------------------------------------------------
def test_bad_calls_are_invalid_argument_envelopes(c: Client, gw: Gateway, uri: str) -> None:
    def check(raw: bytes, needle: str) -> None:
        doc = envelope(raw)
        assert (doc["class"], doc["code"], doc["retriable"]) == ("InvalidArgumentError", None, False), doc
        assert needle in doc["message"], doc

    check(gw.call("no.such.op", "{}", b""), "unknown gateway operation")
    check(gw.call(None, "{}", b""), "unknown gateway operation")  # type: ignore[arg-type]
    check(gw.call("log.open", "{", b""), "not JSON")
    check(gw.call("log.open", "[1]", b""), "JSON object")
    check(c.raw("log.open", name="x"), "'ns'")  # missing argument
    ns = c("namespace.open", uri=uri)["ns"]
    check(c.raw("log.open", ns=str(ns), name="x"), "integer")
    check(c.raw("log.open", ns=ns, name=5), "string")
    check(c.raw("log.lastDLSN", log=ns), "not a log")  # a handle of another kind
    check(c.raw("log.lastDLSN", log=12345), "no log handle")
    log = c("log.open", ns=ns, name="x")["log"]
    writer = c("writer.open", log=log)["writer"]
    check(c.raw("writer.write", b"\x00\x00\x00", writer=writer), "truncated record header")
    check(c.raw("writer.write", protocol.encode_records([LogRecord(1, b"abc")])[:-1], writer=writer), "runs past")
    check(c.raw("writer.await", writer=writer, batch=7), "no batch 7")
    batch = c.write(writer, [LogRecord(1, b"a")])
    c.await_batch(writer, batch)
    check(c.raw("writer.await", writer=writer, batch=batch), "already awaited")
    check(c.raw("writer.truncate", writer=writer, dlsn="1,x,0"), "")
    check(c.raw("reader.open", log=log), "exactly one")
    check(c.raw("reader.open", log=log, dlsn="1,0,0", txid=3), "exactly one")
    check(c.raw("reader.open", log=log, txid=-1), "")
    reader = c("reader.open", log=log, txid=0)["reader"]
    check(c.raw("reader.read", reader=reader, max=0), "'max'")
    check(c.raw("reader.read", reader=reader, max=1, waitMs=-2), "'waitMs'")
    check(c.raw("log.recordCount", log=log, **{"from": "nope"}), "")
    check(c.raw("namespace.open", uri=uri, conf=[1]), "'conf'")
    # an envelope decodes to the same class on the Python side of the protocol
    with pytest.raises(storage.InvalidArgumentError, match="no batch 7"):
        protocol.parse_response(c.raw("writer.await", writer=writer, batch=7))


def test_storage_errors_keep_their_class_code_and_flags(c: Client, uri: str) -> None:
    ns = c("namespace.open", uri=uri)["ns"]
    err = c.error("log.open", ns=ns, name="bad name")
    assert (err["class"], err["code"]) == ("InvalidStreamNameError", 602)
    empty = c("log.open", ns=ns, name="empty")["log"]
    assert c.error("log.lastDLSN", log=empty)["class"] == "LogNotFoundError"
    c("namespace.createLog", ns=ns, name="empty")
    err = c.error("log.lastDLSN", log=empty)
    assert (err["class"], err["code"]) == ("LogEmptyError", 509)
    assert c.error("reader.open", log=c("log.open", ns=ns, name="missing")["log"], dlsn="1,0,0") == {
        "class": "LogNotFoundError",
        "code": 510,
        "retriable": False,
        "message": "log 'missing' does not exist",
    }
    writer = c("writer.open", log=empty)["writer"]
    c.await_batch(writer, c.write(writer, [LogRecord(10, b"x")]))
    err = c.error("writer.write", protocol.encode_records([LogRecord(9, b"y")]), writer=writer)
    assert (err["class"], err["code"]) == ("TransactionIdOutOfOrderError", 513)
    assert "9" in err["message"]
    assert err["details"] == {"txid": 9, "last_txid": 10}
    err = c.error("writer.write", protocol.encode_records([LogRecord(11, b"z" * 1_100_000)]), writer=writer)
    assert (err["class"], err["code"]) == ("LogRecordTooLongError", 413)
    err = c.error("namespace.open", uri=uri + "-other", conf={"noSuchKey": 1})
    assert err["class"] == "InvalidConfigError" and "noSuchKey" in err["message"]
    err = c.error("namespace.open", uri="bogus://nowhere")
    assert err["class"] == "InvalidArgumentError" and "bogus" in err["message"]
    # closed handles: AlreadyClosedError (IllegalStateError's code)
    c("writer.close", writer=writer)
    err = c.error("writer.write", protocol.encode_records([LogRecord(12, b"x")]), writer=writer)
    assert (err["class"], err["code"]) == ("AlreadyClosedError", 603)
    assert c.error("writer.close", writer=writer)["class"] == "AlreadyClosedError"


def test_writer_of_an_owned_log_fails_with_ownership_error(c: Client, uri: str, py_ns: storage.Namespace) -> None:
    log = c.open_log("owned", uri=uri)
    with py_ns.open_log("owned") as dlm:
        py_writer = dlm.open_async_writer()
        err = c.error("writer.open", log=log)
        assert (err["class"], err["code"], err["retriable"]) == ("OwnershipAcquireFailedError", 302, True)
        assert py_ns.client_id in err["message"]
        assert err["details"] == {"current_owner": py_ns.client_id}
        py_writer.write(LogRecord(1, b"python")).result(10)
        py_writer.close()
        # free again: the gateway's writer takes over, and then a Python writer is refused
        writer = c("writer.open", log=log)["writer"]
        c.await_batch(writer, c.write(writer, [LogRecord(2, b"java")]))
        with pytest.raises(storage.OwnershipAcquireFailedError):
            dlm.open_async_writer()
        c("writer.close", writer=writer)
        with dlm.open_reader(DLSN.INITIAL) as r:
            assert [x.payload for x in r.read_bulk(10, non_blocking=True)] == [b"python", b"java"]


def test_reading_a_truncated_position_fails(c: Client, uri: str, py_ns: storage.Namespace) -> None:
    from storage.formats.segment_metadata import TruncationStatus
    from storage.log.layout import LogMetadata

    log = c.open_log("truncated", uri=uri)
    for s in range(4):  # four segments: each writer completes its own
        writer = c("writer.open", log=log)["writer"]
        c.await_batch(writer, c.write(writer, [LogRecord(s * 10 + i + 1, b"s%d" % s) for i in range(5)]))
        c("writer.close", writer=writer)
    writer = c("writer.open", log=log)["writer"]
    assert c("writer.truncate", writer=writer, dlsn="3,0,0") == {"truncated": True}
    c("writer.close", writer=writer)
    # a reader from the start skips the truncated segments, as DistributedLog's does
    reader = c("reader.open", log=log, dlsn="1,0,0")["reader"]
    assert c.read_all(reader, 1, chunk=1)[0][0] == DLSN(3, 0, 0)
    # segment 1 made active again: segment 2 is a truncated hole in front of the reader
    meta = LogMetadata(py_ns.metastore, py_ns.paths_of("truncated"))
    seg1 = meta.segments()[0]
    meta.replace_segments([(seg1, seg1.with_truncation(TruncationStatus.ACTIVE))])
    raw = c.raw("reader.open", log=log, dlsn="1,0,0")
    if raw[0] == protocol.OK:  # the error may come with the open or with the first read
        reader = protocol.parse_response(raw)[0]["reader"]
        raw = c.raw("reader.read", reader=reader, max=100, waitMs=0)
    err = envelope(raw)
    assert (err["class"], err["code"]) == ("AlreadyTruncatedTransactionError", 511)


def test_unexpected_exceptions_become_unexpected_error_and_are_logged(
    c: Client, uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ns = c("namespace.open", uri=uri)["ns"]

    def boom(self: storage.Namespace) -> list[str]:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(storage.Namespace, "list_logs", boom)
    with caplog.at_level(logging.ERROR, logger="jvm_shim.gateway"):
        err = c.error("namespace.getLogs", ns=ns)
    assert err == {"class": "UnexpectedError", "code": None, "retriable": False, "message": "ZeroDivisionError: boom"}
    assert any(r.exc_info and "namespace.getLogs" in r.getMessage() for r in caplog.records)


# --- namespaces ---------------------------------------------------------------------------------
def test_the_gateway_namespace_is_shared_and_survives_handle_close(c: Client, gw: Gateway, tmp_path: Path) -> None:
    assert gw.uri is not None
    h1 = c("namespace.open", uri=gw.uri)["ns"]
    h2 = c("namespace.open", uri=str(tmp_path / "ns"))["ns"]  # the same directory as a plain path
    log1 = c("log.open", ns=h1, name="shared")["log"]
    writer = c("writer.open", log=log1)["writer"]
    c.await_batch(writer, c.write(writer, [LogRecord(1, b"x")]))
    c("namespace.close", ns=h1)  # closes what was opened through h1, not the namespace
    assert c.error("writer.write", protocol.encode_records([LogRecord(2, b"y")]), writer=writer)["class"] == (
        "AlreadyClosedError"
    )
    assert c.error("log.lastTxId", log=log1)["class"] == "AlreadyClosedError"
    assert c("namespace.getLogs", ns=h2) == {"logs": ["shared"]}
    log2 = c("log.open", ns=h2, name="shared")["log"]
    assert c("log.lastTxId", log=log2) == {"txid": 1}  # the writer's close completed the segment
    writer = c("writer.open", log=log2)["writer"]  # and released the lock


def test_namespace_conf_applies_to_logs_of_the_handle(c: Client, gw: Gateway) -> None:
    assert gw.uri is not None
    buffered = c("namespace.open", uri=gw.uri, conf={"writerOutputBufferSize": 1 << 20})["ns"]
    log = c("log.open", ns=buffered, name="buffered")["log"]
    writer = c("writer.open", log=log)["writer"]
    batch = c.write(writer, [LogRecord(i + 1, b"small") for i in range(10)])
    done: list[list[DLSN]] = []
    t = threading.Thread(target=lambda: done.append(c.await_batch(writer, batch)))
    t.start()
    t.join(0.5)
    assert t.is_alive(), "records below writerOutputBufferSize are acknowledged only once transmitted"
    c("writer.flush", writer=writer)
    t.join(10)
    assert len(done[0]) == 10
    # the gateway's own conf (writerOutputBufferSize 0) on a handle without conf: acknowledged at once
    plain = c("namespace.open", uri=gw.uri)["ns"]
    writer2 = c("writer.open", log=c("log.open", ns=plain, name="prompt")["log"])["writer"]
    assert len(c.await_batch(writer2, c.write(writer2, [LogRecord(1, b"x")]))) == 1


def test_per_call_namespaces(tmp_path: Path) -> None:
    with_uri = Gateway(None)
    c = Client(with_uri)
    try:
        a = c("namespace.open", uri=f"distributedlog-local://{tmp_path / 'a'}", conf=CONF)["ns"]
        b = c("namespace.open", uri=str(tmp_path / "b"), conf=CONF)["ns"]
        c("namespace.createLog", ns=a, name="only-in-a")
        assert c("namespace.getLogs", ns=a) == {"logs": ["only-in-a"]}
        assert c("namespace.getLogs", ns=b) == {"logs": []}
        log = c("log.open", ns=a, name="only-in-a")["log"]
        c("namespace.close", ns=a)
        assert c.error("namespace.getLogs", ns=a)["class"] == "AlreadyClosedError"
        assert c.error("log.lastDLSN", log=log)["class"] == "AlreadyClosedError"
        assert c("namespace.getLogs", ns=b) == {"logs": []}
    finally:
        with_uri.close()


# --- shutdown -----------------------------------------------------------------------------------
def test_close_releases_every_handle_and_the_write_lock(c: Client, gw: Gateway, uri: str) -> None:
    log = c.open_log("held", uri=uri)
    writer = c("writer.open", log=log)["writer"]
    acked = c.await_batch(writer, c.write(writer, [LogRecord(i + 1, b"r%d" % i) for i in range(25)]))
    c("writer.flush", writer=writer)  # committed: readable
    reader = c("reader.open", log=log, dlsn="1,0,0")["reader"]
    assert [g[0] for g in c.read_all(reader, 25)] == acked  # everything readable is read: the next read waits
    waiting: list[bytes] = []
    t = threading.Thread(target=lambda: waiting.append(c.raw("reader.read", reader=reader, max=100, waitMs=-1)))
    t.start()
    _wait_for_records(t)
    finishes(gw.close, "closing a gateway with a read waiting")
    t.join(GENEROUS_S)
    assert not t.is_alive()
    assert envelope(waiting[0])["class"] == "ReadCancelledError"  # close cancelled the waiting read
    assert c.error("log.lastDLSN", log=log)["class"] == "AlreadyClosedError"
    assert c.error("namespace.open", uri=uri)["class"] == "AlreadyClosedError"
    assert c("gateway.ping")["version"] == storage.__version__
    assert gw.shutdown_requested.is_set()
    gw.close()  # idempotent
    with storage.open_namespace(uri, CONF) as ns, ns.open_log("held") as dlm:
        w = dlm.open_async_writer()  # lockTimeoutSeconds 0: the lock is free now
        w.close()
        with dlm.open_reader(DLSN.INITIAL) as r:
            assert [x.dlsn for x in r.read_bulk(100, non_blocking=True)] == acked


def test_writer_abort_leaves_the_segment_for_recovery(c: Client, uri: str, py_ns: storage.Namespace) -> None:
    log = c.open_log("aborted", uri=uri)
    writer = c("writer.open", log=log)["writer"]
    acked = c.await_batch(writer, c.write(writer, [LogRecord(i + 1, b"a") for i in range(5)]))
    c("writer.abort", writer=writer)
    assert c.error("writer.flush", writer=writer)["class"] == "AlreadyClosedError"
    with py_ns.open_log("aborted") as dlm:
        assert dlm.log_segments()[-1].in_progress
        dlm.open_async_writer().close()  # recovers the in-progress segment
        with dlm.open_reader(DLSN.INITIAL) as r:
            assert [x.dlsn for x in r.read_bulk(10, non_blocking=True)] == acked


def test_error_details_round_trip_and_are_optional() -> None:
    raw = protocol.error(storage.TransactionIdOutOfOrderError("m", txid=3, last_txid=7))
    assert json.loads(raw[1:])["details"] == {"txid": 3, "last_txid": 7}
    with pytest.raises(storage.TransactionIdOutOfOrderError) as e:
        protocol.parse_response(raw)
    assert (e.value.txid, e.value.last_txid, str(e.value)) == (3, 7, "m")
    raw = protocol.error(storage.OwnershipAcquireFailedError("held", current_owner="vm:1:2"))
    with pytest.raises(storage.OwnershipAcquireFailedError) as o:
        protocol.parse_response(raw)
    assert o.value.current_owner == "vm:1:2"
    assert "details" not in json.loads(protocol.error(storage.LogNotFoundError("x"))[1:])  # nothing to carry
    assert "details" not in json.loads(protocol.error(storage.OwnershipAcquireFailedError("x"))[1:])


def test_decode_records_rejects_truncated_data() -> None:
    data = protocol.encode_records([LogRecord(1, b"abc"), LogRecord(2, b""), LogRecord(3, bytes(300))])
    for buf in (data, bytearray(data), memoryview(data)):
        got = protocol.decode_records(buf)
        assert [(r.txid, r.payload, r.flags, r.position_within_segment) for r in got] == [
            (1, b"abc", 0, 0),
            (2, b"", 0, 0),
            (3, bytes(300), 0, 0),
        ]
        assert all(type(r.payload) is bytes for r in got)
    with pytest.raises(storage.InvalidArgumentError, match="truncated record header"):
        protocol.decode_records(data[:5])
    with pytest.raises(storage.InvalidArgumentError, match="runs past the data"):
        protocol.decode_records(data[:-1])
    with pytest.raises(storage.InvalidArgumentError, match="runs past the data"):
        protocol.decode_records(bytes(8) + b"\xff\xff\xff\xff")


def test_read_max_bytes(c: Client, uri: str, py_ns: storage.Namespace) -> None:
    with py_ns.open_log("sized") as dlm, dlm.open_writer() as w:
        for t in range(1, 11):
            w.write(LogRecord(t, bytes([t]) * 100))
        w.flush()
    reader = c("reader.open", log=c.open_log("sized", uri=uri), dlsn="1,0,0")["reader"]
    txids: list[list[int]] = []
    for _ in range(5):
        res, data = c.data("reader.read", reader=reader, max=4, waitMs=1000, maxBytes=250)
        got = list(protocol.decode_read(data))
        assert res["count"] == len(got)
        txids.append([t for _, t, _, _ in got])
    # the third record reaches 250 bytes: 3 a read (the cut-off rest comes first next time), never more than max
    assert [t for batch in txids for t in batch] == list(range(1, 11))
    assert all(1 <= len(b) <= 3 for b in txids), txids
    res, data = c.data("reader.read", reader=reader, max=4, waitMs=0, maxBytes=1)
    assert res["count"] == 0
    assert c.error("reader.read", reader=reader, max=4, maxBytes=0)["class"] == "InvalidArgumentError"
