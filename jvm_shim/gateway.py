"""The py4j gateway: serves the storage API to the shim's Java classes (wire spec: :mod:`jvm_shim.protocol`).

* :class:`Gateway` implements every operation of the protocol over plain ``storage`` objects
  (namespaces, log managers, async writers, readers) held in tables keyed by integer handles. It is
  the py4j entry point (it declares the Java interface ``org.apache.distributedlog.shim.PythonGateway``)
  and can be driven in-process by calling :meth:`Gateway.call` directly.
* :func:`serve` starts py4j's Python server (``ClientServer`` with the gateway as
  ``python_server_entry_point``) on loopback with an auth token; the Python side never calls Java, so
  no JVM needs to be running.
* :func:`run` is the process (``python -m jvm_shim``, ``dlog gateway``): it prints one line
  ``GATEWAY port=<port> token=<token|env>`` to stdout and serves until ``gateway.shutdown``,
  SIGTERM/SIGINT or, with ``parent_watch``, EOF on stdin; then it closes every handle and stops.

Namespaces: a gateway started with a URI opens that namespace once; ``namespace.open`` with the same
URI (or the same embedded directory) returns a new handle onto it (its ``conf`` then applies to the logs
opened through that handle), so several JVMs can share one gateway. Any other URI opens a namespace of
the handle's own, closed with it.

Threads: py4j runs every Java thread's calls on a Python thread of their own. The handle tables are
guarded by one lock held only for table updates; storage calls run outside it. ``writer.write`` and
``writer.await`` of one writer may run on two threads at once (submit and await pipelined); a reader
serves one read at a time, and ``reader.close`` ends a waiting read (``ReadCancelledError``).

Semantics are the storage core's, as DistributedLog's: ``writer.await`` returns once every record of
the batch is transmitted and durable, so with ``writerOutputBufferSize`` > 0 and neither
``periodicFlushFrequencyMilliSeconds`` nor ``enableImmediateFlush`` the tail of a burst waits for more
writes or a ``writer.flush``; records become visible to readers at the writer's next commit (flush).
A ``reader.read`` with ``waitMs`` > 0 waits up to that long for one record, in ``readAheadWaitTime``
slices woken by the log's commits, then short polls.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import storage
from jvm_shim import protocol
from storage import DLSN, AsyncLogWriter, Config, LogManager, LogReader, Namespace
from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    ReadCancelledError,
    WriteCancelledError,
)

log = logging.getLogger(__name__)

#: The environment variable a parent process passes the auth token in (never on the command line).
TOKEN_ENV = "DLOG_GATEWAY_TOKEN"
#: Default listening address: loopback only.
DEFAULT_ADDRESS = "127.0.0.1"
#: How long a clean shutdown may take before the process exits anyway (locks die with it).
SHUTDOWN_GRACE_S = 30.0
#: Poll interval of a read's last wait slice (shorter than readAheadWaitTime, to keep waitMs).
_POLL_S = 0.01

_Handler = Callable[[dict[str, Any], bytes], bytes]


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
    from storage.impl.namespace import local_path_of

    try:
        pa, pb = local_path_of(a), local_path_of(b)
    except InvalidArgumentError:
        return False
    return pa is not None and pb is not None and pa.resolve() == pb.resolve()


# --- the gateway --------------------------------------------------------------------------------
class Gateway:
    """Every operation of :mod:`jvm_shim.protocol` over the storage API; the py4j entry point.

    ``uri`` (optional) is the gateway's own namespace, opened now with ``conf`` (a :class:`storage.Config`
    or a dict of DistributedLog keys). :meth:`call` never raises: errors become the protocol's error
    envelope. :meth:`close` closes every handle.

    Raises:
        DLError: ``uri`` cannot be opened (as :func:`storage.open_namespace`).
    """

    class Java:
        implements = [protocol.JAVA_INTERFACE]  # py4j reads this class attribute

    def __init__(self, uri: str | None = None, conf: Config | Mapping[str, object] | None = None) -> None:
        self.uri = uri
        #: Set by the ``gateway.shutdown`` operation (and by whoever else wants the server to stop).
        self.shutdown_requested = threading.Event()
        self._lock = threading.Lock()
        self._next_handle = 1
        self._handles: dict[int, _Handle] = {}
        self._closed = False
        cfg = conf if isinstance(conf, Config) or conf is None else dict(conf)
        self._shared: Namespace | None = storage.open_namespace(uri, cfg) if uri is not None else None
        self._ops: dict[str, _Handler] = {
            "gateway.ping": self._ping,
            "gateway.shutdown": self._shutdown,
            "namespace.open": self._ns_open,
            "namespace.close": self._ns_close,
            "namespace.createLog": self._ns_create_log,
            "namespace.deleteLog": self._ns_delete_log,
            "namespace.logExists": self._ns_log_exists,
            "namespace.getLogs": self._ns_get_logs,
            "log.open": self._log_open,
            "log.close": self._log_close,
            "log.lastDLSN": self._log_last_dlsn,
            "log.firstDLSN": self._log_first_dlsn,
            "log.lastTxId": self._log_last_txid,
            "log.recordCount": self._log_record_count,
            "log.isEndOfStreamMarked": self._log_is_eos,
            "log.delete": self._log_delete,
            "writer.open": self._writer_open,
            "writer.write": self._writer_write,
            "writer.await": self._writer_await,
            "writer.flush": self._writer_flush,
            "writer.truncate": self._writer_truncate,
            "writer.markEndOfStream": self._writer_mark_eos,
            "writer.close": self._writer_close,
            "writer.abort": self._writer_abort,
            "reader.open": self._reader_open,
            "reader.read": self._reader_read,
            "reader.close": self._reader_close,
        }

    @property
    def operations(self) -> tuple[str, ...]:
        """Every operation name :meth:`call` serves."""
        return tuple(self._ops)

    # --- the entry point ------------------------------------------------------------------------
    def call(self, op: str, args: str | None, data: bytes | bytearray | None) -> bytes:
        """Run operation ``op`` with the JSON ``args`` and the binary ``data``; the response bytes
        (see :mod:`jvm_shim.protocol`). Never raises."""
        try:
            handler = self._ops.get(op) if isinstance(op, str) else None
            if handler is None:
                raise InvalidArgumentError(f"unknown gateway operation {op!r}")
            if self._closed and op != "gateway.ping":
                raise AlreadyClosedError("the gateway is shut down")
            return handler(self._parse_args(args), bytes(data) if data else b"")
        except DLError as e:
            return protocol.error(e)
        except Exception as e:
            log.exception("gateway operation %r failed unexpectedly", op)
            return protocol.error(e)

    @staticmethod
    def _parse_args(args: str | None) -> dict[str, Any]:
        if args is None or args == "":
            return {}
        try:
            doc = json.loads(args)
        except (ValueError, TypeError) as e:
            raise InvalidArgumentError(f"arguments are not JSON: {e}") from None
        if not isinstance(doc, dict):
            raise InvalidArgumentError(f"arguments must be a JSON object, got {type(doc).__name__}")
        return doc

    # --- handle tables --------------------------------------------------------------------------
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

    def close(self) -> None:
        """Close every reader, writer (aborted if closing fails), log manager and namespace; later calls
        fail with ``AlreadyClosedError`` (except ``gateway.ping``). Idempotent; never raises."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handles = list(self._handles.values())
            self._handles.clear()
        order = (_ReaderHandle, _WriterHandle, _LogHandle, _NamespaceHandle)
        for kind in order:
            for handle in handles:
                if isinstance(handle, kind):
                    try:
                        self._close_handle(handle)
                    except Exception:
                        log.exception("closing a %s handle failed", _NAME[_KIND[kind]])
        if self._shared is not None:
            try:
                self._shared.close()
            except Exception:
                log.exception("closing the namespace %s failed", self.uri)
        self.shutdown_requested.set()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- gateway.* --------------------------------------------------------------------------------
    def _ping(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"version": storage.__version__})

    def _shutdown(self, args: dict[str, Any], data: bytes) -> bytes:
        log.info("shutdown requested by a client")
        self.shutdown_requested.set()
        return protocol.ok()

    # --- namespace.* ------------------------------------------------------------------------------
    def _ns_open(self, args: dict[str, Any], data: bytes) -> bytes:
        uri = _str(args, "uri")
        conf = _conf(args)
        shared = self._shared
        if shared is not None and self.uri is not None and _same_namespace(uri, self.uri):
            handle = _NamespaceHandle(shared, owned=False, conf=shared.conf.with_overrides(conf) if conf else None)
        else:
            handle = _NamespaceHandle(storage.open_namespace(uri, conf), owned=True, conf=None)
        return protocol.ok({"ns": self._add(handle)})

    def _ns_close(self, args: dict[str, Any], data: bytes) -> bytes:
        self._close_tree(args, "ns")
        return protocol.ok()

    def _ns_create_log(self, args: dict[str, Any], data: bytes) -> bytes:
        self._ns(args).ns.create_log(_str(args, "name"))
        return protocol.ok()

    def _ns_delete_log(self, args: dict[str, Any], data: bytes) -> bytes:
        self._ns(args).ns.delete_log(_str(args, "name"))
        return protocol.ok()

    def _ns_log_exists(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"exists": self._ns(args).ns.log_exists(_str(args, "name"))})

    def _ns_get_logs(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"logs": self._ns(args).ns.list_logs()})

    # --- log.* ------------------------------------------------------------------------------------
    def _log_open(self, args: dict[str, Any], data: bytes) -> bytes:
        h = _int(args, "ns")
        nh = self._ns(args)
        dlm = nh.ns.open_log(_str(args, "name"), nh.conf)
        return protocol.ok({"log": self._add(_LogHandle(dlm, nh.ns, h), parent=h)})

    def _log_close(self, args: dict[str, Any], data: bytes) -> bytes:
        self._close_tree(args, "log")
        return protocol.ok()

    def _log_last_dlsn(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"dlsn": str(self._log(args).dlm.last_dlsn())})

    def _log_first_dlsn(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"dlsn": str(self._log(args).dlm.first_dlsn())})

    def _log_last_txid(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"txid": self._log(args).dlm.last_txid()})

    def _log_record_count(self, args: dict[str, Any], data: bytes) -> bytes:
        lh = self._log(args)
        start = _dlsn(args, "from") if args.get("from") is not None else DLSN.INITIAL
        return protocol.ok({"count": lh.dlm.record_count(start)})

    def _log_is_eos(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"eos": self._log(args).dlm.is_end_of_stream()})

    def _log_delete(self, args: dict[str, Any], data: bytes) -> bytes:
        lh = self._log(args)
        lh.ns.delete_log(lh.dlm.name)
        return protocol.ok()

    # --- writer.* ---------------------------------------------------------------------------------
    def _writer_open(self, args: dict[str, Any], data: bytes) -> bytes:
        h = _int(args, "log")
        writer = self._log(args).dlm.open_async_writer()
        return protocol.ok({"writer": self._add(_WriterHandle(writer, h), parent=h)})

    def _writer_write(self, args: dict[str, Any], data: bytes) -> bytes:
        wh = self._writer(args)
        records = protocol.decode_records(data)
        with wh.lock:  # batch numbers follow the order in which batches reach the writer
            futures = wh.writer.write_bulk(records)
            batch = wh.next_batch
            wh.next_batch += 1
            wh.batches[batch] = futures
        return protocol.ok({"batch": batch, "count": len(futures)})

    def _writer_await(self, args: dict[str, Any], data: bytes) -> bytes:
        wh = self._writer(args)
        batch = _int(args, "batch")
        with wh.lock:
            futures = wh.batches.pop(batch, None)
            next_batch = wh.next_batch
        if futures is None:
            if 0 < batch < next_batch:
                raise InvalidArgumentError(f"batch {batch} was already awaited")
            raise InvalidArgumentError(f"no batch {batch} on this writer")
        dlsns: list[DLSN] = []
        for f in futures:
            try:
                dlsns.append(f.result())
            except CancelledError:
                raise WriteCancelledError(f"write {len(dlsns)} of batch {batch} was cancelled") from None
        return protocol.ok({"count": len(dlsns)}, protocol.encode_dlsns(dlsns))

    def _writer_flush(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"dlsn": _dlsn_text(self._writer(args).writer.flush().result())})

    def _writer_truncate(self, args: dict[str, Any], data: bytes) -> bytes:
        wh = self._writer(args)
        return protocol.ok({"truncated": bool(wh.writer.truncate(_dlsn(args, "dlsn")).result())})

    def _writer_mark_eos(self, args: dict[str, Any], data: bytes) -> bytes:
        return protocol.ok({"dlsn": str(self._writer(args).writer.mark_end_of_stream())})

    def _writer_close(self, args: dict[str, Any], data: bytes) -> bytes:
        self._close_tree(args, "writer")
        return protocol.ok()

    def _writer_abort(self, args: dict[str, Any], data: bytes) -> bytes:
        self._writer(args)
        with self._lock:
            doomed = self._remove(_int(args, "writer"))
        for handle in doomed:
            assert isinstance(handle, _WriterHandle)
            handle.writer.abort()
        return protocol.ok()

    # --- reader.* ---------------------------------------------------------------------------------
    def _reader_open(self, args: dict[str, Any], data: bytes) -> bytes:
        h = _int(args, "log")
        lh = self._log(args)
        has_dlsn, has_txid = args.get("dlsn") is not None, args.get("txid") is not None
        if has_dlsn == has_txid:
            raise InvalidArgumentError("reader.open needs exactly one of 'dlsn' and 'txid'")
        start: DLSN | int = _dlsn(args, "dlsn") if has_dlsn else _int(args, "txid")
        reader = lh.dlm.open_reader(start)
        slice_s = float(lh.dlm.conf.get("readAheadWaitTime")) / 1000.0
        return protocol.ok({"reader": self._add(_ReaderHandle(reader, h, slice_s), parent=h)})

    def _reader_read(self, args: dict[str, Any], data: bytes) -> bytes:
        rh = self._reader(args)
        n = _int(args, "max")
        wait_ms = _int(args, "waitMs", 0)
        if n < 1:
            raise InvalidArgumentError(f"'max' must be >= 1, got {n}")
        if wait_ms < -1:
            raise InvalidArgumentError(f"'waitMs' must be >= 0, or -1 to wait for a record, got {wait_ms}")
        with rh.lock:
            if rh.closing.is_set():
                raise ReadCancelledError("reader is closed")
            records = rh.reader.read_bulk(n, non_blocking=True)
            if not records and wait_ms != 0:
                deadline = None if wait_ms < 0 else time.monotonic() + wait_ms / 1000.0
                while not records:
                    if rh.closing.is_set():
                        raise ReadCancelledError("reader was closed while waiting")
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    if rh.wait_slice_s >= _POLL_S and (left is None or left >= rh.wait_slice_s):
                        # waits up to readAheadWaitTime, woken at once by a commit of the log
                        records = rh.reader.read_bulk(n, non_blocking=False)
                    else:  # the last slice (or readAheadWaitTime ~0): short polls, so the deadline is kept
                        time.sleep(_POLL_S if left is None else min(_POLL_S, left))
                        records = rh.reader.read_bulk(n, non_blocking=True)
        return protocol.ok({"count": len(records)}, protocol.encode_read(records))

    def _reader_close(self, args: dict[str, Any], data: bytes) -> bytes:
        self._close_tree(args, "reader")
        return protocol.ok()


