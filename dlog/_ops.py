"""Operations commands of ``dlog``: ``purge`` (retention) and ``stats`` (metrics, one shot)."""

from __future__ import annotations

import datetime
import re
import time
import urllib.error
import urllib.request

import click

from dlog._common import State, out, pass_state, require_log
from storage.errors import LogNotFoundError, SegmentStoreError

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|min|h|d|w)\s*", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration_ms(text: str) -> int:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"500ms"``, ``"2w"`` as milliseconds.

    Raises:
        click.BadParameter: not such a duration.
    """
    m = _DURATION.fullmatch(text)
    if m is None:
        raise click.BadParameter(f"{text!r} is not a duration such as 7d, 12h, 30m, 90s, 500ms")
    return int(float(m.group(1)) * _UNIT_MS[m.group(2).lower()])


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--all", "all_logs", is_flag=True, help="Every log of the namespace.")
@click.option("--older-than", "older_than", required=True, metavar="DURATION", help="e.g. 7d, 12h, 30m.")
@click.option("--dry-run", is_flag=True, help="Print what would be purged; delete nothing.")
@pass_state
def purge(state: State, names: tuple[str, ...], all_logs: bool, older_than: str, dry_run: bool) -> None:
    """Delete the log segments that were completed more than DURATION ago, oldest first.

    The newest completed segment and the in-progress one are always kept, and so is every segment
    a subscriber (e.g. a Spark query, `dlog subscribers NAME`) has not read yet, unless the
    configuration sets retentionIgnoresSubscribers=true. Prints one line per segment, then
    `purged N segments (R records) of LOG` (with --dry-run: `would purge ...`).
    """
    if bool(names) == all_logs:
        raise click.UsageError("give log NAMEs or --all (not both)", ctx=click.get_current_context(silent=True))
    cutoff = int(time.time() * 1000) - parse_duration_ms(older_than)
    verb = "would purge" if dry_run else "purged"
    with state.namespace() as ns:
        targets = ns.list_logs() if all_logs else list(names)
        for name in targets:
            dlm = require_log(ns, name)
            segs = dlm.purge_segments(cutoff, dry_run=dry_run)
            for seg in segs:
                out(
                    f"{verb} {name} segment {seg.lssn}: ledgerId={seg.ledger_id} records={seg.record_count} "
                    f"txids={seg.first_txid}..{seg.last_txid} completed={_when(seg.completion_time_ms)}"
                )
            records = sum(s.record_count for s in segs)
            out(f"{verb} {len(segs)} segments ({records} records) of {name}")


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option(
    "--scrape",
    metavar="HOST:PORT",
    help="Print the dlog_* metrics of a running process instead (its prometheusStatsHttpPort endpoint).",
)
@pass_state
def stats(state: State, names: tuple[str, ...], scrape: str | None) -> None:
    """A one-shot view of the namespace in Prometheus' text format: per log (default every log) its
    segments, records, stored bytes and each subscriber's records behind.

    \b
      dlog_log_segments{stream="L"} N
      dlog_log_records{stream="L"} N
      dlog_log_bytes{stream="L"} N
      dlog_subscriber_records_behind{stream="L",subscriber="S"} N
    With --scrape HOST:PORT it prints the dlog_* lines of that process's metrics endpoint (writers'
    and readers' counters and latencies; docs/operations.md lists them).
    """
    if scrape is not None:
        url = f"http://{scrape}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                text = resp.read().decode()
        except (urllib.error.URLError, OSError) as e:
            raise click.ClickException(f"cannot scrape {url}: {e}") from None
        for line in text.splitlines():
            if line.startswith(("dlog_", "# HELP dlog_", "# TYPE dlog_")):
                out(line)
        return
    with state.namespace() as ns:
        lines: dict[str, list[str]] = {"segments": [], "records": [], "bytes": [], "behind": []}
        for name in names or tuple(ns.list_logs()):
            dlm = require_log(ns, name)
            try:
                segs = dlm.log_segments()
                stored = 0
                for seg in segs:
                    try:
                        stored += ns.segstore.info(seg.ledger_id).length_bytes
                    except SegmentStoreError:
                        continue
                label = f'stream="{name}"'
                lines["segments"].append(f"dlog_log_segments{{{label}}} {len(segs)}")
                lines["records"].append(f"dlog_log_records{{{label}}} {dlm.record_count()}")
                lines["bytes"].append(f"dlog_log_bytes{{{label}}} {stored}")
                for lag in dlm.subscriber_lag():
                    sub = f'subscriber="{lag.subscriber_id}"'
                    lines["behind"].append(f"dlog_subscriber_records_behind{{{label},{sub}}} {lag.records_behind}")
            except LogNotFoundError:  # deleted meanwhile
                continue
        for key, doc in (
            ("segments", "Log segments."),
            ("records", "User records (segment metadata)."),
            ("bytes", "Bytes stored in the segment store."),
        ):
            out(f"# HELP dlog_log_{key} {doc}")
            out(f"# TYPE dlog_log_{key} gauge")
            for line in lines[key]:
                out(line)
        out("# HELP dlog_subscriber_records_behind Records at or after each subscriber's position.")
        out("# TYPE dlog_subscriber_records_behind gauge")
        for line in lines["behind"]:
            out(line)


COMMANDS: tuple[click.Command, ...] = (purge, stats)
