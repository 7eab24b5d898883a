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

import logging
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, Generic, NoReturn, TypeVar, overload

# The key table and the properties format live in submodules; their names are re-exported here,
# so ``from storage.config import ...`` reaches all of them.
from storage.config._keys import _ALIASES as _ALIASES
from storage.config._keys import _BY_NAME as _BY_NAME
from storage.config._keys import _FALSE as _FALSE
from storage.config._keys import _HEX_RE as _HEX_RE
from storage.config._keys import _INT_RE as _INT_RE
from storage.config._keys import _JAVA_INT_MAX as _JAVA_INT_MAX
from storage.config._keys import _LOWER as _LOWER
from storage.config._keys import _SNAKE as _SNAKE
from storage.config._keys import _SPECS as _SPECS
from storage.config._keys import _TRUE as _TRUE
from storage.config._keys import BKC_PASSTHROUGH_PREFIX as BKC_PASSTHROUGH_PREFIX
from storage.config._keys import GROUP_TITLES as GROUP_TITLES
from storage.config._keys import KeySpec as KeySpec
from storage.config._keys import Scalar as Scalar
from storage.config._keys import _b as _b
from storage.config._keys import _bad as _bad
from storage.config._keys import _f as _f
from storage.config._keys import _i as _i
from storage.config._keys import _is_passthrough as _is_passthrough
from storage.config._keys import _passthrough_value as _passthrough_value
from storage.config._keys import _resolve as _resolve
from storage.config._keys import _s as _s
from storage.config._keys import _snake as _snake
from storage.config._keys import _to_bool as _to_bool
from storage.config._keys import _to_float as _to_float
from storage.config._keys import _to_int as _to_int
from storage.config._keys import _to_number as _to_number
from storage.config._keys import _to_str as _to_str
from storage.config._keys import _unknown as _unknown
from storage.config._properties import _ESCAPES as _ESCAPES
from storage.config._properties import _LINE_SPLIT as _LINE_SPLIT
from storage.config._properties import _WS as _WS
from storage.config._properties import _escape as _escape
from storage.config._properties import _ordered as _ordered
from storage.config._properties import _render_value as _render_value
from storage.config._properties import _split_key_value as _split_key_value
from storage.config._properties import _strip_trailing as _strip_trailing
from storage.config._properties import _trailing_backslashes as _trailing_backslashes
from storage.config._properties import _unescape as _unescape
from storage.config._properties import parse_properties as parse_properties
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


class ConfigKeyNotImplementedWarning(UserWarning):
    """A DistributedLog key this project accepts and stores but does not act on."""


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
    rps_soft_write_limit = _Prop("rpsSoftWriteLimit", int)
    rps_hard_write_limit = _Prop("rpsHardWriteLimit", int)
    bps_soft_write_limit = _Prop("bpsSoftWriteLimit", int)
    bps_hard_write_limit = _Prop("bpsHardWriteLimit", int)
    # stats
    enable_stats = _Prop("enableStats", bool)
    prometheus_stats_http_port = _Prop("prometheusStatsHttpPort", int)
    prometheus_stats_http_address = _Prop("prometheusStatsHttpAddress", str)
    # dynamic configuration
    dynamic_config_reload_interval_sec = _Prop("dynamicConfigReloadIntervalSec", float)  # int unless a fraction
    stream_config_dir = _Prop("streamConfigDir", str)
    default_stream_config_file = _Prop("defaultStreamConfigFile", str)
    # segments / retention
    log_segment_rolling_minutes = _Prop("logSegmentRollingMinutes", float)  # int unless set to a fraction
    max_log_segment_bytes = _Prop("maxLogSegmentBytes", int)
    log_segment_retention_hours = _Prop("logSegmentRetentionHours", float)  # int unless set to a fraction
    explicit_truncation_by_app = _Prop("explicitTruncationByApp", bool)
    writer_state_retention_hours = _Prop("writerStateRetentionHours", float)
    retention_ignores_subscribers = _Prop("retentionIgnoresSubscribers", bool)
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
    # write proxy
    rps_soft_service_limit = _Prop("rpsSoftServiceLimit", int)
    rps_hard_service_limit = _Prop("rpsHardServiceLimit", int)
    bps_soft_service_limit = _Prop("bpsSoftServiceLimit", int)
    bps_hard_service_limit = _Prop("bpsHardServiceLimit", int)
    max_acquired_partitions_per_proxy = _Prop("maxAcquiredPartitionsPerProxy", int)
    proxy_create_stream_on_write = _Prop("proxyCreateStreamOnWrite", bool)
    proxy_producer_window = _Prop("proxyProducerWindow", int)
    proxy_max_producers_per_stream = _Prop("proxyMaxProducersPerStream", int)
    proxy_max_waiting_requests_per_stream = _Prop("proxyMaxWaitingRequestsPerStream", int)
    proxy_producer_expiry_seconds = _Prop("proxyProducerExpirySeconds", int)
    proxy_dedup_snapshot_interval = _Prop("proxyDedupSnapshotInterval", int)
    proxy_stream_idle_seconds = _Prop("proxyStreamIdleSeconds", int)
    # zookeeper
    zk_session_timeout_seconds = _Prop("zkSessionTimeoutSeconds", int)
    zk_num_retries = _Prop("zkNumRetries", int)
    zk_acl_id: _Prop[str | None] = _Prop("zkAclId", str)  # None: no ACL (open)
    zk_retry_start_backoff_millis = _Prop("zkRetryStartBackoffMillis", int)
    zk_retry_max_backoff_millis = _Prop("zkRetryMaxBackoffMillis", int)
    # rados
    rados_client_id = _Prop("radosClientId", str)
    rados_keyring: _Prop[str | None] = _Prop("radosKeyring", str)  # None: unset (Ceph's default search)
    rados_op_timeout_seconds = _Prop("radosOpTimeoutSeconds", int)
    rados_connect_timeout_seconds = _Prop("radosConnectTimeoutSeconds", int)
    rados_max_object_bytes = _Prop("radosMaxObjectBytes", int)
    rados_max_write_bytes = _Prop("radosMaxWriteBytes", int)
    rados_max_in_flight_writes = _Prop("radosMaxInFlightWrites", int)
    # cold storage
    cold_store_access_key: _Prop[str | None] = _Prop("coldStoreAccessKey", str)  # None: the AWS variables
    cold_store_secret_key: _Prop[str | None] = _Prop("coldStoreSecretKey", str)
    cold_store_request_timeout_seconds = _Prop("coldStoreRequestTimeoutSeconds", int)
    cold_store_max_attempts = _Prop("coldStoreMaxAttempts", int)
    offload_threshold_hours = _Prop("offloadThresholdHours", float)
    offload_retry_interval_seconds = _Prop("offloadRetryIntervalSeconds", float)
    cold_segment_retention_hours = _Prop("coldSegmentRetentionHours", float)


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
