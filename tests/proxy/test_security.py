"""Security of ``dlog proxy`` with real certificates made here by the ``openssl`` command: TLS (server certificate,
optional client certificates) and the shared token. A bad or missing token answers REQUEST_DENIED (handshake:
UNAUTHENTICATED) and writes nothing; a client without a certificate is refused when one is required. A wildcard
listen address (``0.0.0.0``, ``[::]``) needs ``--advertise HOST:PORT``, which is what is announced and what
redirects name; the refusal to listen without TLS or a token says exactly what is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.registry import list_proxies
from dl_proxy.server import TlsFiles, check_security, parse_advertise
from storage.errors import InvalidArgumentError
from tests.proxy.conftest import ROOT, StartProxy, _env, call_metadata, stub
from tests.proxy.test_dedup import _records

T = 30
TOKEN = "s3cret-token"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate, all signed by the CA."""
    d = tmp_path / "pki"
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", "san.ext", "-out", f"{name}.pem", cwd=d)  # fmt: skip
    (d / "token").write_text(TOKEN + "\n")
    return d


def test_tls_and_token_on_a_non_loopback_address(zk_local_uri: str, proxy_process: StartProxy, certs: Path) -> None:
    _p, addr = proxy_process(
        zk_local_uri,
        "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
        "--token-file", str(certs / "token"), "--advertise", "127.0.0.1:0",
        listen="0.0.0.0:0", conf={"proxyCreateStreamOnWrite": True},
    )  # fmt: skip
    port = addr.rpartition(":")[2]
    assert addr == f"127.0.0.1:{port}" and int(port) > 0  # the advertised host, with the port bound
    assert [(p.address, p.tls) for p in list_proxies(zk_local_uri)] == [(addr, True)]
    ca = (certs / "ca.pem").read_bytes()
    ch, s = stub(f"127.0.0.1:{port}", tls_ca=ca)
    with ch:
        good = s.write(pb.WriteRequest(stream="sec", data=b"ok"), metadata=call_metadata(TOKEN), timeout=T)
        assert good.header.code == pb.SUCCESS, good
        for token in (None, "wrong"):
            bad = s.write(pb.WriteRequest(stream="sec", data=b"bad"), metadata=call_metadata(token), timeout=T)
            assert bad.header.code == pb.REQUEST_DENIED, bad
            bulk = s.writeBulk(
                pb.BulkWriteRequest(stream="sec", data=[b"bad"]), metadata=call_metadata(token), timeout=T
            )
            assert bulk.header.code == pb.REQUEST_DENIED
            rel = s.release(pb.StreamRequest(stream="sec"), metadata=call_metadata(token), timeout=T)
            assert rel.header.code == pb.REQUEST_DENIED
            acc = s.setAcceptNewStream(pb.SetAcceptNewStreamRequest(enabled=False), metadata=call_metadata(token))
            assert acc.header.code == pb.REQUEST_DENIED
            with pytest.raises(grpc.RpcError) as denied:
                s.handshake(pb.ClientInfo(get_ownerships=True), metadata=call_metadata(token), timeout=T)
            assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
        hs = s.handshake(pb.ClientInfo(get_ownerships=True), metadata=call_metadata(TOKEN), timeout=T)
        assert hs.server_status == pb.WRITE_AND_ACCEPT
    # plaintext to a TLS port fails
    plain, ps = stub(f"127.0.0.1:{port}")
    with plain, pytest.raises(grpc.RpcError):
        ps.write(pb.WriteRequest(stream="sec", data=b"plain"), metadata=call_metadata(TOKEN), timeout=10)
    assert [r.payload for r in _records(zk_local_uri, "sec")] == [b"ok"]


def test_client_certificates_required(zk_local_uri: str, proxy_process: StartProxy, certs: Path) -> None:
    _p, addr = proxy_process(
        zk_local_uri,
        "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
        "--tls-client-ca", str(certs / "ca.pem"),
        env={"DLOG_PROXY_TOKEN": TOKEN}, conf={"proxyCreateStreamOnWrite": True},
    )  # fmt: skip
    ca = (certs / "ca.pem").read_bytes()
    client = ((certs / "client.key").read_bytes(), (certs / "client.pem").read_bytes())
    ch, s = stub(addr, tls_ca=ca, client_cert=client)
    with ch:
        ok = s.write(pb.WriteRequest(stream="mtls", data=b"ok"), metadata=call_metadata(TOKEN), timeout=T)
        assert ok.header.code == pb.SUCCESS, ok
    anon, sa = stub(addr, tls_ca=ca)
    with anon, pytest.raises(grpc.RpcError):
        sa.write(pb.WriteRequest(stream="mtls", data=b"anon"), metadata=call_metadata(TOKEN), timeout=10)
    assert [r.payload for r in _records(zk_local_uri, "mtls")] == [b"ok"]


