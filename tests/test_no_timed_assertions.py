"""No timed assertions under ``tests/``: speed is measured in ``bench/``, never asserted in a test.

A check that bounds how long something took from above (``assert elapsed < 2``, ``assert took < TIMEOUT_S +
SLACK_S``, ``assert time.monotonic() - t0 < 0.5``) passes or fails with the machine's load, not with the
behaviour. Where a bound *is* the behaviour (a call must return, a timeout must fire), a test waits for the event
with a generous bound (``tests/storage/observe.py``: ``finishes``, ``wait_until``) and asserts what happened and in
which order, against events it can observe (a warning logged while a wait can still succeed, a connection closed
while another stays open), never against a timer. Lower bounds stay allowed (``assert waited >= timeout``: it did
not give up early), as do bounds that grow with the measured time (``assert count <= rate * elapsed + burst``).

This test reads every test source (its syntax tree, not its text) and fails naming each place that bounds a
duration from above:

- an ``assert`` (inside a ``while`` loop too: a polling loop's deadline is a timed bound of its own, and polls go
  through ``wait_until``, whose one generous deadline lives in ``observe.py``) that puts a duration on the small
  side of ``<``/``<=`` (or the large side of ``>``/``>=``), compares a clock reading with a deadline
  (``time.monotonic() < deadline``), or compares two moments with an offset between them (``record.created <
  failed_at - 1.0``; their plain order, ``warned_at < failed_at``, is fine);
- in a polling loop (a ``while`` that sleeps), an ``assert`` bounding a count of polls (``len(polls) < 2000``:
  polls times the sleep is a deadline);
- the same comparisons passed on instead of asserted: in an exit code (``os._exit(0 if took < 1 else 3)``), or
  returned by a helper;
- an ``assert`` that waits through a helper for a fraction of a duration (``closed_by_peer(s, timeout=default /
  2)``);
- an ``assert`` on text stating a measured duration (``"... ran 0s" in out``, ``"started 0.0 min into"``);
- an event marked by a timer (``timeline.mark_after(timeout_s / 2, "halfway")``, ``threading.Timer(1.0,
  timeline.mark, ...)``): ordering other events against it bounds them in time.

A duration is a clock difference (``time.monotonic() - t0``, ``perf_counter() - start``, ``time.time() - ...``), a
name assigned one, a name that says so (``elapsed``, ``took``, ``waited``, ``warned``, ``duration``, ``rtt``,
``..._elapsed``, ``started_s``), a list durations are appended to, what a helper returns when it returns one (in
the same file, or imported from ``tests``), and ``min``/``max``/``sum``/``statistics.median``/... of durations.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: Calls that read a clock.
CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
#: Names (variables, attributes, helpers) that hold a duration by what they say.
DURATION_NAME = re.compile(
    r"^(elapsed|took|waited|warned|duration|durations|latency|latencies|seconds|rtt|rtts)$"
    r"|(^|_)(elapsed|took|waited|warned|duration|durations|latency|latencies|rtt|rtts)(_|$)"
)
#: Names in seconds (``started_s``): a duration when compared as they are, not as a term of a bound
#: (``before + delay_s`` is a configured delay, not a measured one).
SECONDS_NAME = re.compile(r"^[a-z][a-z0-9_]*_(s|secs|seconds)$")
#: Names of deadlines (a clock reading plus an allowance).
DEADLINE_NAME = re.compile(r"^(deadline|until|give_up_at)$|(^|_)deadline(_|$)")
#: Calls whose result is a duration when an argument is one (``max(rtts)``, ``statistics.median(slow)``).
AGGREGATES = {"min", "max", "sum", "sorted", "abs", "round", "float", "int", "median", "mean", "fmean", "quantiles"}
AGGREGATES |= {"median_low", "median_high", "mode", "pstdev", "stdev", "geometric_mean", "harmonic_mean"}
#: Calls that end the process with a code: a bound passed as an exit code is asserted by whoever reads it.
EXITS = {"exit", "_exit", "quit"}
#: Keyword arguments that bound a wait.
TIMEOUT_KEYWORD = re.compile(r"^(timeout|timeout_s|timeout_ms|within|within_s|wait_s|deadline_s)$")
#: Text stating a measured duration (``ran 0s``, ``took 1.2 s``, ``0.0 min into``).
DURATION_TEXT = re.compile(
    r"\b(ran|took|takes|elapsed|lasted|waited|spent)\s+\d+(\.\d+)?\s?(ms|s|sec|secs|seconds|min|minutes)\b"
    r"|\b\d+(\.\d+)?\s?(ms|s|sec|secs|seconds|min|minutes)\s+into\b"
)


def _name_of(node: ast.AST) -> str | None:
    """``x`` of ``x`` and of ``a.x``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_clock_call(node: ast.AST) -> bool:
    """``time.monotonic()``, ``monotonic()``, ``time.perf_counter()``, ``time.time()`` ..."""
    if not isinstance(node, ast.Call) or node.args or node.keywords:
        return False
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr in CLOCKS and isinstance(f.value, ast.Name) and f.value.id == "time"
    return isinstance(f, ast.Name) and f.id in CLOCKS - {"time"}


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``fn``'s body, not those of the functions (and classes) defined in it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            todo.extend(ast.iter_child_nodes(node))


