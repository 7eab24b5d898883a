"""Who may change a namespace, across hosts: a namespace made with ``zkAclId`` on one client host; another host
without the credentials reads it, but every change fails with one clear line and changes nothing. The writers'
cephx key (the one every client host uses) cannot delete the pool."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from tools.cluster import Cluster


def _znodes(c: Cluster, path: str) -> str:
    """Every znode under ``path`` with its data version, read by a kazoo client on a client host."""
    code = (
        "import sys\nfrom kazoo.client import KazooClient\n"
        f"zk = KazooClient(hosts={c.zk_connect!r}); zk.start(timeout=20)\n"
        "def walk(p):\n"
        "    print(p, zk.exists(p).version)\n"
        "    for k in sorted(zk.get_children(p)):\n"
        "        walk(p.rstrip('/') + '/' + k)\n"
        f"walk({path!r}); zk.stop()\n"
    )
    return str(c.python_on("client3", code, check=True).stdout)


def test_a_host_without_the_acl_credentials_reads_but_cannot_change(healthy_cluster: Cluster, tmp_path: Path) -> None:
    c = healthy_cluster
    path = f"/acl-{uuid.uuid4().hex[:8]}"
    uri = c.namespace_uri(path)
    owner_conf = tmp_path / "owner.conf"  # tmp_path is on this machine's filesystem, which every host sees
    owner_conf.write_text("zkAclId=orders-writers\nzkSessionTimeoutSeconds=4\n")
    segments = c.segments_uri(path.strip("/"))
    owner = [c.dlog, "--uri", uri, "--conf", str(owner_conf)]
    c.run("client1", [*owner, "bind", "--segments", segments], check=True, timeout=120)
    c.run("client1", [*owner, "write", "--create", "orders"], input="o1\no2\no3\n", check=True, timeout=120)
    before = _znodes(c, path)

    stranger = [c.dlog, "--uri", uri]
    for args in (("delete", "orders"), ("create", "refunds"), ("write", "orders"), ("seal", "orders")):
        out = c.run("client2", [*stranger, *args], input="x\n", timeout=120)
        lines = out.stderr.strip().splitlines()
        assert out.returncode != 0, args
        assert len(lines) == 1 and "permission denied by ZooKeeper (NOAUTH)" in lines[0], (args, out.stderr)
    assert _znodes(c, path) == before, "a host without the credentials changed the namespace"
    dumped = c.run("client2", [*stranger, "dump", "orders"], check=True, timeout=120)
    assert all(v in dumped.stdout for v in ("o1", "o2", "o3"))
    c.run("client1", [*owner, "write", "orders"], input="o4\n", check=True, timeout=120)  # the owner still can


def test_the_client_hosts_cephx_key_cannot_delete_the_pool(healthy_cluster: Cluster) -> None:
    c = healthy_cluster
    ceph = c.ceph
    argv = ["ceph", "-c", str(ceph.conf_path), "-n", ceph.client_name, "--keyring", str(ceph.client_keyring)]
    argv += ["--connect-timeout", "20", "osd", "pool", "delete", ceph.pool, ceph.pool, "--yes-i-really-really-mean-it"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CEPH_", "PYTHON"))}  # the CLI is Debian's python
    out = c.run("client1", argv, env=env, timeout=60)
    assert out.returncode != 0 and "access denied" in out.stderr.lower(), out.stderr
    assert ceph.pool in ceph.ceph("osd", "lspools")
