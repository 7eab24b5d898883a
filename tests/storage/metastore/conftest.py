"""ZooKeeper fixtures for the metadata store tests (see tests/zk.py).

Once tests/conftest.py imports these names itself, this file should go (two conftests importing
them would give two session servers).
"""

from tests.zk import pytest_runtest_makereport, zk_chroot, zk_server  # noqa: F401
