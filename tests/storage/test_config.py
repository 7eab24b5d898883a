"""storage.config: DistributedLog's keys and defaults, parsing, overrides, the sample conf file."""

from __future__ import annotations

import contextlib
import copy
import pickle
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.config import (
    GROUP_TITLES,
    Config,
    ConfigKeyNotImplementedWarning,
    KeySpec,
    parse_properties,
)
from storage.errors import InvalidArgumentError, InvalidConfigError

CONF_FILE = Path(__file__).resolve().parents[2] / "conf" / "distributedlog.conf"

#: spec Appendix A ("Key configuration defaults", DistributedLogConfiguration.java) and the seed's key list.
APPENDIX_A: dict[str, Any] = {
    "ledgerMetadataLayoutVersion": 5,
    "ledgerMetadataSkipMinVersionCheck": False,
    "firstLogsegmentSequenceNumber": 1,
    "logSegmentSequenceNumberValidationEnabled": True,
    "logSegmentNameVersion": 1,
    "enableRecordCounts": True,
    "encodeRegionIDInVersion": False,
    "unpartitionedStreamName": "<default>",
    "createStreamIfNotExists": True,
    "writeLockEnabled": True,
    "lockTimeoutSeconds": 30,
    "writerOutputBufferSize": 1024,
    "periodicFlushFrequencyMilliSeconds": 0,
    "enableImmediateFlush": False,
    "minimumDelayBetweenImmediateFlushMilliSeconds": 0,
    "periodicKeepAliveMilliSeconds": 0,
    "compressionType": "none",
    "isDurableWriteEnabled": True,
    "logSegmentRollingMinutes": 120,
    "maxLogSegmentBytes": 256 * 1024 * 1024,
    "logSegmentRollingConcurrency": 1,
    "logSegmentRetentionHours": 72,
    "explicitTruncationByApp": False,
    "perWriterOutstandingWriteLimit": -1,
    "globalOutstandingWriteLimit": -1,
    "outstandingWriteLimitDarkmode": True,
    "failFastOnStreamNotReady": False,
    "disableRollingOnLogSegmentError": False,
    "readAheadBatchSize": 2,
    "readAheadMaxRecords": 10,
    "readAheadWaitTime": 200,
    "readLACLongPollTimeout": 1000,
    "deserializeRecordSetOnReads": True,
    "readerIdleWarnThresholdMillis": 120000,
    "readerIdleErrorThresholdMillis": 2**31 - 1,
    "ignoreTruncationStatus": False,
    "alertPositionOnTruncated": True,
    "positionGapDetectionEnabled": False,
    "readAheadSkipBrokenEntries": False,
    "firstNumEntriesEachPerLastRecordScan": 2,
    "maxNumEntriesPerReadLastRecordScan": 16,
    "bkcEnsembleSize": 3,
    "bkcWriteQuorumSize": 3,
    "bkcAckQuorumSize": 2,
    "zkSessionTimeoutSeconds": 30,
    "zkNumRetries": 3,
    "zkRetryStartBackoffMillis": 5000,
    "zkRetryMaxBackoffMillis": 30000,
}

