"""Options of the ``format("distributedlog")`` source, parsed and checked up front.

:func:`parse_source_options` turns Spark's option map (keys are case-insensitive; Spark lower-cases
them) into a frozen, picklable :class:`SourceOptions`. Every problem raises
:class:`~dl_spark.errors.SourceOptionError` with a one-line message naming the option, so Spark
reports it when the DataFrame is defined, before any data is read.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dl_spark._option_names import CONF_PREFIX, check_source_option_names, conf_options
from dl_spark.errors import SourceOptionError
from dl_spark.offsets import offset_to_dlsn
from storage.errors import InvalidArgumentError, InvalidStreamNameError
from storage.formats.dlsn import DLSN
from storage.log.names import validate_log_name
from storage.log.subscriptions import validate_subscriber_id

__all__ = [
    "DEFAULT_MAX_TRIGGER_DELAY_MS",
    "LogStart",
    "SourceOptions",
    "StartSpec",
    "default_subscriber_id",
    "parse_duration_ms",
    "parse_source_options",
]

#: ``maxTriggerDelay`` default, as Kafka's: 15 minutes.
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

#: Where one log starts or ends: a DLSN, or the symbolic ``"earliest"`` / ``"latest"``.
LogStart = DLSN | Literal["earliest", "latest"]


@dataclass(frozen=True)
class StartSpec:
    """A parsed ``startingOffsets`` / ``endingOffsets`` value.

    ``kind`` is ``"earliest"``, ``"latest"`` (every log), ``"json"`` (``per_log`` gives the logs it
    names; the others take ``default``) or ``"committed"`` (``committed_log``: the sink's latest
    commit of that log holds the positions).
    """

    kind: Literal["earliest", "latest", "json", "committed"]
    per_log: tuple[tuple[str, LogStart], ...] = ()
    committed_log: str = ""

    def position_of(self, log: str, default: Literal["earliest", "latest"]) -> LogStart:
        """The position this spec gives ``log`` (``default`` for a log a JSON spec does not name)."""
        if self.kind == "earliest" or self.kind == "latest":
            return self.kind
        for name, pos in self.per_log:
            if name == log:
                return pos
        return default


@dataclass(frozen=True)
class SourceOptions:
    """The source's options, checked. Plain values only (pickled to Spark's Python workers)."""

    uri: str
    streams: tuple[str, ...] | None
    stream_pattern: str | None
    starting: StartSpec | None
    starting_txid: int | None
    ending: StartSpec | None
    max_records_per_trigger: int | None
    max_bytes_per_trigger: int | None
    min_records_per_trigger: int | None
    max_trigger_delay_ms: int
    max_records_per_partition: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    #: ``endingTxId``: a batch read stops every log before its first record with txid >= this (exclusive).
    ending_txid: int | None = None
    #: Under which name a streaming query records its committed positions in each log's
    #: subscriptions store (``subscriberId``; default :func:`default_subscriber_id`).
    subscriber_id: str = ""
    #: ``dlog.<key>`` options: DistributedLog configuration of the namespace the source opens, in the driver and
    #: in every reading task (e.g. ``dlog.coldStoreAccessKey``/``dlog.coldStoreSecretKey`` for an S3 cold store).
    conf: tuple[tuple[str, Any], ...] = ()
    #: ``minRecordsPerPartition``: slices smaller than this are packed, across logs, into partitions of about
    #: this many records (None: one partition per segment slice).
    min_records_per_partition: int | None = None
    #: ``maxPartitions``: small slices are packed, across logs, until the plan has at most this many partitions.
    max_partitions: int | None = None

    def conf_dict(self) -> dict[str, Any] | None:
        """The ``dlog.<key>`` configuration overrides, or None."""
        return dict(self.conf) or None

    def matches(self, log: str) -> bool:
        """True if ``log`` is one of this source's logs (named in ``streams`` or matching ``streamPattern``)."""
        if self.streams is not None:
            return log in self.streams
        assert self.stream_pattern is not None
        return re.fullmatch(self.stream_pattern, log) is not None


def _get(options: Mapping[str, str], key: str) -> str | None:
    v = options.get(key.lower())
    if v is None:
        return None
    return str(v)


def _positive_int(options: Mapping[str, str], key: str, *, minimum: int = 1) -> int | None:
    raw = _get(options, key)
    if raw is None:
        return None
    text = raw.strip()
    if not re.fullmatch(r"[+]?[0-9]{1,19}", text):
        raise SourceOptionError(f"option {key} must be an integer >= {minimum}, got {raw!r}")
    value = int(text)
    if value < minimum or value > (1 << 63) - 1:
        raise SourceOptionError(f"option {key} must be an integer >= {minimum}, got {raw!r}")
    return value