# --- the server ---------------------------------------------------------------------------------
def is_loopback(address: str) -> bool:
    """True when every address ``address`` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(address, None)
    except (socket.gaierror, UnicodeError):
        return False
    try:
        return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)
    except ValueError:
        return False


def _fast_py4j_bytes() -> None:
    """py4j decodes every ``byte[]`` argument into ``bytes`` one byte at a time in a Python loop (tens
    of milliseconds per MiB); decode it in one call instead. Same input, same output (``bytes``)."""
    from base64 import standard_b64decode

    import py4j.protocol

    if getattr(py4j.protocol.decode_bytearray, "_jvm_shim", False):
        return

    def decode_bytearray(encoded: str) -> bytes:
        return standard_b64decode(encoded.encode("ascii"))

    decode_bytearray._jvm_shim = True  # type: ignore[attr-defined]
    py4j.protocol.decode_bytearray = decode_bytearray


class GatewayServer:
    """A running gateway: py4j's Python server around a :class:`Gateway`. Stop it with :meth:`stop`."""

    def __init__(self, gateway: Gateway, client_server: Any, address: str, port: int, token: str) -> None:
        self.gateway = gateway
        self.address = address
        #: The port the server listens on (the bound one when 0 was asked for).
        self.port = port
        self.token = token
        self._client_server = client_server
        self._stopped = False
        self._stop_lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until a stop was requested (``gateway.shutdown``); True if it was."""
        return self.gateway.shutdown_requested.wait(timeout)

    def stop(self) -> None:
        """Close every handle of the gateway (in-flight calls then fail or return), then stop py4j's
        server and close its connections. Idempotent."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        self.gateway.close()
        server = self._client_server.get_callback_server()
        if server is not None:
            # py4j closes a connection's buffered stream before its socket; a connection thread blocked
            # reading that stream holds the stream's lock, so the close would wait for the client's next
            # command forever. Shutting the sockets down first ends those reads (EOF) at once.
            with server.lock:
                connections = list(server.connections)
            for connection in connections:
                sock = getattr(connection, "socket", None)
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
        # Only the Python server: JavaGateway.shutdown() would also try to connect to a Java gateway
        # (there is none) to send it a shutdown command.
        self._client_server.shutdown_callback_server()

    def __enter__(self) -> GatewayServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    uri: str | None,
    *,
    port: int = 0,
    address: str = DEFAULT_ADDRESS,
    auth_token: str,
    allow_remote: bool = False,
    conf: Config | Mapping[str, object] | None = None,
) -> GatewayServer:
    """Open the gateway (``uri`` may be None: namespaces per call only) and start py4j's Python server
    on ``address:port`` (``port`` 0 = a free port; :attr:`GatewayServer.port` is the bound one) with
    ``auth_token`` required of every connection. Returns once the server accepts connections.

    Raises:
        InvalidArgumentError: an empty token, a bad port, or a non-loopback ``address`` without
            ``allow_remote``.
        DLError: ``uri`` cannot be opened. UnexpectedError: the server cannot listen (port in use).
    """
    from py4j.clientserver import ClientServer, JavaParameters, PythonParameters
    from py4j.java_gateway import server_started
    from py4j.protocol import Py4JNetworkError

    from storage.errors import UnexpectedError

    if not isinstance(auth_token, str) or not auth_token:
        raise InvalidArgumentError("the gateway requires an auth token")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidArgumentError(f"port must be 0..65535, got {port!r}")
    if not allow_remote and not is_loopback(address):
        raise InvalidArgumentError(
            f"refusing to listen on {address!r}: not a loopback address (the gateway serves every log of the "
            "namespace to whoever has the token; allow it explicitly to listen beyond this machine)"
        )
    _fast_py4j_bytes()
    gateway = Gateway(uri, conf)
    listening = threading.Event()
    servers: list[object] = []

    def on_started(sender: object, **_: object) -> None:
        servers.append(sender)
        listening.set()

    signal_id = f"jvm_shim-{id(gateway)}"
    server_started.connect(on_started, unique_id=signal_id)
    try:
        client_server = ClientServer(
            # The gateway never calls Java. Should py4j try anyway (it does on a failed start, to send a
            # shutdown command), port 0 is refused at once: neither the token nor a shutdown reaches
            # whatever else listens on py4j's default port 25333.
            java_parameters=JavaParameters(address="127.0.0.1", port=0, eager_load=False, auto_convert=False),
            python_parameters=PythonParameters(
                address=address,
                port=port,
                auth_token=auth_token,
                daemonize=True,
                daemonize_connections=True,
                eager_load=True,
            ),
            python_server_entry_point=gateway,
        )
    except Py4JNetworkError as e:
        gateway.close()
        raise UnexpectedError(f"the gateway cannot listen on {address}:{port}: {e.cause or e}") from e
    except BaseException:
        gateway.close()
        raise
    try:
        callback_server = client_server.get_callback_server()
        deadline = time.monotonic() + 10.0
        while callback_server not in servers and time.monotonic() < deadline:  # bound, but not yet listening
            listening.wait(0.05)
            listening.clear()
    finally:
        server_started.disconnect(on_started, unique_id=signal_id)
    bound = int(callback_server.get_listening_port())
    listen_address = str(callback_server.get_listening_address())
    log.info("gateway listening on %s:%d (namespace %s)", listen_address, bound, uri or "per call")
    return GatewayServer(gateway, client_server, listen_address, bound, auth_token)


