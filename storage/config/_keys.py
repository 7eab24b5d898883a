"""Configuration keys: :class:`KeySpec`, the value coercers, the key table and key-name resolution.

Every key is declared once, in :data:`_SPECS`; the lookup tables (current names, old names,
case-insensitive and snake_case spellings) are derived from it at import, with sanity checks.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any, NoReturn

from storage.errors import InvalidConfigError

#: Keys with this prefix are BookKeeper client settings DistributedLog passes through verbatim.
BKC_PASSTHROUGH_PREFIX = "bkc."

_JAVA_INT_MAX = 2**31 - 1

Scalar = bool | int | float | str


@dataclass(frozen=True)
class KeySpec:
    """One configuration key: DistributedLog's name, type and default, and this project's support."""

    name: str
    """camelCase name exactly as DistributedLog spells it."""
    type: type
    """``bool``, ``int``, ``float`` or ``str``."""
    default: Any
    """DistributedLog's default (``None``: no default, or one DistributedLog derives at run time)."""
    doc: str
    group: str
    """Section of the sample configuration file (see :data:`GROUP_TITLES`)."""
    implemented: bool
    aliases: tuple[str, ...] = ()
    """Older names DistributedLog still reads; the current name wins when both are set."""
    min: int | float | None = None
    max: int | float | None = None
    choices: tuple[str, ...] | None = None
    """Allowed values of a ``str`` key (matched case-insensitively, stored as spelled here)."""
    nonpositive_means_default: bool = False
    """DistributedLog's getter returns the default for a value <= 0 (``maxLogSegmentBytes``)."""
    fractional: bool = False
    """An ``int`` key that also takes fractions (``logSegmentRollingMinutes=0.5``): a project
    extension so time-based behaviour can be exercised quickly; integral values stay ``int``."""
    empty_means_unset: bool = False
    """A ``str`` key whose default is ``None``: an empty (or blank) value means unset, i.e. ``None``
    (``radosKeyring=`` in a properties file)."""

    @property
    def snake_name(self) -> str:
        """The snake_case name of the typed :class:`Config` property (``writer_output_buffer_size``)."""
        return _snake(self.name)

    @property
    def type_name(self) -> str:
        return self.type.__name__

    def coerce(self, value: object, *, source: str = "") -> Any:
        """Return ``value`` as this key's type, validated; raise :class:`InvalidConfigError` otherwise."""
        if value is None:
            if self.default is None:
                return None
            _bad(self.name, value, "a value is required", source)
        if self.empty_means_unset and isinstance(value, str) and not value.strip():
            return None
        if self.type is bool:
            result: Any = _to_bool(self.name, value, source)
        elif self.type is int and self.fractional:
            result = _to_number(self.name, value, source)
        elif self.type is int:
            result = _to_int(self.name, value, source)
        elif self.type is float:
            result = _to_float(self.name, value, source)
        else:
            result = _to_str(self.name, value, source)
        if self.min is not None and result < self.min:
            _bad(self.name, value, f"must be >= {self.min}", source)
        if self.max is not None and result > self.max:
            _bad(self.name, value, f"must be <= {self.max}", source)
        if self.choices is not None:
            for choice in self.choices:
                if result.lower() == choice.lower():
                    return choice
            _bad(self.name, value, "must be one of " + ", ".join(self.choices), source)
        return result

    def effective(self, value: Any) -> Any:
        """The value DistributedLog's getter would return for a stored ``value``."""
        if self.nonpositive_means_default and value is not None and value <= 0:
            return self.default
        return value


# --------------------------------------------------------------------------------------------
# Value parsing
# --------------------------------------------------------------------------------------------

_TRUE = frozenset({"true", "yes", "on"})
_FALSE = frozenset({"false", "no", "off"})
_INT_RE = re.compile(r"[+-]?[0-9]+")
_HEX_RE = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]+)")


def _bad(key: str, value: object, why: str, source: str) -> NoReturn:
    where = f" (in {source})" if source else ""
    raise InvalidConfigError(f"invalid value {value!r} for configuration key {key!r}{where}: {why}")


