"""Install Apache DistributedLog in Python: the `storage` core (and, as they land, the Spark layer and the CLI)."""

import os
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# Spark starts its Python workers (and the worker that looks data sources up) with PYSPARK_PYTHON,
# or `python3` from PATH: from a virtualenv that is not activated that is another interpreter,
# without pyarrow or this package, and format("distributedlog") is not found. This .pth file,
# installed into site-packages, makes every interpreter of the environment export itself as
# PYSPARK_PYTHON unless the user set it (os.environ.setdefault), so no hand setting is needed.
PTH = "distributedlog_pyspark.pth"


class BuildPyWithPth(build_py):
    """build_py that also places the .pth file at the root of the installed tree.

    A regular build puts it in ``build_lib`` (so wheels and ``pip install .`` carry it); an
    editable build (``pip install -e .``, PEP 660) installs the modules from the checkout and ships
    only what lands in the unpacked wheel, which is the ``install`` command's ``install_lib``.
    """

    def run(self) -> None:
        super().run()
        target = self.build_lib
        if getattr(self, "editable_mode", False):
            target = self.get_finalized_command("install").install_lib
        self.copy_file(PTH, os.path.join(target, PTH))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


setup(
    name="distributedlog-py",
    version="0.1.0",
    description="Apache DistributedLog's core library in Python, put to work in Spark",
    long_description=Path("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    cmdclass={"build_py": BuildPyWithPth},
    # The package root spelled out as "." makes setuptools' editable install a plain .pth naming
    # the checkout (a "simple layout") instead of an import hook: Spark finds data sources by
    # listing sys.path with pkgutil.iter_modules, which does not see modules behind an import hook.
    package_dir={"": "."},
    packages=find_packages(include=["storage", "storage.*", "dl_spark", "dl_spark.*"]),
    py_modules=["pyspark_distributedlog"],  # Spark finds format("distributedlog") through it
    package_data={"storage": ["py.typed"], "dl_spark": ["py.typed"]},
    install_requires=[
        "pyspark==4.3.*",
        "kazoo>=2.9",
        "pyarrow>=15",
        "lz4>=4.0",
        "py4j>=0.10.9",
        "crc32c>=2.3",
        "inotify_simple>=1.3",
        "click>=8",
    ],
    entry_points={"console_scripts": ["dlog=storage.cli:main"]},
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.2",
            "chispa>=0.10",
            "hypothesis>=6.100",
            "ruff>=0.6",
            "mypy>=1.10",
            "nbclient>=0.10",
            "nbformat>=5.9",
            "ipykernel>=6.29",
        ],
    },
)
