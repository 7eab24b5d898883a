"""The metadata layout of a namespace, DistributedLog's ZooKeeper layout, and the
versioned operations on it. Written once over :class:`~storage.metastore.base.MetadataStore`,
so the embedded store and ZooKeeper hold byte-identical trees.

::

    <ns>                                  namespace root (binding data for ZooKeeper namespaces)
    <ns>/<log>                            log stream path (optional user metadata)
    <ns>/<log>/<default>                  log root
    <ns>/<log>/<default>/version          4-byte big-endian -1 (layout version)
    <ns>/<log>/<default>/maxtxid          highest txid seen, decimal string
    <ns>/<log>/<default>/ledgers          max LSSN, decimal string; children: segment znodes
    <ns>/<log>/<default>/ledgers/inprogress_%018d | logrecs_%018d    v5 segment metadata strings
    <ns>/<log>/<default>/lock             write lock
    <ns>/<log>/<default>/readLock         read lock
    <ns>/<log>/<default>/allocation       ledger id handed to the next segment (or empty)

Starting, completing and re-marking segments are each one versioned multi-operation (as in
DistributedLog), so two would-be writers can never both succeed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from storage.errors import (
    LogExistsError,
    LogNotFoundError,
    MetadataError,
    MetadataVersionError,
    NodeExistsError,
    NoNodeError,
    UnexpectedError,
)
from storage.formats.segment_metadata import LogSegmentMetadata
from storage.metastore.base import ANY_VERSION, Create, Delete, MetadataStore, Op, SetData, Versioned

LOG_ROOT = "<default>"
LAYOUT_VERSION = struct.pack(">i", -1)


def join(*parts: str) -> str:
    """Join path parts into an absolute path (``join("/", "a", "b") == "/a/b"``)."""
    out = "/".join(p.strip("/") for p in parts if p.strip("/"))
    return "/" + out


#: Times :meth:`LogMetadata.segments` lists a log's segments when one it listed was gone by the time it was read.
SEGMENT_LIST_ATTEMPTS = 10


@dataclass(frozen=True)
class LogPaths:
    """Every path of one log."""

    ns: str
    name: str

    @property
    def stream(self) -> str:
        return join(self.ns, self.name)

    @property
    def root(self) -> str:
        return join(self.stream, LOG_ROOT)

    @property
    def version(self) -> str:
        return join(self.root, "version")

    @property
    def maxtxid(self) -> str:
        return join(self.root, "maxtxid")

    @property
    def ledgers(self) -> str:
        return join(self.root, "ledgers")

    @property
    def lock(self) -> str:
        return join(self.root, "lock")

    @property
    def read_lock(self) -> str:
        return join(self.root, "readLock")

    @property
    def allocation(self) -> str:
        return join(self.root, "allocation")

    def segment(self, znode_name: str) -> str:
        return join(self.ledgers, znode_name)

    def layout(self) -> list[tuple[str, bytes]]:
        """Every node of a new log with its initial data, parents first."""
        return [
            (self.stream, b""),
            (self.root, b""),
            (self.version, LAYOUT_VERSION),
            (self.maxtxid, b"0"),
            (self.ledgers, b"0"),
            (self.lock, b""),
            (self.read_lock, b""),
            (self.allocation, b""),
        ]


def _parse_long(path: str, v: Versioned[bytes], what: str) -> Versioned[int]:
    try:
        return Versioned(int(v.value.decode("ascii")), v.version)
    except (UnicodeDecodeError, ValueError):
        raise UnexpectedError(f"invalid {what} at {path}: {v.value[:40]!r}") from None


class LogMetadata:
    """Versioned reads and transactional updates of one log's metadata."""

    def __init__(self, store: MetadataStore, paths: LogPaths, *, skip_min_version_check: bool = False) -> None:
        self.store = store
        self.paths = paths
        #: Read segment metadata older than the oldest supported version (``ledgerMetadataSkipMinVersionCheck``).
        self.skip_min_version_check = skip_min_version_check

    # --- existence ------------------------------------------------------------------
    def exists(self) -> bool:
        return self.store.exists(self.paths.ledgers) is not None

    def create(self) -> None:
        """Create the log's layout (and missing ancestors) in one multi.

        Raises:
            LogExistsError: the log exists already.
        """
        try:  # the common case, a new log under existing parents: one request
            self.store.multi([Create(p, d) for p, d in self.paths.layout()])
            return
        except (NodeExistsError, NoNodeError):
            pass  # the log (or part of it) exists, or ancestors are missing: look first
        ops: list[Op] = []
        # Missing ancestors between the namespace root and the log (nested names).
        parts = self.paths.name.split("/")
        for i in range(1, len(parts)):
            anc = join(self.paths.ns, *parts[:i])
            if self.store.exists(anc) is None:
                ops.append(Create(anc, b""))
        existing = [p for p, _ in self.paths.layout() if self.store.exists(p) is not None]
        if self.paths.ledgers in existing and len(existing) == len(self.paths.layout()):
            raise LogExistsError(f"log {self.paths.name!r} already exists")
        ops += [Create(p, d) for p, d in self.paths.layout() if p not in existing]
        try:
            self.store.multi(ops)
        except NodeExistsError:
            raise LogExistsError(f"log {self.paths.name!r} already exists") from None

    def ensure_exists(self) -> None:
        """Raises LogNotFoundError if the log's layout is missing."""
        if not self.exists():
            raise LogNotFoundError(f"log {self.paths.name!r} does not exist")

    # --- reads ----------------------------------------------------------------------
    def max_lssn(self) -> Versioned[int]:
        return _parse_long(self.paths.ledgers, self._get(self.paths.ledgers), "max log segment sequence number")

    def max_txid(self) -> Versioned[int]:
        return _parse_long(self.paths.maxtxid, self._get(self.paths.maxtxid), "max txid")

    def allocation(self) -> Versioned[bytes]:
        return self._get(self.paths.allocation)

    def _get(self, path: str) -> Versioned[bytes]:
        try:
            return self.store.get(path)
        except NoNodeError:
            raise LogNotFoundError(f"log {self.paths.name!r} does not exist (missing {path})") from None

    def segments(self) -> list[LogSegmentMetadata]:
        """Every segment, ascending by (lssn, in-progress first), as stored (no sequence-id fill-in).

        Raises:
            LogNotFoundError, MetadataError.
        """
        for attempt in range(SEGMENT_LIST_ATTEMPTS):
            try:
                names = self.store.children(self.paths.ledgers)
            except NoNodeError:
                raise LogNotFoundError(f"log {self.paths.name!r} does not exist") from None
            paths = [self.paths.segment(n) for n in names]
            got = self.store.get_many(paths)
            # A node listed and gone when read was purged, or completed: a completed segment's node replaces its
            # in-progress one, and a list without either would hide the segment. List again.
            if all(g is not None for g in got) or attempt == SEGMENT_LIST_ATTEMPTS - 1:
                break
        out = [
            LogSegmentMetadata.parse(path, g.value, skip_min_version_check=self.skip_min_version_check)
            for path, g in zip(paths, got, strict=True)
            if g is not None  # still churning after every attempt: what was readable
        ]
        out.sort(key=LogSegmentMetadata.sort_key)
        return out

    # --- transactions ---------------------------------------------------------------
    def start_segment(
        self,
        seg: LogSegmentMetadata,
        max_lssn: Versioned[int],
        max_txid: Versioned[int],
        allocation_version: int,
    ) -> None:
        """Start a segment in one multi: create the in-progress znode, bump ``/ledgers`` and
        ``/maxtxid``, and clear ``/allocation`` — all under the versions read before.

        Raises:
            MetadataVersionError: someone else changed the log meanwhile.
        """
        new_max_txid = max(seg.first_txid, max_txid.value)
        self.store.multi(
            [
                Create(self.paths.segment(seg.znode_name), seg.serialize()),
                SetData(self.paths.ledgers, str(seg.lssn).encode(), max_lssn.version),
                SetData(self.paths.maxtxid, str(new_max_txid).encode(), max_txid.version),
                SetData(self.paths.allocation, b"", allocation_version),
            ]
        )

    def complete_segment(self, inprogress: LogSegmentMetadata, completed: LogSegmentMetadata) -> None:
        """Complete a segment in one multi: create ``logrecs_``, delete ``inprogress_``, bump
        ``/ledgers`` and ``/maxtxid`` under their versions.

        Raises:
            MetadataVersionError, NoNodeError (the in-progress znode is gone: someone else
            completed it), NodeExistsError.
        """
        for _ in range(10):
            lssn = self.max_lssn()
            txid = self.max_txid()
            try:
                self.store.multi(
                    [
                        Create(self.paths.segment(completed.znode_name), completed.serialize()),
                        Delete(self.paths.segment(inprogress.znode_name), ANY_VERSION),
                        SetData(self.paths.ledgers, str(max(completed.lssn, lssn.value)).encode(), lssn.version),
                        SetData(self.paths.maxtxid, str(max(completed.last_txid, txid.value)).encode(), txid.version),
                    ]
                )
                return
            except MetadataVersionError:
                continue  # a concurrent maxtxid/ledgers bump (another writer's recovery): re-read
        raise MetadataError(f"could not complete segment {inprogress.znode_name} of {self.paths.name!r}: contention")

    def replace_segments(self, pairs: list[tuple[LogSegmentMetadata, LogSegmentMetadata]]) -> None:
        """Rewrite segment znodes (truncation status) as delete + create, all in one multi.

        Raises:
            NoNodeError: a segment vanished (purged) meanwhile.
        """
        ops: list[Op] = []
        for old, new in pairs:
            ops.append(Delete(self.paths.segment(old.znode_name), ANY_VERSION))
            ops.append(Create(self.paths.segment(new.znode_name), new.serialize()))
        if ops:
            self.store.multi(ops)

    def delete_segment(self, seg: LogSegmentMetadata) -> None:
        """Delete a segment znode; a missing one is tolerated (as DistributedLog's purge does)."""
        try:
            self.store.delete(self.paths.segment(seg.znode_name))
        except NoNodeError:
            pass

    def set_allocation(self, ledger_id: int | None, version: int) -> int:
        """Record (or clear) the ledger handed to the next segment; returns the new version.

        Raises:
            MetadataVersionError: another writer allocated meanwhile.
        """
        data = b"" if ledger_id is None else str(ledger_id).encode()
        return self.store.set(self.paths.allocation, data, version)

    def delete(self) -> None:
        """Delete the whole log subtree.

        Raises:
            LogNotFoundError.
        """
        try:
            self.store.delete(self.paths.stream, recursive=True)
        except NoNodeError:
            raise LogNotFoundError(f"log {self.paths.name!r} does not exist") from None
