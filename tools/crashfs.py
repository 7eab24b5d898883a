"""A file system that forgets what was never made durable: machine crashes, full and failing disks in tests.

A pass-through FUSE file system (libfuse 3 through ``mfusepy``) over a directory, in the spirit of Jepsen's
lazyfs. Every change is applied to the directory at once (so reads, locks and ``mmap`` behave as on any file
system), and what POSIX does not yet promise to keep is remembered in undo logs:

- file data written since that file's last ``fsync``/``fdatasync`` (the overwritten bytes, or the size before an
  append or a truncation);
- names created, removed or renamed since their directory's last ``fsync`` (a rename: both directories). A
  removed name stays in a graveyard beside the directory until it is durably gone.

On command (see :class:`CrashFS`) it then:

- **crashes**: every change not durable is undone, data first then names, newest first; with ``torn=True`` a
  seeded prefix of each file's unsynced bytes is kept instead (a torn last write, as a power cut leaves it), torn
  only at a 512-byte sector boundary (a sector is written whole or not at all, as disks promise).
  Whoever still had the file system open is not stopped: kill those processes first (a machine crash kills
  everything), as :meth:`CrashFS.crash` checks;
- **fills up**: after ``after_bytes`` more bytes, writes are short then fail with ENOSPC, as do creates;
- **fails**: writes, or ``fsync``, of paths containing a given text fail with EIO. An ``fsync`` that failed
  leaves that file's unsynced writes doomed: a later ``fsync`` succeeds but does not save them (Linux marks the
  pages clean after a failed writeback: "Can Applications Recover from fsync Failures?", ATC'20).

Run ``python -m tools.crashfs serve STATE_DIR MOUNTPOINT`` (root; ``make fuse`` installs libfuse 3 and
``mfusepy``); tests use :class:`CrashFS`, which starts that process and speaks to its control socket
(``STATE_DIR/control.sock``, one JSON object per line each way).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONTROL = "control.sock"
DATA = "data"
GRAVEYARD = "graveyard"


@dataclass
class _DataUndo:
    """One unsynced change of a file's data: restore ``old`` at ``offset`` and cut the file to ``old_size``."""

    offset: int
    length: int  # bytes written (a truncation: 0)
    old_size: int
    old: bytes  # the bytes of [offset, min(offset + length, old_size)) before the change
    doomed: bool = False  # an fsync failed since: a later fsync does not save it
    lost: list[tuple[int, int]] = field(default_factory=list)  # doomed: byte ranges not rewritten since
    floor_size: int = 0  # doomed: the file size a later successful fsync made durable (0: none yet)


@dataclass
class _FileState:
    fd: int  # our own descriptor of the inode (its path may change or go)
    undo: list[_DataUndo] = field(default_factory=list)


@dataclass
class _NameUndo:
    """One change of names not yet durable: ``kind`` and what undoes it; durable once every directory of
    ``dirs`` was fsynced after it."""

    kind: str  # create | mkdir | unlink | rmdir | rename
    path: str  # relative to the data directory
    dirs: set[str]
    other: str = ""  # rename: the new path
    buried: str = ""  # unlink / rmdir / rename over a name: where the old entry waits in the graveyard
    buried_target: str = ""  # rename over an existing name: its graveyard entry


def _parent(rel: str) -> str:
    return os.path.dirname(rel.rstrip("/")) or "/"


