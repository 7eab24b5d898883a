"""Bad input gets one clear DLError and nothing is written."""

from __future__ import annotations

import pytest

import storage
from storage import DLSN, LogRecord
from tests.storage.test_writer_reader import read_all, write_segment


@pytest.mark.parametrize(
    "name",
    [
        "",
        "/",
        ".hidden",
        "<default>",
        "a/",
        "a//b",
        "a/./b",
        "a/../b",
        "with space",
        "nul\x00",
        "a<b",
        "tab\t",
        "\ud800x",
    ],
)
def test_invalid_log_names(ns: storage.Namespace, name: str) -> None:
    with pytest.raises(storage.InvalidStreamNameError):
        ns.create_log(name)
    with pytest.raises(storage.InvalidStreamNameError):
        ns.open_log(name)
    assert ns.list_logs() == []


def test_valid_names_and_listing(ns: storage.Namespace) -> None:
    for name in ["a", "/b", "nested/log", "dots.in.name", "ünïcode"]:
        ns.create_log(name)
    assert ns.list_logs() == ["a", "b", "dots.in.name", "nested/log", "ünïcode"]
    with pytest.raises(storage.LogExistsError):
        ns.create_log("a")
    ns.delete_log("a")
    assert not ns.log_exists("a")
    with pytest.raises(storage.LogNotFoundError):
        ns.delete_log("a")


def test_bad_uris_and_config() -> None:
    with pytest.raises(storage.InvalidArgumentError):
        storage.open_namespace("http://example/ns")
    with pytest.raises(storage.InvalidArgumentError):
        storage.open_namespace("distributedlog-local://relative/path")
    with pytest.raises(storage.InvalidConfigError, match="noSuchKey"):
        storage.open_namespace("/tmp/never-created-ns", {"noSuchKey": 1})
    with pytest.raises(storage.InvalidConfigError, match="writerOutputBufferSize"):
        storage.Config(writerOutputBufferSize="lots")


def test_bad_dlsns() -> None:
    for text in ["", "1,2", "a,b,c", "1,2,3,4", "99999999999999999999,0,0"]:
        with pytest.raises(storage.InvalidArgumentError):
            DLSN.parse(text)
    with pytest.raises(storage.InvalidArgumentError):
        DLSN.deserialize("baddlsn")
    with pytest.raises(storage.InvalidArgumentError):
        DLSN.from_bytes(b"\x01" * 24)


def test_bad_records_and_reader_starts(ns: storage.Namespace) -> None:
    dlm = ns.open_log("bad")
    with dlm.open_writer() as w:
        with pytest.raises(storage.InvalidArgumentError):
            w.write("not a record")  # type: ignore[arg-type]
        with pytest.raises(storage.InvalidArgumentError):
            LogRecord("1", b"x")  # type: ignore[arg-type]
        with pytest.raises(storage.InvalidArgumentError):
            LogRecord(1, "text")  # type: ignore[arg-type]
        # write_bulk validates everything before buffering anything
        with pytest.raises(storage.TransactionIdOutOfOrderError):
            w.write_bulk([LogRecord(5, b"a"), LogRecord(4, b"b")])
        w.write(LogRecord(1, b"ok"))
    assert [r.txid for r in read_all(dlm)] == [1]
    for bad in [-1, "0", 1.5, True, None]:
        with pytest.raises(storage.InvalidArgumentError):
            dlm.open_reader(bad)  # type: ignore[arg-type]
    with dlm.open_reader(DLSN.INITIAL) as r, pytest.raises(storage.InvalidArgumentError):
        r.read_bulk(0)


def test_closed_handles(ns_uri: str) -> None:
    ns = storage.open_namespace(ns_uri)
    dlm = ns.open_log("closed")
    write_segment(dlm, 1, 3)
    w = dlm.open_async_writer()
    w.close()
    with pytest.raises(storage.AlreadyClosedError):
        w.write(LogRecord(10, b"x"))
    r = dlm.open_reader(DLSN.INITIAL)
    r.close()
    with pytest.raises(storage.ReadCancelledError):
        r.read_next()
    dlm.close()
    with pytest.raises(storage.AlreadyClosedError):
        dlm.open_writer()
    ns.close()
    ns.close()  # idempotent
    with pytest.raises(storage.AlreadyClosedError):
        ns.list_logs()
    with pytest.raises(storage.AlreadyClosedError):
        ns.open_log("x")


def test_every_error_is_a_dlerror_with_code_and_retriable() -> None:
    defined = {n for n, c in vars(storage.errors).items() if isinstance(c, type) and issubclass(c, storage.DLError)}
    assert set(storage.errors.__all__) == defined  # the listed __all__ (what type checkers see) misses none
    assert set(storage.errors.__all__) <= set(storage.__all__)
    for name in storage.errors.__all__:
        cls = getattr(storage, name)
        assert issubclass(cls, storage.DLError)
        assert hasattr(cls, "code") and isinstance(cls.retriable, bool)
    assert storage.OwnershipAcquireFailedError.code == 302
    assert storage.LogRecordTooLongError.code == 413
    assert storage.EndOfStreamError.code == 512
    assert storage.TransactionIdOutOfOrderError.code == 513
    # an append that failed or was cut short in flight may be durable: never a definitive error
    assert storage.TransmitError("x").outcome_unknown and storage.TransmitError.code == 507


def test_closed_log_managers_are_not_kept_by_the_namespace(ns: storage.Namespace) -> None:
    for _ in range(50):
        ns.open_log("many").close()
    assert ns._managers == []
