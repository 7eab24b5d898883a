"""Build the shim's jar with the JDK's ``javac`` (no Maven): ``python -m jvm_shim.build [OUT.jar]``.

Every ``.java`` file under ``jvm_shim/java/src/main/java`` is compiled with ``javac --release 17``
against the py4j jar that the py4j wheel ships (:func:`py4j_jar`), and packed with ``jar cf`` (or
:mod:`zipfile` when the JDK has no ``jar`` tool) together with any files under
``jvm_shim/java/src/main/resources``. A jar newer than every source (and source directory, so a
deleted source counts too) is left alone.

This module imports only the standard library (``setup.py`` loads it by path, inside pip's isolated
build environment where neither ``storage`` nor ``py4j`` need be importable); its failures are
:class:`JavaBuildError`, which :func:`jvm_shim.jar_path` turns into ``storage.errors.UnexpectedError``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

#: The package directory (``jvm_shim/``).
PACKAGE_DIR = Path(__file__).resolve().parent
#: Where the Java sources live.
JAVA_SOURCES = PACKAGE_DIR / "java" / "src" / "main" / "java"
#: Non-Java files packed into the jar as they are (e.g. ``META-INF/services/...``).
JAVA_RESOURCES = PACKAGE_DIR / "java" / "src" / "main" / "resources"
#: The jar's file name.
JAR_NAME = "distributedlog-jvm-shim.jar"
#: Where the jar is built by default (shipped inside the package by ``pip install .``).
DEFAULT_JAR = PACKAGE_DIR / "lib" / JAR_NAME
#: The second target: the Spark Real-Time Mode source (``format("distributedlog-rt")``), compiled against the
#: shim's jar and pyspark's jars into a jar of its own (:func:`build_spark_rt_jar`, :func:`spark_rt_jar_path`).
SPARK_RT_DIR = PACKAGE_DIR / "java" / "spark-rt" / "src" / "main"
SPARK_RT_SOURCES = SPARK_RT_DIR / "java"
SPARK_RT_RESOURCES = SPARK_RT_DIR / "resources"
SPARK_RT_JAR_NAME = "distributedlog-spark-rt.jar"
DEFAULT_SPARK_RT_JAR = PACKAGE_DIR / "lib" / SPARK_RT_JAR_NAME
#: The Java release the classes target.
JAVA_RELEASE = "17"

#: The jar entry holding :func:`sources_digest` of what the jar was built from.
DIGEST_ENTRY = "META-INF/distributedlog-jvm-shim.sources.sha256"

_MANIFEST = "Manifest-Version: 1.0\r\nCreated-By: jvm_shim.build (distributedlog-py)\r\n\r\n"


class JavaBuildError(Exception):
    """The jar cannot be built: no JDK, no sources, no py4j jar, or ``javac`` failed."""


#: How to get a JDK, in every "no JDK tool" message (the build's and the tests').
JDK_HINT = "set JAVA_HOME or put a JDK >= 17 on PATH, e.g. apt-get install openjdk-17-jdk-headless"


# --- tools and inputs ---------------------------------------------------------------------------
def find_tool(name: str) -> str | None:
    """The JDK tool ``name`` (``javac``, ``java``, ``jar``): ``$JAVA_HOME/bin/<name>`` first, then ``PATH``.

    The one rule for finding the JDK: the build, :func:`jvm_shim.jar_path`, the benchmarks and the tests all
    use it (the tests fail, not skip, when it finds no ``javac``).
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def require_tool(name: str) -> str:
    """:func:`find_tool`, or an error saying how to get a JDK.

    Raises:
        JavaBuildError: no ``name`` found (``no javac found (set JAVA_HOME or ...)``).
    """
    tool = find_tool(name)
    if tool is None:
        raise JavaBuildError(f"no {name} found ({JDK_HINT})")
    return tool


def _py4j_version() -> str | None:
    try:
        from importlib import metadata

        return metadata.version("py4j")
    except Exception:  # metadata.PackageNotFoundError, or a broken install
        return None


