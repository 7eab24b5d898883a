"""The ``dlog`` runners shared by the CLI tests. Both take ``(*args, input=None, env=None)`` and return a
:class:`Result` (exit code, stdout, stderr):

* ``dlog`` runs the CLI in this process: :func:`dlog._entry.run`, the very function the console script's
  ``main()`` calls (``main`` only adds ``sys.exit``), inside click's ``CliRunner().isolation()``, which swaps
  stdin, stdout, stderr and the environment variables for the call. Most tests use it, for speed: a new
  interpreter importing the storage stack costs ~0.5 s a call locally and several seconds on a loaded CI
  machine, and the CLI tests make ~150 calls.
* ``dlog_exe`` runs the real console script (:func:`dlog_command`) in a process of its own. It is for what only
  a real executable shows: the console-script entry point and ``main()``'s ``sys.exit`` (``test_cli.py``:
  ``test_console_script``). Signals (``tail`` until SIGINT/SIGTERM) and a closed stdout or a terminal on stderr
  also need a process of their own; those tests start one with :func:`dlog_command` themselves.

Both see the test's environment without ``DLOG_URI`` and ``DLOG_CONF``, plus ``env``: ``dlog_exe`` gets
``cli_env`` (``subprocess_env`` without those two), ``dlog`` this process's ``os.environ`` with them unset for
the call.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

import dlog._entry as dlog_entry

DLOG_EXE = Path(sys.executable).parent / "dlog"
#: Variables the CLI reads that the tests' own environment must not supply (``cli_env`` drops them).
CLI_VARIABLES = ("DLOG_URI", "DLOG_CONF")


def dlog_command() -> list[str]:
    """The ``dlog`` executable: the console script if installed, else ``python -m dlog``."""
    if DLOG_EXE.exists():
        return [str(DLOG_EXE)]
    return [sys.executable, "-m", "dlog"]


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def ok(self) -> Result:
        assert self.rc == 0, f"dlog failed (rc {self.rc}): {self.err}"
        assert "Traceback" not in self.err
        return self

    def error(self, rc: int, *needles: str) -> Result:
        """Assert a failure: exit ``rc``, exactly one line ``dlog: error: ...`` on stderr naming the needles."""
        assert self.rc == rc, f"expected rc {rc}, got {self.rc}; stdout={self.out!r} stderr={self.err!r}"
        err_lines = self.err.splitlines()
        assert len(err_lines) == 1, f"error is not one line: {self.err!r}"
        assert err_lines[0].startswith("dlog: error: "), self.err
        for n in needles:
            assert n.lower() in err_lines[0].lower(), f"{n!r} not in {err_lines[0]!r}"
        assert self.out == ""
        return self


Dlog = Callable[..., Result]


def _as_bytes(input: bytes | str | None) -> bytes:
    if input is None:
        return b""
    return input.encode() if isinstance(input, str) else input


def run_in_process(args: tuple[str, ...], input: bytes | str | None, env: dict[str, str] | None) -> Result:
    """``dlog *args`` through :func:`dlog._entry.run` with stdin ``input``, ``DLOG_URI``/``DLOG_CONF`` unset
    unless ``env`` sets them, and ``env`` set; stdout and stderr captured apart.

    ``run`` points the root logger at the stderr of the call (and quietens ``kazoo``) and replaces
    ``warnings.showwarning``: all three are put back afterwards, so pytest's log and warning capture keep
    working.
    """
    overrides: dict[str, str | None] = dict.fromkeys(CLI_VARIABLES)
    overrides.update(env or {})
    root, kazoo = logging.getLogger(), logging.getLogger("kazoo")
    handlers, root_level, kazoo_level = list(root.handlers), root.level, kazoo.level
    showwarning = warnings.showwarning
    try:
        # catch_warnings also puts the filters back: the call gets a new interpreter's (pytest's would show
        # every DeprecationWarning of the libraries on the command's stderr, which a subprocess never shows)
        with warnings.catch_warnings(), CliRunner().isolation(input=_as_bytes(input), env=overrides) as streams:
            _interpreter_warning_filters()
            stdout, stderr, _ = streams
            try:
                rc = dlog_entry.run(list(args))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            out, err = stdout.getvalue(), stderr.getvalue()
    finally:
        root.handlers[:] = handlers  # run() replaced the list's contents in place
        root.setLevel(root_level)
        kazoo.setLevel(kazoo_level)
        warnings.showwarning = showwarning
    return Result(rc, out.decode("utf-8"), err.decode("utf-8"))


def _interpreter_warning_filters() -> None:
    """The warning filters of a Python started without ``-W`` or ``PYTHONWARNINGS``."""
    warnings.resetwarnings()
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__", append=True)
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category, append=True)


@pytest.fixture
def cli_env(subprocess_env: dict[str, str]) -> dict[str, str]:
    env = dict(subprocess_env)
    for name in CLI_VARIABLES:
        env.pop(name, None)
    return env


@pytest.fixture
def dlog() -> Dlog:
    """``dlog(*args, input=None, env=None)``: run the CLI in this process, return its exit code and output."""

    def run(*args: str, input: bytes | str | None = None, env: dict[str, str] | None = None) -> Result:
        return run_in_process(args, input, env)

    return run


@pytest.fixture
def dlog_exe(cli_env: dict[str, str]) -> Dlog:
    """``dlog_exe(*args, input=None, env=None)``: run the real console script in a process of its own, return
    its exit code and output."""

    def run(*args: str, input: bytes | str | None = None, env: dict[str, str] | None = None) -> Result:
        proc = subprocess.run(
            [*dlog_command(), *args],
            input=_as_bytes(input),
            capture_output=True,
            env={**cli_env, **(env or {})},
            timeout=60,
        )
        return Result(proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))

    return run
