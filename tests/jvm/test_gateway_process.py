"""The gateway as a process (``python -m jvm_shim``, ``dlog gateway``), driven over py4j's wire protocol by
:class:`tests.jvm.wire.WireClient` (what a JVM's ``py4j.ClientServer`` sends), and once by a real JVM
through py4j's own Java client when a JDK is present.

Covers: the one GATEWAY line on stdout, listening on 127.0.0.1 only, the auth token (generated, or from
``$DLOG_GATEWAY_TOKEN`` and then never printed), a refused non-loopback address, a clean exit 0 on
SIGTERM, SIGINT, ``gateway.shutdown`` and (``--parent-watch``) stdin EOF, including a SIGKILLed parent;
each time the log's write lock is released and every acknowledged record is there for the next writer.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import storage
from jvm_shim import protocol
from storage import DLSN, LogRecord
from tests.jvm.jdk import Jdk
from tests.jvm.wire import ChannelClient, WireClient, WireError
from tests.storage.observe import GENEROUS_S, listening_addresses, wait_until

GATEWAY_LINE = re.compile(r"^GATEWAY port=(\d{1,5}) token=(\S+)$")
CONF: dict[str, object] = {"writerOutputBufferSize": 0, "lockTimeoutSeconds": 0}


@dataclass
class GatewayProc:
    proc: subprocess.Popen[bytes]
    port: int
    token: str  # what the line printed

    def client(self, token: str | None = None) -> WireClient:
        return WireClient(self.port, token or self.token)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = GENEROUS_S) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def rest_of_stdout(self) -> bytes:
        assert self.proc.stdout is not None
        return self.proc.stdout.read()


def read_line(proc: subprocess.Popen[bytes], timeout: float = 30) -> str:
    """The first stdout line of ``proc`` (fails after ``timeout`` or on exit without one)."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        proc.kill()
        raise AssertionError(f"no line from the gateway in {timeout} s")
    line = proc.stdout.readline().decode()
    if not line:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise AssertionError(f"gateway exited (rc {proc.wait(10)}) without a line: {err}")
    return line


def start(
    args: list[str], env: dict[str, str], *, stdin: int | None = subprocess.DEVNULL, dlog: bool = False
) -> GatewayProc:
    cmd = [sys.executable, "-m", "dlog", *args] if dlog else [sys.executable, "-m", "jvm_shim", *args]
    proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    line = read_line(proc)  # how long it takes is measured by bench/bench_jvm.py
    m = GATEWAY_LINE.match(line.rstrip("\n"))
    assert m and line.endswith("\n"), f"bad GATEWAY line {line!r}"
    return GatewayProc(proc, int(m.group(1)), m.group(2))


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return f"distributedlog-local://{tmp_path / 'ns'}"


@pytest.fixture
def env(subprocess_env: dict[str, str]) -> dict[str, str]:
    e = dict(subprocess_env)
    e.pop("DLOG_GATEWAY_TOKEN", None)
    e.pop("DLOG_URI", None)
    return e


@pytest.fixture
def procs() -> Iterator[list[GatewayProc]]:
    """Gateways a test started: killed at the end if still running."""
    started: list[GatewayProc] = []
    yield started
    for g in started:
        if g.proc.poll() is None:
            g.proc.kill()
            g.proc.wait(10)


def hold_log(client: WireClient, uri: str, name: str, n: int = 30) -> list[DLSN]:
    """Through the gateway: open a writer on ``name`` (taking its lock) and write ``n`` acknowledged records."""
    ns = client.call("namespace.open", uri=uri, conf=CONF)[0]["ns"]
    log = client.call("log.open", ns=ns, name=name)[0]["log"]
    writer = client.call("writer.open", log=log)[0]["writer"]
    recs = [LogRecord(i + 1, f"java-{i}".encode()) for i in range(n)]
    batch = client.call("writer.write", protocol.encode_records(recs), writer=writer)[0]["batch"]
    return protocol.decode_dlsns(client.call("writer.await", writer=writer, batch=batch)[1])


def assert_lock_free_with(uri: str, name: str, acked: list[DLSN]) -> None:
    """A Python writer takes the log at once, and every acknowledged record is there."""
    with storage.open_namespace(uri, CONF) as ns, ns.open_log(name) as dlm:
        dlm.open_async_writer().close()
        with dlm.open_reader(DLSN.INITIAL) as r:
            got = r.read_bulk(len(acked) + 10, non_blocking=True)
        assert [x.dlsn for x in got] == acked
        assert [x.payload for x in got] == [f"java-{i}".encode() for i in range(len(acked))]


