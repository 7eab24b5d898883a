"""Ephemeral nodes (``MetadataStore.create_ephemeral``) on both backends: visible to other clients, gone when
the creating store closes; on ZooKeeper also when its session expires or its process is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from storage.errors import InvalidArgumentError, NodeExistsError, NoNodeError
from storage.metastore.base import MetadataStore
from storage.metastore.sqlite import SqliteMetadataStore
from tests.storage.metastore._stores import OpenZkStore, until
from tests.zk import ZooKeeperServer, expire_session


def _pair(backend: str, request: pytest.FixtureRequest) -> tuple[MetadataStore, MetadataStore]:
    if backend == "sqlite":
        db: str = request.getfixturevalue("db")
        a, b = SqliteMetadataStore(db), SqliteMetadataStore(db)
        request.addfinalizer(a.close)
        request.addfinalizer(b.close)
        return a, b
    open_zk: OpenZkStore = request.getfixturevalue("open_zk_store")
    return open_zk(), open_zk()


@pytest.mark.parametrize("backend", ["sqlite", "zookeeper"])
def test_ephemeral_node_lives_while_its_store_is_open(backend: str, request: pytest.FixtureRequest) -> None:
    a, b = _pair(backend, request)
    a.create("/proxies")
    a.create_ephemeral("/proxies/h:1", b"one")
    assert b.get("/proxies/h:1").value == b"one"
    assert b.children("/proxies") == ["h:1"]
    with pytest.raises(NodeExistsError):
        b.create_ephemeral("/proxies/h:1", b"two")
    with pytest.raises(NoNodeError):
        a.create_ephemeral("/missing/h:2")
    with pytest.raises(InvalidArgumentError):
        a.create_ephemeral("/")
    a.set("/proxies/h:1", b"changed")
    assert b.get("/proxies/h:1").value == b"changed"
    a.close()
    assert b.exists("/proxies/h:1") is None
    assert b.children("/proxies") == []


def test_zookeeper_ephemeral_node_goes_with_an_expired_session(
    open_zk_store: OpenZkStore, zk_server: ZooKeeperServer
) -> None:
    a, b = open_zk_store(), open_zk_store()
    a.create_ephemeral("/e", b"x")
    expire_session(a, zk_server.hosts)
    assert until(lambda: b.exists("/e") is None)
    a.create_ephemeral("/e", b"again")  # the new session may announce itself again
    assert b.get("/e").value == b"again"


def test_zookeeper_ephemeral_node_goes_with_a_killed_process(
    open_zk_store: OpenZkStore, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    b = open_zk_store()
    code = (
        "import sys, time\n"
        "from storage.metastore.zookeeper import ZooKeeperMetadataStore\n"
        f"s = ZooKeeperMetadataStore({zk_server.hosts!r}, {zk_chroot!r}, session_timeout_s=2.0)\n"
        "s.create_ephemeral('/k', b'k')\n"
        "print('READY', flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "READY"
        assert b.get("/k").value == b"k"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
        assert until(lambda: b.exists("/k") is None, 30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
