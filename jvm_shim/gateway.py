"""The py4j gateway: serves the storage API to the shim's Java classes (wire spec: :mod:`jvm_shim.protocol`).

* :class:`Gateway` implements every operation of the protocol over plain ``storage`` objects
  (namespaces, log managers, async writers, readers) held in tables keyed by integer handles. It is
  the py4j entry point (it declares the Java interface ``org.apache.distributedlog.shim.PythonGateway``)
  and can be driven in-process by calling :meth:`Gateway.call` directly.
* :func:`jvm_shim.server.serve` starts py4j's Python server (``ClientServer`` with the gateway as
  ``python_server_entry_point``) on loopback with an auth token; the Python side never calls Java, so no JVM needs to
  be running. The handle tables are in :mod:`jvm_shim._handles`.
* :func:`jvm_shim.process.run` is the process (``python -m jvm_shim``, ``dlog gateway``): it prints one line
  ``GATEWAY port=<port> token=<token|env>`` to stdout and serves until ``gateway.shutdown``,
  SIGTERM/SIGINT or, with ``parent_watch``, EOF on stdin; then it closes every handle and stops.

Imports go one way: protocol and handles, then this module, then the server, then the process.

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

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError
from typing import Any

import storage
from jvm_shim import protocol
from jvm_shim._handles import (
    _KIND,
    _NAME,
    HandleTable,
    _conf,
    _dlsn,
    _dlsn_text,
    _int,
    _LogHandle,
    _NamespaceHandle,
    _ReaderHandle,
    _same_namespace,
    _str,
    _WriterHandle,
)
from storage import DLSN, Config, LogRecordWithDLSN, Namespace
from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    ReadCancelledError,
    WriteCancelledError,
)

log = logging.getLogger(__name__)

#: Poll interval of a read's last wait slice (shorter than readAheadWaitTime, to keep waitMs).
_POLL_S = 0.01

_Handler = Callable[[dict[str, Any], bytes], bytes]


# --- the gateway --------------------------------------------------------------------------------
class Gateway(HandleTable):
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
        #: The port of the data channel serving this gateway (:mod:`jvm_shim.channel`), advertised by
        #: ``gateway.ping``; set by the server that starts one.
        self.data_port: int | None = None
        super().__init__()
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
            "namespace.advanceSubscriber": self._ns_advance_subscriber,
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
        result: dict[str, Any] = {"version": storage.__version__}
        if self.data_port is not None:
            result["dataPort"] = self.data_port
        return protocol.ok(result)

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

    def _ns_advance_subscriber(self, args: dict[str, Any], data: bytes) -> bytes:
        positions = args.get("positions")
        if not isinstance(positions, dict) or not positions:
            raise InvalidArgumentError(
                f"argument 'positions' must be a non-empty object {{log: dlsn}}, got {positions!r}"
            )
        targets = {str(name): _dlsn(positions, str(name)) for name in positions}
        moved = self._ns(args).ns.subscriber_positions(_str(args, "subscriber")).advance(targets)
        return protocol.ok({"moved": sorted(moved)})

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
        max_bytes = None if args.get("maxBytes") is None else _int(args, "maxBytes")
        if n < 1:
            raise InvalidArgumentError(f"'max' must be >= 1, got {n}")
        if wait_ms < -1:
            raise InvalidArgumentError(f"'waitMs' must be >= 0, or -1 to wait for a record, got {wait_ms}")
        if max_bytes is not None and max_bytes < 1:
            raise InvalidArgumentError(f"'maxBytes' must be >= 1, got {max_bytes}")
        with rh.lock:
            if rh.closing.is_set():
                raise ReadCancelledError("reader is closed")
            if rh.pending:  # what a previous read cut off comes first (and alone: it is "what is there")
                records, rh.pending = rh.pending[:n], rh.pending[n:]
                return self._read_result(rh, records, max_bytes)
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
            return self._read_result(rh, records, max_bytes)

    @staticmethod
    def _read_result(rh: _ReaderHandle, records: list[LogRecordWithDLSN], max_bytes: int | None) -> bytes:
        """The response of a read of ``records``, cut after the record whose payload reaches ``max_bytes``
        in all (the rest goes back to ``rh.pending``, ahead of what is there); caller holds ``rh.lock``."""
        if max_bytes is not None:
            total = 0
            for i, rec in enumerate(records):
                total += len(rec.payload)
                if total >= max_bytes:
                    if i + 1 < len(records):
                        rh.pending[:0] = records[i + 1 :]
                        records = records[: i + 1]
                    break
        return protocol.ok({"count": len(records)}, protocol.encode_read(records))

    def _reader_close(self, args: dict[str, Any], data: bytes) -> bytes:
        self._close_tree(args, "reader")
        return protocol.ok()


__all__ = ["Gateway"]
