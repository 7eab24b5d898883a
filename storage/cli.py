"""``dlog``: the operations command-line tool (CONTRACT §5), after Apache DistributedLog's ``dlog tool``.

::

    dlog [--uri URI] [--conf FILE] [-v] COMMAND [ARGS]...

Commands: ``bind``, ``list``, ``create``, ``delete``, ``show``, ``count``, ``dump``, ``tail``, ``write``,
``truncate``, ``seal``, ``dlsn encode`` / ``dlsn decode`` and ``bench``; ``--help`` on each.

Output conventions (stable, for scripts and ``grep``):

* results go to stdout as plain text, one fact per line; ``show`` uses DistributedLog's field names
  (``firstTxId``, ``lastDLSN``, ``endOfStreamMarked``, ...), ``count`` prints ``total is N records.``,
  ``dump``/``tail`` print ``Record (txn = .., bytes = .., dlsn = .., sequence id = ..)`` then the payload;
* DLSNs are printed and parsed in the text form ``lssn,entry,slot``;
* payloads are printed as UTF-8 (undecodable bytes replaced by U+FFFD) or as hex with ``--hex``;
* progress bars go to stderr, only when stderr is a terminal (and, for commands that print records, only
  when stdout is not: the records scrolling by are progress enough).

Exit codes: 0 success; 1 an error, reported as one line ``dlog: error: <message>`` on stderr (every
:class:`storage.errors.DLError` and every operational failure); 2 a usage error (unknown option, bad DLSN or
number, missing ``--uri``), also one line; 130 interrupted (``tail`` exits 0 on SIGINT/SIGTERM: following until
told to stop is its normal end).
"""

from __future__ import annotations

import binascii
import contextlib
import datetime
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, NoReturn

import click

from storage import __version__
from storage.config import Config
from storage.dlsn import DLSN
from storage.errors import (
    DLError,
    EndOfStreamError,
    InvalidArgumentError,
    LogEmptyError,
    LogNotFoundError,
)
from storage.impl import positioning
from storage.impl.log_manager import LogManager
from storage.impl.namespace import Namespace, bind_namespace, open_namespace
from storage.record import LogRecord, LogRecordWithDLSN
from storage.segment_metadata import LogSegmentMetadata

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

__all__ = ["cli", "main"]

PROG = "dlog"
#: Exit code of an error (a DLError or another operational failure).
EXIT_ERROR = 1
#: Exit code of a usage error (click's).
EXIT_USAGE = 2
#: Exit code after an interrupt (128 + SIGINT), except for ``tail``.
EXIT_INTERRUPTED = 130
#: Records asked of a reader per call.
READ_BATCH = 1000
#: Separator line printed before every record by ``dump`` and ``tail`` (DistributedLog's).
RECORD_SEPARATOR = "-" * 48


# --- output -----------------------------------------------------------------------------------
class _StdoutClosedError(Exception):
    """stdout's reader went away (``dlog dump big | head``): stop quietly."""


def _stdout() -> IO[bytes]:
    return sys.stdout.buffer


def out(line: str = "") -> None:
    """Write one line to stdout as UTF-8 (never fails on encoding)."""
    try:
        _stdout().write(line.encode("utf-8", "replace") + b"\n")
    except BrokenPipeError:
        raise _StdoutClosedError() from None


def flush_stdout() -> None:
    try:
        _stdout().flush()
    except BrokenPipeError:
        raise _StdoutClosedError() from None


def err(message: str) -> None:
    """Write ``dlog: <message>`` to stderr as one line."""
    click.echo(f"{PROG}: {_one_line(message)}", err=True)


def _one_line(text: str) -> str:
    return " ".join(text.split()) if "\n" in text or "\r" in text else text


