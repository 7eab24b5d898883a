"""Storage handles shared by every reader in one Python process (driver runner, planner, workers).

Spark re-creates readers in several processes and reuses its Python workers across tasks, so
handles live here, keyed by namespace URI, never on reader objects (which get pickled). A handle
made in another process (a forked parent) is never reused. At most :data:`MAX_NAMESPACES` are kept
open; the least recently used one is closed first.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping

import storage
from storage.log.log_manager import LogManager
from storage.log.namespace import Namespace

__all__ = ["MAX_NAMESPACES", "close_all", "log_manager", "namespace"]

#: Namespaces kept open per process.
MAX_NAMESPACES = 8

_lock = threading.Lock()
_Key = tuple[str, tuple[tuple[str, object], ...]]
_namespaces: OrderedDict[_Key, tuple[int, Namespace, dict[str, LogManager]]] = OrderedDict()


def _key(uri: str, conf: Mapping[str, object] | None) -> _Key:
    return uri, tuple(sorted((conf or {}).items()))


def _entry(
    uri: str, conf: Mapping[str, object] | None, create: bool = True
) -> tuple[int, Namespace, dict[str, LogManager]]:
    key = _key(uri, conf)
    pid = os.getpid()
    with _lock:
        hit = _namespaces.get(key)
        if hit is not None and hit[0] == pid:
            _namespaces.move_to_end(key)
            return hit
        ns = storage.open_namespace(uri, dict(conf) if conf else None, create=create)
        entry: tuple[int, Namespace, dict[str, LogManager]] = (pid, ns, {})
        _namespaces[key] = entry
        while len(_namespaces) > MAX_NAMESPACES:
            _, (old_pid, old_ns, _m) = _namespaces.popitem(last=False)
            if old_pid == pid:
                with contextlib.suppress(Exception):
                    old_ns.close()
        return entry


def namespace(uri: str, conf: Mapping[str, object] | None = None, *, create: bool = True) -> Namespace:
    """This process's open namespace for ``uri`` (opened on first use; a missing namespace is
    created then only with ``create``: readers pass False).

    Raises:
        InvalidArgumentError: a malformed URI. MetadataError: the metadata store cannot be opened
            (e.g. an unbound ZooKeeper namespace). InvalidConfigError: bad ``conf``.
        NamespaceNotFoundError: no namespace at ``uri`` and not ``create``.
    """
    return _entry(uri, conf, create)[1]


def log_manager(uri: str, log: str, conf: Mapping[str, object] | None = None, *, create: bool = True) -> LogManager:
    """This process's log manager of ``log`` in the namespace at ``uri`` (``create`` as in :func:`namespace`).

    Raises:
        InvalidStreamNameError, plus what :func:`namespace` raises.
    """
    _pid, ns, managers = _entry(uri, conf, create)
    with _lock:
        dlm = managers.get(log)
        if dlm is None:
            dlm = ns.open_log(log)
            managers[log] = dlm
        return dlm


def close_all() -> None:
    """Close every namespace this process opened (tests; also run at exit)."""
    pid = os.getpid()
    with _lock:
        entries = list(_namespaces.values())
        _namespaces.clear()
    for owner, ns, _ in entries:
        if owner == pid:
            with contextlib.suppress(Exception):
                ns.close()


atexit.register(close_all)
