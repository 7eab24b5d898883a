"""What the two stores' watch threads share: calling a watch callback (a cancelled watch is skipped, a
failing callback is logged and never stops the thread) and stopping the thread.

The threads themselves differ: the embedded store's follows the SQLite change log
(:mod:`._changewatch`), the ZooKeeper store's runs queued tasks (:mod:`.zookeeper`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol


class Watch(Protocol):
    """A registered watch: ``callback(path)`` is called while not ``cancelled``."""

    @property
    def path(self) -> str: ...

    @property
    def callback(self) -> Callable[[str], None]: ...

    @property
    def cancelled(self) -> bool: ...


def call_watch(w: Watch, log: logging.Logger) -> None:
    """Call ``w``'s callback unless it was cancelled; a failure is logged on ``log``, not raised."""
    if w.cancelled:
        return
    try:
        w.callback(w.path)
    except Exception:
        log.exception("metadata watch callback for %s failed", w.path)


def join_watch_thread(thread: threading.Thread, join_timeout_s: float, log: logging.Logger, which: str) -> None:
    """Wait up to ``join_timeout_s`` for a watch thread told to stop, unless called from that thread
    (a callback); a warning on ``log`` names it (``which``) if it is still running then."""
    if threading.current_thread() is thread:
        return
    thread.join(join_timeout_s)
    if thread.is_alive():
        log.warning("metadata watch thread %s did not stop (a callback is blocking)", which)
