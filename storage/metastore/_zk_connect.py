"""The first connection of a ZooKeeper store's kazoo client, with a clear account of what it waits for.

kazoo's ``KazooClient.start(timeout)`` waits silently (its reconnect loop retries refused
connections in the background). Here the wait says what it is doing: if the client is not
connected after :data:`WARN_AFTER_S`, one WARNING names the servers, why they do not answer (one
TCP connect to each, within :data:`PROBE_BUDGET_S`: connection refused, no answer, unknown host,
or reachable but no session) and when it gives up; after ``timeout_s`` the client is stopped and
one :class:`~storage.errors.MetadataConnectionError` (retriable) names the servers and the reason.

The timeout is the namespace's ``zkSessionTimeoutSeconds``, as in DistributedLog, whose ZooKeeper
client waits one session timeout for its connection (BookKeeper's ``ZooKeeperWatcherBase
.waitForConnection``) before failing with a connection loss.

Also here: the checks of the store's connect string (:func:`split_chroot`) and connection settings
(:func:`check_settings`). Imports :mod:`storage.errors` and :mod:`storage.metastore._sqlite_tree`
(path checks); neither kazoo nor :mod:`storage.metastore.zookeeper`.
"""

from __future__ import annotations

import logging
import math
import socket
import time
import urllib.parse
from typing import Protocol, TypeGuard

from storage.errors import InvalidArgumentError, MetadataConnectionError
from storage.metastore._sqlite_tree import check_path

__all__ = [
    "PROBE_BUDGET_S",
    "WARN_AFTER_S",
    "Client",
    "check_settings",
    "connect",
    "is_number",
    "servers_of",
    "split_chroot",
    "why_unreachable",
]

log = logging.getLogger("storage.metastore.zookeeper")

#: How long the first connection may take before the WARNING (the probe then takes at most
#: :data:`PROBE_BUDGET_S`: the warning comes within a second).
WARN_AFTER_S = 0.5
#: Time for the probe's TCP connects, all servers together.
PROBE_BUDGET_S = 0.4


class _Event(Protocol):
    def wait(self, timeout: float | None = None) -> bool: ...

    def is_set(self) -> bool: ...


class Client(Protocol):
    """What is used of a ``kazoo.client.KazooClient`` (kazoo itself is imported only by the adapter)."""

    @property
    def connected(self) -> bool: ...

    def start_async(self) -> _Event: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


def servers_of(hosts: str) -> list[tuple[str, int]]:
    """``(host, port)`` of each server of ``host:port[,host:port...][/chroot]`` (port 2181 if none;
    IPv6 as ``[addr]:port``), as kazoo reads them.

    Raises:
        ValueError: a server without a host name, or a bad port.
    """
    out = []
    for server in hosts.partition("/")[0].split(","):
        parts = urllib.parse.urlsplit("zk://" + server.strip())
        if not parts.hostname:
            raise ValueError(f"no host name in {server!r}")
        out.append((parts.hostname, parts.port or 2181))
    return out


def why_unreachable(hosts: str, budget_s: float = PROBE_BUDGET_S) -> str:
    """Why ZooKeeper at ``hosts`` (``host:port[,host:port...]``) does not answer, from one TCP
    connect to each server within ``budget_s`` in all: ``connection refused``, ``no answer``,
    ``unknown host``, ``reachable, but no ZooKeeper session`` or the OS's reason. Several servers:
    ``host:port <reason>`` each, comma-separated. Never raises."""
    try:
        servers = servers_of(hosts)
    except ValueError:
        return "malformed server list"
    end = time.monotonic() + budget_s
    reasons: list[str] = []
    for host, port in servers:
        left = end - time.monotonic()
        if left <= 0:
            reason = "not probed"
        else:
            try:
                with socket.create_connection((host, port), timeout=left):
                    reason = "reachable, but no ZooKeeper session"
            except ConnectionRefusedError:
                reason = "connection refused"
            except TimeoutError:
                reason = "no answer"
            except socket.gaierror:
                reason = "unknown host"
            except OSError as e:
                reason = (e.strerror or str(e) or type(e).__name__).lower()
        reasons.append(reason)
    if len(reasons) == 1:
        return reasons[0]
    return ", ".join(f"{host}:{port} {reason}" for (host, port), reason in zip(servers, reasons, strict=True))


