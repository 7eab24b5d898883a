"""Fixtures for the segment store tests: real stores in temporary directories, real child processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.segstore.local import LocalSegmentStore
from tests.storage.segstore._helpers import Child


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "segstore"


@pytest.fixture
def store(store_root: Path) -> Iterator[LocalSegmentStore]:
    s = LocalSegmentStore(store_root)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def spawn() -> Iterator[type[Child]]:
    """``spawn(mode, *args)`` starts a child; every child is killed at teardown."""
    children: list[Child] = []

    class _Tracked(Child):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)
            children.append(self)

    try:
        yield _Tracked
    finally:
        for child in children:
            child.kill()
