"""Segment store bindings of ZooKeeper namespaces (as DistributedLog's ``dlog admin bind``).

A ZooKeeper namespace is bound once to where its segment data lives; the binding is stored as
JSON ``{"version": 1, "segments": URI}`` in the namespace's root znode. Segment store URIs:

* ``file:///abs/path``: the local-files store in a directory every reader and writer sees (one
  copy, no replication);
* ``rados://POOL?conf=/etc/ceph/ceph.conf[&id=CLIENT][&keyring=PATH][&namespace=NS]``: Ceph RADOS
  (:mod:`storage.segstore.rados`), replicated by the pool. Binding fills in ``namespace`` (the
  RADOS namespace of this DistributedLog namespace's objects) when it is not given, and connects
  first: an unreachable cluster, bad credentials or a missing pool fail the bind and nothing is
  written.

Credentials not in the URI come from the configuration (``radosClientId``, ``radosKeyring``).

A namespace may also be bound to a cold store (:mod:`storage.cold`; ``"cold": URI`` in the same JSON, added with
the first bind or later): ``s3://BUCKET/PREFIX?endpoint=HOST:PORT&scheme=http|https&region=R`` or
``file:///abs/path``. Binding checks it first (reachable, bucket present, credentials accepted, writable); a
``file://`` cold directory is made if missing.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path
from urllib.parse import unquote, urlparse

from storage.common.durable import makedirs_durable
from storage.config import Config
from storage.errors import InvalidArgumentError, MetadataError
from storage.metastore.base import MetadataStore
from storage.segstore.base import SegmentStore
from storage.segstore.local import LocalSegmentStore

BINDING_VERSION = 1
_FORMS = "file:///abs/path or rados://POOL?conf=/path/ceph.conf"


def _file_dir(segments: str) -> Path:
    parsed = urlparse(segments)
    if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
        raise InvalidArgumentError(
            f"segment store URI must be file:///abs/path (a path every process sees), got {segments!r}"
        )
    return Path(unquote(parsed.path))


def canonical_segments_uri(segments: str, zk_path: str) -> str:
    """The URI to store for ``segments``: a file store's absolute path, or a RADOS location with
    its RADOS namespace filled in (derived from the ZooKeeper path plus a random suffix, so two
    namespaces of the same path on different ZooKeeper ensembles sharing a pool stay apart).

    Raises:
        InvalidArgumentError: a malformed or unsupported URI, naming what is wrong.
    """
    if not isinstance(segments, str) or not segments:
        raise InvalidArgumentError(f"segment store URI must be {_FORMS}, got {segments!r}")
    scheme = urlparse(segments).scheme
    if scheme == "file":
        return f"file://{_file_dir(segments)}"
    if scheme == "rados":
        from storage.segstore.rados import RadosLocation

        loc = RadosLocation.parse(segments)
        if not loc.namespace:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", ".", zk_path.strip("/")) or "root"
            loc = RadosLocation(loc.pool, loc.conf, loc.client_id, loc.keyring, f"dl.{stem}.{uuid.uuid4().hex[:8]}")
        return loc.uri()
    raise InvalidArgumentError(f"segment store URI must be {_FORMS}, got {segments!r}")


def same_location(bound: str, requested: str) -> bool:
    """Whether binding ``requested`` again onto a namespace bound to ``bound`` is a no-op."""
    if urlparse(bound).scheme == "rados" and urlparse(requested).scheme == "rados":
        from storage.segstore.rados import RadosLocation

        a, b = RadosLocation.parse(bound), RadosLocation.parse(requested)
        return (a.pool, a.conf) == (b.pool, b.conf) and (not b.namespace or a.namespace == b.namespace)
    return bound == requested


def encode(segments: str, cold: str | None = None) -> bytes:
    """The root znode's data for a binding to the canonical URI ``segments`` (and the cold store ``cold``)."""
    doc: dict[str, object] = {"version": BINDING_VERSION, "segments": segments}
    if cold is not None:
        doc["cold"] = cold
    return json.dumps(doc).encode()


def decode_cold(ns_uri: str, data: bytes) -> str | None:
    """The cold store URI of a stored binding, or None if it has none.

    Raises:
        MetadataError: unreadable binding data.
    """
    from storage.cold.arrowfs import canonical_cold_uri

    try:
        cold = json.loads(data.decode()).get("cold")
        if cold is None:
            return None
        return canonical_cold_uri(str(cold))
    except (ValueError, AttributeError, InvalidArgumentError):
        raise MetadataError(f"namespace {ns_uri} has an unreadable cold store binding {data[:120]!r}") from None


