"""The ColdStore behaviour suite, run on a filesystem path and on S3 (Ceph's radosgw): objects, range reads,
listing, verification, the bind-time check and its errors; the segment object format and its corruption checks."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from storage.cold import ColdLocation, ColdStore, open_cold_store
from storage.cold.arrowfs import ArrowColdStore, _translate
from storage.cold.segment_object import ColdSegment, SegmentObjectWriter
from storage.config import Config
from storage.errors import (
    ColdObjectNotFoundError,
    ColdStoreError,
    CorruptedEntryError,
    InvalidArgumentError,
)
from tests.ceph import CephCluster, RadosGateway


def test_put_verified_range_stat_list_delete(cold_store: ColdStore) -> None:
    data = bytes(range(256)) * 4096 + b"tail"  # ~1 MiB
    put = cold_store.put_verified("a/one.obj", [data[:1000], memoryview(data)[1000:]])
    assert put.size == len(data) and put.sha256 == hashlib.sha256(data).hexdigest()
    assert cold_store.digest("a/one.obj") == put.sha256  # what is stored, read back, is what was given
    assert cold_store.stat("a/one.obj").size == len(data)
    assert cold_store.read_range("a/one.obj", 1000, 5) == data[1000:1005]
    assert cold_store.read_range("a/one.obj", len(data) - 2, 10) == b"il"  # short only at the end
    ranges = cold_store.open_ranges("a/one.obj")
    assert ranges.size == len(data)
    assert ranges.read(0, 3) == data[:3] and ranges.read(4096, 4) == data[4096:4100]
    ranges.close()
    cold_store.put_verified("a/two.obj", [b"x"])
    cold_store.put_verified("b/three.obj", [b""])
    assert [o.key for o in cold_store.list()] == ["a/one.obj", "a/two.obj", "b/three.obj"]
    assert [(o.key, o.size) for o in cold_store.list("a/")] == [("a/one.obj", len(data)), ("a/two.obj", 1)]
    assert cold_store.stat("b/three.obj").size == 0
    cold_store.delete("a/one.obj")
    cold_store.delete("a/one.obj")  # missing: not an error
    assert [o.key for o in cold_store.list()] == ["a/two.obj", "b/three.obj"]
    assert cold_store.digest("a/two.obj") == hashlib.sha256(b"x").hexdigest()


class _DamagingColdStore(ArrowColdStore):
    """A real cold store (the same directory or bucket) that damages what it is given on the way in, as a bad disk
    or a faulty proxy in front of S3 would: ``damage`` turns the bytes of a put into the bytes stored."""

    def __init__(self, uri: str, conf: dict[str, Any], damage: Callable[[bytes], bytes]) -> None:
        cfg = Config.from_dict(conf)
        access, secret = cfg.get("coldStoreAccessKey"), cfg.get("coldStoreSecretKey")
        super().__init__(
            ColdLocation.parse(uri),
            access_key=None if access is None else str(access),
            secret_key=None if secret is None else str(secret),
        )
        self._damage = damage

    def put(self, key: str, chunks: Iterable[bytes | memoryview]) -> int:
        return super().put(key, [self._damage(b"".join(bytes(c) for c in chunks))])


@pytest.mark.parametrize(
    "damage",
    [lambda b: b[:-1] + bytes([b[-1] ^ 0x01]), lambda b: b[:-7]],
    ids=["a-flipped-bit", "a-lost-tail"],
)
def test_put_verified_refuses_what_reads_back_different(
    cold_uri: str, cold_conf: dict[str, Any], damage: Callable[[bytes], bytes]
) -> None:
    """The read-back check: an object stored other than it was given (the same size with a bit flipped, or short)
    is deleted and the put fails, retriable (a later offload writes it again); the same bytes stored intact pass."""
    data = bytes(range(256)) * 64
    with _DamagingColdStore(cold_uri, cold_conf, damage) as store:
        with pytest.raises(ColdStoreError, match="read back differs from what was written") as failed:
            store.put_verified("d/one.obj", [data[:100], data[100:]])
        assert failed.value.retriable is True
        with pytest.raises(ColdObjectNotFoundError):
            store.stat("d/one.obj")  # not left behind for a reader to trust
        assert store.list() == []
    with open_cold_store(cold_uri, Config.from_dict(cold_conf)) as intact:
        assert intact.put_verified("d/one.obj", [data]).sha256 == hashlib.sha256(data).hexdigest()
        assert intact.read_range("d/one.obj", 0, len(data)) == data


def test_missing_objects_and_bad_keys(cold_store: ColdStore) -> None:
    with pytest.raises(ColdObjectNotFoundError) as e:
        cold_store.stat("nope")
    assert e.value.retriable is False
    with pytest.raises(ColdObjectNotFoundError):
        cold_store.read_range("nope", 0, 1)
    for bad in ("", "/abs", "a/../b"):
        with pytest.raises(InvalidArgumentError):
            cold_store.put(bad, [b"x"])
    cold_store.check()  # reachable, present, writable; the probe object is gone again
    assert cold_store.list() == []


def test_uri_forms() -> None:
    loc = ColdLocation.parse("s3://bkt/some/prefix/?endpoint=127.0.0.1:9000&scheme=http")
    assert (loc.bucket, loc.root, loc.endpoint, loc.http_scheme, loc.region) == (
        "bkt",
        "bkt/some/prefix",
        "127.0.0.1:9000",
        "http",
        "us-east-1",
    )
    assert loc.uri() == "s3://bkt/some/prefix?endpoint=127.0.0.1:9000&scheme=http&region=us-east-1"
    assert ColdLocation.parse("s3://b").uri() == "s3://b?scheme=https&region=us-east-1"
    assert ColdLocation.parse("file:///x/y/").uri() == "file:///x/y"
    for bad in (
        "s3://",
        "s3://key:secret@bkt/p",
        "s3://b/p?access_key=x",
        "s3://b/p?scheme=ftp",
        "file://host/x",
        "file:relative",
        "hdfs://nn/x",
        "",
    ):
        with pytest.raises(InvalidArgumentError):
            ColdLocation.parse(bad)
    with pytest.raises(InvalidArgumentError, match="together"):
        open_cold_store("s3://b/p", Config(coldStoreAccessKey="only-one"))


def test_check_fails_clearly_for_a_missing_bucket_or_directory(
    cold_kind: str, cold_uri: str, cold_conf: dict[str, Any], tmp_path: Path
) -> None:
    if cold_kind == "s3":
        missing = cold_uri.replace("s3://dltest/", f"s3://nobucket-{uuid.uuid4().hex[:6]}/")
    else:
        missing = f"file://{tmp_path / 'no-such-dir'}"
    with open_cold_store(missing, Config.from_dict(cold_conf)) as store, pytest.raises(ColdStoreError) as e:
        store.check()
    assert e.value.retriable is False
    assert "does not exist" in str(e.value)


def test_a_file_cold_store_names_a_file_in_its_place_and_a_refused_directory(tmp_path: Path) -> None:
    """A path that is a regular file, and a directory the writing user may not write: each error says which, and
    neither gives advice about buckets or credentials."""
    (tmp_path / "plain").write_text("x")
    with open_cold_store(f"file://{tmp_path / 'plain'}", Config()) as store, pytest.raises(ColdStoreError) as e:
        store.check()
    assert "is a file, not a directory" in str(e.value) and "bucket" not in str(e.value), str(e.value)
    # a refused directory (tests run as root, whom permissions never refuse: the error as an unprivileged user meets it)
    refused = _translate(PermissionError(13, "Permission denied"), "put 'k'", f"file://{tmp_path}")
    text = str(refused)
    assert not refused.retriable
    assert "check the directory's permissions" in text and "credentials" not in text, text


def test_refused_credentials_are_not_retriable(radosgw: RadosGateway) -> None:
    conf = Config(coldStoreAccessKey="WRONGKEY", coldStoreSecretKey="wrongsecret", coldStoreRequestTimeoutSeconds=3)
    with open_cold_store(radosgw.cold_uri("creds"), conf) as store:
        with pytest.raises(ColdStoreError) as e:
            store.check()
        assert e.value.retriable is False and "refused" in str(e.value)
        with pytest.raises(ColdStoreError) as e2:
            store.put("k", [b"data"])
        assert e2.value.retriable is False


def test_an_unreachable_endpoint_is_retriable(ceph_cluster: CephCluster, radosgw: RadosGateway) -> None:
    conf = Config(
        coldStoreAccessKey=radosgw.access_key,
        coldStoreSecretKey=radosgw.secret_key,
        coldStoreRequestTimeoutSeconds=2,
        coldStoreMaxAttempts=1,
    )
    # a port nothing listens on
    from tests.zk import free_port

    uri = f"s3://{radosgw.bucket}/p?endpoint=127.0.0.1:{free_port()}&scheme=http"
    with open_cold_store(uri, conf) as store:
        for call in (store.check, lambda: store.put("k", [b"x"]), lambda: store.stat("k")):
            with pytest.raises(ColdStoreError) as e:
                call()
            assert e.value.retriable is True, e.value


# --- the segment object ----------------------------------------------------------------------
def _entries(n: int) -> list[bytes]:
    return [f"entry-{i}-".encode() * (1 + i % 7) for i in range(n)]


def test_segment_object_round_trip_and_range_reads(cold_store: ColdStore) -> None:
    entries = _entries(50)
    writer = SegmentObjectWriter(log="a/log", lssn=3, ledger_id=77, segment_metadata=b"v5 metadata")
    put = cold_store.put_verified("a/log/3.dlseg", writer.chunks(enumerate(entries)))
    assert writer.entries == 50 and writer.data_bytes == sum(len(e) for e in entries)
    seg = ColdSegment(cold_store, "a/log/3.dlseg", ledger_id=77)
    assert seg.last_entry_id == 49 and seg.data_bytes == writer.data_bytes
    assert seg.description["lssn"] == 3 and seg.description["segment"] == "v5 metadata"
    assert [(i, bytes(d)) for i, d in seg.entries(0, 49)] == list(enumerate(entries))
    assert [(i, bytes(d)) for i, d in seg.entries(17, 20)] == [(i, entries[i]) for i in range(17, 21)]
    assert list(seg.entries(5, 4)) == []
    with pytest.raises(InvalidArgumentError):
        list(seg.entries(0, 50))
    seg.close()
    print(f"segment object: {len(entries)} entries, {put.size} bytes")


def test_a_damaged_segment_object_raises_corrupted_entry_at_that_entry(cold_store: ColdStore) -> None:
    entries = _entries(20)
    writer = SegmentObjectWriter(log="l", lssn=1, ledger_id=5, segment_metadata=b"m")
    blob = b"".join(bytes(c) for c in writer.chunks(enumerate(entries)))
    target = sum(len(e) for e in entries[:12]) + 2  # a byte inside entry 12
    damaged = blob[:target] + bytes([blob[target] ^ 0xFF]) + blob[target + 1 :]
    cold_store.put("l/1.dlseg", [damaged])
    seg = ColdSegment(cold_store, "l/1.dlseg", ledger_id=5)
    got = []
    with pytest.raises(CorruptedEntryError, match="entry 12"):
        for i, d in seg.entries(0, 19):
            got.append((i, bytes(d)))
    assert got == list(enumerate(entries))[:12]  # everything before it, exact
    assert [bytes(d) for _, d in seg.entries(13, 19)] == entries[13:]  # after it, still readable
    # a damaged index / trailer: CorruptedEntryError at the first read
    for pos in (len(blob) - 3, len(blob) - 60):
        cold_store.put("l/2.dlseg", [blob[:pos] + bytes([blob[pos] ^ 1]) + blob[pos + 1 :]])
        with pytest.raises(CorruptedEntryError):
            list(ColdSegment(cold_store, "l/2.dlseg", ledger_id=6).entries(0, 0))
    cold_store.put("l/3.dlseg", [blob[: len(blob) // 2]])  # truncated
    with pytest.raises(CorruptedEntryError):
        list(ColdSegment(cold_store, "l/3.dlseg", ledger_id=7).entries(0, 0))
