"""The error tree of the storage core.

Every error the public API raises is a subclass of :class:`DLError`. Each class carries
``code`` (Apache DistributedLog's ``StatusCode`` where one exists, else ``None``),
``retriable`` (whether the same call may succeed if tried again later, after reopening a writer
if that is what it takes) and ``outcome_unknown``.

What a failed write means: every error a write can end with is either *definitive*
(``outcome_unknown`` False: the record is not stored and never will be: bad input, refused,
fenced before the append) or *outcome unknown* (``outcome_unknown`` True: the append may have
taken effect: a timeout after sending, a transmit error, a lost connection or reply, a full disk
or a failed fsync mid-batch). A record whose write failed definitively is never in the log; one
whose outcome is unknown may be, once (the next writer's recovery decides). The class sets the
usual value; an instance may say otherwise (``DLError(..., outcome_unknown=True)``).

Backend exceptions (sqlite3, kazoo, ``OSError``) are translated at the adapter boundary and
never escape unwrapped; the original is kept as ``__cause__``.
"""

from __future__ import annotations


class DLError(Exception):
    """Root of every error raised by ``storage`` and ``dl_spark``."""

    code: int | None = None
    retriable: bool = False
    #: True when the failed operation may have taken effect (a write that may be stored); see the module docstring.
    outcome_unknown: bool = False

    def __init__(
        self, message: str = "", *, retriable: bool | None = None, outcome_unknown: bool | None = None
    ) -> None:
        super().__init__(message)
        if retriable is not None:
            self.retriable = retriable
        if outcome_unknown is not None:
            self.outcome_unknown = outcome_unknown


# --- names, logs ------------------------------------------------------------------------
class InvalidStreamNameError(DLError):
    """A log name breaks DistributedLog's naming rules."""

    code = 602


class LogNotFoundError(DLError):
    """The log does not exist."""

    code = 510


class LogExistsError(DLError):
    """The log already exists."""

    code = 522


class LogEmptyError(DLError):
    """The log has no user records (or no segments)."""

    code = 509


class NamespaceNotFoundError(DLError):
    """The namespace does not exist, and the caller only reads (``open_namespace(uri, create=False)``:
    the read-only ``dlog`` commands, ``spark.read`` / ``spark.readStream``): no embedded namespace at
    the path, or no ZooKeeper node at the URI's path. Nothing is created. DistributedLog has no
    namespace-level status code; a DistributedLog reader of any log in it gets LOG_NOT_FOUND (510)."""

    code = 510


class InvalidArgumentError(DLError):
    """A bad argument: a malformed DLSN, a negative count, a wrong type."""

    code = None


class InvalidConfigError(InvalidArgumentError):
    """An unknown configuration key or a value of the wrong type or range."""


# --- ownership --------------------------------------------------------------------------
class LockingError(DLError):
    """The write lock could not be taken or was lost."""

    code = 504


class OwnershipAcquireFailedError(LockingError):
    """Another writer owns the log; raised after ``lockTimeoutSeconds``."""

    code = 302
    retriable = True

    def __init__(self, message: str = "", *, current_owner: str | None = None) -> None:
        super().__init__(message)
        self.current_owner = current_owner


class WriterFencedError(LockingError):
    """The writer's segment was fenced by a newer owner: nothing more can be acknowledged."""

    code = 507


# --- writes -----------------------------------------------------------------------------
class WriteError(DLError):
    """The writer is in an error state (closed, failed segment)."""

    code = 514


class WriteCancelledError(WriteError):
    """A buffered write was cancelled because the writer aborted or failed before sending it: it was not
    written, and never will be."""

    code = 516


class TransmitError(WriteError):
    """Appending an entry to the segment store failed, or was cut short while in flight: its outcome is unknown
    (it may be durable); the next owner's recovery decides whether the log has it."""

    code = 507
    outcome_unknown = True


class StreamNotReadyError(DLError):
    """The stream is not ready for writes (e.g. a roll is in progress)."""

    code = 518
    retriable = True


class OverCapacityError(DLError):
    """The outstanding write limit was exceeded."""

    code = 517
    retriable = True


class TransactionIdOutOfOrderError(DLError):
    """A transaction id is negative, ``MAX_TXID``, or below the log's ``maxtxid``."""

    code = 513

    def __init__(self, message: str = "", *, txid: int | None = None, last_txid: int | None = None) -> None:
        super().__init__(message)
        self.txid = txid
        self.last_txid = last_txid


