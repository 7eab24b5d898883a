"""The history's events for the checker (:mod:`tools.history`): writing them (:class:`HistoryRecorder`: cheap,
per-process, crash-safe) and reading them back (:class:`History`: merged, modelled as operations and reads).

Every process of a fault test (writer, reader, Spark driver, producer through a proxy, the test itself) opens
one :class:`HistoryRecorder` on a directory shared by all of them and records what it does::

    rec = HistoryRecorder(history_dir, "writer-1")
    rec.owner("events")                                   # after open_writer() returned: a new writer epoch
    rec.invoke(7, "write", "w1-7", log="events", txid=107, batch=3)
    rec.ok(7, dlsn=(1, 4, 0), txid=107)                   # or rec.fail(7, error=exc) / rec.info(7, error=exc)
    rec.read("tail-1", "events", "w1-7", (1, 4, 0), 107)

Each recorder appends JSON lines to a file of its own, ``<dir>/<process>.<pid>.<id>.jsonl``, one ``os.write``
per event (no user-space buffer), so a SIGKILLed process leaves a valid prefix and at most one torn last line,
which :meth:`History.load` ignores. Every line carries ``ev`` (the event), ``p`` (process name),
``r`` (this recorder's id: a restarted process is a new recorder), ``n`` (a per-recorder counter), ``t``
(``time.time()``) and ``m`` (``time.monotonic()``; one clock for every process of one machine, which is what the
simulated hosts are). Thread-safe: futures' callbacks may record from other threads.

Values are compared as text: ``str`` as is, ``bytes`` decoded as UTF-8 (undecodable bytes as ``\\xNN``), ``int``
by ``str()``. Every written value must be unique across the whole test. DLSNs are ``(lssn, entry_id, slot_id)``
int triples; a ``storage.DLSN``, a 3-sequence or the text ``"lssn,entry,slot"`` is accepted. Only the standard
library is imported, so any process that has the repository on its path can record.

:meth:`History.load` merges the files by time into operations (:class:`Op`: invoke + ok / fail / info, or
pending), reads per reader and per log (:class:`Read`), the final read of each log, owner and fence events,
fault windows and sink input/output; :func:`tools.history.check` judges it.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Dlsn = tuple[int, int, int]

#: Log name used when an event does not name one.
DEFAULT_LOG = "log"
#: Reader name of the final read of a log (after healing, after every writer stopped).
FINAL = "final"
#: Sink name used when an input/output event does not name one.
DEFAULT_SINK = "sink"


def as_value(value: object) -> str:
    """The text form of a written/read value (see the module docstring); raises ``TypeError`` for other types."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"a value must be str, bytes or int, got {type(value).__name__}")


def as_dlsn(dlsn: object) -> Dlsn | None:
    """``(lssn, entry_id, slot_id)`` from a ``storage.DLSN``, a 3-sequence of ints or ``"l,e,s"``; None stays None.

    Raises ``ValueError`` for anything else.
    """
    if dlsn is None:
        return None
    parts: Any
    if isinstance(dlsn, str):
        parts = dlsn.split(",")
    elif isinstance(dlsn, list | tuple):
        parts = dlsn
    elif all(hasattr(dlsn, a) for a in ("lssn", "entry_id", "slot_id")):
        parts = (getattr(dlsn, "lssn"), getattr(dlsn, "entry_id"), getattr(dlsn, "slot_id"))  # noqa: B009
    else:
        raise ValueError(f"not a DLSN: {dlsn!r}")
    try:
        if len(parts) != 3 or any(isinstance(p, bool | float) for p in parts):
            raise ValueError
        lssn, entry, slot = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise ValueError(f"not a DLSN: {dlsn!r}") from None
    return (lssn, entry, slot)


def _error_text(error: object) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    return str(error)


