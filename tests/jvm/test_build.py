"""Building the shim's jar with ``javac`` (no Maven): :func:`jvm_shim.build.build_jar` on sources of the
test's own (compiled against py4j's jar), rebuilds only for changed sources, the ``zipfile`` fallback,
clear errors, :func:`jvm_shim.jar_path` (in place, or in the cache when the package is read-only; a
``storage`` error without a JDK), :func:`jvm_shim.py4j_jar`, and the real sources of ``jvm_shim/java``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import jvm_shim
import storage
from jvm_shim import build
from tests.jvm.jdk import Jdk

#: The JDK the test compiles with: it FAILS without one (tests/jvm/conftest.py), never skips.
needs_jdk = pytest.mark.usefixtures("jdk")

ECHO = """
package demo;

public interface Echo {
    byte[] call(String op, String args, byte[] data);
}
"""

PROBE = """
package demo.inner;

import py4j.ClientServer;

public final class Probe {
    public static Object builder() {
        return new ClientServer.ClientServerBuilder().javaPort(0);
    }
}
"""


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "demo" / "inner").mkdir(parents=True)
    (root / "demo" / "Echo.java").write_text(ECHO)
    (root / "demo" / "inner" / "Probe.java").write_text(PROBE)
    return root


def _identity(f: Path) -> tuple[int, int]:
    """(inode, mtime): a file rewritten or replaced has another."""
    st = f.stat()
    return st.st_ino, st.st_mtime_ns


def names(jar: Path) -> set[str]:
    with zipfile.ZipFile(jar) as zf:
        return set(zf.namelist())


def test_py4j_jar_is_the_wheels() -> None:
    jar = jvm_shim.py4j_jar()
    assert jar.is_file() and jar.name.startswith("py4j") and jar.suffix == ".jar"
    import py4j.version

    assert py4j.version.__version__ in jar.name
    assert "py4j/GatewayServer.class" in names(jar)


@needs_jdk
def test_build_compiles_against_py4j_and_rebuilds_only_on_change(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "demo.jar"
    assert build.build_jar(out, src_dir=src) == out
    content = names(out)
    assert {"demo/Echo.class", "demo/inner/Probe.class", "META-INF/MANIFEST.MF", build.DIGEST_ENTRY} <= content
    assert not build.is_stale(out, src)
    first = _identity(out)
    build.build_jar(out, src_dir=src)
    assert _identity(out) == first  # up to date: untouched (a rebuild renames a new file into place)
    # a newer source with the same content (as unpacking a wheel leaves it) is not a reason to rebuild
    future = time.time() + 5
    os.utime(src / "demo" / "Echo.java", (future, future))
    assert not build.is_stale(out, src)
    build.build_jar(out, src_dir=src)
    assert _identity(out) == first
    # changed content: rebuilt
    (src / "demo" / "Extra.java").write_text("package demo; public class Extra {}\n")
    assert build.is_stale(out, src)
    build.build_jar(out, src_dir=src)
    assert "demo/Extra.class" in names(out)
    # a deleted source: rebuilt without its class
    (src / "demo" / "Extra.java").unlink()
    later = time.time() + 10
    os.utime(src / "demo", (later, later))
    build.build_jar(out, src_dir=src)
    assert "demo/Extra.class" not in names(out)
    assert [p.name for p in out.parent.iterdir()] == ["demo.jar"]  # no temporary files left


def test_build_without_the_jar_tool_uses_zipfile(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jdk: Jdk
) -> None:
    real = build.find_tool
    monkeypatch.setattr(build, "find_tool", lambda name: None if name == "jar" else real(name))
    out = build.build_jar(tmp_path / "z.jar", src_dir=src)
    with zipfile.ZipFile(out) as zf:
        assert zf.read("META-INF/MANIFEST.MF").startswith(b"Manifest-Version: 1.0")
        assert "demo/inner/Probe.class" in zf.namelist()
    # the JVM can load the classes of that jar
    probe = tmp_path / "Main.java"
    probe.write_text(
        "public class Main { public static void main(String[] a) { System.out.println(demo.Echo.class); } }"
    )
    cp = f"{out}{os.pathsep}{jvm_shim.py4j_jar()}"
    subprocess.run([jdk.javac, "-cp", cp, "-d", str(tmp_path / "m"), str(probe)], check=True, timeout=120)
    run = subprocess.run(
        [jdk.java, "-cp", f"{tmp_path / 'm'}{os.pathsep}{cp}", "Main"], capture_output=True, text=True, timeout=60
    )
    assert run.stdout.strip() == "interface demo.Echo", run.stderr


@needs_jdk
def test_build_errors_are_clear(src: Path, tmp_path: Path) -> None:
    (src / "demo" / "Broken.java").write_text("package demo; public class Broken { int x = ; }\n")
    with pytest.raises(build.JavaBuildError, match=r"(?s)javac failed .*Broken\.java:1: error"):
        build.build_jar(tmp_path / "b.jar", src_dir=src)
    assert not (tmp_path / "b.jar").exists()
    with pytest.raises(build.JavaBuildError, match="no Java sources"):
        build.build_jar(tmp_path / "e.jar", src_dir=tmp_path / "nothing-here")


def _isolate(monkeypatch: pytest.MonkeyPatch, src: Path, package_dir: Path) -> Path:
    """Point jvm_shim's build at ``src`` and a package directory of the test's own."""
    jar = package_dir / "lib" / build.JAR_NAME
    monkeypatch.setattr(build, "JAVA_SOURCES", src)
    monkeypatch.setattr(build, "JAVA_RESOURCES", package_dir / "no-resources")
    monkeypatch.setattr(build, "DEFAULT_JAR", jar)
    monkeypatch.setattr(build, "PACKAGE_DIR", package_dir)
    return jar


def test_jar_path_without_javac_is_a_storage_error(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _isolate(monkeypatch, src, tmp_path / "pkg")
    monkeypatch.setattr(build, "find_tool", lambda name: None)
    with pytest.raises(storage.UnexpectedError, match="no javac found"):
        jvm_shim.jar_path()


@needs_jdk
def test_jar_path_builds_in_place_then_reuses(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = _isolate(monkeypatch, src, tmp_path / "pkg")
    assert jvm_shim.jar_path() == jar
    assert "demo/Echo.class" in names(jar)
    built = _identity(jar)
    assert jvm_shim.jar_path() == jar
    assert _identity(jar) == built
    # without a JDK an existing jar is still returned
    monkeypatch.setattr(build, "find_tool", lambda name: None)
    assert jvm_shim.jar_path() == jar


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """``directory`` made read-only for this process for real: mode 0555, and for root (whom the mode does not
    stop) the immutable attribute too, which ``access(2)`` honours even for root."""
    directory.chmod(0o555)
    immutable = False
    try:
        if os.access(directory, os.W_OK):  # root
            done = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True, check=False)
            immutable = done.returncode == 0
            if not immutable:
                pytest.fail(
                    f"cannot make {directory} read-only for root (chattr +i: {done.stderr.strip()}); run the tests "
                    "as another user, or where root has CAP_LINUX_IMMUTABLE",
                    pytrace=False,
                )
        assert not os.access(directory, os.W_OK)
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
        directory.chmod(0o755)


@needs_jdk
def test_jar_path_uses_the_cache_when_the_package_is_read_only(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    jar = _isolate(monkeypatch, src, package)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with read_only(package):  # jar_path() finds out on its own
        got = jvm_shim.jar_path()
        assert got != jar and got.is_relative_to(tmp_path / "cache" / "distributedlog" / "jvm-shim")
        assert got.name == build.JAR_NAME and "demo/Echo.class" in names(got)
        assert not jar.exists() and list(package.iterdir()) == []
        assert jvm_shim.jar_path() == got  # and reuses it from there


@needs_jdk
@pytest.mark.skipif(not build.java_sources(), reason="no Java sources under jvm_shim/java yet")
def test_the_shim_sources_build(tmp_path: Path) -> None:
    """The real jar (what `make jvm` and `pip install .` build), into a temporary file."""
    out = build.build_jar(tmp_path / "shim.jar")
    assert "org/apache/distributedlog/shim/PythonGateway.class" in names(out)
    rc = subprocess.run(
        [sys.executable, "-m", "jvm_shim.build", str(tmp_path / "cli.jar")], capture_output=True, text=True, timeout=300
    )
    assert rc.returncode == 0, rc.stderr
    assert rc.stdout.strip() == str(tmp_path / "cli.jar") and rc.stderr == ""