# --- startup ------------------------------------------------------------------------------------
def test_gateway_line_token_and_loopback_only(uri: str, env: dict[str, str], procs: list[GatewayProc]) -> None:
    g = start(["--uri", uri, "--port", "0"], env)
    procs.append(g)
    assert re.fullmatch(r"[0-9a-f]{64}", g.token)  # generated: secrets.token_hex(32)
    assert 0 < g.port < 65536
    addrs = listening_addresses(g.port)
    assert addrs == ["127.0.0.1"], addrs
    with g.client() as c:
        ping = c.call("gateway.ping")[0]
        assert set(ping) == {"version", "dataPort"} and ping["version"] == storage.__version__
        data_port = ping["dataPort"]
        assert listening_addresses(data_port) == ["127.0.0.1"]  # the data channel: loopback too
        ns = c.call("namespace.open", uri=uri)[0]["ns"]
        with pytest.raises(storage.InvalidArgumentError, match="no log handle 99"):
            c.call("log.lastDLSN", log=99)
        assert c.call("namespace.getLogs", ns=ns)[0] == {"logs": []}
    with pytest.raises(WireError, match="authentication refused"):
        WireClient(g.port, "not-the-token")
    with pytest.raises(WireError, match="refused the token"):
        ChannelClient(data_port, "not-the-token")
    with g.client() as c:  # a refused client does not disturb the server
        assert c.call("gateway.ping")[0]["version"] == storage.__version__
    with ChannelClient(data_port, g.token) as dc:
        assert dc.call("gateway.ping")[0]["dataPort"] == data_port
    assert g.stop() == 0
    assert g.rest_of_stdout() == b""  # exactly one line on stdout


def test_token_from_the_environment_is_never_printed(uri: str, env: dict[str, str], procs: list[GatewayProc]) -> None:
    token = "t0ken-" + os.urandom(8).hex()
    g = start(["--uri", uri], {**env, "DLOG_GATEWAY_TOKEN": token})
    procs.append(g)
    assert g.token == "env"
    with pytest.raises(WireError):
        WireClient(g.port, "env")
    with WireClient(g.port, token) as c:
        assert c.call("gateway.ping")[0]["version"] == storage.__version__
    assert g.stop() == 0
    assert g.proc.stderr is not None
    assert token.encode() not in g.rest_of_stdout() + g.proc.stderr.read()


