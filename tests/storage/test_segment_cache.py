"""The segment list cache behind positioning (:mod:`storage.log.segment_cache`), on every backend: an
unchanged log is not re-read (one children request), and every change by another client — a segment
started, completed, truncated (rewritten under the same name) or purged, the log deleted — is seen by
the very next use, with no waiting."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import storage
from storage import DLSN, LogRecord
from tests.conftest import BASE_CONF


@pytest.fixture
def other(ns_uri: str) -> Iterator[storage.Namespace]:
    """Another client of the same namespace (as another process would be)."""
    namespace = storage.open_namespace(ns_uri, BASE_CONF)
    try:
        yield namespace
    finally:
        namespace.close()


class Counting:
    """Counts the segment reads (``get_many``) of a metadata store."""

    def __init__(self, ns: storage.Namespace, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        store = ns.metastore
        original: Callable[..., Any] = store.get_many

        def get_many(paths: list[str]) -> Any:
            self.paths.extend(paths)
            return original(paths)

        monkeypatch.setattr(store, "get_many", get_many)

    def take(self) -> list[str]:
        out, self.paths = self.paths, []
        return out


def write_segments(ns: storage.Namespace, name: str, n: int, first: int = 1) -> int:
    dlm = ns.open_log(name)
    t = first
    for _ in range(n):
        with dlm.open_writer() as w:
            for _ in range(5):
                w.write(LogRecord(t, b"x"))
                t += 1
    dlm.close()
    return t


def test_unchanged_log_reads_names_only(
    ns: storage.Namespace, other: storage.Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    nxt = write_segments(other, "log", 6)
    dlm = ns.open_log("log")
    counting = Counting(ns, monkeypatch)
    first = dlm.log_segments()
    assert [s.lssn for s in first] == [1, 2, 3, 4, 5, 6]
    assert len(counting.take()) == 6
    for _ in range(3):
        assert dlm.log_segments() == first
        with dlm.open_reader(DLSN(4, 0, 0)) as r:
            assert r.read_next() is not None
        assert list(dlm.read_arrow(DLSN(5, 0, 0)))
    assert counting.take() == []  # nothing re-read: the names did not change
    write_segments(other, "log", 2, nxt)  # another client: segments 7 and 8
    segs = dlm.log_segments()
    assert [s.lssn for s in segs] == list(range(1, 9))
    assert len(counting.take()) == 8  # the list changed: read again
    fresh = ns.open_log("log").log_segments
    assert [s.start_sequence_id for s in segs] == [s.start_sequence_id for s in fresh()]  # a new manager: no cache
    counting.take()
    assert dlm.log_segments() == segs and counting.take() == []


def test_in_progress_segment_completed_elsewhere_is_seen_at_once(
    ns: storage.Namespace, other: storage.Namespace
) -> None:
    odlm = other.open_log("tail")
    w = odlm.open_writer()
    w.write(LogRecord(1, b"a"))
    w.flush()
    dlm = ns.open_log("tail")
    assert [s.in_progress for s in dlm.log_segments()] == [True]
    w.close()  # completes the segment: another name
    assert [s.in_progress for s in dlm.log_segments()] == [False]
    with dlm.open_reader(DLSN.INITIAL) as r:
        assert r.read_next(non_blocking=True) is not None


def test_truncation_elsewhere_is_seen_at_once(ns: storage.Namespace, other: storage.Namespace) -> None:
    write_segments(other, "trunc", 3)
    dlm = ns.open_log("trunc")
    assert {s.truncation_status for s in dlm.log_segments()} == {storage.TruncationStatus.ACTIVE}
    odlm = other.open_log("trunc")
    with odlm.open_writer() as w:
        assert w.truncate(DLSN(3, 0, 0))  # rewrites segments 1 and 2 under the same names
    assert [s.truncation_status for s in dlm.log_segments()][:2] == [storage.TruncationStatus.TRUNCATED] * 2
    with dlm.open_writer() as w:
        assert w.truncate(DLSN(3, 2, 0))
    assert dlm.log_segments()[2].truncation_status == storage.TruncationStatus.PARTIALLY_TRUNCATED
    assert [r.column("txid").to_pylist() for r in dlm.read_arrow()] == [[13, 14, 15]]


def test_purged_and_deleted_logs(ns: storage.Namespace, other: storage.Namespace) -> None:
    write_segments(other, "gone", 2)
    dlm = ns.open_log("gone")
    assert len(dlm.log_segments()) == 2
    other.delete_log("gone")
    with pytest.raises(storage.LogNotFoundError):
        dlm.log_segments()
    with pytest.raises(storage.LogNotFoundError):
        dlm.open_reader(DLSN.INITIAL)