def _refused_start(uri: str, *args: str) -> str:
    """Run ``dlog --uri URI proxy ARGS`` expecting a refusal: its one stderr line."""
    cmd = [sys.executable, "-m", "dlog", "--uri", uri, "proxy", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(None), cwd=str(ROOT), timeout=120)
    assert p.returncode == 1 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dlog: error: "), p.stderr
    return lines[0]


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0"])
def test_wildcard_listen_needs_advertise(zk_local_uri: str, certs: Path, listen: str) -> None:
    secure = ["--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
              "--token-file", str(certs / "token")]  # fmt: skip
    line = _refused_start(zk_local_uri, "--listen", listen, *secure)
    assert f"--listen {listen} listens on every interface" in line and "add --advertise HOST:PORT" in line, line
    # a wildcard is no better as the advertised address; a fixed advertised port cannot follow a listen port 0
    line = _refused_start(zk_local_uri, "--listen", listen, "--advertise", "0.0.0.0:7000", *secure)
    assert "--advertise 0.0.0.0:7000 is a wildcard address" in line, line
    line = _refused_start(zk_local_uri, "--listen", listen, "--advertise", "proxy1.example:7000", *secure)
    assert "names a fixed port" in line and "--advertise proxy1.example:0" in line, line
    assert list_proxies(zk_local_uri) == []


def test_advertised_address_is_announced_and_named_in_redirects(
    zk_local_uri: str, proxy_process: StartProxy, certs: Path
) -> None:
    _pa, a = proxy_process(
        zk_local_uri,
        "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
        "--token-file", str(certs / "token"), "--advertise", "127.0.0.1:0",
        listen="0.0.0.0:0", conf={"proxyCreateStreamOnWrite": True},
    )  # fmt: skip
    _pb, b = proxy_process(zk_local_uri, conf={"proxyCreateStreamOnWrite": True})
    assert a.startswith("127.0.0.1:") and not a.endswith(":0")
    assert sorted(p.address for p in list_proxies(zk_local_uri)) == sorted([a, b])
    cha, sa = stub(a, tls_ca=(certs / "ca.pem").read_bytes())
    chb, sb = stub(b)
    with cha, chb:
        first = sa.write(pb.WriteRequest(stream="adv", data=b"a"), metadata=call_metadata(TOKEN), timeout=T)
        assert first.header.code == pb.SUCCESS, first
        # the lock owner id is the advertised address: the other proxy redirects there, not to 0.0.0.0
        moved = sb.write(pb.WriteRequest(stream="adv", data=b"b"), timeout=T)
        assert (moved.header.code, moved.header.location) == (pb.FOUND, a), moved
        hs = sa.handshake(pb.ClientInfo(get_ownerships=True), metadata=call_metadata(TOKEN), timeout=T)
        assert dict(hs.ownerships) == {"adv": a}


def test_parse_advertise() -> None:
    assert parse_advertise(None, "127.0.0.1:0") is None
    assert parse_advertise("proxy1.example:0", "0.0.0.0:0") == ("proxy1.example", 0)  # 0: the port bound
    assert parse_advertise("proxy1.example:7000", "0.0.0.0:7001") == ("proxy1.example", 7000)  # a port forward
    assert parse_advertise("fd00::5:7000", "[::]:7000") == ("[fd00::5]", 7000)
    for advertise, listen, needle in [
        (None, "0.0.0.0:7000", "--listen 0.0.0.0:7000 listens on every interface"),
        (None, "[::]:7000", "--listen [::]:7000 listens on every interface"),
        (None, ":::7000", "add --advertise HOST:PORT"),
        ("proxy1.example", "0.0.0.0:7000", "--advertise must be HOST:PORT"),
        ("proxy1.example:x", "0.0.0.0:7000", "--advertise must be HOST:PORT"),
        ("proxy1.example:70000", "0.0.0.0:7000", "--advertise must be HOST:PORT"),
        ("[::]:7000", "0.0.0.0:7000", "is a wildcard address"),
        ("proxy1.example:7000", "0.0.0.0:0", "give --listen a fixed port, or use --advertise proxy1.example:0"),
    ]:
        with pytest.raises(InvalidArgumentError) as info:
            parse_advertise(advertise, listen)
        assert needle in str(info.value), (advertise, listen, str(info.value))


def test_security_refusal_names_what_is_missing(tmp_path: Path) -> None:
    tls = TlsFiles(tmp_path / "cert.pem", tmp_path / "key.pem")
    check_security("127.0.0.1", None, None)  # loopback: nothing needed
    check_security("192.0.2.1", tls, "t")
    messages = {}
    for name, got_tls, token in [("neither", None, None), ("no tls", None, "t"), ("no token", tls, None)]:
        with pytest.raises(InvalidArgumentError) as info:
            check_security("192.0.2.1", got_tls, token)
        messages[name] = str(info.value)
    assert messages == {
        "neither": "listening on non-loopback address 192.0.2.1 needs TLS and a shared token: add "
        "--tls-cert/--tls-key and --token-file FILE (or set $DLOG_PROXY_TOKEN)",
        "no tls": "listening on non-loopback address 192.0.2.1 needs TLS as well as the token: add "
        "--tls-cert/--tls-key",
        "no token": "listening on non-loopback address 192.0.2.1 needs a shared token as well as TLS: add "
        "--token-file FILE (or set $DLOG_PROXY_TOKEN)",
    }
