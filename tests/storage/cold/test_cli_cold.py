"""``dlog`` with a cold store: ``bind --cold`` (a failure creates nothing), ``offload``, ``show`` (where each segment
lives), ``purge`` (hot copies only), ``restore`` after the hot store is lost — the CLI's ``run()`` in this process
(tests/cli/conftest.py's ``dlog``), with S3 credentials from the standard AWS variables."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.cli.conftest import Dlog, cli_env, dlog  # noqa: F401
from tests.storage.test_binding import _exists
from tests.zk import ZooKeeperServer


def _tiers(show_out: str) -> list[str]:
    return [line.rsplit("tier=", 1)[1] for line in show_out.splitlines() if "\t: " in line]


def test_bind_offload_show_purge_restore(
    dlog: Dlog,  # noqa: F811
    zk_server: ZooKeeperServer,
    zk_chroot: str,
    tmp_path: Path,
    cold_kind: str,
    cold_uri: str,
    cold_conf: dict[str, Any],
) -> None:
    env = {}
    if cold_kind == "s3":  # the AWS variables, not conf keys
        env = {
            "AWS_ACCESS_KEY_ID": cold_conf["coldStoreAccessKey"],
            "AWS_SECRET_ACCESS_KEY": cold_conf["coldStoreSecretKey"],
        }
    conf = tmp_path / "dl.conf"
    conf.write_text(
        "logSegmentRollingMinutes=0\nmaxLogSegmentBytes=300\noffloadThresholdHours=-1\n"
        + "coldStoreRequestTimeoutSeconds=3\ncoldStoreMaxAttempts=2\n"
    )
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    segments = tmp_path / "segments"
    base = ["--uri", uri, "--conf", str(conf)]

    for cmd in ("offload", "restore"):
        assert dlog(cmd, "--help").ok().out.startswith(f"Usage: dlog {cmd} ")
    bad = cold_uri.replace("s3://dltest/", "s3://nobucket/") if cold_kind == "s3" else "file:///proc/nope/cold"
    dlog(*base, "bind", "--segments", f"file://{segments}", "--cold", bad, env=env).error(1, "cold store")
    assert not _exists(zk_server, zk_chroot) and not segments.exists()  # nothing half-bound

    dlog(*base, "bind", "--segments", f"file://{segments}", "--cold", cold_uri, env=env).ok()
    lines = [f"line {i:03d} " + "x" * 40 for i in range(60)]
    for chunk in range(3):
        dlog(
            *base, "write", "cli", "--create", input="\n".join(lines[chunk * 20 : chunk * 20 + 20]) + "\n", env=env
        ).ok()
    dlog(*base, "offload", env=env).error(2, "--all")
    offloaded = dlog(*base, "offload", "--all", env=env).ok()
    assert any(line.startswith("offloaded cli lssn=1 ") for line in offloaded.lines), offloaded.out
    n_segments = sum(1 for line in offloaded.lines if line.startswith("offloaded cli "))
    assert n_segments >= 3
    assert dlog(*base, "offload", "cli", env=env).ok().lines == [
        f"cli: 0 segments offloaded (0 bytes), {n_segments} already"
    ]
    assert _tiers(dlog(*base, "show", "cli", env=env).ok().out) == ["both"] * n_segments

    dlog(*base, "purge", "cli", "--older-than", "0ms", env=env).ok()
    assert _tiers(dlog(*base, "show", "cli", env=env).ok().out) == ["cold"] * (n_segments - 1) + ["both"]
    dumped = dlog(*base, "dump", "cli", env=env).ok().out
    assert [line for line in dumped.splitlines() if line.startswith("line ")] == lines

    # the purged hot copies stay purged: restore brings back what was lost, not what was deleted on purpose
    kept = dlog(*base, "restore", "--all", env=env).ok()
    assert f"cli: 0 segments restored (0 bytes), 1 present, {n_segments - 1} purged on purpose" in kept.out, kept.out
    assert _tiers(dlog(*base, "show", "cli", env=env).ok().out) == ["cold"] * (n_segments - 1) + ["both"]

    shutil.rmtree(segments)  # the hot store is lost
    segments.mkdir()
    restored = dlog(*base, "restore", "--all", env=env).ok()
    assert sum(1 for line in restored.lines if line.startswith("restored cli ")) == 1  # the one that was lost
    restored = dlog(*base, "restore", "--all", "--purged", env=env).ok()
    assert sum(1 for line in restored.lines if line.startswith("restored cli ")) == n_segments - 1
    assert _tiers(dlog(*base, "show", "cli", env=env).ok().out) == ["both"] * n_segments
    dumped = dlog(*base, "dump", "cli", env=env).ok().out
    assert [line for line in dumped.splitlines() if line.startswith("line ")] == lines
