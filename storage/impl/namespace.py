"""Namespaces: a set of logs sharing one metadata store and one segment store.

URIs (CONTRACT §2):

* ``distributedlog-local:///abs/path`` or a plain filesystem path: the embedded default.
  Metadata in ``<path>/metadata/metadata.db`` (SQLite, WAL), segment data in
  ``<path>/segments/``. Created on first use; safe for many processes on one machine.
* ``distributedlog://host:port[,host:port]/path`` (alias ``distributedlog-zk://``): ZooKeeper
  metadata (its own issue; refused with a clear error until it lands).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path
from urllib.parse import unquote, urlparse

from storage.config import Config
from storage.errors import AlreadyClosedError, InvalidArgumentError, LogExistsError, MetadataError, NoNodeError
from storage.impl.layout import LOG_ROOT, LogMetadata, LogPaths, join
from storage.impl.log_manager import LogManager
from storage.impl.names import is_reserved, validate_log_name
from storage.metastore.base import MetadataStore
from storage.metastore.sqlite import SqliteMetadataStore
from storage.segstore.base import SegmentStore
from storage.segstore.local import LocalSegmentStore

LOCAL_SCHEME = "distributedlog-local"
ZK_SCHEMES = ("distributedlog", "distributedlog-zk")


def local_path_of(uri: str) -> Path | None:
    """The directory of an embedded namespace URI, or None for a ZooKeeper URI.

    Raises:
        InvalidArgumentError: not a URI this library understands.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidArgumentError(f"namespace URI must be a non-empty string, got {uri!r}")
    if "://" not in uri:
        return Path(uri).expanduser().absolute()
    parsed = urlparse(uri)
    if parsed.scheme == LOCAL_SCHEME:
        if parsed.netloc not in ("", "localhost"):
            raise InvalidArgumentError(
                f"embedded namespace URI {uri!r} must have an absolute path: {LOCAL_SCHEME}:///abs/path"
            )
        path = unquote(parsed.path)
        if not path.startswith("/"):
            raise InvalidArgumentError(f"embedded namespace URI {uri!r} must have an absolute path")
        return Path(path)
    if parsed.scheme in ZK_SCHEMES:
        return None
    raise InvalidArgumentError(
        f"unsupported namespace URI {uri!r}: use {LOCAL_SCHEME}:///abs/path, a plain path, or distributedlog://host:port/path"
    )


class Namespace:
    """A namespace of logs. A context manager; ``close()`` closes every log manager opened."""

    def __init__(
        self, uri: str, metastore: MetadataStore, segstore: SegmentStore, conf: Config, root: str = "/"
    ) -> None:
        self.uri = uri
        self.metastore = metastore
        self.segstore = segstore
        self.conf = conf
        self.root = root
        self.client_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._closed = False
        self._lock = threading.Lock()
        self._managers: list[LogManager] = []

    def paths_of(self, name: str) -> LogPaths:
        return LogPaths(self.root, name)

    # --- logs -----------------------------------------------------------------------------
    def create_log(self, name: str, *, exist_ok: bool = False) -> None:
        """Create a log.

        Raises:
            InvalidStreamNameError, LogExistsError (unless ``exist_ok``), AlreadyClosedError.
        """
        self.check_open()
        norm = validate_log_name(name)
        try:
            LogMetadata(self.metastore, self.paths_of(norm)).create()
        except LogExistsError:
            if not exist_ok:
                raise

    def delete_log(self, name: str) -> None:
        """Delete a log: its segments' data, then its metadata.

        Raises:
            InvalidStreamNameError, LogNotFoundError, AlreadyClosedError.
        """
        self.check_open()
        meta = LogMetadata(self.metastore, self.paths_of(validate_log_name(name)))
        meta.ensure_exists()
        for seg in meta.segments():
            self.segstore.delete_ledger(seg.ledger_id)
        alloc = meta.allocation().value
        if alloc:
            self.segstore.delete_ledger(int(alloc))
        meta.delete()

    def log_exists(self, name: str) -> bool:
        """True if the log exists. Raises InvalidStreamNameError."""
        self.check_open()
        return LogMetadata(self.metastore, self.paths_of(validate_log_name(name))).exists()

    def list_logs(self) -> list[str]:
        """Names of every log, sorted (nested names included; reserved names hidden)."""
        self.check_open()
        out: list[str] = []

        def walk(path: str, prefix: str) -> None:
            try:
                kids = self.metastore.children(path)
            except NoNodeError:
                return
            for k in kids:
                if is_reserved(k):
                    continue
                child = join(path, k)
                name = f"{prefix}{k}"
                try:
                    sub = self.metastore.children(child)
                except NoNodeError:
                    continue
                if LOG_ROOT in sub:
                    out.append(name)
                else:
                    walk(child, name + "/")

        walk(self.root, "")
        return sorted(out)

    def open_log(self, name: str, conf: Config | dict[str, object] | None = None) -> LogManager:
        """A :class:`LogManager` for ``name`` (the log need not exist yet: a writer creates it).

        ``conf`` is a :class:`Config` or a dict of overrides on the namespace's config.

        Raises:
            InvalidStreamNameError, InvalidConfigError, AlreadyClosedError.
        """
        self.check_open()
        norm = validate_log_name(name)
        if conf is None:
            log_conf = self.conf
        elif isinstance(conf, Config):
            log_conf = conf
        elif isinstance(conf, dict):
            log_conf = self.conf.with_overrides(conf)
        else:
            raise InvalidArgumentError(f"conf must be a storage.Config or a dict, got {type(conf).__name__}")
        dlm = LogManager(self, norm, log_conf)
        with self._lock:
            self._managers.append(dlm)
        return dlm

    # --- lifecycle ------------------------------------------------------------------------
    def check_open(self) -> None:
        """Raises AlreadyClosedError after close()."""
        if self._closed:
            raise AlreadyClosedError(f"namespace {self.uri!r} is closed")

    def close(self) -> None:
        """Close every log manager, then the stores. Idempotent."""
        if self._closed:
            return
        with self._lock:
            managers, self._managers = self._managers, []
        for m in managers:
            m.close()
        self._closed = True
        self.segstore.close()
        self.metastore.close()

    def __enter__(self) -> Namespace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_namespace(uri: str, conf: Config | dict[str, object] | None = None) -> Namespace:
    """Open (creating on first use, for the embedded default) the namespace at ``uri``.

    Raises:
        InvalidArgumentError: a malformed or unsupported URI. InvalidConfigError: bad conf.
        MetadataError: the metadata store cannot be opened.
    """
    if conf is None:
        cfg = Config()
    elif isinstance(conf, Config):
        cfg = conf
    elif isinstance(conf, dict):
        cfg = Config.from_dict(conf)
    else:
        raise InvalidArgumentError(f"conf must be a storage.Config or a dict, got {type(conf).__name__}")
    path = local_path_of(uri)
    if path is None:
        raise MetadataError(f"ZooKeeper namespaces ({uri}) are not supported by this build yet")
    try:
        (path / "metadata").mkdir(parents=True, exist_ok=True)
        (path / "segments").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise MetadataError(f"cannot create embedded namespace at {path}: {e}") from e
    metastore = SqliteMetadataStore(path / "metadata" / "metadata.db")
    try:
        segstore = LocalSegmentStore(path / "segments")
    except BaseException:
        metastore.close()
        raise
    return Namespace(uri, metastore, segstore, cfg)
