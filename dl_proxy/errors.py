"""The write proxy's status codes as :mod:`storage.errors` classes, both ways.

Every error a :class:`dl_proxy.ProxyClient` raises or puts in a future is a :class:`storage.errors.DLError`
subclass with DistributedLog's status ``code`` and ``retriable`` ("may trying again later succeed?").
The status codes only the proxy answers have their classes in :mod:`storage.errors` too
(``StreamUnavailableError``, ``ServiceUnavailableError``, ``OutOfOrderSequenceError``, ``WriteTimeoutError``,
...), re-exported here: every public error is a :mod:`storage.errors` class.

:func:`error_for` turns a response's status code into an exception; :func:`status_for` goes the other way for
the proxy's service (an exception's ``code`` when it is one of the proto's :class:`StatusCode` values, else
``UNEXPECTED``). :func:`disposition` says what the client does with a status: succeed, redirect, retry
(elsewhere, after a backoff, with the same sequence numbers) or fail the write.
"""

from __future__ import annotations

import enum

from dl_proxy.proto import distributedlog_pb2 as pb
from storage.errors import (
    AlreadyTruncatedTransactionError,
    BadRequestError,
    ChecksumFailedError,
    ClientClosedError,
    DLError,
    DLInterruptedError,
    EndOfLogSegmentError,
    EndOfStreamError,
    FlushTimeoutError,
    IllegalStateError,
    InternalServerError,
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
    MetadataError,
    NoProxyReachableError,
    NotImplementedByProxyError,
    OperationTimeoutError,
    OutOfOrderSequenceError,
    OverCapacityError,
    OwnershipAcquireFailedError,
    ProducerFencedError,
    ProducerStateLostError,
    ProxyClosedError,
    ReadCancelledError,
    RecordSetSplitError,
    RegionUnavailableError,
    RequestDeniedError,
    RetryableReadError,
    SequenceMismatchError,
    ServiceUnavailableError,
    StreamNotReadyError,
    StreamUnavailableError,
    TooManyStreamsError,
    TransactionIdOutOfOrderError,
    TransmitError,
    UnexpectedError,
    UnsupportedMetadataVersionError,
    WriteCancelledError,
    WriteError,
    WriteTimeoutError,
    ZooKeeperError,
)

__all__ = [
    "BadRequestError",
    "ChecksumFailedError",
    "ClientClosedError",
    "Disposition",
    "EndOfLogSegmentError",
    "FlushTimeoutError",
    "InternalServerError",
    "NoProxyReachableError",
    "NotImplementedByProxyError",
    "OperationTimeoutError",
    "OutOfOrderSequenceError",
    "ProducerFencedError",
    "ProducerStateLostError",
    "ProxyClosedError",
    "RecordSetSplitError",
    "RegionUnavailableError",
    "RequestDeniedError",
    "RetryableReadError",
    "SequenceMismatchError",
    "ServiceUnavailableError",
    "StreamUnavailableError",
    "TooManyStreamsError",
    "WriteTimeoutError",
    "ZooKeeperError",
    "disposition",
    "error_for",
    "status_for",
]


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
    pb.RECORD_SET_SPLIT: RecordSetSplitError,
    pb.PRODUCER_FENCED: ProducerFencedError,
    pb.PRODUCER_STATE_LOST: ProducerStateLostError,
    pb.SEQUENCE_MISMATCH: SequenceMismatchError,
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


def error_for(
    code: int,
    message: str = "",
    *,
    location: str = "",
    expected_sequence: int | None = None,
    epoch: int | None = None,
    outcome_unknown: bool | None = None,
) -> DLError:
    """The exception for a response's status ``code`` (never raises; an unknown code gives
    :class:`~storage.errors.UnexpectedError`). ``location`` (FOUND) becomes ``current_owner``;
    ``expected_sequence`` (OUT_OF_ORDER_SEQUENCE) and ``epoch`` (PRODUCER_FENCED, PRODUCER_STATE_LOST) are kept on
    the error; ``outcome_unknown`` overrides the class's."""
    text = f"{status_name(code)} ({code})" + (f": {message}" if message else "")
    cls = _CLASSES.get(code, UnexpectedError)
    err: DLError
    if cls is OwnershipAcquireFailedError:
        err = OwnershipAcquireFailedError(text, current_owner=location or None)
    elif cls is OutOfOrderSequenceError:
        err = OutOfOrderSequenceError(text, expected_sequence=expected_sequence)
    elif cls is ProducerFencedError:
        err = ProducerFencedError(text, epoch=epoch)
    elif cls is ProducerStateLostError:
        err = ProducerStateLostError(text, epoch=epoch)
    else:
        err = cls(text)
    if outcome_unknown is not None:
        err.outcome_unknown = outcome_unknown
    return err


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
    #: idempotent producer: resend the record set's records separately (a writeBulk), at once
    SPLIT = "split"
    #: idempotent producer: a newer instance of the producer took the stream over
    FENCED = "fenced"
    #: idempotent producer: the proxy lost the producer's state (outcome unknown; start a new epoch)
    STATE_LOST = "state_lost"
    #: the stream's owner is gone or this proxy cannot take it: forget the owner, try another proxy
    REROUTE = "reroute"
    #: transient on the owner: back off and try it again (same sequence numbers)
    RETRY = "retry"
    #: the write cannot succeed as sent: fail its future
    FAIL = "fail"


#: As DistributedLog's client: a status saying the proxy or its stream is closed or failed re-routes (the owner
#: may change: forget it, ask the ring again); only "busy" and "not ready yet" keep the owner and back off.
_REROUTE = frozenset(
    {
        pb.STREAM_UNAVAILABLE,
        pb.SERVICE_UNAVAILABLE,
        pb.TOO_MANY_STREAMS,
        pb.ALREADY_CLOSED,
        pb.LOCKING_EXCEPTION,
        pb.REGION_UNAVAILABLE,
        pb.BK_TRANSMIT_ERROR,
        pb.FLUSH_TIMEOUT,
        pb.WRITE_CANCELLED_EXCEPTION,
        pb.ZOOKEEPER_ERROR,
        pb.WRITE_EXCEPTION,
        pb.INTERRUPTED,
    }
)
_RETRY = frozenset({pb.STREAM_NOT_READY, pb.OVER_CAPACITY})


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
    if code == pb.RECORD_SET_SPLIT:
        return Disposition.SPLIT
    if code == pb.PRODUCER_FENCED:
        return Disposition.FENCED
    if code == pb.PRODUCER_STATE_LOST:
        return Disposition.STATE_LOST
    if code in _REROUTE:
        return Disposition.REROUTE
    if code in _RETRY:
        return Disposition.RETRY
    return Disposition.FAIL
