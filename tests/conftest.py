"""Shared fixtures: fresh namespaces on real stores (no mocks)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402

# DistributedLog's test base config (TestDistributedLogBase): small buffers, short lock timeout.
BASE_CONF = {
    "readAheadMaxRecords": 1000,
    "readAheadBatchSize": 10,
    "lockTimeoutSeconds": 1,
    "writerOutputBufferSize": 0,
    "readAheadWaitTime": 50,
}


@pytest.fixture
def ns_uri(tmp_path: Path) -> str:
    """URI of a fresh embedded namespace."""
    return f"distributedlog-local://{tmp_path / 'ns'}"


@pytest.fixture
def ns(ns_uri: str) -> Iterator[storage.Namespace]:
    """A fresh namespace with the test base config."""
    namespace = storage.open_namespace(ns_uri, BASE_CONF)
    try:
        yield namespace
    finally:
        namespace.close()


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """Environment for child Python processes that import this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env
