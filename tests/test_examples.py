"""Every example runs, so none can rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_log_tour(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "log_tour.py"), "--uri", f"distributedlog-local://{tmp_path}/ns"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "SUMMARY OK records=20000" in out.stdout
    assert "end of stream: True" in out.stdout
