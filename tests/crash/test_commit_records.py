"""Entries appended with ``durable=False`` (the commit records that publish acknowledged data) on the forgetting
file system: acknowledged without an ``fdatasync`` of their own, never covered by the LAC before a later barrier made
them durable, lost by a crash before that (and nothing else with them), kept once a later durable append synced the
file. The machine-crash tests cover the writers that append them (periodic and immediate flush)."""

from __future__ import annotations

import threading

from storage.segstore._writer import LocalLedgerWriter
from storage.segstore.local import LocalSegmentStore
from tools.crashfs import CrashFS


class Acks:
    """An ack listener that records the entry ids it was told of."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.errors: list[BaseException] = []
        self._cond = threading.Condition()

    def __call__(self, count: int, last_entry_id: int, error: BaseException | None) -> None:
        with self._cond:
            if error is not None:
                self.errors.append(error)
            else:
                self.ids.extend(range(last_entry_id - count + 1, last_entry_id + 1))
            self._cond.notify_all()

    def wait(self, n: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.ids) + len(self.errors) >= n, 30)
        assert not self.errors


def _data_then_commit(crashfs: CrashFS) -> tuple[LocalSegmentStore, LocalLedgerWriter, Acks]:
    """A ledger on the forgetting file system with a durable entry 0 and a non-durable entry 1, both acknowledged;
    checks that entry 1 cost no barrier."""
    store = LocalSegmentStore(str(crashfs.mountpoint / "ledgers"))
    writer = store.create_ledger()
    acks = Acks()
    writer.set_ack_listener(acks)
    writer.append_nowait(b"data-0")
    acks.wait(1)
    synced = writer.sync_count
    writer.append_nowait(b"commit-1", durable=False)
    acks.wait(2)
    assert writer.sync_count == synced  # acknowledged with no barrier of its own
    return store, writer, acks


def test_a_non_durable_entry_is_acknowledged_without_a_sync_and_only_it_is_lost_in_a_crash(crashfs: CrashFS) -> None:
    store, writer, _ = _data_then_commit(crashfs)
    assert store.last_add_confirmed(writer.ledger_id) == 0  # its frame publishes entry 0, nothing claims entry 1
    lid = writer.ledger_id
    writer.abort()  # the process "dies" here: nothing sealed, nothing synced after
    store.close()
    crashfs.crash(1)

    store = LocalSegmentStore(str(crashfs.mountpoint / "ledgers"))
    assert store.fence(lid) == 0  # the commit record is gone, the durable entry is not
    assert list(store.read_entries(lid, 0, 0)) == [(0, b"data-0")]
    store.close()


def test_a_later_durable_append_makes_the_non_durable_entries_before_it_durable(crashfs: CrashFS) -> None:
    store, writer, acks = _data_then_commit(crashfs)
    writer.append_nowait(b"data-2")
    acks.wait(3)
    assert acks.ids == [0, 1, 2]
    # data-2's frame was written before it was durable: it carries the LAC of what was durable then (entry 0)
    assert store.last_add_confirmed(writer.ledger_id) == 0
    lid = writer.ledger_id
    writer.abort()
    store.close()
    crashfs.crash(2)

    store = LocalSegmentStore(str(crashfs.mountpoint / "ledgers"))
    assert store.fence(lid) == 2
    assert list(store.read_entries(lid, 0, 2)) == [(0, b"data-0"), (1, b"commit-1"), (2, b"data-2")]
    store.close()