class ForgetfulOperations:
    """The FUSE operations (mfusepy's high-level API); every call under one lock, so a crash sees no operation
    half-done."""

    use_ns = True

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / DATA
        self.graveyard = state_dir / GRAVEYARD
        self.root.mkdir(parents=True, exist_ok=True)
        self.graveyard.mkdir(parents=True, exist_ok=True)
        self.mutex = threading.RLock()
        self.files: dict[int, _FileState] = {}  # by inode
        self.names: list[_NameUndo] = []
        self.open_fds: dict[int, str] = {}  # our descriptor -> path at open (for "still open" reports)
        self.buried = 0
        self.enospc_after: int | None = None
        self.eio_write: str | None = None
        self.eio_fsync: str | None = None
        self.counts = {"writes": 0, "fsyncs": 0, "fsyncdirs": 0, "crashes": 0, "enospc": 0, "eio": 0}

    # --- paths ---------------------------------------------------------------------------------------
    def _real(self, path: str) -> str:
        return str(self.root) + path

    def _bury(self, rel: str) -> str:
        self.buried += 1
        grave = str(self.graveyard / f"g{self.buried}")
        os.rename(self._real(rel), grave)
        return grave

    # --- faults ----------------------------------------------------------------------------------------
    def _space(self, nbytes: int) -> int:
        """How many of ``nbytes`` fit (all of them unless the disk is set to fill up)."""
        if self.enospc_after is None:
            return nbytes
        fit = max(0, min(nbytes, self.enospc_after))
        self.enospc_after -= fit
        if fit == 0:
            self.counts["enospc"] += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return fit

    def _no_new_name(self) -> None:
        if self.enospc_after is not None and self.enospc_after <= 0:
            self.counts["enospc"] += 1
            raise OSError(errno.ENOSPC, "No space left on device")

    # --- data undo -------------------------------------------------------------------------------------
    def _file(self, fd: int) -> _FileState:
        ino = os.fstat(fd).st_ino
        state = self.files.get(ino)
        if state is None:
            state = self.files[ino] = _FileState(os.dup(fd))
        return state

    def _remember(self, fd: int, offset: int, length: int) -> None:
        state = self._file(fd)
        size = os.fstat(fd).st_size
        end = min(offset + length, size)
        old = os.pread(fd, end - offset, offset) if end > offset else b""
        state.undo.append(_DataUndo(offset, length, size, old))

    def _synced(self, fd: int, failed: bool) -> None:
        ino = os.fstat(fd).st_ino
        state = self.files.get(ino)
        if state is None:
            return
        if failed:
            for u in state.undo:
                if not u.doomed:
                    u.doomed = True
                    u.lost = [(u.offset, u.offset + u.length)] if u.length else []
            return
        # A page written again after the failed fsync is written back whole by this one (its current content);
        # the doomed bytes of pages not written since stay lost. The size now is durable.
        size = os.fstat(fd).st_size
        for i, d in enumerate(state.undo):
            if not d.doomed:
                continue
            for u in state.undo[i + 1 :]:
                if not u.doomed and u.length:
                    first = u.offset // PAGE * PAGE
                    last = -(-(u.offset + u.length) // PAGE) * PAGE
                    d.lost = _subtract(d.lost, first, last)
            d.lost = _subtract(d.lost, size, 2**63)
            d.floor_size = size
        state.undo = [u for u in state.undo if u.doomed and (u.lost or not u.floor_size)]
        if not state.undo:
            os.close(state.fd)
            del self.files[ino]

    # --- name undo -------------------------------------------------------------------------------------
    def _named(self, kind: str, path: str, *, other: str = "", buried: str = "", buried_target: str = "") -> None:
        dirs = {_parent(path)} | ({_parent(other)} if other else set())
        self.names.append(_NameUndo(kind, path, dirs, other, buried, buried_target))

    def _dir_synced(self, path: str) -> None:
        keep = []
        for n in self.names:
            n.dirs.discard(path)
            if n.dirs:
                keep.append(n)
                continue
            for grave in (n.buried, n.buried_target):  # durably gone
                if grave:
                    _remove(grave)
        self.names = keep

    # --- operations ------------------------------------------------------------------------------------
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_ino")
        out: dict[str, Any] = {k: getattr(st, k) for k in keys}
        out["st_atime"], out["st_mtime"], out["st_ctime"] = st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns
        return out

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise OSError(errno.EACCES, "Permission denied")
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self._real(path), ns=times) if times else os.utime(self._real(path))
        return 0

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._real(path))
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail")
        out = {k: getattr(sv, k) for k in (*keys, "f_flag", "f_namemax")}
        if self.enospc_after is not None:
            out["f_bavail"] = out["f_bfree"] = max(0, self.enospc_after) // max(1, sv.f_frsize)
        return out

    def open(self, path: str, flags: int) -> int:
        with self.mutex:
            # offsets come from the kernel: no O_APPEND on our descriptor (pwrite would ignore them); read and
            # write whatever the caller asked, as the undo logs read what a write overwrites
            drop = os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_ACCMODE
            fd = os.open(self._real(path), (flags & ~drop) | os.O_RDWR)
            self.open_fds[fd] = path
            if flags & os.O_TRUNC:
                self._truncate_fd(fd, 0)
            return fd

    def create(self, path: str, mode: int, fi: int | None = None) -> int:
        with self.mutex:
            self._no_new_name()
            fd = os.open(self._real(path), os.O_CREAT | os.O_RDWR | os.O_EXCL, mode)
            self._named("create", path)
            self.open_fds[fd] = path
            return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self.mutex:
            if self.eio_write is not None and self.eio_write in (path or self.open_fds.get(fh, "")):
                self.counts["eio"] += 1
                raise OSError(errno.EIO, "Input/output error")
            size = os.fstat(fh).st_size
            grows = max(0, offset + len(data) - size)
            fit = len(data) - grows + self._space(grows) if grows else len(data)
            data = data[:fit]
            self._remember(fh, offset, len(data))
            self.counts["writes"] += 1
            return os.pwrite(fh, data, offset)

    def _truncate_fd(self, fd: int, length: int) -> None:
        size = os.fstat(fd).st_size
        if length > size:
            self._space(length - size)
        state = self._file(fd)
        old = os.pread(fd, size - length, length) if size > length else b""
        state.undo.append(_DataUndo(min(length, size), 0, size, old))
        os.ftruncate(fd, length)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self.mutex:
            if fh is not None:
                self._truncate_fd(fh, length)
                return 0
            fd = os.open(self._real(path), os.O_RDWR)
            try:
                self._truncate_fd(fd, length)
            finally:
                os.close(fd)
            return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        with self.mutex:
            self.open_fds.pop(fh, None)
            os.close(fh)
            return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self.mutex:
            self.counts["fsyncs"] += 1
            failed = self.eio_fsync is not None and self.eio_fsync in (path or self.open_fds.get(fh, ""))
            self._synced(fh, failed)
            if failed:
                self.counts["eio"] += 1
                raise OSError(errno.EIO, "Input/output error")
            return 0

    def opendir(self, path: str) -> int:
        return 0

    def releasedir(self, path: str, fh: int) -> int:
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        with self.mutex:
            self.counts["fsyncdirs"] += 1
            if self.eio_fsync is not None and self.eio_fsync in path:
                self.counts["eio"] += 1
                raise OSError(errno.EIO, "Input/output error")
            self._dir_synced(path)
            return 0

    def mkdir(self, path: str, mode: int) -> int:
        with self.mutex:
            self._no_new_name()
            os.mkdir(self._real(path), mode)
            self._named("mkdir", path)
            return 0

    def symlink(self, target: str, source: str) -> int:
        with self.mutex:
            os.symlink(source, self._real(target))
            self._named("create", target)
            return 0

    def link(self, target: str, source: str) -> int:
        with self.mutex:
            os.link(self._real(source), self._real(target))
            self._named("create", target)
            return 0

    def unlink(self, path: str) -> int:
        with self.mutex:
            self._named("unlink", path, buried=self._bury(path))
            return 0

    def rmdir(self, path: str) -> int:
        with self.mutex:
            if os.listdir(self._real(path)):
                raise OSError(errno.ENOTEMPTY, "Directory not empty")
            self._named("rmdir", path, buried=self._bury(path))
            return 0

    def rename(self, old: str, new: str) -> int:
        with self.mutex:
            target = self._bury(new) if os.path.lexists(self._real(new)) else ""
            try:
                os.rename(self._real(old), self._real(new))
            except OSError:
                if target:
                    os.rename(target, self._real(new))
                raise
            self._named("rename", old, other=new, buried_target=target)
            return 0

    # --- control ---------------------------------------------------------------------------------------
    def crash(self, seed: int, torn: bool) -> dict[str, Any]:
        """Undo everything not durable (see the module docstring); returns counts of what was undone."""
        rng = random.Random(seed)
        with self.mutex:
            files = dropped = kept = 0
            for state in self.files.values():
                undo = state.undo
                total = sum(u.length for u in undo if not u.doomed)
                keep = rng.randint(0, total) if torn and total and rng.random() < 0.5 else 0
                # the unsynced writes in order, the first `keep` bytes of them kept (doomed ones never)
                for i in range(len(undo) - 1, -1, -1):
                    u = undo[i]
                    before = sum(x.length for x in undo[:i] if not x.doomed)
                    cut = 0 if u.doomed else max(0, min(u.length, keep - before))
                    if 0 < cut < u.length:  # a write is torn at a sector boundary: sectors are atomic
                        cut = max(0, (u.offset + cut) // SECTOR * SECTOR - u.offset)
                    _revert(state.fd, u, cut)
                    dropped += u.length if u.doomed else u.length - cut
                    kept += cut
                os.close(state.fd)
                files += 1
            self.files.clear()
            undone = skipped = 0
            for n in reversed(self.names):
                undone, skipped = (undone + 1, skipped) if self._undo_name(n) else (undone, skipped + 1)
            self.names.clear()
            for grave in list(self.graveyard.iterdir()):
                _remove(str(grave))
            self.counts["crashes"] += 1
            return {
                "files": files,
                "bytes_dropped": dropped,
                "bytes_torn_kept": kept,
                "names_undone": undone,
                "names_skipped": skipped,
            }

    def _undo_name(self, n: _NameUndo) -> bool:
        real = self._real(n.path)
        try:
            if n.kind in ("create", "mkdir"):
                if not os.path.lexists(real):
                    return False
                _remove(real)
            elif n.kind in ("unlink", "rmdir"):
                if os.path.lexists(real) or not os.path.isdir(os.path.dirname(real)):
                    return False
                os.rename(n.buried, real)
            elif n.kind == "rename":
                new = self._real(n.other)
                if not os.path.lexists(new) or os.path.lexists(real) or not os.path.isdir(os.path.dirname(real)):
                    return False
                os.rename(new, real)
                if n.buried_target:
                    os.rename(n.buried_target, new)
            return True
        except OSError:
            return False

    def control(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "crash":
            return self.crash(int(request.get("seed", 0)), bool(request.get("torn", False)))
        if op == "open":
            with self.mutex:
                return {"open": sorted(self.open_fds.values())}
        if op == "fault":
            with self.mutex:
                self.enospc_after = request.get("enospc_after")
                self.eio_write = request.get("eio_write")
                self.eio_fsync = request.get("eio_fsync")
                return {"ok": True}
        if op == "sync":  # everything so far durable (a test's setup before its crashes)
            with self.mutex:
                for state in self.files.values():
                    os.close(state.fd)
                self.files.clear()
                for grave in (g for n in self.names for g in (n.buried, n.buried_target) if g):
                    _remove(grave)
                self.names.clear()
                return {"ok": True}
        if op == "stats":
            with self.mutex:
                pending = sum(len(s.undo) for s in self.files.values())
                return {**self.counts, "pending_writes": pending, "pending_names": len(self.names)}
        raise ValueError(f"unknown control op {op!r}")


PAGE = 4096
#: The unit a disk writes atomically at a power cut (what databases assume: PostgreSQL keeps pg_control in one).
SECTOR = 512


def _subtract(ranges: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    out = []
    for a, b in ranges:
        if b <= start or a >= end:
            out.append((a, b))
            continue
        if a < start:
            out.append((a, start))
        if b > end:
            out.append((end, b))
    return out


def _revert(fd: int, u: _DataUndo, keep: int) -> None:
    """Undo one data change except its first ``keep`` bytes."""
    if u.doomed and u.floor_size:  # later writes made a size durable: what is lost reads as before, or zeros
        for a, b in u.lost:
            old = u.old[max(0, a - u.offset) : max(0, b - u.offset)]
            os.pwrite(fd, old + bytes(b - a - len(old)), a)
        return
    if u.length == 0:  # a truncation
        size = os.fstat(fd).st_size
        if u.old_size > size:
            os.pwrite(fd, u.old, u.offset)
        os.ftruncate(fd, u.old_size)
        return
    if keep >= u.length:  # kept whole: the file is as this write left it
        return
    start = u.offset + keep
    if start < u.offset + len(u.old):
        os.pwrite(fd, u.old[keep:], start)
    os.ftruncate(fd, max(u.old_size, start))


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _serve_control(ops: ForgetfulOperations, sock_path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        sock_path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen(8)

    def handle(conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as f:
            for line in f:
                try:
                    reply = ops.control(json.loads(line))
                except Exception as e:  # the reply carries it to the test
                    reply = {"error": f"{type(e).__name__}: {e}"}
                f.write(json.dumps(reply).encode() + b"\n")
                f.flush()

    while True:
        conn, _ = server.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def serve(state_dir: Path, mountpoint: Path) -> None:
    """Mount the file system (foreground) with its control socket in ``state_dir``."""
    os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")  # Debian's libfuse 2 may be there too
    import mfusepy

    ops = ForgetfulOperations(state_dir)
    threading.Thread(target=_serve_control, args=(ops, state_dir / CONTROL), daemon=True).start()
    mfusepy.FUSE(
        ops,
        str(mountpoint),
        foreground=True,
        nothreads=False,
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
        hard_remove=True,
        fsname="crashfs",
    )


class CrashFSError(RuntimeError):
    """The file system process failed, or refused a command."""


class CrashFS:
    """A mounted :mod:`tools.crashfs` file system, run as a child process (see the module docstring).

    ``with CrashFS(state_dir, mountpoint) as fs: ...``; ``fs.crash(seed)`` after killing every process that
    used it."""

    def __init__(self, state_dir: Path, mountpoint: Path, *, log: Path | None = None) -> None:
        self.state_dir, self.mountpoint = state_dir, mountpoint
        state_dir.mkdir(parents=True, exist_ok=True)
        mountpoint.mkdir(parents=True, exist_ok=True)
        self.log = log or state_dir / "crashfs.log"
        self._log_file = open(self.log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools.crashfs", "serve", str(state_dir), str(mountpoint)],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[1],
        )
        self._sock: socket.socket | None = None
        deadline = time.monotonic() + 30
        while not self._mounted() or not (state_dir / CONTROL).exists():
            if self.proc.poll() is not None:
                raise CrashFSError(f"crashfs exited ({self.proc.returncode}) before mounting; see {self.log}")
            if time.monotonic() > deadline:
                self.stop()
                raise CrashFSError(f"crashfs did not mount {mountpoint} within 30s; see {self.log}")
            time.sleep(0.05)

    def _mounted(self) -> bool:
        target = str(self.mountpoint.resolve())
        with open("/proc/self/mounts") as f:
            return any(line.split()[1] == target for line in f)

    def _call(self, **request: Any) -> dict[str, Any]:
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.connect(str(self.state_dir / CONTROL))
            self._reader = self._sock.makefile("rb")
        self._sock.sendall(json.dumps(request).encode() + b"\n")
        line = self._reader.readline()
        if not line:
            raise CrashFSError(f"crashfs closed its control socket; see {self.log}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise CrashFSError(f"crashfs refused {request}: {reply['error']}")
        return reply

    def open_files(self) -> list[str]:
        return list(self._call(op="open")["open"])

    def crash(self, seed: int, *, torn: bool = False, wait_s: float = 10.0) -> dict[str, Any]:
        """Forget everything not durable. Waits up to ``wait_s`` for killed processes' files to be closed.

        :raises CrashFSError: files are still open after ``wait_s`` (a process that uses the file system is
            still running), or the file system failed."""
        deadline = time.monotonic() + wait_s
        while (still := self.open_files()) and time.monotonic() < deadline:
            time.sleep(0.02)
        if still:
            raise CrashFSError(f"files still open on {self.mountpoint} after {wait_s:g}s: {still[:5]}")
        return self._call(op="crash", seed=seed, torn=torn)

    def fault(
        self, *, enospc_after: int | None = None, eio_write: str | None = None, eio_fsync: str | None = None
    ) -> None:
        """Set the faults (each ``None``: off): the disk full after ``enospc_after`` more bytes; EIO on writes
        (on fsyncs) of paths containing ``eio_write`` (``eio_fsync``; ``""`` matches every path)."""
        self._call(op="fault", enospc_after=enospc_after, eio_write=eio_write, eio_fsync=eio_fsync)

    def sync(self) -> None:
        """Make everything written so far durable (a setup's end)."""
        self._call(op="sync")

    def stats(self) -> dict[str, Any]:
        return self._call(op="stats")

    def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True, check=False)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_file.close()

    def __enter__(self) -> CrashFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.crashfs", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="mount STATE_DIR/data at MOUNTPOINT (foreground)")
    s.add_argument("state_dir", type=Path)
    s.add_argument("mountpoint", type=Path)
    args = p.parse_args(argv)
    serve(args.state_dir, args.mountpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
