"""Stage-then-publish: staged records are invisible until published, published atomically with
a commit record, in order, and never twice."""

from __future__ import annotations

import time

import pytest

import storage
from storage import DLSN
from storage.log.staging import (
    PublishItem,
    StagedSegment,
    check_not_sealed,
    discard,
    list_staged,
    publish,
    publish_many,
    read_commit,
    stage_records,
    sweep,
)
from tests.storage.test_writer_reader import read_all, write_segment


def rows(first: int, n: int) -> list[tuple[int, bytes]]:
    return [(first + i, b"r%d" % (first + i)) for i in range(n)]


def test_stage_publish_in_order_with_commit(ns: storage.Namespace) -> None:
    dlm = ns.open_log("out")
    write_segment(dlm, 1, 3)  # an existing segment: txids 1..3
    a = stage_records(ns, rows(10, 5))
    b = stage_records(ns, rows(20, 4))
    assert a is not None and b is not None and stage_records(ns, []) is None
    assert a.record_count == 5 and (a.first_txid, a.last_txid) == (10, 14)
    assert StagedSegment.from_dict(a.to_dict()) == a
    assert [r.txid for r in read_all(dlm)] == [1, 2, 3]  # staged data is invisible
    seen: list[object] = []

    def decide(prev: dict[str, object] | None) -> bool:
        seen.append(prev)
        return True

    result = publish(ns, "out", [a, b], {"batch": 0}, decide)
    assert not result.skipped and [s.lssn for s in result.segments] == [2, 3]
    assert seen == [None] and read_commit(ns, "out") == {"batch": 0}
    recs = read_all(dlm)
    assert [r.txid for r in recs] == [1, 2, 3, *range(10, 15), *range(20, 24)]
    assert [r.sequence_id for r in recs] == list(range(12))
    assert recs[3].dlsn == DLSN(2, 0, 0) and recs[8].dlsn == DLSN(3, 0, 0)
    assert [s.start_sequence_id for s in dlm.log_segments()] == [0, 3, 8]
    assert list_staged(ns) == []
    # A replay decided as "already in" adds nothing and discards the staged data.
    c = stage_records(ns, rows(30, 2))
    assert c is not None
    assert publish(ns, "out", [c], {"batch": 0}, lambda prev: prev != {"batch": 0}).skipped
    assert c.ledger_id not in ns.segstore.list_ledgers()
    assert len(read_all(dlm)) == 12
    # A refusing decision publishes nothing.
    d = stage_records(ns, rows(40, 2))
    assert d is not None

    def refuse(prev: dict[str, object] | None) -> bool:
        raise storage.LockingError("fenced")

    with pytest.raises(storage.LockingError):
        publish(ns, "out", [d], {"batch": 1}, refuse)
    assert read_commit(ns, "out") == {"batch": 0} and len(read_all(dlm)) == 12
    # Records below the log's txid are refused, atomically.
    e = stage_records(ns, rows(5, 2))
    assert e is not None
    with pytest.raises(storage.TransactionIdOutOfOrderError):
        publish(ns, "out", [e], {"batch": 1}, lambda prev: True)
    assert read_commit(ns, "out") == {"batch": 0} and len(read_all(dlm)) == 12
    discard(ns, [d.ledger_id, e.ledger_id])
    assert list_staged(ns) == []


def test_publish_many_is_one_transaction_over_several_logs(ns: storage.Namespace) -> None:
    write_segment(ns.open_log("b"), 100, 1)  # log b is at txid 100
    a1, b1 = stage_records(ns, rows(1, 3)), stage_records(ns, rows(200, 2))
    assert a1 is not None and b1 is not None
    done = publish_many(ns, [PublishItem("a", [a1], {"n": 1}), PublishItem("b", [b1], {"n": 1})], lambda log, p: True)
    assert not done["a"].skipped and [s.lssn for s in done["b"].segments] == [2]
    assert read_commit(ns, "a") == read_commit(ns, "b") == {"n": 1}
    assert [r.txid for r in read_all(ns.open_log("b"))] == [100, 200, 201]
    # one log's staged txids are below its last txid: neither log gets anything
    a2, b2 = stage_records(ns, rows(10, 2)), stage_records(ns, rows(50, 2))
    assert a2 is not None and b2 is not None
    with pytest.raises(storage.TransactionIdOutOfOrderError):
        publish_many(ns, [PublishItem("a", [a2], {"n": 2}), PublishItem("b", [b2], {"n": 2})], lambda log, p: True)
    assert read_commit(ns, "a") == {"n": 1} and len(read_all(ns.open_log("a"))) == 3
    # a staged ledger discarded meanwhile (a sweep): nothing is published
    b3 = stage_records(ns, rows(300, 2))
    assert b3 is not None
    discard(ns, [b3.ledger_id])
    with pytest.raises(storage.DLError):
        publish_many(ns, [PublishItem("a", [a2], {"n": 3}), PublishItem("b", [b3], {"n": 3})], lambda log, p: True)
    assert read_commit(ns, "a") == {"n": 1} and len(read_all(ns.open_log("a"))) == 3
    # a log decided "already in" is skipped (its staged data discarded), the others go on
    done = publish_many(
        ns, [PublishItem("a", [a2], {"n": 4}), PublishItem("b", [b2], {"n": 4})], lambda log, p: log == "a"
    )
    assert done["b"].skipped and not done["a"].skipped and b2.ledger_id not in ns.segstore.list_ledgers()
    assert read_commit(ns, "a") == {"n": 4} and read_commit(ns, "b") == {"n": 1}
    with pytest.raises(storage.InvalidArgumentError):
        publish_many(ns, [PublishItem("a", [], {}), PublishItem("a", [], {})], lambda log, p: True)


