"""Random operation sequences against the embedded store and a plain dict model of a ZooKeeper tree."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.errors import DLError
from storage.metastore.base import Check, Create, Delete, SetData
from storage.metastore.sqlite import SqliteMetadataStore

# --- the model ----------------------------------------------------------------------------
Tree = dict[str, tuple[bytes, int]]


class ModelError(Exception):
    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def _valid(path: str) -> bool:
    if path == "/":
        return True
    return (
        path.startswith("/") and not path.endswith("/") and all(p not in ("", ".", "..") for p in path[1:].split("/"))
    )


def _parent(path: str) -> str:
    head = path[: path.rindex("/")]
    return head or "/"


def _has_children(tree: Tree, path: str) -> bool:
    return any(p != "/" and _parent(p) == path for p in tree)


def _m_check(tree: Tree, path: str, version: int) -> int:
    if path not in tree:
        raise ModelError("NoNodeError")
    if version not in (-1, tree[path][1]):
        raise ModelError("MetadataVersionError")
    return tree[path][1]


def _m_create(tree: Tree, path: str, data: bytes, make_parents: bool) -> None:
    if path in tree:
        raise ModelError("NodeExistsError")
    if _parent(path) not in tree:
        if not make_parents:
            raise ModelError("NoNodeError")
        _m_create(tree, _parent(path), b"", True)
    tree[path] = (data, 0)


def _m_set(tree: Tree, path: str, data: bytes, version: int) -> int:
    cur = _m_check(tree, path, version)
    tree[path] = (data, cur + 1)
    return cur + 1


def _m_delete(tree: Tree, path: str, version: int, recursive: bool) -> None:
    _m_check(tree, path, version)
    below = [p for p in tree if p.startswith(path + "/")]
    if below and not recursive:
        raise ModelError("MetadataError")
    for p in [path, *below]:
        del tree[p]


def model_apply(tree: Tree, op: tuple[Any, ...]) -> Any:
    kind, path = op[0], op[1]
    if kind == "multi":
        ops = op[1]
        paths = [o.path for o in ops]
        if not all(_valid(p) for p in paths) or any(isinstance(o, Delete) and o.path == "/" for o in ops):
            raise ModelError("InvalidArgumentError")
        scratch = dict(tree)
        for o in ops:
            if isinstance(o, Create):
                _m_create(scratch, o.path, o.data, False)
            elif isinstance(o, SetData):
                _m_set(scratch, o.path, o.data, o.version)
            elif isinstance(o, Delete):
                _m_delete(scratch, o.path, o.version, False)
            else:
                _m_check(scratch, o.path, o.version)
        tree.clear()
        tree.update(scratch)
        return None
    if not _valid(path):
        raise ModelError("InvalidArgumentError")
    if kind == "get":
        if path not in tree:
            raise ModelError("NoNodeError")
        return tree[path]
    if kind == "exists":
        return tree[path][1] if path in tree else None
    if kind == "children":
        if path not in tree:
            raise ModelError("NoNodeError")
        return sorted(p.rsplit("/", 1)[1] for p in tree if p != "/" and _parent(p) == path)
    if kind == "create":
        return _m_create(tree, path, op[2], op[3])
    if kind == "set":
        return _m_set(tree, path, op[2], op[3])
    if path == "/":
        raise ModelError("InvalidArgumentError")
    return _m_delete(tree, path, op[2], op[3])


def store_apply(store: SqliteMetadataStore, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "multi":
        return store.multi(op[1])
    if kind == "get":
        v = store.get(op[1])
        return (v.value, v.version)
    if kind == "exists":
        return store.exists(op[1])
    if kind == "children":
        return store.children(op[1])
    if kind == "create":
        return store.create(op[1], op[2], make_parents=op[3])
    if kind == "set":
        return store.set(op[1], op[2], op[3])
    return store.delete(op[1], op[2], recursive=op[3])


# --- strategies ---------------------------------------------------------------------------
# a small tree, so that random operations keep hitting existing nodes, parents and children
GOOD_PATHS = ["/", "/a", "/b", "/a/a", "/a/b", "/b/a", "/a/a/a", "/a/a/b"]
BAD_PATHS = ["a", "/a/", "/a//b"]
paths = st.sampled_from(GOOD_PATHS + GOOD_PATHS[1:] + BAD_PATHS)  # about 1 in 6 malformed
datas = st.binary(max_size=4)
versions = st.integers(min_value=-1, max_value=2)
multi_ops = st.one_of(
    st.builds(Create, paths, datas),
    st.builds(SetData, paths, datas, versions),
    st.builds(Delete, paths, versions),
    st.builds(Check, paths, versions),
)
ops = st.one_of(
    st.tuples(st.just("create"), paths, datas, st.booleans()),
    st.tuples(st.just("create"), paths, datas, st.just(True)),
    st.tuples(st.just("set"), paths, datas, versions),
    st.tuples(st.just("delete"), paths, versions, st.booleans()),
    st.tuples(st.sampled_from(["get", "exists", "children"]), paths),
    st.tuples(st.just("multi"), st.lists(multi_ops, max_size=4)),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=10, max_size=50))
def test_store_matches_model(sequence: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as d, SqliteMetadataStore(Path(d) / "m.db") as store:
        tree: Tree = {"/": (b"", 0)}
        for op in sequence:
            try:
                expected: Any = ("ok", model_apply(tree, op))
            except ModelError as e:
                expected = ("error", e.kind)
            try:
                actual: Any = ("ok", store_apply(store, op))
            except DLError as e:
                actual = ("error", type(e).__name__)
            assert actual == expected, op
        # the whole tree agrees at the end, data and versions included
        for path, (data, version) in tree.items():
            v = store.get(path)
            assert (v.value, v.version) == (data, version)
        assert sum(len(store.children(p)) for p in tree) == len(tree) - 1