def _to_bool(key: str, value: object, source: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    _bad(key, value, "expected a boolean (true or false)", source)


def _to_int(key: str, value: object, source: str) -> int:
    if isinstance(value, bool):
        _bad(key, value, "expected an integer, not a boolean", source)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if _INT_RE.fullmatch(text):
            return int(text)
        m = _HEX_RE.fullmatch(text)
        if m:
            return int(m.group(1) + m.group(2), 16)
    _bad(key, value, "expected an integer", source)


def _to_float(key: str, value: object, source: str) -> float:
    if isinstance(value, bool):
        _bad(key, value, "expected a number, not a boolean", source)
    result: float | None = None
    if isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            result = None
    if result is None or not math.isfinite(result):
        _bad(key, value, "expected a finite number", source)
    return result


def _to_number(key: str, value: object, source: str) -> int | float:
    """An int, or a float when the value has a fraction."""
    if isinstance(value, int | str) and not isinstance(value, bool):
        try:
            return _to_int(key, value, source)
        except InvalidConfigError:
            pass
    result = _to_float(key, value, source)
    return int(result) if result.is_integer() else result


def _to_str(key: str, value: object, source: str) -> str:
    if isinstance(value, str):
        return value
    _bad(key, value, "expected a string", source)


def _passthrough_value(key: str, value: object, source: str) -> Scalar:
    if isinstance(value, bool | int | float | str):
        return value
    _bad(key, value, "expected a bool, int, float or string", source)


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

#: Section titles of the sample configuration file, in file order.
GROUP_TITLES: dict[str, str] = {
    "writer": "Writer",
    "segments": "Log segment rolling and retention",
    "locking": "Ownership (write lock)",
    "reader": "Reader",
    "metadata": "Log segment metadata",
    "zookeeper": "ZooKeeper (metadata store) client",
    "rados": "Ceph RADOS segment store (rados:// bindings)",
    "cold": "Cold storage (a namespace bound with --cold: offload, tiered retention)",
    "bookkeeper": "BookKeeper client",
    "namespace": "Namespace: executors, caches, allocators, federation",
    "stats": "Tracing and stats",
    "features": "Feature providers and dynamic configuration",
    "proxy": "Write proxy (dlog proxy): service limits and idempotent producers",
    "injection": "Failure injection",
    "legacy": "Keys only found in DistributedLog's sample files",
}


def _b(name: str, default: bool, doc: str, group: str, *, impl: bool = False, aliases: tuple[str, ...] = ()) -> KeySpec:
    return KeySpec(name, bool, default, doc, group, impl, aliases)


def _i(
    name: str,
    default: int | None,
    doc: str,
    group: str,
    *,
    impl: bool = False,
    aliases: tuple[str, ...] = (),
    min: int | None = None,
    max: int | None = None,
    nonpositive_means_default: bool = False,
    fractional: bool = False,
) -> KeySpec:
    return KeySpec(name, int, default, doc, group, impl, aliases, min, max, None, nonpositive_means_default, fractional)


def _f(name: str, default: float, doc: str, group: str, *, impl: bool = False, min: float | None = None) -> KeySpec:
    return KeySpec(name, float, default, doc, group, impl, (), min)


def _s(
    name: str,
    default: str | None,
    doc: str,
    group: str,
    *,
    impl: bool = False,
    choices: tuple[str, ...] | None = None,
    empty_means_unset: bool = False,
) -> KeySpec:
    return KeySpec(name, str, default, doc, group, impl, (), None, None, choices, empty_means_unset=empty_means_unset)


# fmt: off
_SPECS: tuple[KeySpec, ...] = (
    # --- writer -------------------------------------------------------------------------------
    _b("createStreamIfNotExists", True, "Create the log on first open for write if it does not exist.",
        "writer", impl=True),
    _s("compressionType", "none", "Codec for the entries the writer transmits: none or lz4.",
        "writer", impl=True, choices=("none", "lz4")),
    _b("failFastOnStreamNotReady", False, "Fail writes at once (StreamNotReady) while the log is initializing or "
        "rolling, instead of queueing them.", "writer", impl=True),
    _b("disableRollingOnLogSegmentError", False, "Keep a failed segment writer instead of rolling to a new segment on "
        "the next write.", "writer", impl=True),
    _b("isDurableWriteEnabled", True, "Acknowledge a write only once the segment store has persisted it.",
        "writer", impl=True),
    _i("writerOutputBufferSize", 1024, "Transmit threshold in bytes: a buffer holding more is sent as one entry (0 = "
        "transmit every write; the writer caps it at 1044480).",
        "writer", impl=True, aliases=("output-buffer-size",), min=0),
    _i("periodicFlushFrequencyMilliSeconds", 0, "If > 0, transmit buffered data every half of this interval (0 = no "
        "periodic flush).", "writer", impl=True, min=0),
    _b("enableImmediateFlush", False, "Write a control record right after each transmit so readers see the data at "
        "once.", "writer", impl=True),
    _i("minimumDelayBetweenImmediateFlushMilliSeconds", 0, "Minimum delay between two immediate flushes, in "
        "milliseconds (0 = none).", "writer", impl=True, min=0),
    _i("periodicKeepAliveMilliSeconds", 0, "If > 0, write a control record when the writer has been idle this long, "
        "to keep readers advancing (0 = off).", "writer", impl=True, min=0),
    _i("perWriterOutstandingWriteLimit", -1, "Maximum outstanding writes per writer; <= 0 disables the limit.",
        "writer", impl=True, min=-1),
    _i("globalOutstandingWriteLimit", -1, "Maximum outstanding writes per namespace; <= 0 disables the limit.",
        "writer", impl=True, min=-1),
    _b("outstandingWriteLimitDarkmode", True, "Only count writes over the outstanding limit instead of rejecting them "
        "with OverCapacity.", "writer", impl=True),
    _i("logFlushTimeoutSeconds", 30, "Timeout of a synchronous flush, in seconds.", "writer"),
    # --- segments / retention -----------------------------------------------------------------
    _i("logSegmentRollingMinutes", 120, "If > 0, roll to a new log segment after this many minutes (fractions "
        "allowed); 0 = roll by size only (maxLogSegmentBytes).",
        "segments", impl=True, aliases=("rolling-interval",), min=0, fractional=True),
    _i("maxLogSegmentBytes", 256 * 1024 * 1024, "Roll to a new log segment once the current one holds this many bytes "
        "(<= 0 means the default).", "segments", impl=True, nonpositive_means_default=True),
    _i("logSegmentRetentionHours", 72, "On each roll, delete log segments older than this many hours (fractions "
        "allowed; 0 = keep everything).", "segments", impl=True, aliases=("retention-size",), min=0, fractional=True),
    _b("retentionIgnoresSubscribers", False, "Purges (logSegmentRetentionHours, purge_older_than, dlog purge) "
        "may delete segments a recorded subscriber has not read yet (this project's key; DistributedLog's purge "
        "does not look at subscribers).", "segments", impl=True),
    _f("writerStateRetentionHours", 0.0, "Expire the exactly-once state of a writer (a Spark streaming query, a "
        "batch job with a writer id) that has not published to a log for this many hours (<= 0 = keep it for "
        "ever); a writer coming back after its state expired is refused.", "segments", impl=True),
    _b("explicitTruncationByApp", False, "Retention deletes only segments the application truncated; no time-based "
        "deletion of the rest.", "segments", impl=True),
    _i("logSegmentRollingConcurrency", 1, "How many log segments may be rolled at the same time (<= 0 = unlimited).",
        "segments"),
    # --- locking ------------------------------------------------------------------------------
    _b("writeLockEnabled", True, "Take the log's ownership lock before writing (one writer per log).",
        "locking", impl=True),
    _i("lockTimeoutSeconds", 30, "How long to wait for the ownership lock, in seconds (fractions allowed; 0 = fail at "
        "once if owned, -1 = wait forever).", "locking", impl=True, min=-1, fractional=True),
    _i("lockReacquireTimeoutSeconds", 120, "Timeout to reacquire a lock whose session expired, in seconds.", "locking"),
    _i("lockOpTimeoutSeconds", 120, "Timeout of a single lock operation, in seconds.", "locking"),
    # --- reader -------------------------------------------------------------------------------
    _i("readAheadBatchSize", 2, "Entries the readahead reads in one batch.",
        "reader", impl=True, aliases=("ReadAheadBatchSize",), min=1),
    _i("readAheadMaxRecords", 10, "Records the readahead cache holds per reader.",
        "reader", impl=True, aliases=("ReadAheadMaxEntries",), min=1),
    _i("readAheadWaitTime", 200, "How long a reader waits for new data before polling again, in milliseconds.",
        "reader", impl=True, aliases=("ReadAheadWaitTime",), min=0),
    _i("readLACLongPollTimeout", 1000, "Long-poll timeout when waiting for the last add confirmed, in milliseconds.",
        "reader", impl=True, min=0),
    _b("deserializeRecordSetOnReads", True, "Split record-set entries into their records on read.",
        "reader", impl=True),
    _i("readerIdleWarnThresholdMillis", 120000, "Log a warning when a reader makes no progress for this long, in "
        "milliseconds.", "reader", impl=True, min=0),
    _i("readerIdleErrorThresholdMillis", _JAVA_INT_MAX, "Fail a reader with IdleReader when it makes no progress for "
        "this long, in milliseconds.", "reader", impl=True, min=0),
    _b("ignoreTruncationStatus", False, "Read segments marked truncated anyway (tooling).", "reader", impl=True),
    _b("alertPositionOnTruncated", True, "Log a warning when a reader is positioned before the first active record "
        "of a partially truncated segment (the position fails with AlreadyTruncatedTransaction either way, unless "
        "ignoreTruncationStatus).", "reader", impl=True),
    _b("positionGapDetectionEnabled", False, "Fail a reader that detects a gap between consecutive record positions.",
        "reader", impl=True),
    _b("readAheadSkipBrokenEntries", False, "Skip entries that fail to decode instead of failing the reader.",
        "reader", impl=True),
    _i("firstNumEntriesEachPerLastRecordScan", 2, "Entries read by the first backward scan for a segment's last "
        "record.", "reader", impl=True, aliases=("firstNumEntriesPerReadLastRecordScan",), min=1),
    _i("maxNumEntriesPerReadLastRecordScan", 16, "Maximum entries read by each further backward scan for a segment's "
        "last record.", "reader", impl=True, min=1),
    _b("enableReadAhead", True, "Enable the readahead cache.", "reader"),
    _b("enableForceRead", True, "Force reads past the last add confirmed when the writer is gone.", "reader"),
    _i("readLACLongPoll", 3, "How the reader waits for the last add confirmed (BookKeeper read-LAC option).", "reader"),
    _i("readAheadWaitTimeOnEndOfStream", 10000, "Readahead wait after reaching the end of a sealed log, in "
        "milliseconds.", "reader", aliases=("ReadAheadWaitTimeOnEndOfStream",)),
    _i("readAheadNoSuchLedgerExceptionOnReadLACErrorThresholdMillis", 10000, "Re-open a ledger after NoSuchLedger "
        "errors for this long, in milliseconds.", "reader"),
    _i("numPrefetchEntriesPerLogSegment", 4, "Entries prefetched per log segment.", "reader"),
    _i("maxPrefetchEntriesPerLogSegment", 32, "Maximum entries prefetched per log segment.", "reader"),
    _i("checkLogExistenceBackoffStartMillis", 200, "Initial backoff when waiting for a log to be created, in "
        "milliseconds.", "reader"),
    _i("checkLogExistenceBackoffMaxMillis", 1000, "Maximum backoff when waiting for a log to be created, in "
        "milliseconds.", "reader"),
    # --- metadata -----------------------------------------------------------------------------
    _i("ledgerMetadataLayoutVersion", 5, "Log segment metadata version the writer writes (1..5; 5 = sequence ids).",
        "metadata", impl=True, aliases=("ledger-metadata-layout",), min=1, max=5),
    _b("ledgerMetadataSkipMinVersionCheck", False, "Read segment metadata older than the minimum supported version if "
        "it can be parsed.", "metadata", impl=True),
    _i("firstLogsegmentSequenceNumber", 1, "Sequence number of a log's first log segment.",
        "metadata", impl=True, aliases=("first-logsegment-sequence-number",), min=1),
    _b("logSegmentSequenceNumberValidationEnabled", True, "Check that log segment sequence numbers are contiguous.",
        "metadata", impl=True),
    _b("enableRecordCounts", True, "Keep per-segment record counts (and positions) in segment metadata.",
        "metadata", impl=True),
    _b("encodeRegionIDInVersion", False, "Encode the region id into the segment metadata version field.",
        "metadata", impl=True),
    _b("maxIdSanityCheck", True, "Deprecated: DistributedLog no longer consults it.", "metadata"),
    _i("logSegmentNameVersion", 1, "Version of log segment znode names.", "metadata"),
    _s("unpartitionedStreamName", "<default>", "Name of the single (unpartitioned) stream of a log.", "metadata"),
    # --- zookeeper ----------------------------------------------------------------------------
    _i("zkSessionTimeoutSeconds", 30, "Metadata store session timeout, in seconds.",
        "zookeeper", impl=True, aliases=("zkSessionTimeout",), min=1),
    _i("zkNumRetries", 3, "Retries of a metadata request on retryable errors.", "zookeeper", impl=True, min=0),
    _i("zkRetryStartBackoffMillis", 5000, "Backoff before the first metadata retry, in milliseconds.",
        "zookeeper", impl=True, min=0),
    _i("zkRetryMaxBackoffMillis", 30000, "Maximum backoff between metadata retries, in milliseconds.",
        "zookeeper", impl=True, min=0),
    _s("zkAclId", None, "Digest id for ZooKeeper ACLs: the client authenticates as id:id and every znode it creates "
        "is readable by anyone, changeable only with these credentials (unset = open ACLs).", "zookeeper", impl=True,
        empty_means_unset=True),
    _f("zkRequestRateLimit", 0.0, "ZooKeeper requests per second (<= 0 = unlimited).", "zookeeper"),
    _i("zkcNumRetryThreads", 1, "Threads retrying ZooKeeper requests.", "zookeeper"),
    # --- rados --------------------------------------------------------------------------------
    # (this project's own keys: DistributedLog has no RADOS segment store; the defaults are ours)
    _s("radosClientId", "admin", "Cephx user the RADOS segment store connects as (client.<id>); an ?id= in the "
        "segment store URI wins.", "rados", impl=True),
    _s("radosKeyring", None, "Path of the cephx keyring (unset or empty = Ceph's default search, or the ceph.conf "
        "keyring); a ?keyring= in the segment store URI wins.", "rados", impl=True, empty_means_unset=True),
    _i("radosOpTimeoutSeconds", 30, "Bound on every OSD operation, in seconds (rados_osd_op_timeout); an append that "
        "times out fails the ledger writer with a retriable SegmentStoreError, its outcome unknown (recovery "
        "decides).", "rados", impl=True, min=1),
    _i("radosConnectTimeoutSeconds", 10, "Bound on connecting to and talking to the monitors, in seconds "
        "(client_mount_timeout, rados_mon_op_timeout).", "rados", impl=True, min=1),
    _i("radosMaxObjectBytes", 64 * 1024 * 1024, "A ledger continues in a new RADOS object once the current one would "
        "exceed this many bytes; keep it below the cluster's osd_max_object_size (128 MiB by default).",
        "rados", impl=True, min=65536),
    _i("radosMaxWriteBytes", 4 * 1024 * 1024, "Most bytes one group-commit append operation carries.",
        "rados", impl=True, min=4096),
    _i("radosMaxInFlightWrites", 1, "Group-commit append operations in flight per ledger writer (guarded appends "
        "are serialized by the OSD, so more in flight adds latency, not throughput).",
        "rados", impl=True, min=1),
    # --- cold storage -------------------------------------------------------------------------
    # (this project's own keys: DistributedLog names cold storage but ships no offloader; the defaults are ours)
    _s("coldStoreAccessKey", None, "S3 access key of the cold store (unset = the AWS_ACCESS_KEY_ID variable and the "
        "AWS SDK's usual chain); set together with coldStoreSecretKey.", "cold", impl=True, empty_means_unset=True),
    _s("coldStoreSecretKey", None, "S3 secret key of the cold store (unset = AWS_SECRET_ACCESS_KEY).", "cold",
        impl=True, empty_means_unset=True),
    _i("coldStoreRequestTimeoutSeconds", 30, "Bound on connecting to the cold store and on each request, in "
        "seconds.", "cold", impl=True, min=1),
    _i("coldStoreMaxAttempts", 3, "Attempts per cold store request (the AWS SDK's retries) before it fails "
        "(retriable: offload tries again later).", "cold", impl=True, min=1),
    _f("offloadThresholdHours", 0.0, "A writer offloads, in the background, each completed log segment once it "
        "completed this many hours ago (0 = right after it completes; negative = never by itself, only with "
        "dlog offload).", "cold", impl=True),
    _f("offloadRetryIntervalSeconds", 60.0, "After a failed background offload (an outage of the cold store), "
        "try again after this many seconds (at least 0.05).", "cold", impl=True),
    _f("coldSegmentRetentionHours", 0.0, "Delete a log segment's cold copy (and the segment) this many hours "
        "after it completed (<= 0 = keep cold copies for ever); logSegmentRetentionHours only removes hot copies "
        "of offloaded segments.", "cold", impl=True),
    # --- bookkeeper ---------------------------------------------------------------------------
    _i("bkcZKSessionTimeoutSeconds", 30, "BookKeeper's ZooKeeper session timeout, in seconds.", "bookkeeper"),
    _f("bkcZKRequestRateLimit", 0.0, "BookKeeper's ZooKeeper requests per second (<= 0 = unlimited).", "bookkeeper"),
    _i("bkcZKNumRetries", 3, "Retries of BookKeeper's ZooKeeper requests.", "bookkeeper"),
    _i("bkcZKRetryStartBackoffMillis", 5000, "BookKeeper's ZooKeeper initial retry backoff, in milliseconds.",
        "bookkeeper"),
    _i("bkcZKRetryMaxBackoffMillis", 30000, "BookKeeper's ZooKeeper maximum retry backoff, in milliseconds.",
        "bookkeeper"),
    _i("bkcEnsembleSize", 3, "Bookies a log segment's ledger is striped over.",
        "bookkeeper", aliases=("ensemble-size",)),
    _i("bkcWriteQuorumSize", 3, "Bookies each entry is written to.", "bookkeeper", aliases=("write-quorum-size",)),
    _i("bkcAckQuorumSize", 2, "Bookie acknowledgements an entry needs.", "bookkeeper", aliases=("ack-quorum-size",)),
    _b("bkRowAwareEnsemblePlacement", False, "Resolve bookie locations by row instead of rack.",
        "bookkeeper", aliases=("row-aware-ensemble-placement",)),
    _s("bkEnsemblePlacementDnsResolverClass", "org.apache.distributedlog.net.DNSResolverForRacks", "DNS resolver "
        "class for rack-aware placement.", "bookkeeper"),
    _s("dnsResolverOverrides", "", "host:region pairs overriding the resolved region, separated by ';'.", "bookkeeper"),
    _s("digestPw", "", "Password of the ledger digest.", "bookkeeper"),
    _i("bkcNumIOThreads", None, "Netty I/O threads of the BookKeeper client (unset = numWorkerThreads).", "bookkeeper"),
    _i("timerTickDuration", 100, "Tick of the BookKeeper client's timeout timer, in milliseconds.", "bookkeeper"),
    _i("timerNumTicks", 1024, "Ticks of the BookKeeper client's timeout timer.", "bookkeeper"),
    _i("bkcReadTimeoutSeconds", 10, "BookKeeper read timeout, in seconds.", "bookkeeper"),
    _i("bkcWriteTimeoutSeconds", 10, "BookKeeper write timeout, in seconds.", "bookkeeper"),
    _i("bkcNumWorkerThreads", 1, "Deprecated: BookKeeper client worker threads.", "bookkeeper"),
    # --- namespace ----------------------------------------------------------------------------
    _i("numWorkerThreads", None, "Worker threads of a namespace (unset = number of processors).", "namespace"),
    _i("numReadAheadWorkerThreads", 0, "Dedicated readahead threads (<= 0 = share the worker threads).", "namespace"),
    _i("numLockStateThreads", 1, "Threads running lock state changes.", "namespace"),
    _i("numResourceReleaseThreads", 0, "Threads releasing resources.", "namespace"),
    _i("schedulerShutdownTimeoutMs", 5000, "Timeout to shut the schedulers down, in milliseconds.", "namespace"),
    _b("useDaemonThread", False, "Run executor threads as daemons.", "namespace"),
    _i("logSegmentCacheTTLMs", 600000, "Time-to-live of the log segment metadata cache, in milliseconds.", "namespace"),
    _i("logSegmentCacheMaxSize", 10000, "Entries of the log segment metadata cache.", "namespace"),
    _b("logSegmentCacheEnabled", True, "Cache log segment metadata.", "namespace"),
    _b("enableLedgerAllocatorPool", False, "Pre-allocate ledgers from a pool.", "namespace"),
    _s("ledgerAllocatorPoolPath", ".allocation_pool", "Path of the ledger allocator pool.", "namespace"),
    _s("ledgerAllocatorPoolName", None, "Name of the ledger allocator pool.", "namespace"),
    _i("ledgerAllocatorPoolCoreSize", 20, "Ledger allocators in the pool.", "namespace"),
    _b("federatedNamespaceEnabled", False, "Spread logs over sub-namespaces.", "namespace"),
    _i("federatedMaxLogsPerSubnamespace", 15000, "Logs per sub-namespace of a federated namespace.", "namespace"),
    _b("federatedCheckExistenceWhenCacheMiss", True, "Check the metadata store when the federated cache misses.",
        "namespace"),
    # --- stats --------------------------------------------------------------------------------
    _b("traceReadAheadDeliveryLatency", False, "Trace readahead delivery latency.", "stats"),
    _i("metadataLatencyWarnThresholdMs", 1000, "Log metadata operations slower than this, in milliseconds.", "stats"),
    _i("dataLatencyWarnThresholdMs", 2000, "Log data operations slower than this, in milliseconds.", "stats"),
    _b("traceReadAheadMetadataChanges", False, "Log readahead metadata changes with timestamps.", "stats"),
    _b("enableTaskExecutionStats", False, "Record executor task statistics.", "stats"),
    _i("taskExecutionWarnTimeMicros", 100000, "Log executor tasks slower than this, in microseconds.", "stats"),
    _b("enablePerStreamStat", False, "Record per-stream statistics.", "stats"),
    # (this project's keys: metrics exported with prometheus_client, see storage.common.stats)
    _b("enableStats", True, "Count writes, reads and segment store operations per stream for the Prometheus "
        "metrics (storage.common.stats); false skips the per-stream recording.", "stats", impl=True),
    _i("prometheusStatsHttpPort", -1, "Serve the process's metrics on http://<prometheusStatsHttpAddress>:<port>"
        "/metrics once a namespace opens (BookKeeper's key; -1 = no endpoint, 0 = any free port).", "stats",
        impl=True, min=-1, max=65535),
    _s("prometheusStatsHttpAddress", "127.0.0.1", "Address the metrics endpoint binds to (loopback by default).",
        "stats", impl=True),
    # --- features -----------------------------------------------------------------------------
    _s("featureProviderClass", "org.apache.distributedlog.feature.DefaultFeatureProvider", "Feature provider class.",
        "features"),
    _s("fileFeatureProviderBaseConfigPath", "decider.conf", "Base file of the file feature provider.", "features"),
    _s("fileFeatureProviderOverlayConfigPath", None, "Overlay file of the file feature provider.", "features"),
    _i("dynamicConfigReloadIntervalSec", 60, "How often the dynamic configuration files are checked for changes, in "
        "seconds (<= 0: read once, when a log is opened).", "features", impl=True, min=0, fractional=True),
    # (this project's names for DistributedLog's ServiceStreamConfigProvider settings)
    _s("streamConfigDir", None, "Directory of per-log configuration files <log name>.conf: overrides applied when a "
        "log is opened, and re-read while it is open (dynamic keys apply to running writers).", "features",
        impl=True, empty_means_unset=True),
    _s("defaultStreamConfigFile", None, "A configuration file of overrides for every log, read like the files of "
        "streamConfigDir (which win over it).", "features", impl=True, empty_means_unset=True),
    _s("streamConfigRouterClass", "org.apache.distributedlog.service.config.IdentityConfigRouter", "Routes a stream "
        "to its dynamic configuration.", "features"),
    # --- proxy --------------------------------------------------------------------------------
    _i("bpsSoftWriteLimit", -1, "Per-stream soft write limit, payload bytes per second (<= 0 = off): "
        "writes over it are counted and logged.", "writer",
        impl=True),
    _i("bpsHardWriteLimit", -1, "Per-stream hard write limit, payload bytes per second (<= 0 = off): "
        "writes over it fail with OverCapacityError.", "writer",
        impl=True),
    _i("rpsSoftWriteLimit", -1, "Per-stream soft write limit, payload records per second (<= 0 = off): "
        "writes over it are counted and logged.", "writer",
        impl=True),
    _i("rpsHardWriteLimit", -1, "Per-stream hard write limit, payload records per second (<= 0 = off): "
        "writes over it fail with OverCapacityError.", "writer",
        impl=True),
    _i("rpsSoftServiceLimit", -1, "Per-proxy soft limit, write requests per second (<= 0 = off): requests over "
        "it are counted and logged.", "proxy", impl=True),
    _i("rpsHardServiceLimit", -1, "Per-proxy hard limit, write requests per second (<= 0 = off): requests over "
        "it fail with OVER_CAPACITY (retriable).", "proxy", impl=True),
    _i("rpsStreamAcquireServiceLimit", -1, "Per-proxy rate above which streams are not acquired.", "proxy"),
    _i("bpsSoftServiceLimit", -1, "Per-proxy soft limit, payload bytes per second (<= 0 = off): requests over it "
        "are counted and logged.", "proxy", impl=True),
    _i("bpsHardServiceLimit", -1, "Per-proxy hard limit, payload bytes per second (<= 0 = off): requests over it "
        "fail with OVER_CAPACITY (retriable).", "proxy", impl=True),
    _i("bpsStreamAcquireServiceLimit", -1, "Per-proxy byte rate above which streams are not acquired.", "proxy"),
    _i("maxAcquiredPartitionsPerProxy", -1, "Streams a proxy may own at once (<= 0 = unlimited); a new stream over "
        "it is refused with TOO_MANY_STREAMS (the client tries another proxy).", "proxy", impl=True),
    # (this project's own proxy keys)
    _b("proxyCreateStreamOnWrite", False, "The proxy creates a missing log on its first write (a request can also "
        "ask with WriteContext.create_if_missing); false = LOG_NOT_FOUND.", "proxy", impl=True),
    _i("proxyProducerWindow", 5, "Idempotent producers: per producer and stream, how many of its latest requests "
        "the proxy remembers (sequences, checksum, DLSN) to answer resends; clients are told it and keep at most "
        "this many requests outstanding per stream (Kafka's max.in.flight.requests.per.connection).", "proxy",
        impl=True, min=1, max=64),
    _i("proxyMaxWaitingRequestsPerStream", 64, "Write requests of one stream a proxy lets wait at once (for "
        "the acquisition, their turn, durability); more are answered OVER_CAPACITY at once, so a stalled stream "
        "holds a bounded share of the proxy's RPC threads (--threads, 128); <= 0 = no limit. Fan-in of N producers "
        "into one stream keeps up to N x 4 requests waiting.", "proxy", impl=True),
    _i("proxyMaxProducersPerStream", 10000, "Idempotent producers: most producers a stream remembers; over it the "
        "least recently active is forgotten (a resend of its is answered PRODUCER_STATE_LOST, outcome unknown, and "
        "its client starts a new epoch).", "proxy", impl=True, min=1),
    _i("proxyProducerExpirySeconds", 86400, "Idempotent producers: forget a producer idle on a stream this "
        "long (its next request is answered PRODUCER_STATE_LOST and its client starts a new epoch).", "proxy",
        impl=True, min=1),
    _i("proxyDedupSnapshotInterval", 1000, "Idempotent producers: write a snapshot of every live producer into "
        "the log after this many producer requests (or 16 MiB of them); a new owner reads the log back to the last "
        "snapshot only.", "proxy", impl=True, min=1),
    _i("proxyStreamIdleSeconds", 3600, "A proxy releases a stream it owns when no request of it came for this "
        "long (commits, completes the "
        "segment, releases the lock: its memory and its ZooKeeper lock and watches go; the next request acquires it "
        "again, on any proxy, and the producers' state is rebuilt from the log); <= 0 = never.", "proxy", impl=True),
    _i("maxCachedPartitionsPerProxy", -1, "Partitions a proxy may cache (<= 0 = unlimited).", "proxy"),
    # --- injection ----------------------------------------------------------------------------
    _b("eiInjectWriteDelay", False, "Inject write delays.", "injection"),
    _f("eiInjectedWriteDelayPercent", 0.0, "Percentage of writes delayed.", "injection"),
    _i("eiInjectedWriteDelayMs", 0, "Injected write delay, in milliseconds.", "injection"),
    _b("eiInjectReadAheadStall", False, "Inject readahead stalls.", "injection"),
    _b("eiInjectReadAheadDelay", False, "Inject readahead delays.", "injection"),
    _i("eiInjectMaxReadAheadDelayMs", 0, "Maximum injected readahead delay, in milliseconds.", "injection"),
    _i("eiInjectReadAheadDelayPercent", 10, "Percentage of readahead reads delayed.", "injection"),
    _b("eiInjectReadAheadBrokenEntries", False, "Inject broken entries into readahead.", "injection"),
    # --- legacy -------------------------------------------------------------------------------
    _b("encodeDCIDInVersion", False, "Old sample-file spelling of the region-id encoding flag; not read by "
        "DistributedLog.", "legacy"),
    _b("recoverLogSegmentsInBackground", False, "Recover log segments in the background.", "legacy"),
    _b("sanityCheckDelete", True, "Sanity-check deletions.", "legacy"),
)
# fmt: on


# --------------------------------------------------------------------------------------------
# Lookup tables derived from _SPECS
# --------------------------------------------------------------------------------------------

_BY_NAME: dict[str, KeySpec] = {}
_ALIASES: dict[str, str] = {}
for _spec in _SPECS:
    for _n in (_spec.name, *_spec.aliases):
        if _n in _BY_NAME or _n in _ALIASES:
            raise AssertionError(f"configuration key {_n!r} declared twice")
    if _spec.group not in GROUP_TITLES:
        raise AssertionError(f"configuration key {_spec.name!r} has unknown group {_spec.group!r}")
    if _spec.default is not None:
        _spec.coerce(_spec.default)  # every default passes its own validator
    if _spec.empty_means_unset and (_spec.type is not str or _spec.default is not None):
        raise AssertionError(f"configuration key {_spec.name!r}: empty_means_unset needs a str key defaulting to None")
    _BY_NAME[_spec.name] = _spec
    for _alias in _spec.aliases:
        _ALIASES[_alias] = _spec.name

# Case-insensitive resolution (Spark lowercases option names). Distinct keys never collide.
_LOWER: dict[str, str] = {}
for _n, _canon in [*((s.name, s.name) for s in _SPECS), *_ALIASES.items()]:
    if _LOWER.setdefault(_n.lower(), _canon) != _canon:
        raise AssertionError(f"configuration keys collide ignoring case: {_n!r}")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).replace("-", "_").lower()


