"""The option names ``format("distributedlog")`` accepts, and the check that refuses any other one
with the closest valid name (a misspelt option would otherwise be ignored silently).

Spark lower-cases option names before the data source sees them, so names are compared
lower-case and suggested in their canonical camelCase. Besides the source's and the sink's own
options, the names Spark itself passes are accepted: ``path`` (``load(path)`` / ``save(path)`` /
``start(path)``), and for a streaming sink ``checkpointLocation`` and ``queryName``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from dl_spark.errors import SinkOptionError, SourceOptionError
from storage.config import Config
from storage.errors import InvalidConfigError

__all__ = [
    "CONF_PREFIX",
    "SINK_OPTIONS",
    "SOURCE_OPTIONS",
    "check_sink_option_names",
    "check_source_option_names",
    "conf_options",
]

#: Options ``dlog.<key>`` are DistributedLog configuration keys of the namespace the source or the sink opens
#: (``dlog.logSegmentRetentionHours``, ``dlog.coldStoreAccessKey``...), as Kafka's ``kafka.<key>``.
CONF_PREFIX = "dlog."

#: The options Spark passes to a data source on its own.
SPARK_OPTIONS: tuple[str, ...] = ("path",)

#: Every option of the source (``spark.read`` / ``spark.readStream``).
SOURCE_OPTIONS: tuple[str, ...] = (
    "uri",
    "streams",
    "streamPattern",
    "startingOffsets",
    "startingTxId",
    "endingOffsets",
    "endingTxId",
    "maxRecordsPerTrigger",
    "maxBytesPerTrigger",
    "minRecordsPerTrigger",
    "maxTriggerDelay",
    "maxRecordsPerPartition",
    "minPartitions",
    "minRecordsPerPartition",
    "maxPartitions",
    "failOnDataLoss",
    "subscriberId",
    *SPARK_OPTIONS,
)

#: Every option of the sink (``df.write`` / ``df.writeStream``); Spark passes ``checkpointLocation``
#: and ``queryName`` to a streaming sink.
SINK_OPTIONS: tuple[str, ...] = (
    "uri",
    "stream",
    "checkpointLocation",
    "stagingRetentionMs",
    "compressionType",
    "writerId",
    "writerVersion",
    "queryName",
    *SPARK_OPTIONS,
)


def _unknown(options: Mapping[str, object], valid: Iterable[str]) -> tuple[str, str] | None:
    """``(name, hint)`` of the first option (sorted) not in ``valid``, or None."""
    canonical = {name.lower(): name for name in valid}
    unknown = sorted(str(k) for k in options if str(k).lower() not in canonical)
    if not unknown:
        return None
    name = unknown[0]
    close = difflib.get_close_matches(name.lower(), list(canonical), n=1, cutoff=0.6)
    if close:
        return name, f"did you mean {canonical[close[0]]}?"
    return name, "valid options: " + ", ".join(sorted(canonical.values(), key=str.lower))


def _check(
    options: Mapping[str, object], valid: Iterable[str], error: type[SinkOptionError | SourceOptionError]
) -> None:
    bad = _unknown(options, valid)
    if bad is not None:
        raise error(f"unknown option {bad[0]} for format distributedlog; {bad[1]}")


def check_source_option_names(options: Mapping[str, object]) -> None:
    """Refuse an option the source does not know.

    Raises:
        SourceOptionError: ``unknown option <name> for format distributedlog; did you mean <valid>?``
            (or the list of valid names when none is close).
    """
    _check(options, SOURCE_OPTIONS, SourceOptionError)


def check_sink_option_names(options: Mapping[str, object]) -> None:
    """Refuse an option the sink does not know.

    Raises:
        SinkOptionError: ``unknown option <name> for format distributedlog; did you mean <valid>?``
            (or the list of valid names when none is close).
    """
    _check(options, SINK_OPTIONS, SinkOptionError)


def conf_options(
    options: Mapping[str, object], error: type[SinkOptionError] | type[SourceOptionError]
) -> dict[str, object]:
    """The ``dlog.<key>`` options as configuration overrides (canonical key names, checked values).

    Raises:
        ``error``: an unknown configuration key or a bad value (naming the option).
    """
    conf: dict[str, object] = {}
    for name, value in options.items():
        text = str(name)
        if not text.lower().startswith(CONF_PREFIX):
            continue
        try:
            key = Config.canonical_key(text[len(CONF_PREFIX) :], ignore_case=True)
            conf[key] = Config.spec(key).coerce(value)
        except InvalidConfigError as e:
            raise error(f"option {text}: {e}") from None
    return conf
