"""ProxyClient with TLS, client certificates and the auth token against a real ``dlog proxy`` (certificates made
by the ``openssl`` command, tests/proxy/test_security.py's ``certs``): the client finds the proxy in ZooKeeper,
sees it announce TLS and connects securely; a wrong token fails the write with REQUEST_DENIED (definitive)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dl_proxy import ProxyClient, RequestDeniedError
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
