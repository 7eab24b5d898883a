"""A loopback TCP relay for real network faults between a ZooKeeper client and its server, and helpers to
watch a ZooKeeper store's connection states.

:class:`TcpRelay` listens on ``127.0.0.1:<free port>`` and forwards every connection to a target (a private
ZooKeeper server). :meth:`TcpRelay.cut` drops every forwarded connection at once (both sides see it closed) and,
until :meth:`TcpRelay.heal`, closes every new connection as soon as it is accepted: to the client it is a real
disconnect (kazoo goes SUSPENDED and keeps trying to reconnect), while the server, and every other client of it,
is undisturbed. Point a namespace URI (or a proxy's ``--uri``) at :attr:`TcpRelay.hosts`.

:class:`StateLog` records the kazoo connection states of a :class:`~storage.metastore.zookeeper
.ZooKeeperMetadataStore` (``SUSPENDED``, ``CONNECTED``, ``LOST``), so that a test can tell that the disconnect
it made was seen, and that the session survived it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

__all__ = ["StateLog", "TcpRelay"]


class TcpRelay:
    """Forwards TCP connections from ``127.0.0.1:<port>`` to ``target`` (``host:port``), until closed.

    Thread-safe. Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self._mu = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._cut = False
        self._closed = False
        #: Connections accepted (forwarded or refused) so far.
        self.accepted = 0
        #: Forwarded connections dropped by :meth:`cut`.
        self.dropped = 0
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"tcp-relay-{self.port}", daemon=True)
        self._acceptor.start()

    @property
    def hosts(self) -> str:
        """The connect string of the relay, ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """Drop every forwarded connection now, and refuse new ones until :meth:`heal`."""
        with self._mu:
            self._cut = True
            pairs, self._pairs = list(self._pairs), set()
            self.dropped += len(pairs)
        for a, b in pairs:
            _close(a)
            _close(b)

    def heal(self) -> None:
        """Forward new connections again."""
        with self._mu:
            self._cut = False

    def close(self) -> None:
        """Stop listening and drop every connection. Idempotent."""
        with self._mu:
            self._closed = True
        self.cut()
        self._acceptor.join(5)
        with contextlib.suppress(OSError):
            self._listener.close()

    def __enter__(self) -> TcpRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals --------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            with self._mu:
                self.accepted += 1
                refuse = self._cut or self._closed
            if refuse:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5.0)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            pair = (client, upstream)
            with self._mu:
                if self._cut or self._closed:
                    refuse = True
                else:
                    self._pairs.add(pair)
            if refuse:
                _close(client)
                _close(upstream)
                continue
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst, pair), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pair: tuple[socket.socket, socket.socket]) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        with self._mu:
            self._pairs.discard(pair)
        _close(src)
        _close(dst)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()


class StateLog:
    """The kazoo connection states of a ZooKeeper store (``"SUSPENDED"``, ``"CONNECTED"``, ``"LOST"``), in order,
    from when it is made."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._mu = threading.Lock()
        self._states: list[str] = []
        store._client.add_listener(self._on_state)

    def _on_state(self, state: Any) -> None:
        with self._mu:
            self._states.append(str(state))

    @property
    def states(self) -> list[str]:
        with self._mu:
            return list(self._states)

    def saw(self, *states: str) -> bool:
        """True if ``states`` were seen in this order (others may come between)."""
        it = iter(self.states)
        return all(any(s == want for s in it) for want in states)

    @property
    def suspended(self) -> bool:
        """The store is disconnected right now (SUSPENDED or LOST, not reconnected)."""
        return self._store._suspended_since is not None