class EndOfStreamError(DLError):
    """The log was sealed with an end-of-stream marker (reads past it, or writes after it)."""

    code = 512


class LogRecordTooLongError(DLError):
    """A record exceeds ``MAX_LOGRECORD_SIZE`` (1,040,384 bytes persistent size)."""

    code = 413


# --- reads ------------------------------------------------------------------------------
class AlreadyTruncatedTransactionError(DLError):
    """The requested position lies in truncated data."""

    code = 511


class WriterStateExpiredError(AlreadyTruncatedTransactionError):
    """A writer of a log that several writers publish to came back after its exactly-once state expired
    (``writerStateRetentionHours``): its batch cannot be told apart from one already published, so it is refused."""


class CorruptedEntryError(DLError):
    """An entry failed its checksum or could not be decoded; never returned as data."""

    code = 523


class InvalidEnvelopedEntryError(CorruptedEntryError):
    """The 13-byte envelope of an entry is malformed."""

    code = 520


class ReadCancelledError(DLError):
    """The reader was closed while a read was pending, or read after close."""

    code = 1002


class LogReadError(DLError):
    """A read failed for a reason other than corruption or truncation."""

    code = 1001


class IdleReaderError(DLError):
    """The reader saw no progress for ``readerIdleErrorThresholdMillis``."""

    code = None


# --- metadata, segments, state ----------------------------------------------------------
class MetadataError(DLError):
    """The metadata store failed or holds something unexpected."""

    code = 600


class MetadataConnectionError(MetadataError):
    """The metadata store is unreachable right now (connection loss)."""

    retriable = True


class MetadataPermissionError(MetadataError):
    """The metadata store refused an operation this client has no permission for (ZooKeeper's NOAUTH: the
    namespace's znodes carry an ACL and this client lacks its credentials, ``zkAclId``)."""

    code = 403


class MetadataVersionError(MetadataError):
    """A compare-and-set failed: the node changed since it was read (BADVERSION)."""

    retriable = True


class NodeExistsError(MetadataError):
    """A node to be created already exists (NODEEXISTS)."""


class NoNodeError(MetadataError):
    """A node does not exist (NONODE)."""


class UnsupportedMetadataVersionError(MetadataError):
    """Segment metadata of a version this library cannot read."""

    code = 521


class LogSegmentNotFoundError(DLError):
    """A log segment (or its ledger) is gone."""

    code = 525


class LogSegmentIsTruncatedError(DLError):
    """The log segment was truncated."""

    code = 527


class SegmentStoreError(DLError):
    """The segment store failed (I/O error, missing ledger)."""

    code = 507


class LedgerNotFoundError(SegmentStoreError):
    """The ledger does not exist in the segment store."""


class ColdStoreError(SegmentStoreError):
    """The cold store (S3-compatible object storage or a filesystem path, :mod:`storage.cold`) failed.
    ``retriable`` per instance: an unreachable endpoint or an outage is retriable; refused credentials, a
    missing bucket or a malformed URI are not."""


class ColdObjectNotFoundError(ColdStoreError):
    """An object the cold store should hold is missing."""


class IllegalStateError(DLError):
    """An operation on a handle in the wrong state (closed, or metadata out of sequence)."""

    code = 603


class AlreadyClosedError(IllegalStateError):
    """The handle (namespace, log manager, writer, reader) was closed."""


class UnexpectedError(DLError):
    """An internal invariant failed."""

    code = 600


class DLInterruptedError(DLError):
    """A blocking call was interrupted."""

    code = 601


# --- the write proxy's status codes (DistributedLog's service.thrift) with no class above ---------------------
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
    """The proxy's writer timed out flushing (FLUSH_TIMEOUT): the outcome is unknown."""

    code = 508
    retriable = True
    outcome_unknown = True


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


class RecordSetSplitError(DLError):
    """An idempotent producer's record set repeats what the proxy stored, but not as one stored request (part of it
    is new, or it was stored in other batches: its members' DLSNs are not consecutive) (RECORD_SET_SPLIT). The
    client resends its records separately (``writeBulk``), each answered on its own; this reaches a caller only
    when that cannot be done."""

    code = 531
    retriable = True


class RetryableReadError(LogReadError):
    """A read that may succeed if tried again (RETRYABLE_READ)."""

    code = 1000
    retriable = True


