"""``dlog bench``: write and read throughput of N records of S bytes on a temporary log (the command
and its engine, :func:`run_bench`).

The write phase times N ``AsyncLogWriter.write`` calls, the final ``flush()`` and every future's
resolution (each record durable and visible); the read phase times a reader from ``1,0,0`` reading
the N records back with ``read_bulk``. Opening the writer (lock, recovery) and completing the
segment on close are not timed. Without a namespace URI the run uses a temporary embedded
namespace, removed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import click

from dlog._common import READ_BATCH, State, err, out, pass_state, progress_wanted, progressbar
from storage.config import Config
from storage.errors import UnexpectedError
from storage.formats.dlsn import DLSN
from storage.formats.record import LogRecord
from storage.log.log_manager import LogManager
from storage.log.namespace import Namespace, open_namespace

MIB = 1024 * 1024


@dataclass(frozen=True)
class PhaseResult:
    """One row of the table."""

    phase: str
    records: int
    bytes: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("inf")

    @property
    def mib_per_s(self) -> float:
        return self.bytes / MIB / self.seconds if self.seconds > 0 else float("inf")


@contextlib.contextmanager
def _namespace(uri: str | None, conf: Config) -> Iterator[Namespace]:
    if uri:
        with open_namespace(uri, conf) as ns:
            yield ns
        return
    with (
        tempfile.TemporaryDirectory(prefix="dlog-bench-") as tmp,
        open_namespace(f"distributedlog-local://{tmp}", conf) as ns,
    ):
        yield ns


def run_bench(
    uri: str | None,
    conf: Config,
    *,
    records: int,
    size: int,
    log_name: str | None = None,
    progress: bool = False,
    say: Callable[[str], None] | None = None,
) -> list[PhaseResult]:
    """Write ``records`` records of ``size`` bytes to a fresh log, read them back, and return the
    timings. ``log_name`` (created, must not exist) is kept; the default temporary log is deleted.
    ``say`` gets a line naming the log and namespace; ``progress`` shows progress bars on stderr.

    Raises:
        DLError: from the storage layer (e.g. LogExistsError for an existing ``log_name``).
    """
    name = log_name or f"dlog-bench-{uuid.uuid4().hex[:12]}"
    payload = os.urandom(size)
    with _namespace(uri, conf) as ns:
        ns.create_log(name)
        if say is not None:
            say(f"bench: {records} records of {size} bytes on log {name} in {ns.uri}")
        try:
            dlm = ns.open_log(name)
            write = _write_phase(dlm, payload, records, progress)
            read = _read_phase(dlm, records, progress)
        finally:
            if log_name is None:
                with contextlib.suppress(Exception):
                    ns.delete_log(name)
    return [write, read]


def _write_phase(dlm: LogManager, payload: bytes, n: int, progress: bool) -> PhaseResult:
    writer = dlm.open_async_writer()
    try:
        futures: list[Future[DLSN]] = []
        with progressbar(n, "writing", enabled=progress) as bar:
            t0 = time.perf_counter()
            for txid in range(1, n + 1):
                futures.append(writer.write(LogRecord(txid, payload)))
                if txid % 1000 == 0:
                    bar.update(1000)
            writer.flush().result()
            for f in futures:
                f.result()
            seconds = time.perf_counter() - t0
            bar.update(n % 1000)
    finally:
        writer.close()
    return PhaseResult("write", n, n * len(payload), seconds)


def _read_phase(dlm: LogManager, n: int, progress: bool) -> PhaseResult:
    reader = dlm.open_reader(DLSN.INITIAL)
    got = 0
    nbytes = 0
    try:
        with progressbar(n, "reading", enabled=progress) as bar:
            t0 = time.perf_counter()
            while got < n:
                recs = reader.read_bulk(min(READ_BATCH, n - got))
                if not recs:
                    raise UnexpectedError(f"bench read back only {got} of {n} records")
                got += len(recs)
                nbytes += sum(len(r.payload) for r in recs)
                bar.update(len(recs))
            seconds = time.perf_counter() - t0
    finally:
        reader.close()
    return PhaseResult("read", got, nbytes, seconds)


def format_table(rows: list[PhaseResult]) -> list[str]:
    """The results as aligned plain-text lines (a header, then one line per phase)."""
    header = ("phase", "records", "bytes", "seconds", "records/s", "MiB/s")
    body = [
        (r.phase, str(r.records), str(r.bytes), f"{r.seconds:.3f}", f"{r.records_per_s:.0f}", f"{r.mib_per_s:.2f}")
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = []
    for row in [header, *body]:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


@click.command()
@click.option("--records", "-n", type=click.IntRange(min=1), default=10_000, show_default=True, help="Records N.")
@click.option("--size", "-s", type=click.IntRange(min=0), default=1024, show_default=True, help="Bytes S per record.")
@click.option("--log", "log_name", metavar="NAME", help="Log to use (default: a temporary log, deleted afterwards).")
@pass_state
def bench(state: State, records: int, size: int, log_name: str | None) -> None:
    """Measure write and read throughput of N records of S bytes on a temporary log.

    Uses the namespace of --uri, or a temporary embedded namespace when none is given. Prints a
    table (phase, records, bytes, seconds, records/s, MiB/s). Progress bar on a terminal.
    """
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


COMMANDS: tuple[click.Command, ...] = (bench,)
