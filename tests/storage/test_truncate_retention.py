"""Truncation, reader rules on truncated data, purge and TTL retention
(after DistributedLog's TestTruncate and TestLogSegmentsZK / retention tests)."""

from __future__ import annotations

import time

import pytest

import storage
from storage import DLSN, LogRecord, TruncationStatus
from storage.log.layout import LogMetadata
from tests.conftest import BASE_CONF
from tests.storage.test_writer_reader import read_all, write_segment


def four_segments(dlm: storage.LogManager) -> None:
    for i in range(4):
        write_segment(dlm, 1 + 10 * i, 10)  # segment i+1 holds txids 10i+1 .. 10i+10, DLSNs (i+1, 0..9, 0)


def statuses(dlm: storage.LogManager) -> list[str]:
    return [s.truncation_status.value for s in dlm.log_segments()]


def test_truncate_marks_truncated_and_partially_truncated(ns: storage.Namespace) -> None:
    dlm = ns.open_log("t")
    four_segments(dlm)
    with dlm.open_writer() as w:
        assert w.truncate(DLSN(3, 5, 0)) is True
        assert w.truncate(DLSN.INVALID) is False
    segs = dlm.log_segments()
    assert statuses(dlm)[:3] == ["truncated", "truncated", "partially_truncated"]
    # The writer above started nothing: the newest segment is still the 4th, active.
    assert statuses(dlm)[3] == "active"
    assert segs[2].min_active_dlsn == DLSN(3, 5, 0)
    # A reader from the start is moved to the min active DLSN.
    recs = read_all(dlm)
    assert recs[0].dlsn == DLSN(3, 5, 0) and recs[0].txid == 26 and recs[0].sequence_id == 25
    assert [r.txid for r in recs] == list(range(26, 41))
    # A position inside the truncated prefix moves to the min active DLSN (as DistributedLog positions readers).
    assert read_all(dlm, DLSN(3, 1, 0))[0].dlsn == DLSN(3, 5, 0)
    assert read_all(dlm, DLSN(2, 4, 0))[0].dlsn == DLSN(3, 5, 0)
    # With truncation status ignored, truncated data is still readable until purged.
    lenient = ns.open_log("t", {"ignoreTruncationStatus": True})
    assert [r.txid for r in read_all(lenient, DLSN(2, 0, 0))][:3] == [11, 12, 13]


def test_truncate_never_downgrades_and_never_touches_inprogress(ns: storage.Namespace) -> None:
    dlm = ns.open_log("t2")
    four_segments(dlm)
    w = dlm.open_async_writer()
    w.write(LogRecord(100, b"in progress")).result(10)
    assert w.truncate(DLSN(9, 0, 0)).result(10) is True  # beyond everything: completed ones truncated
    assert statuses(dlm) == ["truncated"] * 4 + ["active"]
    assert dlm.log_segments()[-1].in_progress
    assert w.truncate(DLSN(2, 3, 0)).result(10) is True  # earlier point: no downgrade to partial
    assert statuses(dlm) == ["truncated"] * 4 + ["active"]
    w.close()


def test_truncated_hole_after_active_segment_fails_reader(ns: storage.Namespace) -> None:
    dlm = ns.open_log("hole")
    four_segments(dlm)
    with dlm.open_writer() as w:
        w.truncate(DLSN(3, 0, 0))  # segments 1, 2 truncated
    # Mark segment 1 active again (DistributedLog's setLogSegmentActive): segment 2 is now a hole.
    meta = LogMetadata(ns.metastore, ns.paths_of("hole"))
    seg1 = meta.segments()[0]
    meta.replace_segments([(seg1, seg1.with_truncation(TruncationStatus.ACTIVE))])
    assert statuses(dlm)[:3] == ["active", "truncated", "active"]
    with pytest.raises(storage.AlreadyTruncatedTransactionError), dlm.open_reader(DLSN.INITIAL) as r:
        r.read_next(non_blocking=True)
    # Reading segment 1 from inside it also fails when the reader reaches the hole.
    with pytest.raises(storage.AlreadyTruncatedTransactionError), dlm.open_reader(DLSN(1, 9, 0)) as r:
        r.read_bulk(100, non_blocking=True)


