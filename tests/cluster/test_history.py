"""The history checker (tools/history.py) on hand-built histories, one anomaly kind at a time, and on a real
log written by two processes, one of them SIGKILLed mid-way. No servers: embedded namespaces only."""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import Future
from functools import partial
from itertools import count
from pathlib import Path
from typing import Any

import pytest

import storage
from tools.history import (
    ANOMALIES,
    Event,
    History,
    HistoryError,
    HistoryRecorder,
    Report,
    availability,
    check,
    main,
    resumed_after_heals,
)

Rec = tuple[str, tuple[int, int, int], int]  # value, dlsn, txid


def records(values: Sequence[str], first_entry: int = 0, first_txid: int = 1) -> list[Rec]:
    return [(v, (1, first_entry + i, 0), first_txid + i) for i, v in enumerate(values)]


V5 = records([f"v{i}" for i in range(5)])


class Hist:
    """Builds a history directory by hand: one recorder per process name, writes completed at once."""

    def __init__(self, d: Path) -> None:
        self.dir = d
        self.recs: dict[str, HistoryRecorder] = {}
        self.ids = count()

    def rec(self, process: str) -> HistoryRecorder:
        if process not in self.recs:
            self.recs[process] = HistoryRecorder(self.dir, process)
        return self.recs[process]

    def write(
        self,
        process: str,
        value: str,
        dlsn: Any = None,
        txid: int | None = None,
        *,
        outcome: str = "ok",
        log: str = "log",
        **meta: Any,
    ) -> None:
        r, op = self.rec(process), next(self.ids)
        r.invoke(op, "write", value, log=log, txid=txid, **meta)
        if outcome == "ok":
            r.ok(op, dlsn=dlsn, txid=txid)
        elif outcome == "fail":
            r.fail(op, error="WriteError: rejected", definite=True)
        elif outcome == "info":
            r.info(op, error=TimeoutError("no reply"))

    def writes(self, process: str, recs: Sequence[Rec], **meta: Any) -> None:
        for v, d, t in recs:
            self.write(process, v, d, t, **meta)

    def reads(self, reader: str, recs: Sequence[Rec], *, log: str = "log", process: str = "reader") -> None:
        for v, d, t in recs:
            self.rec(process).read(reader, log, v, d, t)

    def final(self, recs: Sequence[Rec], *, log: str = "log") -> None:
        for v, d, t in recs:
            self.rec("checker").final_read(log, v, d, t)

    def check(self, **kw: Any) -> Report:
        return check(History.load(self.dir), **kw)


def anomalies(report: Report) -> dict[str, int]:
    """The non-zero anomaly counts."""
    return {k: report.counts[k] for k in ANOMALIES if report.counts[k]}


def healthy(h: Hist, final: Sequence[Rec] | None = None, tail: Sequence[Rec] | None = None) -> None:
    """Writer w1 owns the log and writes v0..v4 (acked), a definitely failed write, an unknown one that landed
    and one never completed; a tailing reader reads the whole log."""
    h.rec("w1").owner("log")
    h.writes("w1", V5)
    h.write("w1", "v-failed", txid=6, outcome="fail")
    h.write("w1", "v-unknown", txid=6, outcome="info")
    h.write("w1", "v-pending", txid=7, outcome="pending")
    log = [*V5, ("v-unknown", (1, 5, 0), 6)]
    h.final(log if final is None else final)
    h.reads("tail", log if tail is None else tail)


