"""One SparkSession for every Spark test (``local[2]``; its Python workers run this interpreter and
import this checkout), plus helpers to write logs with the storage API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The shared SparkSession. ``spark.pyspark.python`` points Spark's Python workers at this
    interpreter (a virtualenv's packages); PYTHONPATH lets them import this checkout even before
    ``pip install``."""
    from dl_spark.session import spark_session

    session = spark_session(
        "local[2]",
        app_name="dl_spark-tests",
        pythonpath=[str(ROOT)],
        conf={
            "spark.default.parallelism": "2",
            "spark.sql.streaming.stopTimeout": "30s",
            "spark.driver.memory": "1g",
        },
    )
    try:
        yield session
    finally:
        session.stop()
