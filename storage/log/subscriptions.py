"""DistributedLog's subscriptions store: named reader positions kept in the log's metadata.

Each subscriber's position is one node, ``<log root>/subscribers/<id>``, holding ``dlsn.serialize()``
(the base64 form), as DistributedLog's ``ZKSubscriptionsStore`` keeps it on ZooKeeper; the embedded
store keeps the same tree in SQLite. Semantics follow DistributedLog's:

* ``advance(id, dlsn)`` only moves a position forward (a lower or equal DLSN changes nothing); it is a
  versioned compare-and-set, so concurrent advances from several processes never move a position back;
* a missing subscriber reads as ``None``; a node whose data is not a DLSN reads as
  ``DLSN.NON_INCLUSIVE_LOWER_BOUND`` (DistributedLog's default commit position);
* ``delete(id)`` removes the subscriber (and its read lock node, if any).

What the position means is the subscriber's business; this project's Spark source stores the DLSN of the
next record it will read (the end offset Spark committed), so the records at or after it are the ones
still to be read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from storage.errors import (
    InvalidArgumentError,
    LogNotFoundError,
    MetadataVersionError,
    NodeExistsError,
    NoNodeError,
)
from storage.formats.dlsn import DLSN
from storage.log.layout import LogPaths, join
from storage.metastore.base import Create, MetadataStore, SetData

__all__ = ["SUBSCRIBERS", "SubscriberLag", "SubscriberPositions", "SubscriptionsStore", "validate_subscriber_id"]

log = logging.getLogger(__name__)

#: The child of the log root under which subscribers live (DistributedLog's ``subscribers``).
SUBSCRIBERS = "subscribers"
_MAX_ID = 255
_CAS_TRIES = 64


@dataclass(frozen=True)
class SubscriberLag:
    """How far one subscriber is behind the end of its log: the user records at or after its position
    and their stored bytes (exact for whole segments, pro rata by records within the segment the
    position is in)."""

    subscriber_id: str
    position: DLSN
    records_behind: int
    bytes_behind: int


def validate_subscriber_id(subscriber_id: object) -> str:
    """``subscriber_id`` if it can name a node: a non-empty str of at most 255 characters, without
    ``/``, control characters, or the names ``.``/``..``.

    Raises:
        InvalidArgumentError: naming what is wrong.
    """
    if not isinstance(subscriber_id, str):
        raise InvalidArgumentError(f"subscriber id must be a str, got {type(subscriber_id).__name__}")
    if not subscriber_id or subscriber_id in (".", ".."):
        raise InvalidArgumentError(f"invalid subscriber id {subscriber_id!r}: empty, '.' or '..'")
    if len(subscriber_id) > _MAX_ID:
        raise InvalidArgumentError(f"subscriber id longer than {_MAX_ID} characters: {subscriber_id[:40]!r}...")
    bad = next((c for c in subscriber_id if c == "/" or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F), None)
    if bad is not None:
        raise InvalidArgumentError(f"invalid subscriber id {subscriber_id!r}: character {bad!r} is not allowed")
    return subscriber_id


def _check_dlsn(dlsn: object) -> DLSN:
    if not isinstance(dlsn, DLSN):
        raise InvalidArgumentError(f"a subscriber position must be a DLSN, got {dlsn!r}")
    if dlsn < DLSN.NON_INCLUSIVE_LOWER_BOUND:
        raise InvalidArgumentError(f"invalid subscriber position {dlsn}: below {DLSN.NON_INCLUSIVE_LOWER_BOUND}")
    return dlsn


def _parse(path: str, data: bytes) -> DLSN:
    try:
        return DLSN.deserialize(data)
    except InvalidArgumentError:
        log.warning("subscriber position at %s is not a DLSN (%r): read as %s", path, data[:40], "1,0,-1")
        return DLSN.NON_INCLUSIVE_LOWER_BOUND


class SubscriptionsStore:
    """The subscribers of one log (``dlm.subscriptions()``)."""

    def __init__(self, store: MetadataStore, paths: LogPaths) -> None:
        self._store = store
        self._paths = paths
        self._root = join(paths.root, SUBSCRIBERS)

    @property
    def log_name(self) -> str:
        return self._paths.name

    def _path(self, subscriber_id: str) -> str:
        return join(self._root, validate_subscriber_id(subscriber_id))

    def _check_log(self) -> None:
        if self._store.exists(self._paths.ledgers) is None:
            raise LogNotFoundError(f"log {self._paths.name!r} does not exist")

    def get(self, subscriber_id: str) -> DLSN | None:
        """The subscriber's position, or None if it has none.

        Raises:
            InvalidArgumentError: a bad id. LogNotFoundError. MetadataError.
        """
        path = self._path(subscriber_id)
        try:
            return _parse(path, self._store.get(path).value)
        except NoNodeError:
            self._check_log()
            return None

    def list(self) -> dict[str, DLSN]:
        """Every subscriber's position, by id (sorted).

        Raises:
            LogNotFoundError:
            MetadataError:
        """
        try:
            ids = sorted(self._store.children(self._root))
        except NoNodeError:
            self._check_log()
            return {}
        values = self._store.get_many([join(self._root, i) for i in ids])
        return {i: _parse(join(self._root, i), v.value) for i, v in zip(ids, values, strict=True) if v is not None}

    def advance(self, subscriber_id: str, dlsn: DLSN) -> bool:
        """Move the subscriber's position to ``dlsn`` if that is further than where it is (a new
        subscriber starts there). True if the position moved.

        Raises:
            InvalidArgumentError: a bad id or DLSN. LogNotFoundError. MetadataError.
        """
        path = self._path(subscriber_id)
        target = _check_dlsn(dlsn)
        data = target.serialize().encode("ascii")
        for _ in range(_CAS_TRIES):
            try:
                cur = self._store.get(path)
            except NoNodeError:
                self._check_log()
                try:
                    self._store.create(path, data, make_parents=True)
                    return True
                except NodeExistsError:
                    continue  # another process created it: compare with its value
            if target <= _parse(path, cur.value):
                return False
            try:
                self._store.set(path, data, cur.version)
                return True
            except (MetadataVersionError, NoNodeError):
                continue  # changed or deleted meanwhile: read again
        raise MetadataVersionError(f"subscriber {subscriber_id!r} of log {self._paths.name!r} kept changing")

    def delete(self, subscriber_id: str) -> bool:
        """Remove the subscriber (and its read lock node); True if it existed.

        Raises:
            InvalidArgumentError: a bad id. LogNotFoundError. MetadataError.
        """
        path = self._path(subscriber_id)
        try:
            self._store.delete(path, recursive=True)
            return True
        except NoNodeError:
            self._check_log()
            return False


#: Operations per ``multi`` when advancing one subscriber in many logs.
_MULTI_OPS = 500


class SubscriberPositions:
    """One subscriber's positions across many logs of a namespace, advanced in bulk: what a reader of
    thousands of logs records after every batch (the Spark source under its ``subscriberId``).

    The first :meth:`advance` reads the positions (pipelined); later ones write only positions that
    moved, as versioned sets grouped into atomic ``multi`` operations of up to 500 logs, using the
    versions of this object's own last writes, so a steady stream of advances costs no reads. If any
    position of a group changed meanwhile (another process advancing the same subscriber), the group
    falls back to :meth:`SubscriptionsStore.advance`'s compare-and-set per log: positions still only
    move forward.
    """

    def __init__(self, store: MetadataStore, ns_root: str, subscriber_id: str) -> None:
        self._store = store
        self._root = ns_root
        self.subscriber_id = validate_subscriber_id(subscriber_id)
        self._known: dict[str, tuple[DLSN, int]] = {}  # log -> (position, node version) after our last write

    def _store_of(self, log_name: str) -> SubscriptionsStore:
        return SubscriptionsStore(self._store, LogPaths(self._root, log_name))

    def advance(self, positions: Mapping[str, DLSN]) -> list[str]:
        """Move the subscriber forward to ``positions[log]`` in each log (a lower or equal position
        changes nothing); returns the logs whose position moved.

        Raises:
            InvalidArgumentError: a bad DLSN. LogNotFoundError: a log does not exist (the others are
            advanced). MetadataError.
        """
        targets = {name: _check_dlsn(d) for name, d in positions.items()}
        unknown = sorted(n for n in targets if n not in self._known)
        if unknown:
            paths = [self._store_of(n)._path(self.subscriber_id) for n in unknown]
            for n, path, got in zip(unknown, paths, self._store.get_many(paths), strict=True):
                if got is not None:
                    self._known[n] = (_parse(path, got.value), got.version)
        moved: list[str] = []
        missing: LogNotFoundError | None = None
        new = [n for n in sorted(targets) if n not in self._known]
        for i in range(0, len(new), _MULTI_OPS // 2):
            created, failed = self._create(new[i : i + _MULTI_OPS // 2], targets)
            moved += created
            missing = missing or failed
        batch: list[tuple[str, SetData]] = []
        for name in sorted(targets):
            target = targets[name]
            hit = self._known.get(name)
            if hit is None:
                continue  # created above, or its log does not exist
            if target <= hit[0]:
                continue
            path = self._store_of(name)._path(self.subscriber_id)
            batch.append((name, SetData(path, target.serialize().encode("ascii"), hit[1])))
        for i in range(0, len(batch), _MULTI_OPS):
            moved.extend(self._write(batch[i : i + _MULTI_OPS], targets))
        if missing is not None:
            raise missing
        return sorted(moved)

    def _create(self, names: list[str], targets: Mapping[str, DLSN]) -> tuple[list[str], LogNotFoundError | None]:
        """Create the subscriber in ``names`` (logs where it has no position yet), with the ``subscribers``
        nodes missing under them, in one ``multi``; if that fails (a log does not exist, another process
        created one meanwhile), one log at a time. Returns the logs where it was created or moved, and the
        first LogNotFoundError."""
        stores = [self._store_of(n) for n in names]
        parents = self._store.get_many([st._root for st in stores])
        ops: list[Create] = []
        for name, st, parent in zip(names, stores, parents, strict=True):
            if parent is None:
                ops.append(Create(st._root))
            ops.append(Create(st._path(self.subscriber_id), targets[name].serialize().encode("ascii")))
        try:
            self._store.multi(ops)
            return list(names), None  # read (with their versions) at the next advance
        except (NodeExistsError, NoNodeError):
            pass
        moved: list[str] = []
        missing: LogNotFoundError | None = None
        for name, st in zip(names, stores, strict=True):
            try:
                if st.advance(self.subscriber_id, targets[name]):
                    moved.append(name)
            except LogNotFoundError as e:
                missing = missing or e
        return moved, missing

    def _forget(self, name: str) -> None:
        self._known.pop(name, None)  # read again at the next advance

    def _write(self, group: list[tuple[str, SetData]], targets: Mapping[str, DLSN]) -> list[str]:
        try:
            self._store.multi([op for _, op in group])
        except (MetadataVersionError, NoNodeError):
            moved = []
            for name, _ in group:  # someone else moved one of them: compare-and-set each
                self._forget(name)
                if self._store_of(name).advance(self.subscriber_id, targets[name]):
                    moved.append(name)
            return moved
        for name, op in group:
            self._known[name] = (targets[name], op.version + 1)
        return [name for name, _ in group]