def _isatty(stream: IO[Any]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def progress_wanted(*, prints_records: bool) -> bool:
    """Progress bars only on a terminal's stderr (and not over records scrolling on the same terminal)."""
    if not _isatty(sys.stderr):
        return False
    return not (prints_records and _isatty(sys.stdout))


def progressbar(length: int, label: str, *, enabled: bool) -> ProgressBar[int]:
    """``click.progressbar`` on stderr; hidden (prints nothing at all) unless ``enabled``."""
    return click.progressbar(
        length=max(length, 0),
        label=label,
        file=sys.stderr,
        hidden=not enabled,
        show_pos=True,
        update_min_steps=max(1, length // 500),  # redraw at most ~500 times
    )


# --- parameter types --------------------------------------------------------------------------
class DLSNType(click.ParamType):
    """A DLSN in the text form ``lssn,entry,slot`` (or ``InitialDLSN``)."""

    name = "DLSN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> DLSN:
        if isinstance(value, DLSN):
            return value
        try:
            return DLSN.parse(str(value))
        except InvalidArgumentError as e:
            self.fail(str(e), param, ctx)


class SerializedDLSNType(click.ParamType):
    """A DLSN in DistributedLog's base64 form (``DLSN.serialize``)."""

    name = "BASE64"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> DLSN:
        if isinstance(value, DLSN):
            return value
        try:
            return DLSN.deserialize(str(value))
        except InvalidArgumentError as e:
            self.fail(str(e), param, ctx)


DLSN_TYPE = DLSNType()
SERIALIZED_DLSN_TYPE = SerializedDLSNType()


# --- shared state -----------------------------------------------------------------------------
@dataclass
class State:
    """What the top-level options set up for the command: the namespace URI and the configuration."""

    uri: str | None
    conf_file: str | None
    _conf: Config | None = field(default=None, repr=False)

    def conf(self) -> Config:
        """``Config.load(--conf)``, or the defaults. Raises InvalidConfigError."""
        if self._conf is None:
            self._conf = Config.load(self.conf_file) if self.conf_file else Config()
        return self._conf

    def require_uri(self) -> str:
        if not self.uri:
            raise click.UsageError(
                "no namespace given: use --uri URI or set DLOG_URI", ctx=click.get_current_context(silent=True)
            )
        return self.uri

    @contextlib.contextmanager
    def namespace(self) -> Iterator[Namespace]:
        """The namespace of ``--uri``, closed afterwards."""
        uri = self.require_uri()
        ns = open_namespace(uri, self.conf())
        try:
            yield ns
        finally:
            ns.close()


pass_state = click.make_pass_decorator(State)


def require_log(ns: Namespace, name: str) -> LogManager:
    """The log manager of an existing log. Raises InvalidStreamNameError, LogNotFoundError."""
    if not ns.log_exists(name):
        raise LogNotFoundError(f"log {name!r} does not exist in {ns.uri}")
    return ns.open_log(name)


# --- the group --------------------------------------------------------------------------------
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 110}

_EPILOG = """\b
Namespace URIs:
  distributedlog-local:///abs/path  (or a plain path)  embedded, created on first use
  distributedlog://host:port[,host:port]/zk/path        ZooKeeper (bind it once: dlog ... bind)
DLSNs are written lssn,entry,slot (e.g. 1,0,0).
Exit codes: 0 ok, 1 error (one line on stderr), 2 usage error.
"""


@click.group(context_settings=CONTEXT_SETTINGS, epilog=_EPILOG)
@click.option(
    "-u",
    "--uri",
    envvar="DLOG_URI",
    metavar="URI",
    help="Namespace URI (default: $DLOG_URI).",
)
@click.option(
    "-c",
    "--conf",
    "conf_file",
    envvar="DLOG_CONF",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="DistributedLog properties file (e.g. conf/distributedlog.conf; default: $DLOG_CONF).",
)
@click.option("-v", "--verbose", count=True, help="Log more to stderr (-v info, -vv debug).")
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, uri: str | None, conf_file: str | None, verbose: int) -> None:
    """Operate DistributedLog namespaces and logs: list, create, inspect, read, follow, write,
    truncate and seal logs."""
    _setup_logging(verbose)
    ctx.obj = State(uri=uri, conf_file=conf_file)


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbose < 2:  # kazoo reports every reconnect attempt at warning level with tracebacks
        logging.getLogger("kazoo").setLevel(logging.ERROR)


# --- namespace commands -----------------------------------------------------------------------
@cli.command()
@click.option(
    "--segments",
    "-s",
    required=True,
    metavar="SEGMENT_URI",
    help="Where segment data lives: file:///abs/path on a filesystem every reader and writer sees, or "
    "rados://POOL?conf=/etc/ceph/ceph.conf[&id=CLIENT][&keyring=PATH] (Ceph RADOS, replicated).",
)
@pass_state
def bind(state: State, segments: str) -> None:
    """Bind a ZooKeeper namespace to its segment store (as `dlog admin bind`).

    Creates the namespace path if needed. Rebinding to the same location is a no-op; to another one
    it fails.
    """
    uri = state.require_uri()
    bind_namespace(uri, segments, state.conf())
    out(f"bound {uri} to {segments}")


@cli.command(name="list")
@pass_state
def list_logs(state: State) -> None:
    """List the logs of the namespace, one name per line (sorted)."""
    with state.namespace() as ns:
        for name in ns.list_logs():
            out(name)


@cli.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@pass_state
def create(state: State, names: tuple[str, ...]) -> None:
    """Create one or more logs (fails if one exists; those before it stay created)."""
    with state.namespace() as ns:
        for name in names:
            ns.create_log(name)
            out(f"created {name}")


