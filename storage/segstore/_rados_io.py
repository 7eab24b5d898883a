"""Small pieces of the RADOS segment store: object names, the ledger head's omap record, librados
error translation, and change notification by watch/notify (see :mod:`storage.segstore.rados`).

Only this module and the other ``_rados_*`` modules touch librados objects; ``rados`` is imported
by :mod:`storage.segstore.rados` when a store is opened, so the package imports without it.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from storage.errors import (
    DLError,
    LedgerNotFoundError,
    SegmentStoreError,
    WriterFencedError,
)
from storage.segstore._changes import ChangeHub

_log = logging.getLogger(__name__)

# --- object names (inside the store's RADOS namespace) -----------------------------------------
#: The ledger id counter (omap key ``next``).
COUNTER_OID = "dl.ledger-ids"
#: The object every store watches and every writer notifies (payload: the ledger id).
NOTIFY_OID = "dl.notify"
_HEAD_PREFIX = "dl.ledger."


def head_oid(ledger_id: int) -> str:
    """The head object of a ledger: its state, parts and (once closed) entry index."""
    return f"{_HEAD_PREFIX}{ledger_id:020d}"


def part_oid(ledger_id: int, part: int) -> str:
    """The ``part``-th data object of a ledger (frames of consecutive entries)."""
    return f"{_HEAD_PREFIX}{ledger_id:020d}.{part:06d}"


def parse_head_oid(name: str) -> int | None:
    """The ledger id of a head object's name, ``None`` for any other object."""
    if not name.startswith(_HEAD_PREFIX):
        return None
    rest = name[len(_HEAD_PREFIX) :]
    return int(rest) if len(rest) == 20 and rest.isdigit() and rest.isascii() else None


# --- the head record --------------------------------------------------------------------------
OPEN, FENCING, CLOSED, FENCED = "open", "fencing", "closed", "fenced"
_STATES = (OPEN, FENCING, CLOSED, FENCED)


@dataclass(frozen=True)
class Head:
    """The omap record of a ledger head.

    ``parts`` holds the first entry id of each data object (part ``i`` holds entries
    ``parts[i] .. parts[i+1]-1``). Once sealed, ``last`` is the last entry id, ``ends`` the data
    end of each part, and ``indexed`` says whether the head object's data holds the offset index.
    """

    state: str
    parts: tuple[int, ...]
    last: int = -1
    ends: tuple[int, ...] = ()
    indexed: bool = False

    @property
    def sealed(self) -> bool:
        return self.state in (CLOSED, FENCED)

    def omap(self) -> dict[str, bytes]:
        """The omap keys and values of this record."""
        out = {"state": self.state.encode(), "parts": _ints(self.parts)}
        if self.sealed:
            out.update(last=str(self.last).encode(), ends=_ints(self.ends), indexed=b"1" if self.indexed else b"0")
        return out

    @classmethod
    def parse(cls, ledger_id: int, omap: Mapping[str, bytes]) -> Head:
        """Decode a head's omap.

        Raises:
            SegmentStoreError: a damaged or incomplete record.
        """
        try:
            state = omap["state"].decode()
            if state not in _STATES:
                raise ValueError(f"state {state!r}")
            parts = _parse_ints(omap["parts"])
            if state in (CLOSED, FENCED):
                ends = _parse_ints(omap["ends"])
                if len(ends) != len(parts):
                    raise ValueError("ends and parts differ in length")
                return cls(state, parts, int(omap["last"]), ends, omap.get("indexed") == b"1")
            return cls(state, parts)
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise SegmentStoreError(f"ledger {ledger_id}: damaged head record ({exc})") from None


def _ints(values: tuple[int, ...]) -> bytes:
    return ",".join(map(str, values)).encode()


def _parse_ints(raw: bytes) -> tuple[int, ...]:
    return tuple(int(x) for x in raw.decode().split(",")) if raw else ()


# --- errors -------------------------------------------------------------------------------------
#: errnos after which the same call may succeed later (cluster unreachable, below min_size, ...).
_RETRIABLE = frozenset({errno.ETIMEDOUT, errno.EAGAIN, errno.EINTR, errno.ECONNREFUSED, errno.ENOTCONN, errno.EBUSY})


def errno_of(exc: BaseException) -> int | None:
    """The positive errno of a librados exception (the binding's ``errno`` may be negative)."""
    value = getattr(exc, "errno", None)
    return abs(int(value)) if isinstance(value, int) else None


def translate(err: int | None, what: str, *, cause: BaseException | None = None) -> DLError:
    """The :mod:`storage.errors` exception for a librados failure with errno ``err`` while doing
    ``what`` (``ETIMEDOUT`` and friends retriable; ``ENOENT`` a missing ledger)."""
    name = errno.errorcode.get(err or 0, "unknown error")
    if err == errno.ENOENT:
        exc: DLError = LedgerNotFoundError(f"{what}: no such object ({name})")
    elif err == errno.ETIMEDOUT:
        exc = SegmentStoreError(
            f"{what}: timed out ({name}): the Ceph cluster is unreachable or the placement group is below "
            "min_size; the outcome of a timed-out write is unknown",
            retriable=True,
        )
    else:
        exc = SegmentStoreError(f"{what}: {name} (errno {err})", retriable=err in _RETRIABLE)
    if cause is not None:
        exc.__cause__ = cause
    return exc


