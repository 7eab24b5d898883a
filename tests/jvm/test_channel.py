"""The gateway's data channel (:mod:`jvm_shim.channel`) in-process, spoken by :class:`tests.jvm.wire.ChannelClient`
exactly as ``DataChannel.java`` speaks it.

Covers: ``serve`` starts it beside py4j and ``gateway.ping`` advertises it; records written in batches over the
channel (write on one connection, await on another, as the Java writer's two threads do) read back exactly over
the channel, over py4j and by a Python reader; the token is required (wrong token answered ``refused``, silence
closed after the hello timeout) and a malformed or oversized frame closes only that connection; ``stop()``
closes every connection and the port.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import storage
from jvm_shim import channel as channel_mod
from jvm_shim import protocol
from jvm_shim.channel import DataChannel
from jvm_shim.gateway import Gateway
from jvm_shim.server import serve
from storage import DLSN, LogRecord
from tests.jvm.wire import ChannelClient, WireClient, WireError
from tests.storage.observe import GENEROUS_S, parked_in, wait_until

CONF: dict[str, object] = {"lockTimeoutSeconds": 0, "writerOutputBufferSize": 0, "logSegmentRollingMinutes": 0}
TOKEN = "channel-secret"


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return f"distributedlog-local://{tmp_path / 'ns'}"


@pytest.fixture
def gw(uri: str) -> Iterator[Gateway]:
    g = Gateway(uri, CONF)
    try:
        yield g
    finally:
        g.close()


@pytest.fixture
def chan(gw: Gateway) -> Iterator[DataChannel]:
    ch = DataChannel(gw, "127.0.0.1", TOKEN)
    try:
        yield ch
    finally:
        ch.stop()


def closed_by_peer(sock: socket.socket, timeout: float = GENEROUS_S) -> bool:
    """True when the peer closed ``sock`` (EOF or reset); False if it is still open after ``timeout`` (a bound
    for a hang, generous: not a measure of how soon)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def still_open(sock: socket.socket) -> bool:
    """True when the peer has neither closed ``sock`` nor sent anything on it (looked at now, without waiting)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.setblocking(True)


def wait_reading_hello(sock: socket.socket) -> None:
    """Wait until the channel's thread serving the client socket ``sock`` (named after the client's port; a
    thread of an earlier connection from the same port may linger, ending) reads its hello: its hello timeout
    is set."""
    name = f"gateway-data-{sock.getsockname()[1]}"

    def reading() -> bool:
        return any(
            t.name == name and parked_in(t, "_hello", "jvm_shim/channel.py") and parked_in(t, "_read_exact")
            for t in threading.enumerate()
        )

    wait_until(reading, f"{name} reading the hello")


def test_serve_starts_the_channel_and_ping_advertises_it(uri: str) -> None:
    with (
        serve(uri, port=0, auth_token=TOKEN, conf=CONF) as server,
        WireClient(server.port, TOKEN) as py4j,
        ChannelClient(server.channel.port, TOKEN) as dc,
    ):
        ping = py4j.call("gateway.ping")[0]
        assert ping == {"version": storage.__version__, "dataPort": server.channel.port}
        assert dc.call("gateway.ping")[0] == ping
        assert server.channel.connections == 1
    wait_until(lambda: server.channel.connections == 0, "every connection closed")


def test_records_over_the_channel_read_back_exactly_everywhere(uri: str) -> None:
    records = [LogRecord(t, b"" if t % 50 == 0 else bytes([t % 256]) * (t % 700)) for t in range(1, 1001)]
    acked: list[DLSN] = []
    with serve(uri, port=0, auth_token=TOKEN, conf=CONF) as server:
        port = server.channel.port
        with WireClient(server.port, TOKEN) as py4j, ChannelClient(port, TOKEN) as sender:
            ns = py4j.call("namespace.open", uri=uri)[0]["ns"]
            log_h = py4j.call("log.open", ns=ns, name="via-channel")[0]["log"]
            w = py4j.call("writer.open", log=log_h)[0]["writer"]
            batches: list[tuple[int, int]] = []
            done = threading.Event()
            errors: list[BaseException] = []

            def await_all() -> None:  # the Java writer's completer thread: its own connection
                try:
                    with ChannelClient(port, TOKEN) as completer:
                        seen = 0
                        while not (done.is_set() and seen == len(batches)):
                            if seen == len(batches):
                                time.sleep(0.001)
                                continue
                            batch, count = batches[seen]
                            res, data = completer.call("writer.await", writer=w, batch=batch)
                            dlsns = protocol.decode_dlsns(data)
                            assert res["count"] == count == len(dlsns)
                            acked.extend(dlsns)
                            seen += 1
                except BaseException as e:  # reported below
                    errors.append(e)

            t = threading.Thread(target=await_all)
            t.start()
            for i in range(0, len(records), 64):
                chunk = records[i : i + 64]
                res = sender.call("writer.write", protocol.encode_records(chunk), writer=w)[0]
                batches.append((res["batch"], res["count"]))
            done.set()
            t.join(60)
            assert not errors, errors
            py4j.call("writer.close", writer=w)
            r = sender.call("reader.open", log=log_h, dlsn=str(DLSN.INITIAL))[0]["reader"]
            over_channel = list(protocol.decode_read(sender.call("reader.read", reader=r, max=2000, waitMs=0)[1]))
            r2 = py4j.call("reader.open", log=log_h, dlsn=str(DLSN.INITIAL))[0]["reader"]
            over_py4j = list(protocol.decode_read(py4j.call("reader.read", reader=r2, max=2000, waitMs=0)[1]))
    assert over_channel == over_py4j
    assert [(d, txid, payload) for d, txid, _, payload in over_channel] == [
        (d, r.txid, r.payload) for d, r in zip(acked, records, strict=True)
    ]
    assert [seq for _, _, seq, _ in over_channel] == list(range(len(records)))
    with storage.open_namespace(uri, CONF) as ns2, ns2.open_log("via-channel") as dlm, dlm.open_reader(0) as reader:
        got = reader.read_bulk(2000, non_blocking=True)
    assert [x.dlsn for x in got] == acked and [x.payload for x in got] == [r.payload for r in records]


def test_errors_come_back_as_envelopes(chan: DataChannel) -> None:
    with ChannelClient(chan.port, TOKEN) as dc:
        with pytest.raises(storage.InvalidArgumentError, match="no writer handle 7"):
            dc.call("writer.await", writer=7, batch=1)
        with pytest.raises(storage.InvalidArgumentError, match="unknown gateway operation"):
            dc.call("no.such.op")
        assert "version" in dc.call("gateway.ping")[0]  # the connection goes on


def test_wrong_token_is_refused_and_the_channel_goes_on(chan: DataChannel) -> None:
    with pytest.raises(WireError, match="refused the token"):
        ChannelClient(chan.port, "not-the-token")
    with socket.create_connection(("127.0.0.1", chan.port)) as s:  # a refused client cannot call anyway
        s.sendall(struct.pack(">I", 3) + b"bad" + struct.pack(">III", 12, 2, 0) + b"gateway.ping{}")
        assert s.recv(1) == channel_mod.REFUSED
        assert closed_by_peer(s)
    with ChannelClient(chan.port, TOKEN) as dc:
        assert "version" in dc.call("gateway.ping")[0]


def test_silent_connection_is_closed_after_the_hello_timeout(gw: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that sends no hello is closed once its hello timeout has passed, not before, and each connection
    has its own: a silent one given 0.3 s is closed while one given an hour, opened before it, stays open."""
    ch = DataChannel(gw, "127.0.0.1", TOKEN)
    try:
        monkeypatch.setattr(channel_mod, "HELLO_TIMEOUT_S", 3600.0)
        with socket.create_connection(("127.0.0.1", ch.port)) as patient:
            # its hello timeout (the hour) is set once its thread reads the hello
            wait_reading_hello(patient)
            monkeypatch.setattr(channel_mod, "HELLO_TIMEOUT_S", 0.3)
            t0 = time.monotonic()  # before the connection: the channel's timer cannot start earlier
            with socket.create_connection(("127.0.0.1", ch.port)) as silent:
                assert closed_by_peer(silent)
                assert time.monotonic() - t0 >= 0.3  # not before its timeout
                assert still_open(patient)  # closed by its own timeout, which is not the other's
            wait_until(lambda: ch.connections == 1, "the silent connection forgotten")
            patient.sendall(struct.pack(">I", len(TOKEN)) + TOKEN.encode())  # a late hello is still served
            assert patient.recv(1) == channel_mod.ACCEPTED
    finally:
        ch.stop()


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">III", channel_mod.MAX_OP_BYTES + 1, 2, 0),
        struct.pack(">III", 12, channel_mod.MAX_ARGS_BYTES + 1, 0),
        struct.pack(">III", 12, 2, channel_mod.MAX_DATA_BYTES + 1),
        struct.pack(">III", 12, 2, 100) + b"writer.write{}" + b"x" * 10,  # then the client goes away
    ],
    ids=["op-too-long", "args-too-long", "data-too-long", "truncated"],
)
def test_bad_frames_close_only_their_connection(chan: DataChannel, gw: Gateway, frame: bytes) -> None:
    with ChannelClient(chan.port, TOKEN) as good:
        bad = ChannelClient(chan.port, TOKEN)
        try:
            bad.sock.sendall(frame)
            if frame.endswith(b"x" * 10):
                bad.sock.shutdown(socket.SHUT_WR)
            assert closed_by_peer(bad.sock)
        finally:
            bad.close()
        assert "version" in good.call("gateway.ping")[0]
        wait_until(lambda: chan.connections == 1, "the bad connection closed")
    assert gw.operations  # the gateway itself is untouched


def test_stop_closes_every_connection_and_the_port(gw: Gateway) -> None:
    ch = DataChannel(gw, "127.0.0.1", TOKEN)
    dc = ChannelClient(ch.port, TOKEN)
    try:
        dc.call("gateway.ping")
        ch.stop()
        with pytest.raises((WireError, OSError)):
            dc.call("gateway.ping")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", ch.port), timeout=2).close()
        ch.stop()  # idempotent
    finally:
        dc.close()
