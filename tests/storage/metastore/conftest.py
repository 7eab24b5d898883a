"""Fixtures of the metadata store tests: the SQLite database path and ZooKeeper stores on a chroot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.metastore.zookeeper import ZooKeeperMetadataStore
from tests.storage.metastore._stores import ZK_FAST, OpenZkStore
from tests.zk import ZooKeeperServer


@pytest.fixture
def db(tmp_path: Path) -> str:
    """The path of this test's SQLite metadata database."""
    return str(tmp_path / "meta.db")


@pytest.fixture
def open_zk_store(zk_server: ZooKeeperServer, zk_chroot: str) -> Iterator[OpenZkStore]:
    """Opens ZooKeeper stores (each its own client and session) on this test's chroot, with
    ``ZK_FAST`` settings (``root`` and any setting may be overridden); closes them afterwards."""
    stores: list[ZooKeeperMetadataStore] = []

    def make(**settings: Any) -> ZooKeeperMetadataStore:
        root = settings.pop("root", zk_chroot)
        s = ZooKeeperMetadataStore(zk_server.hosts, root, **{**ZK_FAST, **settings})
        stores.append(s)
        return s

    yield make
    for s in stores:
        s.close()
