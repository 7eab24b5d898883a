"""A crash file system (tools/crashfs.py) mounted for each test of this directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.crashfs import CrashFS


@pytest.fixture
def crashfs(tmp_path: Path) -> Iterator[CrashFS]:
    with CrashFS(tmp_path / "crashfs", tmp_path / "mnt") as fs:
        yield fs


from tests.proxy.conftest import proxy_process, proxy_processes  # noqa: E402, F401  (the write proxy's processes)
