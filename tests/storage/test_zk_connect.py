"""A ZooKeeper that does not answer: opening a namespace says during the wait what it waits for (one
WARNING naming the servers and why, after half a second: acting on it, making the server reachable, lets the
same open succeed), then gives up after the session timeout (``zkSessionTimeoutSeconds``, as DistributedLog's
client) with one retriable MetadataConnectionError naming the servers. Real sockets: a port where nothing
listens, one that accepts connections but never speaks ZooKeeper, and a relay to a real server that closes
every connection until it is healed."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import storage
from storage.metastore._zk_connect import why_unreachable
from tests.storage.observe import Timeline, finishes
from tests.storage.zk_relay import TcpRelay
from tests.zk import ZooKeeperServer, free_port

LOGGER = "storage.metastore.zookeeper"
#: zkSessionTimeoutSeconds of the opens that fail: long against the warning's WARN_AFTER_S (0.5 s, plus the
#: probe), so that the warning comes before the open gives up.
TIMEOUT_S = 5


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) but never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


def _open(uri: str, caplog: pytest.LogCaptureFixture, create: bool = True) -> tuple[storage.DLError, str, list[str]]:
    """(error, the one WARNING, the timeline) of opening ``uri``, which must fail no sooner than the timeout."""
    caplog.clear()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with Timeline().logging_to(LOGGER) as timeline:
        started = time.monotonic()
        with pytest.raises(storage.MetadataConnectionError) as err:
            finishes(
                lambda: storage.open_namespace(uri, {"zkSessionTimeoutSeconds": TIMEOUT_S}, create=create), "the open"
            )
        timeline.mark("gave up")
        assert time.monotonic() - started >= TIMEOUT_S - 0.1  # not before the timeout
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    return err.value, warnings[0].getMessage(), timeline.events


@pytest.mark.parametrize("create", [True, False])
def test_nothing_listening_warns_early_then_fails_after_the_timeout(
    caplog: pytest.LogCaptureFixture, create: bool
) -> None:
    hosts = f"127.0.0.1:{free_port()}"
    err, warning, timeline = _open(f"distributedlog://{hosts}/ns", caplog, create=create)
    assert str(err) == (
        f"cannot connect to ZooKeeper at {hosts} within {TIMEOUT_S} s (zkSessionTimeoutSeconds): connection refused; "
        "is the server running and the namespace URI's host:port right?"
    )
    assert isinstance(err, storage.MetadataError) and err.retriable is True
    assert warning == (f"waiting for ZooKeeper at {hosts} (connection refused); giving up after {TIMEOUT_S} s")
    assert timeline == ["warning", "gave up"]


def test_several_servers_and_a_silent_one(caplog: pytest.LogCaptureFixture, silent_port: int) -> None:
    refused = free_port()
    hosts = f"127.0.0.1:{refused},127.0.0.1:{silent_port}"
    err, warning, timeline = _open(f"distributedlog://{hosts}/ns", caplog)
    reason = f"127.0.0.1:{refused} connection refused, 127.0.0.1:{silent_port} reachable, but no ZooKeeper session"
    assert f"cannot connect to ZooKeeper at {hosts} within {TIMEOUT_S} s (zkSessionTimeoutSeconds): {reason};" in str(
        err
    )
    assert warning == f"waiting for ZooKeeper at {hosts} ({reason}); giving up after {TIMEOUT_S} s"
    assert timeline == ["warning", "gave up"]


def test_the_warning_comes_while_the_open_can_still_succeed(
    zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The WARNING is said during the wait, which goes on trying: making the server reachable once it is seen lets
    the same open succeed (a warning said only when the open gives up would come too late for that)."""
    storage.bind_namespace(f"distributedlog://{zk_server.hosts}{zk_chroot}", segments=f"file://{tmp_path}/segments")
    caplog.set_level(logging.WARNING, logger=LOGGER)
    session_s = 30  # what the open may wait: far beyond the warning's half second and the reconnect after it
    with TcpRelay(zk_server.hosts) as relay, Timeline().logging_to(LOGGER) as timeline:
        relay.cut()  # the server is there, but every connection is closed at once: no session

        def make_reachable() -> None:
            relay.heal()
            timeline.mark("server reachable")

        timeline.on("warning", make_reachable)
        uri = f"distributedlog://{relay.hosts}{zk_chroot}"
        ns = finishes(lambda: storage.open_namespace(uri, {"zkSessionTimeoutSeconds": session_s}), "the open")
        timeline.mark("opened")
        timeline.join()
        with ns:
            assert ns.list_logs() == []
        assert timeline.events == ["warning", "server reachable", "opened"]
        assert relay.accepted >= 2  # refused while cut, then served
    warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert warnings == [
        f"waiting for ZooKeeper at {relay.hosts} (reachable, but no ZooKeeper session); giving up after {session_s} s"
    ]


def test_bind_gives_the_same_error(caplog: pytest.LogCaptureFixture) -> None:
    hosts = f"127.0.0.1:{free_port()}"
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with pytest.raises(storage.MetadataConnectionError, match=f"cannot connect to ZooKeeper at {hosts} within 1 s"):
        # the bind's own zkSessionTimeoutSeconds bounds it (not the default 30 s): it ends, with generous slack
        finishes(
            lambda: storage.bind_namespace(
                f"distributedlog://{hosts}/ns", "file:///tmp/unused-segments", {"zkSessionTimeoutSeconds": 1}
            ),
            "the bind",
            timeout_s=20,
        )


def test_why_unreachable() -> None:
    assert why_unreachable(f"127.0.0.1:{free_port()}") == "connection refused"
    assert why_unreachable("no-such-host.invalid:2181") == "unknown host"
    assert why_unreachable("127.0.0.1:notaport") == "malformed server list"