class _Scope:
    """The clock readings, deadlines and durations assigned in one function (or the module)."""

    def __init__(self, body: ast.AST, helpers: frozenset[str] = frozenset()) -> None:
        self.helpers = helpers  # names of functions that return a duration
        self.clocks: set[str] = set()
        self.deadlines: set[str] = set()
        self.durations: set[str] = set()
        nodes = list(ast.walk(body))
        assigns = [n for n in nodes if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)]
        appends = [
            n
            for n in nodes
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("append", "extend", "insert", "add")
            and isinstance(n.func.value, ast.Name)
        ]
        for _ in range(3):  # again: a duration may be computed from a reading assigned later in the text
            for node in assigns:
                value = node.value
                if value is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if _is_clock_call(value):
                    self.clocks.update(names)
                elif self.is_deadline(value):
                    self.deadlines.update(names)
                elif self.is_duration(value):
                    self.durations.update(names)
            for call in appends:  # ``out.append((perf_counter() - t0) * 1000)``: ``out`` holds durations
                assert isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                if any(self.is_duration(a) for a in call.args):
                    self.durations.add(call.func.value.id)

    def is_clock(self, node: ast.AST) -> bool:
        return _is_clock_call(node) or (isinstance(node, ast.Name) and node.id in self.clocks)

    def is_deadline(self, node: ast.AST) -> bool:
        """A moment to give up at: a clock reading plus an allowance, or a name assigned or called one."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.is_clock(node.left) != self.is_clock(node.right)
        name = _name_of(node)
        return name is not None and (name in self.deadlines or bool(DEADLINE_NAME.search(name)))

    def is_duration(self, node: ast.AST, whole: bool = True) -> bool:
        """``node`` holds a measured duration (``whole``: it is the whole side of a comparison)."""
        name = _name_of(node)
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
        if isinstance(node, ast.Subscript):  # one of a list of durations
            return self.is_duration(node.value, False)
        if isinstance(node, ast.Call):
            callee = _name_of(node.func)
            if callee in self.helpers:  # a helper that returns a duration
                return True
            if callee in AGGREGATES:
                return any(self.is_duration(a, False) for a in node.args)
        return False

    def is_timestamp(self, node: ast.AST) -> bool:
        """A clock reading: a clock call, a name assigned one, ``record.created``, ``..._at``."""
        if self.is_clock(node):
            return True
        name = _name_of(node) or ""
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

    def bounds_time(self, test: ast.AST) -> bool:
        """Whether a comparison in ``test`` bounds a duration from above, puts a clock reading before a deadline,
        or is a timed window."""
        for small, big in _upper_bounds(test):
            if (self.is_duration(small) and not self.is_duration(big)) or self.is_window(small, big):
                return True
            if self.is_clock(small) and self.is_deadline(big):
                return True
        return False


def _upper_bounds(test: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
    """Every ``(small, big)`` pair that a comparison in ``test`` puts in order (``a > b`` yields ``(b, a)``)."""
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        operands = [cmp.left, *cmp.comparators]
        for op, small, big in zip(cmp.ops, operands[:-1], operands[1:], strict=True):
            if isinstance(op, ast.Gt | ast.GtE):
                yield big, small
            elif isinstance(op, ast.Lt | ast.LtE):
                yield small, big


def _bounds_a_count(test: ast.AST) -> bool:
    """``len(polls) < 2000``, ``tries <= 50``: an upper bound against a constant."""
    for small, big in _upper_bounds(test):
        numeric = isinstance(big, ast.Constant) and isinstance(big.value, int | float)
        if numeric and not isinstance(small, ast.Constant):
            return True
    return False


def _sleeps(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _name_of(n.func) == "sleep" for n in ast.walk(node))


def _waits_a_fraction(test: ast.AST) -> bool:
    """A call in ``test`` waits for a computed part of a duration (``timeout=default / 2``)."""
    for call in (n for n in ast.walk(test) if isinstance(n, ast.Call)):
        for kw in call.keywords:
            if kw.arg and TIMEOUT_KEYWORD.match(kw.arg) and isinstance(kw.value, ast.BinOp):
                return True
    return False


def _states_a_duration(test: ast.AST) -> bool:
    """Text in ``test`` that states a measured duration."""
    texts = [n.value for n in ast.walk(test) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return any(DURATION_TEXT.search(t) for t in texts)


def _marks_a_timer(node: ast.AST) -> bool:
    """``timeline.mark_after(...)``, or a ``threading.Timer`` that marks an event."""
    if not isinstance(node, ast.Call):
        return False
    callee = _name_of(node.func)
    if callee == "mark_after":
        return True
    return callee == "Timer" and any(_name_of(a) in ("mark", "append") for a in [*node.args[1:2]])


# --- the helpers of a file (and those it imports from tests) that return durations ---------------------------
_HELPERS: dict[Path, frozenset[str]] = {}


def _imported_helpers(tree: ast.Module, root: Path) -> set[str]:
    """Names imported from modules under ``tests`` (``from tests.x import f``) that return durations there."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
            path = root.joinpath(*node.module.split(".")).with_suffix(".py")
            if path.is_file():
                theirs = duration_helpers(path, root)
                found.update(a.asname or a.name for a in node.names if a.name in theirs)
    return found


