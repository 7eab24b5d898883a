"""Apache DistributedLog's core library in Python.

``storage.open_namespace(uri)`` opens a namespace of logs; each log is written by one writer
(fenced, versioned metadata) and read by any number of readers positioned by DLSN or
transaction id. Everything public is importable from here: namespaces, log managers, writers,
readers, DLSN, records, configuration and every error class.
"""

from importlib import metadata as _metadata

from storage import errors
from storage.config import Config
from storage.errors import *  # noqa: F403  (every error class is re-exported from storage)
from storage.formats.dlsn import DLSN
from storage.formats.record import LogRecord, LogRecordWithDLSN
from storage.formats.segment_metadata import LogSegmentMetadata, SegmentSlice, TruncationStatus
from storage.log.log_manager import LogManager
from storage.log.namespace import Namespace, bind_namespace, open_namespace
from storage.log.reader import AsyncLogReader, LogReader
from storage.log.subscriptions import SubscriberLag, SubscriptionsStore
from storage.log.writer import AsyncLogWriter, LogWriter

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
    "bind_namespace",
    "errors",
    "open_namespace",
]
__all__ += errors.__all__
