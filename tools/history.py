"""The history checker of the fault tests: record operations, check properties, print one line of counts.

Jepsen's idea applied to this log. Every process records what it did with a
:class:`~tools.history_events.HistoryRecorder` (re-exported here; see that module for the event format) into
one shared directory; after the run (faults healed, writers stopped) the test reads every log once to the end
(the *final read*), then::

    report = check(History.load(history_dir))
    print(report.line())            # CHECK ops=1234 acked=1200 unknown=3 failed=31 read=1203 ... OK
    assert report.ok, report        # str(report): the line, then the first anomalies of each kind
    print(availability(History.load(history_dir), "write").line())

or ``python -m tools.history check DIR [--final FILE]`` (exit 0 when OK, 1 on an anomaly, 2 on a bad history).

What :func:`check` asserts, per log (each failed assertion adds to the count of its kind; see :data:`ANOMALIES`):

- ``lost``: every acknowledged write (``ok``) is in the final read, unless acknowledged at a DLSN before one the
  log was ``truncated`` at (those may be gone); ``misplaced``: ... and at the DLSN (and with
  the txid) its acknowledgement gave;
- ``invented``: every value read (final read or any reader) was written by some write to that log (any outcome);
- ``duplicated``: a value at most once in the final read (unknown-outcome writes included); a reader reads each
  record at most once;
- ``failed_visible``: no definitely-failed write (every write of that value ``fail``-ed) is visible;
- ``divergent`` (one history): each DLSN holds one value across acknowledgements, the final read and every
  reader; a reader never reads a DLSN the final read does not hold;
- ``reordered``: DLSNs strictly increase in the final read, and no reader goes back (records to move: length
  minus the longest in-order subsequence); ``txid_back``: txids never decrease in the final read;
  ``seq_gap``: its sequence ids (when recorded) go up by one (a reader that passes ``skipped``/``reordered``
  reads in the final read's order, so these hold for it too; a log without final read: per reader);
- ``skipped``: every reader's sequence is a contiguous slice of the final log from its start (the beginning,
  its recorded ``reader_start`` DLSN, or its first record with ``mid_log_readers=True``) to the last record it
  read: each final record in that range that it never read counts once;
- ``out_of_order``: the visible records of one writer (or one ``producer``) appear in send order (``seq`` meta
  if every write of it has one, else invoke order); counted as records to move (length minus the longest
  in-order subsequence); ``batch_split``: the records of one ``batch`` (meta) are contiguous in the log;
- ``epoch_back``: the log is a run of writer epochs that never goes back: an epoch is a writer from its
  ``owner`` event (or its first write) to its next one, ranked by that time; no record of an older epoch
  after a record of a newer one;
- ``stale_visible``: no record of a fenced epoch whose write was invoked after the fence is visible; an epoch is
  fenced by a ``fenced`` event and (``owner_fences=True``) by any later ``owner`` event on that log;
- ``no_final``: a log with acknowledged writes has no final read (so the checks above could not run).

Per exactly-once sink (when ``input``/``output`` events exist): ``sink_missing`` (an input value not in the
output), ``sink_duplicated`` (extra copies), ``sink_invented`` (output not in input), ``sink_reordered`` (per input
stream, output order differs from input order), ``sink_partial`` (a batch with fewer/more rows than its
``sink_batch`` count, or not contiguous: a partial or superseded batch).

Limits: times are compared across processes, so every recorder must share a clock (default
``time.monotonic()``: one machine, as the simulated hosts are; ``clock="wall"`` for real hosts with synced
clocks). Values must be unique per test. A truncated log, or a final read that does not start at the log's
first record, makes readers that read earlier records look ``divergent``. Memory is linear in the history.
"""

from __future__ import annotations

import argparse
import sys
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from tools.history_events import (
    FINAL,
    Dlsn,
    Event,
    FaultWindow,
    History,
    HistoryError,
    HistoryRecorder,
    Op,
    Read,
    load_final_reads,
)

__all__ = [
    "ANOMALIES",
    "FINAL",
    "Anomaly",
    "Availability",
    "Dlsn",
    "Event",
    "FaultWindow",
    "Gap",
    "History",
    "HistoryError",
    "HistoryRecorder",
    "Op",
    "Read",
    "Report",
    "availability",
    "check",
    "load_final_reads",
    "resumed_after_heals",
]