def duration_helpers(path: Path, root: Path = TESTS.parent) -> frozenset[str]:
    """Names of the functions of ``path`` (and those it imports from ``tests``) that return a duration."""
    path = path.resolve()
    if path in _HELPERS:
        return _HELPERS[path]
    _HELPERS[path] = frozenset()  # an import cycle sees none
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    helpers = _imported_helpers(tree, root)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    while True:  # a helper may return what another returns
        known = frozenset(helpers)
        for fn in functions:
            scope = _Scope(fn, known)
            returns = [n for n in _own_nodes(fn) if isinstance(n, ast.Return) and n.value is not None]
            if any(r.value is not None and scope.is_duration(r.value) for r in returns):
                helpers.add(fn.name)
        if helpers == known:
            break
    _HELPERS[path] = frozenset(helpers)
    return _HELPERS[path]


def _functions(tree: ast.Module) -> Iterator[ast.AST]:
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield node


def timed_assertions(path: Path, root: Path = TESTS.parent) -> list[str]:
    """``path:line: source`` (``path`` relative to ``root``) of every place in ``path`` that bounds a duration
    from above (see the module docstring for the forms)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    helpers = duration_helpers(path, root)
    found: dict[int, str] = {}
    polling = {
        id(n) for loop in ast.walk(tree) if isinstance(loop, ast.While) and _sleeps(loop) for n in ast.walk(loop)
    }
    for fn in _functions(tree):
        scope = _Scope(fn, helpers)
        for node in ast.walk(fn):
            flagged = False
            if isinstance(node, ast.Assert):
                flagged = (
                    scope.bounds_time(node.test)
                    or (id(node) in polling and _bounds_a_count(node.test))
                    or _waits_a_fraction(node.test)
                    or _states_a_duration(node.test)
                )
            elif isinstance(node, ast.Call) and _name_of(node.func) in EXITS:
                flagged = any(scope.bounds_time(a) for a in node.args)
            elif isinstance(node, ast.Return) and node.value is not None:
                flagged = scope.bounds_time(node.value)
            elif isinstance(node, ast.Call):
                flagged = _marks_a_timer(node)
            if flagged and isinstance(node, ast.stmt | ast.expr):
                found[node.lineno] = ast.get_source_segment(source, node) or ""
    rel = path.relative_to(root)
    return [f"{rel}:{line}: {text.splitlines()[0]}" for line, text in sorted(found.items())]


#: The head of every snippet the check is tried on.
_HEAD = [
    "import os, statistics, sys, threading, time",
    "from time import perf_counter",
    "t0 = start = failed_at = time.monotonic()",
    "deadline = time.monotonic() + 60",
]


def _flags(tmp_path: Path, text: str) -> list[str]:
    """What the check finds in ``text`` (a test function's body, indented by four spaces)."""
    _HELPERS.clear()
    f = tmp_path / "test_sample.py"
    f.write_text("\n".join([*_HEAD, "def test() -> None:", *("    " + line for line in text.splitlines()), ""]))
    return timed_assertions(f, tmp_path)


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
        "assert time.monotonic() < deadline",
        "assert time.monotonic() < t0 + 30",
    }
    allowed = {
        "assert time.monotonic() - started >= 0.9",
        "assert txid <= 200 + 200 * elapsed + 1",
        "assert took >= TIMEOUT_S - 0.1",
        "assert len(acks) < 10",
        "assert timeline == ['warning', 'gave up']",
        "assert x.result(timeout=60) == 1",
        "assert warned_at < failed_at",
        "assert polls[-1][0] >= t0 + delay_s",
        "assert n <= rate * (took + 1)",
        "assert closed_by_peer(s, timeout=GENEROUS_S)",
        "assert 'giving up after 5 s' in message",
        "while not done():\n    assert seen <= total\n    time.sleep(0.01)",
        "wait_until(lambda: ready, 'ready')",
        "return time.monotonic() - t0 >= 1.0",
    }
    for text in sorted(flagged | allowed):
        hits = _flags(tmp_path, text)
        assert bool(hits) == (text in flagged), (text, hits)