class WriteTimeoutError(DLError):
    """A write was not acknowledged within the client's delivery timeout (``timeout_s``): its outcome is unknown
    (it may be stored, once); the client has stopped sending it. Retriable in the sense that later writes may
    succeed; writing the same payload again is a NEW record (it may then be stored twice)."""

    code = None
    retriable = True
    outcome_unknown = True


class OperationTimeoutError(DLError):
    """A client call that waits (``flush(timeout)``) did not finish within its timeout; what it waited for goes on
    (the writes keep being sent; their futures tell their outcome)."""

    code = None
    retriable = True


class ProducerFencedError(DLError):
    """A newer instance of the same idempotent producer id took over the stream (producer epochs, as Kafka's):
    this write was not stored, and this client can write no more to the stream (PRODUCER_FENCED). ``epoch`` is
    the newer epoch when the proxy named it. Not retriable; the outcome is known (not stored)."""

    code = 532

    def __init__(self, message: str = "", *, epoch: int | None = None, outcome_unknown: bool | None = None) -> None:
        super().__init__(message, outcome_unknown=outcome_unknown)
        self.epoch = epoch


class ProducerStateLostError(DLError):
    """The proxy no longer holds the idempotent producer state needed to answer a resend (PRODUCER_STATE_LOST):
    the producer was forgotten (idle past ``proxyProducerExpirySeconds``, evicted by ``proxyMaxProducersPerStream``,
    or its state was truncated away), or the resend is older than the producer's window. The write's outcome is
    unknown (it may be stored, once); the client starts a new producer epoch for the records it had not sent."""

    code = 533
    outcome_unknown = True

    def __init__(self, message: str = "", *, epoch: int | None = None) -> None:
        super().__init__(message)
        self.epoch = epoch


class SequenceMismatchError(DLError):
    """An idempotent producer's request reuses sequence numbers the proxy stored with other data or other request
    boundaries (SEQUENCE_MISMATCH): it was not stored (a client that numbers its records wrongly)."""

    code = 534


class NoProxyReachableError(ServiceUnavailableError):
    """No write proxy could be reached for the whole delivery timeout (none announced, or every one refused the
    connection): the write never left the client, so it is not stored. Retriable (a proxy may come up)."""

    code = 503
    retriable = True


#: Every error class, listed (a static list, so type checkers see what ``storage`` re-exports).
__all__ = [
    "AlreadyClosedError",
    "AlreadyTruncatedTransactionError",
    "BadRequestError",
    "ChecksumFailedError",
    "ClientClosedError",
    "ColdObjectNotFoundError",
    "ColdStoreError",
    "CorruptedEntryError",
    "DLError",
    "DLInterruptedError",
    "EndOfLogSegmentError",
    "EndOfStreamError",
    "FlushTimeoutError",
    "IdleReaderError",
    "IllegalStateError",
    "InternalServerError",
    "InvalidArgumentError",
    "InvalidConfigError",
    "InvalidEnvelopedEntryError",
    "InvalidStreamNameError",
    "LedgerNotFoundError",
    "LockingError",
    "LogEmptyError",
    "LogExistsError",
    "LogNotFoundError",
    "LogReadError",
    "LogRecordTooLongError",
    "LogSegmentIsTruncatedError",
    "LogSegmentNotFoundError",
    "MetadataConnectionError",
    "MetadataError",
    "MetadataPermissionError",
    "MetadataVersionError",
    "NamespaceNotFoundError",
    "NoNodeError",
    "NoProxyReachableError",
    "NodeExistsError",
    "NotImplementedByProxyError",
    "OperationTimeoutError",
    "OutOfOrderSequenceError",
    "OverCapacityError",
    "OwnershipAcquireFailedError",
    "ProducerFencedError",
    "ProducerStateLostError",
    "ProxyClosedError",
    "ReadCancelledError",
    "RecordSetSplitError",
    "RegionUnavailableError",
    "RequestDeniedError",
    "RetryableReadError",
    "SegmentStoreError",
    "SequenceMismatchError",
    "ServiceUnavailableError",
    "StreamNotReadyError",
    "StreamUnavailableError",
    "TooManyStreamsError",
    "TransactionIdOutOfOrderError",
    "TransmitError",
    "UnexpectedError",
    "UnsupportedMetadataVersionError",
    "WriteCancelledError",
    "WriteError",
    "WriteTimeoutError",
    "WriterFencedError",
    "WriterStateExpiredError",
    "ZooKeeperError",
]