#: Counts that are no anomaly: operations invoked (any kind), of them acknowledged (ok), unknown (info or never
#: completed) and definitely failed; records in the final reads; records read by the other readers.
STATS = ("ops", "acked", "unknown", "failed", "read", "observed")
LOG_ANOMALIES = (
    "lost",
    "duplicated",
    "reordered",
    "stale_visible",
    "invented",
    "skipped",
    "misplaced",
    "divergent",
    "failed_visible",
    "txid_back",
    "seq_gap",
    "out_of_order",
    "batch_split",
    "epoch_back",
    "no_final",
)
SINK_ANOMALIES = ("sink_missing", "sink_duplicated", "sink_reordered", "sink_invented", "sink_partial")
#: Every anomaly kind; :attr:`Report.ok` is True when all of their counts are 0.
ANOMALIES = LOG_ANOMALIES + SINK_ANOMALIES


# ---------------------------------------------------------------------------------------------- report
@dataclass(frozen=True)
class Anomaly:
    """One concrete violation: its kind (a key of :data:`ANOMALIES`), the log (or sink), and what was seen."""

    kind: str
    log: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} [{self.log}] {self.detail}"


@dataclass
class Report:
    """Counts (:data:`STATS` and every anomaly kind) and the first ``max_examples`` anomalies of each kind."""

    counts: dict[str, int]
    anomalies: list[Anomaly] = field(default_factory=list)
    sinks: bool = False

    @property
    def ok(self) -> bool:
        """True when every anomaly count is 0."""
        return all(self.counts.get(k, 0) == 0 for k in ANOMALIES)

    def line(self) -> str:
        """``CHECK ops=.. acked=.. unknown=.. failed=.. read=.. observed=.. lost=.. ... OK|FAIL``: one line with
        every stat and every log anomaly count (sink counts when the history has a sink)."""
        keys = STATS + LOG_ANOMALIES + (SINK_ANOMALIES if self.sinks else ())
        return "CHECK " + " ".join(f"{k}={self.counts.get(k, 0)}" for k in keys) + (" OK" if self.ok else " FAIL")

    def of(self, kind: str) -> list[Anomaly]:
        """The recorded examples of one kind."""
        return [a for a in self.anomalies if a.kind == kind]

    def __str__(self) -> str:
        return "\n".join([self.line(), *(f"  {a}" for a in self.anomalies)])


def _lis(xs: Sequence[Any]) -> int:
    """Length of the longest strictly increasing subsequence."""
    tails: list[Any] = []
    for x in xs:
        i = bisect_left(tails, x)
        tails[i : i + 1] = [x]
    return len(tails)


def _short(vals: Iterable[object], n: int = 5) -> str:
    vals = list(vals)
    return ", ".join(repr(v) for v in vals[:n]) + (f", ... ({len(vals)})" if len(vals) > n else "")


# ---------------------------------------------------------------------------------------------- checks
def check(
    history: History,
    final_reads: Mapping[str, Sequence[Read]] | str | Path | None = None,
    *,
    mid_log_readers: bool = False,
    owner_fences: bool = True,
    max_examples: int = 5,
) -> Report:
    """Check every property of the module docstring; never raises for an anomaly (they are in the report).

    ``final_reads``: the final read of each log (a mapping log -> reads, or a file for :func:`load_final_reads`),
    overriding the history's own ``final`` reads for those logs. ``mid_log_readers``: a reader without a recorded
    ``reader_start`` may begin anywhere (else it must begin at the final log's first record). ``owner_fences``:
    an ``owner`` event fences every older epoch of that log.
    """
    if isinstance(final_reads, str | Path):
        final_reads = load_final_reads(final_reads)
    final = {**history.final, **{log: list(rs) for log, rs in (final_reads or {}).items()}}
    return _Checker(history, final, mid_log_readers, owner_fences, max_examples).run()


