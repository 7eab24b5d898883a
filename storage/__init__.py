"""Apache DistributedLog's core library in Python.

``storage.open_namespace(uri)`` opens a namespace of logs; each log is written by one writer
(fenced, versioned metadata) and read by any number of readers positioned by DLSN or
transaction id. See CONTRACT.md §3 for the public surface.
"""

from importlib import metadata as _metadata

from storage import errors
from storage.config import Config
from storage.dlsn import DLSN
from storage.errors import *  # noqa: F403  (every error is re-exported, as the contract says)
from storage.errors import __all__ as _error_names
from storage.impl.log_manager import LogManager
from storage.impl.namespace import Namespace, bind_namespace, open_namespace
from storage.impl.reader import AsyncLogReader, LogReader
from storage.impl.subscriptions import SubscriberLag, SubscriptionsStore
from storage.impl.writer import AsyncLogWriter, LogWriter
from storage.record import LogRecord, LogRecordWithDLSN
from storage.segment_metadata import LogSegmentMetadata, SegmentSlice, TruncationStatus

DistributedLogManager = LogManager

try:
    #: The installed distribution's version (``distributedlog-py``).
    __version__ = _metadata.version("distributedlog-py")
except _metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "DLSN",
    "AsyncLogReader",
    "AsyncLogWriter",
    "Config",
    "DistributedLogManager",
    "LogManager",
    "LogReader",
    "LogRecord",
    "LogRecordWithDLSN",
    "LogSegmentMetadata",
    "LogWriter",
    "Namespace",
    "SegmentSlice",
    "SubscriberLag",
    "SubscriptionsStore",
    "TruncationStatus",
    "errors",
    "bind_namespace",
    "open_namespace",
    *_error_names,
]
