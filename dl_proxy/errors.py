"""The write proxy's status codes as :mod:`storage.errors` classes, both ways.

Every error a :class:`dl_proxy.ProxyClient` raises or puts in a future is a :class:`storage.errors.DLError`
subclass with DistributedLog's status ``code`` and ``retriable`` ("may trying again later succeed?").
Status codes the storage core never raises get a class here (``StreamUnavailableError``,
``ServiceUnavailableError``, ...); they subclass :class:`~storage.errors.DLError` (or the nearest storage class),
so ``except storage.errors.DLError`` catches every one of them.

:func:`error_for` turns a response's status code into an exception; :func:`status_for` goes the other way for
the proxy's service (an exception's ``code`` when it is one of the proto's :class:`StatusCode` values, else
``UNEXPECTED``). :func:`disposition` says what the client does with a status: succeed, redirect, retry
(elsewhere, after a backoff, with the same sequence numbers) or fail the write.
"""

from __future__ import annotations

import enum

from dl_proxy.proto import distributedlog_pb2 as pb
from storage.errors import (
    AlreadyClosedError,
    AlreadyTruncatedTransactionError,
    CorruptedEntryError,
    DLError,
    DLInterruptedError,
    EndOfStreamError,
    IllegalStateError,
    InvalidEnvelopedEntryError,
    InvalidStreamNameError,
    LockingError,
    LogEmptyError,
    LogExistsError,
    LogNotFoundError,
    LogReadError,
    LogRecordTooLongError,
    LogSegmentIsTruncatedError,
    LogSegmentNotFoundError,
    MetadataConnectionError,
    MetadataError,
    OverCapacityError,
    OwnershipAcquireFailedError,
    ReadCancelledError,
    StreamNotReadyError,
    TransactionIdOutOfOrderError,
    TransmitError,
    UnexpectedError,
    UnsupportedMetadataVersionError,
    WriteCancelledError,
    WriteError,
)

__all__ = [
    "BadRequestError",
    "ChecksumFailedError",
    "ClientClosedError",
    "Disposition",
    "EndOfLogSegmentError",
    "FlushTimeoutError",
    "InternalServerError",
    "NotImplementedByProxyError",
    "OutOfOrderSequenceError",
    "ProxyClosedError",
    "RegionUnavailableError",
    "RequestDeniedError",
    "RetryableReadError",
    "ServiceUnavailableError",
    "StreamUnavailableError",
    "TooManyStreamsError",
    "WriteTimeoutError",
    "ZooKeeperError",
    "disposition",
    "error_for",
    "status_for",
]


# --- status codes the storage core has no class for -------------------------------------------------------------
class ClientClosedError(AlreadyClosedError):
    """The client was closed (CLIENT_CLOSED)."""

    code = 301


class BadRequestError(DLError):
    """The proxy refused a malformed request (BAD_REQUEST)."""

    code = 400


class RequestDeniedError(DLError):
    """The proxy denied the request (REQUEST_DENIED): a bad or missing auth token, or an idempotent producer's
    sequence older than the proxy's dedup window (that write was stored once; its DLSN is no longer known)."""

    code = 403


class InternalServerError(DLError):
    """The proxy failed unexpectedly while serving the request (INTERNAL_SERVER_ERROR)."""

    code = 500


class NotImplementedByProxyError(DLError):
    """The proxy does not implement the request (NOT_IMPLEMENTED)."""

    code = 501


class ProxyClosedError(AlreadyClosedError):
    """The proxy closed the stream's writer while serving the request (ALREADY_CLOSED); another proxy may
    take the stream over."""

    code = 502
    retriable = True


class ServiceUnavailableError(DLError):
    """No proxy can serve the request now (SERVICE_UNAVAILABLE): the proxy is draining, shutting down or over
    its hard service limit, or no proxy is known at all."""

    code = 503
    retriable = True


class ZooKeeperError(MetadataConnectionError):
    """The proxy's ZooKeeper failed while serving the request (ZOOKEEPER_ERROR)."""

    code = 505


class FlushTimeoutError(DLError):
    """The proxy's writer timed out flushing (FLUSH_TIMEOUT)."""

    code = 508
    retriable = True


