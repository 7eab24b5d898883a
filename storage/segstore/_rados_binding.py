"""Finding Ceph's Python binding of librados (the ``rados`` module) from any interpreter.

Ceph ships its binding only as a distribution package (Debian's ``python3-rados``: one C extension,
``/usr/lib/python3/dist-packages/rados.cpython-311-x86_64-linux-gnu.so``); there is no PyPI package. Only the
distribution's own ``python3`` sees it. A virtualenv made by another interpreter of the same version (pyenv's,
a user's own) has the same ABI and can load the file; it only has to find it. Putting the whole of
``dist-packages`` on ``sys.path`` would shadow the virtualenv's packages with Debian's (numpy, pyarrow...), so
:func:`load_rados` loads that one file and nothing else:

1. a plain ``import rados`` (a system interpreter, ``make ceph``'s ``.pth``, a user's own arrangement);
2. else the file named by ``$DLOG_RADOS_BINDING``, or the first ``rados*.so`` of the distributions' directories
   (Debian/Ubuntu ``/usr/lib/python3/dist-packages``, Fedora/RHEL ``/usr/lib64/python3.X/site-packages``) whose ABI
   tag this interpreter accepts (:data:`importlib.machinery.EXTENSION_SUFFIXES`), loaded with
   :class:`importlib.machinery.ExtensionFileLoader` as the module ``rados`` (and registered in ``sys.modules``, so a
   later ``import rados`` anywhere in the process gets the same module);
3. else one :class:`~storage.errors.SegmentStoreError` saying what was found: a binding built for another Python
   (naming both versions), or none at all (naming the package to install).

The same holds in Spark's Python workers: they run this code in whatever interpreter ``PYSPARK_PYTHON`` names.
"""

from __future__ import annotations

import glob
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
from pathlib import Path
from types import ModuleType

from storage.errors import SegmentStoreError

__all__ = ["BINDING_ENV", "find_binding", "load_rados"]

#: Environment variable naming the binding's file explicitly (a ``rados*.so``).
BINDING_ENV = "DLOG_RADOS_BINDING"
#: Where distributions install it (globs).
SEARCH = (
    "/usr/lib/python3/dist-packages/rados*.so",
    "/usr/lib/python3.*/dist-packages/rados*.so",
    "/usr/lib64/python3.*/site-packages/rados*.so",
    "/usr/lib/python3.*/site-packages/rados*.so",
    "/usr/local/lib/python3.*/dist-packages/rados*.so",
)
_TAG = re.compile(r"\.cpython-(\d)(\d+)")
_lock = threading.Lock()


def _python_of(path: Path) -> str | None:
    """The Python version a ``rados.cpython-311-...so`` file was built for ("3.11"), or None (no tag)."""
    m = _TAG.search(path.name)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _loadable(path: Path) -> bool:
    """This interpreter accepts ``path``'s extension suffix (same version and platform tag, or abi3/plain)."""
    name = path.name
    return any(name == "rados" + suffix for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def find_binding(candidates: list[Path] | None = None) -> Path:
    """The binding this interpreter can load.

    Args:
        candidates: files to choose from (default: ``$DLOG_RADOS_BINDING``, else the distributions' directories).

    Raises:
        SegmentStoreError: none is loadable: built for another Python (both versions named), or none is installed.
    """
    if candidates is None:
        named = os.environ.get(BINDING_ENV)
        if named:
            candidates = [Path(named)]
            if not candidates[0].is_file():
                raise SegmentStoreError(f"${BINDING_ENV} names {named}, which is not a file")
        else:
            candidates = [Path(p) for pattern in SEARCH for p in sorted(glob.glob(pattern))]
    for path in candidates:
        if _loadable(path):
            return path
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if candidates:
        built = ", ".join(f"{p} (Python {_python_of(p) or 'unknown'})" for p in candidates)
        raise SegmentStoreError(
            f"Ceph's RADOS Python binding on this machine is built for another Python: {built}; this interpreter "
            f"({sys.executable}) is Python {here}. Run with a Python {_python_of(candidates[0]) or 'of that version'} "
            "(e.g. a virtualenv made from it), or install a binding built for Python " + here
        )
    raise SegmentStoreError(
        "the Ceph RADOS Python binding (module rados) is not installed: install the distribution's package "
        f"(Debian/Ubuntu: apt-get install python3-rados; Fedora/RHEL: python3-rados), or name its file in "
        f"${BINDING_ENV}"
    )


def load_rados() -> ModuleType:
    """The ``rados`` module: imported normally if possible, else loaded from the distribution's file
    (see the module docstring).

    Raises:
        SegmentStoreError: it cannot be found or loaded (the message says why and what to do).
    """
    with _lock:
        loaded = sys.modules.get("rados")
        if loaded is not None:
            return loaded
        try:
            return importlib.import_module("rados")
        except ImportError:
            pass
        path = find_binding()
        loader = importlib.machinery.ExtensionFileLoader("rados", str(path))
        spec = importlib.util.spec_from_file_location("rados", str(path), loader=loader)
        if spec is None:  # pragma: no cover - a file with an extension suffix always has a spec
            raise SegmentStoreError(f"cannot load the RADOS binding {path}")
        module = importlib.util.module_from_spec(spec)
        try:
            loader.exec_module(module)
        except ImportError as e:  # e.g. librados itself is missing (python3-rados without its library)
            raise SegmentStoreError(f"cannot load the RADOS binding {path}: {e}") from e
        sys.modules["rados"] = module
        return module