@cli.command()
@click.argument("name")
@pass_state
def delete(state: State, name: str) -> None:
    """Delete a log: its segments' data and its metadata."""
    with state.namespace() as ns:
        ns.delete_log(name)
        out(f"deleted {name}")


# --- inspection -------------------------------------------------------------------------------
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
    return f"{seg.lssn}\t: " + " ".join(fields)


@cli.command()
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


def _end_of(dlm: LogManager) -> DLSN | None:
    """DLSN of the last record readers see now, or None for an empty log."""
    try:
        return dlm.last_dlsn()
    except LogEmptyError:
        return None


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


@cli.command()
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
            end = _end_of(dlm)
            scanned = 0
            if end is not None:
                with progressbar(total, "counting", enabled=progress_wanted(prints_records=False)) as bar:
                    for _ in _read_records(dlm, start, end=end, limit=None):
                        scanned += 1
                        bar.update(1)
            total = scanned
        out(f"total is {total} records.")


@cli.command()
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
        end = _end_of(dlm)
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


@cli.command()
@click.argument("name")
@click.option("--from", "from_dlsn", type=DLSN_TYPE, metavar="DLSN", help="Start at this DLSN.")
@click.option("--txid", type=click.IntRange(min=0), metavar="N", help="Start at the first record with txid >= N.")
@click.option("--hex", "hex_payload", is_flag=True, help="Print payloads as hex.")
@pass_state
def tail(state: State, name: str, from_dlsn: DLSN | None, txid: int | None, hex_payload: bool) -> None:
    """Follow a log: print records as they are written, until Ctrl-C / SIGINT / SIGTERM (exit 0).

    Starts after the current last record unless --from or --txid is given. Records are printed as
    by `dump`, flushed as they arrive. Stops (exit 0) when the log is sealed with end of stream.
    """
    with _StopSignals() as stop, state.namespace() as ns:
        dlm = require_log(ns, name)
        default: DLSN | int = DLSN.INITIAL
        if from_dlsn is None and txid is None:
            last = _end_of(dlm)
            default = last.next() if last is not None else DLSN.INITIAL
        start = _start_of(from_dlsn, txid, default)
        reader = dlm.open_reader(start)
        try:
            while not stop.event.is_set():
                try:
                    recs = reader.read_bulk(READ_BATCH)
                except EndOfStreamError:
                    flush_stdout()
                    err(f"log {dlm.name} reached end of stream")
                    return
                for rec in recs:
                    for line in format_record(rec, hex_payload=hex_payload):
                        out(line)
                if recs:
                    flush_stdout()
        finally:
            reader.close()


# --- writing ----------------------------------------------------------------------------------
@cli.command()
@click.argument("name")
@click.option(
    "--txid-start",
    type=click.IntRange(min=0),
    metavar="N",
    help="Transaction id of the first record (default: the log's last txid + 1, or 1); +1 per line.",
)
@click.option("--create", "create_log", is_flag=True, help="Create the log if it does not exist.")
@pass_state
def write(state: State, name: str, txid_start: int | None, create_log: bool) -> None:
    """Append one record per line of stdin (the line without its line ending), then flush.

    Prints `wrote N records, txid A..B, last DLSN l,e,s`.
    """
    stdin = sys.stdin.buffer
    with state.namespace() as ns:
        if create_log:
            ns.create_log(name, exist_ok=True)
        dlm = require_log(ns, name)
        if dlm.is_end_of_stream():
            raise EndOfStreamError(f"log {dlm.name} is sealed (end of stream): no more writes")
        with dlm.open_writer() as writer:  # holds the log's lock from here on: the last txid is stable
            if txid_start is None:
                try:
                    txid_start = dlm.last_txid() + 1
                except LogEmptyError:
                    txid_start = 1
            txid = txid_start
            written = 0
            for lineno, line in enumerate(stdin, 1):
                payload = line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line
                try:
                    writer.write(LogRecord(txid, payload))
                except DLError as e:
                    raise _LineError(lineno, e) from e
                written += 1
                txid += 1
            last = writer.flush()
    if written == 0:
        out("wrote 0 records")
    else:
        out(f"wrote {written} records, txid {txid_start}..{txid - 1}, last DLSN {last}")


class _LineError(click.ClickException):
    """A write of one stdin line failed (exit 1, message names the line)."""

    def __init__(self, lineno: int, cause: DLError) -> None:
        super().__init__(f"stdin line {lineno}: {cause}")


