"""The ZooKeeper store's watches and its worker thread.

Watches are raw ZooKeeper watches (an exists watch for the data, a children watch for the children)
re-armed before every callback. kazoo does not restore watches after a reconnect, so after every
reconnect all of them are re-armed and every callback is called once (changes may have been missed
meanwhile; spurious calls are allowed). Callbacks, re-arming and reconnect housekeeping run on one
worker thread per store, never on kazoo's own threads, so callbacks may call back into the store.

Imports :mod:`storage.metastore._watchthread` (calling a callback, stopping the thread) and
:mod:`storage.metastore._zk_errors` (kinds of failure); neither kazoo nor
:mod:`storage.metastore.zookeeper`: the store passes itself in as a :class:`WatchStore` (its kazoo
client, requests, and what kind of failure or event a kazoo exception or watch event is; kazoo is
imported only by the store's module).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from storage.metastore._watchthread import call_watch, join_watch_thread
from storage.metastore._zk_errors import Failure

__all__ = ["WatchStore", "Watches"]

log = logging.getLogger("storage.metastore.zookeeper")

R = TypeVar("R")


@dataclass(eq=False)
class _Watch:
    path: str
    zpath: str
    callback: Callable[[str], None]
    cancelled: bool = False
    queued: bool = False
    on_event: Callable[[Any], None] = field(default=lambda event: None)


@dataclass(eq=False)
class _OneShot:
    """A one-shot watch of :meth:`Watches.oneshot`: called once, then forgotten."""

    path: str
    callback: Callable[[str], None]
    cancelled: bool = False


class _Worker:
    """One thread running submitted tasks in order (watch callbacks, re-arming, reconnect housekeeping)."""

    def __init__(self, name: str) -> None:
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def stop(self, join_timeout_s: float = 10.0) -> None:
        self._tasks.put(None)
        join_watch_thread(self._thread, join_timeout_s, log, self._thread.name)

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                task()
            except Exception:
                log.exception("metadata store background task failed")


class _Client(Protocol):
    """What is used of a ``kazoo.client.KazooClient`` (each request returns kazoo's async result)."""

    @property
    def connected(self) -> bool: ...

    def exists_async(self, path: str, watch: Callable[[Any], None] | None = None) -> Any: ...

    def get_children_async(self, path: str, watch: Callable[[Any], None] | None = None) -> Any: ...


class WatchStore(Protocol):
    """What the watches use of the store (:mod:`storage.metastore.zookeeper`)."""

    @property
    def _closed(self) -> bool: ...

    @property
    def _client(self) -> _Client: ...

    def _check_open(self) -> None: ...

    def _wait(self, async_result: Any) -> Any: ...

    def _run(self, what: str, fn: Callable[[], R], *, idempotent: bool = True) -> R: ...

    def _failure(self, e: BaseException) -> Failure: ...

    def _connection_event(self, event: Any) -> bool: ...


class Watches:
    """One store's registered watches and its worker thread (named ``thread_name``).

    ``mu`` is the store's bookkeeping lock (shared, so that registering a watch and closing the
    store see each other atomically).
    """

    def __init__(self, store: WatchStore, mu: threading.Lock, thread_name: str) -> None:
        self._store = store
        self._mu = mu
        self._watches: set[_Watch] = set()
        self._oneshots: set[_OneShot] = set()
        self._worker = _Worker(thread_name)

    def add(self, path: str, zpath: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Watch ``path`` (ZooKeeper path ``zpath``; arguments checked by the store); returns the
        (idempotent) cancel function.

        Raises:
            MetadataConnectionError: ZooKeeper unreachable. MetadataError: other failure.
            AlreadyClosedError: the store is closed.
        """
        w = _Watch(path, zpath, callback)
        w.on_event = lambda event: self._on_watch_event(w, event)
        with self._mu:
            self._store._check_open()
            self._watches.add(w)

        def cancel() -> None:
            w.cancelled = True
            with self._mu:
                self._watches.discard(w)

        try:
            self._store._run(f"watch {path}", lambda: self._arm(w))
        except BaseException:
            cancel()
            raise
        return cancel

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task`` on the worker thread, after the tasks already submitted."""
        self._worker.submit(task)

    def oneshot(self, path: str, callback: Callable[[str], None]) -> tuple[Callable[[Any], None], Callable[[], None]]:
        """A kazoo watcher for ``path`` that calls ``callback(path)`` once on the worker thread: after
        the watch's event, or after the next reconnect (whichever comes first); and the function that
        forgets it (the request that was to set it failed)."""
        w = _OneShot(path, callback)
        with self._mu:
            self._oneshots.add(w)

        def on_event(event: Any) -> None:
            if self._store._closed or self._store._connection_event(event):
                return  # the connection dropped: the reconnect calls every pending one-shot
            self._fire_oneshot(w)

        def forget() -> None:
            with self._mu:
                self._oneshots.discard(w)

        return on_event, forget

    def _fire_oneshot(self, w: _OneShot) -> None:
        with self._mu:
            if w not in self._oneshots:
                return
            self._oneshots.discard(w)
        self._worker.submit(lambda: call_watch(w, log))

    def drain(self, timeout_s: float, waiting_for: str) -> None:
        """Return once the tasks submitted before this call have run (at once on the worker itself).
        Logs what it waits for after a second.

        Raises:
            TimeoutError: not done within ``timeout_s``.
        """
        if threading.current_thread() is self._worker.thread:
            return
        done = threading.Event()
        self._worker.submit(done.set)
        if done.wait(1.0):
            return
        log.info("waiting for the metadata watch thread to finish %s", waiting_for)
        if not done.wait(max(0.0, timeout_s - 1.0)):
            raise TimeoutError(f"the metadata watch thread did not finish {waiting_for} within {timeout_s:g}s")

    def cancel_all(self) -> None:
        """The store is closing (already marked closed): no callback is called any more."""
        with self._mu:
            watches, self._watches = list(self._watches), set()
            self._oneshots.clear()
        for w in watches:
            w.cancelled = True

    def stop(self) -> None:
        """Stop the worker thread (waiting for it unless called from it)."""
        self._worker.stop()

    def after_reconnect(self) -> None:
        """On the worker after a reconnect: re-arm every watch and call every callback once (every
        pending one-shot too, which is then forgotten)."""
        with self._mu:
            watches = list(self._watches)
            oneshots, self._oneshots = list(self._oneshots), set()
        for o in oneshots:
            call_watch(o, log)
        for w in watches:
            if w.cancelled:
                continue
            try:
                self._arm(w)
            except Exception as e:
                log.debug("re-arming the watch on %s failed (%s); the next reconnect retries", w.path, e)
            self._call(w)

    def _arm(self, w: _Watch) -> None:
        """Set the exists watch and (if the node exists) the children watch of ``w`` (kazoo's errors
        raised, for the store's retries)."""
        if w.cancelled:
            return
        store = self._store
        stat = store._wait(store._client.exists_async(w.zpath, watch=w.on_event))
        if stat is not None:
            try:
                store._wait(store._client.get_children_async(w.zpath, watch=w.on_event))
            except Exception as e:
                if store._failure(e) is not Failure.NO_NODE:
                    raise
                # deleted in between: the exists watch fires

    def _on_watch_event(self, w: _Watch, event: Any) -> None:
        """kazoo's watcher (runs on kazoo's callback thread): hand the event to the worker."""
        if w.cancelled or self._store._closed or self._store._connection_event(event):
            return  # the connection dropped: the reconnect re-arms and calls every watch
        with self._mu:
            if w.queued:
                return
            w.queued = True
        self._worker.submit(lambda: self._fire(w))

    def _fire(self, w: _Watch) -> None:
        with self._mu:
            w.queued = False
        if w.cancelled or self._store._closed:
            return
        try:
            if self._store._client.connected:
                self._arm(w)
        except Exception as e:
            log.debug("re-arming the watch on %s failed (%s); the reconnect re-arms it", w.path, e)
        self._call(w)

    @staticmethod
    def _call(w: _Watch) -> None:
        call_watch(w, log)
