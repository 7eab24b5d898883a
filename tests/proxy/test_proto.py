"""The committed gRPC stubs are exactly what `make proto` generates from dl_proxy/proto/distributedlog.proto."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTO = Path("dl_proxy/proto/distributedlog.proto")
GENERATED = (
    "distributedlog_pb2.py",
    "distributedlog_pb2.pyi",
    "distributedlog_pb2_grpc.py",
    "distributedlog_pb2_grpc.pyi",
)


def test_committed_stubs_match_a_fresh_generation(tmp_path: Path) -> None:
    (tmp_path / PROTO.parent).mkdir(parents=True)
    shutil.copy(ROOT / PROTO, tmp_path / PROTO)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.", "--grpc_python_out=.",
         "--mypy_out=.", "--mypy_grpc_out=.", str(PROTO)],
        cwd=tmp_path, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    stale = [
        name
        for name in GENERATED
        if (tmp_path / PROTO.parent / name).read_bytes() != (ROOT / PROTO.parent / name).read_bytes()
    ]
    assert not stale, f"run `make proto`: {stale} differ from what {PROTO} generates"


def test_status_codes_are_distributedlogs() -> None:
    from dl_proxy.proto import distributedlog_pb2 as pb

    # DistributedLog's numbers (distributedlog-protocol service.thrift); storage.errors carries the same codes
    expected = {"SUCCESS": 200, "FOUND": 302, "REQUEST_DENIED": 403, "TOO_LARGE_RECORD": 413,
                "SERVICE_UNAVAILABLE": 503, "LOG_NOT_FOUND": 510, "STREAM_UNAVAILABLE": 515, "OVER_CAPACITY": 517,
                "STREAM_NOT_READY": 518, "CHECKSUM_FAILED": 523, "TOO_MANY_STREAMS": 524}  # fmt: skip
    assert {name: pb.StatusCode.Value(name) for name in expected} == expected
