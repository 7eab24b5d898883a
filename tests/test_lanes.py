"""``tools.lanes`` (what ``make test`` runs): lanes side by side, the first failing status, and every
lane's failures repeated together at the end, where a CI log's tail shows them."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lanes_report_every_failure_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "test_a.py").write_text("def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n")
    (tmp_path / "b" / "test_b.py").write_text("def test_fine():\n    pass\n")
    cmd = [sys.executable, "-m", "tools.lanes", "--lane", f"one={tmp_path / 'a'}", "--rest", "two"]
    cmd += ["--root", str(tmp_path), "--log-dir", str(tmp_path / "logs"), "--", "-q", "-p", "no:cacheprovider"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    tail = out.stdout[out.stdout.index("failures of every lane:") :]
    assert "[one] FAILED " in tail and "test_a.py::test_bad" in tail
    assert "two" not in tail.split("lane ")[0]  # only the failing lane's lines
    table = {line.split()[0]: line.split() for line in tail.splitlines() if line.startswith(("one ", "two "))}
    assert table["one"][1] == "1" and "1 failed, 1 passed" in " ".join(table["one"])
    assert table["two"][1] == "0" and "1 passed" in " ".join(table["two"])
    assert (tmp_path / "logs" / "one.log").read_text().count("test_bad") >= 1


def _two_lanes(tmp_path: Path, body: str, *lane_args: str) -> subprocess.CompletedProcess[str]:
    """Lanes ``one`` (tmp_path/a) and ``two`` (tmp_path/b), each one test file made of ``body`` with N as its
    letter; asserts they passed."""
    for n in ("a", "b"):
        (tmp_path / n).mkdir()
        (tmp_path / n / f"test_{n}.py").write_text(body.replace("N", n))
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\nmarkers =\n    heavy: one at a time\n")
    cmd = [sys.executable, "-m", "tools.lanes", "--lane", f"one={tmp_path / 'a'}", "--lane", f"two={tmp_path / 'b'}"]
    cmd += [*lane_args, "--log-dir", str(tmp_path / "logs"), "--", "-q", "-p", "no:cacheprovider", "-c", str(ini)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_heavy_tests_of_two_lanes_never_overlap(tmp_path: Path) -> None:
    """Each lane's heavy test records when it ran, and holds on until the other lane's heavy test is blocked on the
    heavy-test lock (seen in the kernel's lock table) or has run: the lock shared by the lanes keeps the two apart,
    and the one that waits says for whom."""
    spans = tmp_path / "spans"
    spans.mkdir()
    body = (
        "import os, time, pytest\n"
        "from tests.storage.observe import flock_waiters, wait_until\n"
        "@pytest.mark.heavy\n"
        "def test_heavy_N():\n"
        "    start = time.monotonic()\n"
        "    other = os.path.join(SPANS, {'a': 'b', 'b': 'a'}['N'])\n"
        "    lock = os.environ['DL_TEST_HEAVY_LOCK']\n"
        "    wait_until(lambda: os.path.exists(other) or flock_waiters(lock) >= 1, 'the other lane at the lock')\n"
        "    open(os.path.join(SPANS, 'N'), 'w').write(f'{start} {time.monotonic()}')\n"
    ).replace("SPANS", repr(str(spans)))
    out = _two_lanes(tmp_path, body)
    (a0, a1), (b0, b1) = (map(float, (spans / n).read_text().split()) for n in ("a", "b"))
    assert a1 <= b0 or b1 <= a0, (a0, a1, b0, b1)
    assert "waits for the heavy-test lock, held by" in out.stdout and "(lane " in out.stdout
    assert out.stdout.count("heavy tests: 1 ran") == 2


def test_a_failure_says_when_it_ran_in_its_lane(tmp_path: Path) -> None:
    """A failed test's ``WHEN`` line: when it started, in minutes into its lane, and how long it ran, in whole
    seconds: at least what the test measured of itself from inside, at most what the whole lane run took."""
    (tmp_path / "a").mkdir()
    inside = tmp_path / "inside"
    body = (
        "import time\n"
        "def test_bad():\n"
        "    start = time.monotonic()\n"
        "    time.sleep(2.2)  # a test that runs a while\n"
        "    open(INSIDE, 'w').write(f'{start} {time.monotonic()}')\n"
        "    assert 1 == 2\n"
    ).replace("INSIDE", repr(str(inside)))
    (tmp_path / "a" / "test_a.py").write_text(body)
    cmd = [sys.executable, "-m", "tools.lanes", "--lane", f"one={tmp_path / 'a'}", "--log-dir", str(tmp_path / "l")]
    cmd += ["--", "-q", "-p", "no:cacheprovider"]
    outside_from = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    outside_to = time.monotonic()
    assert out.returncode == 1, out.stdout + out.stderr
    tail = out.stdout[out.stdout.index("failures of every lane:") :]
    # the test's id is relative to the root directory: a path may come before it
    line = r"\[one\] WHEN \S*test_a\.py::test_bad failed: started (\d+\.\d) min into the lane, ran (\d+)s"
    when = re.search(line, tail)
    assert when is not None, tail
    began, ran = float(when[1]), int(when[2])
    test_from, test_to = map(float, inside.read_text().split())
    assert int(f"{test_to - test_from:.0f}") <= ran <= outside_to - outside_from + 1  # rounded as the line rounds
    assert 0 <= began <= float(f"{(test_from - outside_from) / 60:.1f}")  # the lane began after the run did


def test_a_lane_runs_its_heavy_tests_first_or_last(tmp_path: Path) -> None:
    """``--heavy-first`` lanes run their heavy tests before the rest; the other lanes after the rest."""
    order = tmp_path / "order"
    body = (
        "import pytest\n"
        "def test_light_1():\n    open(ORDER, 'a').write('L N\\n')\n"
        "@pytest.mark.heavy\n"
        "def test_heavy():\n    open(ORDER, 'a').write('H N\\n')\n"
        "def test_light_2():\n    open(ORDER, 'a').write('L N\\n')\n"
    ).replace("ORDER", repr(str(order)))
    _two_lanes(tmp_path, body, "--heavy-first", "one")
    lines = order.read_text().split("\n")
    assert [x[0] for x in lines if x.endswith("a")] == ["H", "L", "L"]
    assert [x[0] for x in lines if x.endswith("b")] == ["L", "L", "H"]
