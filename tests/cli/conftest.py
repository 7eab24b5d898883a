"""The ``dlog`` runner shared by the CLI tests: ``dlog(*args)`` runs the real console script in a
process of its own and returns its exit code and output."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

DLOG_EXE = Path(sys.executable).parent / "dlog"


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


@pytest.fixture
def cli_env(subprocess_env: dict[str, str]) -> dict[str, str]:
    env = dict(subprocess_env)
    env.pop("DLOG_URI", None)
    env.pop("DLOG_CONF", None)
    return env


@pytest.fixture
def dlog(cli_env: dict[str, str]) -> Dlog:
    """``dlog(*args, input=None, env=None)``: run the CLI, return its exit code and output."""

    def run(*args: str, input: bytes | str | None = None, env: dict[str, str] | None = None) -> Result:
        data = input.encode() if isinstance(input, str) else input
        proc = subprocess.run(
            [*dlog_command(), *args],
            input=data if data is not None else b"",
            capture_output=True,
            env={**cli_env, **(env or {})},
            timeout=60,
        )
        return Result(proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))

    return run