#: The keys this project implements (the brief's list; DistributedLog spells the first-scan key
#: ``firstNumEntriesEachPerLastRecordScan`` and still accepts the spec's spelling as an alias).
IMPLEMENTED = {
    "zkAclId",
    # the write proxy (dl_proxy)
    "rpsSoftServiceLimit",
    "rpsHardServiceLimit",
    "bpsSoftServiceLimit",
    "bpsHardServiceLimit",
    "maxAcquiredPartitionsPerProxy",
    "proxyCreateStreamOnWrite",
    "proxyProducerWindow",
    "proxyMaxProducersPerStream",
    "proxyMaxWaitingRequestsPerStream",
    "proxyProducerExpirySeconds",
    "proxyDedupSnapshotInterval",
    "proxyStreamIdleSeconds",
    "ledgerMetadataLayoutVersion",
    "ledgerMetadataSkipMinVersionCheck",
    "firstLogsegmentSequenceNumber",
    "logSegmentSequenceNumberValidationEnabled",
    "enableRecordCounts",
    "encodeRegionIDInVersion",
    "createStreamIfNotExists",
    "writeLockEnabled",
    "lockTimeoutSeconds",
    "writerOutputBufferSize",
    "periodicFlushFrequencyMilliSeconds",
    "enableImmediateFlush",
    "minimumDelayBetweenImmediateFlushMilliSeconds",
    "periodicKeepAliveMilliSeconds",
    "compressionType",
    "isDurableWriteEnabled",
    "logSegmentRollingMinutes",
    "maxLogSegmentBytes",
    "logSegmentRetentionHours",
    "explicitTruncationByApp",
    "failFastOnStreamNotReady",
    "disableRollingOnLogSegmentError",
    "readAheadBatchSize",
    "readAheadMaxRecords",
    "readAheadWaitTime",
    "readLACLongPollTimeout",
    "deserializeRecordSetOnReads",
    "readerIdleWarnThresholdMillis",
    "readerIdleErrorThresholdMillis",
    "ignoreTruncationStatus",
    "alertPositionOnTruncated",
    "positionGapDetectionEnabled",
    "readAheadSkipBrokenEntries",
    "firstNumEntriesEachPerLastRecordScan",
    "maxNumEntriesPerReadLastRecordScan",
    "zkSessionTimeoutSeconds",
    "zkRetryStartBackoffMillis",
    "zkRetryMaxBackoffMillis",
    "zkNumRetries",
    "perWriterOutstandingWriteLimit",
    "rpsSoftWriteLimit",
    "rpsHardWriteLimit",
    "bpsSoftWriteLimit",
    "bpsHardWriteLimit",
    "globalOutstandingWriteLimit",
    "outstandingWriteLimitDarkmode",
    "dynamicConfigReloadIntervalSec",
    "retentionIgnoresSubscribers",
    "enableStats",
    "prometheusStatsHttpPort",
    "prometheusStatsHttpAddress",
    "streamConfigDir",
    "defaultStreamConfigFile",
    # this project's RADOS segment store keys
    "radosClientId",
    "radosKeyring",
    "radosOpTimeoutSeconds",
    "radosConnectTimeoutSeconds",
    "radosMaxObjectBytes",
    "radosMaxWriteBytes",
    "radosMaxInFlightWrites",
    # this project's cold storage keys
    "coldStoreAccessKey",
    "coldStoreSecretKey",
    "coldStoreRequestTimeoutSeconds",
    "coldStoreMaxAttempts",
    "offloadThresholdHours",
    "offloadRetryIntervalSeconds",
    "coldSegmentRetentionHours",
    "writerStateRetentionHours",
}

#: The RADOS segment store keys and their defaults.
RADOS_DEFAULTS: dict[str, Any] = {
    "radosClientId": "admin",
    "radosKeyring": None,
    "radosOpTimeoutSeconds": 30,
    "radosConnectTimeoutSeconds": 10,
    "radosMaxObjectBytes": 64 * 1024 * 1024,
    "radosMaxWriteBytes": 4 * 1024 * 1024,
    "radosMaxInFlightWrites": 1,
}