def decode(ns_uri: str, data: bytes) -> str:
    """The segment store URI of a stored binding.

    Raises:
        MetadataError: unreadable binding data.
    """
    try:
        doc = json.loads(data.decode())
        segments = str(doc["segments"])
        canonical_segments_uri(segments, "x")  # validates the form
        return segments
    except (ValueError, KeyError, TypeError, InvalidArgumentError):
        raise MetadataError(f"namespace {ns_uri} has unreadable binding data {data[:80]!r}") from None


def missing_file_dir(segments: str) -> Path | None:
    """The directory of a ``file://`` segment store that does not exist yet (a bind would make it), else None."""
    if urlparse(segments).scheme == "rados":
        return None
    seg_dir = _file_dir(segments)
    return None if seg_dir.exists() else seg_dir


def remove_made_dir(path: Path | None) -> None:
    """Undo :func:`open_segment_store`'s ``mkdir`` of ``path`` (and what opening the store put in it) after a failed
    bind: ``path`` came from :func:`missing_file_dir`, so this bind made it."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def open_segment_store(segments: str, conf: Config, *, create: bool = False) -> SegmentStore:
    """Open the segment store at the canonical URI ``segments`` (``create``: make a file store's
    directory).

    Raises:
        InvalidArgumentError: a bad URI. SegmentStoreError: the store cannot be opened (for RADOS:
            unreadable conf or keyring, bad credentials, unreachable cluster, missing pool).
        MetadataError: a file store's directory cannot be created.
    """
    if urlparse(segments).scheme == "rados":
        from storage.segstore.rados import RadosLocation, RadosSegmentStore

        return RadosSegmentStore(
            RadosLocation.parse(segments),
            client_id=str(conf.get("radosClientId")),
            keyring=conf.get("radosKeyring"),
            op_timeout_s=int(conf.get("radosOpTimeoutSeconds")),
            connect_timeout_s=int(conf.get("radosConnectTimeoutSeconds")),
            max_object_bytes=int(conf.get("radosMaxObjectBytes")),
            max_write_bytes=int(conf.get("radosMaxWriteBytes")),
            max_in_flight=int(conf.get("radosMaxInFlightWrites")),
        )
    seg_dir = _file_dir(segments)
    if create:
        try:
            makedirs_durable(seg_dir)
        except OSError as e:
            raise MetadataError(f"cannot create segment directory {seg_dir}: {e}") from e
    return LocalSegmentStore(seg_dir)


def canonical_cold(cold: str) -> str:
    """The cold store URI to store for ``cold``. Raises InvalidArgumentError: a bad URI."""
    from storage.cold.arrowfs import canonical_cold_uri

    return canonical_cold_uri(cold)


def check_cold(cold: str, conf: Config) -> Path | None:
    """Check the cold store at the canonical URI ``cold`` before a bind writes anything (reachable, bucket
    present, credentials accepted, a probe object written, read back and deleted); a ``file://`` directory is made
    if missing, and returned (for :func:`remove_made_dir` if the bind fails later), else None.

    Raises:
        InvalidArgumentError: bad URI or credentials keys. ColdStoreError: the check failed (retriable only for an
            unreachable endpoint).
    """
    from storage.cold.arrowfs import ColdLocation, open_cold_store

    loc = ColdLocation.parse(cold)
    made: Path | None = None
    if loc.scheme == "file" and not Path(loc.root).exists():
        made = Path(loc.root)
        try:
            makedirs_durable(made)
        except OSError as e:
            from storage.errors import ColdStoreError

            raise ColdStoreError(f"cannot create cold store directory {made}: {e}", retriable=False) from e
    try:
        with open_cold_store(cold, conf) as store:
            store.check()
    except BaseException:
        remove_made_dir(made)
        raise
    return made


def tiered_store(hot: SegmentStore, cold: str, metastore: MetadataStore, conf: Config) -> SegmentStore:
    """The segment store of a namespace bound to the cold store ``cold``: ``hot`` wrapped for tiered reads
    (:class:`storage.log.tiered.TieredSegmentStore`). Nothing is contacted yet.

    Raises:
        InvalidArgumentError, ColdStoreError: the cold store cannot be made.
    """
    from storage.cold.arrowfs import open_cold_store
    from storage.log.tiered import TieredSegmentStore

    return TieredSegmentStore(hot, open_cold_store(cold, conf), metastore, "/")
