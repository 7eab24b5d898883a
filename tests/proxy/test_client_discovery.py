"""The client finds the proxies announced in a real ZooKeeper namespace (dl_proxy.registry's ephemeral nodes) and
keeps its ring in step with them: a new proxy joins, a draining one (WRITE_ONLY) leaves the ring but stays known,
a vanished one leaves both."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import storage
from dl_proxy.discovery import Membership, StaticDiscovery, ZooKeeperDiscovery
from dl_proxy.registry import Announcement
from storage.errors import InvalidArgumentError
from tests.zk import ZooKeeperServer


@pytest.fixture
def zk_uri(zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> str:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    return uri


class _Changes:
    """Memberships reported by a discovery, with a wait for the one wanted."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.seen: list[Membership] = []

    def __call__(self, m: Membership) -> None:
        with self.cv:
            self.seen.append(m)
            self.cv.notify_all()

    def wait_for(self, writable: set[str], known: set[str]) -> Membership:
        with self.cv:
            ok = self.cv.wait_for(
                lambda: bool(self.seen) and self.seen[-1].writable == writable and self.seen[-1].known == known,
                timeout=30,
            )
            assert ok, f"discovery never showed writable={writable} known={known}: {self.seen[-1:]}"
            return self.seen[-1]


def test_zookeeper_discovery_follows_announcements(zk_uri: str) -> None:
    with storage.open_namespace(zk_uri) as ns:
        a = Announcement(ns.metastore, "127.0.0.1:41001", tls=False)
        a.start()
        disc = ZooKeeperDiscovery(zk_uri, refresh_s=0.5)
        changes = _Changes()
        try:
            disc.start(changes)
            changes.wait_for({"127.0.0.1:41001"}, {"127.0.0.1:41001"})
            b = Announcement(ns.metastore, "127.0.0.1:41002", tls=True)
            b.start()
            m = changes.wait_for({"127.0.0.1:41001", "127.0.0.1:41002"}, {"127.0.0.1:41001", "127.0.0.1:41002"})
            assert m.tls == frozenset({"127.0.0.1:41002"})
            a.set_status("WRITE_ONLY")  # draining: no new streams, still serving its own
            changes.wait_for({"127.0.0.1:41002"}, {"127.0.0.1:41001", "127.0.0.1:41002"})
            b.close()
            changes.wait_for(set(), {"127.0.0.1:41001"})
        finally:
            disc.close()
            a.close()
        assert "announced in" in disc.describe()


def test_static_discovery_checks_addresses() -> None:
    got: list[Membership] = []
    StaticDiscovery(["h1:1", " h2:2"]).start(got.append)
    assert got[0].writable == got[0].known == frozenset({"h1:1", "h2:2"})
    with pytest.raises(InvalidArgumentError, match="host:port"):
        StaticDiscovery(["nohostport"])
    with pytest.raises(InvalidArgumentError, match="at least one"):
        StaticDiscovery([])


def test_discovery_of_a_missing_namespace_fails_clearly(zk_server: ZooKeeperServer) -> None:
    with pytest.raises(storage.errors.NamespaceNotFoundError):
        ZooKeeperDiscovery(f"distributedlog://{zk_server.hosts}/no/such/ns")