def py4j_jar() -> Path:
    """The py4j jar that the py4j wheel ships (``<prefix>/share/py4j/py4j<version>.jar``), else the one
    in pyspark's ``jars/`` directory (``py4j-<version>.jar``, the installed version preferred).

    Raises:
        JavaBuildError: no py4j jar is found.
    """
    version = _py4j_version()
    prefixes: list[Path] = []
    for raw in (sys.prefix, sys.exec_prefix, sys.base_prefix):
        if Path(raw) not in prefixes:
            prefixes.append(Path(raw))
    try:  # a --user install: the jar is under the user base, not the interpreter's prefix
        import site

        prefixes.append(Path(site.getuserbase()))
    except Exception:
        pass
    py4j_prefix = _py4j_install_prefix()  # e.g. pip's build environment, or a prefix on PYTHONPATH
    if py4j_prefix is not None and py4j_prefix not in prefixes:
        prefixes.append(py4j_prefix)
    candidates: list[Path] = []
    for prefix in prefixes:
        share = prefix / "share" / "py4j"
        if version:
            candidates.append(share / f"py4j{version}.jar")
    for c in candidates:
        if c.is_file():
            return c
    for prefix in prefixes:  # any version the wheel left there
        found = sorted((prefix / "share" / "py4j").glob("py4j*.jar"))
        if found:
            return found[-1]
    for jars in _pyspark_jar_dirs():
        if version and (jars / f"py4j-{version}.jar").is_file():
            return jars / f"py4j-{version}.jar"
        found = sorted(jars.glob("py4j-*.jar"))
        if found:
            return found[-1]
    raise JavaBuildError(
        "no py4j jar found: looked for share/py4j/py4j<version>.jar under "
        f"{', '.join(str(p) for p in prefixes)} and for pyspark/jars/py4j-*.jar (pip install py4j)"
    )


def _py4j_install_prefix() -> Path | None:
    """The prefix py4j is installed under (``<prefix>/lib/pythonX.Y/site-packages/py4j``), found without
    importing it."""
    from importlib.util import find_spec

    try:
        spec = find_spec("py4j")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    package = Path(spec.origin).resolve().parent
    return package.parents[3] if len(package.parents) > 3 else None


def _pyspark_jar_dirs() -> list[Path]:
    from importlib.util import find_spec

    try:
        spec = find_spec("pyspark")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(loc) / "jars" for loc in spec.submodule_search_locations if (Path(loc) / "jars").is_dir()]


def java_sources(src_dir: Path | None = None) -> list[Path]:
    """Every ``.java`` file under ``src_dir`` (default :data:`JAVA_SOURCES`), sorted."""
    src_dir = JAVA_SOURCES if src_dir is None else src_dir
    if not src_dir.is_dir():
        return []
    return sorted(p for p in src_dir.rglob("*.java") if p.is_file())


def _resources(resources_dir: Path | None) -> list[Path]:
    if resources_dir is None or not resources_dir.is_dir():
        return []
    return sorted(p for p in resources_dir.rglob("*") if p.is_file())


def _newest_input(dirs: Sequence[Path | None], files: Sequence[Path]) -> float:
    newest = 0.0
    for d in dirs:
        if d is None or not d.is_dir():
            continue
        newest = max(newest, d.stat().st_mtime)
        for sub in d.rglob("*"):
            if sub.is_dir():
                newest = max(newest, sub.stat().st_mtime)
    for f in files:
        newest = max(newest, f.stat().st_mtime)
    return newest