class StreamUnavailableError(DLError):
    """The stream is no longer owned by the proxy that was asked (STREAM_UNAVAILABLE): it lost the lock or
    released the stream; look the owner up again."""

    code = 515
    retriable = True


class RegionUnavailableError(DLError):
    """The region is unavailable (REGION_UNAVAILABLE)."""

    code = 519
    retriable = True


class ChecksumFailedError(CorruptedEntryError):
    """The request's CRC32 does not match its payloads (CHECKSUM_FAILED): damaged on the way."""

    code = 523


class TooManyStreamsError(OverCapacityError):
    """The proxy owns as many streams as it may (TOO_MANY_STREAMS): another proxy should take this one."""

    code = 524


class EndOfLogSegmentError(DLError):
    """End of a log segment reached (END_OF_LOG_SEGMENT)."""

    code = 526


class OutOfOrderSequenceError(DLError):
    """An idempotent producer's sequence skipped ahead of what the proxy stored (OUT_OF_ORDER_SEQUENCE);
    ``expected_sequence`` is the next one the proxy will store. The client resends in order by itself; this
    reaches a caller only when that cannot be done."""

    code = 530
    retriable = True

    def __init__(self, message: str = "", *, expected_sequence: int | None = None) -> None:
        super().__init__(message)
        self.expected_sequence = expected_sequence


class RetryableReadError(LogReadError):
    """A read that may succeed if tried again (RETRYABLE_READ)."""

    code = 1000
    retriable = True


class WriteTimeoutError(DLError):
    """A write was not acknowledged within the client's ``timeout_s``: its outcome is unknown (it may be
    stored, once). Retriable: the client keeps its records in order and the idempotent producer never stores
    a record twice, but a NEW write of the same payload is a new record."""

    code = None
    retriable = True


# --- the mapping --------------------------------------------------------------------------------------------------
_CLASSES: dict[int, type[DLError]] = {
    pb.CLIENT_CLOSED: ClientClosedError,
    pb.FOUND: OwnershipAcquireFailedError,
    pb.BAD_REQUEST: BadRequestError,
    pb.REQUEST_DENIED: RequestDeniedError,
    pb.TOO_LARGE_RECORD: LogRecordTooLongError,
    pb.INTERNAL_SERVER_ERROR: InternalServerError,
    pb.NOT_IMPLEMENTED: NotImplementedByProxyError,
    pb.ALREADY_CLOSED: ProxyClosedError,
    pb.SERVICE_UNAVAILABLE: ServiceUnavailableError,
    pb.LOCKING_EXCEPTION: LockingError,
    pb.ZOOKEEPER_ERROR: ZooKeeperError,
    pb.METADATA_EXCEPTION: MetadataError,
    pb.BK_TRANSMIT_ERROR: TransmitError,
    pb.FLUSH_TIMEOUT: FlushTimeoutError,
    pb.LOG_EMPTY: LogEmptyError,
    pb.LOG_NOT_FOUND: LogNotFoundError,
    pb.TRUNCATED_TRANSACTION: AlreadyTruncatedTransactionError,
    pb.END_OF_STREAM: EndOfStreamError,
    pb.TRANSACTION_OUT_OF_ORDER: TransactionIdOutOfOrderError,
    pb.WRITE_EXCEPTION: WriteError,
    pb.STREAM_UNAVAILABLE: StreamUnavailableError,
    pb.WRITE_CANCELLED_EXCEPTION: WriteCancelledError,
    pb.OVER_CAPACITY: OverCapacityError,
    pb.STREAM_NOT_READY: StreamNotReadyError,
    pb.REGION_UNAVAILABLE: RegionUnavailableError,
    pb.INVALID_ENVELOPED_ENTRY: InvalidEnvelopedEntryError,
    pb.UNSUPPORTED_METADATA_VERSION: UnsupportedMetadataVersionError,
    pb.LOG_EXISTS: LogExistsError,
    pb.CHECKSUM_FAILED: ChecksumFailedError,
    pb.TOO_MANY_STREAMS: TooManyStreamsError,
    pb.LOG_SEGMENT_NOT_FOUND: LogSegmentNotFoundError,
    pb.END_OF_LOG_SEGMENT: EndOfLogSegmentError,
    pb.LOG_SEGMENT_IS_TRUNCATED: LogSegmentIsTruncatedError,
    pb.OUT_OF_ORDER_SEQUENCE: OutOfOrderSequenceError,
    pb.UNEXPECTED: UnexpectedError,
    pb.INTERRUPTED: DLInterruptedError,
    pb.INVALID_STREAM_NAME: InvalidStreamNameError,
    pb.ILLEGAL_STATE: IllegalStateError,
    pb.RETRYABLE_READ: RetryableReadError,
    pb.LOG_READ_ERROR: LogReadError,
    pb.READ_CANCELLED_EXCEPTION: ReadCancelledError,
}


