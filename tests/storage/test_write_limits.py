"""DistributedLog's rps/bps soft and hard write limits: the rate limiter's arithmetic on a controlled
clock, then real writers on every backend (refused writes cost nothing, nothing acknowledged is
lost, the writer recovers when the rate drops)."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future

import pytest

import storage
from storage.log.limits import RateLimiter, WriteLimiter, WriteLimits
from tests.conftest import BASE_CONF
from tests.storage.observe import wait_until
from tests.storage.test_writer_reader import read_all


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_rate_limiter_smooth_bursty() -> None:
    clock = Clock()
    r = RateLimiter(10, clock)  # 10/s, up to 1 s stored (starts full)
    assert all(r.try_acquire(1) for _ in range(10))  # the stored second
    assert r.try_acquire(1)  # granted into debt (nothing owed before it) ...
    assert not r.try_acquire(1)  # ... so the next one waits 0.1 s
    clock.t += 0.1
    assert r.try_acquire(1) and not r.ready()
    clock.t += 5.0  # idle: stores one second's worth, not five
    assert all(r.try_acquire(1) for _ in range(10))
    assert r.try_acquire(1) and not r.try_acquire(1)
    clock.t += 10.0
    assert r.try_acquire(35)  # one large request passes (nothing owed) ...
    clock.t += 2.4
    assert not r.ready()  # ... and is paid off at 10/s: 35 - 10 stored = 25 owed = 2.5 s
    clock.t += 0.1
    assert r.ready()
    r.set_rate(100)
    with pytest.raises(ValueError):
        r.set_rate(0)


def test_write_limiter_soft_counts_hard_refuses(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    lim = WriteLimiter("s", WriteLimits(rps_soft=5, rps_hard=20, bps_soft=-1, bps_hard=1000), clock)
    with caplog.at_level(logging.WARNING, logger="storage.log.limits"):
        for _ in range(6):
            lim.acquire(1, 10)
    assert lim.hits["rps_soft"] == 0  # 5 stored + 1 into debt
    lim.acquire(1, 10)
    assert lim.hits["rps_soft"] == 1 and "rpsSoftWriteLimit" in caplog.text
    with pytest.raises(storage.OverCapacityError, match="BPS limit exceeded for stream s") as e:
        lim.acquire(1, 2000)  # granted (nothing owed): 1000 stored, 1000 owed ...
        lim.acquire(1, 1)  # ... refused
    assert e.value.code == 517 and e.value.retriable
    hits = dict(lim.hits)
    with pytest.raises(storage.OverCapacityError, match="BPS"):
        lim.acquire(100, 1)  # refused by bps: the rps limiters took nothing
    assert lim.hits["rps_soft"] == hits["rps_soft"] and lim.hits["bps_hard"] == hits["bps_hard"] + 1
    clock.t += 1.1  # 930 of the 2000 bytes came from storage, 1070 owed at 1000/s
    lim.acquire(1, 1)  # paid off: passes again
    lim.reconfigure(WriteLimits(rps_hard=1))
    lim.acquire(1, 10**9)  # bps limits gone
    with pytest.raises(storage.OverCapacityError, match="RPS limit exceeded for stream s"):
        lim.acquire(1, 1)
        lim.acquire(1, 1)
    lim.reconfigure(WriteLimits())
    for _ in range(1000):
        lim.acquire(1, 1)


def test_hard_limits_on_a_writer(ns_uri: str) -> None:
    conf: dict[str, object] = {**BASE_CONF, "rpsHardWriteLimit": 200, "bpsHardWriteLimit": 200 * 1024}
    with storage.open_namespace(ns_uri, conf) as ns:
        ns.create_log("limited")
        dlm = ns.open_log("limited")
        w = dlm.open_async_writer()
        acked, refused, txid = [], 0, 0
        first_refused: int | None = None  # writes accepted before the first refusal
        t0 = time.monotonic()
        while refused < 50:  # try far faster than 200/s, until the limit has refused 50 writes
            try:
                fut = w.write(storage.LogRecord(txid + 1, b"%08d" % (txid + 1) + b"p" * 500))
            except storage.OverCapacityError as e:
                assert e.retriable and "limit exceeded for stream limited" in str(e)
                if first_refused is None:
                    first_refused = txid
                refused += 1
                continue
            txid += 1
            acked.append(fut)
        elapsed = time.monotonic() - t0
        # the limiter starts with one stored second: whatever the machine's speed, nothing is refused before it
        # is spent; then at most the rate over the time it took (one more granted into debt)
        assert first_refused is not None and first_refused >= 200
        assert txid <= 200 + 200 * elapsed + 1, (txid, elapsed)
        bulk_refused = False
        for _ in range(3):  # all or none: a bulk write over the limit is refused whole
            try:
                acked += w.write_bulk([storage.LogRecord(txid + 1 + i, b"b") for i in range(400)])
                txid += 400
            except storage.OverCapacityError:
                bulk_refused = True
                break
        assert bulk_refused
        # the rate drops (the writer only retries now and then): writes pass again, at the latest
        # once the granted bulk's debt (400 records at 200/s) is paid off
        accepted: list[list[Future[storage.DLSN]]] = []

        def accepted_again() -> bool:
            try:
                accepted.append(
                    w.write_bulk([storage.LogRecord(txid + 1 + i, b"%08d" % (txid + 1 + i)) for i in range(50)])
                )
                return True
            except storage.OverCapacityError:
                return False

        wait_until(accepted_again, "the writer accepting writes again", poll_s=0.2)  # the debt is paid after 2 s
        more = accepted[0]
        txid += 50
        w.flush().result()
        dlsns = [f.result() for f in acked + more]
        w.close()
        recs = read_all(dlm)
        assert [r.txid for r in recs] == list(range(1, txid + 1))  # nothing acknowledged lost, no gap
        assert [r.dlsn for r in recs] == dlsns


def test_soft_limits_count_and_never_refuse(ns: storage.Namespace, caplog: pytest.LogCaptureFixture) -> None:
    ns.create_log("soft")
    dlm = ns.open_log("soft", {**BASE_CONF, "rpsSoftWriteLimit": 50, "bpsSoftWriteLimit": 1000})
    with caplog.at_level(logging.WARNING, logger="storage.log.limits"), dlm.open_writer() as w:
        for t in range(1, 501):
            w.write(storage.LogRecord(t, b"x" * 100))
        w.flush()
        assert w._w.limiter is not None and w._w.limiter.hits["rps_soft"] > 0
        assert w._w.limiter.hits["bps_soft"] > 0
    assert dlm.record_count() == 500
    assert "writing over its" in caplog.text
