"""Per-writer exactly-once state of a log that several writers publish to (Delta Lake's ``SetTransaction`` idea).

Every writer that publishes with :func:`storage.log.staging.publish_many` under a *writer key* (a streaming
query's id, a batch job's idempotence id) keeps its own latest commit record beside the log's metadata::

    <log root>/writers                    {"sweptMs": <last expiry pass>}
    <log root>/writers/<encoded key>      {"writer": <key>, "committedMs": ..., <the writer's commit record>}

It is read and written under the log's write lock, in the same versioned transaction that publishes the
writer's records, so a writer finds its own last batch whatever other writers committed since. Why one node
per writer rather than every writer's state carried forward in each commit record: a commit then reads and
writes only its own writer's state (constant cost with thousands of writers), and no commit record grows with
the number of writers (ZooKeeper's 1 MB node limit).

Retention (``writerStateRetentionHours``, 0 = keep for ever, Delta's default): a writer that has not published
for that long is *expired*: its state is replaced by a small tombstone (key, last batch, when), and a writer
coming back to a tombstone is refused with :class:`~storage.errors.WriterStateExpiredError` (its replayed batch
cannot be told from a new one). Tombstones are deleted after one more retention period; a writer coming back
after that is a new writer. The expiry pass runs under the lock of a publishing writer, at most once per
``min(retention / 4, 1 hour)``.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote, unquote

from storage.errors import InvalidArgumentError, MetadataError, NoNodeError, WriterStateExpiredError
from storage.log.layout import LogMetadata, join
from storage.log.write_handler import now_ms
from storage.metastore.base import Create, Delete, MetadataStore, Op, SetData

log = logging.getLogger(__name__)

WRITERS_NODE = "writers"
MAX_KEY_LENGTH = 256
_PREFIX = "w-"
_SWEEP_EVERY_MS = 3_600_000
_TOMBSTONE_KEYS = ("writer", "committedMs", "batchId", "writerVersion", "queryId")


def writers_path(meta: LogMetadata) -> str:
    return join(meta.paths.root, WRITERS_NODE)


def node_name(key: str) -> str:
    """The node name of writer ``key`` (percent-encoded: any text is a key).

    Raises:
        InvalidArgumentError: an empty key, or one longer than MAX_KEY_LENGTH characters.
    """
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidArgumentError(f"a writer key is 1 to {MAX_KEY_LENGTH} characters, got {key!r}")
    return _PREFIX + quote(key, safe="").replace(".", "%2E")


def key_of(node: str) -> str | None:
    """The writer key of a node name, None for a name that is not one."""
    return unquote(node[len(_PREFIX) :]) if node.startswith(_PREFIX) else None


def _load(store: MetadataStore, path: str, what: str) -> tuple[dict[str, Any] | None, int | None]:
    try:
        got = store.get(path)
    except NoNodeError:
        return None, None
    try:
        doc = json.loads(got.value) if got.value else {}
    except ValueError:
        raise MetadataError(f"unreadable {what} at {path}") from None
    if not isinstance(doc, dict):
        raise MetadataError(f"unreadable {what} at {path}: not a JSON object")
    return doc, got.version


def read_state(store: MetadataStore, meta: LogMetadata, key: str) -> tuple[dict[str, Any] | None, int | None]:
    """Writer ``key``'s latest commit record on the log and its node version; ``(None, None)`` if it has none.

    Raises:
        WriterStateExpiredError: the writer's state expired (a tombstone). MetadataError: an unreadable record.
        InvalidArgumentError: a bad key.
    """
    doc, version = _load(store, join(writers_path(meta), node_name(key)), f"state of writer {key!r}")
    if doc is not None and doc.get("expired"):
        raise WriterStateExpiredError(
            f"the exactly-once state of writer {key!r} on log {meta.paths.name!r} expired (it last published "
            f"{_ago(doc.get('committedMs'))}, batch {doc.get('batchId', doc.get('writerVersion'))}; retention "
            "writerStateRetentionHours): a replayed batch can no longer be told from a new one, so nothing is "
            "published. Start the writer under a new identity (a streaming query: a new checkpoint, e.g. with "
            f"startingOffsets=committed:{meta.paths.name}; a batch job: a new writer id), or raise the retention"
        )
    return doc, version


def _ago(ms: object) -> str:
    if not isinstance(ms, int):
        return "at an unknown time"
    hours = (now_ms() - ms) / 3_600_000
    return f"{hours:.1f} hours ago"


def state_ops(
    store: MetadataStore, meta: LogMetadata, key: str, record: dict[str, Any], version: int | None
) -> list[Op]:
    """The operations that record ``record`` as writer ``key``'s state (``version``: its node's, None: new).

    Raises:
        InvalidArgumentError: a bad key. MetadataError.
    """
    ops: list[Op] = []
    parent = writers_path(meta)
    path = join(parent, node_name(key))
    data = json.dumps({**record, "writer": key, "committedMs": now_ms()}, sort_keys=True).encode()
    if version is None:
        if store.exists(parent) is None:
            ops.append(Create(parent, json.dumps({"sweptMs": now_ms()}).encode()))
        ops.append(Create(path, data))
    else:
        ops.append(SetData(path, data, version))
    return ops


def list_states(store: MetadataStore, meta: LogMetadata) -> dict[str, dict[str, Any]]:
    """Every writer's state on the log (tombstones left out), by key.

    Raises:
        MetadataError.
    """
    parent = writers_path(meta)
    try:
        names = store.children(parent)
    except NoNodeError:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        key = key_of(name)
        if key is None:
            continue
        try:
            doc, _ = _load(store, join(parent, name), f"state of writer {key!r}")
        except MetadataError as e:
            log.warning("%s: skipped", e)
            continue
        if doc is not None and not doc.get("expired"):
            out[key] = doc
    return out


def expire(store: MetadataStore, meta: LogMetadata, retention_hours: float) -> tuple[int, int]:
    """Under the log's write lock: tombstone the states of writers idle for ``retention_hours``, delete the
    tombstones older than twice that; at most once per ``min(retention / 4, 1 hour)`` (the ``writers`` node
    records the last pass). ``(tombstoned, deleted)``; ``(0, 0)`` when no pass was due.

    Raises:
        MetadataError.
    """
    if retention_hours <= 0:
        return 0, 0
    retention_ms = int(retention_hours * 3_600_000)
    parent = writers_path(meta)
    doc, version = _load(store, parent, "writer state index")
    if doc is None or version is None:
        return 0, 0
    now = now_ms()
    swept = doc.get("sweptMs")
    if isinstance(swept, int) and now - swept < min(retention_ms // 4, _SWEEP_EVERY_MS):
        return 0, 0
    tombstoned = deleted = 0
    ops: list[Op] = []
    for name in store.children(parent):
        key = key_of(name)
        if key is None:
            continue
        path = join(parent, name)
        state, v = _load(store, path, f"state of writer {key!r}")
        if state is None or v is None:
            continue
        at = state.get("expiredMs") if state.get("expired") else state.get("committedMs")
        if not isinstance(at, int):
            continue
        if state.get("expired") and now - at >= retention_ms:
            ops.append(Delete(path, v))
            deleted += 1
        elif not state.get("expired") and now - at >= retention_ms:
            stone = {k: state[k] for k in _TOMBSTONE_KEYS if k in state}
            stone.update(expired=True, expiredMs=now)
            ops.append(SetData(path, json.dumps(stone, sort_keys=True).encode(), v))
            tombstoned += 1
    ops.append(SetData(parent, json.dumps({"sweptMs": now}).encode(), version))
    store.multi(ops)
    if tombstoned or deleted:
        log.info(
            "log %r: exactly-once state of %d writer(s) expired (writerStateRetentionHours=%g), %d old tombstone(s) "
            "deleted",
            meta.paths.name,
            tombstoned,
            retention_hours,
            deleted,
        )
    return tombstoned, deleted


__all__ = [
    "MAX_KEY_LENGTH",
    "WRITERS_NODE",
    "expire",
    "key_of",
    "list_states",
    "node_name",
    "read_state",
    "state_ops",
    "writers_path",
]
