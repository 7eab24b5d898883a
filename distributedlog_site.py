"""What ``distributedlog_pyspark.pth`` does at the start of a Spark Python worker (standard library only).

Spark starts every Python worker (its ``pyspark.daemon``\\ s and the workers it starts one by one, such as
the runner of a Python streaming source) with ``$SPARK_HOME/python/lib/pyspark.zip`` first on
``PYTHONPATH``. With pyspark installed by pip, ``SPARK_HOME`` is the installed package itself and that zip
is the same release's copy of it. Python cannot cache bytecode for a module imported from a zip, so each
such interpreter compiles pyspark's sources anew: measured here, importing what a streaming source's
runner needs took 1.5-1.7 s from the zip and 0.5-0.7 s from the installed package (with cached bytecode).
It matters beyond speed: Spark gives a worker it starts one by one a fixed 10 s to connect back (a
constant in ``PythonWorkerFactory.createSimpleWorker``, not a setting), and on a busy machine the extra
second of compiling, stretched by the load, is what makes a streaming query fail at its start with
"Python worker failed to connect back".

:func:`prefer_installed_pyspark` drops that zip from ``sys.path`` only when it is the copy inside a pyspark
package that the same ``sys.path`` already reaches; any other layout (a Spark distribution's
``SPARK_HOME``, a pyspark found only through the zip) is left as Spark made it. Py4J's zip stays: it is
small, and the installed py4j may be another release.
"""

from __future__ import annotations

import os

#: Where Spark's launcher puts pyspark's sources for its Python workers, below ``SPARK_HOME``.
ZIP_BELOW_SPARK_HOME = os.path.join("python", "lib", "pyspark.zip")


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """Remove from ``path`` (``sys.path``, edited in place) each ``<dir>/pyspark/python/lib/pyspark.zip``
    whose ``<dir>`` is itself on ``path`` with an installed ``pyspark`` package in it; return the removed
    entries. Raises nothing: a layout it does not recognise is left alone."""
    reachable = {os.path.realpath(entry) for entry in path if entry and not entry.endswith(".zip")}
    removed = []
    for entry in list(path):
        if not entry.endswith(ZIP_BELOW_SPARK_HOME):
            continue
        spark_home = os.path.realpath(entry[: -len(ZIP_BELOW_SPARK_HOME)])
        if (
            os.path.basename(spark_home) == "pyspark"
            and os.path.dirname(spark_home) in reachable
            and os.path.isfile(os.path.join(spark_home, "__init__.py"))
        ):
            path.remove(entry)
            removed.append(entry)
    return removed
