"""The JDK of the JVM tests, found by :func:`jvm_shim.build.find_tool` (``$JAVA_HOME/bin``, then ``PATH``), the
rule the build itself uses. Without one the tests that need it FAIL (they do not skip), naming what to install,
as the ZooKeeper and Ceph fixtures do: a suite that skips them passes while the JVM face is untested."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from jvm_shim import build


@dataclass(frozen=True)
class Jdk:
    """Paths of the JDK's compiler and launcher."""

    javac: str
    java: str


def require_jdk() -> Jdk:
    """The JDK's ``javac`` and ``java``; fails the calling test when either is missing."""
    try:
        return Jdk(build.require_tool("javac"), build.require_tool("java"))
    except build.JavaBuildError as e:
        missing = str(e)
    pytest.fail(f"this test needs a JDK: {missing}", pytrace=False)
