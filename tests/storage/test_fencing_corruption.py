"""Zombie writers are fenced; corrupted segment data is detected, never returned."""

from __future__ import annotations

import pytest

import storage
from storage import DLSN, LogRecord
from storage.log.layout import LogMetadata
from storage.log.write_handler import WriteHandler
from tests.storage._damage import flip_payload_byte
from tests.storage.test_processes import child
from tests.storage.test_writer_reader import read_all, write_segment


def test_zombie_writer_fenced_by_recovery(ns_uri: str, subprocess_env: dict[str, str]) -> None:
    """Process A writes; B fences A's in-progress segment (DistributedLog's recovery open) and
    completes it while A keeps writing. Nothing A appends after the fence is acknowledged or
    visible; everything A had acknowledged is readable."""
    no_roll = '{"maxLogSegmentBytes": 1073741824}'
    with child(subprocess_env, "writer", ns_uri, "zombie", "0", no_roll) as a:
        a.wait_for("open")
        while sum(1 for e in a.events if e["event"] == "ack") < 300:
            a.next_event()
        with storage.open_namespace(ns_uri) as ns:
            meta = LogMetadata(ns.metastore, ns.paths_of("zombie"))
            inprogress = [s for s in meta.segments() if s.in_progress]
            assert len(inprogress) == 1
            seg = inprogress[0]
            recovered = WriteHandler(meta, ns.segstore, ns.conf, lock=None).recover_segment(seg)
            fenced_last_entry = ns.segstore.info(seg.ledger_id).last_entry_id
            # A keeps writing until it notices: it must get WriterFencedError.
            ev = a.wait_for("write-error", timeout=60)
            assert ev["error"] == "WriterFencedError"
            a.wait_for("closed", timeout=60)
            acked = [(e["txid"], DLSN.parse(str(e["dlsn"]))) for e in a.events if e["event"] == "ack"]
            in_seg = [d for _, d in acked if d.lssn == seg.lssn]
            assert in_seg, "A acknowledged records in the fenced segment"
            assert max(d.entry_id for d in in_seg) <= fenced_last_entry, "an append after the fence was acknowledged"
            assert all(d.lssn <= seg.lssn for _, d in acked), "A must not start another segment"
            dlm = ns.open_log("zombie")
            recs = read_all(dlm)
            got = {r.txid for r in recs}
            assert {t for t, _ in acked} <= got
            assert all(r.dlsn <= recovered.last_dlsn for r in recs if r.dlsn.lssn == seg.lssn)
            assert recs[-1].dlsn == recovered.last_dlsn
            assert [r.txid for r in recs] == sorted(got)
            (only,) = dlm.log_segments()
            assert not only.in_progress and only.record_count == len(recs)


def test_fenced_writer_in_process_fails_every_later_write(ns: storage.Namespace) -> None:
    dlm = ns.open_log("fenced")
    w = dlm.open_async_writer()
    w.write(LogRecord(1, b"a")).result(10)
    seg = dlm.log_segments()[0]
    assert ns.segstore.fence(seg.ledger_id) == 0
    f = w.write(LogRecord(2, b"b"))
    with pytest.raises(storage.WriterFencedError):
        f.result(10)
    with pytest.raises(storage.WriterFencedError):
        w.write(LogRecord(3, b"c"))
    with pytest.raises(storage.WriterFencedError):
        w.flush().result(10)
    w.close()  # releases ownership; the segment is left for recovery
    with dlm.open_writer() as w2:
        w2.write(LogRecord(4, b"d"))
    assert [(r.txid, r.dlsn) for r in read_all(dlm)] == [(1, DLSN(1, 0, 0)), (4, DLSN(2, 0, 0))]


def test_flipped_byte_raises_corrupted_entry_at_that_entry(ns: storage.Namespace) -> None:
    dlm = ns.open_log("corrupt")
    write_segment(dlm, 1, 10)  # entries 0..9 data, 10 control
    (seg,) = dlm.log_segments()
    flip_payload_byte(ns.segstore, seg.ledger_id, 6)
    ns2 = storage.open_namespace(ns.uri)  # a fresh process view: nothing cached
    try:
        with ns2.open_log("corrupt").open_reader(DLSN.INITIAL) as r:
            good = []
            with pytest.raises(storage.CorruptedEntryError, match="entry 6"):
                for _ in range(20):
                    rec = r.read_next(non_blocking=True)
                    assert rec is not None
                    good.append(rec)
            assert [x.txid for x in good] == [1, 2, 3, 4, 5, 6]
        # positioning past the corrupt entry still works
        assert [x.txid for x in read_all(ns2.open_log("corrupt"), DLSN(1, 7, 0))] == [8, 9, 10]
    finally:
        ns2.close()