# --- the process --------------------------------------------------------------------------------
def _watch_parent(stop: threading.Event) -> None:
    """Read stdin until EOF (the parent died or closed the pipe), then ask the gateway to stop."""
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    log.info("stdin closed: the parent is gone, stopping")
    stop.set()


def _exit_later(seconds: float) -> None:
    def fire() -> None:
        time.sleep(seconds)
        log.error("shutdown did not finish in %.0f s: exiting anyway", seconds)
        os._exit(1)

    threading.Thread(target=fire, name="gateway-shutdown-watchdog", daemon=True).start()


def run(
    uri: str | None,
    *,
    port: int = 0,
    address: str = DEFAULT_ADDRESS,
    allow_remote: bool = False,
    parent_watch: bool = False,
    conf: Config | Mapping[str, object] | None = None,
    out: Callable[[str], None] | None = None,
) -> int:
    """The gateway process: serve until ``gateway.shutdown``, SIGTERM/SIGINT or (``parent_watch``)
    EOF on stdin, then close everything; returns the exit code (0).

    The auth token is ``$DLOG_GATEWAY_TOKEN`` when set, else a fresh ``secrets.token_hex(32)``. Once the
    server listens, exactly one line goes to stdout (through ``out``, default ``print``), flushed::

        GATEWAY port=<port> token=<token>     (token=env when it came from the environment)

    Raises:
        DLError: as :func:`serve` (before anything is printed).
    """
    env_token = os.environ.get(TOKEN_ENV, "")
    token = env_token or secrets.token_hex(32)
    py4j_log = logging.getLogger("py4j")
    if py4j_log.level == logging.NOTSET and logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # py4j logs every call at INFO and expected conditions (a refused token, a port in use: reported
        # here anyway) as ERROR with tracebacks; it speaks only when debugging
        py4j_log.setLevel(logging.CRITICAL)
    server = serve(uri, port=port, address=address, auth_token=token, allow_remote=allow_remote, conf=conf)
    stop = server.gateway.shutdown_requested
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    with contextlib.ExitStack() as cleanup:
        cleanup.callback(server.stop)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, on_signal)
            cleanup.callback(lambda: [signal.signal(s, h) for s, h in previous.items()])
        if parent_watch:
            threading.Thread(target=_watch_parent, args=(stop,), name="gateway-parent-watch", daemon=True).start()
        line = f"GATEWAY port={server.port} token={'env' if env_token else token}"
        if out is None:
            print(line, flush=True)
        else:
            out(line)
        while not stop.wait(1.0):
            pass
        log.info("stopping the gateway")
        _exit_later(SHUTDOWN_GRACE_S)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m jvm_shim``: see :func:`run`; ``--help`` for the options."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m jvm_shim",
        description="Serve DistributedLog's storage API to Java programs over py4j (the jvm_shim gateway). "
        f"Prints 'GATEWAY port=<port> token=<token>' once listening; the token is ${TOKEN_ENV} when set "
        "(then printed as token=env), else generated.",
    )
    parser.add_argument("--uri", "-u", default=os.environ.get("DLOG_URI"), help="namespace URI (default $DLOG_URI)")
    parser.add_argument("--conf", "-c", metavar="FILE", help="DistributedLog properties file for the namespace")
    parser.add_argument("--port", "-p", type=int, default=0, help="port to listen on (default 0: a free one)")
    parser.add_argument("--address", default=DEFAULT_ADDRESS, help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--allow-remote", action="store_true", help="allow a non-loopback --address (the token is sent in clear)"
    )
    parser.add_argument(
        "--parent-watch", action="store_true", help="stop when stdin reaches EOF (the parent process died)"
    )
    parser.add_argument("--verbose", "-v", action="count", default=0, help="log more to stderr (-v info, -vv debug)")
    ns = parser.parse_args(argv)
    setup_logging(ns.verbose)
    try:
        conf = Config.load(ns.conf) if ns.conf else None
        return run(
            ns.uri,
            port=ns.port,
            address=ns.address,
            allow_remote=ns.allow_remote,
            parent_watch=ns.parent_watch,
            conf=conf,
        )
    except DLError as e:
        print(f"jvm_shim: error: {str(e) or type(e).__name__}", file=sys.stderr)
        return 1


def setup_logging(verbose: int) -> None:
    """Log to stderr (stdout carries only the GATEWAY line): warnings by default."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("jvm_shim: %(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbose < 2:  # kazoo reports every reconnect attempt at warning level with tracebacks
        logging.getLogger("kazoo").setLevel(logging.ERROR)
