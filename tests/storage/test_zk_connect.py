"""A ZooKeeper that does not answer: opening a namespace says within a second what it waits for (one
WARNING naming the servers and why), then gives up after the session timeout
(``zkSessionTimeoutSeconds``, as DistributedLog's client) with one retriable MetadataConnectionError
naming the servers. Real sockets: a port where nothing listens, and one that accepts connections but
never speaks ZooKeeper."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import pytest

import storage
from storage.metastore._zk_connect import why_unreachable
from tests.zk import free_port

LOGGER = "storage.metastore.zookeeper"
TIMEOUT_S = 2
#: Allowed beyond the timeout: stopping the kazoo client and the final probe.
SLACK_S = 1.5


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) but never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


def _open_and_time(uri: str, caplog: pytest.LogCaptureFixture, **kw: bool) -> tuple[storage.DLError, float, str, float]:
    """(error, seconds to fail, the WARNING, seconds to it) of opening ``uri``."""
    caplog.clear()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    t0, m0 = time.time(), time.monotonic()
    with pytest.raises(storage.MetadataConnectionError) as err:
        storage.open_namespace(uri, {"zkSessionTimeoutSeconds": TIMEOUT_S}, **kw)
    took = time.monotonic() - m0
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    return err.value, took, warnings[0].getMessage(), warnings[0].created - t0


@pytest.mark.parametrize("create", [True, False])
def test_nothing_listening_warns_within_a_second_then_fails_after_the_timeout(
    caplog: pytest.LogCaptureFixture, create: bool
) -> None:
    hosts = f"127.0.0.1:{free_port()}"
    err, took, warning, warned = _open_and_time(f"distributedlog://{hosts}/ns", caplog, create=create)
    assert str(err) == (
        f"cannot connect to ZooKeeper at {hosts} within {TIMEOUT_S} s (zkSessionTimeoutSeconds): connection refused; "
        "is the server running and the namespace URI's host:port right?"
    )
    assert isinstance(err, storage.MetadataError) and err.retriable is True
    assert warning == (f"waiting for ZooKeeper at {hosts} (connection refused); giving up after {TIMEOUT_S} s")
    assert warned < 1.0, f"warning after {warned:.2f}s"
    assert TIMEOUT_S - 0.1 <= took < TIMEOUT_S + SLACK_S, f"gave up after {took:.2f}s"


def test_several_servers_and_a_silent_one(caplog: pytest.LogCaptureFixture, silent_port: int) -> None:
    refused = free_port()
    hosts = f"127.0.0.1:{refused},127.0.0.1:{silent_port}"
    err, took, warning, warned = _open_and_time(f"distributedlog://{hosts}/ns", caplog)
    reason = f"127.0.0.1:{refused} connection refused, 127.0.0.1:{silent_port} reachable, but no ZooKeeper session"
    assert f"cannot connect to ZooKeeper at {hosts} within {TIMEOUT_S} s (zkSessionTimeoutSeconds): {reason};" in str(
        err
    )
    assert warning == f"waiting for ZooKeeper at {hosts} ({reason}); giving up after {TIMEOUT_S} s"
    assert warned < 1.0, f"warning after {warned:.2f}s"
    assert took < TIMEOUT_S + SLACK_S, f"gave up after {took:.2f}s"


def test_bind_gives_the_same_error(caplog: pytest.LogCaptureFixture) -> None:
    hosts = f"127.0.0.1:{free_port()}"
    caplog.set_level(logging.WARNING, logger=LOGGER)
    t0 = time.monotonic()
    with pytest.raises(storage.MetadataConnectionError, match=f"cannot connect to ZooKeeper at {hosts} within 1 s"):
        storage.bind_namespace(
            f"distributedlog://{hosts}/ns", "file:///tmp/unused-segments", {"zkSessionTimeoutSeconds": 1}
        )
    assert time.monotonic() - t0 < 1 + SLACK_S


def test_why_unreachable() -> None:
    assert why_unreachable(f"127.0.0.1:{free_port()}") == "connection refused"
    assert why_unreachable("no-such-host.invalid:2181") == "unknown host"
    assert why_unreachable("127.0.0.1:notaport") == "malformed server list"
