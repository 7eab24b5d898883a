"""Outstanding-write limits (DistributedLog's ``perWriterOutstandingWriteLimit``,
``globalOutstandingWriteLimit`` and ``outstandingWriteLimitDarkmode``): a writer whose writes are not
acknowledged (a large output buffer holds them, as a slow store would) gets ``OverCapacityError``
(retriable, code 517) at the limit instead of buffering without bound; ``write_bulk`` is all or nothing;
settled writes free the room; darkmode only counts; nothing acknowledged is lost."""

from __future__ import annotations

import pytest

import storage
from storage import DLSN, LogRecord
from tests.storage.test_writer_reader import read_all

HOLD = {"writerOutputBufferSize": 1 << 20, "periodicFlushFrequencyMilliSeconds": 0}


def test_per_writer_limit_rejects_then_frees(ns: storage.Namespace) -> None:
    dlm = ns.open_log("lim", {**HOLD, "perWriterOutstandingWriteLimit": 5, "outstandingWriteLimitDarkmode": False})
    w = dlm.open_async_writer()
    try:
        futs = [w.write(LogRecord(t, b"x")) for t in range(1, 6)]
        assert w.outstanding is not None and w.outstanding.count == 5
        with pytest.raises(storage.OverCapacityError, match="perWriterOutstandingWriteLimit=5") as err:
            w.write(LogRecord(6, b"x"))
        assert err.value.retriable and err.value.code == 517
        with pytest.raises(storage.OverCapacityError):
            w.write_bulk([LogRecord(6, b"x")])
        w.flush().result()  # transmits and acknowledges: the room is free again
        assert [f.result().entry_id for f in futs] == [0] * 5 and w.outstanding.count == 0
        more = w.write_bulk([LogRecord(t, b"y") for t in range(6, 11)])
        with pytest.raises(storage.OverCapacityError):  # all or nothing
            w.write_bulk([LogRecord(11, b"z"), LogRecord(12, b"z")])
        assert w.outstanding.count == 5
        w.flush().result()
        assert all(f.done() for f in more)
    finally:
        w.close()
    recs = read_all(dlm)
    assert [r.txid for r in recs] == list(range(1, 11))  # the rejected ones were never written


def test_darkmode_counts_but_never_rejects(ns: storage.Namespace) -> None:
    dlm = ns.open_log("dark", {**HOLD, "perWriterOutstandingWriteLimit": 3})  # darkmode is the default
    with dlm.open_async_writer() as w:
        for t in range(1, 11):
            w.write(LogRecord(t, b"x"))
        assert w.outstanding is not None and w.outstanding.over_limit == 7 and w.outstanding.count == 10
        w.flush().result()
        assert w.outstanding.count == 0
    assert len(read_all(dlm)) == 10


def test_global_limit_is_shared_by_the_namespace_writers(ns_uri: str) -> None:
    conf = {**HOLD, "globalOutstandingWriteLimit": 6, "outstandingWriteLimitDarkmode": False, "lockTimeoutSeconds": 1}
    with storage.open_namespace(ns_uri, conf) as ns:
        a = ns.open_log("a").open_async_writer()
        b = ns.open_log("b").open_async_writer()
        try:
            for t in range(1, 5):
                a.write(LogRecord(t, b"a"))
            b.write(LogRecord(1, b"b"))
            b.write(LogRecord(2, b"b"))
            with pytest.raises(storage.OverCapacityError, match="globalOutstandingWriteLimit=6"):
                b.write(LogRecord(3, b"b"))
            assert ns.outstanding is not None and ns.outstanding.count == 6
            a.flush().result()
            b.write(LogRecord(3, b"b"))
            assert ns.outstanding.count == 3
        finally:
            a.close()
            b.close()
        assert ns.outstanding.count == 0
        assert [r.txid for r in read_all(ns.open_log("b"))] == [1, 2, 3]


def test_end_of_stream_and_abort_settle_their_count(ns: storage.Namespace) -> None:
    dlm = ns.open_log("eos", {**HOLD, "perWriterOutstandingWriteLimit": 100})
    w = dlm.open_async_writer()
    for t in range(1, 4):
        w.write(LogRecord(t, b"x"))
    w.mark_end_of_stream()
    assert w.outstanding is not None and w.outstanding.count == 0
    w.close()
    dlm2 = ns.open_log("aborted", {**HOLD, "perWriterOutstandingWriteLimit": 100})
    w2 = dlm2.open_async_writer()
    futs = [w2.write(LogRecord(t, b"x")) for t in range(1, 4)]
    w2.abort()
    assert all(f.done() for f in futs) and w2.outstanding is not None and w2.outstanding.count == 0
    assert read_all(dlm2, DLSN.INITIAL) == []
