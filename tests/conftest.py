"""Shared fixtures: fresh namespaces on real stores (no mocks)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from storage.segstore.rados import RadosLocation  # noqa: E402
from tests.ceph import CephCluster, ceph_cluster, rados_namespace  # noqa: E402, F401
from tests.zk import ZooKeeperServer, pytest_runtest_makereport, zk_chroot, zk_server  # noqa: E402, F401

#: Spark gives the Python worker it starts for a Python data source's planning a fixed 10 s to connect back
#: (PythonWorkerFactory; no setting changes it). On a loaded two-core machine that interpreter start can take
#: longer, and Spark fails the query with this error before any code of this project ran. A test that fails with
#: exactly this error runs once more (pytest-rerunfailures, reported as a rerun); any other failure fails it.
SPARK_WORKER_START_TIMEOUT = r"Python worker failed to connect back"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=[SPARK_WORKER_START_TIMEOUT]))


#: Every test that takes a namespace runs on every backend: embedded (SQLite + local files),
#: ZooKeeper with local files, and ZooKeeper with Ceph RADOS (the several-machines setup).
BACKENDS = ["embedded", "zookeeper", "zookeeper-rados"]

# DistributedLog's test base config (TestDistributedLogBase): small buffers, short lock timeout.
BASE_CONF = {
    "readAheadMaxRecords": 1000,
    "readAheadBatchSize": 10,
    "lockTimeoutSeconds": 1,
    "writerOutputBufferSize": 0,
    "readAheadWaitTime": 50,
    "zkSessionTimeoutSeconds": 4,
}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The metadata backend of this test's namespace."""
    return str(request.param)


@pytest.fixture
def ns_uri(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """URI of a fresh namespace: embedded, or a ZooKeeper chroot of its own bound to a
    segment directory of its own or to a RADOS namespace of its own."""
    if backend == "embedded":
        return f"distributedlog-local://{tmp_path / 'ns'}"
    server: ZooKeeperServer = request.getfixturevalue("zk_server")
    chroot: str = request.getfixturevalue("zk_chroot")
    uri = f"distributedlog://{server.hosts}{chroot}"
    if backend == "zookeeper-rados":
        location: RadosLocation = request.getfixturevalue("rados_location")
        storage.bind_namespace(uri, segments=location.uri())
    else:
        storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    return uri


@pytest.fixture
def rados_location(request: pytest.FixtureRequest) -> RadosLocation:
    """A RADOS namespace of its own on the session's cluster, as the restricted cephx user."""
    cluster: CephCluster = request.getfixturevalue("ceph_cluster")
    namespace: str = request.getfixturevalue("rados_namespace")
    return RadosLocation(
        cluster.pool, str(cluster.conf_path), cluster.client_id, str(cluster.client_keyring), namespace
    )


@pytest.fixture
def ns(ns_uri: str) -> Iterator[storage.Namespace]:
    """A fresh namespace with the test base config."""
    namespace = storage.open_namespace(ns_uri, BASE_CONF)
    try:
        yield namespace
    finally:
        namespace.close()


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """Environment for child Python processes that import this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(autouse=True)
def _no_producer_outlives_its_test() -> Iterator[None]:
    """A fan-in test that fails before its producer processes finished does not leave them writing."""
    yield
    if "tests.proxy._fanin" in sys.modules:
        sys.modules["tests.proxy._fanin"].kill_leftover_producers()
