"""Commands of ``dlog`` that inspect and read a log: ``show``, ``count``, ``dump``, ``tail``."""

from __future__ import annotations

import datetime
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import click

from dlog._common import (
    DLSN_TYPE,
    READ_BATCH,
    State,
    end_of,
    err,
    flush_stdout,
    out,
    pass_state,
    progress_wanted,
    progressbar,
    require_log,
)
from storage.errors import EndOfStreamError, LogEmptyError
from storage.formats.dlsn import DLSN
from storage.formats.record import LogRecordWithDLSN
from storage.formats.segment_metadata import LogSegmentMetadata
from storage.log import positioning
from storage.log.log_manager import LogManager
from storage.log.namespace import Namespace
from storage.log.tiered import TieredSegmentStore

#: Separator line printed before every record by ``dump`` and ``tail`` (DistributedLog's).
RECORD_SEPARATOR = "-" * 48


# --- show -------------------------------------------------------------------------------------
def _fmt_time(ms: int) -> str:
    if ms <= 0:
        return "-"
    t = datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def segment_line(ns: Namespace, seg: LogSegmentMetadata) -> str:
    """One line per segment: ``<lssn>\\t: key=value ...``. For an in-progress segment the last txid,
    last DLSN and record count are those of its last record visible to readers."""
    last_txid, last_dlsn, count = seg.last_txid, seg.last_dlsn, seg.record_count
    if seg.in_progress:
        rec = positioning.last_user_record(ns.segstore, [seg])
        if rec is None:
            last_txid, last_dlsn, count = -1, DLSN(seg.lssn, -1, -1), 0
        else:
            last_txid, last_dlsn, count = rec.txid, rec.dlsn, rec.last_position_within_segment
    fields = [
        f"state={'inprogress' if seg.in_progress else 'completed'}",
        f"truncation={seg.truncation_status.value}",
        f"ledgerId={seg.ledger_id}",
        f"firstTxId={seg.first_txid}",
        f"lastTxId={last_txid}",
        f"firstDLSN={seg.first_dlsn}",
        f"lastDLSN={last_dlsn}",
        f"recordCount={count}",
        f"startSequenceId={seg.start_sequence_id}",
        f"minActiveDLSN={seg.min_active_dlsn}",
        f"completionTime={_fmt_time(seg.completion_time_ms) if not seg.in_progress else '-'}",
    ]
    if isinstance(ns.segstore, TieredSegmentStore):  # a namespace with a cold store: where the data lives
        fields.append(f"tier={ns.segstore.where(seg.ledger_id)}")
    return f"{seg.lssn}\t: " + " ".join(fields)


@click.command()
@click.argument("name")
@pass_state
def show(state: State, name: str) -> None:
    """Show a log: first/last txid and DLSN, end of stream, record count, then one line per segment
    (state, truncation status, first/last txid and DLSN, record count).

    \b
    Output:
      log: NAME
      firstTxId: N | none          (first record of the first non-truncated segment)
      lastTxId: N | none
      firstDLSN: l,e,s | none
      lastDLSN: l,e,s | none
      endOfStreamMarked: true|false
      recordCount: N               (counted as DistributedLog does: truncated segments too)
      segments: N
      <lssn>\\t: state=.. truncation=.. ledgerId=.. firstTxId=.. lastTxId=.. firstDLSN=.. lastDLSN=..
               recordCount=.. startSequenceId=.. minActiveDLSN=.. completionTime=..
    """
    with state.namespace() as ns:
        dlm = require_log(ns, name)
        segs = dlm.log_segments()
        try:
            first: LogRecordWithDLSN | None = positioning.first_user_record(ns.segstore, segs)
        except LogEmptyError:
            first = None
        last = positioning.last_user_record(ns.segstore, segs)
        eos = positioning.last_user_record(ns.segstore, segs, include_eos=True)
        sealed = eos is not None and eos.is_end_of_stream
        count = dlm.record_count()
        out(f"log: {dlm.name}")
        out(f"firstTxId: {first.txid if first else 'none'}")
        out(f"lastTxId: {last.txid if last else 'none'}")
        out(f"firstDLSN: {first.dlsn if first else 'none'}")
        out(f"lastDLSN: {last.dlsn if last else 'none'}")
        out(f"endOfStreamMarked: {'true' if sealed else 'false'}")
        out(f"recordCount: {count}")
        out(f"segments: {len(segs)}")
        for seg in segs:
            out(segment_line(ns, seg))


# --- reading records --------------------------------------------------------------------------
def _read_records(
    dlm: LogManager, start: DLSN | int, *, end: DLSN, limit: int | None, stop: threading.Event | None = None
) -> Iterator[LogRecordWithDLSN]:
    """Records from ``start`` up to and including ``end`` (at most ``limit``); stops at the end of
    what is readable, at end of stream, or when ``stop`` is set."""
    reader = dlm.open_reader(start)
    try:
        n = 0
        while limit is None or n < limit:
            if stop is not None and stop.is_set():
                return
            want = READ_BATCH if limit is None else min(READ_BATCH, limit - n)
            try:
                recs = reader.read_bulk(want)
            except EndOfStreamError:
                return
            if not recs:
                return
            for rec in recs:
                if rec.dlsn > end:
                    return
                yield rec
                n += 1
    finally:
        reader.close()


