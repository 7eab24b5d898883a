"""A SparkSession set up for ``format("distributedlog")`` outside ``spark-submit``: one helper, used by the
examples, the tests and the benchmarks alike.

What a plain ``SparkSession.builder.getOrCreate()`` from a virtualenv gets wrong, and what this fixes:

* Spark's Python workers run ``python3`` from ``PATH`` (not this virtualenv's interpreter, which has this package
  and pyarrow): ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` and ``spark.pyspark.python`` name this interpreter.
* A host name that resolves to a loopback address makes Spark print "Your hostname ... resolves to a loopback
  address ... Set SPARK_LOCAL_IP": the driver binds ``host`` explicitly (``SPARK_LOCAL_IP``,
  ``spark.driver.host``, ``spark.driver.bindAddress``; loopback by default, nothing listens beyond the machine).
* No web UI, no console progress bars, a couple of shuffle partitions instead of 200 for small local jobs.

Settings given in ``conf`` win over these defaults.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_session"]


def spark_session(
    master: str = "local[2]",
    *,
    app_name: str = "distributedlog",
    host: str = "127.0.0.1",
    shuffle_partitions: int = 2,
    pythonpath: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
) -> SparkSession:
    """The SparkSession of this process (created, or the running one with these settings applied where Spark
    allows), whose Python workers run this interpreter.

    Args:
        master: Spark's master URL (``local[2]``, ``local-cluster[2,1,1024]``, ``spark://host:7077``).
        app_name: the application name.
        host: the address the driver binds and advertises (``127.0.0.1``; a simulated host's address on a cluster).
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        pythonpath: directories put first on ``PYTHONPATH`` of this process's children and of the executors
            (e.g. an uninstalled checkout).
        conf: further Spark settings; they win over the defaults above.
        log_level: the SparkContext's log level.

    Environment: sets ``PYSPARK_PYTHON``, ``PYSPARK_DRIVER_PYTHON`` and ``SPARK_LOCAL_IP`` in ``os.environ`` (Spark's
    launcher and Python workers read them), and ``PYTHONPATH`` when ``pythonpath`` is given.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = host
    settings: dict[str, str] = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.host": host,
        "spark.driver.bindAddress": host,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
    }
    if pythonpath:
        path = os.pathsep.join([*pythonpath, *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
        os.environ["PYTHONPATH"] = path
        settings["spark.executorEnv.PYTHONPATH"] = path
    settings.update(conf or {})
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session
