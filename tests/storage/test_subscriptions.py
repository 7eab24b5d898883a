"""DistributedLog's subscriptions store (``dlm.subscriptions()``) and subscriber lag, on every backend."""

from __future__ import annotations

import threading

import pytest

import storage
from storage import DLSN
from storage.log.subscriptions import SUBSCRIBERS


def _write(dlm: storage.LogManager, txids: range, size: int = 100) -> list[DLSN]:
    """Write records ``txids`` with a new writer; the DLSNs of every record of the log."""
    with dlm.open_writer() as w:
        for t in txids:
            w.write(storage.LogRecord(t, b"%08d" % t + b"p" * (size - 8)))
        w.flush()
    with dlm.open_reader(storage.DLSN.INITIAL) as r:
        out = []
        while True:
            recs = r.read_bulk(1000, non_blocking=True)
            if not recs:
                return out
            out.extend(rec.dlsn for rec in recs)


def test_get_advance_list_delete(ns: storage.Namespace) -> None:
    ns.create_log("subs")
    dlm = ns.open_log("subs")
    subs = dlm.subscriptions()
    assert subs.get("a") is None and subs.list() == {} and subs.delete("a") is False
    assert subs.advance("a", DLSN(1, 2, 3)) is True
    assert subs.get("a") == DLSN(1, 2, 3)
    assert subs.advance("a", DLSN(1, 2, 3)) is False  # not further: unchanged
    assert subs.advance("a", DLSN(1, 0, 0)) is False  # never backwards
    assert subs.get("a") == DLSN(1, 2, 3)
    assert subs.advance("a", DLSN(2, 0, 0)) is True
    subs.advance("b", DLSN.NON_INCLUSIVE_LOWER_BOUND)
    assert subs.list() == {"a": DLSN(2, 0, 0), "b": DLSN(1, 0, -1)}
    # DistributedLog's layout and value: <log root>/subscribers/<id> = dlsn.serialize()
    path = f"{ns.paths_of('subs').root}/{SUBSCRIBERS}/a"
    assert ns.metastore.get(path).value == DLSN(2, 0, 0).serialize().encode()
    # another handle (and process-independent: it is metadata) sees the same positions
    with storage.open_namespace(ns.uri) as other:
        assert other.open_log("subs").subscriptions().list() == subs.list()
    assert subs.delete("a") is True and subs.get("a") is None and subs.list() == {"b": DLSN(1, 0, -1)}
    ns.metastore.set(f"{ns.paths_of('subs').root}/{SUBSCRIBERS}/b", b"garbage")
    assert subs.get("b") == DLSN.NON_INCLUSIVE_LOWER_BOUND  # as DistributedLog reads a bad value


def test_bad_input_and_missing_log(ns: storage.Namespace) -> None:
    ns.create_log("subs")
    dlm = ns.open_log("subs")
    subs = dlm.subscriptions()
    for bad in ("", ".", "..", "a/b", "x\x00", "t\n", 7, "z" * 256):
        with pytest.raises(storage.InvalidArgumentError, match="subscriber id"):
            subs.advance(bad, DLSN.INITIAL)  # type: ignore[arg-type]
    for pos in ("1,0,0", DLSN(0, 0, 0), None):
        with pytest.raises(storage.InvalidArgumentError, match="position"):
            subs.advance("ok", pos)  # type: ignore[arg-type]
    assert subs.list() == {}
    ns.delete_log("subs")
    with pytest.raises(storage.LogNotFoundError):
        subs.get("ok")
    with pytest.raises(storage.LogNotFoundError):
        subs.advance("ok", DLSN.INITIAL)
    with pytest.raises(storage.LogNotFoundError):
        subs.list()
    assert not ns.log_exists("subs")  # advancing did not re-create any of the log's nodes
    assert ns.metastore.exists(ns.paths_of("subs").stream) is None


def test_concurrent_advances_never_move_back(ns: storage.Namespace) -> None:
    ns.create_log("subs")
    dlm = ns.open_log("subs")
    targets = [DLSN(1, e, s) for e in range(10) for s in range(5)]
    errors: list[BaseException] = []

    def run(order: list[DLSN]) -> None:
        try:
            with storage.open_namespace(ns.uri) as own:
                subs = own.open_log("subs").subscriptions()
                for d in order:
                    subs.advance("c", d)
                    got = subs.get("c")
                    assert got is not None and got >= d
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(targets[i::3] + targets[::-7],)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert dlm.subscriptions().get("c") == max(targets)


def test_subscriber_lag_records_and_bytes(ns: storage.Namespace) -> None:
    ns.create_log("lagged")
    dlm = ns.open_log("lagged")
    _write(dlm, range(1, 301))
    dlsns = _write(dlm, range(301, 501))  # a second segment (a new writer rolls); every record's DLSN
    assert len(dlsns) == 500 and len({d.lssn for d in dlsns}) == 2
    subs = dlm.subscriptions()
    subs.advance("new", DLSN.NON_INCLUSIVE_LOWER_BOUND)
    subs.advance("mid", dlsns[250])  # next to read: record 251 of 500
    subs.advance("second", dlsns[300])
    subs.advance("done", dlsns[-1].next())
    lag = {x.subscriber_id: x for x in dlm.subscriber_lag()}
    assert {k: v.records_behind for k, v in lag.items()} == {"new": 500, "mid": 250, "second": 200, "done": 0}
    assert lag["mid"].position == dlsns[250]
    total = lag["new"].bytes_behind
    assert total >= 500 * 100  # payloads plus headers and entry framing
    assert lag["done"].bytes_behind == 0
    assert lag["second"].bytes_behind < lag["mid"].bytes_behind < total
    assert abs(lag["mid"].bytes_behind - total / 2) < total * 0.1


def test_bulk_positions_across_logs(ns: storage.Namespace, ns_uri: str) -> None:
    """One subscriber advanced in many logs at once: created where new, moved only forward, a missing log
    reported while the others advance, and another process's advance never undone."""
    names = [f"bulk{i}" for i in range(7)]
    for n in names:
        ns.create_log(n)
    pos = ns.subscriber_positions("etl")
    assert pos.advance({n: DLSN(1, i, 0) for i, n in enumerate(names)}) == names
    assert {n: ns.open_log(n).subscriptions().get("etl") for n in names} == {
        n: DLSN(1, i, 0) for i, n in enumerate(names)
    }
    assert pos.advance({n: DLSN(1, i, 0) for i, n in enumerate(names)}) == []  # nothing moved
    assert pos.advance({"bulk0": DLSN(1, 5, 0), "bulk1": DLSN(1, 0, 0)}) == ["bulk0"]  # bulk1: not backwards
    with storage.open_namespace(ns_uri) as other:
        assert other.open_log("bulk2").subscriptions().advance("etl", DLSN(3, 0, 0))
    moved = pos.advance({n: DLSN(2, 0, 0) for n in names})  # bulk2 changed meanwhile: compared, not overwritten
    assert moved == [n for n in names if n != "bulk2"]
    assert ns.open_log("bulk2").subscriptions().get("etl") == DLSN(3, 0, 0)
    with pytest.raises(storage.LogNotFoundError):
        pos.advance({"bulk3": DLSN(4, 0, 0), "nope": DLSN(4, 0, 0), "fresh": DLSN(4, 0, 0)})
    assert ns.open_log("bulk3").subscriptions().get("etl") == DLSN(4, 0, 0)
    ns.create_log("fresh")
    assert ns.subscriber_positions("etl").advance({"fresh": DLSN(1, 1, 0), "bulk4": DLSN(9, 0, 0)}) == [
        "bulk4",
        "fresh",
    ]
