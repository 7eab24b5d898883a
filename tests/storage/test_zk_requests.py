"""How many requests a writer sends ZooKeeper to take a log, start a segment, roll and close: at thousands of
logs (a write proxy taking over thousands of streams) these counts are the cost, so they are kept from growing.
Counted at the client on a real server, request by request (the client's pings are not requests)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kazoo.client import KazooClient

import storage
from storage import LogRecord
from tests.zk import ZooKeeperServer

_T = TypeVar("_T")


class Requests:
    """Every request any ZooKeeper client of this process sends while :meth:`count` runs."""

    def __init__(self) -> None:
        self.sent: Counter[str] = Counter()
        self.on = False

    def count(self, fn: Callable[[], _T]) -> tuple[_T, int]:
        """``fn()``'s result and how many requests it sent."""
        self.sent.clear()
        self.on = True
        try:
            return fn(), sum(self.sent.values())
        finally:
            self.on = False


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[Requests]:
    seen = Requests()
    send = KazooClient._call

    def counted(client: KazooClient, request: Any, async_object: Any) -> Any:
        if seen.on:
            seen.sent[type(request).__name__] += 1
        return send(client, request, async_object)

    monkeypatch.setattr(KazooClient, "_call", counted)
    yield seen


def test_requests_to_take_a_log_start_a_segment_roll_and_close(
    zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path, requests: Requests
) -> None:
    """A new log: the lock and recovery 4 requests, the first segment 4 (its versioned multi-operation among
    them), every record inside a segment 0, the close 4. Taking a log with completed segments costs one more
    read per segment (their metadata, pipelined); its first segment and its close do not: they go by what
    recovery read."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    conf: dict[str, object] = {"enableImmediateFlush": True, "writerOutputBufferSize": 0}
    with storage.open_namespace(uri) as ns:
        ns.create_log("l")
        with ns.open_log("l", conf) as dlm:
            for completed in range(3):
                w, took = requests.count(dlm.open_async_writer)
                assert took == 4 + completed, f"open with {completed} completed segments: {requests.sent}"
                first, inside = LogRecord(2 * completed + 1, b"first"), LogRecord(2 * completed + 2, b"inside")
                _, took = requests.count(partial(_durable, w, first))
                assert took == 4, f"first segment with {completed} completed: {requests.sent}"
                _, took = requests.count(partial(_durable, w, inside))
                assert took == 0, requests.sent
                _, took = requests.count(w.close)
                assert took == 4, f"close with {completed} completed: {requests.sent}"


def test_requests_to_roll_do_not_grow_with_the_segments(
    zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path, requests: Requests
) -> None:
    """A roll (complete the segment, start the next) costs 8 requests however many segments the log has: the
    writer goes by the segments as it changed them, not by reading them all again."""
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}")
    conf: dict[str, object] = {
        "enableImmediateFlush": True,
        "writerOutputBufferSize": 0,
        "maxLogSegmentBytes": 1,  # every record after a segment's first one rolls
        "logSegmentRollingMinutes": 0,
    }
    with storage.open_namespace(uri) as ns, ns.open_log("r", conf) as dlm:
        w = dlm.open_async_writer()
        _durable(w, LogRecord(1, b"first"))
        rolls = [requests.count(partial(_durable, w, LogRecord(txid, b"x")))[1] for txid in range(2, 12)]
        assert rolls == [8] * 10, requests.sent
        _, took = requests.count(w.close)
        assert took == 4, requests.sent
        assert [s.lssn for s in dlm.log_segments()] == list(range(1, 12))


def _durable(w: storage.AsyncLogWriter, record: LogRecord) -> storage.DLSN:
    return w.write(record).result(timeout=60)
