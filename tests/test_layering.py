"""The import direction of the product, checked by walking its imports.

Layers, bottom up: the foundations (``storage.errors``, ``storage.config``, ``storage.common``) → ``storage.formats``
→ the stores (``storage.segstore``, ``storage.metastore``) → ``storage.log`` → ``storage`` (the public API) → the
faces (``dl_spark``, ``jvm_shim``, ``dl_proxy``) → the ``dlog`` command. A module may import its own layer and the
layers below it, never one above. Every ``import`` statement counts, also those inside functions and under
``TYPE_CHECKING``: a lazy import of a face from the core is still a dependency.

Two checks: a static one (every import statement of every module, parsed with :mod:`ast`) and a dynamic one (a fresh
interpreter imports every ``storage`` module and then looks at ``sys.modules``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("storage", "dl_spark", "jvm_shim", "dl_proxy", "dlog")

#: Rank of each layer: an import may go to the same rank or lower.
RANKS: dict[str, int] = {
    "storage.errors": 0,
    "storage.config": 0,
    "storage.common": 0,
    "storage.formats": 1,
    "storage.segstore": 2,
    "storage.metastore": 2,
    "storage.cold": 2,
    "storage.log": 3,
    "storage": 4,  # the package's __init__: the public API over everything below
    "dl_spark": 5,
    "jvm_shim": 5,
    "dl_proxy": 5,
    "dlog": 6,
}
#: The faces and the command: the core imports none of them, and none of the libraries only they use.
ABOVE_STORAGE = ("dl_spark", "jvm_shim", "dl_proxy", "dlog", "pyspark", "py4j", "grpc", "click")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        base = ROOT / pkg
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path) -> set[str]:
    """Every module ``module`` imports (absolute names; relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            # `from storage.log import positioning` imports the submodule storage.log.positioning
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _layer(module: str) -> str | None:
    best = None
    for name in RANKS:
        if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best)):
            best = name
    return best


MODULES = _modules()
GRAPH = {m: {i for i in _imports(m, p) if i in MODULES} for m, p in MODULES.items()}


def test_the_walk_sees_the_whole_product() -> None:
    # the walk itself: it finds the packages and their imports (a broken walk would pass every check below)
    assert {
        "storage",
        "storage.log.namespace",
        "storage.formats.dlsn",
        "dl_spark.sink",
        "jvm_shim.gateway",
        "dlog",
    } <= (MODULES.keys())
    assert "storage.log.log_manager" in GRAPH["storage.log.namespace"]
    assert "storage.formats.dlsn" in GRAPH["storage.formats.record"]
    assert all(_layer(m) is not None for m in MODULES), [m for m in MODULES if _layer(m) is None]


def test_storage_imports_no_face_and_no_face_library() -> None:
    bad = {
        (m, i)
        for m, p in MODULES.items()
        if m == "storage" or m.startswith("storage.")
        for i in _imports(m, p)
        if i.split(".")[0] in ABOVE_STORAGE
    }
    assert not bad, sorted(bad)


def test_every_import_goes_down_or_sideways() -> None:
    up = []
    for m, deps in GRAPH.items():
        here = _layer(m)
        assert here is not None
        for d in deps:
            there = _layer(d)
            assert there is not None
            if RANKS[there] > RANKS[here]:
                up.append(f"{m} -> {d}")
    assert not up, up


def test_no_import_cycles_in_the_product() -> None:
    """No module reaches itself through the imports of the modules it imports (Tarjan's strongly connected
    components; a package ``__init__`` counts as the module it is)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            # a package importing its own submodules (re-exports in __init__) is not a cycle of design
            if v == w or (w.startswith(v + ".") and MODULES[v].name == "__init__.py"):
                continue
            if v.startswith(w + ".") and MODULES[w].name == "__init__.py":
                continue  # importing the parent package
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_only_the_adapters_import_their_clients() -> None:
    """kazoo only in the ZooKeeper adapter, rados only in the RADOS segment store."""
    where: dict[str, set[str]] = {"kazoo": set(), "rados": set()}
    for m, p in MODULES.items():
        for i in _imports(m, p):
            top = i.split(".")[0]
            if top in where:
                where[top].add(m)
    assert all(m.startswith(("storage.metastore.zookeeper", "storage.metastore._zk")) for m in where["kazoo"]), where
    assert where["kazoo"], "the ZooKeeper adapter imports kazoo"
    assert all(m.startswith(("storage.segstore.rados", "storage.segstore._rados")) for m in where["rados"]), where


@pytest.mark.timeout(120)
def test_importing_every_storage_module_loads_no_face() -> None:
    """At run time: a fresh interpreter imports every module of ``storage`` and loads nothing above it."""
    names = sorted(m for m in MODULES if m == "storage" or m.startswith("storage."))
    code = (
        "import importlib, json, sys\n"
        f"for n in {names!r}:\n"
        "    try:\n"
        "        importlib.import_module(n)\n"
        "    except ImportError as e:  # an optional binding (rados) missing here is not a layering question\n"
        "        if 'rados' not in str(e):\n"
        "            raise\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {list(ABOVE_STORAGE)!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=110)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_every_folder_of_the_product_is_a_regular_package() -> None:
    """``pip install .`` (setuptools' find_packages) ships only folders with an ``__init__.py``: a folder without
    one works from the checkout (a namespace package) and is missing from an installed copy."""
    missing = sorted(
        str(d.relative_to(ROOT))
        for pkg in PACKAGES
        if (ROOT / pkg).is_dir()
        for d in [ROOT / pkg, *(ROOT / pkg).rglob("*")]
        if d.is_dir() and any(d.glob("*.py")) and not (d / "__init__.py").is_file()
    )
    assert not missing, missing