def connect(client: Client, hosts: str, timeout_s: float, *, timeout_key: str) -> None:
    """Start ``client`` and wait until it is connected: a WARNING after :data:`WARN_AFTER_S`,
    an error after ``timeout_s`` (``timeout_key`` names the setting in messages).

    Raises:
        MetadataConnectionError: not connected within ``timeout_s``; the client is stopped.
    """
    start = time.monotonic()
    connected = client.start_async()  # a threading.Event, set while connected
    if not connected.wait(min(WARN_AFTER_S, timeout_s)):
        reason = why_unreachable(hosts)
        if not connected.is_set():
            log.warning("waiting for ZooKeeper at %s (%s); giving up after %g s", hosts, reason, timeout_s)
        connected.wait(max(0.0, start + timeout_s - time.monotonic()))
    if client.connected:
        return
    reason = why_unreachable(hosts)
    try:
        client.stop()
        client.close()
    except Exception:
        log.debug("stopping the kazoo client after a failed connect failed", exc_info=True)
    raise MetadataConnectionError(
        f"cannot connect to ZooKeeper at {hosts} within {timeout_s:g} s ({timeout_key}): {reason}; "
        "is the server running and the namespace URI's host:port right?"
    )


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or a float, not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def split_chroot(hosts: object, root: str) -> tuple[str, str]:
    """``(servers, root)`` of a store opened on ``hosts`` (``host:port[,host:port...][/chroot]``) at
    ``root``: a chroot in the connect string comes before ``root``.

    Raises:
        InvalidArgumentError: ``hosts`` is not a server list, or a malformed root or chroot.
    """
    if not isinstance(hosts, str) or not hosts.strip() or hosts.strip().startswith("/"):
        raise InvalidArgumentError(f"hosts must be 'host:port[,host:port...]', not {hosts!r}")
    root = check_path(root)
    hosts = hosts.strip()
    if "/" in hosts:  # a chroot in the connect string comes before root
        hosts, extra = hosts.split("/", 1)
        extra = "/" + extra.strip("/")
        if extra != "/":
            root = check_path(extra if root == "/" else extra + root)
    return hosts, root


def check_settings(
    *,
    session_timeout_s: object,
    connect_timeout_s: object,
    open_timeout_s: object,
    retry_start_backoff_ms: object,
    retry_max_backoff_ms: object,
    retry_max_tries: object,
) -> None:
    """Check the connection settings of a store (see ``ZooKeeperMetadataStore``): timeouts finite and
    > 0, backoffs finite and >= 0, ``retry_max_tries`` an int >= 1 or -1.

    Raises:
        InvalidArgumentError: the first bad setting, named.
    """
    for name, value, positive in (
        ("session_timeout_s", session_timeout_s, True),
        ("connect_timeout_s", connect_timeout_s, True),
        ("open_timeout_s", open_timeout_s, True),
        ("retry_start_backoff_ms", retry_start_backoff_ms, False),
        ("retry_max_backoff_ms", retry_max_backoff_ms, False),
    ):
        if not is_number(value) or not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise InvalidArgumentError(f"{name} must be a finite number {'>' if positive else '>='} 0, not {value!r}")
    if (
        not isinstance(retry_max_tries, int)
        or isinstance(retry_max_tries, bool)
        or not (retry_max_tries >= 1 or retry_max_tries == -1)
    ):
        raise InvalidArgumentError(f"retry_max_tries must be an int >= 1 or -1, not {retry_max_tries!r}")
