"""How long a Spark Python worker takes to start, with pyspark imported from the installed package (what the
``distributedlog_pyspark.pth`` line arranges, ``distributedlog_site.py``) vs from ``pyspark.zip`` (what Spark's
``PYTHONPATH`` alone gives: the zip comes first, and Python compiles a zip's modules at every start), on an idle
machine and beside busy processes; in one run.

Run::

    .venv/bin/python bench/bench_worker_start.py [--reps 7] [--busy N]

A start is what a worker does before it can connect back to Spark: a new interpreter of this environment (its
``.pth`` lines run) importing the modules of the streaming source's runner, the worker and the daemon, with
``PYTHONPATH`` as Spark sets it (``pyspark.zip`` then Py4J's zip, both from the installed pyspark's
``python/lib``). The zip side uses a copy of the same ``pyspark.zip`` in a temporary directory, which the hook
leaves alone (it is not inside an installed package), so both sides import the same release; each start checks
where pyspark came from. Spark gives the runner of a Python streaming source a fixed 10 s to connect back
(``PythonWorkerFactory.createSimpleWorker``), so the busy column is the one that decides whether a query starts.
``--busy`` processes spinning at the same priority stand for a loaded machine (default: 8 per CPU). Each side is
timed ``--reps`` times, sides alternating; medians and maxima are printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark
from _common import median

#: What the runner of a Python streaming source, a Python worker and the daemon import at their start.
IMPORTS = "import pyspark.sql.streaming.python_streaming_source_runner, pyspark.worker, pyspark.daemon"
LIB = Path(pyspark.__file__).parent / "python" / "lib"
#: The two sides, as the table names them.
HOOK, ZIP = "installed (the .pth hook)", "pyspark.zip"


def start_once(pythonpath: str) -> tuple[float, str]:
    """One worker start: seconds, and the file pyspark was imported from.

    Raises:
        subprocess.CalledProcessError: the interpreter failed (its stderr is in the exception).
    """
    env = {**os.environ, "PYTHONPATH": pythonpath}
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", f"{IMPORTS}; print(pyspark.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - t0, out.stdout.strip()


@contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` processes spinning on a CPU each, at this process's priority, for the length of the block."""
    procs = [subprocess.Popen([sys.executable, "-S", "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(1.0)  # let them take their share before the first start is timed
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def measure(sides: dict[str, str], reps: int) -> dict[str, list[float]]:
    """Each side's start times, sides alternating; every start imported pyspark from where its side says.

    Raises:
        RuntimeError: a start imported pyspark from elsewhere than its side expects.
    """
    times: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(reps):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for name in order:
            seconds, origin = start_once(sides[name])
            from_zip = ".zip" + os.sep in origin
            if from_zip != (name == ZIP):
                raise RuntimeError(f"{name}: pyspark was imported from {origin}")
            times[name].append(seconds)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--busy", type=int, default=8 * (os.cpu_count() or 1))
    args = parser.parse_args()

    py4j = next(LIB.glob("py4j-*.zip"))
    with tempfile.TemporaryDirectory(prefix="bench-worker-start-") as tmp:
        copy = Path(tmp) / "pyspark.zip"
        shutil.copyfile(LIB / "pyspark.zip", copy)
        sides = {
            HOOK: os.pathsep.join([str(LIB / "pyspark.zip"), str(py4j)]),
            ZIP: os.pathsep.join([str(copy), str(py4j)]),
        }
        idle = measure(sides, args.reps)
        with busy(args.busy):
            loaded = measure(sides, args.reps)

    print(f"\nSpark Python worker start: interpreter + `{IMPORTS}`, {args.reps} starts per cell, {os.cpu_count()} CPUs")
    busy_p50 = f"{args.busy} busy p50"
    header = f"{'pyspark imported from':<28}{'idle p50':>10}{'idle max':>10}{busy_p50:>14}{'busy max':>10}"
    print(header)
    print("-" * len(header))
    for name in sides:
        row = f"{name:<28}{median(idle[name]):>9.2f}s{max(idle[name]):>9.2f}s"
        print(row + f"{median(loaded[name]):>13.2f}s{max(loaded[name]):>9.2f}s")
    print(
        f"zip / installed: idle {median(idle[ZIP]) / median(idle[HOOK]):.1f}x, "
        f"busy {median(loaded[ZIP]) / median(loaded[HOOK]):.1f}x; "
        "Spark's limit for the streaming source's runner to connect back: 10 s"
    )


if __name__ == "__main__":
    main()