_DURATION = re.compile(r"\s*([0-9]{1,15})\s*(us|ms|s|m|min|h|d)?\s*", re.IGNORECASE)
_UNIT_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(raw: str, key: str = "maxTriggerDelay") -> int:
    """A duration in Spark's form (``"15m"``, ``"30s"``, ``"500ms"``, ``"2h"``; a bare number is ms).

    Raises:
        SourceOptionError: not such a duration.
    """
    m = _DURATION.fullmatch(raw)
    if m is None:
        raise SourceOptionError(f"option {key} must be a duration such as '15m', '30s' or '500ms', got {raw!r}")
    unit = (m.group(2) or "ms").lower()
    return int(int(m.group(1)) * _UNIT_MS[unit])


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = _get(options, key)
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise SourceOptionError(f"option {key} must be 'true' or 'false', got {raw!r}")
    return text == "true"


def _check_log_name(name: str, key: str) -> str:
    try:
        return validate_log_name(name)
    except InvalidStreamNameError as e:
        raise SourceOptionError(f"option {key}: invalid log name {name!r}: {e}") from None


def _parse_spec(raw: str, key: str, *, ending: bool) -> StartSpec:
    text = raw.strip()
    low = text.lower()
    if low in ("earliest", "latest"):
        if ending and low == "earliest":
            raise SourceOptionError(f"option {key} cannot be 'earliest'; use 'latest' or a JSON object of DLSNs")
        return StartSpec(low)  # type: ignore[arg-type]
    if low.startswith("committed:"):
        if ending:
            raise SourceOptionError(f"option {key} does not accept 'committed:<log>'")
        log = text[len("committed:") :].strip()
        if not log:
            raise SourceOptionError(f"option {key}: 'committed:' must name the sink's output log, e.g. committed:out")
        return StartSpec("committed", committed_log=_check_log_name(log, key))
    if not text.startswith("{"):
        raise SourceOptionError(
            f"option {key} must be 'earliest', 'latest', 'committed:<log>' or a JSON object "
            f'{{"log": "lssn,entry,slot" | "earliest" | "latest"}}, got {raw!r}'
        )
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise SourceOptionError(f"option {key} is not valid JSON ({e}): {raw!r}") from None
    if not isinstance(doc, dict):
        raise SourceOptionError(f"option {key} must be a JSON object {{log: position}}, got {raw!r}")
    per_log: list[tuple[str, LogStart]] = []
    for name, value in doc.items():
        log = _check_log_name(str(name), key)
        if isinstance(value, str) and value.strip().lower() in ("earliest", "latest"):
            word = value.strip().lower()
            if ending and word == "earliest":
                raise SourceOptionError(f"option {key}: log {log!r} cannot end at 'earliest'")
            per_log.append((log, word))  # type: ignore[arg-type]
        else:
            per_log.append((log, offset_to_dlsn(value, log)))
    return StartSpec("json", per_log=tuple(sorted(per_log, key=lambda p: p[0])))