def status_name(code: int) -> str:
    """The proto's name of a status code (``"STREAM_UNAVAILABLE"``), or ``"STATUS_<n>"`` for an unknown one."""
    try:
        return str(pb.StatusCode.Name(code))  # type: ignore[arg-type]
    except ValueError:
        return f"STATUS_{code}"


def error_for(code: int, message: str = "", *, location: str = "", expected_sequence: int | None = None) -> DLError:
    """The exception for a response's status ``code`` (never raises; an unknown code gives
    :class:`~storage.errors.UnexpectedError`). ``location`` (FOUND) becomes ``current_owner``;
    ``expected_sequence`` (OUT_OF_ORDER_SEQUENCE) is kept on the error."""
    text = f"{status_name(code)} ({code})" + (f": {message}" if message else "")
    cls = _CLASSES.get(code, UnexpectedError)
    if cls is OwnershipAcquireFailedError:
        return OwnershipAcquireFailedError(text, current_owner=location or None)
    if cls is OutOfOrderSequenceError:
        return OutOfOrderSequenceError(text, expected_sequence=expected_sequence)
    return cls(text)


def status_for(exc: BaseException) -> int:
    """The status code for an exception: its ``code`` when that is a proto status, else UNEXPECTED (600)."""
    code = getattr(exc, "code", None)
    if isinstance(code, int) and not isinstance(code, bool) and code in pb.StatusCode.values():
        return code
    return pb.UNEXPECTED


class Disposition(enum.Enum):
    """What the client does with a response's status."""

    #: acknowledged
    SUCCESS = "success"
    #: FOUND: send to the owner named in the response
    REDIRECT = "redirect"
    #: idempotent producer: resend in sequence order
    RESEQUENCE = "resequence"
    #: the stream's owner is gone or this proxy cannot take it: forget the owner, try another proxy
    REROUTE = "reroute"
    #: transient on the owner: back off and try it again (same sequence numbers)
    RETRY = "retry"
    #: the write cannot succeed as sent: fail its future
    FAIL = "fail"


_REROUTE = frozenset(
    {
        pb.STREAM_UNAVAILABLE,
        pb.SERVICE_UNAVAILABLE,
        pb.TOO_MANY_STREAMS,
        pb.ALREADY_CLOSED,
        pb.LOCKING_EXCEPTION,
        pb.REGION_UNAVAILABLE,
    }
)
_RETRY = frozenset(
    {
        pb.STREAM_NOT_READY,
        pb.OVER_CAPACITY,
        pb.BK_TRANSMIT_ERROR,
        pb.FLUSH_TIMEOUT,
        pb.WRITE_CANCELLED_EXCEPTION,
        pb.ZOOKEEPER_ERROR,
        pb.WRITE_EXCEPTION,
        pb.INTERRUPTED,
    }
)


def disposition(code: int) -> Disposition:
    """How the client treats status ``code`` on a write (``0``, unset, counts as SUCCESS).

    Retrying a write whose outcome is unknown (BK_TRANSMIT_ERROR, WRITE_EXCEPTION, a lost reply) is safe only
    because the idempotent producer resends the SAME sequence numbers: the proxy answers a stored one as a
    duplicate with its original DLSN.
    """
    if code in (pb.SUCCESS, pb.STATUS_CODE_UNSPECIFIED):
        return Disposition.SUCCESS
    if code == pb.FOUND:
        return Disposition.REDIRECT
    if code == pb.OUT_OF_ORDER_SEQUENCE:
        return Disposition.RESEQUENCE
    if code in _REROUTE:
        return Disposition.REROUTE
    if code in _RETRY:
        return Disposition.RETRY
    return Disposition.FAIL
