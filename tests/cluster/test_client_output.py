"""A fault client's lines stay whole when a library logs on the same pipe: ``say`` writes a line in one write,
also with stdout unbuffered (as ``tools.lanes`` runs the suite). Once, ``print``'s word-by-word writes let kazoo's
"Connection dropped" land inside an ``ERROR`` line, and the test reading it saw no error at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import logging, sys, threading
from tests.cluster.clients import say
logging.basicConfig(stream=sys.stderr, format="%(message)s")
log = logging.getLogger("noise")
stop = threading.Event()
def noise():
    while not stop.is_set():
        log.warning("Connection dropped: socket connection broken")
t = threading.Thread(target=noise)
t.start()
for i in range(3000):
    say("ERROR", "LockingError", True, f"connection to ZooKeeper lost {i}")
stop.set()
t.join()
"""


def test_say_lines_stay_whole_beside_log_lines_on_the_same_pipe() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    said = [ln for ln in out if "LockingError" in ln or ln.startswith("ERROR")]
    noise = [ln for ln in out if "Connection dropped" in ln]
    assert noise, "the logging thread wrote nothing: the test shows nothing"
    assert len(said) == 3000, [ln for ln in said if not ln.startswith("ERROR LockingError True ")][:5]
    assert all(ln == f"ERROR LockingError True connection to ZooKeeper lost {i}" for i, ln in enumerate(said)), said[:5]
    assert all(ln == "Connection dropped: socket connection broken" for ln in noise), noise[:5]
