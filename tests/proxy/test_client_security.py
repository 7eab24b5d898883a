"""ProxyClient with TLS, client certificates and the auth token against a real ``dlog proxy`` (certificates made
by the ``openssl`` command, tests/proxy/test_security.py's ``certs``): the client finds the proxy in ZooKeeper,
sees it announce TLS and connects securely; a wrong token fails the write with REQUEST_DENIED (definitive).
The token never travels in plaintext to a non-loopback proxy unless the client allows it: such a write fails at
once with InvalidArgumentError, nothing sent."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dl_proxy import ProxyClient, RequestDeniedError
from dl_proxy._transport import NOT_SENT, REFUSED, UNREACHABLE, failure_kind
from dl_proxy.registry import is_loopback
from storage.errors import InvalidArgumentError
from tests.proxy.conftest import StartProxy
from tests.proxy.test_dedup import _records
from tests.proxy.test_security import TOKEN, certs  # noqa: F401  (the certificates' fixture)


def test_client_over_tls_with_client_certificate_and_token(
    zk_local_uri: str,
    proxy_process: StartProxy,
    certs: Path,  # noqa: F811
) -> None:
    proxy_process(
        zk_local_uri,
        "--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
        "--tls-client-ca", str(certs / "ca.pem"),
        env={"DLOG_PROXY_TOKEN": TOKEN}, conf={"proxyCreateStreamOnWrite": True},
    )  # fmt: skip
    pki = {"tls_ca": str(certs / "ca.pem"), "tls_cert": str(certs / "client.pem"), "tls_key": str(certs / "client.key")}
    with ProxyClient(uri=zk_local_uri, token=TOKEN, **pki) as client:
        dlsns = [f.result(timeout=60) for f in client.write_bulk("secure", [b"s0", b"s1", b"s2"])]
        [status] = client.proxy_status()
        assert status.status == "WRITE_AND_ACCEPT" and "secure" in status.ownerships
    assert dlsns == sorted(dlsns)
    with ProxyClient(uri=zk_local_uri, token="wrong", timeout_s=30, **pki) as denied:
        with pytest.raises(RequestDeniedError) as info:
            denied.write("secure", b"never").result(timeout=60)
        assert info.value.retriable is False
    assert [r.payload for r in _records(zk_local_uri, "secure")] == [b"s0", b"s1", b"s2"]


PLAINTEXT = "is not announced with TLS: the token would travel in plaintext; use TLS, or allow_plaintext_token=True"


def test_token_is_not_sent_in_plaintext_to_a_non_loopback_proxy(zk_local_uri: str, proxy_process: StartProxy) -> None:
    # a proxy announced under a non-loopback name without TLS (the name need not even resolve: nothing is sent)
    _p, addr = proxy_process(zk_local_uri, "--advertise", "proxy.invalid:0", env={"DLOG_PROXY_TOKEN": TOKEN})
    assert addr.startswith("proxy.invalid:")
    with ProxyClient(uri=zk_local_uri, token=TOKEN, timeout_s=30) as client:
        with pytest.raises(InvalidArgumentError) as info:
            client.write("plain", b"never").result(timeout=60)
        assert str(info.value) == f"proxy {addr} {PLAINTEXT} / --allow-plaintext-token"
        assert info.value.retriable is False
        [status] = client.proxy_status()
        assert status.error is not None and failure_kind(status.error) == NOT_SENT, status
    # without a token nothing secret travels: the request goes out (and fails to connect, proxy.invalid)
    with ProxyClient(uri=zk_local_uri, timeout_s=30) as anonymous:
        [status] = anonymous.proxy_status(timeout_s=5)
        assert status.error is not None and failure_kind(status.error) == UNREACHABLE, status


def _loopback_hostname() -> str | None:
    """This machine's name if it resolves to a loopback address (it is no loopback name to the client)."""
    name = socket.gethostname()
    try:
        resolved = socket.gethostbyname(name)
    except OSError:
        return None
    return name if is_loopback(resolved) and not is_loopback(name) else None


def test_plaintext_token_when_allowed_and_to_loopback(zk_local_uri: str, proxy_process: StartProxy) -> None:
    name = _loopback_hostname()
    if name is None:
        pytest.skip("this machine's name does not resolve to a loopback address")
    _p, addr = proxy_process(
        zk_local_uri, "--advertise", f"{name}:0", env={"DLOG_PROXY_TOKEN": TOKEN},
        conf={"proxyCreateStreamOnWrite": True},
    )  # fmt: skip
    with ProxyClient(uri=zk_local_uri, token=TOKEN, allow_plaintext_token=True) as allowed:
        assert allowed.write("plain", b"p0").result(timeout=60) is not None
    with ProxyClient(uri=zk_local_uri, token=TOKEN) as refused, pytest.raises(InvalidArgumentError, match=PLAINTEXT):
        refused.write("plain", b"never").result(timeout=60)
    # the same proxy by its loopback address: a token may go there in plaintext
    port = addr.rpartition(":")[2]
    with ProxyClient(proxies=[f"127.0.0.1:{port}"], token=TOKEN) as loopback:
        assert loopback.write("plain", b"p1").result(timeout=60) is not None
        with ProxyClient(proxies=[f"127.0.0.1:{port}"], token="wrong") as wrong:
            [status] = wrong.proxy_status()
            assert status.error is not None and failure_kind(status.error) == REFUSED, status
            with pytest.raises(RequestDeniedError):
                wrong.write("plain", b"never").result(timeout=60)
    assert [r.payload for r in _records(zk_local_uri, "plain")] == [b"p0", b"p1"]
