"""The wire protocol between the Java classes of the shim and the Python gateway.

Topology: the gateway is a Python process running py4j's Python server (``ClientServer`` with a
``python_server_entry_point``), bound to 127.0.0.1 and requiring py4j's auth token. The Java side
connects with ``py4j.ClientServer`` (same port and token) and obtains the entry point as a proxy of
the Java interface ``org.apache.distributedlog.shim.PythonGateway``::

    public interface PythonGateway {
        byte[] call(String op, String args, byte[] data);
    }

Every call is ``call(op, args, data)``: ``op`` names the operation (table below), ``args`` is a
JSON object (UTF-8 text), ``data`` the binary part (records; an empty array when unused). py4j's
pinned-thread model gives every Java thread its own connection and its own Python thread, so
calls of different Java threads run concurrently; one handle is used by one Java thread at a time
(the Java classes serialize their own calls).

Response (``byte[]``)::

    byte 0      status: 0 = ok, 1 = error
    ok:         u32 n (big-endian), n bytes of UTF-8 JSON (the result object), then the binary
                result (records or DLSNs) to the end
    error:      UTF-8 JSON {"class": "<storage.errors class name>", "code": <DistributedLog
                status code or null>, "retriable": <bool>, "message": "<text>",
                "details": {...}}     ("details" optional: present only when the error carries any)

``details`` holds what an error class knows beyond its message, with only the known, non-null fields:
``current_owner`` (str) of ``OwnershipAcquireFailedError``; ``txid`` and ``last_txid`` (int) of
``TransactionIdOutOfOrderError``. Readers ignore fields (and a ``details`` object) they do not know,
so older peers keep working either way.

The Java side maps ``class`` to its exception (``OwnershipAcquireFailedError`` ->
``org.apache.distributedlog.exceptions.OwnershipAcquireFailedException`` and so on; unknown classes
to the nearest parent's, ``DLError`` -> ``DLException``) with the message, code and retriable flag.

Binary layouts (all integers big-endian, as Java's ``DataOutputStream``/``ByteBuffer``):

* records to write (``writer.write``): repeated ``i64 txid, i32 n, n bytes payload``;
* DLSNs (``writer.await``): repeated ``i64 lssn, i64 entry_id, i64 slot_id``, one per record, in
  the order written;
* records read (``reader.read``): repeated ``i64 lssn, i64 entry_id, i64 slot_id, i64 txid,
  i64 sequence_id, i32 n, n bytes payload``.

DLSNs in JSON are the text form ``"lssn,entry,slot"``.

Operations (``args`` fields; result fields; ``-`` none). Handles are opaque integers of the
gateway, valid until closed or until the gateway stops:

================================  ===============================  ================================
op                                args                             result
================================  ===============================  ================================
``gateway.ping``                  -                                ``{"version": str, "dataPort":
                                                                   int}`` (``dataPort`` when a data
                                                                   channel serves the gateway:
                                                                   :mod:`jvm_shim.channel`)
``gateway.shutdown``              -                                - (the gateway exits afterwards)
``namespace.open``                ``uri``, ``conf`` (object, opt)  ``{"ns": handle}``
``namespace.close``               ``ns``                           -
``namespace.createLog``           ``ns``, ``name``                 -
``namespace.deleteLog``           ``ns``, ``name``                 -
``namespace.logExists``           ``ns``, ``name``                 ``{"exists": bool}``
``namespace.getLogs``             ``ns``                           ``{"logs": [str]}``
``namespace.advanceSubscriber``   ``ns``, ``subscriber``,          ``{"moved": [str]}`` (the logs
                                  ``positions`` (``{log: DLSN}``)  whose position moved)
``log.open``                      ``ns``, ``name``                 ``{"log": handle}``
``log.close``                     ``log``                          -
``log.lastDLSN``                  ``log``                          ``{"dlsn": str}``
``log.firstDLSN``                 ``log``                          ``{"dlsn": str}``
``log.lastTxId``                  ``log``                          ``{"txid": int}``
``log.recordCount``               ``log``, ``from`` (DLSN, opt)    ``{"count": int}``
``log.isEndOfStreamMarked``       ``log``                          ``{"eos": bool}``
``log.delete``                    ``log``                          -
``writer.open``                   ``log``                          ``{"writer": handle}``
``writer.write``                  ``writer``; data: records        ``{"batch": int, "count": int}``
``writer.await``                  ``writer``, ``batch``            ``{"count": int}``; data: DLSNs
``writer.flush``                  ``writer``                       ``{"dlsn": str|null}``
``writer.truncate``               ``writer``, ``dlsn``             ``{"truncated": bool}``
``writer.markEndOfStream``        ``writer``                       ``{"dlsn": str}``
``writer.close``                  ``writer``                       -
``writer.abort``                  ``writer``                       -
``reader.open``                   ``log``, ``dlsn`` or ``txid``    ``{"reader": handle}``
``reader.read``                   ``reader``, ``max``,             ``{"count": int}``; data: records
                                  ``waitMs`` (0: what is there;
                                  -1: until one record; n > 0:
                                  up to n ms for one record),
                                  ``maxBytes`` (opt: stop adding
                                  records once their payloads
                                  reach this many bytes; at least
                                  one record is returned)
``reader.close``                  ``reader``                       -
================================  ===============================  ================================

``namespace.advanceSubscriber`` moves the subscriber ``subscriber`` (a query's ``subscriberId``) forward
to ``positions[log]`` in each log's subscriptions store, as the Spark source records its committed positions
(a lower or equal position changes nothing; :meth:`storage.Namespace.subscriber_positions`); a log that does
not exist fails the call with ``LogNotFoundError`` after the others were advanced.

``writer.write`` queues the records on the log's async writer and returns at once with a batch
number (batches of one writer are numbered 1, 2, ... in call order); ``writer.await`` blocks until
every record of that batch is durable and returns their DLSNs, or fails with the first record's
error. A Java writer therefore pipelines: one thread submits batches in order, another awaits
them in order, and no round trip is made per record.

``writer.await`` waits until the batch is *transmitted* (written to the segment store and
acknowledged); it does not transmit anything itself. Records stay in the writer's output buffer until
the buffer fills (``writerOutputBufferSize``), the periodic flush runs
(``periodicFlushFrequencyMilliSeconds``), ``enableImmediateFlush`` is set, or a ``writer.flush`` /
``writer.close`` is called: with none of those, an await of the last batch blocks until a flush, so a
writer that waits for its last records must call ``writer.flush`` (or close) first.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from storage.errors import DLError, InvalidArgumentError
from storage.formats.dlsn import DLSN
from storage.formats.record import LogRecord, LogRecordWithDLSN

#: The Java interface the gateway's entry point implements.
JAVA_INTERFACE = "org.apache.distributedlog.shim.PythonGateway"

OK, ERROR = 0, 1
_U32 = struct.Struct(">I")
_WRITE_HEAD = struct.Struct(">qi")  # txid, payload length
_DLSN = struct.Struct(">qqq")
_READ_HEAD = struct.Struct(">qqqqqi")  # lssn, entry, slot, txid, sequence id, payload length


def ok(result: dict[str, Any] | None = None, data: bytes = b"") -> bytes:
    """An ok response with the JSON ``result`` and the binary ``data``."""
    body = json.dumps(result or {}, separators=(",", ":")).encode()
    return bytes([OK]) + _U32.pack(len(body)) + body + data


def error(exc: BaseException) -> bytes:
    """An error response describing ``exc`` (a :class:`DLError`, or any other exception as
    ``UnexpectedError``)."""
    doc: dict[str, Any]
    if isinstance(exc, DLError):
        doc = {"class": type(exc).__name__, "code": exc.code, "retriable": exc.retriable, "message": str(exc)}
        details = error_details(exc)
        if details:
            doc["details"] = details
    else:
        doc = {"class": "UnexpectedError", "code": None, "retriable": False, "message": f"{type(exc).__name__}: {exc}"}
    return bytes([ERROR]) + json.dumps(doc).encode()


#: The attributes of error classes carried in an error response's ``details`` (when not None).
DETAIL_FIELDS = ("current_owner", "txid", "last_txid")


def error_details(exc: DLError) -> dict[str, Any]:
    """``exc``'s known detail attributes that are set (see :data:`DETAIL_FIELDS`)."""
    out: dict[str, Any] = {}
    for name in DETAIL_FIELDS:
        value = getattr(exc, name, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            out[name] = value
    return out


def parse_response(raw: bytes) -> tuple[dict[str, Any], bytes]:
    """``(result, data)`` of an ok response; an error response raises its error class.

    Raises:
        DLError: the (subclass named by the) error response.
        InvalidArgumentError: a malformed response.
    """
    from storage import errors

    if not raw:
        raise InvalidArgumentError("empty gateway response")
    if raw[0] == ERROR:
        doc = json.loads(bytes(raw[1:]).decode())
        cls = getattr(errors, str(doc.get("class")), None)
        if not (isinstance(cls, type) and issubclass(cls, DLError)):
            cls = errors.UnexpectedError
        exc = cls(str(doc.get("message", "")))
        details = doc.get("details")
        if isinstance(details, dict):
            for name in DETAIL_FIELDS:
                if name in details and hasattr(exc, name):
                    setattr(exc, name, details[name])
        raise exc
    if raw[0] != OK or len(raw) < 5:
        raise InvalidArgumentError(f"malformed gateway response (status {raw[0]})")
    (n,) = _U32.unpack_from(raw, 1)
    return json.loads(bytes(raw[5 : 5 + n]).decode()), bytes(raw[5 + n :])


def encode_records(records: Iterable[LogRecord]) -> bytes:
    """Records to write: ``i64 txid, i32 n, payload`` each."""
    parts: list[bytes] = []
    for r in records:
        parts.append(_WRITE_HEAD.pack(r.txid, len(r.payload)))
        parts.append(r.payload)
    return b"".join(parts)


def decode_records(data: bytes | bytearray | memoryview) -> list[LogRecord]:
    """The records of a ``writer.write`` data part.

    Raises:
        InvalidArgumentError: truncated or malformed data.
    """
    buf = data if isinstance(data, bytes) else bytes(data)  # slicing bytes copies once, no memoryview
    out: list[LogRecord] = []
    append = out.append
    unpack_from = _WRITE_HEAD.unpack_from
    new = LogRecord.__new__
    size = _WRITE_HEAD.size
    total = len(buf)
    pos = 0
    try:
        while pos < total:
            txid, n = unpack_from(buf, pos)
            start = pos + size
            pos = start + n
            if n < 0 or pos > total:
                raise InvalidArgumentError(f"record payload of {n} bytes at byte {start} runs past the data")
            # txid is an i64 and the payload bytes by construction: what LogRecord() checks holds already
            rec = new(LogRecord)
            rec.txid = txid
            rec.payload = buf[start:pos]
            rec.flags = 0
            rec.position_within_segment = 0
            append(rec)
    except struct.error:
        raise InvalidArgumentError(f"truncated record header at byte {pos}") from None
    return out


def encode_dlsns(dlsns: Sequence[DLSN]) -> bytes:
    """DLSNs: ``i64 lssn, i64 entry_id, i64 slot_id`` each."""
    return b"".join(_DLSN.pack(d.lssn, d.entry_id, d.slot_id) for d in dlsns)


def decode_dlsns(data: bytes) -> list[DLSN]:
    """The DLSNs of a ``writer.await`` data part."""
    return [DLSN(*_DLSN.unpack_from(data, i)) for i in range(0, len(data), _DLSN.size)]


def encode_read(records: Iterable[LogRecordWithDLSN]) -> bytes:
    """Records read: ``i64 lssn, entry, slot, txid, sequence id, i32 n, payload`` each."""
    parts: list[bytes] = []
    for r in records:
        d = r.dlsn
        parts.append(_READ_HEAD.pack(d.lssn, d.entry_id, d.slot_id, r.txid, r.sequence_id, len(r.payload)))
        parts.append(r.payload)
    return b"".join(parts)


def decode_read(data: bytes) -> Iterator[tuple[DLSN, int, int, bytes]]:
    """``(dlsn, txid, sequence id, payload)`` of each record of a ``reader.read`` data part."""
    pos = 0
    size = _READ_HEAD.size
    while pos < len(data):
        lssn, entry, slot, txid, seq, n = _READ_HEAD.unpack_from(data, pos)
        pos += size
        yield DLSN(lssn, entry, slot), txid, seq, bytes(data[pos : pos + n])
        pos += n