def default_subscriber_id(uri: str, streams: tuple[str, ...] | None, pattern: str | None) -> str:
    """``spark-`` and 16 hex digits of a hash of the namespace URI and the source's logs: stable across
    restarts of a query; two queries reading the same logs of the same namespace share it unless one
    sets ``subscriberId``.

    It cannot include the query's name (``queryName``): PySpark 4.3 gives a Python stream reader only the
    ``readStream`` options, in a runner process of its own with no query context (no query name, id or
    checkpoint location; checked with a real query). Only the executors' tasks see the name (their job
    description), and they do not record positions."""
    what = json.dumps([uri, list(streams) if streams is not None else None, pattern])
    return "spark-" + hashlib.sha256(what.encode()).hexdigest()[:16]


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Check and parse the options of the source (batch and streaming alike; what depends on the
    mode is checked by :meth:`SourceOptions` users: ``endingOffsets`` on a stream, ``latest`` starts
    of a batch).

    Raises:
        SourceOptionError: a missing ``uri``; both or neither of ``streams`` / ``streamPattern``;
            an invalid log name or regex; malformed JSON offsets; a log in the offsets that is not
            one of the source's logs; a bad number, boolean or duration; an invalid ``subscriberId``;
            an unknown option (naming the closest valid one); ``startingOffsets`` with ``startingTxId``,
            ``endingOffsets`` with ``endingTxId``, or ``endingTxId`` below ``startingTxId``.
    """
    conf = conf_options(options, SourceOptionError)
    check_source_option_names({k: v for k, v in options.items() if not str(k).lower().startswith(CONF_PREFIX)})
    opts = {str(k).lower(): v for k, v in options.items()}
    uri = (_get(opts, "uri") or "").strip()
    if not uri:
        raise SourceOptionError("option uri is required: the namespace URI, e.g. distributedlog-local:///abs/path")
    streams_raw = _get(opts, "streams")
    pattern_raw = _get(opts, "streamPattern")
    if streams_raw is not None and pattern_raw is not None:
        raise SourceOptionError("options streams and streamPattern are exclusive: give exactly one of them")
    if streams_raw is None and pattern_raw is None:
        raise SourceOptionError("one of the options streams (comma-separated log names) or streamPattern is required")
    streams: tuple[str, ...] | None = None
    pattern: str | None = None
    if streams_raw is not None:
        names = [s.strip() for s in streams_raw.split(",")]
        if not names or any(not n for n in names):
            raise SourceOptionError(f"option streams must be a comma-separated list of log names, got {streams_raw!r}")
        streams = tuple(dict.fromkeys(_check_log_name(n, "streams") for n in names))
    else:
        assert pattern_raw is not None
        if not pattern_raw.strip():
            raise SourceOptionError("option streamPattern must be a non-empty regular expression")
        try:
            re.compile(pattern_raw)
        except re.error as e:
            msg = f"option streamPattern is not a valid regular expression ({e}): {pattern_raw!r}"
            raise SourceOptionError(msg) from None
        pattern = pattern_raw

    starting_raw = _get(opts, "startingOffsets")
    starting = _parse_spec(starting_raw, "startingOffsets", ending=False) if starting_raw is not None else None
    starting_txid = _positive_int(opts, "startingTxId", minimum=0)
    if starting is not None and starting_txid is not None:
        raise SourceOptionError("options startingOffsets and startingTxId are exclusive: give at most one")
    ending_raw = _get(opts, "endingOffsets")
    ending = _parse_spec(ending_raw, "endingOffsets", ending=True) if ending_raw is not None else None
    ending_txid = _positive_int(opts, "endingTxId", minimum=0)
    if ending is not None and ending_txid is not None:
        raise SourceOptionError("options endingOffsets and endingTxId are exclusive: give at most one")
    if ending_txid is not None and starting_txid is not None and ending_txid < starting_txid:
        raise SourceOptionError(
            f"option endingTxId ({ending_txid}) is below startingTxId ({starting_txid}): the range "
            "[startingTxId, endingTxId) would be empty; endingTxId is exclusive"
        )

    subscriber_raw = _get(opts, "subscriberId")
    if subscriber_raw is None:
        subscriber = default_subscriber_id(uri, streams, pattern)
    else:
        try:
            subscriber = validate_subscriber_id(subscriber_raw.strip())
        except InvalidArgumentError as e:
            raise SourceOptionError(f"option subscriberId: {e}") from None

    delay_raw = _get(opts, "maxTriggerDelay")
    delay = DEFAULT_MAX_TRIGGER_DELAY_MS if delay_raw is None else parse_duration_ms(delay_raw)
    parsed = SourceOptions(
        uri=uri,
        streams=streams,
        stream_pattern=pattern,
        starting=starting,
        starting_txid=starting_txid,
        ending=ending,
        max_records_per_trigger=_positive_int(opts, "maxRecordsPerTrigger"),
        max_bytes_per_trigger=_positive_int(opts, "maxBytesPerTrigger"),
        min_records_per_trigger=_positive_int(opts, "minRecordsPerTrigger"),
        max_trigger_delay_ms=delay,
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        min_partitions=_positive_int(opts, "minPartitions"),
        min_records_per_partition=_positive_int(opts, "minRecordsPerPartition"),
        max_partitions=_positive_int(opts, "maxPartitions"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        ending_txid=ending_txid,
        subscriber_id=subscriber,
        conf=tuple(sorted(conf.items())),
    )
    for spec, key in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        for log, _ in spec.per_log if spec is not None else ():
            if not parsed.matches(log):
                what = f"streams {list(streams)}" if streams is not None else f"streamPattern {pattern!r}"
                raise SourceOptionError(f"option {key} names log {log!r}, which is not one of {what}")
    return parsed
