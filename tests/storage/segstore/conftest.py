"""Fixtures for the segment store tests: real stores (local files in a temporary directory, or a
RADOS namespace of its own on the session's Ceph cluster), real child processes.

``store`` and ``other`` are two clients of the same store (as two processes would have), for every
kind in :data:`STORE_KINDS`; ``open_store(**kw)`` opens more. ``local_store`` is the local-files store
alone, for tests of what only it has (file descriptors, flock, inotify).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.segstore.base import SegmentStore
from storage.segstore.local import LocalSegmentStore
from tests.storage.segstore._child import RADOS_TEST_MAX_OBJECT_BYTES as TEST_MAX_OBJECT_BYTES
from tests.storage.segstore._helpers import Child

#: Every store kind the behaviour suite runs on.
STORE_KINDS = ["local", "rados"]


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "segstore"


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def rados_store(location: Any, **kw: Any) -> SegmentStore:
    """A RADOS store client for ``location`` with the tests' small object size."""
    from storage.segstore.rados import RadosSegmentStore

    return RadosSegmentStore(location, **{"max_object_bytes": TEST_MAX_OBJECT_BYTES, **kw})


@pytest.fixture
def open_store(store_kind: str, store_root: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``open_store(**kw)`` opens one more client of this test's store; all are closed at teardown."""
    opened: list[SegmentStore] = []
    if store_kind == "rados":
        location = request.getfixturevalue("rados_location")

        def make(**kw: Any) -> SegmentStore:
            s = rados_store(location, **kw)
            opened.append(s)
            return s

    else:

        def make(**kw: Any) -> SegmentStore:
            s = LocalSegmentStore(store_root, **kw)
            opened.append(s)
            return s

    try:
        yield make
    finally:
        for s in opened:
            s.close()


@pytest.fixture
def store_spec(store_kind: str, store_root: Path, request: pytest.FixtureRequest) -> str:
    """How a child process names this test's store (see ``_child.open_store``)."""
    if store_kind == "rados":
        return "rados:" + json.dumps(dataclasses.asdict(request.getfixturevalue("rados_location")))
    return str(store_root)


@pytest.fixture
def store(open_store: Callable[..., Any]) -> Any:
    return open_store()


@pytest.fixture
def other(open_store: Callable[..., Any]) -> Any:
    """A second client of the same store (as another process would have)."""
    return open_store()


@pytest.fixture
def local_store(store_root: Path) -> Iterator[LocalSegmentStore]:
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