class _Checker:
    def __init__(self, h: History, final: dict[str, list[Read]], mid_log: bool, owner_fences: bool, examples: int):
        self.h, self.final, self.mid_log, self.owner_fences, self.examples = h, final, mid_log, owner_fences, examples
        self.counts: Counter[str] = Counter({k: 0 for k in STATS + ANOMALIES})
        self.anomalies: list[Anomaly] = []

    def flag(self, kind: str, where: str, detail: str, n: int = 1) -> None:
        self.counts[kind] += n
        if sum(a.kind == kind for a in self.anomalies) < self.examples:
            self.anomalies.append(Anomaly(kind, where, detail))

    def run(self) -> Report:
        h, c = self.h, self.counts
        c["ops"] = len(h.ops)
        outcomes = Counter(op.outcome for op in h.ops)
        c["acked"], c["failed"], c["unknown"] = outcomes["ok"], outcomes["fail"], outcomes["info"] + outcomes["pending"]
        c["observed"] = sum(len(rs) for rs in h.reads.values())
        logs = {op.log for op in h.ops if op.kind == "write"} | set(self.final) | {log for _, log in h.reads}
        for log in sorted(logs):
            self.check_log(log)
        for sink in sorted(set(h.inputs) | set(h.outputs)):
            self.check_sink(sink)
        return Report(dict(c), self.anomalies, sinks=bool(h.inputs or h.outputs))

    # -------------------------------------------------------------------- one log
    def check_log(self, log: str) -> None:
        h, final = self.h, self.final.get(log)
        writes = [(op.value, op) for op in h.ops if op.kind == "write" and op.log == log and op.value is not None]
        by_value: dict[str, list[Op]] = defaultdict(list)
        for v, op in writes:
            by_value[v].append(op)
        readers = {name: rs for (name, lg), rs in h.reads.items() if lg == log}
        seen: dict[str, str] = {}
        for name, rs in [(FINAL, final or []), *readers.items()]:
            for r in rs:
                seen.setdefault(r.value, name)
        for v, name in seen.items():
            if v not in by_value:
                self.flag("invented", log, f"{v!r} read by {name} was never written")
        # One history: each DLSN holds one value across acks and reads.
        at: dict[Dlsn, dict[str, str]] = defaultdict(dict)
        for v, op in writes:
            if op.outcome == "ok" and op.dlsn is not None:
                at[op.dlsn].setdefault(v, f"ack {op.label}")
        for name, rs in [(FINAL, final or []), *readers.items()]:
            for r in rs:
                if r.dlsn is not None:
                    at[r.dlsn].setdefault(r.value, name)
        for d, vals in at.items():
            if len(vals) > 1:
                self.flag("divergent", log, f"DLSN {d} holds " + ", ".join(f"{v!r} ({s})" for v, s in vals.items()))
        if final is None:
            if any(op.outcome == "ok" for _, op in writes):
                self.flag("no_final", log, "acknowledged writes but no final read: lost/order/fencing not checked")
            for name, rs in readers.items():
                self.sequence(log, name, rs)
            return
        self.counts["read"] += len(final)
        self.sequence(log, FINAL, final)
        where: dict[str, list[int]] = defaultdict(list)
        pos_of: dict[Dlsn, int] = {}
        for i, r in enumerate(final):
            where[r.value].append(i)
            if r.dlsn is not None:
                pos_of.setdefault(r.dlsn, i)
        for name, rs in readers.items():
            self.reader(log, name, rs, final, pos_of, where)
        self.writes(log, final, by_value, where)

    def sequence(self, log: str, who: str, rs: Sequence[Read]) -> None:
        """Checks of one read sequence on its own: duplicate values, DLSN order (counted as records to move),
        txids never decreasing, sequence ids going up by one."""
        for v, k in Counter(r.value for r in rs).items():
            if k > 1:
                self.flag("duplicated", log, f"{v!r} {k} times in {who}'s read", k - 1)
        dlsns = list(dict.fromkeys(r.dlsn for r in rs if r.dlsn is not None))
        if (bad := len(dlsns) - _lis(dlsns)) > 0:
            self.flag("reordered", log, f"{bad} records of {who} out of DLSN order", bad)
        txids = [(r.txid, r.value) for r in rs if r.txid is not None]
        for (ta, va), (tb, vb) in pairwise(txids):
            if tb < ta:
                self.flag("txid_back", log, f"{who}: txid {tb} ({vb!r}) after {ta} ({va!r})")
        seqs = [(r.seq, r.value) for r in rs if r.seq is not None]
        for (sa, va), (sb, vb) in pairwise(seqs):
            if sb != sa + 1:
                self.flag("seq_gap", log, f"{who}: sequence id {sb} ({vb!r}) after {sa} ({va!r})")

    def reader(
        self,
        log: str,
        name: str,
        rs: list[Read],
        final: list[Read],
        pos_of: dict[Dlsn, int],
        where: dict[str, list[int]],
    ) -> None:
        """A reader against the final log: each read a final record, no duplicate, no going back, no skip (its
        txid and sequence id order is then the final read's, checked there)."""
        ps: list[int] = []
        for r in rs:
            p = pos_of.get(r.dlsn) if r.dlsn is not None else next(iter(where.get(r.value, [])), None)
            if p is None:
                self.flag("divergent", log, f"{name} read {r.value!r} at {r.dlsn}, which the final read lacks")
            elif final[p].value == r.value:
                ps.append(p)
        for p, k in Counter(ps).items():
            if k > 1:
                self.flag("duplicated", log, f"{name} read {final[p].value!r} {k} times", k - 1)
        uniq = list(dict.fromkeys(ps))
        if (bad := len(uniq) - _lis(uniq)) > 0:
            self.flag("reordered", log, f"{name} went back: {bad} records out of log order", bad)
        if not uniq:
            return
        start: int = 0
        if (name, log) in self.h.reader_starts:
            s = self.h.reader_starts[(name, log)]
            start = next((i for i, r in enumerate(final) if s is None or (r.dlsn or s) >= s), len(final))
        elif self.mid_log:
            start = min(uniq)
        read = set(uniq)
        if missed := [final[i].value for i in range(start, max(uniq) + 1) if i not in read]:
            self.flag("skipped", log, f"{name} skipped {_short(missed)}", len(missed))

    def writes(self, log: str, final: list[Read], by_value: dict[str, list[Op]], where: dict[str, list[int]]) -> None:
        """Writes against the final log: lost, misplaced, failed visible, send order, batches, epochs, fencing."""
        visible: list[tuple[int, Op]] = []
        truncated = self.h.truncated.get(log)
        for v, ops in by_value.items():
            ps = where.get(v, [])
            for op in ops:
                if op.outcome != "ok":
                    continue
                tx = op.written_txid
                if not ps and truncated is not None and op.dlsn is not None and op.dlsn < truncated:
                    continue  # truncated away
                if not ps:
                    self.flag("lost", log, f"{op.label} acknowledged {v!r} at {op.dlsn}; not in the final read")
                elif op.dlsn is not None and all(final[p].dlsn != op.dlsn for p in ps):
                    self.flag("misplaced", log, f"{v!r} acknowledged at {op.dlsn}, read at {final[ps[0]].dlsn}")
                elif tx is not None and all(final[p].txid not in (None, tx) for p in ps):
                    self.flag("misplaced", log, f"{v!r} written with txid {tx}, read with txid {final[ps[0]].txid}")
            if ps and all(op.outcome == "fail" for op in ops):
                self.flag("failed_visible", log, f"{v!r} visible at {final[ps[0]].dlsn}; its write failed definitely")
            if ps:
                rank = {"ok": 0, "info": 1, "pending": 1, "fail": 2}
                visible.append((ps[0], min(ops, key=lambda o: (rank[o.outcome], o.invoked))))
        visible.sort(key=lambda pv: pv[0])
        senders: dict[str, list[tuple[int, Op]]] = defaultdict(list)
        batches: dict[tuple[str, str], list[int]] = defaultdict(list)
        for p, op in visible:
            senders[op.sender].append((p, op))
            if op.meta.get("batch") is not None:
                batches[(op.sender, str(op.meta["batch"]))].append(p)
        for sender, pops in senders.items():
            by_seq = all("seq" in op.meta for _, op in pops)
            sent = sorted(pops, key=lambda po: (po[1].meta["seq"],) if by_seq else (po[1].invoked, po[1].n))
            if (bad := len(sent) - _lis([p for p, _ in sent])) > 0:
                order = _short(op.value for _, op in pops)
                self.flag("out_of_order", log, f"{bad} records of {sender} not in send order; log order {order}", bad)
        for (sender, batch), ps in batches.items():
            if ps[-1] - ps[0] + 1 != len(ps):
                self.flag("batch_split", log, f"batch {batch} of {sender} split: positions {_short(ps)}")
        self.epochs(log, visible, final)

    def epochs(self, log: str, visible: list[tuple[int, Op]], final: list[Read]) -> None:
        owned: dict[str, list[float]] = defaultdict(list)
        for lg, w, t in self.h.owners:
            if lg == log:
                owned[w].append(t)

        def epoch(w: str, t: float) -> tuple[str, int]:
            return (w, bisect_right(owned.get(w, []), t))

        rank: dict[tuple[str, int], float] = {}
        for op in self.h.ops:
            if op.kind == "write" and op.log == log and op.writer is not None:
                e = epoch(op.writer, op.invoked)
                rank[e] = min(rank.get(e, op.invoked), owned[e[0]][e[1] - 1] if e[1] else op.invoked)
        fence: dict[tuple[str, int], float] = {}
        for lg, w, t in self.h.fences:
            if lg == log:
                e = epoch(w, t)
                fence[e] = min(fence.get(e, t), t)
        if self.owner_fences:
            for w2, times in owned.items():
                for t in times:
                    for e, r in rank.items():
                        if r < t and e != epoch(w2, t):
                            fence[e] = min(fence.get(e, t), t)
        newest: tuple[float, tuple[str, int], str] | None = None
        for p, op in visible:
            if op.writer is None:
                continue
            e = epoch(op.writer, op.invoked)
            if newest is not None and rank[e] < newest[0]:
                self.flag(
                    "epoch_back",
                    log,
                    f"{op.value!r} of {e[0]} (epoch {e[1]}) after {newest[2]!r} of "
                    f"{newest[1][0]} (epoch {newest[1][1]})",
                )
            elif newest is None or rank[e] > newest[0]:
                newest = (rank[e], e, op.value or "")
            if e in fence and op.invoked > fence[e]:
                late = op.invoked - fence[e]
                self.flag(
                    "stale_visible",
                    log,
                    f"{op.value!r} at {final[p].dlsn} by {e[0]} (epoch {e[1]}), "
                    f"written {late:.3f}s after it was fenced",
                )

    # -------------------------------------------------------------------- exactly-once sink
    def check_sink(self, sink: str) -> None:
        """Output equals input exactly once, per-stream order kept, every batch whole and contiguous."""
        h = self.h
        stream_of: dict[str, str] = {}
        index: dict[str, int] = {}
        inputs = h.inputs.get(sink, [])
        if inputs and all(d is not None for _, _, d in inputs):
            inputs = sorted(inputs, key=lambda x: (x[0], x[2] or (0, 0, 0)))
        for stream, v, _ in inputs:
            if v not in stream_of:
                stream_of[v], index[v] = stream, len(index)
        out = h.outputs.get(sink, [])
        if out and all(d is not None for _, _, d in out):
            out = sorted(out, key=lambda x: x[2] or (0, 0, 0))
        count = Counter(v for v, _, _ in out)
        if missing := [v for v in stream_of if v not in count]:
            self.flag("sink_missing", sink, f"input never in the output: {_short(missing)}", len(missing))
        for v, k in count.items():
            if k > 1:
                self.flag("sink_duplicated", sink, f"{v!r} {k} times in the output", k - 1)
            if v not in stream_of:
                self.flag("sink_invented", sink, f"{v!r} in the output is no input")
        per_stream: dict[str, list[int]] = defaultdict(list)
        for v in dict.fromkeys(v for v, _, _ in out if v in stream_of):
            per_stream[stream_of[v]].append(index[v])
        for stream, idx in per_stream.items():
            if (bad := len(idx) - _lis(idx)) > 0:
                self.flag("sink_reordered", sink, f"{bad} records of input stream {stream} out of order", bad)
        rows: dict[str, list[int]] = defaultdict(list)
        for i, (_, batch, _) in enumerate(out):
            if batch is not None:
                rows[batch].append(i)
        for batch, ps in rows.items():
            want = h.sink_batches.get((sink, batch))
            if want is not None and want != len(ps):
                self.flag("sink_partial", sink, f"batch {batch}: {len(ps)} rows visible of {want} committed")
            elif ps[-1] - ps[0] + 1 != len(ps):
                self.flag("sink_partial", sink, f"batch {batch} not contiguous in the output (superseded?)")