#: The forms the check once missed, each as the test that had it wrote it: every one is flagged now.
MISSED_FORMS = {
    "an assert on the clock in a polling loop": (
        "while not done():\n    assert time.monotonic() - t0 < 30\n    time.sleep(0.1)"
    ),
    "a polling loop's deadline against a deadline": (
        "while not cond():\n    assert time.monotonic() < deadline, 'condition not reached'\n    time.sleep(0.02)"
    ),
    "a count of polls (polls times the sleep)": (
        "polls = []\nwhile not polls or polls[-1] == first:\n    polls.append(poll())\n"
        "    assert len(polls) < 2000, 'no batch long after maxTriggerDelay'\n    time.sleep(0.02)"
    ),
    "a bound passed as a forked child's exit code": (
        "started = time.monotonic()\nstore.close()\nos._exit(code if time.monotonic() - started < 1 else 3)"
    ),
    "a bound passed as sys.exit's code": "took = time.monotonic() - t0\nsys.exit(0 if took < 1.0 else 1)",
    "a bound returned by a helper": (
        "def fast(t: float) -> bool:\n    return time.monotonic() - t < 0.5\nassert fast(t0)"
    ),
    "a duration measured in a helper": (
        "def rtts() -> list[float]:\n    out = []\n    for _ in range(3):\n        t = perf_counter()\n"
        "        out.append((perf_counter() - t) * 1000)\n    return out\n"
        "slow = rtts()\nmed = statistics.median(slow)\nassert len(slow) == 40 and 75 <= med <= 140"
    ),
    "the largest of helper-measured durations": (
        "def rtts() -> list[float]:\n    out = []\n    t = perf_counter()\n    out.append(perf_counter() - t)\n"
        "    return out\nassert max(rtts()) <= 200"
    ),
    "a duration stated in text": ("assert 'test_a.py::test_bad failed: started 0.0 min into the lane, ran 0s' in tail"),
    "a wait for a fraction of a duration through a helper": "assert closed_by_peer(s, timeout=default / 2)",
    "an event marked by a timer": (
        "timeline.mark_after(timeout_s / 2, 'halfway')\nrun()\nassert timeline.events == ['warning', 'halfway']"
    ),
    "a timer that marks an event": "threading.Timer(2.5, timeline.mark, args=('halfway',)).start()",
}


def test_the_check_finds_the_forms_it_once_missed(tmp_path: Path) -> None:
    """Each form a test once used to bound a duration unnoticed is flagged now."""
    missed = {what: text for what, text in MISSED_FORMS.items() if not _flags(tmp_path, text)}
    assert not missed, missed


def test_no_timed_assertion_under_tests() -> None:
    """Every test source under ``tests/``: none bounds how long something took from above."""
    _HELPERS.clear()
    offenders = [hit for path in sorted(TESTS.rglob("*.py")) for hit in timed_assertions(path)]
    assert not offenders, (
        "timed assertions (measure speed in bench/; where a bound is the behaviour, wait for the event with "
        "observe.wait_until / finishes and assert the order of observable events):\n  " + "\n  ".join(offenders)
    )
