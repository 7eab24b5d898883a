"""The tree of the embedded metadata store, as SQL: schema, argument checks, and the operations
run inside one transaction of :class:`~storage.metastore.sqlite.SqliteMetadataStore`.

Schema::

    nodes(path TEXT PRIMARY KEY, parent TEXT, name TEXT, data BLOB, version INT, ctime INT, mtime INT)
        index (parent, name)  -- children sorted by name (UTF-8 byte order = code point order)
    changes(seq INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT)
        -- one row per changed node, and per parent whose children changed, written in the
        -- mutation's transaction and followed by the watch thread; the newest CHANGES_KEPT rows are kept

Every operation appends the paths it changed to ``changed``; the caller logs them.
"""

from __future__ import annotations

import re
import sqlite3
import time

from storage.errors import (
    DLError,
    InvalidArgumentError,
    MetadataError,
    MetadataVersionError,
    NodeExistsError,
    NoNodeError,
)
from storage.metastore.base import ANY_VERSION, Check, Create, Delete, Op, SetData

SCHEMA_VERSION = 1
#: Rows of the change log kept; pruned whenever a seq that is a multiple of PRUNE_EVERY is written.
CHANGES_KEPT = 10000
PRUNE_EVERY = 1000

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS nodes (path TEXT PRIMARY KEY, parent TEXT, name TEXT NOT NULL,"
    " data BLOB NOT NULL, version INTEGER NOT NULL, ctime INTEGER NOT NULL, mtime INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes (parent, name)",
    "CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS changes_by_path ON changes (path, seq)",
)
# ZooKeeper's PathUtils.validatePath forbids these (Java surrogates = every code point above U+FFFF).
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


# --- argument checks ----------------------------------------------------------------------
def check_path(path: object) -> str:
    """Validate a node path (absolute, no trailing slash except ``/``, no empty, ``.`` or ``..``
    components, no character ZooKeeper rejects) and return it.

    Raises:
        InvalidArgumentError: the path is malformed or not a string.
    """
    if not isinstance(path, str):
        raise InvalidArgumentError(f"path must be a str, not {type(path).__name__}")
    if path == "/":
        return path
    if not path.startswith("/") or path.endswith("/"):
        raise InvalidArgumentError(f"path must be absolute with no trailing slash: {path!r}")
    if any(part in ("", ".", "..") for part in path[1:].split("/")):
        raise InvalidArgumentError(f"path has an empty, '.' or '..' component: {path!r}")
    if _BAD_CHARS.search(path):
        raise InvalidArgumentError(f"path has a forbidden character: {path!r}")
    return path


def check_data(data: object) -> bytes:
    """Node data as bytes (bytes-like accepted).

    Raises:
        InvalidArgumentError: not bytes-like.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"data must be bytes, not {type(data).__name__}")
    return bytes(data)


def check_version(version: object) -> int:
    """An expected version (``-1`` = any).

    Raises:
        InvalidArgumentError: not an int >= -1.
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < ANY_VERSION:
        raise InvalidArgumentError(f"version must be an int >= -1, not {version!r}")
    return version


def check_ops(ops: object) -> list[Op]:
    """Validate the operations of a multi before anything is applied.

    Raises:
        InvalidArgumentError: not a sequence of operations, a malformed operation, or a Delete of the root.
    """
    if isinstance(ops, (str, bytes)) or not hasattr(ops, "__iter__"):
        raise InvalidArgumentError(f"ops must be a sequence of operations, not {type(ops).__name__}")
    checked: list[Op] = []
    for op in ops:
        if isinstance(op, Create):
            checked.append(Create(check_path(op.path), check_data(op.data)))
        elif isinstance(op, SetData):
            checked.append(SetData(check_path(op.path), check_data(op.data), check_version(op.version)))
        elif isinstance(op, Delete):
            if check_path(op.path) == "/":
                raise InvalidArgumentError("the root cannot be deleted")
            checked.append(Delete(op.path, check_version(op.version)))
        elif isinstance(op, Check):
            checked.append(Check(check_path(op.path), check_version(op.version)))
        else:
            raise InvalidArgumentError(f"not a metadata operation: {op!r}")
    return checked


def parent_of(path: str) -> str:
    """The parent path (the root is its own parent)."""
    return path.rsplit("/", 1)[0] or "/"


