"""The metadata tree of a log is exactly DistributedLog's ZooKeeper layout, path by
path and byte by byte, on every backend."""

from __future__ import annotations

import pytest

import storage
from storage import DLSN, LogRecord


def tree(ns: storage.Namespace, path: str = "/") -> dict[str, bytes]:
    """Every node under ``path`` with its data."""
    out = {path: ns.metastore.get(path).value}
    for child in ns.metastore.children(path):
        out.update(tree(ns, path.rstrip("/") + "/" + child))
    return out


def test_znode_tree_of_a_log(ns: storage.Namespace) -> None:
    dlm = ns.open_log("app/events")
    with dlm.open_writer() as w:  # segment 1: txids 10..12, completed
        for t in (10, 11, 12):
            w.write(LogRecord(t, b"x"))
    aw = dlm.open_async_writer()  # segment 2: txid 20, in progress
    aw.write(LogRecord(20, b"y")).result(10)
    seg1, seg2 = dlm.log_segments()
    nodes = tree(ns)
    got = {p: d for p, d in nodes.items() if p.startswith("/app") and "/lock/" not in p}
    root = "/app/events/<default>"
    completed_vsc = 5 | (3 << 32)  # version 5, status active, region 0, 3 records
    assert got == {
        "/app": b"",
        "/app/events": b"",
        root: b"",
        f"{root}/version": b"\xff\xff\xff\xff",
        f"{root}/maxtxid": b"20",
        f"{root}/ledgers": b"2",
        f"{root}/ledgers/logrecs_000000000000000001": (
            f"{completed_vsc};{seg1.ledger_id};10;12;{seg1.completion_time_ms};1;2;0;0;0;0".encode()
        ),
        f"{root}/ledgers/inprogress_000000000000000002": f"5;{seg2.ledger_id};20;2;0;0;-1".encode(),
        f"{root}/lock": b"",
        f"{root}/readLock": b"",
        f"{root}/allocation": b"",
    }
    assert seg1.last_dlsn == DLSN(1, 2, 0) and seg2.in_progress
    # Where the backend shows lock members (ZooKeeper), the writer holds exactly one.
    members = [p for p in nodes if p.startswith(f"{root}/lock/")]
    assert len(members) <= 1 and all(p.rsplit("/", 1)[1].startswith("member_") for p in members)
    # After truncation the completed znode is rewritten with the status bits and min active DLSN.
    assert aw.truncate(DLSN(1, 1, 0)).result(10)
    data = ns.metastore.get(f"{root}/ledgers/logrecs_000000000000000001").value
    vsc = 5 | (1 << 8) | (3 << 32)
    assert data == f"{vsc};{seg1.ledger_id};10;12;{seg1.completion_time_ms};1;2;0;1;0;0".encode()
    aw.close()
    assert ns.metastore.get(f"{root}/ledgers").value == b"2"
    assert ns.metastore.children(f"{root}/ledgers") == ["logrecs_000000000000000001", "logrecs_000000000000000002"]
    assert ns.list_logs() == ["app/events"]


def test_segment_metadata_older_than_version_2_read_only_with_skip_min_version_check(
    ns: storage.Namespace, ns_uri: str
) -> None:
    """A segment written in metadata version 1 (by a very old DistributedLog) is refused, as DistributedLog refuses
    it, unless ``ledgerMetadataSkipMinVersionCheck``: then its metadata is read, by the log and by the catalog that
    plans Spark reads (version 1 holds no entry ids: what a reader can make of such a segment is not claimed)."""
    dlm = ns.open_log("old")
    with dlm.open_writer() as w:
        for t in (1, 2, 3):
            w.write(LogRecord(t, b"v%d" % t))
    (seg,) = dlm.log_segments()
    ns.metastore.set(seg.path, seg.serialize(version=1))
    with pytest.raises(storage.UnsupportedMetadataVersionError):
        ns.open_log("old").log_segments()
    with pytest.raises(storage.UnsupportedMetadataVersionError):
        ns.catalog().segments(["old"])
    with storage.open_namespace(ns_uri, {"ledgerMetadataSkipMinVersionCheck": True}, create=False) as old_ok:
        (old,) = old_ok.open_log("old").log_segments()
        assert (old.version, old.ledger_id, old.first_txid, old.last_txid) == (1, seg.ledger_id, 1, 3)
        assert [s.version for s in old_ok.catalog().segments(["old"])["old"]] == [1]


def test_a_segment_completed_between_listing_and_reading_is_still_listed(
    ns: storage.Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader lists a log's segment nodes, then reads them; a writer completing a segment in between replaces its
    in-progress node with the completed one. The list is taken again instead of leaving the segment out, so a
    reader opened at that instant reads every record (it used to find the log empty)."""
    ns.create_log("race")
    dlm = ns.open_log("race")
    w = dlm.open_writer()
    for txid in range(1, 6):
        w.write(LogRecord(txid, b"r%d" % txid))
    w.flush()
    store = ns.metastore
    real_get_many = store.get_many
    completed: list[str] = []

    def get_many(paths: list[str]) -> list[object]:
        if not completed and any("inprogress" in p for p in paths):
            completed.append(paths[0])
            w.close()  # the segment completes between the listing and this read
        return real_get_many(paths)  # type: ignore[return-value]

    monkeypatch.setattr(store, "get_many", get_many)
    with ns.open_log("race").open_reader(DLSN.INITIAL) as r:
        got = r.read_bulk(100, non_blocking=True)
    assert completed, "the race was not exercised"
    assert [rec.txid for rec in got] == [1, 2, 3, 4, 5]
    assert [s.in_progress for s in dlm.log_segments()] == [False]