def append_error(rc: int, ledger_id: int, part: int) -> DLError:
    """The error of a failed guarded append (``rc`` a negative errno from a completion)."""
    err = -rc
    if err in (errno.ECANCELED, errno.EEXIST):
        return WriterFencedError(f"ledger {ledger_id} was fenced (append to part {part} refused)")
    if err == errno.ENOENT:
        return SegmentStoreError(f"ledger {ledger_id} part {part} vanished under its writer (deleted?)")
    if err == errno.EFBIG:
        return SegmentStoreError(
            f"ledger {ledger_id} part {part}: object too large for the cluster (EFBIG): set radosMaxObjectBytes "
            "below the OSDs' osd_max_object_size"
        )
    return translate(err, f"ledger {ledger_id}: append to part {part} failed")


# --- change notification ------------------------------------------------------------------------
class Notifier(ChangeHub):
    """Watch/notify on :data:`NOTIFY_OID`: writers announce ledger changes, stores wake waiters.

    One RADOS watch per store (made by :meth:`ensure_watch`, on the first waiter or callback)
    turns notifications into the hub's generation bumps and callbacks, as the local store's
    inotify watcher does. Writers call :meth:`notify` after every acknowledged group; it sends at
    most ``max_in_flight`` notifications at a time per store and coalesces the rest (a
    notification waits for every watcher's ack, up to ``timeout_ms``, when a watcher died).
    Notifications may be lost (watch errors, then every ledger counts as changed, listed with
    ``list_ids``); waiters also re-check every 100 ms.
    """

    def __init__(
        self,
        ioctx: Any,
        rados_mod: Any,
        list_ids: Callable[[], list[int]],
        *,
        timeout_ms: int = 1000,
        max_in_flight: int = 2,
    ) -> None:
        super().__init__()
        self._ioctx = ioctx
        self._rados = rados_mod
        self._list_ids = list_ids
        self._timeout_ms = timeout_ms
        self._max_in_flight = max_in_flight
        self._watch: Any = None
        self._in_flight = 0
        self._pending: set[int] = set()

    @property
    def recheck_interval(self) -> float:
        return 0.1

    # --- waiting side ---------------------------------------------------------------------------
    def ensure_watch(self) -> None:
        """Watch the notify object (creating it), once; on failure waiters keep re-checking."""
        with self._cond:
            if self._watch is not None or self._stopped:
                return
            try:
                with self._rados.WriteOpCtx() as op:  # the watched object must exist
                    op.new(self._rados.LIBRADOS_CREATE_IDEMPOTENT)
                    self._ioctx.operate_write_op(op, NOTIFY_OID)
                self._watch = self._ioctx.watch(NOTIFY_OID, self._on_notify, self._on_watch_error)
            except Exception as exc:
                _log.warning("cannot watch %s (%s); waiters poll every %.2fs", NOTIFY_OID, exc, self.recheck_interval)
                self._watch = False

    def _on_notify(self, _notify_id: int, _notifier_id: Any, _watch_id: int, data: bytes | str) -> None:
        try:
            ledger_id = int(data)
        except (TypeError, ValueError):
            return
        self.changed((ledger_id,))

    def _on_watch_error(self, err: int) -> None:
        _log.warning("watch on %s failed (errno %s); re-watching", NOTIFY_OID, err)
        with self._cond:
            old, self._watch = self._watch, None
        if old:
            try:
                old.close()
            except Exception:
                pass
        try:
            ids = self._list_ids()
        except DLError:
            ids = []
        self.changed(ids, lost=True)  # events may have been lost: wake everyone
        self.ensure_watch()

    # --- notifying side -----------------------------------------------------------------------
    def notify(self, ledger_id: int) -> None:
        """Tell every watching store that ledger ``ledger_id`` changed (asynchronous, coalesced)."""
        self.changed((ledger_id,))  # waiters of this process need no round trip
        with self._cond:
            if self._stopped:
                return
            if self._in_flight >= self._max_in_flight:
                self._pending.add(ledger_id)
                return
            self._in_flight += 1
        self._send(ledger_id)

    def _send(self, ledger_id: int) -> None:
        try:
            self._ioctx.aio_notify(NOTIFY_OID, self._sent, msg=str(ledger_id), timeout_ms=self._timeout_ms)
        except Exception as exc:
            _log.debug("notify of ledger %s failed: %s", ledger_id, exc)
            self._sent(None, 0, None, None)

    def _sent(self, _comp: Any, _ret: int, _acks: Any, _timeouts: Any) -> None:
        with self._cond:
            if self._pending and not self._stopped:
                ledger_id = self._pending.pop()
            else:
                self._in_flight -= 1
                self._cond.notify_all()
                return
        self._send(ledger_id)

    def close(self) -> None:
        """Stop watching, wake every waiter, and wait (bounded by the notify timeout) for the
        notifications in flight: librados must not call back into a client being shut down.
        Idempotent."""
        self.stop()
        with self._cond:
            watch, self._watch = self._watch, None
            self._pending.clear()
            self._cond.wait_for(lambda: self._in_flight == 0, self._timeout_ms / 1000 + 5)
        if watch:
            try:
                watch.close()
            except Exception as exc:
                _log.debug("closing the watch failed: %s", exc)