@pytest.fixture(autouse=True)
def _not_implemented_warnings_are_errors() -> Any:
    """A stray not-implemented warning fails the test unless the test expects it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigKeyNotImplementedWarning)
        yield


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the not-implemented warnings of keys a test sets on purpose."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigKeyNotImplementedWarning)
        yield


# --- defaults -------------------------------------------------------------------------------
def test_defaults_match_appendix_a() -> None:
    conf = Config()
    for key, expected in APPENDIX_A.items():
        value = conf.get(key)
        assert value == expected, key
        assert type(value) is type(expected), key


def test_headline_defaults_exactly() -> None:
    conf = Config()
    assert conf.get("writerOutputBufferSize") == 1024
    assert conf.get("lockTimeoutSeconds") == 30
    assert conf.get("logSegmentRollingMinutes") == 120
    assert conf.get("maxLogSegmentBytes") == 268_435_456
    assert conf.get("logSegmentRetentionHours") == 72
    assert conf.get("readAheadBatchSize") == 2
    assert conf.get("readAheadMaxRecords") == 10
    assert conf.get("readAheadWaitTime") == 200
    assert conf.get("zkSessionTimeoutSeconds") == 30
    assert conf.get("compressionType") == "none"
    assert conf.get("ledgerMetadataLayoutVersion") == 5
    assert conf.get("readerIdleErrorThresholdMillis") == 2_147_483_647
    assert conf.get("ignoreTruncationStatus") is False
    assert conf.get("enableImmediateFlush") is False
    assert conf.get("periodicFlushFrequencyMilliSeconds") == 0


def test_implemented_set_and_spec_table() -> None:
    assert set(Config.keys(implemented=True)) == IMPLEMENTED
    assert len(Config.keys()) == len(set(Config.keys()))
    for spec in Config.specs():
        assert isinstance(spec, KeySpec)
        assert spec.type in (bool, int, float, str)
        assert spec.doc and "\n" not in spec.doc
        assert re.fullmatch(r"[a-z][A-Za-z0-9]*", spec.name), spec.name
        if spec.default is not None:
            assert spec.coerce(spec.default) == spec.default
    assert Config.spec("output-buffer-size").name == "writerOutputBufferSize"
    assert Config.canonical_key("ReadAheadBatchSize") == "readAheadBatchSize"
    assert Config.canonical_key("firstNumEntriesPerReadLastRecordScan") == "firstNumEntriesEachPerLastRecordScan"


def test_typed_properties_cover_every_implemented_key() -> None:
    conf = Config(writerOutputBufferSize=4096, lockTimeoutSeconds=-1, compressionType="lz4", enableImmediateFlush=True)
    assert conf.writer_output_buffer_size == 4096
    assert conf.lock_timeout_seconds == -1
    assert conf.compression_type == "lz4"
    assert conf.enable_immediate_flush is True
    assert conf.read_lac_long_poll_timeout == 1000
    assert conf.encode_region_id_in_version is False
    assert conf.first_num_entries_per_read_last_record_scan == 2
    for spec in Config.specs(implemented=True):
        assert getattr(conf, spec.snake_name) == conf.get(spec.name), spec.name
    with pytest.raises(AttributeError):
        conf.writer_output_buffer_size = 1  # type: ignore[misc]


# --- construction and overrides -------------------------------------------------------------
def test_overrides_and_immutability() -> None:
    base = Config(writerOutputBufferSize=0, periodicFlushFrequencyMilliSeconds=6)
    assert base.get("writerOutputBufferSize") == 0
    derived = base.with_overrides({"writerOutputBufferSize": 512000}, lockTimeoutSeconds=0)
    assert derived.get("writerOutputBufferSize") == 512000
    assert derived.get("periodicFlushFrequencyMilliSeconds") == 6
    assert derived.get("lockTimeoutSeconds") == 0
    assert base.get("writerOutputBufferSize") == 0  # the original is unchanged
    assert base.get("lockTimeoutSeconds") == 30
    assert base.overrides == {"writerOutputBufferSize": 0, "periodicFlushFrequencyMilliSeconds": 6}
    assert base.is_set("writerOutputBufferSize") and not base.is_set("lockTimeoutSeconds")
    with pytest.raises(AttributeError):
        base._values = {}  # type: ignore[misc]
    with pytest.raises(AttributeError):
        base.foo = 1  # type: ignore[attr-defined]


def test_from_dict_parses_strings_by_type() -> None:
    conf = Config.from_dict(
        {
            "writerOutputBufferSize": "1024",
            "maxLogSegmentBytes": " 2147483648 ",
            "enableImmediateFlush": "TRUE",
            "ignoreTruncationStatus": "False",
            "lockTimeoutSeconds": "-1",
            "compressionType": "LZ4",
            "readAheadWaitTime": "0x10",
        }
    )
    assert conf.get("writerOutputBufferSize") == 1024
    assert conf.get("maxLogSegmentBytes") == 2_147_483_648
    assert conf.get("enableImmediateFlush") is True
    assert conf.get("ignoreTruncationStatus") is False
    assert conf.get("lockTimeoutSeconds") == -1
    assert conf.get("compressionType") == "lz4"
    assert conf.get("readAheadWaitTime") == 16


def test_typed_values_accepted_and_float_takes_int() -> None:
    assert Config(enableRecordCounts=False).get("enableRecordCounts") is False
    with quiet():
        conf = Config(zkRequestRateLimit=5)
    value = conf.get("zkRequestRateLimit")
    assert value == 5.0 and isinstance(value, float)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("writerOutputBufferSize", "abc"),
        ("writerOutputBufferSize", "1.5"),
        ("writerOutputBufferSize", 1.0),
        ("writerOutputBufferSize", True),  # a bool is not an int
        ("writerOutputBufferSize", ""),
        ("writerOutputBufferSize", None),
        ("writerOutputBufferSize", -1),
        ("enableImmediateFlush", "maybe"),
        ("enableImmediateFlush", 1),
        ("enableImmediateFlush", ""),
        ("compressionType", "gzip"),
        ("compressionType", 1),
        ("lockTimeoutSeconds", -2),
        ("readAheadBatchSize", 0),
        ("readAheadMaxRecords", "0"),
        ("ledgerMetadataLayoutVersion", 0),
        ("ledgerMetadataLayoutVersion", 6),
        ("logSegmentRollingMinutes", -1),
        ("logSegmentRetentionHours", "-3"),
        ("zkSessionTimeoutSeconds", 0),
        ("firstLogsegmentSequenceNumber", 0),
        ("periodicFlushFrequencyMilliSeconds", [6]),
    ],
)
def test_bad_values_name_the_key_and_value(key: str, value: object) -> None:
    with pytest.raises(InvalidConfigError) as info:
        Config(**{key: value})
    assert key in str(info.value)
    assert repr(value) in str(info.value)
    with pytest.raises(InvalidConfigError, match=key):
        Config().with_overrides({key: value})
    with pytest.raises(InvalidConfigError, match=key):
        Config.from_dict({key: value})


def test_bad_float_values() -> None:
    for value in ("nan", "inf", "x", True):
        with quiet(), pytest.raises(InvalidConfigError, match="zkRequestRateLimit"):
            Config(zkRequestRateLimit=value)


def test_ranges_accept_their_bounds() -> None:
    for version in range(1, 6):
        assert Config(ledgerMetadataLayoutVersion=version).ledger_metadata_layout_version == version
    assert Config(lockTimeoutSeconds=-1).lock_timeout_seconds == -1
    assert Config(lockTimeoutSeconds=0).lock_timeout_seconds == 0
    assert Config(writerOutputBufferSize=0).writer_output_buffer_size == 0
    assert Config(logSegmentRollingMinutes=0).log_segment_rolling_minutes == 0
    assert Config(readAheadBatchSize=1).read_ahead_batch_size == 1


def test_time_keys_take_fractions() -> None:
    conf = Config.from_dict(
        {"logSegmentRollingMinutes": "0.0005", "logSegmentRetentionHours": 1e-9, "lockTimeoutSeconds": "0.25"}
    )
    assert conf.log_segment_rolling_minutes == 0.0005
    assert conf.log_segment_retention_hours == 1e-9
    assert conf.lock_timeout_seconds == 0.25
    whole = Config(logSegmentRollingMinutes=2.0, lockTimeoutSeconds="-1.0")
    assert whole.get("logSegmentRollingMinutes") == 2 and type(whole.get("logSegmentRollingMinutes")) is int
    assert whole.get("lockTimeoutSeconds") == -1 and type(whole.get("lockTimeoutSeconds")) is int
    for key, value in [
        ("logSegmentRollingMinutes", -0.5),
        ("lockTimeoutSeconds", -1.5),
        ("logSegmentRetentionHours", "x"),
    ]:
        with pytest.raises(InvalidConfigError, match=key):
            Config(**{key: value})
    with pytest.raises(InvalidConfigError, match="logSegmentRollingMinutes"):
        Config(logSegmentRollingMinutes=True)
    with pytest.raises(InvalidConfigError, match="writerOutputBufferSize"):
        Config(writerOutputBufferSize=0.5)  # other int keys stay whole numbers


def test_invalid_config_error_is_an_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError):
        Config(writerOutputBufferSize="x")


def test_max_log_segment_bytes_nonpositive_means_default() -> None:
    assert Config(maxLogSegmentBytes=0).max_log_segment_bytes == 256 * 1024 * 1024
    assert Config(maxLogSegmentBytes=-5).get("maxLogSegmentBytes") == 256 * 1024 * 1024
    assert Config(maxLogSegmentBytes=1).max_log_segment_bytes == 1


# --- unknown and not-implemented keys -------------------------------------------------------
def test_unknown_key_raises_naming_it_with_a_suggestion() -> None:
    with pytest.raises(InvalidConfigError, match="writerOutputBuferSize") as info:
        Config(writerOutputBuferSize=1)
    assert "did you mean 'writerOutputBufferSize'" in str(info.value)
    with pytest.raises(InvalidConfigError, match="did you mean 'lockTimeoutSeconds'"):
        Config.from_dict({"lock_timeout_seconds": 1})
    with pytest.raises(InvalidConfigError, match="did you mean 'readAheadBatchSize'"):
        Config.from_dict({"READAHEADBATCHSIZE": 1})
    with pytest.raises(InvalidConfigError, match="noSuchThingAtAll"):
        Config.from_dict({"noSuchThingAtAll": 1})
    with pytest.raises(InvalidConfigError):
        Config.from_dict({3: 1})  # type: ignore[dict-item]
    with pytest.raises(InvalidConfigError, match="bkc\\."):
        Config.from_dict({"bkc.": "x"})


def test_get_unknown_key_raises() -> None:
    conf = Config()
    with pytest.raises(InvalidConfigError, match="writerBufferSize"):
        conf.get("writerBufferSize")
    with pytest.raises(InvalidConfigError, match="nope"):
        conf["nope"]
    assert "writerOutputBufferSize" in conf and "output-buffer-size" in conf and "nope" not in conf


def test_not_implemented_dl_key_warns_stores_and_gets() -> None:
    with pytest.warns(ConfigKeyNotImplementedWarning, match="bkcEnsembleSize"):
        conf = Config(bkcEnsembleSize=5)
    assert conf.get("bkcEnsembleSize") == 5
    assert conf["ensemble-size"] == 5  # DistributedLog's old name
    assert conf.get("bkcWriteQuorumSize") == 3  # unset: DistributedLog's default
    with pytest.warns(ConfigKeyNotImplementedWarning, match="numWorkerThreads"):
        conf2 = conf.with_overrides({"numWorkerThreads": "16"})
    assert conf2.get("numWorkerThreads") == 16
    assert Config().get("numWorkerThreads") is None  # DistributedLog derives it at run time
    with pytest.warns(ConfigKeyNotImplementedWarning, match="bkcNumIOThreads"):
        Config.from_dict({"bkcNumIOThreads": "8"})
    with quiet(), pytest.raises(InvalidConfigError, match="bkcAckQuorumSize"):
        Config(bkcAckQuorumSize="two")


def test_bookkeeper_passthrough_keys() -> None:
    with pytest.warns(ConfigKeyNotImplementedWarning, match="bkc.numChannelsPerBookie"):
        conf = Config.from_dict({"bkc.numChannelsPerBookie": "1"})
    assert conf.get("bkc.numChannelsPerBookie") == "1"
    assert conf.get("bkc.somethingElse") is None
    assert conf.to_dict()["bkc.numChannelsPerBookie"] == "1"
    assert "bkc.numChannelsPerBookie" not in conf.to_dict(implemented=True)


def test_implemented_keys_do_not_warn() -> None:
    # the autouse fixture turns any ConfigKeyNotImplementedWarning into an error
    Config(**{k: Config().get(k) for k in IMPLEMENTED})


# --- old names, case -----------------------------------------------------------------------
def test_old_names_resolve_and_current_name_wins() -> None:
    conf = Config.from_dict({"output-buffer-size": "512000", "rolling-interval": "0", "ReadAheadBatchSize": "10"})
    assert conf.overrides == {"writerOutputBufferSize": 512000, "logSegmentRollingMinutes": 0, "readAheadBatchSize": 10}
    assert conf.get("output-buffer-size") == 512000
    # within one batch the current name wins whatever the order (DistributedLog reads it first)
    for pairs in (
        [("writerOutputBufferSize", 1), ("output-buffer-size", 2)],
        [("output-buffer-size", 2), ("writerOutputBufferSize", 1)],
    ):
        assert Config.from_dict(dict(pairs)).get("writerOutputBufferSize") == 1
    # a later override replaces an earlier one, whichever name it used
    assert conf.with_overrides({"output-buffer-size": 7}).writer_output_buffer_size == 7
    assert Config(writerOutputBufferSize=1).with_overrides({"output-buffer-size": 7}).writer_output_buffer_size == 7


def test_ignore_case_for_spark_options() -> None:
    conf = Config.from_dict({"writeroutputbuffersize": "7", "LOCKTIMEOUTSECONDS": "0"}, ignore_case=True)
    assert conf.overrides == {"writerOutputBufferSize": 7, "lockTimeoutSeconds": 0}
    with pytest.raises(InvalidConfigError):
        Config.from_dict({"writeroutputbuffersize": "7"})


# --- access, equality, repr, pickling -------------------------------------------------------
def test_to_dict_eq_hash_repr() -> None:
    conf = Config(lockTimeoutSeconds=0, writerOutputBufferSize=512000)
    everything = conf.to_dict()
    assert set(everything) == set(Config.keys())
    assert everything["lockTimeoutSeconds"] == 0 and everything["readAheadBatchSize"] == 2
    assert set(conf.to_dict(implemented=True)) == IMPLEMENTED
    assert dict(conf) == everything  # keys() + __getitem__
    assert list(conf) == list(everything)
    assert conf == Config(writerOutputBufferSize=512000, lockTimeoutSeconds=0)
    assert Config() == Config(writerOutputBufferSize=1024)  # compared by effective values
    assert hash(Config()) == hash(Config(writerOutputBufferSize=1024))
    assert conf != Config()
    assert conf != "not a config"
    assert repr(Config()) == "Config()"
    assert repr(conf) == "Config(writerOutputBufferSize=512000, lockTimeoutSeconds=0)"
    with quiet():
        odd = Config(**{"bkc.x": "1"})
    assert repr(odd) == "Config(**{'bkc.x': '1'})"


def test_pickle_round_trip_without_warnings() -> None:
    with quiet():
        conf = Config(writerOutputBufferSize=512000, bkcEnsembleSize=5, **{"bkc.numChannelsPerBookie": "1"})
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(conf, protocol=protocol))  # fixture: a warning would fail
        assert back == conf
        assert back.overrides == conf.overrides
        assert back.writer_output_buffer_size == 512000
        assert back.get("bkc.numChannelsPerBookie") == "1"
    assert copy.copy(conf) is conf
    assert copy.deepcopy(conf) is conf


def test_validate_cross_key_checks() -> None:
    assert Config().validate() == Config()
    with pytest.raises(InvalidConfigError, match="readerIdleWarnThresholdMillis"):
        Config(readerIdleWarnThresholdMillis=1500, readLACLongPollTimeout=1000).validate()
    Config(readerIdleWarnThresholdMillis=0).validate()  # 0 disables the check, as in DistributedLog
    with quiet(), pytest.raises(InvalidConfigError, match="bkcReadTimeoutSeconds"):
        Config(bkcReadTimeoutSeconds=1, readLACLongPollTimeout=2000).validate()


# --- properties format ----------------------------------------------------------------------
def test_parse_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \t\n"
        "a=1\n"
        "b : 2   \n"
        "  c\t3\n"
        "d=\n"
        "e = spaced value  \n"
        "f=multi \\\n"
        "    line\n"
        "g=tab\\there\\u0041\\\\\n"
        "h\\ key\\=x=v\n"
        "i==leading-equals\n"
        "j:k:l\n"
        "k=trailing\\ \n"
        "#k=commented out\n"
        "a=again\r\n"
        "last-without-newline"
    )
    assert parse_properties(text) == [
        ("a", "1"),
        ("b", "2"),
        ("c", "3"),
        ("d", ""),
        ("e", "spaced value"),
        ("f", "multi line"),
        ("g", "tab\thereA\\"),
        ("h key=x", "v"),
        ("i", "=leading-equals"),
        ("j", "k:l"),
        ("k", "trailing "),
        ("a", "again"),
        ("last-without-newline", ""),
    ]
    with pytest.raises(InvalidConfigError, match="line 1"):
        parse_properties("a=\\u12G4")


def test_from_properties_comments_separators_whitespace() -> None:
    conf = Config.from_properties(
        "# writer\n"
        "writerOutputBufferSize = 512000   \n"
        "lockTimeoutSeconds: 0\n"
        "enableImmediateFlush\ttrue\n"
        "! readers\n"
        "   readAheadWaitTime=10\n"
        "compressionType=lz4\n"
        "writerOutputBufferSize=4096\n"  # the last occurrence wins
    )
    assert conf.overrides == {
        "writerOutputBufferSize": 4096,
        "lockTimeoutSeconds": 0,
        "enableImmediateFlush": True,
        "readAheadWaitTime": 10,
        "compressionType": "lz4",
    }
    with pytest.raises(InvalidConfigError, match="enableImmediateFlush"):
        Config.from_properties("enableImmediateFlush\n")  # no value is not a boolean
    with pytest.raises(InvalidConfigError, match="bogusKey"):
        Config.from_properties("bogusKey=1\n")


SAMPLE_DL_CONF = """\
########################
# ZooKeeper Client Settings (DistributedLog's sample file style)
########################
zkSessionTimeoutSeconds=30
zkNumRetries=0
zkRetryStartBackoffMillis=100
zkRetryMaxBackoffMillis=200
bkcZKSessionTimeoutSeconds=60
# bkcNumIOThreads=16
bkc.numChannelsPerBookie=1
lockTimeoutSeconds=0
numWorkerThreads=16
encodeDCIDInVersion=true
ensemble-size=3
write-quorum-size=3
ack-quorum-size=2
output-buffer-size=512000
enableImmediateFlush=false
periodicFlushFrequencyMilliSeconds=6
retention-size=0
rolling-interval=0
maxLogSegmentBytes=2147483648
ReadAheadBatchSize=10
ReadAheadMaxEntries=100
ReadAheadWaitTime=10
"""


def test_load_distributedlog_style_sample(tmp_path: Path) -> None:
    path = tmp_path / "distributedlog.conf"
    path.write_text(SAMPLE_DL_CONF)
    with pytest.warns(ConfigKeyNotImplementedWarning) as record:
        conf = Config.load(path)
    warned = " ".join(str(w.message) for w in record)
    for key in ("bkcZKSessionTimeoutSeconds", "bkc.numChannelsPerBookie", "numWorkerThreads", "bkcEnsembleSize"):
        assert key in warned
    assert "writerOutputBufferSize" not in warned
    assert conf.writer_output_buffer_size == 512000
    assert conf.periodic_flush_frequency_milli_seconds == 6
    assert conf.log_segment_rolling_minutes == 0
    assert conf.log_segment_retention_hours == 0
    assert conf.max_log_segment_bytes == 2_147_483_648
    assert conf.lock_timeout_seconds == 0
    assert (conf.read_ahead_batch_size, conf.read_ahead_max_records, conf.read_ahead_wait_time) == (10, 100, 10)
    assert (conf.zk_num_retries, conf.zk_retry_start_backoff_millis, conf.zk_retry_max_backoff_millis) == (0, 100, 200)
    assert (conf.get("bkcEnsembleSize"), conf.get("bkcWriteQuorumSize"), conf.get("bkcAckQuorumSize")) == (3, 3, 2)
    assert conf.get("numWorkerThreads") == 16
    assert conf.get("bkc.numChannelsPerBookie") == "1"


def test_load_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.conf"
    with pytest.raises(InvalidConfigError, match=re.escape(str(missing))):
        Config.load(missing)
    with pytest.raises(InvalidConfigError, match=re.escape(str(tmp_path))):
        Config.load(tmp_path)  # a directory
    bad = tmp_path / "bad.conf"
    bad.write_text("readAheadBatchSize=lots\n")
    with pytest.raises(InvalidConfigError, match="readAheadBatchSize") as info:
        Config.load(str(bad))
    assert str(bad) in str(info.value) and "'lots'" in str(info.value)


def test_load_latin1_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.conf"
    path.write_bytes("# caf\xe9\nwriterOutputBufferSize=7\n".encode("latin-1"))
    assert Config.load(path).writer_output_buffer_size == 7


# --- the sample conf/distributedlog.conf ----------------------------------------------------
#: Keys conf/distributedlog.conf deliberately sets to something other than DistributedLog's default.
SAMPLE_FILE_SETS: dict[str, Any] = {}


def test_sample_conf_file_loads_cleanly_and_equals_defaults() -> None:
    conf = Config.load(CONF_FILE)  # the autouse fixture fails on any not-implemented warning
    assert conf == Config(**SAMPLE_FILE_SETS)
    assert set(conf.overrides) == IMPLEMENTED  # every implemented key is set ...
    for key, value in conf.overrides.items():
        assert value == SAMPLE_FILE_SETS.get(key, Config().get(key)), key  # ... to its default


def test_sample_conf_file_lists_every_implemented_key_with_a_comment() -> None:
    lines = CONF_FILE.read_text().splitlines()
    for spec in Config.specs(implemented=True):
        matches = [i for i, line in enumerate(lines) if re.match(rf"#?\s*{spec.name}\s*[=:]", line)]
        assert matches, f"{spec.name} missing from {CONF_FILE}"
        assert lines[matches[0] - 1].startswith("#"), f"{spec.name} has no comment line"
    for group in ("Writer", "Reader", "rolling and retention", "lock", "ZooKeeper"):
        assert any(line.startswith("#") and group in line for line in lines), group


# --- RADOS segment store keys --------------------------------------------------------------
def test_rados_keys_defaults_group_and_typed_properties() -> None:
    assert GROUP_TITLES["rados"] == "Ceph RADOS segment store (rados:// bindings)"
    assert [s.name for s in Config.specs() if s.group == "rados"] == list(RADOS_DEFAULTS)
    conf = Config()
    for key, expected in RADOS_DEFAULTS.items():
        spec = Config.spec(key)
        assert spec.implemented, key
        assert spec.default == expected, key
        value = conf.get(key)
        assert value == expected and type(value) is type(expected), key
        assert getattr(conf, spec.snake_name) == expected, key
        assert not conf.is_set(key)
    assert conf.rados_client_id == "admin"
    assert conf.rados_keyring is None
    assert conf.rados_op_timeout_seconds == 30
    assert conf.rados_connect_timeout_seconds == 10
    assert conf.rados_max_object_bytes == 67_108_864
    assert conf.rados_max_write_bytes == 4_194_304
    assert conf.rados_max_in_flight_writes == 1


def test_rados_keys_set_and_bounds_accepted() -> None:
    conf = Config(
        radosClientId="dlog",
        radosKeyring="/etc/ceph/ceph.client.dlog.keyring",
        radosOpTimeoutSeconds=1,
        radosConnectTimeoutSeconds=1,
        radosMaxObjectBytes=65536,
        radosMaxWriteBytes=4096,
        radosMaxInFlightWrites=1,
    )  # the autouse fixture fails on a not-implemented warning
    assert conf.rados_client_id == "dlog"
    assert conf.rados_keyring == "/etc/ceph/ceph.client.dlog.keyring"
    assert (conf.rados_op_timeout_seconds, conf.rados_connect_timeout_seconds) == (1, 1)
    assert (conf.rados_max_object_bytes, conf.rados_max_write_bytes, conf.rados_max_in_flight_writes) == (
        65536,
        4096,
        1,
    )
    assert pickle.loads(pickle.dumps(conf)) == conf
    assert Config.from_dict({"radosMaxObjectBytes": "0x8000000"}).rados_max_object_bytes == 128 * 1024 * 1024


def test_rados_keyring_empty_means_unset() -> None:
    for value in ("", "   ", None):
        conf = Config(radosKeyring=value)
        assert conf.rados_keyring is None and conf.is_set("radosKeyring")
        assert conf == Config()
    assert Config.from_properties("radosKeyring=\n").rados_keyring is None
    assert Config(radosKeyring="/k").with_overrides({"radosKeyring": ""}).rados_keyring is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("radosOpTimeoutSeconds", 0),
        ("radosOpTimeoutSeconds", "-5"),
        ("radosOpTimeoutSeconds", "1.5"),
        ("radosConnectTimeoutSeconds", 0),
        ("radosConnectTimeoutSeconds", True),
        ("radosMaxObjectBytes", 65535),
        ("radosMaxObjectBytes", "64MiB"),
        ("radosMaxWriteBytes", "abc"),
        ("radosMaxWriteBytes", 4095),
        ("radosMaxInFlightWrites", 0),
        ("radosMaxInFlightWrites", ""),
        ("radosClientId", 7),
        ("radosClientId", None),
        ("radosKeyring", 5),
    ],
)
def test_rados_bad_values_name_the_key(key: str, value: object) -> None:
    with pytest.raises(InvalidConfigError) as info:
        Config(**{key: value})
    assert key in str(info.value) and repr(value) in str(info.value)
    with pytest.raises(InvalidConfigError, match=key):
        Config.from_dict({key: value})
    with pytest.raises(InvalidConfigError, match=key):
        Config().with_overrides({key: value})


def test_rados_bad_values_in_a_properties_file_name_key_and_path(tmp_path: Path) -> None:
    for line, key in [
        ("radosOpTimeoutSeconds=0", "radosOpTimeoutSeconds"),
        ("radosMaxWriteBytes=abc", "radosMaxWriteBytes"),
    ]:
        path = tmp_path / "bad.conf"
        path.write_text(line + "\n")
        with pytest.raises(InvalidConfigError, match=key) as info:
            Config.load(path)
        assert str(path) in str(info.value)


def test_rados_keys_loaded_from_a_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "rados.conf"
    path.write_text(
        "# RADOS segment store\n"
        "radosClientId = dlog\n"
        "radosKeyring: /etc/ceph/ceph.client.dlog.keyring\n"
        "radosOpTimeoutSeconds=5\n"
        "radosConnectTimeoutSeconds=3\n"
        "radosMaxObjectBytes=33554432\n"
        "radosMaxWriteBytes=1048576\n"
        "radosMaxInFlightWrites=4\n"
    )
    conf = Config.load(path)
    assert conf.overrides == {
        "radosClientId": "dlog",
        "radosKeyring": "/etc/ceph/ceph.client.dlog.keyring",
        "radosOpTimeoutSeconds": 5,
        "radosConnectTimeoutSeconds": 3,
        "radosMaxObjectBytes": 32 * 1024 * 1024,
        "radosMaxWriteBytes": 1024 * 1024,
        "radosMaxInFlightWrites": 4,
    }
    assert Config.from_properties(conf.to_properties()) == conf


def test_sample_conf_file_has_the_rados_section() -> None:
    text = CONF_FILE.read_text()
    assert "# Ceph RADOS segment store (rados:// bindings)\n" in text
    assert "\nradosKeyring=\n" in text  # unset: Ceph's default keyring search
    conf = Config.load(CONF_FILE)
    for key, expected in RADOS_DEFAULTS.items():
        assert conf.get(key) == expected, key


# --- round trips ----------------------------------------------------------------------------
def _value_strategy(spec: KeySpec) -> st.SearchStrategy[Any]:
    if spec.type is bool:
        return st.booleans()
    if spec.type is int:
        lo = int(spec.min) if spec.min is not None else -(2**40)
        hi = int(spec.max) if spec.max is not None else 2**40
        whole = st.integers(min_value=lo, max_value=hi)
        if spec.fractional:
            return whole | st.floats(min_value=lo, max_value=hi, allow_nan=False)
        return whole
    if spec.type is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if spec.choices:
        return st.sampled_from(spec.choices)
    return st.text(st.characters(codec="utf-8"))


_ALL_VALUES = st.fixed_dictionaries({}, optional={s.name: _value_strategy(s) for s in Config.specs()})


@settings(max_examples=150, deadline=None)
@given(overrides=_ALL_VALUES)
def test_properties_round_trip(overrides: dict[str, Any]) -> None:
    with quiet():
        conf = Config(**overrides)
        text = conf.to_properties(implemented_only=False)
        back = Config.from_properties(text)
    assert back == conf
    for key in overrides:
        assert back.get(key) == conf.get(key)


@settings(max_examples=100, deadline=None)
@given(overrides=_ALL_VALUES)
def test_pickle_and_string_round_trip(overrides: dict[str, Any]) -> None:
    with quiet():
        conf = Config(**overrides)
        assert pickle.loads(pickle.dumps(conf)) == conf
        as_strings = {
            k: (("true" if v else "false") if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v))
            for k, v in overrides.items()
        }
        assert Config.from_dict(as_strings) == conf
