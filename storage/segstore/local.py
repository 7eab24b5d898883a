"""The local-files segment store: one append-only file per ledger, group-committed fsync.

On-disk layout under ``root_dir`` (all integers big-endian, CRC32C = Castagnoli)::

    <root>/ledger-ids                 the ledger id counter
    <root>/ledgers/<id:020d>.ledger   one file per ledger
    <root>/ledgers/.tmp-<id>-<pid>    a ledger being created (renamed into place when ready)

``ledger-ids`` (16 bytes, rewritten in place under ``flock(LOCK_EX)`` on itself, fsynced
before an id is handed out, so ids are strictly increasing, unique across processes and never
reused, even after a crash or a deletion):

==========  ====  =============================================================
offset      size  field
==========  ====  =============================================================
0           4     magic ``b"DLID"``
4           8     next ledger id to hand out (u64; the first id is 1)
12          4     CRC32C of bytes 0..11
==========  ====  =============================================================

A ledger file is a 64-byte header, then frames, then (once sealed) an offset index.

Header (rewritten in place only when the ledger is sealed, under the ledger's flock):

==========  ====  =============================================================
0           4     magic ``b"DLLG"``
4           2     format version (u16) = 1
6           1     state (u8): 0 = open, 1 = closed (by its writer), 2 = fenced (recovered)
7           1     reserved, 0
8           8     ledger id (i64)
16          8     last entry id (i64) once closed/fenced; -1 while open (or if empty)
24          8     data end (i64): offset just past the last frame once sealed; 0 while open
32          8     index offset (i64): offset of the index block once sealed; 0 = none
40          20    reserved, zero
60          4     CRC32C of bytes 0..59
==========  ====  =============================================================

Frame, one per entry, entry ids 0, 1, 2, ... in file order, starting at offset 64:

==========  ====  =============================================================
0           4     payload length L (u32, at most ``MAX_ENTRY_SIZE`` = 64 MiB)
4           8     entry id (i64)
12          8     lac (i64): id of the last entry acknowledged (durable) before this frame
                  was written, -1 if none (BookKeeper's piggy-backed LastAddConfirmed);
                  every frame of one group commit carries the same value
20          4     CRC32C of bytes 0..19 of the frame followed by the payload
24          L     payload
==========  ====  =============================================================

Index block (written at *data end* when the ledger is sealed, before the header is updated;
lets a sealed ledger be opened with one read instead of a scan):

==========  ====  =============================================================
0           4     magic ``b"DLIX"``
4           8     entry count N (u64) = last entry id + 1
12          8*N   offset of each entry's frame (i64)
12+8N       4     CRC32C of bytes 0..11+8N
==========  ====  =============================================================

Visibility: in an open ledger readers see entries ``0..LAC`` where LAC is the lac field of the
last frame that is complete and passes its checksum; in a sealed ledger every entry up to the
header's last entry id. Appends (the header check and the write, not the ``fdatasync`` after it) and
sealing (close, fence) take ``flock(LOCK_EX)`` on the ledger file, so they are linearizable across
processes; readers take no lock. A fence that finds frames written but not yet synced seals them
with its own sync, so their writer, once its sync returns, may acknowledge them. Fencing waits for
the lock at most ``FENCE_LOCK_WAIT_S`` (a writer frozen inside an append holds it), naming the
holding process after a second.

Damage versus torn tail: a frame that fails its checksum, or a malformed frame whose bytes are
followed by a good frame of the next entry (found by searching for it), is damage: it is kept,
and reading it raises ``CorruptedEntryError``. Bad bytes after the last good frame are a torn
write of a killed writer: readers never see them and ``fence`` truncates them. So a damaged
*last* frame is indistinguishable from a torn one and is cut by ``fence``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator

from storage.common.durable import makedirs_durable, os_error_detail
from storage.common.stats import store_stats
from storage.errors import (
    AlreadyClosedError,
    InvalidArgumentError,
    LedgerNotFoundError,
    SegmentStoreError,
)
from storage.segstore import _ledgerfile as lf
from storage.segstore._readview import ReadView
from storage.segstore._watch import ChangeWatcher
from storage.segstore._writer import LocalLedgerWriter
from storage.segstore.base import NO_ENTRY, LedgerInfo, SegmentStore, check_id

__all__ = ["LocalLedgerWriter", "LocalSegmentStore"]


#: Operation stats of local stores in this process (``dlog_segstore_*{store="local"}``).
_STATS = store_stats("local")

#: Evicted read views whose offsets are kept (8 bytes per entry) for the next view of their ledger.
_MAX_RETIRED = 65536


class LocalSegmentStore(SegmentStore):
    """Ledgers as files under ``<root_dir>/ledgers/``; safe across threads and processes.

    ``use_inotify=False`` forces the polling fallback of :meth:`wait_for_lac` and
    :meth:`watch` (every ``poll_interval`` seconds). At most ``max_open_files`` read-only file
    descriptors are cached (least recently used are closed first; default :func:`default_max_open_files`).
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        use_inotify: bool = True,
        poll_interval: float = 0.05,
        max_open_files: int | None = None,
    ) -> None:
        self._root = os.fspath(root_dir)
        self._dir = os.path.join(self._root, "ledgers")
        self._counter_path = os.path.join(self._root, "ledger-ids")
        self._use_inotify = use_inotify
        self._poll_interval = poll_interval
        self._max_open = max(1, default_max_open_files() if max_open_files is None else max_open_files)
        self._lock = threading.Lock()
        self._views: OrderedDict[int, ReadView] = OrderedDict()
        # views evicted from the cache, without their descriptor: what they learned of their file is
        # handed to the next view of the same ledger (a reader polling more ledgers than ``max_open_files``)
        self._retired: OrderedDict[int, ReadView] = OrderedDict()
        self._writers: weakref.WeakSet[LocalLedgerWriter] = weakref.WeakSet()
        self._watcher: ChangeWatcher | None = None
        self._closed = False
        try:
            makedirs_durable(self._dir)
        except OSError as exc:
            raise SegmentStoreError(f"cannot create segment store at {self._root}: {exc}") from exc

    @property
    def root_dir(self) -> str:
        """The directory holding the store."""
        return self._root

    def ledger_path(self, ledger_id: int) -> str:
        """The file holding ledger ``ledger_id`` (whether or not it exists).

        Raises:
            InvalidArgumentError: a negative ledger id.
        """
        return self._path(check_id(ledger_id, "ledger id"))

    # --- writing --------------------------------------------------------------------------
    def allocate_ledger_id(self) -> int:
        """Reserve a fresh ledger id (the shared counter moves on; no file is made).

        Raises:
            SegmentStoreError: I/O failure or a damaged id counter. AlreadyClosedError.
        """
        self._check_open()
        try:
            return self._allocate_id()
        except OSError as exc:
            detail = os_error_detail(exc, self._dir)
            raise SegmentStoreError(f"cannot allocate a ledger id in {self._dir}: {detail}", retriable=True) from exc

    def create_ledger(self, ledger_id: int | None = None) -> LocalLedgerWriter:
        """Create an empty open ledger with ``ledger_id`` (allocated before) or a fresh id and
        return its writer.

        Raises:
            SegmentStoreError: I/O failure, a damaged id counter, or the ledger exists.
            InvalidArgumentError: a negative id. AlreadyClosedError: the store was closed.
        """
        self._check_open()
        try:
            lid = self._allocate_id() if ledger_id is None else check_id(ledger_id, "ledger id")
            path = self._path(lid)
            if ledger_id is not None and os.path.exists(path):
                raise SegmentStoreError(f"ledger {lid} already exists in {self._dir}")
            tmp = os.path.join(self._dir, f".tmp-{lid}-{os.getpid()}")
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                lf.write_header(fd, lf.Header(lid, lf.STATE_OPEN, NO_ENTRY, 0, 0))
                os.fsync(fd)
                os.rename(tmp, path)
                lf.fsync_dir(self._dir)
            except BaseException:
                os.close(fd)
                _unlink_quietly(tmp)
                raise
        except OSError as exc:  # nothing was created (the temporary file is gone): retriable once the disk is fixed
            detail = os_error_detail(exc, self._dir)
            raise SegmentStoreError(f"cannot create a ledger in {self._dir}: {detail}", retriable=True) from exc
        writer = LocalLedgerWriter(lid, fd, path)
        with self._lock:
            self._writers.add(writer)
        return writer

    def _allocate_id(self) -> int:
        fd = os.open(self._counter_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 64, 0)
            value = lf.next_counter_value(raw)
            if value is None:
                raise SegmentStoreError(f"damaged ledger id counter {self._counter_path}")
            if not raw:  # a new store, or a lost counter: never go below an existing id
                value = max([value, *(lid + 1 for lid in self.list_ledgers())])
            lf.pwrite_all(fd, lf.encode_counter(value + 1), 0)
            os.fsync(fd)
            if not raw:
                lf.fsync_dir(self._root)
            return value
        finally:
            os.close(fd)  # releases the flock

    def fence(self, ledger_id: int) -> int:
        """Fence the ledger, cutting off a torn tail; returns its last entry id.

        Idempotent; on a closed ledger returns the closed last entry id.

        Raises:
            LedgerNotFoundError: no such ledger.
            InvalidArgumentError: a negative ledger id.
            SegmentStoreError: I/O failure or a damaged header; or (retriable) another process's append kept the
                ledger file locked for ``FENCE_LOCK_WAIT_S`` (its writer is frozen inside the append).
            AlreadyClosedError: the store was closed.
        """
        self._check_open()
        path = self._path(check_id(ledger_id, "ledger id"))
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            raise LedgerNotFoundError(f"ledger {ledger_id} does not exist") from None
        except OSError as exc:
            raise SegmentStoreError(f"cannot open ledger {ledger_id}: {exc}") from exc
        try:
            try:
                lf.lock_within(fd, f"ledger {ledger_id} ({path})", lf.FENCE_LOCK_WAIT_S)
            except TimeoutError as exc:
                raise SegmentStoreError(f"cannot fence ledger {ledger_id}: {exc}", retriable=True) from None
            header = lf.read_header(fd)
            if header is None:
                raise SegmentStoreError(f"ledger {ledger_id}: damaged header")
            if header.sealed:
                return header.last_entry_id
            scan = lf.scan_frames(lf.file_reader(fd), lf.HEADER_SIZE, 0, os.fstat(fd).st_size)
            last = len(scan.offsets) - 1
            # Frames after the last acknowledged entry (the LAC they carry) may be readable only from the page
            # cache: their writer died before its fdatasync, or the fdatasync failed (Linux then marks the pages
            # clean: a later fdatasync would not write them). Written again, the seal's fdatasync makes them durable
            # with it; the seal never claims entries the disk may not have.
            unsure = 0 if scan.lac is None else scan.lac + 1
            if 0 <= unsure <= last:
                start = scan.offsets[unsure]
                lf.pwrite_all(fd, os.pread(fd, scan.end - start, start), start)
            fenced = lf.Header(ledger_id, lf.STATE_FENCED, last, scan.end, scan.end)
            lf.seal(fd, fenced, scan.offsets, scan.end)
            return last
        except OSError as exc:
            raise SegmentStoreError(f"cannot fence ledger {ledger_id}: {exc}") from exc
        finally:
            os.close(fd)  # releases the flock

    # --- reading --------------------------------------------------------------------------
    def info(self, ledger_id: int) -> LedgerInfo:
        """State and LAC (or last entry id) of a ledger.

        Raises:
            LedgerNotFoundError, InvalidArgumentError (negative id), SegmentStoreError,
            AlreadyClosedError.
        """
        view = self._pinned_view(check_id(ledger_id, "ledger id"))
        try:
            return self._refresh(view)
        finally:
            view.release()

    def read_entries(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Yield ``(entry_id, data)`` for ``first..last``, verifying every checksum.

        Argument and visibility errors are raised by this call; damage and I/O errors while
        iterating.

        Raises:
            InvalidArgumentError: negative ids, ``last < first``, or ``last`` beyond the LAC
                (open ledger) or last entry id (sealed ledger).
            CorruptedEntryError: at the first entry that fails its checksum or cannot be parsed.
            LedgerNotFoundError, SegmentStoreError, AlreadyClosedError.
        """
        view = self._visible_view(ledger_id, first, last)
        gen = view.iter_entries(first, last)
        weakref.finalize(gen, view.release)  # the fd stays open while the iterator lives
        return _STATS.timed_reads("read", gen)

    def read_entry_buffers(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes | memoryview]]:
        """As :meth:`read_entries`, each entry a view into the chunk it was read with (one ``pread`` per
        4 MiB, no copy per entry).

        Raises:
            As :meth:`read_entries`.
        """
        view = self._visible_view(ledger_id, first, last)
        gen = view.iter_entry_views(first, last)
        weakref.finalize(gen, view.release)
        return _STATS.timed_reads("read", gen)

    def _visible_view(self, ledger_id: int, first: int, last: int) -> ReadView:
        """The pinned view of a ledger whose entries ``first..last`` are visible (release it when done)."""
        check_id(ledger_id, "ledger id")
        check_id(first, "first entry id")
        check_id(last, "last entry id")
        if last < first:
            raise InvalidArgumentError(f"reversed range {first}..{last}")
        view = self._pinned_view(ledger_id)
        try:
            visible = self._refresh(view).last_entry_id
            if last > visible:
                raise InvalidArgumentError(
                    f"entries {first}..{last} of ledger {ledger_id} are beyond the last visible entry {visible}"
                )
        except BaseException:
            view.release()
            raise
        return view

    def wait_for_lac(self, ledger_id: int, known_lac: int, timeout_s: float) -> int:
        """Return the LAC once it exceeds ``known_lac`` (woken by inotify or polling), or the
        current value after ``timeout_s``; at once if the ledger is sealed.

        Raises:
            LedgerNotFoundError, InvalidArgumentError (negative id or timeout),
            SegmentStoreError, AlreadyClosedError (also if the store is closed meanwhile).
        """
        check_id(ledger_id, "ledger id")
        if timeout_s < 0:
            raise InvalidArgumentError(f"negative timeout {timeout_s}")
        return self._ensure_watcher().wait_for_lac(self.info, self._check_open, ledger_id, known_lac, timeout_s)

    def watch(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(ledger_id)`` from a background thread whenever a ledger file changes
        (any process). Calls may be spurious. Returns the function that cancels the watch.

        Raises:
            AlreadyClosedError: the store was closed.
        """
        return self._ensure_watcher().add_callback(callback)

    # --- housekeeping ---------------------------------------------------------------------
    def delete_ledger(self, ledger_id: int) -> None:
        """Delete a ledger file; a missing ledger is not an error. Its id is never reused.

        Raises:
            InvalidArgumentError (negative id), SegmentStoreError, AlreadyClosedError.
        """
        self._check_open()
        path = self._path(check_id(ledger_id, "ledger id"))
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SegmentStoreError(f"cannot delete ledger {ledger_id}: {exc}") from exc
        self._drop_view(ledger_id)

    def list_ledgers(self) -> list[int]:
        """Ids of every ledger in the store, ascending.

        Raises:
            SegmentStoreError, AlreadyClosedError.
        """
        self._check_open()
        try:
            names = os.listdir(self._dir)
        except OSError as exc:
            raise SegmentStoreError(f"cannot list {self._dir}: {exc}") from exc
        return sorted(lid for name in names if (lid := lf.parse_ledger_file_name(name)) is not None)

    def close(self) -> None:
        """Abort writers still open, stop the watcher thread, close cached files. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writers = list(self._writers)
            watcher, self._watcher = self._watcher, None
            views = list(self._views.values())
            self._views.clear()
            self._retired.clear()
        for writer in writers:
            writer.abort()
        if watcher is not None:
            watcher.close()
        for view in views:
            view.release()

    # --- internals ------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"segment store {self._root} is closed")

    def _path(self, ledger_id: int) -> str:
        return os.path.join(self._dir, lf.ledger_file_name(ledger_id))

    def _ensure_watcher(self) -> ChangeWatcher:
        with self._lock:
            self._check_open()
            if self._watcher is None:
                self._watcher = ChangeWatcher(
                    self._dir, poll_interval=self._poll_interval, use_inotify=self._use_inotify
                )
            return self._watcher

    def _pinned_view(self, ledger_id: int) -> ReadView:
        """The cached read view of a ledger, pinned (the caller must ``release`` it)."""
        with self._lock:
            self._check_open()
            cached = self._views.get(ledger_id)
            if cached is not None:
                self._views.move_to_end(ledger_id)
                cached.acquire()
                return cached
        try:
            fd = os.open(self._path(ledger_id), os.O_RDONLY)
        except FileNotFoundError:
            raise LedgerNotFoundError(f"ledger {ledger_id} does not exist") from None
        except OSError as exc:
            raise SegmentStoreError(f"cannot open ledger {ledger_id}: {exc}") from exc
        fresh = ReadView(ledger_id, fd)  # holds one reference: the cache's
        with self._lock:
            learned = self._retired.pop(ledger_id, None)
        if learned is not None:
            fresh.adopt(learned)
        evicted: list[ReadView] = []
        view: ReadView | None = None
        with self._lock:
            if self._closed:
                evicted.append(fresh)
            else:
                view = self._views.get(ledger_id)
                if view is None:
                    view = self._views[ledger_id] = fresh
                    while len(self._views) > self._max_open:
                        old_id, old = self._views.popitem(last=False)
                        evicted.append(old)
                        self._retired[old_id] = old
                        while len(self._retired) > _MAX_RETIRED:
                            self._retired.popitem(last=False)
                else:
                    evicted.append(fresh)
                view.acquire()
        for old in evicted:
            old.release()
        if view is None:
            raise AlreadyClosedError(f"segment store {self._root} is closed")
        return view

    def _drop_view(self, ledger_id: int) -> None:
        with self._lock:
            view = self._views.pop(ledger_id, None)
            self._retired.pop(ledger_id, None)
        if view is not None:
            view.release()

    def _refresh(self, view: ReadView) -> LedgerInfo:
        try:
            return view.refresh()
        except LedgerNotFoundError:
            self._drop_view(view.ledger_id)
            raise


def default_max_open_files() -> int:
    """Read-only ledger files a store keeps open by default: a quarter of the process's open-file limit
    (``RLIMIT_NOFILE``), at least 128 and at most 16,384, so a reader polling thousands of logs keeps
    their files open while writers and sockets keep the rest."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 128
    if soft == resource.RLIM_INFINITY:
        return 16384
    return max(128, min(16384, soft // 4))


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
