"""Commands of ``dlog`` that change a log: ``write``, ``truncate``, ``seal``."""

from __future__ import annotations

import sys

import click

from dlog._common import DLSN_TYPE, State, end_of, out, pass_state, require_log
from dlog._proxy_client import proxy_write_options, write_through_proxies
from storage.errors import DLError, EndOfStreamError, InvalidArgumentError, LogEmptyError
from storage.formats.dlsn import DLSN
from storage.formats.record import LogRecord


@click.command()
@click.argument("name")
@click.option(
    "--txid-start",
    type=click.IntRange(min=0),
    metavar="N",
    help="Transaction id of the first record (default: the log's last txid + 1, or 1); +1 per line.",
)
@click.option("--create", "create_log", is_flag=True, help="Create the log if it does not exist.")
@proxy_write_options
@pass_state
def write(
    state: State,
    name: str,
    txid_start: int | None,
    create_log: bool,
    proxy: str | None,
    timeout_s: float,
    token_file: str | None,
    tls_ca: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    allow_plaintext_token: bool,
) -> None:
    """Append one record per line of stdin (the line without its line ending), then flush.

    Prints `wrote N records, txid A..B, last DLSN l,e,s`. With --proxy the records go through write
    proxies (the proxy assigns txids) and it prints `wrote N records through proxies, last DLSN l,e,s`.
    """
    if proxy is not None:
        if txid_start is not None:
            raise click.UsageError("--txid-start does not apply with --proxy (the proxy assigns txids)")
        security = {"token_file": token_file, "tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key,
                    "allow_plaintext_token": allow_plaintext_token}  # fmt: skip
        write_through_proxies(state, name, proxy, create_log=create_log, timeout_s=timeout_s, **security)
        return
    stdin = sys.stdin.buffer
    with state.namespace(create=create_log) as ns:
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


@click.command()
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
        end = end_of(dlm)
        if end is not None and dlsn > end.position_on_next_segment():
            raise InvalidArgumentError(f"DLSN {dlsn} is past the end of log {dlm.name} (last record at {end})")
        with dlm.open_writer() as writer:
            done = writer.truncate(dlsn)
    out(f"truncated {name} before {dlsn}" if done else f"nothing truncated: {dlsn} is not a valid position")


@click.command()
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


COMMANDS: tuple[click.Command, ...] = (write, truncate, seal)