def test_non_loopback_address_is_refused(uri: str, env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jvm_shim", "--uri", uri, "--address", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 1
    assert out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and "loopback" in out.stderr, out.stderr


def test_bad_namespace_fails_before_the_line(env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jvm_shim", "--uri", "bogus://x/y"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("jvm_shim: error: ") and "bogus" in out.stderr


def test_port_in_use_is_one_line_error(uri: str, env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for cmd, prog in (
            (["-m", "jvm_shim", "--uri", uri], "jvm_shim"),
            (["-m", "dlog", "--uri", uri, "gateway"], "dlog"),
        ):
            out = subprocess.run(
                [sys.executable, *cmd, "--port", port],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
            assert out.returncode == 1 and out.stdout == ""
            assert out.stderr.startswith(f"{prog}: error: the gateway cannot listen on 127.0.0.1:{port}: ")
            assert "in use" in out.stderr and len(out.stderr.splitlines()) == 1


def test_is_loopback() -> None:
    from jvm_shim.server import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("127.1.2.3")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1") and not is_loopback("no such host.")


def test_serve_refuses_without_token_or_with_remote_address(uri: str) -> None:
    from jvm_shim.server import serve

    with pytest.raises(storage.InvalidArgumentError, match="token"):
        serve(uri, auth_token="")
    with pytest.raises(storage.InvalidArgumentError, match="loopback"):
        serve(uri, address="0.0.0.0", auth_token="x")


def test_serve_in_process_on_a_free_port(uri: str) -> None:
    from jvm_shim.server import serve

    with serve(uri, port=0, auth_token="secret", conf=CONF) as server:
        assert server.port > 0 and server.address == "127.0.0.1"
        with WireClient(server.port, "secret") as c:
            acked = hold_log(c, uri, "in-process", 5)
        c2 = WireClient(server.port, "secret")  # a connection left open over the stop
    assert len(acked) == 5
    with pytest.raises((WireError, OSError)):
        c2.call("gateway.ping")
    c2.close()
    assert_lock_free_with(uri, "in-process", acked)


# --- shutdown -----------------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_exits_cleanly_and_releases_the_lock(
    sig: signal.Signals, uri: str, env: dict[str, str], procs: list[GatewayProc]
) -> None:
    g = start(["--uri", uri], env)
    procs.append(g)
    client = g.client()  # stays connected, as a JVM would
    acked = hold_log(client, uri, "held")
    assert g.stop(sig) == 0  # it exits, cleanly (within generous slack: not a hang)
    client.close()
    assert_lock_free_with(uri, "held", acked)


def test_shutdown_operation_stops_the_process(uri: str, env: dict[str, str], procs: list[GatewayProc]) -> None:
    g = start(["--uri", uri], env)
    procs.append(g)
    with g.client() as c:
        acked = hold_log(c, uri, "held")
        assert c.call("gateway.shutdown")[0] == {}
    assert g.proc.wait(20) == 0
    assert_lock_free_with(uri, "held", acked)


def test_parent_watch_stops_on_stdin_eof(uri: str, env: dict[str, str], procs: list[GatewayProc]) -> None:
    g = start(["--uri", uri, "--parent-watch"], env, stdin=subprocess.PIPE)
    procs.append(g)
    client = g.client()
    acked = hold_log(client, uri, "held")
    assert client.call("gateway.ping")[0]["version"] == storage.__version__  # an open stdin keeps it serving
    assert g.proc.poll() is None
    assert g.proc.stdin is not None
    g.proc.stdin.close()
    assert g.proc.wait(20) == 0
    client.close()
    assert_lock_free_with(uri, "held", acked)


def gateway_alive(pid: int) -> bool:
    """True while ``pid`` runs (an exited child not yet reaped by its new parent is a zombie: not alive)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-m", "jvm_shim", "--uri", sys.argv[1], "--parent-watch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    print(child.stdout.readline().decode().strip(), child.pid, flush=True)
    time.sleep(600)
    """
)


def test_sigkilled_parent_frees_the_log(uri: str, env: dict[str, str]) -> None:
    """What a SIGKILLed JVM does to the gateway it started: stdin EOF, clean exit, lock released."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, uri], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env
    )
    try:
        line, child_pid = read_line(parent).strip().rsplit(" ", 1)
        m = GATEWAY_LINE.match(line)
        assert m, line
        client = WireClient(int(m.group(1)), m.group(2))
        acked = hold_log(client, uri, "held")
        parent.kill()
        parent.wait(10)
        wait_until(lambda: not gateway_alive(int(child_pid)), "the gateway exiting after its parent was killed")
        client.close()
        assert_lock_free_with(uri, "held", acked)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


# --- dlog gateway -------------------------------------------------------------------------------
def test_dlog_gateway_help(env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dlog", "gateway", "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "GATEWAY port=<port> token=<token>" in " ".join(out.stdout.split())
    for option in ("--port", "--address", "--parent-watch", "--allow-remote"):
        assert option in out.stdout
    top = subprocess.run([sys.executable, "-m", "dlog", "--help"], env=env, capture_output=True, text=True)
    assert "gateway" in top.stdout


def test_dlog_gateway_serves_the_namespace(uri: str, env: dict[str, str], procs: list[GatewayProc]) -> None:
    g = start(["--uri", uri, "gateway", "--port", "0", "--parent-watch"], env, stdin=subprocess.PIPE, dlog=True)
    procs.append(g)
    assert listening_addresses(g.port) == ["127.0.0.1"]
    with g.client() as c:
        acked = hold_log(c, uri, "via-dlog", 10)
    assert g.proc.stdin is not None
    g.proc.stdin.close()
    assert g.proc.wait(20) == 0
    assert g.rest_of_stdout() == b""
    assert_lock_free_with(uri, "via-dlog", acked)


def test_dlog_gateway_refuses_remote_address(uri: str, env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dlog", "--uri", uri, "gateway", "--address", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("dlog: error: refusing") and len(out.stderr.splitlines()) == 1


# --- a real JVM through py4j's Java client -------------------------------------------------------
JAVA_PROBE = """
package org.apache.distributedlog.shim;

public interface PythonGateway {
    byte[] call(String op, String args, byte[] data);
}
"""

JAVA_MAIN = """
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.distributedlog.shim.PythonGateway;
import py4j.ClientServer;

public class Probe {
    static String ok(byte[] raw) {
        if (raw[0] != 0) throw new RuntimeException(new String(raw, 1, raw.length - 1, StandardCharsets.UTF_8));
        int n = ByteBuffer.wrap(raw, 1, 4).getInt();
        return new String(raw, 5, n, StandardCharsets.UTF_8);
    }
    static long field(String json, String key) {
        int i = json.indexOf("\\"" + key + "\\":") + key.length() + 3;
        int j = i;
        while (j < json.length() && Character.isDigit(json.charAt(j))) j++;
        return Long.parseLong(json.substring(i, j));
    }
    public static void main(String[] a) throws Exception {
        ClientServer cs = new ClientServer.ClientServerBuilder().javaPort(0).pythonPort(Integer.parseInt(a[0]))
            .authToken(a[1]).autoStartJavaServer(false).build();
        PythonGateway gw = (PythonGateway) cs.getPythonServerEntryPoint(new Class[] {PythonGateway.class});
        byte[] none = new byte[0];
        System.out.println("ping " + ok(gw.call("gateway.ping", "{}", none)));
        String uri = a[2].replace("\\\\", "\\\\\\\\").replace("\\"", "\\\\\\"");
        String conf = ",\\"conf\\":{\\"writerOutputBufferSize\\":0}";
        long ns = field(ok(gw.call("namespace.open", "{\\"uri\\":\\"" + uri + "\\"" + conf + "}", none)), "ns");
        long log = field(ok(gw.call("log.open", "{\\"ns\\":" + ns + ",\\"name\\":\\"from-java\\"}", none)), "log");
        long w = field(ok(gw.call("writer.open", "{\\"log\\":" + log + "}", none)), "writer");
        ByteBuffer bb = ByteBuffer.allocate(3 * 12 + 256 + 2);
        byte[] all = new byte[256];
        for (int i = 0; i < 256; i++) all[i] = (byte) i;
        bb.putLong(5).putInt(256).put(all);
        bb.putLong(6).putInt(0);
        bb.putLong(7).putInt(2).put((byte) '\\n').put((byte) 0);
        long batch = field(ok(gw.call("writer.write", "{\\"writer\\":" + w + "}", bb.array())), "batch");
        byte[] raw = gw.call("writer.await", "{\\"writer\\":" + w + ",\\"batch\\":" + batch + "}", none);
        String res = ok(raw);
        int n = ByteBuffer.wrap(raw, 1, 4).getInt();
        ByteBuffer d = ByteBuffer.wrap(raw, 5 + n, raw.length - 5 - n);
        StringBuilder sb = new StringBuilder();
        while (d.remaining() > 0) {
            sb.append(d.getLong()).append(',').append(d.getLong()).append(',').append(d.getLong()).append(' ');
        }
        System.out.println("acked " + sb.toString().trim());
        byte[] err = gw.call("log.lastDLSN", "{\\"log\\":424242}", none);
        System.out.println("error " + err[0] + " " + new String(err, 1, err.length - 1, StandardCharsets.UTF_8));
        ok(gw.call("writer.close", "{\\"writer\\":" + w + "}", none));
        cs.shutdown();
    }
}
"""


def test_a_jvm_through_py4j_java_client(
    uri: str, env: dict[str, str], procs: list[GatewayProc], tmp_path: Path, jdk: Jdk
) -> None:
    from jvm_shim import py4j_jar

    src = tmp_path / "probe"
    (src / "org/apache/distributedlog/shim").mkdir(parents=True)
    (src / "org/apache/distributedlog/shim/PythonGateway.java").write_text(JAVA_PROBE)
    (src / "Probe.java").write_text(JAVA_MAIN)
    classes = tmp_path / "classes"
    cp = str(py4j_jar())
    subprocess.run(
        [
            jdk.javac,
            "-cp",
            cp,
            "-d",
            str(classes),
            str(src / "Probe.java"),
            str(src / "org/apache/distributedlog/shim/PythonGateway.java"),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    token = os.urandom(16).hex()
    g = start(["--uri", uri, "--parent-watch"], {**env, "DLOG_GATEWAY_TOKEN": token}, stdin=subprocess.PIPE)
    procs.append(g)
    out = subprocess.run(
        [jdk.java, "-cp", f"{classes}{os.pathsep}{cp}", "Probe", str(g.port), token, uri],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert re.fullmatch(rf'\{{"version":"{re.escape(storage.__version__)}","dataPort":\d+\}}', lines["ping"])
    assert lines["error"].startswith('1 {"class": "InvalidArgumentError"')
    with storage.open_namespace(uri, CONF) as ns, ns.open_log("from-java") as dlm, dlm.open_reader(0) as r:
        got = r.read_bulk(10, non_blocking=True)
    assert lines["acked"] == " ".join(str(x.dlsn) for x in got)
    assert [(x.txid, x.payload, x.sequence_id) for x in got] == [
        (5, bytes(range(256)), 0),
        (6, b"", 1),
        (7, b"\n\0", 2),
    ]
    assert g.proc.poll() is None  # the JVM's exit is not the gateway's
    assert g.proc.stdin is not None
    g.proc.stdin.close()
    assert g.proc.wait(20) == 0
