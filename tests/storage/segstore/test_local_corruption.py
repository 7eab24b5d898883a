"""Damaged ledger files: checksums catch flipped bytes, torn tails are cut by fence."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.errors import CorruptedEntryError, DLError, InvalidArgumentError
from storage.segstore.local import LocalSegmentStore

HEADER = 64
FRAME = 24
SIZE = 100  # payload size of every entry in these tests


def payload(i: int) -> bytes:
    return (b"entry-%04d|" % i).ljust(SIZE, b"#")


def frame_offset(i: int) -> int:
    return HEADER + i * (FRAME + SIZE)


def make_ledger(store: LocalSegmentStore, n: int, *, close: bool) -> int:
    writer = store.create_ledger()
    for i in range(n):
        writer.append(payload(i))
    if close:
        writer.close()
    else:
        writer.abort()  # leave it open, as a crashed writer would
    return writer.ledger_id


def patch(path: str, offset: int, data: bytes) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def flip(path: str, offset: int) -> None:
    with open(path, "rb") as f:
        f.seek(offset)
        byte = f.read(1)
    patch(path, offset, bytes([byte[0] ^ 0x40]))


def read_all(store: LocalSegmentStore, lid: int, first: int, last: int) -> tuple[list[int], Exception | None]:
    got: list[int] = []
    try:
        for eid, data in store.read_entries(lid, first, last):
            assert data == payload(eid)
            got.append(eid)
    except CorruptedEntryError as exc:
        return got, exc
    return got, None


@pytest.mark.parametrize("close", [True, False])
@pytest.mark.parametrize("where", ["payload", "length", "lac", "crc"])
def test_flipped_byte_in_middle_entry(store_root: Path, close: bool, where: str) -> None:
    with LocalSegmentStore(store_root) as writer_side:
        lid = make_ledger(writer_side, 10, close=close)
        path = writer_side.ledger_path(lid)
    delta = {"payload": FRAME + 37, "length": 2, "lac": 15, "crc": 21}[where]
    flip(path, frame_offset(5) + delta)
    with LocalSegmentStore(store_root) as s:
        visible = s.info(lid).last_entry_id
        assert visible == (9 if close else 8)
        got, exc = read_all(s, lid, 0, visible)
        assert got == [0, 1, 2, 3, 4]
        assert isinstance(exc, CorruptedEntryError)
        assert f"ledger {lid} entry 5" in str(exc)
        with pytest.raises(CorruptedEntryError, match="entry 5"):
            s.read_entry(lid, 5)
        assert read_all(s, lid, 6, visible) == (list(range(6, visible + 1)), None)
        if not close:  # fencing keeps the damaged entry (it is not a torn tail) and all after it
            assert s.fence(lid) == 9


def test_damaged_index_falls_back_to_scanning(local_store: LocalSegmentStore, store_root: Path) -> None:
    store = local_store
    lid = make_ledger(store, 20, close=True)
    flip(store.ledger_path(lid), frame_offset(20) + 30)  # inside the index block
    with LocalSegmentStore(store_root) as fresh:
        assert read_all(fresh, lid, 0, 19) == (list(range(20)), None)


def test_damaged_header_is_an_error_not_data(local_store: LocalSegmentStore, store_root: Path) -> None:
    store = local_store
    lid = make_ledger(store, 3, close=True)
    flip(store.ledger_path(lid), 17)  # last entry id
    with LocalSegmentStore(store_root) as fresh, pytest.raises(DLError, match="header"):
        fresh.read_entries(lid, 0, 0)


def torn_frame(entry_id: int, lac: int, data: bytes) -> bytes:
    head = struct.pack(">Iqq", len(data), entry_id, lac)
    return head + struct.pack(">I", crc32c.crc32c(data, crc32c.crc32c(head))) + data


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(lambda: torn_frame(5, 4, payload(5))[:50], id="partial-frame"),
        pytest.param(lambda: torn_frame(5, 4, payload(5))[:10], id="partial-header"),
        pytest.param(lambda: torn_frame(5, 4, payload(5))[:-1] + b"?", id="bad-crc-last"),
        pytest.param(lambda: torn_frame(5, 4, payload(5)) + torn_frame(6, 5, payload(6))[:30], id="good-then-partial"),
        pytest.param(lambda: b"\0" * 300, id="zeros"),
    ],
)
def test_torn_tail_is_invisible_then_cut_by_fence(
    local_store: LocalSegmentStore, store_root: Path, tail: object
) -> None:
    store = local_store
    lid = make_ledger(store, 5, close=False)  # entries 0..4, LAC 3
    path = store.ledger_path(lid)
    extra: bytes = tail()  # type: ignore[operator]
    patch(path, frame_offset(5), extra)
    complete_good = extra.startswith(torn_frame(5, 4, payload(5)))
    with LocalSegmentStore(store_root) as s:
        assert s.info(lid).last_entry_id == (4 if complete_good else 3)
        last = s.fence(lid)
        assert last == (5 if complete_good else 4)
        assert os.path.getsize(path) == frame_offset(last + 1) + 12 + 8 * (last + 1) + 4  # frames + index
        assert read_all(s, lid, 0, last) == (list(range(last + 1)), None)
        with pytest.raises(InvalidArgumentError):
            s.read_entries(lid, 0, last + 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flips=st.lists(st.tuples(st.integers(0, HEADER + 12 * (FRAME + SIZE) + 200), st.integers(1, 255)), max_size=4),
    close=st.booleans(),
)
def test_random_damage_never_returns_wrong_data(
    tmp_path_factory: pytest.TempPathFactory, flips: list[tuple[int, int]], close: bool
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    with LocalSegmentStore(root) as s:
        lid = make_ledger(s, 12, close=close)
        path = s.ledger_path(lid)
        size = os.path.getsize(path)
        for offset, xor in flips:
            if offset < size:
                with open(path, "rb") as f:
                    f.seek(offset)
                    old = f.read(1)[0]
                patch(path, offset, bytes([old ^ xor]))
    with LocalSegmentStore(root) as s:
        try:
            visible = s.info(lid).last_entry_id
        except DLError:
            return  # a damaged header is reported, never guessed at
        assert_correct_or_corrupt(s, lid, visible)
        try:
            last = s.fence(lid)
        except DLError:
            return
        assert_correct_or_corrupt(s, lid, last)


def assert_correct_or_corrupt(s: LocalSegmentStore, lid: int, last: int) -> None:
    """Each entry reads back as written or raises CorruptedEntryError; bulk reads agree."""
    for eid in range(last + 1):
        try:
            data = s.read_entry(lid, eid)
        except CorruptedEntryError:
            continue
        assert data == payload(eid)
    if last >= 0:
        read_all(s, lid, 0, last)  # asserts every entry it yields
