"""Who may change a namespace: ZooKeeper ACLs as DistributedLog has them (``zkAclId``).

A namespace written with ``zkAclId`` set authenticates with the digest credentials ``id:id`` and creates every znode
with DistributedLog's ``EVERYONE_READ_CREATOR_ALL`` ACL. A client without those credentials (none, or another id)
reads what the ACL allows (everything) but cannot create, change or delete a log, a lock or a segment: each attempt
fails with one ``MetadataPermissionError`` and changes nothing. Real ZooKeeper, real processes for the CLI.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import storage
from storage.errors import MetadataPermissionError
from tests.conftest import BASE_CONF
from tests.zk import ZooKeeperServer

ACL_ID = "orders-writers"


@pytest.fixture
def kazoo(zk_server: ZooKeeperServer) -> Iterator[Any]:
    """A plain kazoo client without credentials, to look at the znodes as they are."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zk_server.hosts)
    zk.start(timeout=10)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def _tree(zk: Any, path: str) -> dict[str, bytes]:
    """Every znode under ``path`` with its data (what "changes nothing" compares)."""
    out = {path: zk.get(path)[0]}
    for child in zk.get_children(path):
        out.update(_tree(zk, f"{path.rstrip('/')}/{child}"))
    return out


def test_a_namespace_with_zkaclid_is_read_by_all_and_changed_only_with_the_credentials(
    zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path, kazoo: Any
) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    owner_conf = {**BASE_CONF, "zkAclId": ACL_ID}
    storage.bind_namespace(uri, segments=f"file://{tmp_path / 'segments'}", conf=owner_conf)
    with storage.open_namespace(uri, owner_conf) as ns:
        with ns.open_log("orders").open_writer() as w:
            for i in range(1, 6):
                w.write(storage.LogRecord(i, b"order-%d" % i))
            last = w.flush()
        ns.create_log("refunds")

    # every znode of the namespace carries the ACL: anyone reads, the credentials' holder does everything
    tree = _tree(kazoo, zk_chroot)
    assert len(tree) > 8, sorted(tree)
    for path in tree:
        # (ZooKeeper shows a digest's hash only to its holder: the id's user part is what a stranger sees)
        acls = {(a.id.scheme, a.id.id.split(":")[0], a.perms) for a in kazoo.get_acls(path)[0]}
        assert acls == {("world", "anyone", 1), ("digest", ACL_ID, 31)}, (path, acls)

    for who, conf in (("no credentials", BASE_CONF), ("other credentials", {**BASE_CONF, "zkAclId": "intruder"})):
        with storage.open_namespace(uri, conf, create=False) as ns:
            assert sorted(ns.list_logs()) == ["orders", "refunds"], who
            dlm = ns.open_log("orders")
            with dlm.open_reader(storage.DLSN.INITIAL) as r:
                got = r.read_bulk(10, non_blocking=True)
            assert [x.payload for x in got] == [b"order-%d" % i for i in range(1, 6)] and got[-1].dlsn == last, who
            attempts = {
                "create a log": lambda ns=ns: ns.create_log("returns"),
                "delete a log and its data": lambda ns=ns: ns.delete_log("orders"),
                "take the write lock": lambda dlm=dlm: dlm.open_writer(),
                "record a subscriber position": lambda dlm=dlm: dlm.subscriptions().advance("spark", last),
            }
            for what, attempt in attempts.items():
                with pytest.raises(MetadataPermissionError) as err:
                    attempt()
                message = str(err.value)
                assert "permission denied by ZooKeeper (NOAUTH)" in message and "zkAclId" in message, (who, what)
                assert err.value.retriable is False and err.value.code == 403
        assert _tree(kazoo, zk_chroot) == tree, f"a client with {who} changed the namespace"

    # the credentials' holder still does everything
    with storage.open_namespace(uri, owner_conf) as ns:
        ns.delete_log("refunds")
        with ns.open_log("orders").open_writer() as w:
            w.write(storage.LogRecord(6, b"order-6"))
            w.flush()
        assert ns.list_logs() == ["orders"]


def test_dlog_without_the_credentials_is_one_clear_line_and_changes_nothing(
    zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path, kazoo: Any
) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    conf_file = tmp_path / "owner.conf"
    conf_file.write_text(f"zkAclId={ACL_ID}\nzkSessionTimeoutSeconds=4\n")

    def dlog(*args: str, conf: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = ["--conf", str(conf)] if conf is not None else []
        return subprocess.run(
            [sys.executable, "-m", "dlog", "--uri", uri, *extra, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert dlog("bind", "--segments", f"file://{tmp_path / 'segments'}", conf=conf_file).returncode == 0
    assert dlog("write", "--create", "events", conf=conf_file, stdin="a\nb\n").returncode == 0
    before = _tree(kazoo, zk_chroot)
    for args in (("delete", "events"), ("create", "other"), ("write", "events"), ("seal", "events")):
        out = dlog(*args, stdin="c\n")
        assert out.returncode != 0, args
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "permission denied" in lines[0] and "Traceback" not in out.stderr, (args, lines)
    assert _tree(kazoo, zk_chroot) == before
    dumped = dlog("dump", "events")  # reading needs no credentials
    assert dumped.returncode == 0 and "a" in dumped.stdout and "b" in dumped.stdout
