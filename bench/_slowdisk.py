"""A real slow disk for benchmarks: an ext4 file system on a loop device whose writes the kernel
throttles (cgroup v1 ``blkio.throttle.write_bps_device``), so ``fdatasync`` really takes as long as a
disk of that speed would. Needs root, ``losetup``, ``mkfs.ext4`` and the blkio controller;
:func:`unavailable` says why not when one is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BLKIO = Path("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device")


def unavailable() -> str | None:
    """None if a throttled loop device can be made here, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root (losetup, mount, blkio throttling)"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    if not BLKIO.exists():
        return f"needs the cgroup v1 blkio controller ({BLKIO} is missing)"
    return None


def _run(*cmd: str) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


@contextmanager
def slow_disk(size_mib: int, write_bytes_per_s: int, parent: Path | None = None) -> Iterator[Path]:
    """Mount a fresh ext4 of ``size_mib`` whose device writes at most ``write_bytes_per_s``; yield the
    mount point; unthrottle, unmount and free everything on exit.

    Raises:
        RuntimeError: a step failed (see :func:`unavailable` first).
    """
    work = Path(tempfile.mkdtemp(prefix="dl-slowdisk-", dir=parent))
    image, mount = work / "image", work / "mnt"
    mount.mkdir()
    with open(image, "wb") as f:
        f.truncate(size_mib << 20)
    device = _run("losetup", "--find", "--show", str(image))
    mounted = throttled = False
    majmin = ""
    try:
        _run("mkfs.ext4", "-q", device)
        _run("mount", device, str(mount))
        mounted = True
        majmin = _run("lsblk", "-dno", "MAJ:MIN", device).strip()
        BLKIO.write_text(f"{majmin} {write_bytes_per_s}\n")
        throttled = True
        yield mount
    finally:
        if throttled:
            BLKIO.write_text(f"{majmin} 0\n")  # 0 removes the rule
        if mounted:
            _run("umount", str(mount))
        _run("losetup", "--detach", device)
        shutil.rmtree(work, ignore_errors=True)
