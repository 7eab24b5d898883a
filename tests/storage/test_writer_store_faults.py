"""What a writer's caller sees when the segment store fails under it (ZooKeeper + Ceph RADOS, two of three OSDs
down): errors that say whether trying again can succeed, and a writer opened again after the outage that recovers
every acknowledged record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import storage
from storage.segstore.rados import RadosLocation
from tests.conftest import BASE_CONF
from tests.zk import ZooKeeperServer

CONF = {**BASE_CONF, "radosOpTimeoutSeconds": 3, "zkSessionTimeoutSeconds": 30}


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The session's Ceph cluster; every OSD is up again when the test ends."""
    c = request.getfixturevalue("ceph_cluster")
    try:
        yield c
    finally:
        c.revive()


def test_a_store_outage_gives_retriable_errors_and_a_reopened_writer_recovers(
    cluster: Any, zk_server: ZooKeeperServer, zk_chroot: str, rados_location: RadosLocation
) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=rados_location.uri())
    with storage.open_namespace(uri, CONF) as ns:
        dlm = ns.open_log("events")
        writer = dlm.open_async_writer()
        acked = [f.result(timeout=60) for f in [writer.write(storage.LogRecord(i, b"%d" % i)) for i in range(50)]]
        for osd in (1, 2):
            cluster.kill_osd(osd)
        for osd in (1, 2):
            cluster.wait_osd_up(osd, up=False, timeout=60)

        # the write in flight when the store stops answering: its outcome is unknown, and trying later can succeed
        with pytest.raises(storage.DLError) as first:
            writer.write(storage.LogRecord(50, b"50")).result(timeout=60)
        assert first.value.retriable, repr(first.value)
        # every later write on this writer: refused at once, retriable, saying what to do
        with pytest.raises(storage.WriteError) as later:
            writer.write(storage.LogRecord(51, b"51")).result(timeout=60)
        assert later.value.retriable is True
        assert "close this writer and open a new one" in str(later.value)
        assert "timed out" in str(later.value)
        writer.close()  # leaves the segment for recovery

        for osd in (1, 2):
            cluster.start_osd(osd)
        cluster.wait_osds_up(3, timeout=120)
        with dlm.open_writer() as again:  # recovery fences the failed segment and settles the unknown write
            again.write(storage.LogRecord(52, b"52"))
            again.flush()
        with dlm.open_reader(storage.DLSN.INITIAL) as reader:
            got = reader.read_bulk(1000, non_blocking=True)
    payloads = [r.payload for r in got]
    assert [r.dlsn for r in got[:50]] == acked
    assert payloads[:50] == [b"%d" % i for i in range(50)]
    assert payloads[-1] == b"52" and payloads[50:-1] in ([], [b"50"])  # the unknown write at most once
    assert b"51" not in payloads
