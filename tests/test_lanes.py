"""``tools.lanes`` (what ``make test`` runs): lanes side by side, the first failing status, and every
lane's failures repeated together at the end, where a CI log's tail shows them."""

from __future__ import annotations

import subprocess
import sys
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
