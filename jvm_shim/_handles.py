"""The gateway's handle tables: the objects behind the integer handles of :mod:`jvm_shim.protocol`
(namespaces, log managers, async writers, readers), their parent/child links, and the argument
helpers the operations share. :class:`HandleTable` is the base of :class:`jvm_shim.gateway.Gateway`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from storage import DLSN, AsyncLogWriter, Config, LogManager, LogReader, LogRecordWithDLSN, Namespace
from storage.errors import AlreadyClosedError, DLError, InvalidArgumentError

log = logging.getLogger("jvm_shim.gateway")


# --- handles ------------------------------------------------------------------------------------
@dataclass(eq=False)
class _NamespaceHandle:
    ns: Namespace
    owned: bool  # closed with the handle (False: the gateway's shared namespace)
    conf: Config | None  # applied to logs opened through this handle
    logs: set[int] = field(default_factory=set)


@dataclass(eq=False)
class _LogHandle:
    dlm: LogManager
    ns: Namespace
    parent: int
    writers: set[int] = field(default_factory=set)
    readers: set[int] = field(default_factory=set)


@dataclass(eq=False)
class _WriterHandle:
    writer: AsyncLogWriter
    parent: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_batch: int = 1
    batches: dict[int, list[Future[DLSN]]] = field(default_factory=dict)


@dataclass(eq=False)
class _ReaderHandle:
    reader: LogReader
    parent: int
    wait_slice_s: float  # how long one blocking read may wait (readAheadWaitTime)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closing: threading.Event = field(default_factory=threading.Event)
    #: records read from the storage reader but not returned yet (a read cut short by ``maxBytes``)
    pending: list[LogRecordWithDLSN] = field(default_factory=list)


_Handle = _NamespaceHandle | _LogHandle | _WriterHandle | _ReaderHandle
#: The argument key naming each kind of handle.
_KIND = {_NamespaceHandle: "ns", _LogHandle: "log", _WriterHandle: "writer", _ReaderHandle: "reader"}
_NAME = {"ns": "namespace", "log": "log", "writer": "writer", "reader": "reader"}


# --- argument helpers ---------------------------------------------------------------------------
def _arg(args: Mapping[str, Any], key: str) -> Any:
    if key not in args:
        raise InvalidArgumentError(f"missing argument {key!r}")
    return args[key]


def _int(args: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = args.get(key, default) if default is not None else _arg(args, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"argument {key!r} must be an integer, got {value!r}")
    return value


def _str(args: Mapping[str, Any], key: str) -> str:
    value = _arg(args, key)
    if not isinstance(value, str):
        raise InvalidArgumentError(f"argument {key!r} must be a string, got {value!r}")
    return value


def _dlsn(args: Mapping[str, Any], key: str) -> DLSN:
    return DLSN.parse(_str(args, key))


def _conf(args: Mapping[str, Any]) -> dict[str, object] | None:
    conf = args.get("conf")
    if conf is None:
        return None
    if not isinstance(conf, dict):
        raise InvalidArgumentError(f"argument 'conf' must be an object, got {conf!r}")
    return {str(k): v for k, v in conf.items()}


def _dlsn_text(d: DLSN) -> str | None:
    return None if d == DLSN.INVALID else str(d)


def _same_namespace(a: str, b: str) -> bool:
    if a == b:
        return True
    from storage.log.namespace import local_path_of

    try:
        pa, pb = local_path_of(a), local_path_of(b)
    except InvalidArgumentError:
        return False
    return pa is not None and pb is not None and pa.resolve() == pb.resolve()


class HandleTable:
    """Integer handles onto storage objects, each under its parent (namespace > log > writer/reader);
    one lock guards the tables (held only for table updates)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next_handle = 1
        self._handles: dict[int, _Handle] = {}
        self._closed = False

    def _add(self, handle: _Handle, parent: int | None = None) -> int:
        """Register ``handle`` (under ``parent``'s children); closes it and raises AlreadyClosedError when
        the gateway or the parent was closed meanwhile."""
        with self._lock:
            owner = None if parent is None else self._handles.get(parent)
            if not self._closed and (parent is None or owner is not None):
                h = self._next_handle
                self._next_handle += 1
                self._handles[h] = handle
                if isinstance(owner, _NamespaceHandle):
                    owner.logs.add(h)
                elif isinstance(owner, _LogHandle):
                    (owner.writers if isinstance(handle, _WriterHandle) else owner.readers).add(h)
                return h
        self._close_handle(handle)
        what = "the gateway" if self._closed else f"the {_NAME[_KIND[type(handle)]]}'s parent handle {parent}"
        raise AlreadyClosedError(f"{what} was closed meanwhile")

    def _get(self, args: Mapping[str, Any], key: str) -> _Handle:
        h = _int(args, key)
        with self._lock:
            handle = self._handles.get(h)
            next_handle = self._next_handle
        if handle is None:
            if 0 < h < next_handle:
                raise AlreadyClosedError(f"{_NAME[key]} handle {h} is closed")
            raise InvalidArgumentError(f"no {_NAME[key]} handle {h}")
        if _KIND[type(handle)] != key:
            raise InvalidArgumentError(f"handle {h} is a {_NAME[_KIND[type(handle)]]} handle, not a {_NAME[key]} one")
        return handle

    def _ns(self, args: Mapping[str, Any]) -> _NamespaceHandle:
        h = self._get(args, "ns")
        assert isinstance(h, _NamespaceHandle)
        return h

    def _log(self, args: Mapping[str, Any]) -> _LogHandle:
        h = self._get(args, "log")
        assert isinstance(h, _LogHandle)
        return h

    def _writer(self, args: Mapping[str, Any]) -> _WriterHandle:
        h = self._get(args, "writer")
        assert isinstance(h, _WriterHandle)
        return h

    def _reader(self, args: Mapping[str, Any]) -> _ReaderHandle:
        h = self._get(args, "reader")
        assert isinstance(h, _ReaderHandle)
        return h

    def _remove(self, h: int) -> list[_Handle]:
        """Take ``h`` and its descendants out of the tables (children first); caller holds the lock."""
        handle = self._handles.pop(h, None)
        if handle is None:
            return []
        out: list[_Handle] = []
        if isinstance(handle, _NamespaceHandle):
            for child in sorted(handle.logs):
                out.extend(self._remove(child))
        elif isinstance(handle, _LogHandle):
            for child in sorted(handle.readers | handle.writers):
                out.extend(self._remove(child))
        parent = getattr(handle, "parent", None)
        owner = self._handles.get(parent) if isinstance(parent, int) else None
        if isinstance(owner, _NamespaceHandle):
            owner.logs.discard(h)
        elif isinstance(owner, _LogHandle):
            owner.writers.discard(h)
            owner.readers.discard(h)
        out.append(handle)
        return out

    def _close_tree(self, args: Mapping[str, Any], key: str) -> None:
        self._get(args, key)  # AlreadyClosedError / InvalidArgumentError as any other use
        with self._lock:
            doomed = self._remove(_int(args, key))
        first: DLError | None = None
        for handle in doomed:
            try:
                self._close_handle(handle)
            except DLError as e:
                first = first or e
        if first is not None:
            raise first

    def _close_handle(self, handle: _Handle) -> None:
        if isinstance(handle, _ReaderHandle):
            handle.closing.set()
            with handle.lock:  # a waiting read sees `closing` within readAheadWaitTime
                handle.reader.close()
        elif isinstance(handle, _WriterHandle):
            try:
                handle.writer.close()
            except Exception as e:
                log.warning("closing a writer failed (%s): aborting it", e)
                handle.writer.abort()
        elif isinstance(handle, _LogHandle):
            handle.dlm.close()
        elif handle.owned:
            handle.ns.close()
