"""docs/guarantees.md names, for each guarantee, the tests that fail if it breaks. This checks that every name
there (``tests/path/test_file.py::test_name`` or ``...::TestClass::test_method``) is a test that exists and is not
one of the ``chaos`` schedules CI deselects, and that the page still cites as many tests as it did. The test files
are read with :mod:`ast`, never imported, so the check takes a fraction of a second."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guarantees.md"

#: How many distinct tests the page cites; an emptied or truncated page falls below it.
MIN_CITED = 171

#: ``tests/<path>.py::name`` or ``tests/<path>.py::Class::name``.
REFERENCE = re.compile(r"\b(tests/[\w/.-]+?\.py)::(\w+(?:::\w+)?)")

Definitions = dict[str, ast.FunctionDef | ast.AsyncFunctionDef]


def cited(text: str) -> list[tuple[str, str]]:
    """The distinct ``(file, name)`` references of ``text``, in the order they first appear."""
    seen: dict[tuple[str, str], None] = {}
    for match in REFERENCE.finditer(text):
        seen.setdefault((match.group(1), match.group(2)), None)
    return list(seen)


def _is_chaos(decorators: list[ast.expr]) -> bool:
    return any("chaos" in ast.unparse(d) for d in decorators)


def _module_is_chaos(tree: ast.Module) -> bool:
    """Whether a module-level ``pytestmark`` marks every test of the file ``chaos``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return "chaos" in ast.unparse(node.value)
    return False


def definitions(tree: ast.Module) -> Definitions:
    """Every test function (``name``) and test method (``Class::name``) defined at the top of ``tree``."""
    found: Definitions = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and member.name.startswith("test"):
                    found[f"{node.name}::{member.name}"] = member
    return found


def problems(references: list[tuple[str, str]], root: Path) -> list[str]:
    """One line per reference that names no test CI runs: a missing file, a missing test, or a ``chaos`` test.

    Raises:
        OSError, SyntaxError: a cited test file exists but cannot be read or parsed.
    """
    out: list[str] = []
    trees: dict[str, ast.Module | None] = {}
    for file, name in references:
        if file not in trees:
            path = root / file
            trees[file] = ast.parse(path.read_text(), filename=file) if path.is_file() else None
        tree = trees[file]
        if tree is None:
            out.append(f"{file}::{name}: no such file")
            continue
        test = definitions(tree).get(name)
        if test is None:
            out.append(f"{file}::{name}: {file} defines no test named {name}")
        elif _module_is_chaos(tree) or _is_chaos(test.decorator_list):
            out.append(f"{file}::{name}: marked chaos, so `make test` (CI) never runs it")
    return out


def test_every_cited_test_exists_and_runs_in_ci() -> None:
    references = cited(PAGE.read_text())
    wrong = problems(references, ROOT)
    assert not wrong, "docs/guarantees.md cites tests that CI does not run:\n" + "\n".join(wrong)
    assert len(references) >= MIN_CITED, (
        f"docs/guarantees.md cites {len(references)} tests, fewer than {MIN_CITED}: "
        "a guarantee lost its tests (or lower MIN_CITED on purpose)"
    )


def test_the_check_finds_missing_tests_methods_and_chaos(tmp_path: Path) -> None:
    """The checker itself, on a small tree: a class method is found, and each kind of wrong reference is reported."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text(
        "import pytest\n"
        "def test_one(): pass\n"
        "class TestGroup:\n"
        "    def test_method(self): pass\n"
        "@pytest.mark.chaos\n"
        "def test_long(): pass\n"
        "def helper(): pass\n"
    )
    (tests / "test_b.py").write_text("import pytest\npytestmark = [pytest.mark.chaos]\ndef test_all(): pass\n")
    page = (
        "`tests/test_a.py::test_one` and tests/test_a.py::TestGroup::test_method, again `tests/test_a.py::test_one`;"
        " tests/test_a.py::test_two, tests/test_a.py::helper, tests/test_a.py::test_long, tests/test_b.py::test_all,"
        " tests/test_c.py::test_x."
    )
    refs = cited(page)
    assert refs[:2] == [("tests/test_a.py", "test_one"), ("tests/test_a.py", "TestGroup::test_method")]
    assert len(refs) == 7
    assert problems(refs, tmp_path) == [
        "tests/test_a.py::test_two: tests/test_a.py defines no test named test_two",
        "tests/test_a.py::helper: tests/test_a.py defines no test named helper",
        "tests/test_a.py::test_long: marked chaos, so `make test` (CI) never runs it",
        "tests/test_b.py::test_all: marked chaos, so `make test` (CI) never runs it",
        "tests/test_c.py::test_x: no such file",
    ]
