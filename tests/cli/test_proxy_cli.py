"""``dlog write --proxy`` and ``dlog proxy-status`` against real ``dlog proxy`` processes (ZooKeeper namespace
bound to a local segment path): their output, and the errors a new user meets (a refused token, a token that would
travel in plaintext, a missing log, no proxy running) named in the CLI's terms."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import storage
from tests.cli.conftest import Dlog
from tests.proxy.conftest import proxy_process, proxy_processes  # noqa: F401  (the proxy fixtures)
from tests.proxy.test_client_security import _loopback_hostname
from tests.zk import ZooKeeperServer, free_port

ProxyFactory = Callable[..., tuple[Any, str]]


@pytest.fixture
def zk_uri(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> str:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    return uri


def payloads(uri: str, name: str) -> list[bytes]:
    with storage.open_namespace(uri, create=False) as ns, ns.open_log(name) as dlm:
        reader = dlm.open_reader(storage.DLSN.INITIAL)
        try:
            return [r.payload for r in reader.read_bulk(10000, non_blocking=True)]
        finally:
            reader.close()


def test_write_through_discovered_and_listed_proxies(dlog: Dlog, zk_uri: str, proxy_process: ProxyFactory) -> None:  # noqa: F811
    _, a = proxy_process(zk_uri)
    _, b = proxy_process(zk_uri)
    # a bare --proxy (after NAME) finds the proxies announced in the --uri namespace
    res = dlog("--uri", zk_uri, "write", "events", "--create", "--proxy", input="one\ntwo\r\nthree").ok()
    assert res.lines[0].startswith("wrote 3 records through proxies, last DLSN ")
    # --proxy=HOST:PORT,... needs no --uri
    res = dlog("write", "events", f"--proxy={b},{a}", input="four\n").ok()
    assert res.lines[0].startswith("wrote 1 records through proxies")
    assert payloads(zk_uri, "events") == [b"one", b"two", b"three", b"four"]

    status = dlog("--uri", zk_uri, "proxy-status").ok()
    print(status.out)
    proxies = [line.split() for line in status.lines if line.startswith("PROXY ")]
    assert sorted(p[1] for p in proxies) == sorted([a, b])
    assert all(p[2] == "WRITE_AND_ACCEPT" for p in proxies)
    assert status.lines.count("  stream events") == 1
    owner_line = status.lines.index("  stream events") - 1
    assert status.lines[owner_line].endswith("1 streams")


def test_proxy_cli_errors(dlog: Dlog, zk_uri: str, proxy_process: ProxyFactory) -> None:  # noqa: F811
    _, a = proxy_process(zk_uri)
    res = dlog("write", "missing", f"--proxy={a}", input="x\n")
    res.error(
        1, "stdin line 1", "LOG_NOT_FOUND", "create it first (dlog --uri URI create missing), or write with --create"
    )
    assert "create_if_missing" not in res.err  # the Python API's hint, not the CLI's
    res = dlog("--uri", zk_uri, "write", "missing", "--proxy", input="x\n")
    res.error(1, "stdin line 1", f"create it first (dlog --uri {zk_uri} create missing), or write with --create")
    dlog("write", "missing", f"--proxy={a}", "--create", input="x\n").ok()
    dlog("write", "missing", f"--proxy={a}", "--txid-start", "5", input="x\n").error(2, "--txid-start")
    dlog("write", "missing", "--proxy=nohostport", input="x\n").error(1, "host:port")
    dead = f"127.0.0.1:{free_port()}"
    res = dlog("proxy-status", "--proxy", dead, "--timeout", "2")
    assert res.rc == 1
    assert res.lines == [f"PROXY {dead} UNREACHABLE" + res.lines[0].split("UNREACHABLE", 1)[1]]
    assert res.err.startswith("dlog: error: no write proxy answered")


TOKEN_OPTIONS = "give the proxies' shared token with --token-file FILE or $DLOG_PROXY_TOKEN"


def test_refused_token_names_the_token_options(
    dlog: Dlog,
    zk_uri: str,
    proxy_process: ProxyFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    _, a = proxy_process(zk_uri, env={"DLOG_PROXY_TOKEN": "right"}, conf={"proxyCreateStreamOnWrite": True})
    for env in ({}, {"DLOG_PROXY_TOKEN": "wrong"}):
        res = dlog("write", "events", f"--proxy={a}", input="x\n", env=env)
        res.error(1, "stdin line 1", "REQUEST_DENIED (403)", TOKEN_OPTIONS)
        status = dlog("proxy-status", "--proxy", a, env=env)
        assert status.rc == 1
        assert status.lines == [f"PROXY {a} REFUSED (gRPC UNAUTHENTICATED: REQUEST_DENIED: missing or bad auth token)"]
        assert (
            status.err
            == f"dlog: error: refused by every write proxy that answered (a bad or missing token): {TOKEN_OPTIONS}\n"
        )
    (tmp_path / "token").write_text("right\n")
    dlog("write", "events", f"--proxy={a}", "--token-file", str(tmp_path / "token"), input="x\n").ok()
    ok = dlog("proxy-status", "--proxy", a, "--token-file", str(tmp_path / "token")).ok()
    assert ok.lines == [f"PROXY {a} WRITE_AND_ACCEPT 1 streams", "  stream events"]


def test_token_not_sent_in_plaintext_unless_allowed(dlog: Dlog, zk_uri: str, proxy_process: ProxyFactory) -> None:  # noqa: F811
    env = {"DLOG_PROXY_TOKEN": "right"}
    _, a = proxy_process(zk_uri, "--advertise", "proxy.invalid:0", env=env)
    plaintext = (
        f"proxy {a} is not announced with TLS: the token would travel in plaintext; use TLS, or "
        "allow_plaintext_token=True / --allow-plaintext-token"
    )
    dlog("--uri", zk_uri, "write", "events", "--create", "--proxy", input="x\n", env=env).error(1, plaintext)
    status = dlog("--uri", zk_uri, "proxy-status", env=env)
    assert status.rc == 1 and status.lines == [f"PROXY {a} NOT_SENT ({plaintext})"]
    assert status.err == (
        "dlog: error: no write proxy asked: the token would travel in plaintext (use TLS, or --allow-plaintext-token)\n"
    )


def test_plaintext_token_allowed(dlog: Dlog, zk_uri: str, proxy_process: ProxyFactory) -> None:  # noqa: F811
    name = _loopback_hostname()
    if name is None:
        pytest.skip("this machine's name does not resolve to a loopback address")
    env = {"DLOG_PROXY_TOKEN": "right"}
    _, a = proxy_process(zk_uri, "--advertise", f"{name}:0", env=env)
    args = ("--uri", zk_uri, "write", "events", "--create", "--proxy")
    dlog(*args, input="x\n", env=env).error(1, "--allow-plaintext-token")
    dlog(*args, "--allow-plaintext-token", input="x\n", env=env).ok()
    status = dlog("--uri", zk_uri, "proxy-status", "--allow-plaintext-token", env=env).ok()
    assert status.lines == [f"PROXY {a} WRITE_AND_ACCEPT 1 streams", "  stream events"]
    assert payloads(zk_uri, "events") == [b"x"]


def test_no_proxy_running_says_it_once(dlog: Dlog) -> None:
    """No proxy listens: one error line saying so (definitive: nothing written), before any record is sent."""
    dead = f"127.0.0.1:{free_port()}"
    res = dlog("write", "events", f"--proxy={dead}", "--timeout", "30", input="x\n")
    assert res.rc == 1 and res.out == ""
    lines = res.err.splitlines()
    assert len(lines) == 1, res.err
    assert lines[0].startswith(f"dlog: error: no write proxy reachable ({dead}: ") and "nothing written" in lines[0]


def test_proxy_status_help_is_its_own(dlog: Dlog) -> None:
    status_help = dlog("proxy-status", "--help").ok().out
    assert "acknowledged" not in status_help and "(with --proxy)" not in status_help
    assert "Seconds to wait for each proxy's answer." in " ".join(status_help.split())
    write_help = " ".join(dlog("write", "--help").ok().out.split())
    assert "Seconds each record may take to be acknowledged (with --proxy)." in write_help
    assert "--allow-plaintext-token" in write_help and "--allow-plaintext-token" in status_help