# ---------------------------------------------------------------------------------------------- availability
@dataclass(frozen=True)
class Gap:
    """An interval with no successful operation."""

    start: float
    end: float

    @property
    def length(self) -> float:
        return self.end - self.start


@dataclass
class Availability:
    """Longest interval with no successful operation of ``kind``, overall and touching each fault window."""

    kind: str
    longest: Gap | None
    windows: list[tuple[FaultWindow, Gap | None]]

    @property
    def by_fault(self) -> dict[str, float]:
        """Fault kind -> the longest gap touching any window of that kind (seconds)."""
        out: dict[str, float] = {}
        for w, g in self.windows:
            out[w.kind] = max(out.get(w.kind, 0.0), g.length if g else 0.0)
        return out

    def line(self) -> str:
        """``AVAIL write longest=6.21s partition=6.21s kill=0.52s``."""
        parts = [f"longest={self.longest.length if self.longest else 0.0:.2f}s"]
        parts += [f"{k}={v:.2f}s" for k, v in self.by_fault.items()]
        return f"AVAIL {self.kind} " + " ".join(parts)


def availability(history: History, kind: str = "write", *, log: str | None = None) -> Availability:
    """Gaps between consecutive successes of ``kind`` ops (on ``log``, or all), from the first invoke to the
    last completion; a window's gap is the longest that overlaps it (so a stall that outlasts the heal counts
    whole). No ops of that kind: no gaps."""
    ops = [op for op in history.ops if op.kind == kind and (log is None or op.log == log)]
    gaps: list[Gap] = []
    if ops:
        start = min(op.invoked for op in ops)
        end = max(op.done if op.done is not None else op.invoked for op in ops)
        oks = sorted(op.done for op in ops if op.outcome == "ok" and op.done is not None)
        gaps = [Gap(a, b) for a, b in pairwise([start, *oks, end]) if b > a]
    windows: list[tuple[FaultWindow, Gap | None]] = []
    for w in history.faults:
        w_end = history.end if w.end is None else w.end
        touching = [g for g in gaps if g.start <= w_end and g.end >= w.start]
        windows.append((w, max(touching, key=lambda g: g.length, default=None)))
    return Availability(kind, max(gaps, key=lambda g: g.length, default=None), windows)


