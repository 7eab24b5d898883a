"""``dlog write --proxy`` and ``dlog proxy-status`` against real ``dlog proxy`` processes (ZooKeeper namespace
bound to a local segment path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import storage
from tests.cli.conftest import Dlog
from tests.proxy.conftest import proxy_process, proxy_processes  # noqa: F401  (the proxy fixtures)
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
    dlog("write", "missing", f"--proxy={a}", input="x\n").error(1, "stdin line 1", "LOG_NOT_FOUND")
    dlog("write", "missing", f"--proxy={a}", "--txid-start", "5", input="x\n").error(2, "--txid-start")
    dlog("write", "missing", "--proxy=nohostport", input="x\n").error(1, "host:port")
    dead = f"127.0.0.1:{free_port()}"
    res = dlog("proxy-status", "--proxy", dead, "--timeout", "2")
    assert res.rc == 1
    assert res.lines == [f"PROXY {dead} UNREACHABLE" + res.lines[0].split("UNREACHABLE", 1)[1]]
    assert res.err.startswith("dlog: error: no write proxy answered")
