"""Fixtures for the cold storage tests: a cold store of each kind (a filesystem path, and S3 on the session Ceph
cluster's radosgw), and ZooKeeper namespaces bound to local segment files plus such a cold store.

``cold_kind`` is ``file`` or ``s3``; ``cold_uri`` a fresh location of that kind for this test (a directory of
its own, or a prefix of its own in the test bucket); ``cold_conf`` the configuration keys with the S3
credentials; ``cold_store`` an open :class:`storage.cold.ColdStore` there. ``cold_ns_uri`` is a ZooKeeper
namespace bound to ``file://<tmp>/segments`` and ``cold_uri``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import storage
from storage.cold import ColdStore, open_cold_store
from storage.config import Config
from tests.ceph import RadosGateway, radosgw  # noqa: F401
from tests.conftest import BASE_CONF
from tests.zk import ZooKeeperServer

#: Every cold store kind the behaviour suite runs on.
COLD_KINDS = ["file", "s3"]


@pytest.fixture(params=COLD_KINDS)
def cold_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def cold_uri(cold_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if cold_kind == "file":
        path = tmp_path / "cold"
        path.mkdir()
        return f"file://{path}"
    gw: RadosGateway = request.getfixturevalue("radosgw")
    return gw.cold_uri(f"t-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def cold_conf(cold_kind: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """Configuration overrides for this cold store (credentials; short timeouts so an outage fails fast)."""
    conf: dict[str, Any] = {**BASE_CONF, "coldStoreRequestTimeoutSeconds": 3, "coldStoreMaxAttempts": 2}
    if cold_kind == "s3":
        gw: RadosGateway = request.getfixturevalue("radosgw")
        conf.update(coldStoreAccessKey=gw.access_key, coldStoreSecretKey=gw.secret_key)
    return conf


@pytest.fixture
def cold_store(cold_uri: str, cold_conf: dict[str, Any]) -> Iterator[ColdStore]:
    store = open_cold_store(cold_uri, Config.from_dict(cold_conf))
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def cold_ns_uri(
    zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path, cold_uri: str, cold_conf: dict[str, Any]
) -> str:
    """A ZooKeeper namespace bound to local segment files and to ``cold_uri``."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}", conf=cold_conf, cold=cold_uri)
    return uri
