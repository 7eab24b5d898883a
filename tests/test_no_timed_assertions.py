"""No timed assertions under ``tests/``: speed is measured in ``bench/``, never asserted in a test.

An assertion that bounds how long something took from above (``assert elapsed < 2``, ``assert took < TIMEOUT_S +
SLACK_S``, ``assert time.monotonic() - t0 < 0.5``) passes or fails with the machine's load, not with the
behaviour. Where a bound *is* the behaviour (a call must return, a timeout must fire), a test waits for the event
with a generous bound (``tests/storage/observe.py``: ``finishes``, ``wait_until``, ``Timeline``) and asserts what
happened and in which order. Lower bounds stay allowed (``assert waited >= timeout``: it did not give up early),
as do bounds that grow with the measured time (``assert count <= rate * elapsed + burst``) and the deadline of a
polling loop (an ``assert`` on the clock inside a ``while``: how a wait for an event ends; keep it generous).

This test reads every test source (its syntax tree, not its text) and fails naming each ``assert`` that puts a
duration on the small side of ``<``/``<=`` (or the large side of ``>``/``>=``). A duration is a clock difference
(``time.monotonic() - t0``, ``perf_counter() - start``, ``time.time() - ...``), a name assigned one, or a name
that says so (``elapsed``, ``took``, ``waited``, ``warned``, ``duration``, ``..._elapsed``, ``started_s``). It
also fails on a window between two moments (``record.created < failed_at - 1.0``); their plain order
(``warned_at < failed_at``) is fine.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: Calls that read a clock.
CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
#: Names (variables, attributes) that hold a duration by what they say.
DURATION_NAME = re.compile(
    r"^(elapsed|took|waited|warned|duration|latency|seconds)$|(^|_)(elapsed|took|waited|warned|duration)(_|$)"
)
#: Names in seconds (``started_s``): a duration when compared as they are, not as a term of a bound
#: (``before + delay_s`` is a configured delay, not a measured one).
SECONDS_NAME = re.compile(r"^[a-z][a-z0-9_]*_(s|secs|seconds)$")


def _is_clock_call(node: ast.AST) -> bool:
    """``time.monotonic()``, ``monotonic()``, ``time.perf_counter()``, ``time.time()`` ..."""
    if not isinstance(node, ast.Call) or node.args or node.keywords:
        return False
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr in CLOCKS and isinstance(f.value, ast.Name) and f.value.id == "time"
    return isinstance(f, ast.Name) and f.id in CLOCKS - {"time"}


class _Scope:
    """The clock readings and durations assigned in one function (or the module)."""

    def __init__(self, body: ast.AST) -> None:
        self.clocks: set[str] = set()
        self.durations: set[str] = set()
        assigns = [n for n in ast.walk(body) if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)]
        for _ in range(2):  # twice: a duration may be computed from a reading assigned later in the text
            for node in assigns:
                value = node.value
                if value is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if _is_clock_call(value):
                    self.clocks.update(names)
                elif self.is_duration(value):
                    self.durations.update(names)

    def is_clock(self, node: ast.AST) -> bool:
        return _is_clock_call(node) or (isinstance(node, ast.Name) and node.id in self.clocks)

    def is_duration(self, node: ast.AST, whole: bool = True) -> bool:
        """``node`` holds a measured duration (``whole``: it is the whole side of a comparison)."""
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name is not None:
            if name.endswith("_at"):  # a moment (``warned_at``), not a duration
                return False
            return (
                name in self.durations
                or bool(DURATION_NAME.search(name))
                or (whole and bool(SECONDS_NAME.search(name)))
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            # a clock difference, or a clock reading minus a constant (``deadline - 1.0``: a window)
            return self.is_clock(node.left) or self.is_clock(node.right) or self.is_duration(node.left, False)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult | ast.Div):
            return self.is_duration(node.left, False) or self.is_duration(node.right, False)
        return False

    def is_timestamp(self, node: ast.AST) -> bool:
        """A clock reading: a clock call, a name assigned one, ``record.created``, ``..._at``."""
        if self.is_clock(node):
            return True
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return name == "created" or name.endswith("_at")

    def is_shifted_timestamp(self, node: ast.AST) -> bool:
        """A clock reading plus or minus something that is not one (``failed_at - 1.0``)."""
        return (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add | ast.Sub)
            and self.is_timestamp(node.left) != self.is_timestamp(node.right)
        )

    def is_window(self, small: ast.AST, big: ast.AST) -> bool:
        """``small < big`` compares two moments with an offset between them: a timed window."""
        sides = [self.is_timestamp(n) or self.is_shifted_timestamp(n) for n in (small, big)]
        return all(sides) and (self.is_shifted_timestamp(small) or self.is_shifted_timestamp(big))


def _functions(tree: ast.Module) -> Iterator[ast.AST]:
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield node


def timed_assertions(path: Path, root: Path = TESTS.parent) -> list[str]:
    """``path:line: source`` (``path`` relative to ``root``) of every assert in ``path`` that bounds a duration
    from above, or compares two moments with an offset."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    found: dict[int, str] = {}
    in_loops = {id(n) for loop in ast.walk(tree) if isinstance(loop, ast.While) for n in ast.walk(loop)}
    for fn in _functions(tree):
        scope = _Scope(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Assert) or id(node) in in_loops:
                continue  # in a polling loop, an assert on the clock is the deadline that ends a wait
            for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                operands = [cmp.left, *cmp.comparators]
                for op, small, big in zip(cmp.ops, operands[:-1], operands[1:], strict=True):
                    if isinstance(op, ast.Gt | ast.GtE):
                        small, big = big, small
                    elif not isinstance(op, ast.Lt | ast.LtE):
                        continue
                    if (scope.is_duration(small) and not scope.is_duration(big)) or scope.is_window(small, big):
                        found[node.lineno] = ast.get_source_segment(source, node) or ""
    rel = path.relative_to(root)
    return [f"{rel}:{line}: {text.splitlines()[0]}" for line, text in sorted(found.items())]


