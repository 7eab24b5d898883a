"""Proxy announcements: which write proxies serve a namespace (DistributedLog's proxies announce themselves in
ZooKeeper the same way, for the routing service).

Every running proxy keeps one ephemeral node ``<namespace root>/.proxies/<host>:<port>`` whose data is UTF-8 JSON::

    {"address": "host:port", "status": "WRITE_AND_ACCEPT" | "WRITE_ONLY" | "DOWN", "tls": bool, "started_ms": int}

``WRITE_AND_ACCEPT``: writes and takes new streams; ``WRITE_ONLY``: writes the streams it owns, refuses new ones
(``setAcceptNewStream(false)``, draining); ``DOWN``: shutting down. The node is the proxy's ZooKeeper session:
it disappears when the proxy exits, dies or loses its session (liveness is the session, ``zkSessionTimeoutSeconds``).
After a new session the proxy puts it back (:class:`Announcement` watches its own node). Names starting with ``.``
are reserved, so ``.proxies`` is never listed as a log.

Clients discover proxies with :func:`list_proxies` (and may watch :data:`PROXIES_PATH` on the namespace's
metadata store to learn of changes).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from storage.errors import DLError, InvalidArgumentError, NodeExistsError, NoNodeError
from storage.metastore.base import MetadataStore

log = logging.getLogger(__name__)

#: How many times a stale node at this proxy's address is deleted and re-created before start() gives up (its old
#: session, still alive, may put it back in between).
STALE_REPLACE_ATTEMPTS = 5

#: The folder (relative to the namespace root) of the proxies' ephemeral nodes.
PROXIES_PATH = "/.proxies"
#: The statuses a proxy announces (DistributedLog's ServerStatus names).
STATUSES = ("WRITE_AND_ACCEPT", "WRITE_ONLY", "DOWN")

__all__ = ["PROXIES_PATH", "STATUSES", "Announcement", "ProxyInfo", "is_loopback", "list_proxies", "read_proxies"]


@dataclass(frozen=True)
class ProxyInfo:
    """One announced proxy."""

    address: str  # "host:port"
    status: str  # one of STATUSES
    tls: bool
    started_ms: int

    def to_json(self) -> bytes:
        """The node's data."""
        return json.dumps(
            {"address": self.address, "status": self.status, "tls": self.tls, "started_ms": self.started_ms},
            sort_keys=True,
        ).encode("utf-8")

    @staticmethod
    def from_json(data: bytes) -> ProxyInfo:
        """Parse a node's data.

        Raises:
            InvalidArgumentError: not the JSON above.
        """
        try:
            doc = json.loads(data.decode("utf-8"))
            info = ProxyInfo(str(doc["address"]), str(doc["status"]), bool(doc["tls"]), int(doc["started_ms"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise InvalidArgumentError(f"not a proxy announcement: {data[:80]!r} ({e})") from e
        if info.status not in STATUSES:
            raise InvalidArgumentError(f"proxy {info.address}: unknown status {info.status!r}")
        return info


def node_path(address: str) -> str:
    """The node of the proxy at ``address`` ("host:port")."""
    check_address(address)
    return f"{PROXIES_PATH}/{address}"


def check_address(address: object) -> str:
    """``address`` if it is ``host:port``.

    Raises:
        InvalidArgumentError: it is not.
    """
    if not isinstance(address, str) or "/" in address or ":" not in address:
        raise InvalidArgumentError(f"proxy address must be 'host:port', not {address!r}")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgumentError(f"proxy address must be 'host:port', not {address!r}")
    return address


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (``127.0.0.1``, ``[::1]``): a proxy there needs no TLS, and a
    client may send it a token in plaintext."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_proxies(store: MetadataStore) -> list[ProxyInfo]:
    """The proxies announced in the namespace whose metadata store is ``store``, sorted by address (nodes that
    vanish while being read, or hold bad data, are left out; bad data is logged).

    Raises:
        MetadataError: the store fails (MetadataConnectionError: ZooKeeper unreachable, retriable).
    """
    try:
        names = store.children(PROXIES_PATH)
    except NoNodeError:
        return []
    out: list[ProxyInfo] = []
    for name, got in zip(names, store.get_many([f"{PROXIES_PATH}/{n}" for n in names]), strict=True):
        if got is None:
            continue
        try:
            out.append(ProxyInfo.from_json(got.value))
        except InvalidArgumentError as e:
            log.warning("ignoring proxy node %s: %s", name, e)
    return sorted(out, key=lambda p: p.address)


def list_proxies(namespace: object) -> list[ProxyInfo]:
    """The proxies serving ``namespace``: a ``storage.Namespace`` (its metadata store is used), or a ZooKeeper
    namespace URI (opened read-only for the call).

    Raises:
        InvalidArgumentError: neither. NamespaceNotFoundError: no namespace at the URI. MetadataError.
    """
    if isinstance(namespace, str):
        import storage

        with storage.open_namespace(namespace, create=False) as ns:
            return read_proxies(ns.metastore)
    store = getattr(namespace, "metastore", None)
    if not isinstance(store, MetadataStore):
        raise InvalidArgumentError(f"list_proxies needs a storage.Namespace or a URI, not {type(namespace).__name__}")
    return read_proxies(store)


class Announcement:
    """This proxy's node: created by :meth:`start`, its status changed by :meth:`set_status`, put back after the
    session is lost and renewed (a watch on the node), deleted by :meth:`close`."""

    def __init__(self, store: MetadataStore, address: str, *, tls: bool, status: str = "WRITE_AND_ACCEPT") -> None:
        if status not in STATUSES:
            raise InvalidArgumentError(f"unknown proxy status {status!r}")
        self._store = store
        self._path = node_path(address)
        self._mu = threading.Lock()
        self._info = ProxyInfo(address, status, bool(tls), int(time.time() * 1000))
        self._cancel: Callable[[], None] | None = None
        self._closed = False

    @property
    def info(self) -> ProxyInfo:
        return self._info

    def start(self) -> None:
        """Create the node (and ``.proxies``), then keep it there.

        Raises:
            NodeExistsError: another live session kept putting its node for this address back.
            MetadataError: ZooKeeper fails.
        """
        try:
            self._store.create(PROXIES_PATH, make_parents=True)
        except NodeExistsError:
            pass
        self._ensure(first=True)
        self._cancel = self._store.watch(self._path, lambda _p: self._on_change())

    def _ensure(self, *, first: bool = False) -> None:
        """Create the node if it is missing (after a lost session)."""
        with self._mu:
            if self._closed:
                return
            data = self._info.to_json()
            try:
                self._store.create_ephemeral(self._path, data)
                if not first:
                    log.warning("proxy node %s was gone (ZooKeeper session lost): announced again", self._path)
            except NodeExistsError:
                if first:
                    # We hold the port, so the proxy that announced this address is gone (killed, its ZooKeeper
                    # session not yet expired): replace its node. Call start() only once serving.
                    # The old session may still be alive and watching its node (a process being torn down), and
                    # put it back between our delete and our create: try a few times before giving up.
                    log.info("replacing the stale node %s of a previous proxy at this address", self._path)
                    for attempt in range(STALE_REPLACE_ATTEMPTS):
                        try:
                            self._store.delete(self._path)
                        except NoNodeError:
                            pass
                        try:
                            self._store.create_ephemeral(self._path, data)
                            return
                        except NodeExistsError:
                            if attempt == STALE_REPLACE_ATTEMPTS - 1:
                                raise
                            time.sleep(0.05 * (attempt + 1))

    def _on_change(self) -> None:
        try:
            if self._store.exists(self._path) is None:
                self._ensure()
        except DLError as e:  # disconnected: the watch fires again after the reconnect
            log.info("proxy node %s not checked: %s", self._path, e)

    def set_status(self, status: str) -> None:
        """Announce a new status.

        Raises:
            InvalidArgumentError: unknown status. MetadataError.
        """
        if status not in STATUSES:
            raise InvalidArgumentError(f"unknown proxy status {status!r}")
        with self._mu:
            info = self._info
            self._info = ProxyInfo(info.address, status, info.tls, info.started_ms)
            try:
                self._store.set(self._path, self._info.to_json())
            except NoNodeError:
                pass  # re-created with the new status by the watch
        self._on_change()

    def close(self) -> None:
        """Delete the node (best effort: it is ephemeral anyway). Idempotent; never raises."""
        with self._mu:
            if self._closed:
                return
            self._closed = True
        if self._cancel is not None:
            self._cancel()
        try:
            self._store.delete(self._path)
        except DLError as e:
            log.info("proxy node %s not deleted (it goes with the session): %s", self._path, e)
