"""What every ``dlog`` command shares: exit codes, stdout/stderr output, progress bars, the DLSN
parameter type, the state set up by the top-level options (:class:`State`, ``pass_state``) and log
look-ups. Imports nothing else of :mod:`dlog`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import click

from storage.config import Config
from storage.errors import InvalidArgumentError, LogEmptyError, LogNotFoundError
from storage.formats.dlsn import DLSN
from storage.log.log_manager import LogManager
from storage.log.namespace import Namespace, open_namespace

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

PROG = "dlog"
#: Exit code of an error (a DLError or another operational failure).
EXIT_ERROR = 1
#: Exit code of a usage error (click's).
EXIT_USAGE = 2
#: Exit code after an interrupt (128 + SIGINT), except for ``tail``.
EXIT_INTERRUPTED = 130
#: Records asked of a reader per call.
READ_BATCH = 1000

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


# --- output -----------------------------------------------------------------------------------
class StdoutClosedError(Exception):
    """stdout's reader went away (``dlog dump big | head``): stop quietly."""


def _stdout() -> IO[bytes]:
    return sys.stdout.buffer


def out(line: str = "") -> None:
    """Write one line to stdout as UTF-8 (never fails on encoding)."""
    try:
        _stdout().write(line.encode("utf-8", "replace") + b"\n")
    except BrokenPipeError:
        raise StdoutClosedError() from None


def flush_stdout() -> None:
    try:
        _stdout().flush()
    except BrokenPipeError:
        raise StdoutClosedError() from None


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


DLSN_TYPE = DLSNType()


# --- shared state -----------------------------------------------------------------------------
@dataclass
class State:
    """What the top-level options set up for the command: the namespace URI, the configuration and how much to log
    (``verbose``: the count of ``-v``)."""

    uri: str | None
    conf_file: str | None
    verbose: int = 0
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
    def namespace(self, *, create: bool = False) -> Iterator[Namespace]:
        """The namespace of ``--uri``, closed afterwards. Only commands that write pass ``create``:
        for the others a mistyped URI is an error, and nothing is created.

        Raises:
            NamespaceNotFoundError: no namespace at ``--uri`` and not ``create``. What
                :func:`~storage.log.namespace.open_namespace` raises.
        """
        uri = self.require_uri()
        ns = open_namespace(uri, self.conf(), create=create)
        try:
            yield ns
        finally:
            ns.close()


pass_state = click.make_pass_decorator(State)


# --- logs -------------------------------------------------------------------------------------
def require_log(ns: Namespace, name: str) -> LogManager:
    """The log manager of an existing log. Raises InvalidStreamNameError, LogNotFoundError."""
    if not ns.log_exists(name):
        raise LogNotFoundError(f"log {name!r} does not exist in {ns.uri}")
    return ns.open_log(name)


def end_of(dlm: LogManager) -> DLSN | None:
    """DLSN of the last record readers see now, or None for an empty log."""
    try:
        return dlm.last_dlsn()
    except LogEmptyError:
        return None
