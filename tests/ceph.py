"""A private, real Ceph cluster for tests (one monitor, three BlueStore OSDs, cephx), and pytest fixtures.

The cluster is :class:`tools.ceph_cluster.CephCluster` (see its docstring: what it starts, ports, memory,
cephx users, traps). One cluster serves the whole test session, in a temporary directory; tests keep
out of each other's way with a RADOS namespace each, in the one pool ``ceph_cluster.pool`` (replicated,
size 3, min_size 2).

Fixtures (import them into a conftest.py)::

    from tests.ceph import ceph_cluster, rados_namespace  # noqa: F401

* ``ceph_cluster`` (session): the running cluster; FAILS (does not skip) when Ceph or Debian's ``rados``
  module is not installed (``make ceph``). Clients connect as the restricted user::

      rados.Rados(conffile=str(c.conf_path), name=c.client_name, conf={"keyring": str(c.client_keyring)})

  (``client_mount_timeout``/``rados_mon_op_timeout`` bound the connect: ``Rados.connect(timeout=...)``
  ignores its argument). Tests may kill, stop and restart OSDs (``kill_osd``, ``start_osd``,
  ``wait_osd_up``, ``wait_clean``); the next test's ``rados_namespace`` revives them.
* ``radosgw`` (session): an S3 endpoint (Ceph's ``radosgw``, on loopback and a free port) on the session cluster,
  with a user and a bucket: :class:`tools.ceph.rgw.RadosGateway` (``endpoint``, ``access_key``, ``secret_key``,
  ``bucket``, ``cold_uri(prefix)``). FAILS when the ``radosgw`` package is missing (``make ceph``). A test that
  stops it (``ceph_cluster.stop_radosgw()``) starts it again (``ceph_cluster.start_radosgw()``) before it ends.
* ``rados_namespace`` (function): a fresh namespace name ``t-<hex>`` for this test, on a cluster whose
  OSDs are all up (OSDs that an earlier test left killed or SIGSTOPped are restarted or continued first).

The daemons die with the pytest process even when it is killed hard (``setpriv --pdeathsig``), and an
``atexit`` hook stops them when the session ends without fixture teardown. A session killed by a signal
(SIGTERM from ``timeout``, SIGKILL) leaves its directory behind; the next session deletes such
directories (those whose monitor no longer runs).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.ceph.rgw import RadosGateway
from tools.ceph_cluster import INSTALL_HINT, CephCluster, CephClusterError, missing_programs

__all__ = ["CephCluster", "RadosGateway", "ceph_cluster", "rados_namespace", "radosgw"]

#: The session cluster's directory is a fresh ``<tmp>/ceph-test-XXXXXXXX``.
_DIR_PREFIX = "ceph-test-"


def _check_installed() -> None:
    """Fail the requesting test (with an install hint) when Ceph or the ``rados`` module is missing."""
    missing = missing_programs()
    if missing:
        pytest.fail(f"{INSTALL_HINT} (missing: {', '.join(missing)})", pytrace=False)
    from storage.errors import SegmentStoreError
    from storage.segstore._rados_binding import load_rados

    try:
        load_rados()
    except SegmentStoreError as e:
        pytest.fail(f"cannot load the rados module ({e}). {INSTALL_HINT}", pytrace=False)


def _sweep_stale_clusters(prefix: str) -> None:
    """Delete the directories of earlier sessions' clusters whose monitor is gone (a session killed by a
    signal runs no teardown: its daemons die with it, but its directory stays)."""
    for d in Path(tempfile.gettempdir()).glob(prefix + "*"):
        if not (d / "pids" / "mon.a").is_file():
            continue  # not started yet, or already stopped and about to be deleted
        stale = CephCluster(d)
        if "mon.a" not in stale.pids():
            with contextlib.suppress(Exception):
                stale.wipe()


def _stop_quietly(cluster: CephCluster) -> None:
    with contextlib.suppress(Exception):
        cluster.stop()


@pytest.fixture(scope="session")
def ceph_cluster() -> Iterator[CephCluster]:
    """A private Ceph cluster for the whole test session (FAILS if Ceph is not installed)."""
    _check_installed()
    # a short path: the daemons' admin sockets live under it (unix socket paths are limited to 107 bytes)
    _sweep_stale_clusters(_DIR_PREFIX)
    directory = Path(tempfile.mkdtemp(prefix=_DIR_PREFIX))
    cluster = CephCluster(directory, cephx=True, die_with_parent=True)
    atexit.register(_stop_quietly, cluster)
    try:
        cluster.start()
    except CephClusterError as e:
        _stop_quietly(cluster)
        pytest.fail(f"could not start the test Ceph cluster (logs kept in {directory / 'log'}):\n{e}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def rados_namespace(ceph_cluster: CephCluster) -> Iterator[str]:
    """A RADOS namespace of its own for this test (in ``ceph_cluster.pool``), all OSDs up."""
    ceph_cluster.revive()
    yield f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def radosgw(ceph_cluster: CephCluster) -> RadosGateway:
    """The session cluster's S3 gateway (started once; stopped with the cluster)."""
    if shutil.which("radosgw") is None:
        pytest.fail(f"radosgw is not installed. {INSTALL_HINT}", pytrace=False)
    try:
        return ceph_cluster.start_radosgw()
    except CephClusterError as e:
        pytest.fail(f"could not start radosgw on the test Ceph cluster:\n{e}", pytrace=False)