def test_purge_keeps_newest_completed_segment(ns: storage.Namespace) -> None:
    dlm = ns.open_log("purge")
    four_segments(dlm)
    segs = dlm.log_segments()
    ledger_ids = [s.ledger_id for s in segs]
    purged = dlm.purge_older_than(int(time.time() * 1000) - 1)
    assert purged == 3
    left = dlm.log_segments()
    assert [s.lssn for s in left] == [4]
    assert left[0].start_sequence_id == 30
    assert sorted(set(ledger_ids[:3]) & set(ns.segstore.list_ledgers())) == []
    assert [r.sequence_id for r in read_all(dlm)] == list(range(30, 40))
    with pytest.raises(storage.InvalidArgumentError):
        dlm.purge_older_than(int(time.time() * 1000) + 60_000)


def test_purge_with_explicit_truncation_only_deletes_truncated(ns: storage.Namespace) -> None:
    dlm = ns.open_log("explicit", {"explicitTruncationByApp": True})
    four_segments(dlm)
    with dlm.open_writer() as w:
        w.truncate(DLSN(2, 5, 0))
    assert dlm.purge_older_than(int(time.time() * 1000) - 1) == 1
    assert [s.lssn for s in dlm.log_segments()] == [2, 3, 4]
    assert read_all(dlm)[0].dlsn == DLSN(2, 5, 0)


def test_ttl_retention_purges_on_roll(ns: storage.Namespace) -> None:
    # Retention of 1 ms (expressed in hours): every roll purges what completed before it.
    dlm = ns.open_log("ttl", {"logSegmentRetentionHours": 1 / 3_600_000})
    four_segments(dlm)
    time.sleep(0.01)
    w = dlm.open_async_writer()
    w.write(LogRecord(1000, b"new")).result(10)  # starting segment 5 triggers the TTL purge
    w._purger.join(10)
    assert [s.lssn for s in dlm.log_segments()] == [4, 5]
    w.close()


def test_purge_keeps_what_a_subscriber_needs_and_dry_run_deletes_nothing(ns: storage.Namespace, ns_uri: str) -> None:
    dlm = ns.open_log("subs-purge")
    four_segments(dlm)
    ledgers = {s.lssn: s.ledger_id for s in dlm.log_segments()}
    dlm.subscriptions().advance("slow", DLSN(2, 5, 0))  # still reading segment 2
    cutoff = int(time.time() * 1000) - 1
    assert [s.lssn for s in dlm.purge_segments(cutoff, dry_run=True)] == [1]
    assert len(dlm.log_segments()) == 4  # a dry run deletes nothing
    assert [s.lssn for s in dlm.purge_segments(cutoff)] == [1]
    assert [s.lssn for s in dlm.log_segments()] == [2, 3, 4]
    with pytest.raises(storage.LedgerNotFoundError):
        ns.segstore.info(ledgers[1])
    ns.segstore.info(ledgers[2])  # kept for the subscriber
    dlm.subscriptions().advance("slow", DLSN(5, 0, 0))  # caught up: nothing needed any more
    assert [s.lssn for s in dlm.purge_segments(cutoff)] == [2, 3]  # the newest completed stays
    dlm2 = ns.open_log("subs-ignored", {"retentionIgnoresSubscribers": True, **BASE_CONF})
    four_segments(dlm2)
    dlm2.subscriptions().advance("stuck", DLSN.NON_INCLUSIVE_LOWER_BOUND)
    time.sleep(0.01)
    assert dlm2.purge_older_than(int(time.time() * 1000) - 1) == 3  # configured to ignore subscribers


def test_publishing_honours_retention(ns_uri: str) -> None:
    """Logs appended to by publish (the Spark sink) are purged by logSegmentRetentionHours too."""
    from storage.log.staging import PublishItem, publish_many, stage_records

    conf = {**BASE_CONF, "logSegmentRetentionHours": 0.5 / 3600}  # half a second
    with storage.open_namespace(ns_uri, conf) as ns:
        for batch in range(3):
            staged = stage_records(ns, [(batch * 10 + i + 1, b"r%d" % i) for i in range(10)])
            assert staged is not None
            publish_many(ns, [PublishItem("published", [staged], {"batch": batch})], lambda log, prev: True)
            time.sleep(0.6)
        dlm = ns.open_log("published")
        # each publish purged what completed more than 0.5 s before it; the newest completed stays
        assert [s.lssn for s in dlm.log_segments()] == [3]
        assert [r.txid for r in read_all(dlm)] == list(range(21, 31))