def test_empty_publish_records_commit_and_sweep(ns: storage.Namespace) -> None:
    assert not publish(ns, "empty", [], {"batch": 7}, lambda prev: True).skipped
    assert read_commit(ns, "empty") == {"batch": 7}
    assert ns.open_log("empty").log_segments() == []
    orphan = stage_records(ns, rows(1, 3), tag={"job": "j1", "partition": 2})
    assert orphan is not None
    (reg,) = list_staged(ns)
    assert (reg.ledger_id, reg.tag) == (orphan.ledger_id, {"job": "j1", "partition": 2}) and reg.created_ms > 0
    assert sweep(ns, older_than_ms=3_600_000) == []  # too young
    other = stage_records(ns, rows(5, 1), tag={"job": "j2"})
    assert other is not None  # a tag match goes at once, unless kept
    assert sweep(ns, 3_600_000, matching=lambda t: "job" in t, keep={orphan.ledger_id}) == [other.ledger_id]
    assert sweep(ns, older_than_ms=-1) == [orphan.ledger_id]
    assert orphan.ledger_id not in ns.segstore.list_ledgers() and list_staged(ns) == []


def test_staging_rejects_bad_records(ns: storage.Namespace) -> None:
    with pytest.raises(storage.TransactionIdOutOfOrderError):
        stage_records(ns, [(5, b"a"), (4, b"b")])
    with pytest.raises(storage.InvalidArgumentError):
        stage_records(ns, [(1, "not bytes")])  # type: ignore[list-item]
    assert list_staged(ns) == []


def test_a_sealed_log_refuses_publishing(ns: storage.Namespace) -> None:
    sealed = ns.open_log("sealed")
    write_segment(sealed, 1, 3)
    with sealed.open_writer() as w:
        w.mark_end_of_stream()
    check_not_sealed(ns, "other")  # a log that does not exist is not sealed
    check_not_sealed(ns, "missing/nested")
    message = "log 'sealed' is sealed (end of stream): no more records can be written"
    with pytest.raises(storage.EndOfStreamError) as err:
        check_not_sealed(ns, "sealed")
    assert str(err.value) == message and err.value.code == 512 and not err.value.retriable
    a = stage_records(ns, rows(10, 2))
    b = stage_records(ns, rows(10, 2))
    assert a is not None and b is not None
    items = [PublishItem("other", [a], {"batch": 0}), PublishItem("sealed", [b], {"batch": 0})]
    with pytest.raises(storage.EndOfStreamError) as err:
        publish_many(ns, items, lambda log, prev: True)
    assert str(err.value) == message
    assert not ns.log_exists("other") or ns.open_log("other").log_segments() == []  # all logs or none
    assert sealed.record_count() == 3 and sealed.last_txid() == 3 and read_commit(ns, "sealed") is None
    assert {r.ledger_id for r in list_staged(ns)} == {a.ledger_id, b.ledger_id}  # the caller discards them


def test_an_aborted_key_stops_staging_and_old_markers_go(ns: storage.Namespace) -> None:
    """A task still running after its job was aborted stages nothing (mark first, then sweep)."""
    import pyarrow as pa

    from storage.log.staging import ABORTED_ROOT, is_aborted, mark_aborted, stage_arrow, sweep

    ok = stage_arrow(ns, [(pa.array([b"a"]), 1)], tag={"job": "j1"}, abort_key="job-j1")
    assert ok is not None
    mark_aborted(ns, "job-j1")
    mark_aborted(ns, "job-j1")  # idempotent
    assert is_aborted(ns, "job-j1") and not is_aborted(ns, "job-j2")
    swept = sweep(ns, older_than_ms=3_600_000, matching=lambda tag: tag.get("job") == "j1")
    assert swept == [ok.ledger_id]
    with pytest.raises(storage.WriteCancelledError, match="staging for job-j1 was aborted"):
        stage_arrow(ns, [(pa.array([b"b"]), 2)], tag={"job": "j1"}, abort_key="job-j1")
    assert ns.metastore.children("/.staging") == []
    assert ok.ledger_id not in ns.segstore.list_ledgers()
    assert stage_arrow(ns, [(pa.array([b"c"]), 3)], abort_key="job-j2") is not None  # other keys unaffected
    time.sleep(0.01)
    sweep(ns, older_than_ms=1)  # markers older than the grace period are removed
    assert ns.metastore.children(ABORTED_ROOT) == []
    with pytest.raises(storage.InvalidArgumentError):
        mark_aborted(ns, "a/b")
