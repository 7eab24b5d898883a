"""Helpers for the segment store tests: a child Python process driven over stdin/stdout."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import storage

CHILD_SCRIPT = Path(__file__).with_name("_child.py")
#: The directory that holds the ``storage`` package under test (children import it from there).
PACKAGE_ROOT = Path(storage.__file__).parent.parent


class Child:
    """A child Python process running ``_child.py``; its stdout lines are collected by a thread."""

    def __init__(self, *args: object) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(PACKAGE_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD_SCRIPT), *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout: float = 60.0) -> str | None:
        """The next stdout line (``None`` at EOF)."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"child silent for {timeout}s; stderr: {self.stderr()}") from None

    def expect(self, prefix: str, timeout: float = 60.0) -> str:
        """Skip lines until one starts with ``prefix``; return the rest of it."""
        while True:
            line = self.next_line(timeout)
            if line is None:
                raise AssertionError(f"child ended before {prefix!r}; stderr: {self.stderr()}")
            if line.startswith(prefix + " ") or line == prefix:
                return line[len(prefix) :].strip()

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return "<running>"
        return self.proc.stderr.read()

    def wait(self, timeout: float = 60.0) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._reader.join(30)  # the pipe reaches EOF once the child is gone
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
