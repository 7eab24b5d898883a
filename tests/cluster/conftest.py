"""The simulated cluster for the tests in ``tests/cluster/``: one per test session, torn down at its end.

* ``cluster`` (session): :class:`tools.cluster.Cluster` ``t`` on ``10.251.200.0/24`` (override with
  ``$DLC_TEST_ID``/``$DLC_TEST_SUBNET``; while another live test session runs ``t``, ``t1`` on
  ``10.251.201.0/24`` and so on): ZooKeeper ×3, Ceph mon + 3 OSDs, Spark master + 2 workers, 2 proxy hosts
  (for ``dlog proxy``), 3 client hosts.
  It FAILS (never skips) when this is not root or something is missing (the message names the package).
  Whatever an earlier, killed session left of that cluster is cleaned first; the daemons get SIGKILL if
  this pytest process dies (``die_with_parent``).
* ``healthy_cluster`` (function): the cluster with no active fault and every component running, before and
  after the test (a test's faults are healed even when it fails).
* ``cluster_namespace`` (function): a fresh DistributedLog namespace bound to the pool (``dlog bind`` on a
  client host); its URI.

A failed test that used the cluster gets the cluster's status (components, ZooKeeper modes, OSDs, faults)
in its report.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import uuid
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from tools.cluster import Cluster, ClusterError, cleanup, preflight
from tools.netsim.sweep import owner_alive

_KEY = pytest.StashKey[Cluster]()
_IDS: list[str] = []


def _choose() -> tuple[str, str]:
    """The cluster id and subnet of this session: ``$DLC_TEST_ID``/``$DLC_TEST_SUBNET``, else the first of
    ``t``/10.251.200.0/24, ``t1``/10.251.201.0/24... that no other live test session runs."""
    if "DLC_TEST_ID" in os.environ:
        return os.environ["DLC_TEST_ID"], os.environ.get("DLC_TEST_SUBNET", "10.251.200.0/24")
    for i in range(10):
        cid = "t" if i == 0 else f"t{i}"
        if owner_alive(cid) is None:
            return cid, f"10.251.{200 + i}.0/24"
    pytest.fail("ten other test sessions run simulated clusters t..t9", pytrace=False)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The session's simulated cluster (FAILS with the reason when it cannot run here)."""
    problems = preflight(spark=True)
    if problems:
        pytest.fail(
            "the simulated cluster cannot run here:\n  " + "\n  ".join(problems) + "\n(`make cluster-deps` installs "
            "iptables, nftables; `make zookeeper ceph venv` the rest; run as root)",
            pytrace=False,
        )
    cid, subnet = _choose()
    cleanup(cid)  # a killed earlier session's leftovers
    _IDS.append(cid)
    c = Cluster(cid, subnet, proxies=2, die_with_parent=True, verbose=True)
    atexit.register(_cleanup_quietly)
    try:
        c.up()
    except ClusterError as e:
        pytest.fail(f"the simulated cluster did not come up: {e}", pytrace=False)
    try:
        yield c
    finally:
        c.down()


def _cleanup_quietly() -> None:
    for cid in _IDS:
        with contextlib.suppress(Exception):
            cleanup(cid)


@pytest.fixture
def healthy_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The cluster without active faults and with every component running, also after the test."""
    request.node.stash[_KEY] = cluster
    _make_healthy(cluster)
    yield cluster
    _make_healthy(cluster)


def _make_healthy(c: Cluster) -> None:
    c.heal()
    for comp in c.components.values():
        if comp.pid() is None:
            comp.start()
    c.wait_zk_quorum(timeout=30)


@pytest.fixture
def cluster_namespace(healthy_cluster: Cluster) -> str:
    """The URI of a fresh namespace ``/t-<hex>``, bound to the cluster's pool."""
    return healthy_cluster.bind_namespace(f"/t-{uuid.uuid4().hex[:10]}")


#: Lines the scenarios print that the session's summary repeats (captured output is shown only on failure).
_SUMMARY_PREFIXES = ("CHECK ", "AVAIL ", "NEMESIS ", "SPARK ", "PROXY ", "COLLECTED ")
_SUMMARY: list[tuple[str, list[str]]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Keep each scenario's checker lines for the summary; attach the cluster's status to the report of a failed
    test that used it."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and "cluster" in getattr(item, "fixturenames", ()):
        lines = [ln for ln in report.capstdout.splitlines() if ln.startswith(_SUMMARY_PREFIXES)]
        if lines:
            _SUMMARY.append((item.nodeid, lines))
    c = item.stash.get(_KEY, None)
    if report.failed and c is not None and report.when == "call":
        with contextlib.suppress(Exception):
            report.sections.append(("simulated cluster status", json.dumps(c.status(), indent=1)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One section with every scenario's history-checker line (and its availability / Spark / proxy lines)."""
    if not _SUMMARY:
        return
    terminalreporter.section("history checker, per scenario")
    for nodeid, lines in _SUMMARY:
        terminalreporter.write_line(nodeid)
        for ln in lines:
            terminalreporter.write_line("  " + ln)
