"""Commands of ``dlog`` over a log's subscriptions store: ``subscribers`` and ``lag``."""

from __future__ import annotations

import click

from dlog._common import State, err, flush_stdout, out, pass_state, require_log
from storage.log.subscriptions import validate_subscriber_id


@click.command()
@click.argument("name")
@click.option("--delete", "delete_id", metavar="ID", help="Delete subscriber ID (DistributedLog's delete_subscriber).")
@pass_state
def subscribers(state: State, name: str, delete_id: str | None) -> None:
    """List the subscribers of a log and their positions (DistributedLog's subscriptions store:
    `<log root>/subscribers/<id>`), one per line: `ID<TAB>l,e,s`. A Spark query reading the log
    records the DLSN of the next record it will read there, under its `subscriberId`.

    With --delete ID: remove that subscriber (prints `deleted ID`, or fails if it has no position).
    """
    with state.namespace() as ns:
        dlm = require_log(ns, name)
        subs = dlm.subscriptions()
        if delete_id is not None:
            if not subs.delete(validate_subscriber_id(delete_id)):
                raise click.ClickException(f"log {name!r} has no subscriber {delete_id!r}")
            out(f"deleted {delete_id}")
            return
        for sid, pos in subs.list().items():
            out(f"{sid}\t{pos}")


@click.command()
@click.argument("name")
@pass_state
def lag(state: State, name: str) -> None:
    """Show how far each subscriber of a log is behind its end: one line per subscriber,
    `ID<TAB>position=l,e,s<TAB>recordsBehind=N<TAB>bytesBehind=N` (records at or after the position,
    counted from segment metadata; bytes as stored, pro rata within the position's segment), after
    a header line `log: NAME lastDLSN: l,e,s | none`. For a log nobody has subscribed to (e.g. no Spark
    query has committed a batch of it yet) `dlog: no subscribers` goes to stderr, so that stdout
    keeps exactly one line per subscriber after the header.
    """
    with state.namespace() as ns:
        dlm = require_log(ns, name)
        rows = dlm.subscriber_lag()
        last = dlm.last_dlsn() if dlm.record_count() else None
        out(f"log: {dlm.name} lastDLSN: {last if last is not None else 'none'}")
        if not rows:
            flush_stdout()  # after the header, on a terminal too
            err("no subscribers")
        for row in rows:
            out(
                f"{row.subscriber_id}\tposition={row.position}\trecordsBehind={row.records_behind}"
                f"\tbytesBehind={row.bytes_behind}"
            )


COMMANDS: tuple[click.Command, ...] = (subscribers, lag)
