"""Where the write proxies are: a static list, or the proxies announced in ZooKeeper (:mod:`dl_proxy.registry`).

A discovery keeps a set of *writable* addresses (announced ``WRITE_AND_ACCEPT``: they may take new streams) and
of *known* ones (also ``WRITE_ONLY``: draining, still serving the streams they own); the client's ring holds
the writable ones, redirects may go to any known one. :class:`ZooKeeperDiscovery` re-reads the announcements
when ZooKeeper reports a change under ``.proxies`` and every ``refresh_s`` seconds (a status change is a data
change of one child, which the folder's watch does not report), and calls ``on_change`` whenever the sets
differ from the last ones.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dl_proxy.registry import PROXIES_PATH, check_address, read_proxies
from storage.errors import DLError, InvalidArgumentError
from storage.log.namespace import Namespace, open_namespace

__all__ = ["Discovery", "Membership", "StaticDiscovery", "ZooKeeperDiscovery"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Membership:
    """The proxies known right now: ``writable`` take new streams; ``known`` includes draining ones; ``tls``
    the addresses that announced TLS; ``started_ms`` when each announced proxy started (a restart changes it)."""

    writable: frozenset[str]
    known: frozenset[str]
    tls: frozenset[str] = frozenset()
    started_ms: tuple[tuple[str, int], ...] = ()


class Discovery:
    """The interface: :meth:`start` once (``on_change`` is then called from a background thread on every
    change), :meth:`current`, :meth:`refresh` (re-read now, e.g. when no proxy answers), :meth:`close`."""

    def start(self, on_change: Callable[[Membership], None]) -> None:
        raise NotImplementedError

    def current(self) -> Membership:
        raise NotImplementedError

    def refresh(self) -> Membership:
        return self.current()

    def describe(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        return None


class StaticDiscovery(Discovery):
    """A fixed list of addresses ``"host:port"``.

    Raises:
        InvalidArgumentError: an address is not ``host:port``, or the list is empty.
    """

    def __init__(self, addresses: Iterable[str], *, tls: bool = False) -> None:
        addrs = frozenset(check_address(a.strip()) for a in addresses)
        if not addrs:
            raise InvalidArgumentError("ProxyClient(proxies=[...]) needs at least one 'host:port'")
        self._membership = Membership(addrs, addrs, addrs if tls else frozenset())

    def start(self, on_change: Callable[[Membership], None]) -> None:
        on_change(self._membership)

    def current(self) -> Membership:
        return self._membership

    def describe(self) -> str:
        return "proxies " + ",".join(sorted(self._membership.known))


class ZooKeeperDiscovery(Discovery):
    """The proxies announced under ``<namespace>/.proxies`` of the ZooKeeper namespace ``uri``.

    Raises (from the constructor):
        NamespaceNotFoundError: no namespace at ``uri``. MetadataError: ZooKeeper unreachable, or not bound.
        InvalidArgumentError: a malformed URI.
    """

    def __init__(self, uri: str, *, refresh_s: float = 5.0, conf: dict[str, object] | None = None) -> None:
        self.uri = uri
        self._refresh_s = refresh_s
        self._ns: Namespace = open_namespace(uri, conf, create=False)
        self._mu = threading.Lock()
        self._membership = Membership(frozenset(), frozenset())
        self._on_change: Callable[[Membership], None] | None = None
        self._cancel_watch: Callable[[], None] | None = None
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None

    def describe(self) -> str:
        return f"proxies announced in {self.uri}"

    def start(self, on_change: Callable[[Membership], None]) -> None:
        self._on_change = on_change
        self.refresh()
        self._cancel_watch = self._ns.metastore.watch(PROXIES_PATH, lambda _p: self._refresh_quietly())
        self._timer = threading.Thread(target=self._periodic, name="dl-proxy-discovery", daemon=True)
        self._timer.start()

    def current(self) -> Membership:
        with self._mu:
            return self._membership

    def refresh(self) -> Membership:
        """Re-read the announcements; calls ``on_change`` if they changed.

        Raises:
            MetadataError: ZooKeeper fails (MetadataConnectionError, retriable, when unreachable).
        """
        infos = read_proxies(self._ns.metastore)
        writable = frozenset(i.address for i in infos if i.status == "WRITE_AND_ACCEPT")
        known = frozenset(i.address for i in infos if i.status != "DOWN")
        tls = frozenset(i.address for i in infos if i.tls)
        started = tuple(sorted((i.address, i.started_ms) for i in infos))
        new = Membership(writable, known, tls, started)
        with self._mu:
            changed = new != self._membership
            self._membership = new
            callback = self._on_change
        if changed:
            log.debug("proxies in %s: writable %s, known %s", self.uri, sorted(writable), sorted(known))
            if callback is not None:
                callback(new)
        return new

    def _refresh_quietly(self) -> None:
        if self._stop.is_set():
            return
        try:
            self.refresh()
        except DLError as e:  # ZooKeeper away: keep the last membership; the next change or tick re-reads
            log.info("proxy discovery in %s not refreshed: %s", self.uri, e)

    def _periodic(self) -> None:
        while not self._stop.wait(self._refresh_s):
            self._refresh_quietly()

    def close(self) -> None:
        """Stop watching and close the namespace. Idempotent; never raises."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._cancel_watch is not None:
            self._cancel_watch()
        try:
            self._ns.close()
        except DLError as e:
            log.info("closing the discovery's namespace %s: %s", self.uri, e)