class HistoryRecorder:
    """Appends this process's events to its own JSON-lines file in ``directory`` (created if missing).

    ``process`` names the process in reports and is the default writer identity of its writes. Operations are
    keyed by ``op_id`` within one recorder: ``invoke`` once, then at most one of ``ok`` / ``fail`` / ``info``
    (an operation never completed counts as unknown). ``fsync=True`` also fsyncs every line (only needed when
    a whole machine may crash; a SIGKILL loses nothing already written). Usable as a context manager.

    Raises ``ValueError`` for an empty process name, a DLSN that is none, use after :meth:`close` or from a
    forked child (make one recorder per process); ``TypeError`` for a value that is not str, bytes or int;
    ``OSError`` from the file system.
    """

    def __init__(self, directory: str | os.PathLike[str], process: str, *, fsync: bool = False) -> None:
        if not process:
            raise ValueError("process name must not be empty")
        self.process = process
        self.id = uuid.uuid4().hex[:8]
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", process)
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = Path(directory) / f"{safe}.{os.getpid()}.{self.id}.jsonl"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._pid = os.getpid()
        self._fsync = fsync
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self._faults = itertools.count(1)

    def _emit(self, ev: str, **fields: Any) -> None:
        with self._lock:
            if self._fd < 0 or self._pid != os.getpid():
                why = "is closed" if self._fd < 0 else "belongs to another process (forked?)"
                raise ValueError(f"history recorder {self.process} {why}")
            head = {"ev": ev, "p": self.process, "r": self.id, "n": next(self._counter)}
            line = json.dumps({**head, "t": time.time(), "m": time.monotonic(), **fields}, default=str) + "\n"
            data = line.encode("utf-8", "backslashreplace")
            while data:
                data = data[os.write(self._fd, data) :]
            if self._fsync:
                os.fsync(self._fd)

    # ------------------------------------------------------------------ operations
    def invoke(
        self, op_id: str | int, kind: str = "write", value: object = None, *, log: str = DEFAULT_LOG, **meta: Any
    ) -> None:
        """An operation starts. ``kind`` "write" is what the checks look at (its ``value`` must be unique);
        any other kind (``"open"``, ``"read"``, ``"commit"`` ...) only counts and serves availability.

        Meta keys the checks understand: ``txid`` (the txid written), ``writer`` (the lock owner that appends it:
        a writer process or a proxy; default this process, none for a ``producer`` write), ``producer`` and
        ``seq`` (an idempotent producer and its sequence number: send order), ``batch`` (records of one batch
        must be contiguous in the log). Others are kept and shown in anomalies.
        """
        v = None if value is None else as_value(value)
        self._emit("invoke", op=str(op_id), kind=kind, value=v, log=log, meta=meta)

    def ok(self, op_id: str | int, *, dlsn: object = None, txid: int | None = None, **meta: Any) -> None:
        """The operation succeeded: for a write, acknowledged durable at ``dlsn`` with ``txid``. ``meta`` adds to
        (overrides) the invoke's, e.g. ``writer=`` the proxy that acknowledged a producer's write."""
        self._emit("ok", op=str(op_id), dlsn=as_dlsn(dlsn), txid=txid, meta=meta)

    def fail(self, op_id: str | int, *, error: object = "", definite: bool = True) -> None:
        """The operation failed. ``definite=True``: it certainly took no effect (its value must never be
        visible); ``definite=False`` is the same as :meth:`info`."""
        self._emit("fail" if definite else "info", op=str(op_id), error=_error_text(error))

    def info(self, op_id: str | int, *, error: object = "") -> None:
        """The outcome is unknown (a timeout, a lost reply): the value may be visible, at most once."""
        self._emit("info", op=str(op_id), error=_error_text(error))

    # ------------------------------------------------------------------ reads
    def read(
        self, reader: str, log: str, value: object, dlsn: object, txid: int | None, *, seq: int | None = None
    ) -> None:
        """Reader ``reader`` (one reader object; a reopened reader takes a new name) read one record."""
        self._emit("read", reader=reader, log=log, value=as_value(value), dlsn=as_dlsn(dlsn), txid=txid, seq=seq)

    def final_read(self, log: str, value: object, dlsn: object, txid: int | None, *, seq: int | None = None) -> None:
        """One record of the final read of ``log``: the whole log, read after healing and after writers stopped."""
        self.read(FINAL, log, value, dlsn, txid, seq=seq)

    def read_records(self, reader: str, log: str, records: Any, decode: Any = None) -> int:
        """Record every record of an iterable of read records (``.dlsn``, ``.txid``, ``.payload``,
        ``.sequence_id``); ``decode(payload) -> value`` (default: the payload is the value). Returns the count."""
        n = 0
        for r in records:
            value = r.payload if decode is None else decode(r.payload)
            self.read(reader, log, value, r.dlsn, r.txid, seq=getattr(r, "sequence_id", None))
            n += 1
        return n

    def reader_start(self, reader: str, log: str, start: object = None) -> None:
        """Reader ``reader`` was opened at ``start`` (a DLSN; None: the beginning): its first record must be the
        first record of the final log at or after ``start``."""
        self._emit("reader_start", reader=reader, log=log, start=as_dlsn(start))

    # ------------------------------------------------------------------ ownership and fencing
    def owner(self, log: str = DEFAULT_LOG, writer: str | None = None) -> None:
        """``writer`` (default this process) now owns ``log``: its open_writer returned; a new writer epoch."""
        self._emit("owner", log=log, writer=writer or self.process)

    def fenced(self, writer: str, at: float | None = None, *, log: str = DEFAULT_LOG) -> None:
        """``writer``'s epoch on ``log`` is fenced from ``at`` (a ``time.monotonic()`` value; default now): none of
        its appends invoked later may be visible."""
        now_m, now_t = time.monotonic(), time.time()
        at_m = now_m if at is None else float(at)
        self._emit("fenced", writer=writer, log=log, at_m=at_m, at_t=now_t - (now_m - at_m))

    # ------------------------------------------------------------------ faults
    def fault_start(self, kind: str, detail: str = "") -> str:
        """A fault of ``kind`` (e.g. "partition", "kill", "loss") begins; returns its id for :meth:`fault_end`."""
        fault = f"{self.id}-{next(self._faults)}"
        self._emit("fault_start", kind=kind, detail=detail, fault=fault)
        return fault

    def fault_end(self, kind: str, detail: str = "", *, fault: str | None = None) -> None:
        """The fault ends (healed): the one with id ``fault``, else the latest open fault of ``kind``."""
        self._emit("fault_end", kind=kind, detail=detail, fault=fault)

    # ------------------------------------------------------------------ exactly-once sink
    def input(self, stream: str, value: object, *, sink: str = DEFAULT_SINK, dlsn: object = None) -> None:
        """``value`` is in the sink's input stream ``stream`` (record it from a final read of the input)."""
        self._emit("input", sink=sink, stream=stream, value=as_value(value), dlsn=as_dlsn(dlsn))

    def output(self, value: object, *, sink: str = DEFAULT_SINK, batch: object = None, dlsn: object = None) -> None:
        """``value`` is in the sink's output (record it from a final read after the query drained), in
        output order; ``batch`` is the micro-batch id that wrote it, when known."""
        self._emit("output", sink=sink, value=as_value(value), batch=batch, dlsn=as_dlsn(dlsn))

    def sink_batch(self, batch: object, count: int, *, sink: str = DEFAULT_SINK) -> None:
        """Micro-batch ``batch`` was committed with ``count`` rows: all of them or none may be visible."""
        self._emit("sink_batch", sink=sink, batch=batch, count=count)

    def truncated(self, log: str, dlsn: object) -> None:
        """The log is truncated before ``dlsn``: acknowledged records before it may be gone from the final read.
        Record it before calling the truncation: a process killed while it runs may have stored it."""
        self._emit("truncated", log=log, dlsn=as_dlsn(dlsn))

    def event(self, ev: str, **fields: Any) -> None:
        """Any other event (kept in the history, ignored by the checks)."""
        self._emit(ev, **fields)

    def close(self) -> None:
        """Close the file; later calls raise ``ValueError``."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- loading
class HistoryError(ValueError):
    """The recorded history itself is malformed: no history files, a bad line (other than a torn last line), an
    event missing a field, an operation invoked twice or completed twice or completed without invoke, two final
    reads of one log."""


@dataclass(frozen=True)
class Event:
    """One recorded line: event name, process, recorder id, per-recorder counter, time (chosen clock), fields."""

    ev: str
    process: str
    recorder: str
    n: int
    time: float
    data: Mapping[str, Any]


@dataclass
class Op:
    """An operation: invoked, then ``outcome`` "ok" | "fail" (definite) | "info" (unknown) | "pending" (never
    completed: unknown)."""

    process: str
    recorder: str
    op_id: str
    kind: str
    value: str | None
    log: str
    meta: dict[str, Any]
    invoked: float
    n: int
    outcome: str = "pending"
    done: float | None = None
    dlsn: Dlsn | None = None
    txid: int | None = None
    error: str = ""

    @property
    def label(self) -> str:
        return f"{self.process}#{self.op_id}"

    @property
    def writer(self) -> str | None:
        """The lock owner that appends it (fencing/epochs): meta ``writer``, else the process unless a producer."""
        w = self.meta.get("writer")
        return str(w) if w is not None else (None if "producer" in self.meta else self.process)

    @property
    def sender(self) -> str:
        """Whose send order it follows: meta ``producer``, else ``writer``, else the process."""
        return str(self.meta.get("producer", self.meta.get("writer", self.process)))

    @property
    def written_txid(self) -> int | None:
        return self.txid if self.txid is not None else self.meta.get("txid")


@dataclass(frozen=True)
class Read:
    """One record as read: value, DLSN, txid, sequence id (each may be None when unknown)."""

    value: str
    dlsn: Dlsn | None = None
    txid: int | None = None
    seq: int | None = None


@dataclass
class FaultWindow:
    """A fault from ``fault_start`` to ``fault_end`` (``end`` None: never healed, runs to the history's end)."""

    kind: str
    detail: str
    start: float
    end: float | None
    fault: str


class History:
    """Every recorded event, merged in time order, and the model the checks use (``ops``, ``reads`` keyed by
    (reader label, log), ``final`` reads per log, ``owners``/``fences`` as (log, writer, time), ``faults``,
    sink ``inputs``/``outputs``/``sink_batches``). Raises :class:`HistoryError` on a malformed history."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.events = list(events)
        self.ops: list[Op] = []
        self.reads: dict[tuple[str, str], list[Read]] = defaultdict(list)
        self.final: dict[str, list[Read]] = {}
        self.reader_starts: dict[tuple[str, str], Dlsn | None] = {}
        self.owners: list[tuple[str, str, float]] = []
        self.fences: list[tuple[str, str, float]] = []
        self.faults: list[FaultWindow] = []
        self.inputs: dict[str, list[tuple[str, str, Dlsn | None]]] = defaultdict(list)
        self.outputs: dict[str, list[tuple[str, str | None, Dlsn | None]]] = defaultdict(list)
        self.sink_batches: dict[tuple[str, str], int] = {}
        self.truncated: dict[str, Dlsn] = {}  # per log, the highest DLSN it was truncated before
        self.start = min((e.time for e in self.events), default=0.0)
        self.end = max((e.time for e in self.events), default=0.0)
        self._ops: dict[tuple[str, str], Op] = {}
        self._labels: dict[tuple[str, str], str] = {}
        self._final_from: dict[str, str] = {}
        for e in self.events:
            try:
                self._add(e, e.data)
            except HistoryError:
                raise
            except (KeyError, TypeError, ValueError) as exc:
                raise HistoryError(f"{e.process}: bad {e.ev} event #{e.n} ({exc!r})") from None

    def _add(self, e: Event, d: Mapping[str, Any]) -> None:
        if e.ev == "invoke":
            key = (e.recorder, str(d["op"]))
            if key in self._ops:
                raise HistoryError(f"{e.process}: operation {key[1]} invoked twice")
            value = None if d.get("value") is None else as_value(d["value"])
            log, meta = str(d.get("log", DEFAULT_LOG)), dict(d.get("meta") or {})
            op = Op(e.process, e.recorder, key[1], str(d.get("kind", "write")), value, log, meta, e.time, e.n)
            self._ops[key] = op
            self.ops.append(op)
        elif e.ev in ("ok", "fail", "info"):
            done = self._ops.get((e.recorder, str(d["op"])))
            if done is None or done.outcome != "pending":
                why = "without invoke" if done is None else f"after {done.outcome}"
                raise HistoryError(f"{e.process}: {e.ev} of operation {d['op']} {why}")
            done.outcome, done.done, done.error = e.ev, e.time, str(d.get("error", ""))
            done.dlsn, done.txid = as_dlsn(d.get("dlsn")), d.get("txid")
            done.meta.update(d.get("meta") or {})
        elif e.ev == "read":
            log, reader = str(d.get("log", DEFAULT_LOG)), str(d["reader"])
            r = Read(as_value(d["value"]), as_dlsn(d.get("dlsn")), d.get("txid"), d.get("seq"))
            if reader == FINAL:
                if self._final_from.setdefault(log, e.recorder) != e.recorder:
                    raise HistoryError(f"two final reads of log {log!r} (by two recorders)")
                self.final.setdefault(log, []).append(r)
            else:
                self.reads[(self._label(e, reader), log)].append(r)
        elif e.ev == "reader_start":
            self.reader_starts[(self._label(e, str(d["reader"])), str(d["log"]))] = as_dlsn(d["start"])
        elif e.ev == "owner":
            self.owners.append((str(d["log"]), str(d["writer"]), e.time))
        elif e.ev == "fenced":
            self.fences.append((str(d["log"]), str(d["writer"]), float(d["at"])))
        elif e.ev == "fault_start":
            self.faults.append(FaultWindow(str(d["kind"]), str(d.get("detail", "")), e.time, None, str(d["fault"])))
        elif e.ev == "fault_end":
            fid, kind = d.get("fault"), str(d["kind"])
            open_ = [f for f in self.faults if f.end is None and (f.fault == fid if fid else f.kind == kind)]
            if open_:
                open_[-1].end = e.time
        elif e.ev == "input":
            sink = str(d.get("sink", DEFAULT_SINK))
            self.inputs[sink].append((str(d["stream"]), as_value(d["value"]), as_dlsn(d.get("dlsn"))))
        elif e.ev == "output":
            sink, batch = str(d.get("sink", DEFAULT_SINK)), None if d.get("batch") is None else str(d["batch"])
            self.outputs[sink].append((as_value(d["value"]), batch, as_dlsn(d.get("dlsn"))))
        elif e.ev == "truncated":
            log, at = str(d["log"]), as_dlsn(d["dlsn"])
            if at is not None and at > self.truncated.get(log, (0, 0, 0)):
                self.truncated[log] = at
        elif e.ev == "sink_batch":
            self.sink_batches[(str(d.get("sink", DEFAULT_SINK)), str(d["batch"]))] = int(d["count"])

    def _label(self, e: Event, reader: str) -> str:
        """``process/reader``, made unique with ``@recorder`` when a restarted process reuses the name."""
        key = (e.recorder, reader)
        if key not in self._labels:
            label = f"{e.process}/{reader}"
            self._labels[key] = label if label not in self._labels.values() else f"{label}@{e.recorder}"
        return self._labels[key]

    @classmethod
    def load(cls, directory: str | Path, *, clock: str = "monotonic") -> History:
        """Merge every ``*.jsonl`` file of ``directory`` (each in its own order) by time. ``clock``:
        "monotonic" (``m``, default) or "wall" (``t``). A torn last line of a file is ignored."""
        if clock not in ("monotonic", "wall"):
            raise ValueError(f"clock must be 'monotonic' or 'wall', not {clock!r}")
        files = sorted(Path(directory).glob("*.jsonl"))
        if not files:
            raise HistoryError(f"{directory}: no history (*.jsonl) files")
        streams = [list(_read_events(p, clock)) for p in files]
        return cls(heapq.merge(*streams, key=lambda e: e.time))


def _read_events(path: Path, clock: str) -> Iterator[Event]:
    lines = path.read_bytes().split(b"\n")
    tkey, akey = ("m", "at_m") if clock == "monotonic" else ("t", "at_t")
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            d = json.loads(raw)
            ev = Event(str(d.pop("ev")), str(d.pop("p")), str(d.pop("r")), int(d.pop("n")), float(d[tkey]), d)
        except (ValueError, KeyError, TypeError) as exc:
            if i == len(lines):  # no newline after it
                return  # the torn last line of a killed process
            raise HistoryError(f"{path}:{i}: not a history event ({exc})") from None
        if akey in d:
            d["at"] = d[akey]
        yield ev


def load_final_reads(path: str | Path) -> dict[str, list[Read]]:
    """Final reads from a JSON-lines file: history ``read`` events, or ``{"log", "value", "dlsn", "txid"[, "seq"]}``
    objects (``dlsn`` as ``[l, e, s]`` or ``"l,e,s"``), in read order. Raises :class:`HistoryError` on a bad line."""
    out: dict[str, list[Read]] = {}
    for i, raw in enumerate(Path(path).read_text().splitlines(), 1):
        if raw.strip():
            try:
                d = json.loads(raw)
                r = Read(as_value(d["value"]), as_dlsn(d.get("dlsn")), d.get("txid"), d.get("seq"))
            except (ValueError, KeyError, TypeError) as exc:
                raise HistoryError(f"{path}:{i}: not a final read record ({exc})") from None
            out.setdefault(str(d.get("log", DEFAULT_LOG)), []).append(r)
    return out
