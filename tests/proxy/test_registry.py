"""Proxy announcements (dl_proxy.registry) on a real ZooKeeper: the node's JSON, status changes, the node put back
after the session expired, a stale node of a dead proxy at the same address replaced, and list_proxies."""

from __future__ import annotations

import json

import pytest

from dl_proxy.registry import PROXIES_PATH, Announcement, ProxyInfo, list_proxies, read_proxies
from storage.errors import InvalidArgumentError
from tests.storage.metastore._stores import OpenZkStore, until
from tests.zk import ZooKeeperServer, expire_session


def test_announcement_lifecycle(open_zk_store: OpenZkStore, zk_server: ZooKeeperServer) -> None:
    mine, other = open_zk_store(), open_zk_store()
    ann = Announcement(mine, "127.0.0.1:4001", tls=True)
    ann.start()
    doc = json.loads(other.get(f"{PROXIES_PATH}/127.0.0.1:4001").value)
    assert doc == {
        "address": "127.0.0.1:4001",
        "status": "WRITE_AND_ACCEPT",
        "tls": True,
        "started_ms": doc["started_ms"],
    }
    ann.set_status("WRITE_ONLY")
    assert [(p.address, p.status, p.tls) for p in read_proxies(other)] == [("127.0.0.1:4001", "WRITE_ONLY", True)]
    expire_session(mine, zk_server.hosts)  # the ephemeral node goes with the session ...
    assert until(lambda: [p.status for p in read_proxies(other)] == ["WRITE_ONLY"])  # ... and is announced again
    assert other.exists(f"{PROXIES_PATH}/127.0.0.1:4001") is not None
    ann.close()
    assert read_proxies(other) == []


def test_stale_node_of_a_dead_proxy_is_replaced(open_zk_store: OpenZkStore) -> None:
    dead, mine = open_zk_store(), open_zk_store()
    Announcement(dead, "127.0.0.1:4002", tls=False).start()  # its session lives on: a proxy killed a moment ago
    ann = Announcement(mine, "127.0.0.1:4002", tls=False)
    ann.start()  # this process now holds the port: the old node is replaced
    dead.close()
    assert until(lambda: len(read_proxies(mine)) == 1)
    assert read_proxies(mine)[0].started_ms == ann.info.started_ms
    ann.close()


def test_bad_announcements_and_list_proxies_input(open_zk_store: OpenZkStore) -> None:
    store = open_zk_store()
    store.create(PROXIES_PATH)
    store.create(f"{PROXIES_PATH}/garbage:1", b"not json")
    assert read_proxies(store) == []  # skipped (logged)
    for bad in ("nohost", "h:0", "h:port", "a/b:1", 5):
        with pytest.raises(InvalidArgumentError):
            Announcement(store, bad, tls=False)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        ProxyInfo.from_json(b'{"address": "h:1", "status": "SLEEPING", "tls": false, "started_ms": 1}')
    with pytest.raises(InvalidArgumentError):
        list_proxies(42)
