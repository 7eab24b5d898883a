"""The Java shim's error table (``Errors.java``) mirrors ``storage/errors.py``: every Python parent it names is the
class's real parent, and every error of the core library reaches a Java row through it (an error the table cannot
place falls back to its status code, or a bare ``DLException``, losing its kind). Read from the source, no JVM."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import dl_proxy.errors
import storage.errors as errors

ERRORS_JAVA = (
    Path(__file__).resolve().parents[2] / "jvm_shim/java/src/main/java/org/apache/distributedlog/shim/Errors.java"
)


def _java_table() -> tuple[set[str], dict[str, str]]:
    src = ERRORS_JAVA.read_text()
    rows = set(re.findall(r'row\("(\w+)"', src))
    parents: dict[str, str] = {}
    block = re.search(r"for \(String c : new String\[\] \{(.*?)\}\)", src, re.S)
    assert block is not None, "the DLError children list moved: update this test"
    for name in re.findall(r'"(\w+)"', block.group(1)):
        parents[name] = "DLError"
    parents.update(dict(re.findall(r'p\.put\("(\w+)", "(\w+)"\)', src)))
    return rows, parents


def _python_errors() -> dict[str, type[errors.DLError]]:
    return {
        name: cls
        for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, errors.DLError) and cls.__module__ == errors.__name__
    }


def test_every_python_parent_in_the_java_table_is_the_real_one() -> None:
    _rows, parents = _java_table()
    classes = _python_errors()
    for child, parent in parents.items():
        assert child in classes, f"Errors.java names {child}, which storage/errors.py does not have"
        assert classes[child].__bases__[0].__name__ == parent, f"{child}'s parent is not {parent}"


def test_every_core_error_reaches_a_java_row_through_its_parents() -> None:
    """Every error the core library raises (what the gateway wraps) is a row or names its parent; the write
    proxy's own status classes (``dl_proxy.errors``) never come through the gateway and go by status code."""
    rows, parents = _java_table()
    proxy_only = set(dl_proxy.errors.__all__)
    missing = []
    for name in _python_errors():
        if name in proxy_only:
            continue
        c: str | None = name
        while c is not None and c not in rows:
            c = parents.get(c)
        if c is None:
            missing.append(name)
    assert not missing, f"add these to Errors.java's PYTHON_PARENTS (or a row): {sorted(missing)}"
