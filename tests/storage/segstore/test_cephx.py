"""cephx per client: the key the writers and readers use (``client.dlog``: ``mon 'allow r, allow command "osd
blocklist"' osd 'allow rwx pool=<pool>'``, as the README's production commands make it) reads and writes its
pool, and cannot delete or reconfigure the pool, nor touch another pool. Real cluster, real ``ceph`` CLI."""

from __future__ import annotations

import os
import subprocess
import uuid
from typing import Any

import pytest

from storage.segstore._rados_binding import load_rados


def _ceph_as_client(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEPH_") and not k.startswith("PYTHON")}
    argv = ["ceph", "-c", str(cluster.conf_path), "-n", cluster.client_name, "--keyring", str(cluster.client_keyring)]
    return subprocess.run(
        [*argv, "--connect-timeout", "20", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_the_writers_key_cannot_delete_or_change_the_pool(ceph_cluster: Any) -> None:
    pool = ceph_cluster.pool
    for args in (
        ("osd", "pool", "delete", pool, pool, "--yes-i-really-really-mean-it"),
        ("osd", "pool", "set", pool, "size", "1"),
        ("osd", "pool", "create", f"other-{uuid.uuid4().hex[:6]}", "8"),
        ("auth", "get-or-create", "client.intruder", "osd", "allow *"),
    ):
        out = _ceph_as_client(ceph_cluster, *args)
        assert out.returncode != 0, args
        assert "access denied" in out.stderr.lower() or "EACCES" in out.stderr, (args, out.stderr)
    pools = {p["poolname"] for p in ceph_cluster.ceph_json("osd", "lspools")}  # type: ignore[union-attr]
    assert pool in pools and not any(p.startswith("other-") for p in pools)
    size = ceph_cluster.ceph_json("osd", "pool", "get", pool, "size")
    assert size["size"] == 3  # type: ignore[index]
    assert "client.intruder" not in ceph_cluster.ceph("auth", "ls")


def test_the_writers_key_reads_and_writes_its_pool_only(ceph_cluster: Any) -> None:
    rados = load_rados()
    client = rados.Rados(
        conffile=str(ceph_cluster.conf_path),
        name=ceph_cluster.client_name,
        conf={"keyring": str(ceph_cluster.client_keyring), "client_mount_timeout": "20"},
    )
    client.connect()
    try:
        oid = f"cephx-{uuid.uuid4().hex[:8]}"
        with client.open_ioctx(ceph_cluster.pool) as io:
            io.write_full(oid, b"allowed")
            assert io.read(oid) == b"allowed"
            io.remove_object(oid)
        other = f"admin-only-{uuid.uuid4().hex[:6]}"
        ceph_cluster.ceph("osd", "pool", "create", other, "8")
        try:
            with client.open_ioctx(other) as io, pytest.raises(rados.PermissionError):
                io.write_full(oid, b"denied")
        finally:
            ceph_cluster.ceph("osd", "pool", "rm", other, other, "--yes-i-really-really-mean-it")
    finally:
        client.shutdown()
