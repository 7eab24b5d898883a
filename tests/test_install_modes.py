"""Each way of installing the package makes ``format("distributedlog")`` discoverable by Spark and
points Spark's Python workers at the installing interpreter, with no Makefile-only step.

Each mode gets a fresh virtualenv into which the package is installed with ``--no-deps`` the way a
user would (``pip install .``, ``pip install -e .``, a wheel from ``pip wheel .``). Its dependencies
(pyspark, pyarrow, ...) are borrowed from this interpreter's site-packages through a ``.pth`` line
sorted before the package's own ``.pth`` file (after an editable install's): installing pyspark three
more times would cost minutes and tests nothing of ours. Sorted so, the borrowed pyspark is on
``sys.path`` when the package's line runs, as an installed pyspark is, and Spark's workers must import it
rather than the ``pyspark.zip`` Spark names first (``distributedlog_site``). A borrowed directory
named by a ``.pth`` line is a plain ``sys.path`` entry, so this environment's own ``.pth`` files (its
editable install, its PYSPARK_PYTHON hook) do not run in the fresh one. The child gets no PYTHONPATH
and no PYSPARK_PYTHON, and a PATH whose ``python3`` is not the fresh interpreter: only what the install
put in place can make the Spark read work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What a source copy for a build leaves out (environments, caches, build output, data).
_NOT_SOURCES = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "demo-data*", "bench-data")

SCRIPT = textwrap.dedent(
    """
    import os, sys, tempfile
    import storage
    assert os.environ.get("PYSPARK_PYTHON") == sys.executable, os.environ.get("PYSPARK_PYTHON")
    d = tempfile.mkdtemp()
    uri = f"distributedlog-local://{d}/ns"
    with storage.open_namespace(uri) as ns, ns.open_log("events") as dlm:
        with dlm.open_writer() as w:
            for i in range(1, 4):
                w.write(storage.LogRecord(i, f"v{i}".encode()))
            w.flush()
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    df = spark.read.format("distributedlog").option("uri", uri).option("streams", "events").load()
    rows = [(r.txid, bytes(r.value).decode()) for r in df.select("txid", "value").collect()]
    workers = spark.sparkContext.parallelize([0], 1).map(
        lambda _: (__import__("sys").executable, __import__("pyspark").__file__)).collect()
    import pyspark
    assert workers[0][1] == pyspark.__file__, (workers[0][1], pyspark.__file__)
    print("ROWS", rows, "WORKER", workers[0][0], "DRIVER", sys.executable, "STORAGE", storage.__file__)
    spark.stop()
    """
)


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 540) -> str:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    return out.stdout


@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["regular", "editable", "wheel"])
def test_install_mode_finds_the_format(mode: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = "/usr/bin:/bin"  # python3 there (if any) is not the fresh virtualenv's
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(venv)], env, tmp_path)
    py = str(venv / "bin" / "python")
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env, tmp_path).strip())
    (site / "c_borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    pip = [py, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    # Builds run on a copy: setuptools builds in the source tree (build/, *.egg-info), and a stale
    # build/ in the checkout would leak old files into later wheels.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*_NOT_SOURCES))
    if mode == "regular":
        _run([*pip, str(src)], env, tmp_path)
    elif mode == "editable":
        _run([*pip, "-e", str(ROOT)], env, tmp_path)
    else:
        wheels = tmp_path / "wheels"
        _run([py, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)], env, tmp_path)
        (wheel,) = wheels.glob("distributedlog_py-*.whl")
        _run([*pip, str(wheel)], env, tmp_path)

    script = tmp_path / "read.py"
    script.write_text(SCRIPT)
    out = _run([py, str(script)], env, tmp_path)
    line = next(x for x in out.splitlines() if x.startswith("ROWS "))
    assert "[(1, 'v1'), (2, 'v2'), (3, 'v3')]" in line
    assert f"WORKER {py} DRIVER {py}" in line
    storage_file = line.split("STORAGE ", 1)[1]
    if mode == "editable":
        assert storage_file == str(ROOT / "storage" / "__init__.py")
    else:
        assert storage_file.startswith(str(site)), storage_file
    dlog = _run([str(venv / "bin" / "dlog"), "--version"], env, tmp_path)
    assert dlog.startswith("dlog ")
