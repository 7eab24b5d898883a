"""The client's routing pieces on their own: the consistent-hash ring, the ownership cache, the status-code mapping.

(The client against real proxy processes is in test_client_proxies.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dl_proxy.errors import Disposition, disposition, error_for, status_for
from dl_proxy.ownership import OwnershipCache
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.ring import HashRing, hash64
from storage import errors

ROOT = Path(__file__).resolve().parents[2]
PROXIES = [f"10.0.0.{i}:7000" for i in range(1, 6)]
STREAMS = [f"stream-{i}" for i in range(5000)]


def test_ring_is_the_same_in_every_process() -> None:
    ring = HashRing(PROXIES)
    here = [ring.lookup(s) for s in STREAMS[:200]]
    code = (
        "from dl_proxy.ring import HashRing; import json, sys; "
        f"r = HashRing({PROXIES!r}); print(json.dumps([r.lookup(f'stream-{{i}}') for i in range(200)]))"
    )
    # a fresh interpreter has another hash() salt: the ring must not depend on it
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""}, cwd=str(ROOT)).stdout  # fmt: skip
    assert here == json.loads(out)


def test_ring_spreads_streams_evenly() -> None:
    ring = HashRing(PROXIES)
    share = Counter(ring.lookup(s) for s in STREAMS)
    print("streams per proxy:", dict(sorted(share.items())))
    assert set(share) == set(PROXIES)
    # 160 points per proxy: every proxy gets between half and twice its fair share
    fair = len(STREAMS) / len(PROXIES)
    assert all(fair / 2 < n < fair * 2 for n in share.values()), share


def test_removing_a_proxy_moves_only_its_streams_and_all_clients_agree() -> None:
    ring = HashRing(PROXIES)
    before = {s: ring.lookup(s) for s in STREAMS}
    dead = PROXIES[2]
    ring.remove(dead)
    after = {s: ring.lookup(s) for s in STREAMS}
    moved = {s for s in STREAMS if before[s] != after[s]}
    assert moved == {s for s in STREAMS if before[s] == dead}
    assert dead not in after.values()
    # excluding the dead proxy on the full ring picks the same next proxy (deterministic failover)
    full = HashRing(PROXIES)
    assert all(full.lookup(s, exclude={dead}) == after[s] for s in STREAMS)
    ring.add(dead)
    assert {s: ring.lookup(s) for s in STREAMS} == before


def test_candidates_walk_the_ring_without_repeats() -> None:
    ring = HashRing(PROXIES)
    for s in STREAMS[:50]:
        cands = ring.candidates(s)
        assert sorted(cands) == sorted(PROXIES)
        assert cands[0] == ring.lookup(s)
        assert ring.lookup(s, exclude=cands[:2]) == cands[2]
    assert ring.lookup("x", exclude=PROXIES) is None
    assert HashRing().lookup("x") is None
    assert hash64("a") != hash64("b")
    with pytest.raises(ValueError, match="vnodes"):
        HashRing(vnodes=0)


def test_ownership_cache_fills_and_drops() -> None:
    cache = OwnershipCache()
    assert cache.update("a", "p1:1") is True
    assert cache.update("a", "p1:1") is False
    cache.update_all({"b": "p1:1", "c": "p2:2"})
    assert cache.streams_of("p1:1") == ["a", "b"]
    # a stale STREAM_UNAVAILABLE from p2 does not drop a newer owner
    assert cache.remove("a", "p2:2") is False
    assert cache.get("a") == "p1:1"
    assert sorted(cache.remove_owner("p1:1")) == ["a", "b"]
    assert cache.get("a") is None
    assert cache.snapshot() == {"c": "p2:2"}
    assert cache.remove("c") is True
    assert len(cache) == 0


@pytest.mark.parametrize(
    ("code", "cls", "retriable"),
    [
        (pb.FOUND, errors.OwnershipAcquireFailedError, True),
        (pb.STREAM_UNAVAILABLE, errors.DLError, True),
        (pb.SERVICE_UNAVAILABLE, errors.DLError, True),
        (pb.OVER_CAPACITY, errors.OverCapacityError, True),
        (pb.TOO_MANY_STREAMS, errors.OverCapacityError, True),
        (pb.STREAM_NOT_READY, errors.StreamNotReadyError, True),
        (pb.OUT_OF_ORDER_SEQUENCE, errors.DLError, True),
        (pb.LOG_NOT_FOUND, errors.LogNotFoundError, False),
        (pb.END_OF_STREAM, errors.EndOfStreamError, False),
        (pb.TOO_LARGE_RECORD, errors.LogRecordTooLongError, False),
        (pb.CHECKSUM_FAILED, errors.CorruptedEntryError, False),
        (pb.INVALID_STREAM_NAME, errors.InvalidStreamNameError, False),
        (pb.REQUEST_DENIED, errors.DLError, False),
        (pb.BK_TRANSMIT_ERROR, errors.TransmitError, False),
        (777, errors.UnexpectedError, False),
    ],
)
def test_status_codes_map_to_storage_errors(code: int, cls: type[errors.DLError], retriable: bool) -> None:
    err = error_for(code, "detail", location="h:1", expected_sequence=5)
    assert isinstance(err, cls)
    assert err.retriable is retriable
    assert "detail" in str(err)
    if code != 777:
        assert err.code == code or code in (pb.TOO_LARGE_RECORD, pb.BK_TRANSMIT_ERROR), (err.code, code)
        assert status_for(err) == code
    if code == pb.FOUND:
        assert getattr(err, "current_owner") == "h:1"  # noqa: B009
    if code == pb.OUT_OF_ORDER_SEQUENCE:
        assert getattr(err, "expected_sequence") == 5  # noqa: B009


def test_dispositions() -> None:
    assert disposition(pb.SUCCESS) is Disposition.SUCCESS
    assert disposition(0) is Disposition.SUCCESS
    assert disposition(pb.FOUND) is Disposition.REDIRECT
    assert disposition(pb.OUT_OF_ORDER_SEQUENCE) is Disposition.RESEQUENCE
    assert disposition(pb.STREAM_UNAVAILABLE) is Disposition.REROUTE
    assert disposition(pb.SERVICE_UNAVAILABLE) is Disposition.REROUTE
    assert disposition(pb.TOO_MANY_STREAMS) is Disposition.REROUTE
    assert disposition(pb.OVER_CAPACITY) is Disposition.RETRY
    assert disposition(pb.STREAM_NOT_READY) is Disposition.RETRY
    # a failed or closed stream re-routes, as DistributedLog's client does: the owner may change
    for code in (pb.BK_TRANSMIT_ERROR, pb.WRITE_EXCEPTION, pb.FLUSH_TIMEOUT, pb.ZOOKEEPER_ERROR, pb.LOCKING_EXCEPTION):
        assert disposition(code) is Disposition.REROUTE, code
    assert disposition(pb.PRODUCER_FENCED) is Disposition.FENCED
    assert disposition(pb.PRODUCER_STATE_LOST) is Disposition.STATE_LOST
    assert disposition(pb.SEQUENCE_MISMATCH) is Disposition.FAIL
    assert disposition(pb.LOG_NOT_FOUND) is Disposition.FAIL
    assert disposition(pb.REQUEST_DENIED) is Disposition.FAIL
    assert status_for(ValueError()) == pb.UNEXPECTED