def test_the_check_finds_timed_assertions(tmp_path: Path) -> None:
    """What the check flags and what it lets through."""
    flagged = {
        "assert elapsed < 90",
        "assert took < TIMEOUT_S + SLACK_S",
        "assert time.monotonic() - t0 < 0.5",
        "assert 0.28 <= time.monotonic() - t0 < 1.0",
        "assert 5 > perf_counter() - start",
        "assert g.started_s <= 15",
        "assert warned < 1.0",
        "assert waited < op_timeout * 4",
        "assert record.created < failed_at - 1.0",
        "assert warning.created > t0 + 1.0",
    }
    allowed = {
        "assert time.monotonic() - started >= 0.9",
        "assert txid <= 200 + 200 * elapsed + 1",
        "assert took >= TIMEOUT_S - 0.1",
        "assert len(acks) < 10",
        "assert timeline == ['warning', 'halfway', 'gave up']",
        "assert x.result(timeout=60) == 1",
        "assert warned_at < failed_at",
        "assert time.monotonic() < deadline",
        "assert polls[-1][0] >= t0 + delay_s",
        "while not done():\n        assert time.monotonic() - t0 < 60",
        "assert n <= rate * (took + 1)",
    }
    lines = ["import time", "from time import perf_counter", "t0 = start = failed_at = time.monotonic()"]
    f = tmp_path / "test_sample.py"
    for text in sorted(flagged | allowed):
        f.write_text("\n".join([*lines, "def test() -> None:", "    " + text, ""]))
        hits = timed_assertions(f, tmp_path)
        assert bool(hits) == (text in flagged), (text, hits)


def test_no_timed_assertion_under_tests() -> None:
    """Every test source under ``tests/``: none bounds how long something took from above."""
    offenders = [hit for path in sorted(TESTS.rglob("*.py")) for hit in timed_assertions(path)]
    assert not offenders, (
        "timed assertions (measure speed in bench/; where a bound is the behaviour, wait for the event with "
        "generous slack and assert its order, see tests/storage/observe.py):\n  " + "\n  ".join(offenders)
    )
