"""The ``dlog`` group (top-level options ``--uri``, ``--conf``, ``-v``, ``--version``) with every command
attached, and the entry points: :func:`run` (returns the exit code) and :func:`main` (the console script).
Errors become one line on stderr and an exit code here (see :mod:`dlog`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from typing import IO, NoReturn

import click

from dlog import _admin, _bench, _cold, _dlsn, _gateway, _ops, _proxy, _proxy_client, _read, _subscribers, _write
from dlog._common import (
    CONTEXT_SETTINGS,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    PROG,
    State,
    StdoutClosedError,
    err,
    flush_stdout,
)
from storage import __version__
from storage.errors import DLError

__all__ = ["cli", "main", "run"]

_EPILOG = """\b
Namespace URIs:
  distributedlog-local:///abs/path  (or a plain path)  embedded, created by create / write --create
  distributedlog://host:port[,host:port]/zk/path        ZooKeeper (bind it once: dlog ... bind)
Commands that only read never create a namespace: a URI with none fails.
DLSNs are written lssn,entry,slot (e.g. 1,0,0).
Exit codes: 0 ok, 1 error (one line on stderr), 2 usage error.
"""


# --- the group --------------------------------------------------------------------------------
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
    ctx.obj = State(uri=uri, conf_file=conf_file, verbose=verbose)


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbose < 2:  # kazoo reports every reconnect attempt at warning level with tracebacks
        logging.getLogger("kazoo").setLevel(logging.ERROR)


for _module in (_admin, _read, _subscribers, _ops, _write, _dlsn, _bench, _gateway, _cold):
    for _command in _module.COMMANDS:
        cli.add_command(_command)
cli.add_command(_proxy_client.proxy_status)
cli.add_command(_proxy.proxy)


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
    except StdoutClosedError:
        _silence_stdout()
        return 0
    except (click.Abort, KeyboardInterrupt):
        err("interrupted")
        return EXIT_INTERRUPTED
    try:
        flush_stdout()
    except StdoutClosedError:
        _silence_stdout()
    return rv if isinstance(rv, int) else 0


def _silence_stdout() -> None:
    """After the reader of stdout went away: point fd 1 at /dev/null so the final flush is quiet."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point (``dlog = dlog:main``)."""
    sys.exit(run(argv))