def test_correct_history_passes(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    healthy(h)
    report = h.check()
    assert report.ok, report
    assert report.line() == (
        "CHECK ops=8 acked=5 unknown=2 failed=1 read=6 observed=6 lost=0 duplicated=0 reordered=0 "
        "stale_visible=0 invented=0 skipped=0 misplaced=0 divergent=0 failed_visible=0 txid_back=0 seq_gap=0 "
        "out_of_order=0 batch_split=0 epoch_back=0 no_final=0 OK"
    )
    assert report.anomalies == []


def test_lost_write(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    log = [r for r in V5 if r[0] != "v2"] + [("v-unknown", (1, 5, 0), 6)]
    healthy(h, final=log, tail=log)
    report = h.check()
    assert not report.ok and anomalies(report) == {"lost": 1}
    assert "'v2'" in report.of("lost")[0].detail and report.line().endswith(" FAIL")


def test_records_before_a_truncation_may_be_gone_but_not_those_after_it(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    h.writes("w1", V5)
    h.rec("w1").truncated("log", (1, 2, 0))  # v0 and v1 truncated away
    h.final(V5[3:])  # v2 missing: it was not before the truncation point
    report = h.check()
    assert anomalies(report) == {"lost": 1} and "'v2'" in report.of("lost")[0].detail, report


def test_duplicate_in_final_read(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    log = [*V5, ("v-unknown", (1, 5, 0), 6), ("v-unknown", (1, 6, 0), 6)]
    healthy(h, final=log, tail=log)
    assert anomalies(h.check()) == {"duplicated": 1}


def test_reordering(tmp_path: Path) -> None:
    """v2 and v1 swapped in the log: out of DLSN order, txid back, and w1's send order broken, once each (the
    tailing reader read that same log, so it adds nothing)."""
    h = Hist(tmp_path)
    log = [V5[0], V5[2], V5[1], *V5[3:], ("v-unknown", (1, 5, 0), 6)]
    healthy(h, final=log, tail=log)
    assert anomalies(h.check()) == {"reordered": 1, "txid_back": 1, "out_of_order": 1}


def test_reader_skips_a_record(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    healthy(h, tail=[V5[0], V5[1], V5[3], V5[4]])
    report = h.check()
    assert anomalies(report) == {"skipped": 1}
    assert "'v2'" in report.of("skipped")[0].detail


def test_reader_goes_back(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    healthy(h, tail=[V5[0], V5[1], V5[2], V5[1], V5[3]])
    assert anomalies(h.check()) == {"duplicated": 1}


def test_reader_out_of_order(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    healthy(h, tail=[V5[0], V5[2], V5[1]])
    assert anomalies(h.check()) == {"reordered": 1}


def test_reader_starting_mid_log(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    healthy(h, tail=V5[3:])
    assert anomalies(h.check()) == {"skipped": 3}
    assert h.check(mid_log_readers=True).ok
    h.rec("reader").reader_start("tail", "log", storage.DLSN(1, 3, 0))
    assert h.check().ok
    h.rec("reader").reader_start("tail", "log", (1, 2, 0))  # opened at v2 but v2 never read
    assert anomalies(h.check()) == {"skipped": 1}


def test_invented_value(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    log = [*V5, ("v-unknown", (1, 5, 0), 6), ("nobody-wrote-me", (1, 6, 0), 7)]
    healthy(h, final=log, tail=log)
    report = h.check()
    assert anomalies(report) == {"invented": 1}
    assert "nobody-wrote-me" in report.of("invented")[0].detail


def test_definitely_failed_write_visible(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    log = [*V5, ("v-failed", (1, 5, 0), 6), ("v-unknown", (1, 6, 0), 6)]
    healthy(h, final=log, tail=log)
    assert anomalies(h.check()) == {"failed_visible": 1}


def test_one_history_divergent_reader_and_misplaced_ack(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    healthy(h)
    h.reads("other", [V5[0], ("v2", (1, 1, 0), 3)])  # (1,1,0) holds v1 in the final read
    assert anomalies(h.check()) == {"divergent": 1}

    h2 = Hist(tmp_path / "2")
    log = [*V5[:2], ("v2", (1, 2, 1), 3), *V5[3:]]  # acknowledged at (1,2,0)
    h2.writes("w1", V5)
    h2.final(log)
    assert anomalies(h2.check()) == {"misplaced": 1}


def test_txid_going_back(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    log = [(v, d, t) for (v, d, _), t in zip(V5, [1, 2, 5, 3, 6], strict=True)]
    h.writes("w1", log)
    h.final(log)
    h.reads("tail", log)
    assert anomalies(h.check()) == {"txid_back": 1}


def test_sequence_id_gap(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    h.writes("w1", V5)
    for (v, d, t), seq in zip(V5, [0, 1, 2, 4, 5], strict=True):
        h.rec("checker").final_read("log", v, d, t, seq=seq)
    assert anomalies(h.check()) == {"seq_gap": 1}


def test_stale_fenced_write_visible(tmp_path: Path) -> None:
    """w1 writes a0, a1; w2 takes the log over; w1 still appends a2, which must have failed but is visible."""
    h = Hist(tmp_path)
    h.rec("w1").owner("log")
    h.writes("w1", records(["a0", "a1"]))
    time.sleep(0.002)
    h.rec("w2").owner("log")
    fence = time.monotonic()
    time.sleep(0.002)
    h.write("w1", "a2", (1, 2, 0), 3)  # the zombie's append, after the takeover
    h.write("w2", "b0", (2, 0, 0), 4)
    h.write("w2", "b1", (2, 1, 0), 5)
    log = [*records(["a0", "a1", "a2"]), ("b0", (2, 0, 0), 4), ("b1", (2, 1, 0), 5)]
    h.final(log)
    report = h.check()
    assert anomalies(report) == {"stale_visible": 1}
    assert "'a2'" in report.of("stale_visible")[0].detail
    assert h.check(owner_fences=False).ok  # only the owner event said w1 was fenced
    h.rec("w2").fenced("w1", fence, log="log")  # before a2 was invoked
    assert anomalies(h.check(owner_fences=False)) == {"stale_visible": 1}


def test_epochs_never_go_back(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    h.rec("w1").owner("log")
    h.writes("w1", records(["a0", "a1"]))
    time.sleep(0.002)
    h.rec("w2").owner("log")
    h.write("w2", "b0", None, 3)
    log = [("a0", (1, 0, 0), 1), ("b0", (2, 0, 0), 3), ("a1", (2, 1, 0), 3)]  # a1 after the successor's b0
    h.final(log)
    assert anomalies(h.check()) == {"epoch_back": 1, "misplaced": 1}

    h2 = Hist(tmp_path / "2")  # no owner events: an epoch per writer, ranked by its first write
    log = [("a0", (1, 0, 0), 1), ("b0", (2, 0, 0), 2), ("a1", (3, 0, 0), 3)]
    h2.writes("w1", log[:1])
    time.sleep(0.002)
    h2.writes("w2", log[1:2])
    time.sleep(0.002)
    h2.writes("w1", log[2:])
    h2.final(log)
    assert anomalies(h2.check()) == {"epoch_back": 1}


def test_producer_sequence_out_of_order(tmp_path: Path) -> None:
    """Two idempotent producers through a proxy; p1's seq 2 lands before its seq 1."""
    h = Hist(tmp_path)
    for seq in range(4):
        h.write("p1", f"p1-{seq}", None, None, producer="p1", seq=seq)
        h.write("p2", f"p2-{seq}", None, None, producer="p2", seq=seq)
    order = ["p1-0", "p2-0", "p1-2", "p2-1", "p1-1", "p2-2", "p1-3", "p2-3"]
    h.final(records(order))
    report = h.check()
    assert anomalies(report) == {"out_of_order": 1}
    assert "p1" in report.of("out_of_order")[0].detail


def test_batch_not_contiguous(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    h.write("p1", "x0", producer="p1", seq=0, batch=1)
    h.write("p1", "x1", producer="p1", seq=1, batch=1)
    h.write("p2", "y0", producer="p2", seq=0)
    h.final(records(["x0", "y0", "x1"]))
    assert anomalies(h.check()) == {"batch_split": 1}


def test_no_final_read_is_an_anomaly(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    h.writes("w1", V5)
    h.reads("tail", V5)
    assert anomalies(h.check()) == {"no_final": 1}
    assert check(History.load(tmp_path), final_reads={"log": []}).counts["lost"] == 5


def sink(h: Hist, outputs: Sequence[tuple[str, int]]) -> None:
    for stream, values in (("s1", ["i0", "i1", "i2", "i3"]), ("s2", ["j0", "j1"])):
        for v in values:
            h.rec("driver").input(stream, v)
    for v, batch in outputs:
        h.rec("driver").output(v, batch=batch)
    h.rec("driver").sink_batch(0, 3)
    h.rec("driver").sink_batch(1, 3)


def test_exactly_once_sink(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    sink(h, [("i0", 0), ("j0", 0), ("i1", 0), ("i2", 1), ("j1", 1), ("i3", 1)])
    report = h.check()
    assert report.ok, report
    assert report.line().endswith("sink_missing=0 sink_duplicated=0 sink_reordered=0 sink_invented=0 sink_partial=0 OK")

    h2 = Hist(tmp_path / "dup-missing")  # i1 twice (a replayed batch), i3 missing
    sink(h2, [("i0", 0), ("j0", 0), ("i1", 0), ("i1", 1), ("i2", 1), ("j1", 1)])
    assert anomalies(h2.check()) == {"sink_duplicated": 1, "sink_missing": 1}

    h3 = Hist(tmp_path / "order-partial")  # i1 before i0; batch 1 only two of its three rows; one foreign row
    sink(h3, [("i1", 0), ("j0", 0), ("i0", 0), ("i2", 1), ("j1", 1), ("zz", 2)])
    assert anomalies(h3.check()) == {"sink_reordered": 1, "sink_missing": 1, "sink_partial": 1, "sink_invented": 1}


def test_torn_last_line_ignored_and_bad_history_refused(tmp_path: Path) -> None:
    h = Hist(tmp_path)
    healthy(h)
    path = h.rec("w1").path
    with path.open("a") as f:
        f.write('{"ev": "invoke", "p": "w1", "r": "x", "n": 99, "t": 1.0, "m"')  # SIGKILL mid-line
    assert h.check().ok
    with path.open("a") as f:
        f.write("\n")  # now a complete line that is not an event
    with pytest.raises(HistoryError, match=r"\.jsonl:\d+"):
        History.load(tmp_path)

    h2 = Hist(tmp_path / "2")
    h2.rec("w").invoke(1, "write", "x")
    h2.rec("w").ok(1)
    h2.rec("w").ok(1)
    with pytest.raises(HistoryError, match="ok of operation 1 after ok"):
        h2.check()


class Timed:
    """A history built by hand on a clock of its own: a write invoked every second of ``seconds``, answered
    ``done_after`` later, ``ok`` unless its second is in ``unknown``; and fault windows."""

    def __init__(self, seconds: int, unknown: set[int], done_after: float) -> None:
        self.events: list[Event] = []
        self.n = count()
        for t in range(seconds):
            self.ev("invoke", t, op=str(t), kind="write", value=f"x{t}", log="log", meta={})
            self.ev("info" if t in unknown else "ok", t + done_after, op=str(t))

    def ev(self, name: str, t: float, **data: Any) -> None:
        self.events.append(Event(name, "w", "r", next(self.n), t, data))

    def fault(self, fault: str, kind: str, start: float, end: float | None = None, detail: str = "") -> None:
        self.ev("fault_start", start, kind=kind, detail=detail, fault=fault)
        if end is not None:
            self.ev("fault_end", end, kind=kind, fault=fault)

    def history(self) -> History:
        return History(sorted(self.events, key=lambda e: e.time))


def test_availability_per_fault_kind() -> None:
    """Writes every second from t=0 to 10; none succeed between 3 and 7 (a partition from 3 to 6)."""
    h = Timed(11, {4, 5, 6}, 0.0)
    h.fault("f1", "partition", 3.5, 6.0, "w | zk")
    h.fault("f2", "kill", 8.5, None, "osd.0")
    a = availability(h.history(), "write")
    assert a.longest is not None and (a.longest.start, a.longest.end) == (3.0, 7.0)
    assert a.by_fault == {"partition": 4.0, "kill": 1.0}
    assert a.line() == "AVAIL write longest=4.00s partition=4.00s kill=1.00s"


def test_writes_resumed_after_every_heal() -> None:
    """Writes every second from t=0 to 20; a partition from 3 to 5 heals and writes resume at 6; a kill from 9 to
    10 heals and nothing succeeds until 16. With a 3 s bound the second heal is a miss, with 7 s neither is (the
    kill starts before the partition's deadline, 5 + 7, so both heals are judged against the kill's, 10 + 7)."""
    timed = Timed(21, {3, 4, 5, 9, 10, 11, 12, 13, 14, 15}, 0.5)
    timed.fault("f1", "partition", 3.0, 5.0, "w | zk")
    timed.fault("f2", "kill", 9.0, 10.0, "osd.0")
    h = timed.history()
    assert resumed_after_heals(h, ["log"], 7.0) == []
    assert resumed_after_heals(h, ["log"], 3.0) == [
        "log: no write invoked after the heal of kill (osd.0) completed within 3.0s"
    ]
    assert resumed_after_heals(h, ["other"], 7.0) == [
        "other: no write invoked after the heal of partition (w | zk) completed within 12.0s",
        "other: no write invoked after the heal of kill (osd.0) completed within 7.0s",
    ]
    # A third fault from 11 to 12 starts before the kill's deadline (10 + 3): the kill's heal is judged against
    # 12 + 3 = 15, still before the first write that succeeds (16.5); with 5 s, 12 + 5 = 17 covers it.
    timed.fault("f3", "delay", 11.0, 12.0, "w | osd")
    h = timed.history()
    assert len(resumed_after_heals(h, ["log"], 3.0)) == 2
    assert resumed_after_heals(h, ["log"], 5.0) == []


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = Hist(tmp_path / "h")
    healthy(h)
    for r in h.recs.values():
        r.close()
    assert main(["check", str(tmp_path / "h")]) == 0
    assert capsys.readouterr().out.startswith("CHECK ops=8 acked=5 unknown=2 failed=1 read=6 ")
    final = tmp_path / "final.jsonl"
    final.write_text(
        "".join(
            json.dumps({"log": "log", "value": v, "dlsn": f"1,{i},0", "txid": t}) + "\n"
            for i, (v, _, t) in enumerate(V5[:4])
        )
    )
    assert main(["check", str(tmp_path / "h"), "--final", str(final)]) == 1
    out, err = capsys.readouterr()
    assert " lost=1 " in out and out.rstrip().endswith("FAIL") and "'v4'" in err
    assert main(["avail", str(tmp_path / "h")]) == 0
    assert capsys.readouterr().out.startswith("AVAIL write longest=")


# ---------------------------------------------------------------------------------------------- real processes
CONF: dict[str, object] = {
    "writerOutputBufferSize": 256,
    "periodicFlushFrequencyMilliSeconds": 2,
    "lockTimeoutSeconds": 10,
}
LOG = "history"


def _writer(uri: str, hist: str, name: str) -> None:
    """Child: take the log over, then write ``<name>-<i>`` with the async writer until SIGKILLed."""
    rec = HistoryRecorder(hist, name)
    with storage.open_namespace(uri, CONF) as ns:
        dlm = ns.open_log(LOG)
        w = dlm.open_async_writer()
        rec.owner(LOG)
        for i in count():
            txid, value = i + 1, f"{name}-{i}"
            rec.invoke(i, "write", value, log=LOG, txid=txid)
            f = w.write(storage.LogRecord(txid, value.encode()))
            f.add_done_callback(partial(_complete, rec, i, txid))
            if i % 20 == 19:
                time.sleep(0.01)  # bursts: some writes are in flight when the SIGKILL comes


def _complete(rec: HistoryRecorder, op: int, txid: int, f: Future[Any]) -> None:
    exc = f.exception()
    if exc is None:
        rec.ok(op, dlsn=f.result(), txid=txid)
    else:
        rec.info(op, error=exc)


def _tail(uri: str, hist: str, last: str) -> None:
    """Child: read the log from its start until the value ``last``, recording every record."""
    rec = HistoryRecorder(hist, "tailer")
    with storage.open_namespace(uri, CONF) as ns:
        r = ns.open_log(LOG).open_reader(storage.DLSN.INITIAL)
        rec.reader_start("tail", LOG, storage.DLSN.INITIAL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            record = r.read_next(non_blocking=True)
            if record is None:
                time.sleep(0.005)
                continue
            rec.read("tail", LOG, record.payload, record.dlsn, record.txid, seq=record.sequence_id)
            if record.payload == last.encode():
                return


def _acks(hist: Path) -> int:
    return sum(p.read_text().count('"ev": "ok"') for p in hist.glob("writer-a.*.jsonl"))


def test_real_log_two_processes_writer_sigkilled(tmp_path: Path) -> None:
    """Writer A (a process) is SIGKILLed mid-way while a reader process tails; writer B takes over and
    finishes; the final read and every recorded operation pass the checker."""
    uri, hist = f"distributedlog-local://{tmp_path / 'ns'}", tmp_path / "history"
    with storage.open_namespace(uri, CONF) as ns:
        ns.create_log(LOG)
    ctx = multiprocessing.get_context("spawn")
    tail = ctx.Process(target=_tail, args=(uri, str(hist), "writer-b-end"))
    a = ctx.Process(target=_writer, args=(uri, str(hist), "writer-a"))
    tail.start()
    a.start()
    try:
        deadline = time.monotonic() + 60
        while _acks(hist) < 100 and a.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _acks(hist) >= 100, "writer A acknowledged too little before the deadline"
        rec = HistoryRecorder(hist, "writer-b")
        fault = rec.fault_start("kill", "SIGKILL writer-a")
        a.kill()  # SIGKILL, mid-way through writes
        a.join(10)
        with storage.open_namespace(uri, CONF) as ns:
            dlm = ns.open_log(LOG)
            w = dlm.open_async_writer()  # takes the log over from the dead writer
            rec.owner(LOG)
            rec.fault_end("kill", fault=fault)
            first = dlm.last_txid() + 1
            futures = []
            for i in range(51):
                value = "writer-b-end" if i == 50 else f"writer-b-{i}"
                rec.invoke(i, "write", value, log=LOG, txid=first + i)
                f = w.write(storage.LogRecord(first + i, value.encode()))
                f.add_done_callback(partial(_complete, rec, i, first + i))
                futures.append(f)
            last = futures[-1].result(30)
            w.close()
            tail.join(60)
            assert tail.exitcode == 0
            reader = dlm.open_reader(storage.DLSN.INITIAL)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                record = reader.read_next(non_blocking=True)
                if record is None:
                    time.sleep(0.005)
                    continue
                rec.final_read(LOG, record.payload, record.dlsn, record.txid, seq=record.sequence_id)
                if record.dlsn == last:
                    break
            reader.close()
        rec.close()
        final = History.load(hist).final[LOG]
    finally:
        for p in (a, tail):
            if p.is_alive():
                p.kill()
            p.join(10)
    history = History.load(hist)
    report = check(history)
    print(report.line())
    avail = availability(history, "write")
    print(avail.line())
    assert report.ok, report
    c = report.counts
    assert c["acked"] >= 151 and c["read"] >= c["acked"] and c["observed"] == c["read"]
    assert c["ops"] == c["acked"] + c["unknown"] + c["failed"]
    assert set(avail.by_fault) == {"kill"} and avail.longest is not None
    # The same history with the last record missing from the final read: the checker sees it.
    broken = check(history, final_reads={LOG: final[:-1]})
    assert broken.counts["lost"] == 1 and broken.counts["divergent"] == 1  # the tailer read it
