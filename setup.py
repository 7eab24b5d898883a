"""Install Apache DistributedLog in Python: the `storage` core, the Spark layer, the CLI and the JVM shim."""

import importlib.util
import os
from pathlib import Path
from types import ModuleType

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# Spark starts its Python workers (and the worker that looks data sources up) with PYSPARK_PYTHON,
# or `python3` from PATH: from a virtualenv that is not activated that is another interpreter,
# without pyarrow or this package, and format("distributedlog") is not found. This .pth file,
# installed into site-packages, makes every interpreter of the environment export itself as
# PYSPARK_PYTHON unless the user set it (os.environ.setdefault), so no hand setting is needed.
PTH = "distributedlog_pyspark.pth"
HERE = Path(__file__).resolve().parent


def _jvm_build_module() -> ModuleType:
    """jvm_shim/build.py loaded by path: it imports only the standard library, while importing the
    jvm_shim package (or storage) needs dependencies pip's isolated build environment does not have."""
    spec = importlib.util.spec_from_file_location("_jvm_shim_build", HERE / "jvm_shim" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithPth(build_py):
    """build_py that also places the .pth file at the root of the installed tree.

    A regular build puts it in ``build_lib`` (so wheels and ``pip install .`` carry it); an
    editable build (``pip install -e .``, PEP 660) installs the modules from the checkout and ships
    only what lands in the unpacked wheel, which is the ``install`` command's ``install_lib``.
    """

    def run(self) -> None:
        super().run()
        target = self.build_lib
        editable = getattr(self, "editable_mode", False)
        if editable:
            target = self.get_finalized_command("install").install_lib
        self.copy_file(PTH, os.path.join(target, PTH))
        self._build_jar(editable)

    def _build_jar(self, editable: bool) -> None:
        """The jvm_shim jar, when a JDK is present (jvm_shim.jar_path() builds it on first use otherwise).
        An editable install builds it in place (jvm_shim/lib/, as `make jvm`). Never fails the install."""
        build = _jvm_build_module()
        if build.find_tool("javac") is None:
            print("note: no javac (JDK) found: the jvm_shim jar is not built now (jvm_shim.jar_path() builds it)")
            return
        out = None if editable else Path(self.build_lib) / "jvm_shim" / "lib" / build.JAR_NAME
        try:
            jar = build.build_jar(out)
        except Exception as e:  # JavaBuildError (no py4j jar yet, compile error), OSError
            print(f"note: the jvm_shim jar is not built now ({e}); jvm_shim.jar_path() builds it on first use")
            return
        print(f"built {jar}")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


# The documentation site (mkdocs.yml, docs/; `make docs`): MkDocs, the Material theme, and mkdocstrings for the API
# pages. The test extra includes them: tests/test_docs.py builds the site.
DOCS_REQUIRES = [
    "mkdocs>=1.6,<2",
    "mkdocs-material>=9.5,<10",
    "mkdocstrings[python]>=1.0,<2",
    "mkdocstrings-python>=2.0,<3",  # the handler options of mkdocs.yml
]

setup(
    name="distributedlog-py",
    version="0.1.0",
    description="A Python port of Apache DistributedLog's core library, put to work in Spark",
    long_description=Path("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    cmdclass={"build_py": BuildPyWithPth},
    # The package root spelled out as "." makes setuptools' editable install a plain .pth naming
    # the checkout (a "simple layout") instead of an import hook: Spark finds data sources by
    # listing sys.path with pkgutil.iter_modules, which does not see modules behind an import hook.
    package_dir={"": "."},
    packages=find_packages(
        include=[
            *("storage", "storage.*", "dl_spark", "dl_spark.*", "jvm_shim", "jvm_shim.*"),
            *("dl_proxy", "dl_proxy.*", "dlog", "dlog.*"),
        ]
    ),
    py_modules=["pyspark_distributedlog", "distributedlog_site"],  # the format's entry; the .pth file's worker hook
    package_data={
        "storage": ["py.typed"],
        "dl_spark": ["py.typed"],
        "dlog": ["py.typed"],
        "dl_proxy": ["py.typed", "proto/*.proto", "proto/*.pyi"],
        # the Java sources ship too, so jvm_shim.jar_path() can (re)build the jar where it is installed
        "jvm_shim": ["py.typed", "java/**/*.java", "java/src/main/resources/**/*", "lib/*.jar"],
    },
    install_requires=[
        "pyspark==4.3.*",
        "kazoo>=2.9",
        "pyarrow>=15",
        "numpy>=1.24",
        "lz4>=4.0",
        "py4j>=0.10.9",
        "crc32c>=2.3",
        "inotify_simple>=1.3",
        "click>=8",
        "prometheus_client>=0.17",
        # the write proxy (dl_proxy): gRPC, with stubs generated from dl_proxy/proto/distributedlog.proto
        "grpcio>=1.85.1",
        "protobuf>=7.35.1",
    ],
    entry_points={"console_scripts": ["dlog=dlog:main"]},
    extras_require={
        # a Spark Connect client (SparkSession.builder.remote(...)) in this environment
        "connect": ["pyspark[connect]==4.3.*", "pandas>=2.2,<3"],
        "test": [
            "pyspark[connect]==4.3.*",
            "pandas>=2.2,<3",
            "pytest>=8",
            "pytest-timeout>=2.2",
            "pytest-rerunfailures>=14",
            "mfusepy>=3.1",
            "chispa>=0.10",
            "hypothesis>=6.100",
            "ruff>=0.6",
            "mypy>=1.10",
            "nbclient>=0.10",
            "nbformat>=5.9",
            "ipykernel>=6.29",
            "grpcio-tools>=1.85.1",
            "mypy-protobuf>=3.6",
            "nats-py>=2.6",  # bench/bench_proxy.py's fan-in peer, NATS JetStream
            *DOCS_REQUIRES,
        ],
        "docs": DOCS_REQUIRES,
    },
)