def format_record(rec: LogRecordWithDLSN, *, hex_payload: bool) -> list[str]:
    """The lines ``dump`` and ``tail`` print for one record (DistributedLog's layout)."""
    payload = rec.payload
    text = payload.hex() if hex_payload else payload.decode("utf-8", "replace")
    return [
        RECORD_SEPARATOR,
        f"Record (txn = {rec.txid}, bytes = {len(payload)}, dlsn = {rec.dlsn}, sequence id = {rec.sequence_id})",
        text,
    ]


def _start_of(from_dlsn: DLSN | None, txid: int | None, default: DLSN | int) -> DLSN | int:
    if from_dlsn is not None and txid is not None:
        raise click.UsageError("give either --from or --txid, not both", ctx=click.get_current_context(silent=True))
    if from_dlsn is not None:
        return from_dlsn
    if txid is not None:
        return txid
    return default


@click.command()
@click.argument("name")
@click.argument("start", metavar="[FROM]", required=False, type=DLSN_TYPE)
@click.option(
    "--scan",
    is_flag=True,
    help="Count by reading every record from FROM instead of from segment metadata "
    "(slower; skips truncated segments; progress bar on a terminal).",
)
@pass_state
def count(state: State, name: str, start: DLSN | None, scan: bool) -> None:
    """Count the records of a log from FROM (a DLSN, default 1,0,0) to its end.

    Prints `total is N records.`. Without --scan the count comes from segment metadata, as
    DistributedLog's getLogRecordCount (truncated segments included).
    """
    start = start or DLSN.INITIAL
    with state.namespace() as ns:
        dlm = require_log(ns, name)
        total = dlm.record_count(start)
        if scan:
            end = end_of(dlm)
            scanned = 0
            if end is not None:
                with progressbar(total, "counting", enabled=progress_wanted(prints_records=False)) as bar:
                    for _ in _read_records(dlm, start, end=end, limit=None):
                        scanned += 1
                        bar.update(1)
            total = scanned
        out(f"total is {total} records.")


@click.command()
@click.argument("name")
@click.option("--from", "from_dlsn", type=DLSN_TYPE, metavar="DLSN", help="Start at this DLSN (default 1,0,0).")
@click.option("--txid", type=click.IntRange(min=0), metavar="N", help="Start at the first record with txid >= N.")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    metavar="N",
    help="Print at most N records (0 = all).",
)
@click.option("--hex", "hex_payload", is_flag=True, help="Print payloads as hex.")
@pass_state
def dump(state: State, name: str, from_dlsn: DLSN | None, txid: int | None, limit: int, hex_payload: bool) -> None:
    """Print records of a log, up to its end as of the start of the dump.

    Each record is a separator line, `Record (txn = T, bytes = B, dlsn = l,e,s, sequence id = S)`
    and the payload (UTF-8, or hex with --hex). Progress bar on stderr when it is a terminal and
    stdout is not.
    """
    start = _start_of(from_dlsn, txid, DLSN.INITIAL)
    with state.namespace() as ns:
        dlm = require_log(ns, name)
        end = end_of(dlm)
        if end is None:
            return
        estimate = dlm.record_count(start if isinstance(start, DLSN) else DLSN.INITIAL)
        if limit:
            estimate = min(estimate, limit)
        with progressbar(estimate, "dumping", enabled=progress_wanted(prints_records=True)) as bar:
            for rec in _read_records(dlm, start, end=end, limit=limit or None):
                for line in format_record(rec, hex_payload=hex_payload):
                    out(line)
                bar.update(1)
        flush_stdout()


# --- tail -------------------------------------------------------------------------------------
class _StopSignals:
    """While active, SIGINT and SIGTERM set ``event`` instead of killing the process."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.event = threading.Event()
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()

    def __enter__(self) -> _StopSignals:
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


@click.command()
@click.argument("name")
@click.option("--from", "from_dlsn", type=DLSN_TYPE, metavar="DLSN", help="Start at this DLSN.")
@click.option("--txid", type=click.IntRange(min=0), metavar="N", help="Start at the first record with txid >= N.")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0),
    default=0,
    metavar="N",
    help="Stop (exit 0) after printing N records (default 0: follow until interrupted).",
)
@click.option("--hex", "hex_payload", is_flag=True, help="Print payloads as hex.")
@pass_state
def tail(state: State, name: str, from_dlsn: DLSN | None, txid: int | None, limit: int, hex_payload: bool) -> None:
    """Follow a log: print records as they are written, until Ctrl-C / SIGINT / SIGTERM (exit 0),
    or until --limit N records were printed (exit 0).

    Starts after the current last record unless --from or --txid is given. Records are printed as
    by `dump`, flushed as they arrive. Stops (exit 0) when the log is sealed with end of stream.
    """
    with _StopSignals() as stop, state.namespace() as ns:
        dlm = require_log(ns, name)
        default: DLSN | int = DLSN.INITIAL
        if from_dlsn is None and txid is None:
            last = end_of(dlm)
            default = last.next() if last is not None else DLSN.INITIAL
        start = _start_of(from_dlsn, txid, default)
        reader = dlm.open_reader(start)
        left = limit or None  # records still to print; None: no limit
        try:
            while not stop.event.is_set() and left != 0:
                try:
                    recs = reader.read_bulk(READ_BATCH if left is None else min(READ_BATCH, left))
                except EndOfStreamError:
                    flush_stdout()
                    err(f"log {dlm.name} reached end of stream")
                    return
                for rec in recs:
                    for line in format_record(rec, hex_payload=hex_payload):
                        out(line)
                if left is not None:
                    left -= len(recs)
                if recs:
                    flush_stdout()
        finally:
            reader.close()


COMMANDS: tuple[click.Command, ...] = (show, count, dump, tail)
