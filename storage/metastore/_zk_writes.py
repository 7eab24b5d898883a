"""The ZooKeeper store's writes of several nodes: one transaction of interface operations (and which of
them failed first), the root with its missing ancestors, create with missing parents, and the recursive
delete.

Create with missing parents and the recursive delete re-plan (up to ``max_replans`` times) when the
tree changes under them; the recursive delete runs in transactions of at most ``chunk`` operations,
each conditional on the node's version (one transaction, atomic, when the subtree fits in one).

Imports :mod:`storage.errors`, :mod:`storage.metastore.base`, :mod:`storage.metastore._sqlite_tree`
(``parent_of``) and :mod:`storage.metastore._zk_errors` (the runner); neither kazoo nor
:mod:`storage.metastore.zookeeper`: the store passes itself in as a :class:`WriteStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from storage.errors import DLError, MetadataError, MetadataPermissionError, NodeExistsError, NoNodeError
from storage.metastore._sqlite_tree import parent_of
from storage.metastore._zk_errors import Failure, RunStore, run
from storage.metastore.base import Check, Create, Delete, Op, SetData

__all__ = ["WriteStore", "commit", "create_with_parents", "delete_recursive", "make_root", "subtree"]


class _Client(Protocol):
    """What is used of a ``kazoo.client.KazooClient``."""

    def transaction(self) -> Any: ...


class WriteStore(RunStore, Protocol):
    """What these writes use of the store (:mod:`storage.metastore.zookeeper`), besides what the runner
    uses: its kazoo client, paths, reads and the creation of znodes."""

    @property
    def _root(self) -> str: ...

    @property
    def _client(self) -> _Client: ...

    def _z(self, path: str) -> str: ...

    def _wait(self, async_result: Any) -> Any: ...

    def _create_request(
        self, zpath: str, data: bytes, *, ephemeral: bool = False, sequence: bool = False, tx: Any = None
    ) -> Any: ...

    def exists(self, path: str) -> int | None: ...

    def children(self, path: str) -> list[str]: ...


def commit(store: WriteStore, ops: list[Op], what: str) -> tuple[int, DLError] | None:
    """Run ``ops`` in one transaction; None on success, else (index, error) of the first failing op.

    Raises:
        MetadataConnectionError, MetadataError, AlreadyClosedError: the transaction could not be run
        (see :func:`~storage.metastore._zk_errors.run`; a write). MetadataPermissionError: an operation was
        refused by a node's ACL (nothing was done).
    """
    stop = len(ops)
    for i, op in enumerate(ops):
        if isinstance(op, Create) and op.path == "/":
            stop = i  # creating the root always fails with NODEEXISTS; run what comes before it
            break
    zops = ops[:stop]

    def send() -> list[Any]:
        tx = store._client.transaction()
        for op in zops:
            zpath = store._z(op.path)
            if isinstance(op, Create):
                store._create_request(zpath, op.data, tx=tx)
            elif isinstance(op, SetData):
                tx.set_data(zpath, op.data, op.version)
            elif isinstance(op, Delete):
                tx.delete(zpath, op.version)
            else:
                tx.check(zpath, op.version)
        if stop < len(ops):
            tx.check(store._z("/"), -2)  # a check that always fails, so the prefix rolls back
        return list(store._wait(tx.commit_async()))

    results = run(store, what, send, idempotent=False)
    failures = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
    if not failures:
        return None
    causes = [(i, r) for i, r in failures if store._failure(r) is not Failure.ROLLED_BACK]
    index, exc = (causes or failures)[0]
    if index >= stop:
        index = stop
    where = f"{what} op #{index} ({type(ops[index]).__name__} {ops[index].path})"
    if index == stop:
        return index, NodeExistsError(f"{where}: node exists")
    error = store._translate(exc, where)
    error.__cause__ = exc
    if isinstance(error, MetadataPermissionError):
        raise error  # the ACL refuses it: no re-planning changes that
    return index, error


def make_root(store: WriteStore) -> None:
    """Create the store's root and its missing ancestors (each one that exists is fine).

    Raises:
        MetadataConnectionError, MetadataError, AlreadyClosedError: see :func:`~storage.metastore._zk_errors.run`.
    """
    if store._root == "/":
        return
    parts = store._root.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        zpath = "/" + "/".join(parts[:i])

        def make(zpath: str = zpath) -> None:
            try:
                store._wait(store._create_request(zpath, b""))
            except Exception as e:
                if store._failure(e) is not Failure.NODE_EXISTS:
                    raise

        run(store, f"create root {zpath}", make)


def create_with_parents(
    store: WriteStore, path: str, data: bytes, create: Callable[[], None], max_replans: int
) -> None:
    """Create ``path`` (checked) with ``data`` by ``create()`` and, if its parent is missing, in one
    transaction with its missing ancestors (empty data); re-planned if an ancestor appears or
    vanishes meanwhile.

    Raises:
        NodeExistsError: ``path`` exists. MetadataError: the tree kept changing, or another failure.
        MetadataConnectionError, AlreadyClosedError: see :func:`~storage.metastore._zk_errors.run`.
    """
    for _ in range(max_replans):
        try:
            create()
            return
        except NoNodeError:
            pass
        missing: list[str] = []
        p = parent_of(path)
        while p != "/" and store.exists(p) is None:
            missing.append(p)
            p = parent_of(p)
        ops: list[Op] = [Create(a) for a in reversed(missing)]
        ops.append(Create(path, data))
        failed = commit(store, ops, f"create {path}")
        if failed is None:
            return
        index, error = failed
        if index == len(ops) - 1 and isinstance(error, NodeExistsError):
            raise NodeExistsError(f"node {path} exists") from error.__cause__
        # an ancestor appeared or vanished meanwhile: plan again
    raise MetadataError(f"create {path}: the tree kept changing under make_parents")


def delete_recursive(store: WriteStore, path: str, version: int, *, chunk: int, max_replans: int) -> None:
    """Delete ``path`` (checked; not the root) at ``version`` with its whole subtree: in one
    transaction when it has at most ``chunk`` nodes, else leaves first in several, each conditional
    on the node's version; re-planned if the subtree changes meanwhile.

    Raises:
        NoNodeError: no such node. MetadataVersionError: the version does not match. MetadataError:
        the subtree kept changing, or another failure. MetadataConnectionError, AlreadyClosedError:
        see :func:`~storage.metastore._zk_errors.run`.
    """
    for _ in range(max_replans):
        below = subtree(store, path)  # NoNodeError if the node itself is missing
        deletes: list[Op] = [Delete(p) for p in reversed(below)]
        chunks = [deletes[i : i + chunk] for i in range(0, len(deletes), chunk)] or [[]]
        if len(chunks[-1]) < chunk:
            chunks[-1].append(Delete(path, version))
        else:
            chunks.append([Delete(path, version)])
        replan = False
        for part in chunks:
            ops = part if len(chunks) == 1 else [Check(path, version), *part]
            failed = commit(store, ops, f"delete {path}")
            if failed is None:
                continue
            index, error = failed
            if ops[index].path == path and type(error) is not MetadataError:
                raise error  # the node itself is missing or at another version
            replan = True  # a child was added, or a descendant vanished, meanwhile
            break
        if not replan:
            return
    raise MetadataError(f"delete {path}: the subtree kept changing under the recursive delete")


def subtree(store: WriteStore, path: str) -> list[str]:
    """The interface paths strictly below ``path``, parents before children.

    Raises:
        NoNodeError: ``path`` itself does not exist.
    """
    below: list[str] = []
    frontier = [path]
    first = True
    while frontier:
        nxt: list[str] = []
        for p in frontier:
            try:
                names = store.children(p)
            except NoNodeError:
                if first:
                    raise
                continue  # deleted meanwhile: the transaction will tell
            for n in names:
                child = f"{p}/{n}" if p != "/" else f"/{n}"
                below.append(child)
                nxt.append(child)
            first = False
        frontier = nxt
        first = False
    return below
