"""Namespace commands of ``dlog``: ``bind``, ``list``, ``create``, ``delete``."""

from __future__ import annotations

import click

from dlog._common import State, out, pass_state
from storage.log.namespace import bind_namespace


@click.command()
@click.option(
    "--segments",
    "-s",
    required=True,
    metavar="SEGMENT_URI",
    help="Where segment data lives: file:///abs/path on a filesystem every reader and writer sees, or "
    "rados://POOL?conf=/etc/ceph/ceph.conf[&id=CLIENT][&keyring=PATH] (Ceph RADOS, replicated).",
)
@click.option(
    "--cold",
    metavar="COLD_URI",
    default=None,
    help="Also bind a cold store for offloaded segments: s3://BUCKET/PREFIX?endpoint=HOST:PORT&scheme=http|https"
    "&region=R (credentials: coldStoreAccessKey/coldStoreSecretKey or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) or "
    "file:///abs/path. It is checked first; a bound namespace may add one later.",
)
@pass_state
def bind(state: State, segments: str, cold: str | None) -> None:
    """Bind a ZooKeeper namespace to its segment store (as `dlog admin bind`), and optionally to a cold store.

    Creates the namespace path if needed. Rebinding to the same location is a no-op; to another one
    it fails. A failed bind (unreachable cold store, missing bucket, refused credentials) creates nothing.
    """
    uri = state.require_uri()
    bind_namespace(uri, segments, state.conf(), cold=cold)
    out(f"bound {uri} to {segments}" + (f" and cold store {cold}" if cold else ""))


@click.command(name="list")
@pass_state
def list_logs(state: State) -> None:
    """List the logs of the namespace, one name per line (sorted)."""
    with state.namespace() as ns:
        for name in ns.list_logs():
            out(name)


@click.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@pass_state
def create(state: State, names: tuple[str, ...]) -> None:
    """Create one or more logs (fails if one exists; those before it stay created), and the
    namespace if it does not exist yet."""
    with state.namespace(create=True) as ns:
        for name in names:
            ns.create_log(name)
            out(f"created {name}")


@click.command()
@click.argument("name")
@pass_state
def delete(state: State, name: str) -> None:
    """Delete a log: its segments' data and its metadata."""
    with state.namespace() as ns:
        ns.delete_log(name)
        out(f"deleted {name}")


COMMANDS: tuple[click.Command, ...] = (bind, list_logs, create, delete)
