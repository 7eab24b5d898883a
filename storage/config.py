"""Configuration: Apache DistributedLog's keys, defaults and property-file format.

Every key is declared once, in :data:`_SPECS`, next to its DistributedLog default
(``DistributedLogConfiguration.java``), its type, a one-line doc, its allowed range and whether
this project implements it. Everything else (parsing, validation, the typed snake_case
properties, the sample ``conf/distributedlog.conf``) is derived from that table.

* ``Config(**overrides)``, ``Config.from_dict(d)``, ``Config.load(path)``,
  ``Config.from_properties(text)``, ``conf.with_overrides(d)``: every entry point accepts typed
  values or strings (parsed by the key's type), resolves DistributedLog's old key names
  (``output-buffer-size``, ``rolling-interval``, ``ReadAheadBatchSize`` ...) to the current ones,
  and raises :class:`~storage.errors.InvalidConfigError` naming the key for an unknown key or a
  bad value.
* A DistributedLog key this project does not implement (``bkcEnsembleSize``, ``numWorkerThreads``
  ...) and BookKeeper pass-through keys (``bkc.*``) are accepted with a
  :class:`ConfigKeyNotImplementedWarning`, stored, and returned by :meth:`Config.get`.
* A :class:`Config` is immutable, hashable, comparable (by effective values) and picklable.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, TypeVar, overload

from storage.errors import InvalidConfigError

__all__ = [
    "BKC_PASSTHROUGH_PREFIX",
    "GROUP_TITLES",
    "Config",
    "ConfigKeyNotImplementedWarning",
    "KeySpec",
    "parse_properties",
]

_log = logging.getLogger(__name__)

#: Keys with this prefix are BookKeeper client settings DistributedLog passes through verbatim.
BKC_PASSTHROUGH_PREFIX = "bkc."

_JAVA_INT_MAX = 2**31 - 1

Scalar = bool | int | float | str


class ConfigKeyNotImplementedWarning(UserWarning):
    """A DistributedLog key this project accepts and stores but does not act on."""


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
    "bookkeeper": "BookKeeper client",
    "namespace": "Namespace: executors, caches, allocators, federation",
    "stats": "Tracing and stats",
    "features": "Feature providers and dynamic configuration",
    "proxy": "Write proxy rate limits",
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
) -> KeySpec:
    return KeySpec(name, str, default, doc, group, impl, (), None, None, choices)


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
    _b("alertPositionOnTruncated", True, "Fail a reader positioned inside truncated data "
        "(AlreadyTruncatedTransaction).", "reader", impl=True),
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
    _s("zkAclId", None, "Digest id for ZooKeeper ACLs (unset = no ACL).", "zookeeper"),
    _f("zkRequestRateLimit", 0.0, "ZooKeeper requests per second (<= 0 = unlimited).", "zookeeper"),
    _i("zkcNumRetryThreads", 1, "Threads retrying ZooKeeper requests.", "zookeeper"),
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
    # --- features -----------------------------------------------------------------------------
    _s("featureProviderClass", "org.apache.distributedlog.feature.DefaultFeatureProvider", "Feature provider class.",
        "features"),
    _s("fileFeatureProviderBaseConfigPath", "decider.conf", "Base file of the file feature provider.", "features"),
    _s("fileFeatureProviderOverlayConfigPath", None, "Overlay file of the file feature provider.", "features"),
    _i("dynamicConfigReloadIntervalSec", 60, "Reload interval of dynamic configuration, in seconds.", "features"),
    _s("streamConfigRouterClass", "org.apache.distributedlog.service.config.IdentityConfigRouter", "Routes a stream "
        "to its dynamic configuration.", "features"),
    # --- proxy --------------------------------------------------------------------------------
    _i("bpsSoftWriteLimit", -1, "Per-stream soft write limit, in bytes per second.", "proxy"),
    _i("bpsHardWriteLimit", -1, "Per-stream hard write limit, in bytes per second.", "proxy"),
    _i("rpsSoftWriteLimit", -1, "Per-stream soft write limit, in requests per second.", "proxy"),
    _i("rpsHardWriteLimit", -1, "Per-stream hard write limit, in requests per second.", "proxy"),
    _i("rpsSoftServiceLimit", -1, "Per-proxy soft limit, in requests per second.", "proxy"),
    _i("rpsHardServiceLimit", -1, "Per-proxy hard limit, in requests per second.", "proxy"),
    _i("rpsStreamAcquireServiceLimit", -1, "Per-proxy rate above which streams are not acquired.", "proxy"),
    _i("bpsSoftServiceLimit", -1, "Per-proxy soft limit, in bytes per second.", "proxy"),
    _i("bpsHardServiceLimit", -1, "Per-proxy hard limit, in bytes per second.", "proxy"),
    _i("bpsStreamAcquireServiceLimit", -1, "Per-proxy byte rate above which streams are not acquired.", "proxy"),
    _i("maxAcquiredPartitionsPerProxy", -1, "Partitions a proxy may own (<= 0 = unlimited).", "proxy"),
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


# --------------------------------------------------------------------------------------------
# Java properties format
# --------------------------------------------------------------------------------------------

_LINE_SPLIT = re.compile(r"\r\n|\r|\n")
_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _trailing_backslashes(text: str) -> int:
    return len(text) - len(text.rstrip("\\"))


def _unescape(text: str, source: str, lineno: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise InvalidConfigError(f"malformed \\uXXXX escape in {source}, line {lineno}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str, *, source: str = "<string>") -> list[tuple[str, str]]:
    """Parse Java-properties text into ``(key, value)`` pairs, in file order.

    Follows ``java.util.Properties.load``: ``key=value``, ``key: value`` or ``key value``; ``#`` and
    ``!`` comment lines; blank lines; a trailing backslash continues a line; ``\\t \\n \\r \\f \\uXXXX``
    escapes. Unlike Java (like DistributedLog's commons-configuration reader) trailing whitespace
    of a value is dropped unless escaped.
    """
    lines = _LINE_SPLIT.split(text)
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = _strip_trailing(lines[i]).lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _trailing_backslashes(line) % 2 == 1:  # continuation
            line = line[:-1]
            if i >= len(lines):
                break
            line += _strip_trailing(lines[i]).lstrip(_WS)
            i += 1
        key, value = _split_key_value(line)
        pairs.append((_unescape(key, source, lineno), _unescape(value, source, lineno)))
    return pairs


def _strip_trailing(raw: str) -> str:
    stripped = raw.rstrip(_WS)
    if len(stripped) < len(raw) and _trailing_backslashes(stripped) % 2 == 1:
        return stripped + raw[len(stripped)]  # the last backslash escapes a whitespace character
    return stripped


def _split_key_value(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        ch = line[j]
        if ch == "\\":
            j += 2
            continue
        if ch in "=:" or ch in _WS:
            break
        j += 1
    key = line[:j]
    rest = line[j:].lstrip(_WS)
    if rest and rest[0] in "=:" and (j >= len(line) or line[j] in _WS):
        rest = rest[1:].lstrip(_WS)
    elif j < len(line) and line[j] in "=:":
        rest = line[j + 1 :].lstrip(_WS)
    return key, rest


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    last = len(text) - 1
    for idx, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ch == " " and (is_key or idx == 0 or idx == last or text[idx + 1 :].strip(" ") == ""):
            out.append("\\ ")
        elif is_key and ch in "=:#!":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def _render_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return _escape(str(value), is_key=False)


# --------------------------------------------------------------------------------------------
# Typed properties
# --------------------------------------------------------------------------------------------

T = TypeVar("T")


class _Prop(Generic[T]):
    """A read-only typed view of one implemented key: ``conf.writer_output_buffer_size``."""

    __slots__ = ("key", "spec")

    def __init__(self, key: str, tp: type[T]) -> None:
        spec = _BY_NAME.get(key)
        if spec is None or not spec.implemented or not (spec.type is tp or (spec.fractional and tp is float)):
            raise AssertionError(f"typed property for {key!r} does not match the key table")
        self.key = key
        self.spec = spec

    def __set_name__(self, owner: type, name: str) -> None:
        if name not in {_snake(n) for n in (self.key, *self.spec.aliases)}:
            raise AssertionError(f"property {name!r} should be named {self.spec.snake_name!r}")

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Prop[T]: ...

    @overload
    def __get__(self, obj: Config, owner: type | None = None) -> T: ...

    def __get__(self, obj: Config | None, owner: type | None = None) -> _Prop[T] | T:
        if obj is None:
            return self
        result: T = obj.get(self.key)
        return result

    def __set__(self, obj: Config, value: object) -> NoReturn:
        raise AttributeError(f"Config is immutable; use with_overrides({{{self.key!r}: ...}})")


# --------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------


def _restore(values: dict[str, Any]) -> Config:
    """Unpickle: the stored values were validated when first set (no warnings on Spark workers)."""
    conf = Config.__new__(Config)
    object.__setattr__(conf, "_values", dict(values))
    return conf


class Config:
    """An immutable DistributedLog configuration: defaults plus explicitly set keys."""

    __slots__ = ("_values",)
    _values: dict[str, Any]

    def __init__(self, **overrides: object) -> None:
        object.__setattr__(self, "_values", _merge({}, overrides, source="", stacklevel=3))

    # --- construction -------------------------------------------------------------------
    @classmethod
    def _of(cls, values: dict[str, Any]) -> Config:
        conf = cls.__new__(cls)
        object.__setattr__(conf, "_values", values)
        return conf

    @classmethod
    def from_dict(cls, d: Mapping[str, object], *, ignore_case: bool = False) -> Config:
        """A configuration from ``d`` (typed values or strings); ``ignore_case`` matches keys case-insensitively."""
        return cls._of(_merge({}, d, ignore_case=ignore_case, source="", stacklevel=3))

    @classmethod
    def from_properties(cls, text: str, *, source: str = "<string>") -> Config:
        """A configuration from Java-properties text (see :func:`parse_properties`)."""
        return cls._of(_merge({}, _ordered(parse_properties(text, source=source)), source=source, stacklevel=3))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """Read a DistributedLog properties file (``conf/distributedlog.conf``)."""
        name = os.fspath(path)
        try:
            with open(name, "rb") as fh:
                data = fh.read()
        except FileNotFoundError as exc:
            raise InvalidConfigError(f"configuration file not found: {name}") from exc
        except OSError as exc:
            raise InvalidConfigError(f"cannot read configuration file {name}: {exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")  # java.util.Properties' encoding
        pairs = parse_properties(text, source=name)
        return cls._of(_merge({}, _ordered(pairs), source=name, stacklevel=3))

    def with_overrides(self, overrides: Mapping[str, object] | None = None, /, **kw: object) -> Config:
        """A new configuration: this one with ``overrides`` (and ``kw``) applied. ``self`` is unchanged."""
        updates: dict[str, object] = dict(overrides or {})
        updates.update(kw)
        return self._of(_merge(self._values, updates, source="", stacklevel=3))

    # --- key table ----------------------------------------------------------------------
    @classmethod
    def specs(cls, *, implemented: bool | None = None) -> tuple[KeySpec, ...]:
        """Every known key's spec, in table order; ``implemented=True/False`` filters."""
        return tuple(s for s in _SPECS if implemented is None or s.implemented is implemented)

    @classmethod
    def keys(cls, *, implemented: bool | None = None) -> tuple[str, ...]:
        """Every known key's current name, in table order; ``implemented=True/False`` filters."""
        return tuple(s.name for s in cls.specs(implemented=implemented))

    @classmethod
    def spec(cls, key: str) -> KeySpec:
        """The spec of ``key`` (current or old name); :class:`InvalidConfigError` for an unknown key."""
        canon, spec = _resolve(key)
        if spec is None:
            raise InvalidConfigError(f"{canon!r} is a BookKeeper pass-through key with no spec")
        return spec

    @classmethod
    def canonical_key(cls, key: str, *, ignore_case: bool = False) -> str:
        """The current name of ``key`` (resolving old names); :class:`InvalidConfigError` if unknown."""
        return _resolve(key, ignore_case=ignore_case)[0]

    # --- access -------------------------------------------------------------------------
    def get(self, key: str) -> Any:
        """The effective value of ``key`` (current or old name). Unset ``bkc.*`` keys are ``None``."""
        canon, spec = _resolve(key)
        if spec is None:
            return self._values.get(canon)
        return spec.effective(self._values.get(canon, spec.default))

    def __getitem__(self, key: str) -> Any:
        return self.get(key)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is a known key (set or not)."""
        return isinstance(key, str) and (key in _BY_NAME or key in _ALIASES or _is_passthrough(key))

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def is_set(self, key: str) -> bool:
        """Whether ``key`` was set explicitly (even to its default)."""
        return _resolve(key)[0] in self._values

    @property
    def overrides(self) -> dict[str, Any]:
        """The explicitly set keys (current names) and their values."""
        return dict(self._values)

    def to_dict(self, *, implemented: bool | None = None) -> dict[str, Any]:
        """Every key's effective value (and any ``bkc.*`` pass-through keys set)."""
        out = {s.name: s.effective(self._values.get(s.name, s.default)) for s in self.specs(implemented=implemented)}
        if implemented is not True:
            out.update((k, v) for k, v in self._values.items() if k not in _BY_NAME)
        return out

    def validate(self) -> Config:
        """DistributedLog's cross-key checks (``DistributedLogConfiguration.validate``); returns ``self``."""
        lac = self.read_lac_long_poll_timeout
        if int(self.get("bkcReadTimeoutSeconds")) * 1000 < lac:
            raise InvalidConfigError(
                f"invalid configuration: bkcReadTimeoutSeconds ({self.get('bkcReadTimeoutSeconds')}) should be "
                f"longer than readLACLongPollTimeout ({lac} ms)"
            )
        warn = self.reader_idle_warn_threshold_millis
        if warn > 0 and warn <= 2 * lac:
            raise InvalidConfigError(
                f"invalid configuration: readerIdleWarnThresholdMillis ({warn}) should be more than twice "
                f"readLACLongPollTimeout ({lac})"
            )
        return self

    def to_properties(self, *, implemented_only: bool = True, header: str = "") -> str:
        """Render as a commented properties file, grouped by section.

        Every implemented key is written as ``key=value`` (its effective value); with
        ``implemented_only=False`` the known-but-not-implemented keys follow, commented out
        unless set, and any ``bkc.*`` keys set.
        """
        out: list[str] = [f"# {line}".rstrip() for line in header.splitlines()]
        for group, title in GROUP_TITLES.items():
            specs = [s for s in _SPECS if s.group == group and (s.implemented or not implemented_only)]
            if not specs:
                continue
            out += ["", "#" * 60, f"# {title}", "#" * 60]
            for s in specs:
                suffix = "" if s.implemented else " (not implemented: accepted with a warning)"
                out += ["", f"# {s.doc}{suffix}"]
                value = self.get(s.name)
                line = f"{_escape(s.name, is_key=True)}={'' if value is None else _render_value(value)}"
                out.append(line if s.implemented or s.name in self._values else "#" + line)
        extra = [k for k in self._values if k not in _BY_NAME]
        if extra and not implemented_only:
            out += ["", "# BookKeeper client pass-through settings"]
            out += [f"{_escape(k, is_key=True)}={_render_value(self._values[k])}" for k in extra]
        return "\n".join(out).lstrip("\n") + "\n"

    # --- dunder -------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(frozenset(self.to_dict().items()))

    def __repr__(self) -> str:
        order = {name: i for i, name in enumerate(_BY_NAME)}
        known = sorted((k for k in self._values if k in _BY_NAME), key=order.__getitem__)
        parts = [f"{k}={self._values[k]!r}" for k in known]
        extra = {k: v for k, v in self._values.items() if k not in _BY_NAME}
        if extra:
            parts.append(f"**{extra!r}")
        return f"Config({', '.join(parts)})"

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("Config is immutable; use with_overrides()")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("Config is immutable")

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return (_restore, (dict(self._values),))

    def __copy__(self) -> Config:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Config:
        return self

    # --- typed properties of the implemented keys (names checked against the table) -------
    # writer
    create_stream_if_not_exists = _Prop("createStreamIfNotExists", bool)
    compression_type = _Prop("compressionType", str)
    fail_fast_on_stream_not_ready = _Prop("failFastOnStreamNotReady", bool)
    disable_rolling_on_log_segment_error = _Prop("disableRollingOnLogSegmentError", bool)
    is_durable_write_enabled = _Prop("isDurableWriteEnabled", bool)
    writer_output_buffer_size = _Prop("writerOutputBufferSize", int)
    periodic_flush_frequency_milli_seconds = _Prop("periodicFlushFrequencyMilliSeconds", int)
    enable_immediate_flush = _Prop("enableImmediateFlush", bool)
    minimum_delay_between_immediate_flush_milli_seconds = _Prop("minimumDelayBetweenImmediateFlushMilliSeconds", int)
    periodic_keep_alive_milli_seconds = _Prop("periodicKeepAliveMilliSeconds", int)
    per_writer_outstanding_write_limit = _Prop("perWriterOutstandingWriteLimit", int)
    global_outstanding_write_limit = _Prop("globalOutstandingWriteLimit", int)
    outstanding_write_limit_darkmode = _Prop("outstandingWriteLimitDarkmode", bool)
    # segments / retention
    log_segment_rolling_minutes = _Prop("logSegmentRollingMinutes", float)  # int unless set to a fraction
    max_log_segment_bytes = _Prop("maxLogSegmentBytes", int)
    log_segment_retention_hours = _Prop("logSegmentRetentionHours", float)  # int unless set to a fraction
    explicit_truncation_by_app = _Prop("explicitTruncationByApp", bool)
    # locking
    write_lock_enabled = _Prop("writeLockEnabled", bool)
    lock_timeout_seconds = _Prop("lockTimeoutSeconds", float)  # int unless set to a fraction
    # reader
    read_ahead_batch_size = _Prop("readAheadBatchSize", int)
    read_ahead_max_records = _Prop("readAheadMaxRecords", int)
    read_ahead_wait_time = _Prop("readAheadWaitTime", int)
    read_lac_long_poll_timeout = _Prop("readLACLongPollTimeout", int)
    deserialize_record_set_on_reads = _Prop("deserializeRecordSetOnReads", bool)
    reader_idle_warn_threshold_millis = _Prop("readerIdleWarnThresholdMillis", int)
    reader_idle_error_threshold_millis = _Prop("readerIdleErrorThresholdMillis", int)
    ignore_truncation_status = _Prop("ignoreTruncationStatus", bool)
    alert_position_on_truncated = _Prop("alertPositionOnTruncated", bool)
    position_gap_detection_enabled = _Prop("positionGapDetectionEnabled", bool)
    read_ahead_skip_broken_entries = _Prop("readAheadSkipBrokenEntries", bool)
    first_num_entries_each_per_last_record_scan = _Prop("firstNumEntriesEachPerLastRecordScan", int)
    first_num_entries_per_read_last_record_scan = _Prop("firstNumEntriesEachPerLastRecordScan", int)
    max_num_entries_per_read_last_record_scan = _Prop("maxNumEntriesPerReadLastRecordScan", int)
    # metadata
    ledger_metadata_layout_version = _Prop("ledgerMetadataLayoutVersion", int)
    ledger_metadata_skip_min_version_check = _Prop("ledgerMetadataSkipMinVersionCheck", bool)
    first_logsegment_sequence_number = _Prop("firstLogsegmentSequenceNumber", int)
    log_segment_sequence_number_validation_enabled = _Prop("logSegmentSequenceNumberValidationEnabled", bool)
    enable_record_counts = _Prop("enableRecordCounts", bool)
    encode_region_id_in_version = _Prop("encodeRegionIDInVersion", bool)
    # zookeeper
    zk_session_timeout_seconds = _Prop("zkSessionTimeoutSeconds", int)
    zk_num_retries = _Prop("zkNumRetries", int)
    zk_retry_start_backoff_millis = _Prop("zkRetryStartBackoffMillis", int)
    zk_retry_max_backoff_millis = _Prop("zkRetryMaxBackoffMillis", int)


def _ordered(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Last occurrence of a key wins (keys compared exactly, as in a properties file)."""
    out: dict[str, str] = {}
    for key, value in pairs:
        out.pop(key, None)
        out[key] = value
    return out


def _merge(
    base: Mapping[str, Any],
    updates: Mapping[str, object],
    *,
    ignore_case: bool = False,
    source: str,
    stacklevel: int,
) -> dict[str, Any]:
    """Validate ``updates`` and apply them over ``base``; return the new stored values.

    Within one batch a key's current name wins over its old names (as DistributedLog's getters
    read the current name first); otherwise the later entry wins.
    """
    resolved: list[tuple[int, str, KeySpec | None, object, str]] = []
    for key, value in updates.items():
        canon, spec = _resolve(key, ignore_case=ignore_case, source=source)
        rank = 1 if spec is not None and key == spec.name else 0
        resolved.append((rank, canon, spec, value, key))
    resolved.sort(key=lambda r: r[0])  # stable: old names first, then current names
    new: dict[str, Any] = {}
    for _rank, canon, spec, value, key in resolved:
        if spec is None:
            new[canon] = _passthrough_value(canon, value, source)
        else:
            new[canon] = spec.coerce(value, source=source)
        if key != canon:
            _log.debug("configuration key %r is an old name of %r", key, canon)
    for canon in new:
        spec = _BY_NAME.get(canon)
        if spec is None or not spec.implemented:
            where = f" (in {source})" if source else ""
            kind = "BookKeeper pass-through key" if spec is None else "DistributedLog configuration key"
            warnings.warn(
                f"{kind} {canon!r}{where} is not implemented by this project: stored, but has no effect",
                ConfigKeyNotImplementedWarning,
                stacklevel=stacklevel,
            )
    merged = dict(base)
    merged.update(new)
    return merged
