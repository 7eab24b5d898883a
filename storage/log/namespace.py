"""Namespaces: a set of logs sharing one metadata store and one segment store.

URIs:

* ``distributedlog-local:///abs/path`` or a plain filesystem path: the embedded default.
  Metadata in ``<path>/metadata/metadata.db`` (SQLite, WAL), segment data in
  ``<path>/segments/``. Created on first use (not by ``open_namespace(uri, create=False)``, which
  readers use); safe for many processes on one machine.
* ``distributedlog://host:port[,host:port]/path`` (alias ``distributedlog-zk://``): metadata in
  ZooKeeper under ``/path`` (DistributedLog's layout, ``storage.log.layout``). Such a namespace
  is *bound* once to where its segment data lives, local files or Ceph RADOS
  (``bind_namespace``, as ``dlog admin bind`` does; :mod:`storage.log.binding`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from pathlib import Path
from urllib.parse import unquote, urlparse

from storage.common import stats
from storage.common.durable import makedirs_durable
from storage.common.futures import OutstandingWrites
from storage.config import Config
from storage.config.dynamic import DynamicConfig, DynamicConfigWatcher, stream_config_files
from storage.errors import (
    AlreadyClosedError,
    DLError,
    InvalidArgumentError,
    InvalidConfigError,
    LedgerNotFoundError,
    LogExistsError,
    MetadataError,
    NamespaceNotFoundError,
    NoNodeError,
)
from storage.log import binding
from storage.log.catalog import LogCatalog
from storage.log.layout import LogMetadata, LogPaths
from storage.log.log_manager import LogManager
from storage.log.names import validate_log_name
from storage.log.subscriptions import SubscriberPositions
from storage.log.tiered import TieredSegmentStore, forget_cold_copies
from storage.metastore.base import MetadataStore
from storage.metastore.sqlite import SqliteMetadataStore
from storage.segstore.base import SegmentStore
from storage.segstore.local import LocalSegmentStore

log = logging.getLogger(__name__)

LOCAL_SCHEME = "distributedlog-local"
ZK_SCHEMES = ("distributedlog", "distributedlog-zk")


def zk_location_of(uri: str) -> tuple[str, str]:
    """``(hosts, chroot path)`` of a ZooKeeper namespace URI.

    Raises:
        InvalidArgumentError: not a ZooKeeper namespace URI, or no servers / path.
    """
    parsed = urlparse(uri)
    if parsed.scheme not in ZK_SCHEMES:
        raise InvalidArgumentError(f"not a ZooKeeper namespace URI: {uri!r}")
    hosts = parsed.netloc
    path = unquote(parsed.path).rstrip("/")
    if not hosts:
        raise InvalidArgumentError(f"ZooKeeper namespace URI {uri!r} names no servers: distributedlog://host:port/path")
    if not path:
        raise InvalidArgumentError(f"ZooKeeper namespace URI {uri!r} needs a path: distributedlog://host:port/path")
    return hosts, path


def _open_zk_store(uri: str, conf: Config, *, create: bool = True) -> MetadataStore:
    hosts, path = zk_location_of(uri)
    return _zk_store(hosts, path, conf, create=create)


def _zk_store(hosts: str, path: str, conf: Config, *, create: bool) -> MetadataStore:
    from storage.metastore.zookeeper import ZooKeeperMetadataStore  # the only module that imports kazoo

    return ZooKeeperMetadataStore(
        hosts,
        path,
        create_root=create,
        session_timeout_s=float(conf.get("zkSessionTimeoutSeconds")),
        # the first connection waits one session timeout, as DistributedLog's ZooKeeper client does
        open_timeout_s=float(conf.get("zkSessionTimeoutSeconds")),
        open_timeout_name="zkSessionTimeoutSeconds",
        retry_max_tries=int(conf.get("zkNumRetries")),
        retry_start_backoff_ms=int(conf.get("zkRetryStartBackoffMillis")),
        retry_max_backoff_ms=int(conf.get("zkRetryMaxBackoffMillis")),
        acl_id=conf.zk_acl_id,
    )


def bind_namespace(
    uri: str, segments: str, conf: Config | dict[str, object] | None = None, *, cold: str | None = None
) -> None:
    """Bind a ZooKeeper namespace to its segment store (creating the namespace path), and optionally to a cold
    store (``cold``: ``s3://BUCKET/PREFIX?endpoint=HOST:PORT&scheme=http|https&region=R`` or ``file:///abs/path``,
    :mod:`storage.cold`). A namespace already bound to ``segments`` may add ``cold`` later; another cold store than
    the bound one is refused. The cold store is checked (reachable, bucket present, credentials accepted,
    writable) before anything is written.

    ``segments`` is ``file:///abs/path`` on a filesystem every reader and writer can see, or
    ``rados://POOL?conf=/etc/ceph/ceph.conf[&id=CLIENT][&keyring=PATH][&namespace=NS]`` (see
    :mod:`storage.log.binding`). Rebinding to the same location is a no-op; to another location it is refused.

    All or nothing: ZooKeeper is reached first (creating nothing), then the segment store is opened (a file store's
    directory is made), and only then is the namespace's znode created, with the binding in it, in one operation. A
    bind that fails anywhere leaves no namespace behind (and removes a file store directory it made), so the
    namespace still "does not exist" rather than being "not bound".

    Raises:
        InvalidArgumentError: a bad URI. MetadataError: already bound elsewhere, or ZooKeeper fails
            (MetadataConnectionError: unreachable, retriable).
        SegmentStoreError: the segment store cannot be opened (unreachable cluster, bad
            credentials, missing pool, ...). ColdStoreError: the cold store failed its check (retriable only
            for an unreachable endpoint); nothing was written.
    """
    cfg = _config(conf)
    hosts, zk_path = zk_location_of(uri)
    wanted = binding.canonical_segments_uri(segments, zk_path)
    wanted_cold = binding.canonical_cold(cold) if cold is not None else None
    top = _zk_store(hosts, "/", cfg, create=False)  # the server's root: connecting creates nothing
    try:
        version = top.exists(zk_path)
        if version is not None:
            current = top.get(zk_path)
            if current.value:
                bound = binding.decode(uri, current.value)
                if not binding.same_location(bound, segments):
                    raise MetadataError(f"namespace {uri} is already bound to {bound}")
                bound_cold = binding.decode_cold(uri, current.value)
                if wanted_cold is None or bound_cold == wanted_cold:
                    return
                if bound_cold is not None:
                    raise MetadataError(f"namespace {uri} is already bound to the cold store {bound_cold}")
                made_cold = binding.check_cold(wanted_cold, cfg)  # a bound namespace adds a cold store
                try:
                    top.set(zk_path, binding.encode(bound, wanted_cold), current.version)
                except BaseException:
                    binding.remove_made_dir(made_cold)
                    raise
                return
        made_cold = binding.check_cold(wanted_cold, cfg) if wanted_cold is not None else None
        made = binding.missing_file_dir(wanted)
        try:
            binding.open_segment_store(wanted, cfg, create=True).close()
            if version is None:
                top.create(zk_path, binding.encode(wanted, wanted_cold), make_parents=True)
            else:  # an empty node (made by hand, or by a bind of an older version that failed half-way)
                top.set(zk_path, binding.encode(wanted, wanted_cold), current.version)
        except BaseException:
            binding.remove_made_dir(made)
            binding.remove_made_dir(made_cold)
            raise
    finally:
        top.close()


def _config(conf: Config | dict[str, object] | None) -> Config:
    if conf is None:
        return Config()
    if isinstance(conf, Config):
        return conf
    if isinstance(conf, dict):
        return Config.from_dict(conf)
    raise InvalidArgumentError(f"conf must be a storage.Config or a dict, got {type(conf).__name__}")


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
        self,
        uri: str,
        metastore: MetadataStore,
        segstore: SegmentStore,
        conf: Config,
        root: str = "/",
        *,
        client_id: str | None = None,
    ) -> None:
        self.uri = uri
        self.metastore = metastore
        self.segstore = segstore
        self.conf = conf
        self.root = root
        #: The owner id this namespace's writers put in the log locks (what OwnershipAcquireFailedError names).
        self.client_id = client_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._closed = False
        self._lock = threading.Lock()
        self._managers: list[LogManager] = []
        self._dynamic: DynamicConfigWatcher | None = None  # started by the first log with config files
        self._catalog: LogCatalog | None = None
        #: Port of the process's metrics endpoint (``prometheusStatsHttpPort`` >= 0), else None.
        self.stats_port: int | None = None
        port = int(conf.get("prometheusStatsHttpPort"))
        if port >= 0:
            addr = str(conf.get("prometheusStatsHttpAddress"))
            try:
                self.stats_port = stats.start_http_server(port, addr)
            except OSError as e:
                segstore.close()
                metastore.close()
                raise InvalidConfigError(f"prometheusStatsHttpPort: cannot serve metrics on {addr}:{port}: {e}") from e
        limit = int(conf.get("globalOutstandingWriteLimit"))
        #: The namespace's outstanding writes over all its writers (``globalOutstandingWriteLimit``), or
        #: None when there is no such limit.
        self.outstanding: OutstandingWrites | None = (
            OutstandingWrites(
                limit,
                darkmode=bool(conf.get("outstandingWriteLimitDarkmode")),
                name=f"namespace {uri}",
                key="globalOutstandingWriteLimit",
            )
            if limit > 0
            else None
        )

    def paths_of(self, name: str) -> LogPaths:
        return LogPaths(self.root, name)

    # --- logs -----------------------------------------------------------------------------
    def create_log(self, name: str, *, exist_ok: bool = False) -> None:
        """Create a log.

        Raises:
            InvalidStreamNameError:
            LogExistsError: unless ``exist_ok``.
            AlreadyClosedError:
        """
        self.check_open()
        norm = validate_log_name(name)
        try:
            LogMetadata(self.metastore, self.paths_of(norm)).create()
        except LogExistsError:
            if not exist_ok:
                raise

    def delete_log(self, name: str) -> None:
        """Delete a log: its metadata (the log is gone at once, for every reader), then its segments' data.

        Metadata first, so a delete that is refused (ZooKeeper ACLs) or interrupted never leaves a log whose
        segments point at deleted data; at worst ledgers without a log remain (logged).

        Raises:
            InvalidStreamNameError:
            LogNotFoundError:
            AlreadyClosedError:
            MetadataPermissionError: the namespace's ACL refuses this client (nothing is deleted).
            MetadataError:
        """
        self.check_open()
        meta = LogMetadata(self.metastore, self.paths_of(validate_log_name(name)))
        meta.ensure_exists()
        ledgers = [seg.ledger_id for seg in meta.segments()]
        alloc = meta.allocation().value
        if alloc:
            ledgers.append(int(alloc))
        meta.delete()
        for ledger_id in ledgers:
            try:
                self.segstore.delete_ledger(ledger_id)
            except LedgerNotFoundError:
                pass
            except DLError as e:
                log.warning("log %r deleted, but not the data of its ledger %d: %s", name, ledger_id, e)
        if isinstance(self.segstore, TieredSegmentStore):
            forget_cold_copies(self.segstore, name, ledgers)

    def log_exists(self, name: str) -> bool:
        """True if the log exists. Raises InvalidStreamNameError."""
        self.check_open()
        return LogMetadata(self.metastore, self.paths_of(validate_log_name(name))).exists()

    def list_logs(self) -> list[str]:
        """Names of every log, sorted (nested names included; reserved names hidden), as of this call
        (read in bulk, and on ZooKeeper only where the namespace changed since the last call: :meth:`catalog`).

        Raises:
            MetadataError:
            AlreadyClosedError:
        """
        self.check_open()
        return self.catalog().list_logs()

    def subscriber_positions(self, subscriber_id: str) -> SubscriberPositions:
        """One subscriber's positions across many logs, advanced in bulk (see
        :class:`~storage.log.subscriptions.SubscriberPositions`; one log's: ``open_log(name).subscriptions()``).

        Raises:
            InvalidArgumentError: a bad id. AlreadyClosedError.
        """
        self.check_open()
        return SubscriberPositions(self.metastore, self.root, subscriber_id)

    def catalog(self) -> LogCatalog:
        """This namespace's :class:`~storage.log.catalog.LogCatalog`: the names and segment lists of many
        logs at once, read again only where they changed (what a reader polling thousands of logs uses).

        Raises:
            AlreadyClosedError:
        """
        self.check_open()
        with self._lock:
            if self._catalog is None:
                self._catalog = LogCatalog(
                    self.metastore,
                    self.root,
                    skip_min_version_check=bool(self.conf.get("ledgerMetadataSkipMinVersionCheck")),
                )
            return self._catalog

    def open_log(self, name: str, conf: Config | dict[str, object] | None = None) -> LogManager:
        """A :class:`LogManager` for ``name`` (the log need not exist yet: a writer creates it).

        ``conf`` is a :class:`Config` or a dict of overrides on the namespace's config. With
        ``defaultStreamConfigFile`` / ``streamConfigDir`` set, the log's configuration files
        (:mod:`storage.config.dynamic`) add their overrides now and are re-read every
        ``dynamicConfigReloadIntervalSec`` while the manager is open: changes of the dynamic keys
        apply to its running writers, bad values are rejected (logged, the old value kept).

        Raises:
            InvalidStreamNameError:
            InvalidConfigError:
            AlreadyClosedError:
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
        dynamic = None
        files = stream_config_files(log_conf, norm)
        if files:  # streamConfigDir / defaultStreamConfigFile: per-log files, re-read while open
            dynamic = DynamicConfig(log_conf, files, name=f"log {norm!r}")
            log_conf = dynamic.current
        dlm = LogManager(self, norm, log_conf, dynamic)
        with self._lock:
            self._managers.append(dlm)
            if dynamic is not None:
                if self._dynamic is None:
                    self._dynamic = DynamicConfigWatcher(float(self.conf.get("dynamicConfigReloadIntervalSec")))
                self._dynamic.add(dynamic)
        return dlm

    def forget(self, dlm: object) -> None:
        """Called by a closing log manager: the namespace stops tracking it."""
        with self._lock:
            self._managers = [m for m in self._managers if m is not dlm]
            if isinstance(dlm, LogManager) and dlm.dynamic is not None and self._dynamic is not None:
                self._dynamic.remove(dlm.dynamic)

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
        if self._dynamic is not None:
            self._dynamic.close()
        self.segstore.close()
        self.metastore.close()

    def __enter__(self) -> Namespace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_namespace(
    uri: str, conf: Config | dict[str, object] | None = None, *, create: bool = True, client_id: str | None = None
) -> Namespace:
    """Open the namespace at ``uri``.

    ``client_id`` is the owner id the namespace's writers put in log locks (default: host, pid and a
    random suffix); the write proxy passes its address, so a refused writer learns where the owner serves.

    With ``create`` (the default) a missing namespace is created: the embedded default's directory,
    or a ZooKeeper namespace's path (which must then still be bound, see :func:`bind_namespace`).
    With ``create=False`` (readers: the read-only ``dlog`` commands, ``spark.read``) a missing
    namespace is an error and nothing is created, on disk or in ZooKeeper.

    Raises:
        InvalidArgumentError: a malformed or unsupported URI. InvalidConfigError: bad conf.
        NamespaceNotFoundError: ``create=False`` and there is no namespace at ``uri``.
        MetadataError: the metadata store cannot be opened (MetadataConnectionError: ZooKeeper
            unreachable), or a ZooKeeper namespace is not bound.
    """
    cfg = _config(conf)
    path = local_path_of(uri)
    if client_id is not None and (not isinstance(client_id, str) or not client_id):
        raise InvalidArgumentError(f"client_id must be a non-empty str, not {client_id!r}")
    if path is None:
        return _open_zk_namespace(uri, cfg, create=create, client_id=client_id)
    db = path / "metadata" / "metadata.db"
    if not create and not db.is_file():
        raise NamespaceNotFoundError(
            f"namespace {uri} does not exist (no {db.relative_to(path)} in {path}): check the URI; "
            "only writers create a namespace (dlog create, dlog write --create, the Spark sink)"
        )
    try:
        makedirs_durable(path / "metadata")
        makedirs_durable(path / "segments")
    except OSError as e:
        raise MetadataError(f"cannot create embedded namespace at {path}: {e}") from e
    metastore = SqliteMetadataStore(db)
    try:
        segstore = LocalSegmentStore(path / "segments")
    except BaseException:
        metastore.close()
        raise
    return Namespace(uri, metastore, segstore, cfg, client_id=client_id)


