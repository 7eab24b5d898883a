"""How the tests run ``spark-submit`` as a user of the checkout would: the virtualenv's launcher, the
interpreter that has this package for the driver and the workers, conf/spark-defaults.conf, loopback."""

from __future__ import annotations

import sys
from pathlib import Path

#: spark-submit as pyspark installs it next to this interpreter (.venv/bin/spark-submit).
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


def spark_submit(subprocess_env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """``(env, argv)``: the environment and the command up to the application (append ``--class``,
    the jar or script, and its arguments). Run it from the checkout (the properties file is relative)."""
    env = {k: v for k, v in subprocess_env.items() if k not in ("PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env["PYSPARK_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    argv = [
        str(SPARK_SUBMIT),
        "--properties-file",
        "conf/spark-defaults.conf",
        # the file names .venv/bin/python relative to the checkout; this interpreter may live elsewhere
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
    ]
    return env, argv
