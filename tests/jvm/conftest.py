"""Fixtures of the JVM tests."""

from __future__ import annotations

import pytest

from tests.jvm.jdk import Jdk, require_jdk


@pytest.fixture(scope="session")
def jdk() -> Jdk:
    """The JDK (``javac``, ``java``) found by ``jvm_shim.build``'s rule; FAILS (does not skip) without one."""
    return require_jdk()