def _open_zk_namespace(uri: str, cfg: Config, *, create: bool, client_id: str | None) -> Namespace:
    try:
        store = _open_zk_store(uri, cfg, create=create)
    except NoNodeError:  # only without create: the namespace path is missing
        hosts, path = zk_location_of(uri)
        raise NamespaceNotFoundError(
            f"namespace {uri} does not exist (no ZooKeeper node {path} at {hosts}): check the URI; "
            f"a new one is created and bound by `dlog --uri {uri} bind --segments file:///shared/abs/path`"
        ) from None
    try:
        data = store.get("/").value
        if not data:
            raise MetadataError(
                f"namespace {uri} is not bound to a segment store: run "
                f"`dlog --uri {uri} bind --segments file:///shared/abs/path` "
                "(or rados://POOL?conf=/etc/ceph/ceph.conf) "
                f"or storage.bind_namespace({uri!r}, segments='file:///shared/abs/path')"
            )
        segstore = binding.open_segment_store(binding.decode(uri, data), cfg)
        cold = binding.decode_cold(uri, data)
        if cold is not None:  # reads of offloaded segments whose hot copy is gone come from cold
            try:
                segstore = binding.tiered_store(segstore, cold, store, cfg)
            except BaseException:
                segstore.close()
                raise
    except BaseException:
        store.close()
        raise
    return Namespace(uri, store, segstore, cfg, client_id=client_id)