def sources_digest(src_dir: Path, resources_dir: Path | None) -> str:
    """SHA-256 over the relative paths and contents of every source and resource (stored in the jar
    as :data:`DIGEST_ENTRY`)."""
    h = hashlib.sha256()
    roots = [(src_dir, java_sources(src_dir))]
    if resources_dir is not None:
        roots.append((resources_dir, _resources(resources_dir)))
    for root, files in roots:
        for f in files:
            h.update(f.relative_to(root).as_posix().encode() + b"\0")
            h.update(f.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def _jar_digest(jar: Path) -> str | None:
    try:
        with zipfile.ZipFile(jar) as zf:
            return zf.read(DIGEST_ENTRY).decode().strip()
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
        return None


def is_stale(jar: Path, src_dir: Path | None = None, resources_dir: Path | None = None) -> bool:
    """True when ``jar`` is missing, or older than a source, a resource or one of their directories and
    built from other sources than these (an install that only changed modification times, as unpacking
    a wheel does, is not stale). ``src_dir`` defaults to :data:`JAVA_SOURCES`, and then ``resources_dir``
    to :data:`JAVA_RESOURCES`."""
    if src_dir is None:
        src_dir = JAVA_SOURCES
        if resources_dir is None:
            resources_dir = JAVA_RESOURCES
    if not jar.is_file():
        return True
    newest = _newest_input([src_dir, resources_dir], [*java_sources(src_dir), *_resources(resources_dir)])
    if newest <= jar.stat().st_mtime:
        return False
    return _jar_digest(jar) != sources_digest(src_dir, resources_dir)


# --- the build ------------------------------------------------------------------------------------
def build_jar(
    out: Path | None = None,
    *,
    src_dir: Path | None = None,
    resources_dir: Path | None = None,
    classpath: Sequence[Path] = (),
    force: bool = False,
) -> Path:
    """Compile the Java sources into the jar ``out`` (default :data:`DEFAULT_JAR`) and return its path.

    ``src_dir`` defaults to :data:`JAVA_SOURCES` (and ``resources_dir`` to :data:`JAVA_RESOURCES` then);
    ``classpath`` adds jars to py4j's for ``javac``. Nothing is done when the jar is newer than every
    input (unless ``force``). The jar is written to a temporary file and renamed into place, so a
    concurrent reader never sees half a jar.

    Raises:
        JavaBuildError: no ``javac``, no sources, no py4j jar, or a compile error (javac's output in
            the message).
    """
    if src_dir is None:
        src_dir = JAVA_SOURCES
        if resources_dir is None:
            resources_dir = JAVA_RESOURCES
    jar = (out or DEFAULT_JAR).absolute()
    sources = java_sources(src_dir)
    if not sources:
        raise JavaBuildError(f"no Java sources under {src_dir}")
    if not force and not is_stale(jar, src_dir, resources_dir):
        return jar
    javac = require_tool("javac")
    cp = os.pathsep.join(str(p) for p in [py4j_jar(), *classpath])
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jvm-shim-build-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        argfile = Path(tmp) / "sources.txt"
        # javac's @argfile: one quoted path per line (quotes keep spaces; backslashes doubled)
        argfile.write_text(
            "".join('"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"\n' for s in sources),
            encoding="utf-8",
        )
        cmd = [javac, "--release", JAVA_RELEASE, "-encoding", "UTF-8", "-nowarn", "-cp", cp, "-d", str(classes)]
        proc = subprocess.run([*cmd, f"@{argfile}"], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            output = (proc.stderr + proc.stdout).strip()
            raise JavaBuildError(f"javac failed (exit {proc.returncode}) on {len(sources)} sources:\n{output}")
        for res in _resources(resources_dir):
            assert resources_dir is not None
            target = classes / res.relative_to(resources_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(res, target)
        digest = classes / DIGEST_ENTRY
        digest.parent.mkdir(parents=True, exist_ok=True)
        digest.write_text(sources_digest(src_dir, resources_dir) + "\n", encoding="ascii")
        partial = jar.with_name(f".{jar.name}.{os.getpid()}.tmp")
        try:
            _pack(classes, partial)
            os.replace(partial, jar)
        finally:
            partial.unlink(missing_ok=True)
    return jar


def _pack(classes: Path, jar: Path) -> None:
    tool = find_tool("jar")
    if tool is not None:
        proc = subprocess.run(
            [tool, "cf", str(jar), "-C", str(classes), "."], capture_output=True, text=True, check=False
        )
        if proc.returncode == 0:
            return
        jar.unlink(missing_ok=True)  # fall back to zipfile below
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("META-INF/MANIFEST.MF", _MANIFEST)
        for f in sorted(classes.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(classes).as_posix())


# --- the Spark Real-Time Mode source's jar ----------------------------------------------------------
def pyspark_jars_dir() -> Path:
    """pyspark's ``jars/`` directory (Spark's own jars, which the source is compiled against).

    Raises:
        JavaBuildError: pyspark is not installed (or has no ``jars/``).
    """
    dirs = _pyspark_jar_dirs()
    if not dirs:
        raise JavaBuildError("pyspark's jars/ directory was not found (pip install pyspark)")
    return dirs[0]


def build_spark_rt_jar(out: Path | None = None, *, shim_jar: Path | None = None, force: bool = False) -> Path:
    """Compile the Spark Real-Time Mode source (``jvm_shim/java/spark-rt``) into ``out`` (default
    :data:`DEFAULT_SPARK_RT_JAR`) against ``shim_jar`` (default: the shim's jar, built first if needed) and
    pyspark's jars; returns its path. Up-to-date jars are left alone, as :func:`build_jar` does.

    Raises:
        JavaBuildError: no ``javac``, no sources, no py4j jar, no pyspark, or a compile error.
    """
    shim = shim_jar if shim_jar is not None else build_jar()
    return build_jar(
        out or DEFAULT_SPARK_RT_JAR,
        src_dir=SPARK_RT_SOURCES,
        resources_dir=SPARK_RT_RESOURCES,
        classpath=[shim, pyspark_jars_dir() / "*"],
        force=force,
    )


def spark_rt_jar_path(shim_jar: Path | None = None) -> Path:
    """The Spark Real-Time Mode source's jar, ``jvm_shim/lib/distributedlog-spark-rt.jar``, (re)built when missing
    or older than its sources (under ``~/.cache/distributedlog/jvm-shim/`` when the package directory is
    read-only); a jar that exists is returned as it is when no JDK is present to rebuild it. ``shim_jar``: the
    shim's jar it is compiled against (default :data:`DEFAULT_JAR`, built if needed).

    Raises:
        JavaBuildError: the jar must be built and cannot be (no ``javac``, no pyspark, a compile error).
    """
    packaged = DEFAULT_SPARK_RT_JAR
    probe = packaged.parent
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if os.access(probe, os.W_OK | os.X_OK):
        target = packaged
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        key = hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:16]
        target = base / "distributedlog" / "jvm-shim" / key / SPARK_RT_JAR_NAME
    candidates = [packaged] if target == packaged else [target, packaged]
    if not java_sources(SPARK_RT_SOURCES) or find_tool("javac") is None:
        for jar in candidates:
            if jar.is_file():
                return jar
        if not java_sources(SPARK_RT_SOURCES):
            raise JavaBuildError(f"the jar {packaged} is missing and there are no Java sources to build it")
    for jar in candidates:
        if not is_stale(jar, SPARK_RT_SOURCES, SPARK_RT_RESOURCES):
            return jar
    return build_spark_rt_jar(target, shim_jar=shim_jar)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m jvm_shim.build [OUT.jar] [--force]``: build the jar (in place by default)."""
    parser = argparse.ArgumentParser(prog="python -m jvm_shim.build", description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=None, help=f"the jar to write (default {DEFAULT_JAR})")
    parser.add_argument("--force", action="store_true", help="rebuild even when the jar is up to date")
    parser.add_argument(
        "--spark-rt",
        action="store_true",
        help=f"build the Spark Real-Time Mode source's jar instead (default {DEFAULT_SPARK_RT_JAR})",
    )
    args = parser.parse_args(argv)
    try:
        build = build_spark_rt_jar if args.spark_rt else build_jar
        jar = build(args.out, force=args.force)
    except JavaBuildError as e:
        print(f"jvm_shim.build: error: {e}", file=sys.stderr)
        return 1
    print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
