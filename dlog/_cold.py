"""Cold storage commands of ``dlog``: ``offload`` and ``restore`` (a namespace bound with ``bind --cold``).

* ``dlog offload NAME...|--all``: copy every completed segment not offloaded yet to the cold store (each verified
  by reading it back, then recorded). Prints ``offloaded NAME lssn=N ledgerId=L bytes=B key=K`` per segment and a
  summary line per log.
* ``dlog restore NAME...|--all``: after the loss of the hot store, rebuild the logs' segments in the (fresh)
  segment store from their cold copies. Prints ``restored NAME lssn=N ledgerId=OLD->NEW`` per segment, and
  ``lost NAME lssn=N`` for a segment that has neither copy (the command then exits 1).
"""

from __future__ import annotations

import click

from dlog._common import State, out, pass_state, require_log
from storage.errors import DLError, InvalidArgumentError
from storage.log.layout import LogMetadata
from storage.log.namespace import Namespace
from storage.log.offload import offload_log
from storage.log.restore import restore_log
from storage.log.tiered import TieredSegmentStore


def _tiered(ns: Namespace) -> TieredSegmentStore:
    if not isinstance(ns.segstore, TieredSegmentStore):
        raise InvalidArgumentError(
            f"namespace {ns.uri} has no cold store: bind one with "
            f"`dlog --uri {ns.uri} bind --segments SEGMENT_URI --cold COLD_URI`"
        )
    return ns.segstore


def _names(ns: Namespace, names: tuple[str, ...], all_logs: bool) -> list[str]:
    if all_logs == bool(names):
        raise click.UsageError("give log names or --all (not both)")
    return ns.list_logs() if all_logs else list(names)


@click.command()
@click.argument("names", nargs=-1, metavar="NAME...")
@click.option("--all", "all_logs", is_flag=True, help="Every log of the namespace.")
@pass_state
def offload(state: State, names: tuple[str, ...], all_logs: bool) -> None:
    """Copy completed segments not offloaded yet to the namespace's cold store (verified, then recorded).

    Writers also offload by themselves (offloadThresholdHours); this catches up. Fails (exit 1) at the first
    segment that cannot be offloaded (an unreachable cold store: try again later); those before it stay offloaded.
    """
    with state.namespace() as ns:
        tiered = _tiered(ns)
        for name in _names(ns, names, all_logs):
            require_log(ns, name)
            report = offload_log(tiered, LogMetadata(ns.metastore, ns.paths_of(name)))
            for rec in report.offloaded:
                out(f"offloaded {name} lssn={rec.lssn} ledgerId={rec.ledger_id} bytes={rec.size} key={rec.key}")
            total = sum(r.size for r in report.offloaded)
            out(f"{name}: {len(report.offloaded)} segments offloaded ({total} bytes), {report.already} already")


@click.command()
@click.argument("names", nargs=-1, metavar="NAME...")
@click.option("--all", "all_logs", is_flag=True, help="Every log of the namespace.")
@click.option(
    "--purged", is_flag=True, help="Also bring back hot copies that retention or `dlog purge` deleted on purpose."
)
@pass_state
def restore(state: State, names: tuple[str, ...], all_logs: bool, purged: bool) -> None:
    """Rebuild segments whose hot ledger is gone (a lost or replaced segment store) from their cold copies; hot
    copies deleted on purpose (retention, `dlog purge`) stay cold-only unless --purged.

    Run it (with --all) before any writer uses a namespace whose segment store was replaced. Exits 1 if a segment
    has neither a hot nor a cold copy (it is reported, the others are restored).
    """
    lost = 0
    with state.namespace() as ns:
        tiered = _tiered(ns)
        for name in _names(ns, names, all_logs):
            require_log(ns, name)
            report = restore_log(tiered, LogMetadata(ns.metastore, ns.paths_of(name)), purged=purged)
            for lssn, old, new in report.restored:
                out(f"restored {name} lssn={lssn} ledgerId={old}->{new}")
            for lssn in report.lost:
                out(f"lost {name} lssn={lssn}")
            lost += len(report.lost)
            out(
                f"{name}: {len(report.restored)} segments restored ({report.bytes_restored} bytes), "
                f"{len(report.present)} present, {len(report.purged)} purged on purpose (cold only; --purged "
                f"restores them), {len(report.lost)} lost"
            )
    if lost:
        raise DLError(f"{lost} segment(s) have neither a hot nor a cold copy")


COMMANDS: tuple[click.Command, ...] = (offload, restore)
