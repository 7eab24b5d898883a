"""The Ceph RADOS segment store: ledgers as objects of a replicated pool, fenced by guarded appends.

DistributedLog keeps segment data in BookKeeper, an existing replicated store; this store keeps it
in RADOS, Ceph's strongly consistent object store, as ZLog builds a shared log on it. We run no
storage server of our own: durability and replication are the pool's (an operation completes only
once every OSD of the placement group's acting set has it, and a pool below ``min_size`` accepts
no writes), ordering and fencing are ours, built from RADOS compound operations.

URI (the segment store binding of a ZooKeeper namespace)::

    rados://POOL?conf=/etc/ceph/ceph.conf[&id=CLIENT][&keyring=PATH][&namespace=NS]

``id`` is the cephx user (``client.<id>``, default ``radosClientId``), ``keyring`` its keyring
(default ``radosKeyring``, else what ceph.conf says), ``namespace`` the RADOS namespace inside
the pool that holds this store's objects (so several DistributedLog namespaces share one pool
without seeing each other's ledgers; ``bind_namespace`` fills it in).

Objects, all in the store's RADOS namespace (ids zero-padded to 20 digits, parts to 6)::

    dl.ledger-ids             the ledger id counter: omap ``next`` (zero-padded decimal)
    dl.notify                 watched by every store, notified by writers (payload: ledger id)
    dl.ledger.<id>            the ledger's head: omap record; once closed, data = offset index
    dl.ledger.<id>.<part>     data: frames of consecutive entries; omap ``state`` = open|fenced

Head record (omap): ``state`` = ``open`` | ``fencing`` | ``closed`` | ``fenced``; ``parts`` = the
first entry id of every data object, comma-separated; once sealed ``last`` (last entry id),
``ends`` (data end of every part) and ``indexed`` (``1``: the head's data is the local store's
index block, one i64 offset per entry, offsets relative to each entry's part).

Frames are the local store's (:mod:`storage.segstore.local`): payload length, entry id, the
piggy-backed LAC and a CRC32C over header and payload, then the payload. RADOS applies an
operation whole or not at all, so a data object never ends in a torn frame; every read checks
every checksum, and a damaged frame raises ``CorruptedEntryError`` at that entry.

Appends (:class:`~storage.segstore._rados_writer.RadosLedgerWriter`): group commit -- whatever is
queued, up to ``radosMaxWriteBytes``, becomes ONE operation
``omap_cmp(state == "open") + append(frames)`` on the current data object, with up to
``radosMaxInFlightWrites`` in flight (the OSD applies one client's operations on one object in
order) and acknowledgements strictly in entry order. A comparison makes the OSD serialize
operations on the object (a write that reads takes the object's exclusive lock until every
replica has committed), which is why each operation carries a whole group and why the default
window is one operation: measured, more in flight only queued at the OSD (64 KiB guarded
appends: 429, 461, 431 ops/s at depth 1, 2, 8; p50 2.0, 3.6, 16 ms). After a failure or a
timeout nothing is retried: the writer fails every later entry and recovery decides.

Large ledgers roll, they are not striped: before a data object would pass ``radosMaxObjectBytes``
(below the OSDs' ``osd_max_object_size``, 128 MiB by default) the writer waits for its pipeline to
drain, registers the next part in the head (guarded by ``state == "open"``) and continues in a new
object created by an exclusive create. Rolling keeps appends sequential and every entry in one
object; the drain means no entry of a new part can land while an earlier one might be missing.

Fencing (:meth:`RadosSegmentStore.fence`, BookKeeper's recovery open), linearizable with appends:

1. the head goes ``open`` -> ``fencing`` (guarded: from then on no part can be registered and
   ``close`` fails); 2. the last registered part's ``state`` becomes ``fenced`` (created so if
   missing, which makes the writer's exclusive create fail): every append the OSD orders after
   this fails with ``ECANCELED`` and appends nothing; 3. that object is read and its frames
   scanned: the last entry is the end of the unbroken run of frames (an operation after a failed
   one may have landed beyond a hole; it was never acknowledged and is left out); 4. the head
   becomes ``fenced`` with ``last`` and ``ends``. Every acknowledged append completed before
   step 2 was ordered, so ``fence`` returns an id >= every acknowledged entry. Concurrent fences
   agree (steps 2-4 are idempotent); ``close`` seals ``open`` -> ``closed`` with one guarded
   operation that also writes the index.

LAC (BookKeeper's rule, as the local store): readers see entries up to the LAC carried by the
last frame of an open ledger, all entries of a sealed one. Tailing readers are woken by
watch/notify on ``dl.notify`` (coalesced by writers) and re-check every 100 ms should a
notification be lost. Ledger ids come from a compare-and-swap loop on ``dl.ledger-ids``
(``omap_cmp`` + ``set_omap``): unique across machines, never reused.

Errors: every librados call runs with ``rados_osd_op_timeout`` = ``radosOpTimeoutSeconds`` and the
monitor timeouts = ``radosConnectTimeoutSeconds``, so an unreachable cluster or a placement group
below ``min_size`` gives a *retriable* ``SegmentStoreError`` in bounded time (a timed-out append
has an unknown outcome: the writer stops); a missing ledger ``LedgerNotFoundError``.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlparse

from storage.common.stats import store_stats
from storage.errors import AlreadyClosedError, InvalidArgumentError, LedgerNotFoundError, SegmentStoreError
from storage.segstore import _ledgerfile as lf
from storage.segstore._rados_binding import load_rados
from storage.segstore._rados_io import (
    COUNTER_OID,
    FENCED,
    FENCING,
    OPEN,
    Head,
    Notifier,
    errno_of,
    head_oid,
    parse_head_oid,
    part_oid,
    translate,
)
from storage.segstore._rados_view import RadosReadView, object_reader, read_head
from storage.segstore._rados_writer import RadosLedgerWriter
from storage.segstore.base import LedgerInfo, SegmentStore, check_id

__all__ = ["RadosLocation", "RadosSegmentStore", "import_rados"]

SCHEME = "rados"
_log = logging.getLogger(__name__)
_FIRST_ID = 1


def import_rados() -> Any:
    """The ``rados`` module (Ceph's Python binding), from any interpreter whose version matches the binding
    installed on this machine (:func:`storage.segstore._rados_binding.load_rados`).

    Raises:
        SegmentStoreError: it is not installed, or built for another Python (the message names both versions).
    """
    return load_rados()


#: Operation stats of RADOS stores in this process (``dlog_segstore_*{store="rados"}``).
_STATS = store_stats("rados")


@dataclass(frozen=True)
class RadosLocation:
    """A parsed ``rados://POOL?conf=...`` segment store URI."""

    pool: str
    conf: str
    client_id: str | None = None
    keyring: str | None = None
    namespace: str = ""

    @classmethod
    def parse(cls, uri: str) -> RadosLocation:
        """Raises InvalidArgumentError naming what is wrong with ``uri``."""
        parsed = urlparse(uri)
        if parsed.scheme != SCHEME:
            raise InvalidArgumentError(f"not a RADOS segment store URI: {uri!r}")
        pool = unquote(parsed.netloc)
        if not pool or parsed.path not in ("", "/"):
            raise InvalidArgumentError(f"RADOS segment store URI {uri!r} must be rados://POOL?conf=/path/ceph.conf")
        try:
            query = parse_qs(parsed.query, keep_blank_values=True, strict_parsing=bool(parsed.query))
        except ValueError:
            raise InvalidArgumentError(f"RADOS segment store URI {uri!r} has a malformed query") from None
        known = {"conf", "id", "keyring", "namespace"}
        unknown = sorted(set(query) - known)
        if unknown:
            raise InvalidArgumentError(
                f"RADOS segment store URI {uri!r}: unknown parameter(s) {', '.join(unknown)} (known: {sorted(known)})"
            )
        values = {k: v[-1] for k, v in query.items()}
        conf = values.get("conf", "")
        if not conf.startswith("/"):
            raise InvalidArgumentError(
                f"RADOS segment store URI {uri!r} needs conf=/abs/path/ceph.conf (the cluster's configuration file)"
            )
        keyring = values.get("keyring") or None
        if keyring is not None and not keyring.startswith("/"):
            raise InvalidArgumentError(f"RADOS segment store URI {uri!r}: keyring must be an absolute path")
        return cls(pool, conf, values.get("id") or None, keyring, values.get("namespace", ""))

    def uri(self) -> str:
        """The canonical URI of this location."""
        q = [f"conf={quote(self.conf)}"]
        if self.client_id:
            q.append(f"id={quote(self.client_id)}")
        if self.keyring:
            q.append(f"keyring={quote(self.keyring)}")
        if self.namespace:
            q.append(f"namespace={quote(self.namespace)}")
        return f"{SCHEME}://{quote(self.pool)}?{'&'.join(q)}"


class RadosSegmentStore(SegmentStore):
    """Ledgers as objects in a RADOS pool (see the module docstring); safe across threads,
    processes and machines. One librados client per store; not usable across ``fork``."""

    def __init__(
        self,
        location: RadosLocation,
        *,
        client_id: str = "admin",
        keyring: str | None = None,
        op_timeout_s: int = 30,
        connect_timeout_s: int = 10,
        max_object_bytes: int = 64 << 20,
        max_write_bytes: int = 4 << 20,
        max_in_flight: int = 1,
        max_views: int = 256,
    ) -> None:
        """Connect to the cluster and open the pool.

        Raises:
            SegmentStoreError: no binding, an unreadable conf or keyring file, bad credentials, an
                unreachable cluster (retriable, after ``connect_timeout_s``), or a missing pool.
        """
        self._rados = rados = import_rados()
        self.location = location
        self._client_id = location.client_id or client_id
        keyring = location.keyring or keyring
        self._max_object = max_object_bytes
        self._max_write = max_write_bytes
        self._max_in_flight = max_in_flight
        self._max_views = max(1, max_views)
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._views: OrderedDict[int, RadosReadView] = OrderedDict()
        self._writers: weakref.WeakSet[RadosLedgerWriter] = weakref.WeakSet()
        self._closed = False
        where = f"the Ceph cluster of {location.conf} as client.{self._client_id}"
        if not os.path.isfile(location.conf):
            raise SegmentStoreError(f"cannot open {where}: no such configuration file {location.conf}")
        if keyring is not None and not os.path.isfile(keyring):
            raise SegmentStoreError(f"cannot open {where}: no such keyring file {keyring}")
        conf = {
            "rados_osd_op_timeout": str(op_timeout_s),
            "rados_mon_op_timeout": str(connect_timeout_s),
            "client_mount_timeout": str(connect_timeout_s),
        }
        if keyring is not None:
            conf["keyring"] = keyring
        try:
            self._cluster = rados.Rados(conffile=location.conf, rados_id=self._client_id, conf=conf)
        except rados.Error as exc:
            raise SegmentStoreError(f"cannot open {where}: {exc}") from exc
        try:
            self._cluster.connect(timeout=connect_timeout_s)
        except rados.Error as exc:
            self._cluster.shutdown()
            err = errno_of(exc)
            if err in (errno.EACCES, errno.EPERM):
                raise SegmentStoreError(
                    f"cannot connect to {where}: the cluster refused the credentials ({exc})"
                ) from exc
            hint = f": no monitor answered within {connect_timeout_s}s (cluster down, or a wrong mon_host?)"
            raise SegmentStoreError(
                f"cannot connect to {where}: {exc}{hint if err == errno.ETIMEDOUT else ''}",
                retriable=err in (errno.ETIMEDOUT, errno.EINTR, None),
            ) from exc
        try:
            if not self._cluster.pool_exists(location.pool):
                raise SegmentStoreError(f"pool {location.pool!r} does not exist in {where}")
            self._ioctx = self._cluster.open_ioctx(location.pool)
            self._ioctx.set_namespace(location.namespace)
            self._notifier = Notifier(self._ioctx, rados, self.list_ledgers)
        except rados.Error as exc:
            self._cluster.shutdown()
            raise SegmentStoreError(f"cannot open pool {location.pool!r} of {where}: {exc}") from exc
        except BaseException:
            self._cluster.shutdown()
            raise

    @property
    def ioctx(self) -> Any:
        """The librados I/O context (pool and namespace) of this store, for tools and tests."""
        return self._ioctx

    # --- writing ----------------------------------------------------------------------------------
    def allocate_ledger_id(self) -> int:
        """Reserve a fresh ledger id: a compare-and-swap on the counter object's omap.

        Raises:
            SegmentStoreError: I/O failure (retriable for a timeout). AlreadyClosedError.
        """
        self._check_open()
        rados = self._rados
        while True:
            current = self._read_omap(COUNTER_OID).get("next")
            try:
                with rados.WriteOpCtx() as op:
                    if current is None:
                        op.new(rados.LIBRADOS_CREATE_EXCLUSIVE)
                        value = _FIRST_ID
                    else:
                        value = int(current)
                        op.omap_cmp("next", current.decode(), rados.LIBRADOS_CMPXATTR_OP_EQ)
                    self._ioctx.set_omap(op, ("next",), (b"%020d" % (value + 1),))
                    self._ioctx.operate_write_op(op, COUNTER_OID)
                return value
            except rados.Error as exc:
                if errno_of(exc) in (errno.ECANCELED, errno.EEXIST):
                    continue  # another client took that id first
                raise translate(errno_of(exc), "cannot allocate a ledger id", cause=exc) from None

    def create_ledger(self, ledger_id: int | None = None) -> RadosLedgerWriter:
        """Create an empty open ledger (its head; the first append creates its first data object).

        Raises:
            SegmentStoreError: I/O failure, or the ledger exists. InvalidArgumentError: a negative
                id. AlreadyClosedError.
        """
        self._check_open()
        lid = self.allocate_ledger_id() if ledger_id is None else check_id(ledger_id, "ledger id")
        rados = self._rados
        head = Head(OPEN, (0,))
        try:
            with rados.WriteOpCtx() as op:
                op.new(rados.LIBRADOS_CREATE_EXCLUSIVE)
                omap = head.omap()
                self._ioctx.set_omap(op, tuple(omap), tuple(omap.values()))
                self._ioctx.operate_write_op(op, head_oid(lid))
        except rados.ObjectExists:
            raise SegmentStoreError(f"ledger {lid} already exists") from None
        except rados.Error as exc:
            raise translate(errno_of(exc), f"cannot create ledger {lid}", cause=exc) from None
        writer = RadosLedgerWriter(
            self._ioctx,
            rados,
            lid,
            max_object_bytes=self._max_object,
            max_write_bytes=self._max_write,
            max_in_flight=self._max_in_flight,
            on_change=self._notifier.notify,
        )
        with self._lock:
            self._writers.add(writer)
        return writer

    def fence(self, ledger_id: int) -> int:
        """Fence the ledger (see the module docstring); returns its last entry id. Idempotent; on
        a closed ledger returns its last entry id.

        Raises:
            LedgerNotFoundError, InvalidArgumentError (negative id), SegmentStoreError,
            AlreadyClosedError.
        """
        self._check_open()
        lid = check_id(ledger_id, "ledger id")
        rados = self._rados
        head = self._enter_fencing(lid)
        if isinstance(head, int):
            return head
        part = len(head.parts) - 1
        oid = part_oid(lid, part)
        try:
            with rados.WriteOpCtx() as op:
                self._ioctx.set_omap(op, ("state",), (FENCED.encode(),))
                self._ioctx.operate_write_op(op, oid)
        except rados.Error as exc:
            raise translate(errno_of(exc), f"cannot fence ledger {lid}", cause=exc) from None
        first = head.parts[-1]
        read = object_reader(self._ioctx, rados, oid, lid)
        size = self._size(oid)
        scan = lf.scan_frames(read, 0, first, size)
        last = first + len(scan.offsets) - 1
        ends = (*self._part_ends(lid, head.parts[:-1]), scan.end)
        sealed = Head(FENCED, head.parts, last, ends, False)
        if not self._cas_head(lid, FENCING, sealed.omap()):
            head = read_head(self._ioctx, rados, lid)  # another fence finished first: same answer
            if not head.sealed:
                raise SegmentStoreError(f"ledger {lid}: head in state {head.state} after fencing")
            return head.last
        self._notifier.notify(lid)
        return last

    def _enter_fencing(self, lid: int) -> Head | int:
        """Move the head to ``fencing`` (its last entry id instead if it is already sealed)."""
        while True:
            head = read_head(self._ioctx, self._rados, lid)
            if head.sealed:
                return head.last
            if head.state == FENCING:
                return head
            # only the state: a roll may have registered a part since the read (the guard lets it)
            self._cas_head(lid, OPEN, {"state": FENCING.encode()})  # lost to a close or fence: look again

    def _part_ends(self, lid: int, parts: tuple[int, ...]) -> tuple[int, ...]:
        """Data ends of finished parts (their sizes: a registered successor means complete)."""
        return tuple(self._size(part_oid(lid, i)) for i in range(len(parts)))

    def _cas_head(self, lid: int, expect: str, omap: dict[str, bytes]) -> bool:
        """Set the head's omap keys ``omap`` if its state is ``expect``; False if it was not.

        Raises:
            SegmentStoreError: I/O failure.
        """
        rados = self._rados
        try:
            with rados.WriteOpCtx() as op:
                op.omap_cmp("state", expect, rados.LIBRADOS_CMPXATTR_OP_EQ)
                self._ioctx.set_omap(op, tuple(omap), tuple(omap.values()))
                self._ioctx.operate_write_op(op, head_oid(lid))
        except rados.Error as exc:
            if errno_of(exc) == errno.ECANCELED:
                return False
            raise translate(errno_of(exc), f"cannot update the head of ledger {lid}", cause=exc) from None
        return True

    # --- reading ----------------------------------------------------------------------------------
    def info(self, ledger_id: int) -> LedgerInfo:
        """State and LAC (or last entry id) of a ledger.

        Raises:
            LedgerNotFoundError, InvalidArgumentError (negative id), SegmentStoreError,
            AlreadyClosedError.
        """
        return self._refresh(self._view(check_id(ledger_id, "ledger id")))

    def read_entries(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Yield ``(entry_id, data)`` for ``first..last``, verifying every checksum.

        Raises:
            InvalidArgumentError: negative ids, ``last < first``, or ``last`` beyond what readers
                may see. CorruptedEntryError: at the first damaged entry (while iterating).
            LedgerNotFoundError, SegmentStoreError, AlreadyClosedError.
        """
        check_id(ledger_id, "ledger id")
        check_id(first, "first entry id")
        check_id(last, "last entry id")
        if last < first:
            raise InvalidArgumentError(f"reversed range {first}..{last}")
        view = self._view(ledger_id)
        visible = self._refresh(view).last_entry_id
        if last > visible:
            raise InvalidArgumentError(
                f"entries {first}..{last} of ledger {ledger_id} are beyond the last visible entry {visible}"
            )
        return _STATS.timed_reads("read", view.iter_entries(first, last))

    def wait_for_lac(self, ledger_id: int, known_lac: int, timeout_s: float) -> int:
        """Return the LAC once it exceeds ``known_lac`` (woken by notifications, re-checked every
        100 ms), or the current value after ``timeout_s``; at once if the ledger is sealed.

        Raises:
            LedgerNotFoundError, InvalidArgumentError, SegmentStoreError, AlreadyClosedError.
        """
        check_id(ledger_id, "ledger id")
        if timeout_s < 0:
            raise InvalidArgumentError(f"negative timeout {timeout_s}")
        self._notifier.ensure_watch()
        return self._notifier.wait_for_lac(self.info, self._check_open, ledger_id, known_lac, timeout_s)

    def watch(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(ledger_id)`` from a background thread when a writer of any process
        announces a change (for every ledger when notifications may have been lost). Calls may be
        spurious. Returns the cancel function.

        Raises:
            AlreadyClosedError.
        """
        self._check_open()
        self._notifier.ensure_watch()
        return self._notifier.add_callback(callback)

    # --- housekeeping -----------------------------------------------------------------------------
    def delete_ledger(self, ledger_id: int) -> None:
        """Delete a ledger's data objects, then its head; a missing ledger is not an error.

        Raises:
            InvalidArgumentError (negative id), SegmentStoreError, AlreadyClosedError.
        """
        self._check_open()
        lid = check_id(ledger_id, "ledger id")
        try:
            head = read_head(self._ioctx, self._rados, lid)
        except LedgerNotFoundError:
            head = None
        parts = len(head.parts) if head is not None else 1
        for oid in [*(part_oid(lid, i) for i in range(parts)), head_oid(lid)]:
            try:
                self._ioctx.remove_object(oid)
            except self._rados.ObjectNotFound:
                pass
            except self._rados.Error as exc:
                raise translate(errno_of(exc), f"cannot delete ledger {lid}", cause=exc) from None
        with self._lock:
            self._views.pop(lid, None)
        self._notifier.notify(lid)

    def list_ledgers(self) -> list[int]:
        """Ids of every ledger in this store's RADOS namespace, ascending.

        Raises:
            SegmentStoreError, AlreadyClosedError.
        """
        self._check_open()
        try:
            names = [obj.key for obj in self._ioctx.list_objects()]
        except self._rados.Error as exc:
            raise translate(errno_of(exc), "cannot list ledgers", cause=exc) from None
        return sorted(lid for name in names if (lid := parse_head_oid(name)) is not None)

    def close(self) -> None:
        """Abort writers still open, stop watching, disconnect. Idempotent. In a forked child it
        only marks the store closed: librados state (threads, sockets, watches) does not survive
        ``fork`` and must not be touched there."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writers = list(self._writers)
            self._views.clear()
        if os.getpid() != self._pid:
            return
        for writer in writers:
            writer.abort()
        self._notifier.close()
        try:  # appends of aborted writers may still be in flight: their callbacks must run first
            self._ioctx.aio_flush()
        except self._rados.Error as exc:
            _log.debug("aio_flush before shutdown failed: %s", exc)
        self._ioctx.close()
        self._cluster.shutdown()

    # --- internals --------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"segment store {self.location.uri()} is closed")
        if os.getpid() != self._pid:
            raise SegmentStoreError("a RADOS segment store cannot be used in a forked child: open a new one")

    def _view(self, ledger_id: int) -> RadosReadView:
        with self._lock:
            self._check_open()
            view = self._views.get(ledger_id)
            if view is None:
                view = self._views[ledger_id] = RadosReadView(self._ioctx, self._rados, ledger_id)
                while len(self._views) > self._max_views:
                    self._views.popitem(last=False)
            else:
                self._views.move_to_end(ledger_id)
            return view

    def _refresh(self, view: RadosReadView) -> LedgerInfo:
        try:
            return view.refresh()
        except LedgerNotFoundError:
            with self._lock:
                if self._views.get(view.ledger_id) is view:
                    del self._views[view.ledger_id]
            raise

    def _read_omap(self, oid: str) -> dict[str, bytes]:
        rados = self._rados
        try:
            with rados.ReadOpCtx() as op:
                it, _ = self._ioctx.get_omap_vals(op, "", "", 64)
                self._ioctx.operate_read_op(op, oid)
                return {k: bytes(v) for k, v in it}
        except rados.ObjectNotFound:
            return {}
        except rados.Error as exc:
            raise translate(errno_of(exc), f"cannot read {oid}", cause=exc) from None

    def _size(self, oid: str) -> int:
        try:
            size, _ = self._ioctx.stat(oid)
            return int(size)
        except self._rados.ObjectNotFound:
            return 0
        except self._rados.Error as exc:
            raise translate(errno_of(exc), f"cannot stat {oid}", cause=exc) from None