# --- inside a transaction -----------------------------------------------------------------
def init_schema(c: sqlite3.Connection, db_path: str) -> None:
    """Create the tables and the root node if missing.

    Raises:
        MetadataError: the file holds a schema of another version.
    """
    found = int(c.execute("PRAGMA user_version").fetchone()[0])
    if found not in (0, SCHEMA_VERSION):
        raise MetadataError(f"{db_path}: unsupported metadata schema version {found}")
    for stmt in _SCHEMA:
        c.execute(stmt)
    now = _now_ms()
    c.execute("INSERT OR IGNORE INTO nodes VALUES ('/', NULL, '', x'', 0, ?, ?)", (now, now))
    if found == 0:
        c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def log_changes(c: sqlite3.Connection, changed: list[str]) -> None:
    """Append the changed paths (deduplicated) to the change log, pruning it now and then."""
    for p in dict.fromkeys(changed):
        seq = c.execute("INSERT INTO changes (path) VALUES (?)", (p,)).lastrowid
        if seq is not None and seq % PRUNE_EVERY == 0:
            c.execute("DELETE FROM changes WHERE seq <= ?", (seq - CHANGES_KEPT,))


def version_of(c: sqlite3.Connection, path: str) -> int | None:
    """The node's version, or None."""
    row = c.execute("SELECT version FROM nodes WHERE path = ?", (path,)).fetchone()
    return None if row is None else int(row[0])


def checked_version(c: sqlite3.Connection, path: str, version: int) -> int:
    """The node's current version, checked against ``version``.

    Raises:
        NoNodeError, MetadataVersionError.
    """
    current = version_of(c, path)
    if current is None:
        raise NoNodeError(f"no node {path}")
    if version != ANY_VERSION and version != current:
        raise MetadataVersionError(f"node {path} is at version {current}, not {version}")
    return current


def do_create(c: sqlite3.Connection, path: str, data: bytes, make_parents: bool, changed: list[str]) -> None:
    """Create ``path`` (and missing ancestors with ``make_parents``).

    Raises:
        NodeExistsError, NoNodeError (parent missing).
    """
    if version_of(c, path) is not None:
        raise NodeExistsError(f"node {path} exists")
    missing = [path]
    while version_of(c, parent_of(missing[-1])) is None:
        if not make_parents:
            raise NoNodeError(f"parent {parent_of(path)} of {path} does not exist")
        missing.append(parent_of(missing[-1]))
    now = _now_ms()
    for p in reversed(missing):
        c.execute(
            "INSERT INTO nodes VALUES (?, ?, ?, ?, 0, ?, ?)",
            (p, parent_of(p), p.rsplit("/", 1)[1], data if p == path else b"", now, now),
        )
        changed += [p, parent_of(p)]


def do_set(c: sqlite3.Connection, path: str, data: bytes, version: int, changed: list[str]) -> int:
    """Replace the data of ``path``; returns the new version.

    Raises:
        NoNodeError, MetadataVersionError.
    """
    new = checked_version(c, path, version) + 1
    c.execute("UPDATE nodes SET data = ?, version = ?, mtime = ? WHERE path = ?", (data, new, _now_ms(), path))
    changed.append(path)
    return new


def do_delete(c: sqlite3.Connection, path: str, version: int, recursive: bool, changed: list[str]) -> None:
    """Delete ``path`` (with ``recursive``, its subtree).

    Raises:
        NoNodeError, MetadataVersionError, MetadataError (children present, not recursive).
    """
    checked_version(c, path, version)
    lo, hi = path + "/", path + "0"  # '0' follows '/': [lo, hi) is exactly the subtree below path
    below = [r[0] for r in c.execute("SELECT path FROM nodes WHERE path >= ? AND path < ?", (lo, hi))]
    if below and not recursive:
        raise MetadataError(f"node {path} has children")
    c.execute("DELETE FROM nodes WHERE path = ? OR (path >= ? AND path < ?)", (path, lo, hi))
    changed += [path, parent_of(path), *below]


def do_multi(c: sqlite3.Connection, ops: list[Op], changed: list[str]) -> None:
    """Apply checked operations in order; the first failure propagates (the caller rolls back).

    Raises:
        NodeExistsError, NoNodeError, MetadataVersionError, MetadataError (Delete with children).
    """
    for i, op in enumerate(ops):
        try:
            if isinstance(op, Create):
                do_create(c, op.path, op.data, False, changed)
            elif isinstance(op, SetData):
                do_set(c, op.path, op.data, op.version, changed)
            elif isinstance(op, Delete):
                do_delete(c, op.path, op.version, False, changed)
            else:
                checked_version(c, op.path, op.version)
        except DLError as e:
            e.args = (f"multi op #{i} ({type(op).__name__} {op.path}): {e}",)
            raise


def _now_ms() -> int:
    return int(time.time() * 1000)
