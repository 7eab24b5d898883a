"""Ceph's RADOS binding from an interpreter that cannot ``import rados`` by itself (a user's own virtualenv, a
Spark worker's Python): the storage core finds Debian's file, loads only it, and writes to a real cluster."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from storage.errors import SegmentStoreError
from storage.segstore._rados_binding import find_binding
from storage.segstore.rados import RadosLocation

ROOT = Path(__file__).resolve().parents[3]

#: Runs in a fresh interpreter whose sys.path has no directory that holds a rados module (what `make ceph`
#: adds to .venv, or dist-packages), as in a virtualenv made without it.
CHILD = r"""
import importlib.util, json, sys
sys.path[:] = [p for p in sys.path if "debian-rados" not in p and "dist-packages" not in p]
assert importlib.util.find_spec("rados") is None, "rados is importable without the loader"
loc = json.loads(sys.argv[1])
from storage.segstore.rados import RadosLocation, RadosSegmentStore
store = RadosSegmentStore(RadosLocation(**loc))
writer = store.create_ledger()
writer.append(b"from a virtualenv without python3-rados on its path")
lid = writer.ledger_id
writer.close()
data = list(store.read_entries(lid, 0, 0))
import rados  # the loaded module is registered: a plain import now finds the same one
print(json.dumps({"file": rados.__file__, "entries": len(data), "dist": [p for p in sys.path if "dist-packages" in p]}))
store.delete_ledger(lid)
store.close()
"""


def test_a_virtualenv_without_the_binding_on_its_path_writes_to_ceph(rados_location: RadosLocation) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(dataclasses.asdict(rados_location))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["entries"] == 1
    assert Path(result["file"]).resolve() == find_binding().resolve()
    assert result["dist"] == []  # Debian's dist-packages was never put on the path


def test_a_binding_for_another_python_is_refused_naming_both_versions(tmp_path: Path) -> None:
    other = tmp_path / "rados.cpython-39-x86_64-linux-gnu.so"
    other.write_bytes(b"\x7fELF")  # never loaded: its ABI tag already tells it is not for this interpreter
    with pytest.raises(SegmentStoreError) as err:
        find_binding([other])
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    msg = str(err.value)
    assert f"{other} (Python 3.9)" in msg and f"is Python {here}" in msg and "Run with a Python 3.9" in msg
    assert err.value.retriable is False


def test_no_binding_at_all_names_the_package_to_install() -> None:
    with pytest.raises(SegmentStoreError, match="apt-get install python3-rados"):
        find_binding([])


def test_the_environment_variable_must_name_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DLOG_RADOS_BINDING", str(tmp_path / "nope.so"))
    with pytest.raises(SegmentStoreError, match=r"DLOG_RADOS_BINDING names .*nope\.so, which is not a file"):
        find_binding()
