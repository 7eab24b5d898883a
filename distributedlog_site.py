"""What ``distributedlog_pyspark.pth`` does at the start of a Spark Python worker (standard library only).

Spark starts every Python worker (its ``pyspark.daemon``\\ s and the workers it starts one by one, such as
the runner of a Python streaming source) with ``$SPARK_HOME/python/lib/pyspark.zip`` first on
``PYTHONPATH``. With pyspark installed by pip, ``SPARK_HOME`` is the installed package itself and that zip
is the same release's copy of it. Python cannot cache bytecode for a module imported from a zip, so each
such interpreter compiles pyspark's sources anew: importing what a streaming source's runner, a worker and
the daemon need takes 1.8 s from the zip and 0.7 s from the installed package, with its cached bytecode
(``bench/bench_worker_start.py``; 20 s and 6.4 s beside 16 busy processes on 2 CPUs).
It matters beyond speed: Spark gives a worker it starts one by one a fixed 10 s to connect back (a
constant in ``PythonWorkerFactory.createSimpleWorker``, not a setting), and on a busy machine the extra
second of compiling, stretched by the load, is what makes a streaming query fail at its start with
"Python worker failed to connect back".

:func:`prefer_installed_pyspark` drops that zip from ``sys.path`` only when it is the copy inside a pyspark
package that the same ``sys.path`` already reaches; any other layout (a Spark distribution's
``SPARK_HOME``, a pyspark found only through the zip) is left as Spark made it. Py4J's zip beside it
(``py4j-<version>-src.zip``) goes too when the py4j installed in that same directory is that version
(another ~0.08 s of compiling); of another version, it stays.
"""

from __future__ import annotations

import os

#: Where Spark's launcher puts pyspark's sources for its Python workers, below ``SPARK_HOME``.
ZIP_BELOW_SPARK_HOME = os.path.join("python", "lib", "pyspark.zip")


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """Remove from ``path`` (``sys.path``, edited in place) each ``<dir>/pyspark/python/lib/pyspark.zip``
    whose ``<dir>`` is itself on ``path`` with an installed ``pyspark`` package in it, and the Py4J zip beside
    it when ``<dir>`` has the same py4j release; return the removed entries. Raises nothing: a layout it does
    not recognise is left alone."""
    reachable = {os.path.realpath(entry) for entry in path if entry and not entry.endswith(".zip")}
    removed = []
    for entry in list(path):
        if not entry.endswith(ZIP_BELOW_SPARK_HOME):
            continue
        spark_home = os.path.realpath(entry[: -len(ZIP_BELOW_SPARK_HOME)])
        site = os.path.dirname(spark_home)
        if (
            os.path.basename(spark_home) == "pyspark"
            and site in reachable
            and os.path.isfile(os.path.join(spark_home, "__init__.py"))
        ):
            path.remove(entry)
            removed.append(entry)
            removed.extend(_drop_installed_py4j(path, os.path.dirname(entry), site))
    return removed


def _drop_installed_py4j(path: list[str], lib: str, site: str) -> list[str]:
    """Remove the entries ``<lib>/py4j-<version>-src.zip`` whose version is the py4j installed in ``site``."""
    try:
        with open(os.path.join(site, "py4j", "version.py"), encoding="utf-8") as f:
            installed = f.read()
    except OSError:
        return []
    removed = []
    for entry in list(path):
        name = os.path.basename(entry)
        if os.path.dirname(entry) != lib or not (name.startswith("py4j-") and name.endswith("-src.zip")):
            continue
        version = name[len("py4j-") : -len("-src.zip")]
        if f"'{version}'" in installed or f'"{version}"' in installed:
            path.remove(entry)
            removed.append(entry)
    return removed
