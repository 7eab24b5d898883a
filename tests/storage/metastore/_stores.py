"""Helpers shared by the metadata store tests of both backends (no fixtures: see conftest.py)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from storage.metastore.base import MetadataStore
from storage.metastore.zookeeper import ZooKeeperMetadataStore

#: How long a test waits for something that should happen (a callback, a lock, a process).
WAIT_S = 20.0
#: ZooKeeper store settings for tests: short backoffs so that failures surface quickly.
ZK_FAST: dict[str, Any] = {
    "session_timeout_s": 10.0,
    "connect_timeout_s": 5.0,
    "retry_max_tries": 3,
    "retry_start_backoff_ms": 20,
    "retry_max_backoff_ms": 200,
}
#: The ``open_zk_store`` fixture: ``open_zk_store(root=..., **settings)`` opens a ZooKeeper store.
OpenZkStore = Callable[..., ZooKeeperMetadataStore]
#: Child processes are spawned (a fresh interpreter, not a fork of the test process).
CTX = multiprocessing.get_context("spawn")


def until(cond: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
    """Poll ``cond`` every 10 ms; True once it holds, False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def run_in_process(target: Callable[..., object], *args: object) -> None:
    """Run ``target(*args)`` in a spawned process and require it to exit cleanly."""
    p = CTX.Process(target=target, args=args)
    p.start()
    p.join(60)
    assert p.exitcode == 0


@dataclass
class WatchProbe:
    """A registered watch that records its calls (path, monotonic time) and sets ``event``."""

    event: threading.Event
    calls: list[str]
    times: list[float]
    cancel: Callable[[], None] = field(repr=False)


def watch_probe(store: MetadataStore, path: str) -> WatchProbe:
    """Watch ``path`` on ``store``; every call must be for ``path``."""
    ev = threading.Event()
    calls: list[str] = []
    times: list[float] = []

    def cb(p: str) -> None:
        assert p == path
        calls.append(p)
        times.append(time.monotonic())
        ev.set()

    return WatchProbe(ev, calls, times, store.watch(path, cb))


class StoreFactory:
    """Opens stores of one backend on one shared tree (each a client of its own: a connection to the
    same database file, or a ZooKeeper session on the same chroot); the fixture closes them.

    ``mutate_elsewhere(op, path, data)`` applies one change (see ``_workers.apply``) from a client
    that is not this process's stores: another process (SQLite) or another ZooKeeper session.
    """

    def __init__(
        self,
        backend: str,
        open_store: Callable[[], MetadataStore],
        mutate_elsewhere: Callable[[str, str, bytes], None],
    ) -> None:
        self.backend = backend
        self._open = open_store
        self._mutate = mutate_elsewhere

    def __call__(self) -> MetadataStore:
        return self._open()

    def mutate_elsewhere(self, op: str, path: str, data: bytes = b"") -> None:
        self._mutate(op, path, data)
