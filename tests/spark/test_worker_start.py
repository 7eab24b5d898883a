"""Spark's Python workers import the installed pyspark (cached bytecode), not the copy Spark puts first on
their ``PYTHONPATH`` (``$SPARK_HOME/python/lib/pyspark.zip``, compiled anew by every worker): the hook of
``distributedlog_pyspark.pth`` (``distributedlog_site``), in a real Spark worker and case by case."""

from __future__ import annotations

import os
from pathlib import Path

import py4j
import pyspark

from distributedlog_site import prefer_installed_pyspark


def test_a_spark_worker_imports_the_installed_pyspark(spark) -> None:
    path, py4j_path, pythonpath = (
        spark.sparkContext.parallelize([0], 1)  # type: ignore[attr-defined]
        .map(
            lambda _: (
                __import__("pyspark").__file__,
                __import__("py4j").__file__,
                __import__("os").environ.get("PYTHONPATH", ""),
            )
        )
        .collect()[0]
    )
    # Spark still names the zips first: the worker chose the installed copies the driver uses.
    assert "pyspark.zip" in pythonpath.split(os.pathsep)[0], pythonpath
    assert (path, py4j_path) == (pyspark.__file__, py4j.__file__)


def _installed(site: Path) -> Path:
    """A pip-installed pyspark in ``site``: the package and, inside it, the zip Spark's launcher names."""
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    zipped = site / "pyspark" / "python" / "lib" / "pyspark.zip"
    zipped.write_bytes(b"")
    return zipped


def test_the_zip_inside_an_installed_pyspark_on_the_path_is_dropped(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    zipped = _installed(site)
    py4j = str(zipped.parent / "py4j-0.10.9.9-src.zip")
    path = [str(zipped), py4j, "/usr/lib/python3.11", str(site)]
    assert prefer_installed_pyspark(path) == [str(zipped)]
    assert path == [py4j, "/usr/lib/python3.11", str(site)]  # no py4j installed in site: its zip stays


def test_py4j_zip_goes_only_when_the_same_release_is_installed(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    zipped = _installed(site)
    (site / "py4j").mkdir()
    (site / "py4j" / "version.py").write_text("__version__ = '0.10.9.9'\n")
    same, other = (str(zipped.parent / f"py4j-{v}-src.zip") for v in ("0.10.9.9", "0.10.9.7"))
    path = [str(zipped), same, str(site)]
    assert prefer_installed_pyspark(path) == [str(zipped), same] and path == [str(site)]
    path = [str(zipped), other, str(site)]
    assert prefer_installed_pyspark(path) == [str(zipped)] and path == [other, str(site)]


def test_the_site_is_compared_as_a_real_path(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    zipped = _installed(site)
    (tmp_path / "link").symlink_to(site)
    linked = str(tmp_path / "link" / "pyspark" / "python" / "lib" / "pyspark.zip")
    path = [linked, str(site)]
    assert prefer_installed_pyspark(path) == [linked]
    assert path == [str(site)] and zipped.exists()


def test_other_layouts_are_left_as_spark_made_them(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    zipped = _installed(site)
    # the installed package's directory is not on the path: the zip is how this interpreter finds pyspark
    alone = [str(zipped), "/usr/lib/python3.11"]
    assert prefer_installed_pyspark(alone) == [] and alone == [str(zipped), "/usr/lib/python3.11"]
    # a Spark distribution: SPARK_HOME is not a package named pyspark
    dist = tmp_path / "opt" / "spark-4.3.0"
    (dist / "python" / "lib").mkdir(parents=True)
    (dist / "python" / "lib" / "pyspark.zip").write_bytes(b"")
    spark_home = [str(dist / "python" / "lib" / "pyspark.zip"), str(site), str(tmp_path / "opt")]
    assert prefer_installed_pyspark(spark_home) == [] and len(spark_home) == 3
    # a directory named pyspark that is not a package (no __init__.py)
    bare = tmp_path / "bare"
    (bare / "pyspark" / "python" / "lib").mkdir(parents=True)
    not_package = [str(bare / "pyspark" / "python" / "lib" / "pyspark.zip"), str(bare)]
    assert prefer_installed_pyspark(not_package) == [] and len(not_package) == 2
