"""The JVM face of DistributedLog in Python: a py4j gateway serving the storage API to Java programs
written against Apache DistributedLog's Java API (see :mod:`jvm_shim.protocol`).

* :func:`jar_path`: the shim's jar (built on first use when a JDK is present), for a JVM's classpath;
* :func:`py4j_jar`: the py4j jar that goes next to it;
* :mod:`jvm_shim.gateway`: the gateway (the calls Java makes), served by :mod:`jvm_shim.server` in the process of
  :mod:`jvm_shim.process` (``python -m jvm_shim`` or ``dlog gateway``);
* :mod:`jvm_shim.build`: the ``javac`` build (``python -m jvm_shim.build``, ``make jvm``).

Importing this package is cheap: ``storage`` and ``py4j`` are imported only by what needs them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["jar_path", "py4j_jar"]


def py4j_jar() -> Path:
    """The py4j jar that the py4j wheel ships (``sys.prefix/share/py4j/py4j<version>.jar``), falling
    back to ``pyspark/jars/py4j-*.jar``.

    Raises:
        storage.errors.UnexpectedError: no py4j jar is found.
    """
    from jvm_shim import build as _build

    try:
        return _build.py4j_jar()
    except _build.JavaBuildError as e:
        from storage.errors import UnexpectedError

        raise UnexpectedError(str(e)) from e


def _cache_jar() -> Path:
    """Where the jar goes when the package directory is read-only: one per package location."""
    from jvm_shim import build as _build

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(_build.PACKAGE_DIR).encode()).hexdigest()[:16]
    return base / "distributedlog" / "jvm-shim" / key / _build.JAR_NAME


def _writable(directory: Path) -> bool:
    probe = directory
    while not probe.exists():  # the lib/ directory may not exist yet: its parent must be writable
        if probe.parent == probe:
            return False
        probe = probe.parent
    return os.access(probe, os.W_OK | os.X_OK)


def jar_path() -> Path:
    """The shim's jar: ``jvm_shim/lib/distributedlog-jvm-shim.jar`` inside the package.

    When it is missing or older than the Java sources it is (re)built with :func:`jvm_shim.build.build_jar`,
    in place when the package directory is writable, else under ``~/.cache/distributedlog/jvm-shim/``.
    A jar that exists is returned as it is when no JDK is present to rebuild it.

    Raises:
        storage.errors.UnexpectedError: the jar must be built and cannot be (no ``javac``, no sources,
            no py4j jar, a compile error), with the reason.
    """
    from jvm_shim import build as _build
    from storage.errors import UnexpectedError

    packaged = _build.DEFAULT_JAR
    target = packaged if _writable(packaged.parent) else _cache_jar()
    candidates = [packaged] if target == packaged else [target, packaged]
    if not _build.java_sources():  # an install that ships only the jar
        for jar in candidates:
            if jar.is_file():
                return jar
        raise UnexpectedError(f"the jvm_shim jar is missing ({packaged}) and there are no Java sources to build it")
    for jar in candidates:
        if not _build.is_stale(jar):
            return jar
    if _build.find_tool("javac") is None:
        for jar in candidates:  # stale, but the best there is
            if jar.is_file():
                return jar
    try:
        return _build.build_jar(target)
    except _build.JavaBuildError as e:
        raise UnexpectedError(f"cannot build the jvm_shim jar {target}: {e}") from e