_SNAKE: dict[str, str] = {_snake(s.name): s.name for s in _SPECS}


# --------------------------------------------------------------------------------------------
# Key resolution
# --------------------------------------------------------------------------------------------


def _is_passthrough(name: str) -> bool:
    return name.startswith(BKC_PASSTHROUGH_PREFIX) and len(name) > len(BKC_PASSTHROUGH_PREFIX)


def _unknown(name: object, source: str = "") -> NoReturn:
    where = f" (in {source})" if source else ""
    hint = ""
    if isinstance(name, str):
        match = _LOWER.get(name.lower()) or _SNAKE.get(name)
        if match is None:
            close = difflib.get_close_matches(name, [*_BY_NAME, *_ALIASES], n=1, cutoff=0.6)
            match = _ALIASES.get(close[0], close[0]) if close else None
        if match is not None:
            hint = f" (did you mean {match!r}?)"
    raise InvalidConfigError(f"unknown configuration key {name!r}{where}{hint}")


def _resolve(name: object, *, ignore_case: bool = False, source: str = "") -> tuple[str, KeySpec | None]:
    """Map a key (current name, old name, or ``bkc.*``) to (canonical name, spec or None for pass-through)."""
    if not isinstance(name, str):
        _unknown(name, source)
    spec = _BY_NAME.get(name)
    if spec is not None:
        return name, spec
    canon = _ALIASES.get(name)
    if canon is None and ignore_case:
        canon = _LOWER.get(name.lower())
    if canon is not None:
        return canon, _BY_NAME[canon]
    if _is_passthrough(name):
        return name, None
    _unknown(name, source)
