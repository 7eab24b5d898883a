"""Security of ``dlog proxy`` with real certificates made here by the ``openssl`` command: TLS (server certificate,
optional client certificates) and the shared token. A bad or missing token answers REQUEST_DENIED (handshake:
UNAUTHENTICATED) and writes nothing; a client without a certificate is refused when one is required."""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest

from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.registry import list_proxies
from tests.proxy.conftest import StartProxy, call_metadata, stub
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
        "--token-file", str(certs / "token"),
        listen="0.0.0.0:0", conf={"proxyCreateStreamOnWrite": True},
    )  # fmt: skip
    port = addr.rpartition(":")[2]
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