def resumed_after_heals(history: History, logs: Sequence[str], bound: float, kind: str = "write") -> list[str]:
    """Liveness after every heal: for each healed fault window, an ``ok`` op of ``kind`` on each of ``logs``
    invoked at or after the heal and completed within ``bound`` seconds of it (``bound``: what the product states
    it takes to recover, e.g. a session timeout plus recovery). A fault that starts before that deadline extends
    it: the heals of overlapping faults are judged together, against the last heal's deadline. Returns one line
    per miss; empty when every heal was followed by progress in time."""
    healed = sorted((f for f in history.faults if f.end is not None), key=lambda f: f.start)
    ends = [f.end or 0.0 for f in healed]
    done: dict[str, list[tuple[float, float]]] = {log: [] for log in logs}  # (invoked, completed) of each ok op
    for op in history.ops:
        if op.kind == kind and op.outcome == "ok" and op.done is not None and op.log in done:
            done[op.log].append((op.invoked, op.done))
    misses: list[str] = []
    for i, f in enumerate(healed):
        j = i
        while j + 1 < len(healed) and healed[j + 1].start < ends[j] + bound:
            j += 1
        deadline = ends[j] + bound
        for log in logs:
            if not any(invoked >= ends[i] and completed <= deadline for invoked, completed in done[log]):
                misses.append(f"{log}: no {kind} invoked after the heal of {f.kind} ({f.detail}) "
                              f"completed within {deadline - ends[i]:.1f}s")  # fmt: skip
    return misses