@cli.command()
@click.argument("name")
@click.argument("dlsn", type=DLSN_TYPE)
@pass_state
def truncate(state: State, name: str, dlsn: DLSN) -> None:
    """Truncate a log before DLSN: segments wholly before it become truncated, the one holding it
    partially truncated (readers skip the truncated part; retention deletes it later).

    A DLSN past the start of the segment after the one holding the last record is refused.
    """
    with state.namespace() as ns:
        dlm = require_log(ns, name)
        end = _end_of(dlm)
        if end is not None and dlsn > end.position_on_next_segment():
            raise InvalidArgumentError(f"DLSN {dlsn} is past the end of log {dlm.name} (last record at {end})")
        with dlm.open_writer() as writer:
            done = writer.truncate(dlsn)
    out(f"truncated {name} before {dlsn}" if done else f"nothing truncated: {dlsn} is not a valid position")


@cli.command()
@click.argument("name")
@pass_state
def seal(state: State, name: str) -> None:
    """Mark the end of stream of a log: later writes fail; readers stop at it."""
    with state.namespace() as ns:
        dlm = require_log(ns, name)
        aw = dlm.open_async_writer()
        try:
            at = aw.mark_end_of_stream()
        finally:
            aw.close()
    out(f"{name} was already sealed" if at == DLSN.INVALID else f"sealed {name}: end of stream at {at}")


# --- DLSN conversions -------------------------------------------------------------------------
@cli.group(context_settings=CONTEXT_SETTINGS)
def dlsn() -> None:
    """Convert DLSNs between the text form l,e,s and DistributedLog's base64 form (no --uri needed)."""


@dlsn.command()
@click.argument("value", metavar="L,E,S", type=DLSN_TYPE)
@click.option("--hex", "hex_bytes", is_flag=True, help="Print the 25 serialized bytes as hex instead.")
def encode(value: DLSN, hex_bytes: bool) -> None:
    """Print the base64 form of a DLSN (DLSN.serialize), e.g. 1,0,0 -> AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==."""
    out(binascii.hexlify(value.to_bytes()).decode() if hex_bytes else value.serialize())


@dlsn.command()
@click.argument("value", metavar="BASE64", type=SERIALIZED_DLSN_TYPE)
def decode(value: DLSN) -> None:
    """Print the text form l,e,s of a base64-serialized DLSN (DLSN.deserialize)."""
    out(str(value))


# --- bench ------------------------------------------------------------------------------------
@cli.command()
@click.option("--records", "-n", type=click.IntRange(min=1), default=10_000, show_default=True, help="Records N.")
@click.option("--size", "-s", type=click.IntRange(min=0), default=1024, show_default=True, help="Bytes S per record.")
@click.option("--log", "log_name", metavar="NAME", help="Log to use (default: a temporary log, deleted afterwards).")
@pass_state
def bench(state: State, records: int, size: int, log_name: str | None) -> None:
    """Measure write and read throughput of N records of S bytes on a temporary log.

    Uses the namespace of --uri, or a temporary embedded namespace when none is given. Prints a
    table (phase, records, bytes, seconds, records/s, MiB/s). Progress bar on a terminal.
    """
    from storage.cli_bench import format_table, run_bench

    progress = progress_wanted(prints_records=False)
    results = run_bench(
        state.uri,
        state.conf(),
        records=records,
        size=size,
        log_name=log_name,
        progress=progress,
        say=err if progress else None,
    )
    for line in format_table(results):
        out(line)


# --- entry point ------------------------------------------------------------------------------
def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: IO[str] | None = None,
    line: str | None = None,
) -> None:
    err(f"warning: {message}")


def _usage_hint(e: click.UsageError) -> str:
    if e.ctx is not None:
        return f" (see '{e.ctx.command_path} --help')"
    return f" (see '{PROG} --help')"


def run(argv: Sequence[str] | None = None) -> int:
    """Run ``dlog`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    warnings.showwarning = _show_warning
    try:
        rv = cli.main(args=args, prog_name=PROG, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as e:
        e.show()
        return e.exit_code
    except click.UsageError as e:
        err(f"error: {e.format_message()}{_usage_hint(e)}")
        return e.exit_code
    except click.ClickException as e:
        err(f"error: {e.format_message()}")
        return e.exit_code
    except DLError as e:
        err(f"error: {str(e) or type(e).__name__}")
        return EXIT_ERROR
    except _StdoutClosedError:
        _silence_stdout()
        return 0
    except (click.Abort, KeyboardInterrupt):
        err("interrupted")
        return EXIT_INTERRUPTED
    try:
        flush_stdout()
    except _StdoutClosedError:
        _silence_stdout()
    return rv if isinstance(rv, int) else 0


def _silence_stdout() -> None:
    """After the reader of stdout went away: point fd 1 at /dev/null so the final flush is quiet."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point (``dlog = storage.cli:main``)."""
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
