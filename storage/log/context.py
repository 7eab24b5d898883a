"""What a log manager needs from the namespace that opened it.

:class:`~storage.log.namespace.Namespace` opens :class:`~storage.log.log_manager.LogManager`\\ s, and each log manager
uses a few of its namespace's parts: the two stores, the lock owner id, the namespace-wide outstanding-write limit,
and three calls. This protocol names exactly those, so the log manager depends on it and not on the namespace (which
would make the two modules import each other). ``Namespace`` satisfies it structurally.
"""

from __future__ import annotations

from typing import Protocol

from storage.common.futures import OutstandingWrites
from storage.log.layout import LogPaths
from storage.metastore.base import MetadataStore
from storage.segstore.base import SegmentStore


class LogContext(Protocol):
    """The namespace seen from one of its logs."""

    #: The metadata store of the namespace.
    metastore: MetadataStore
    #: The segment store of the namespace.
    segstore: SegmentStore
    #: This process's owner id for the logs' write locks (DistributedLog's ``clientId``).
    client_id: str
    #: The namespace's outstanding writes over all its writers, or None without such a limit.
    outstanding: OutstandingWrites | None

    def paths_of(self, name: str) -> LogPaths:
        """The metadata paths of log ``name``."""
        ...

    def create_log(self, name: str, *, exist_ok: bool = False) -> None:
        """Create log ``name``.

        Raises:
            LogExistsError: it exists and ``exist_ok`` is false. InvalidStreamNameError, MetadataError.
        """
        ...

    def check_open(self) -> None:
        """Raises AlreadyClosedError after the namespace was closed."""
        ...

    def forget(self, dlm: object) -> None:
        """Called by a closing log manager: the namespace stops tracking it."""
        ...