# ---------------------------------------------------------------------------------------------- command
def main(argv: Sequence[str] | None = None) -> int:
    """``check DIR [--final FILE] [--mid-log-readers] [--no-owner-fences] [--clock wall]``: the line on stdout,
    anomalies on stderr; exit 0 OK, 1 anomalies, 2 bad history. ``avail DIR [--kind write] [--log L]``."""
    parser = argparse.ArgumentParser(prog="python -m tools.history", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check a history directory; print one CHECK line")
    c.add_argument("dir")
    c.add_argument("--final", help="JSON-lines file with the final read(s)")
    c.add_argument("--mid-log-readers", action="store_true", help="readers may start anywhere")
    c.add_argument("--no-owner-fences", action="store_true", help="only explicit fenced events fence")
    c.add_argument("--examples", type=int, default=5)
    a = sub.add_parser("avail", help="longest unavailability, overall and per fault kind")
    a.add_argument("dir")
    a.add_argument("--kind", default="write")
    a.add_argument("--log")
    for p in (c, a):
        p.add_argument("--clock", choices=("monotonic", "wall"), default="monotonic")
    args = parser.parse_args(argv)
    try:
        history = History.load(args.dir, clock=args.clock)
        if args.cmd == "avail":
            print(availability(history, args.kind, log=args.log).line())
            return 0
        report = check(
            history,
            args.final,
            mid_log_readers=args.mid_log_readers,
            owner_fences=not args.no_owner_fences,
            max_examples=args.examples,
        )
    except (HistoryError, OSError) as exc:
        print(f"history: {exc}", file=sys.stderr)
        return 2
    print(report.line())
    for anomaly in report.anomalies:
        print(f"  {anomaly}", file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
