"""JVM shim benchmark: Java async writes through the py4j gateway ÷ the Python async writer, same run.

Run::

    .venv/bin/python bench/bench_jvm.py [--records N (100,000)] [--sizes 1024,100] [--reps 3] [--dir PATH]

For each record size: the Python async writer (``storage``, in this process) writes N records to a fresh
log of an embedded namespace, once untimed (warm-up) and then ``--reps`` times timed; then one JVM runs
``tests/jvm/java/ShimBench.java`` (compiled here against :func:`jvm_shim.jar_path`) on the same namespace: it
starts its own gateway process (this interpreter), writes N records untimed (warm-up: JIT, gateway, py4j
connections), then ``--reps`` timed rounds of N records with ``AsyncLogWriter.write`` (one call per record; the
shim batches them across the bridge, over the gateway's data channel), each on a fresh log; then the same
JVM program again with ``-Ddlog.shim.dataChannel=false`` (every record byte through py4j's base64 text), to
show what the data channel is for. Both sides use the same writer configuration
(:func:`bench._common.writer_conf`: 64 KiB output buffer, no periodic or immediate flush, one segment) and the
same payload. Prints one markdown table: medians of the timed rounds and their ratios (target >= 0.5), and how
long the gateway process takes to start (``python -m jvm_shim`` spawned until its ``GATEWAY`` line, median of
``--starts``; the tests only require that it starts).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

# _common first: it puts the checkout on sys.path for `storage`
from _common import (
    REPO,
    fmt_bytes,
    make_base,
    median,
    remove_base,
    timed_async_writes,
    writer_conf,
    yes_no,
)

import storage
from jvm_shim import build

TARGET = 0.5
JAVA_BENCH = REPO / "tests" / "jvm" / "java" / "ShimBench.java"


def payload(size: int) -> bytes:
    """The bytes ShimBench writes: byte i is i % 256."""
    return bytes(i % 256 for i in range(size))


def python_rates(uri: str, records: int, size: int, reps: int) -> list[float]:
    """Records/s of the Python async writer: one warm-up round, then ``reps`` timed rounds, fresh logs."""
    data = payload(size)
    rates: list[float] = []
    with storage.open_namespace(uri, writer_conf()) as ns:
        for rep in range(reps + 1):
            recs = [storage.LogRecord(t, data) for t in range(1, records + 1)]
            with ns.open_log(f"py-{size}-{rep}") as dlm:
                aw = dlm.open_async_writer()
                try:
                    seconds, _ = timed_async_writes(aw, recs)
                finally:
                    aw.close()
            if rep > 0:
                rates.append(records / seconds)
    return rates


def compile_bench(out: Path) -> str:
    """Compile ShimBench against the shim jar; the classpath to run it with."""
    import jvm_shim

    jar = str(jvm_shim.jar_path())
    javac = build.require_tool("javac")  # the build's rule for finding the JDK
    subprocess.run([javac, "--release", "17", "-cp", jar, "-d", str(out), str(JAVA_BENCH)], check=True)
    return os.pathsep.join([jar, str(jvm_shim.py4j_jar()), str(out)])


def java_rates(
    classpath: str, uri: str, records: int, size: int, reps: int, *, data_channel: bool = True
) -> list[float]:
    """Records/s of ShimBench's timed rounds (after its warm-up round in the same JVM); records travel over
    the gateway's data channel, or over py4j alone (``data_channel=False``)."""
    env = dict(os.environ)
    env["DLOG_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    conf = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in writer_conf().items()]
    jvm = [] if data_channel else ["-Ddlog.shim.dataChannel=false"]
    name = f"java-{size}-{'channel' if data_channel else 'py4j'}"
    java = build.require_tool("java")
    cmd = [java, *jvm, "-cp", classpath, "ShimBench", uri, name, str(records), str(size), str(reps), *conf]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    rates = [float(line.split()[4]) for line in p.stdout.splitlines() if line.startswith("RATE ")]
    if p.returncode != 0 or len(rates) != reps:
        raise SystemExit(f"ShimBench failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return rates


def gateway_starts(uri: str, starts: int) -> list[float]:
    """Seconds from spawning ``python -m jvm_shim --uri URI --port 0`` to its ``GATEWAY`` line, ``starts`` times
    (each process then stopped with SIGTERM)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.pop("DLOG_GATEWAY_TOKEN", None)
    seconds: list[float] = []
    for _ in range(starts):
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "jvm_shim", "--uri", uri, "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            seconds.append(time.perf_counter() - t0)
            if not line.startswith("GATEWAY "):
                raise SystemExit(
                    f"the gateway did not start: {line!r} {proc.stderr.read().decode() if proc.stderr else ''}"
                )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    return seconds


def _cell(rate: float, size: int) -> str:
    return f"{rate:,.0f} rec/s ({rate * size / 1e6:,.1f} MB/s)"


Row = tuple[int, list[float], list[float], list[float]]  # size, Python, Java (data channel), Java (py4j only)


def render(records: int, reps: int, rows: list[Row], seconds: float, starts: list[float]) -> str:
    lines = [
        f"## Java async writes through the shim ÷ the Python async writer: {records:,} records, "
        f"median of {reps} after a warm-up",
        "",
        "| record size | Python async writer | Java `AsyncLogWriter` via shim | Java ÷ Python | target | met "
        "| same, records over py4j only | py4j only ÷ Python |",
        "|---|---|---|---|---|---|---|---|",
    ]
    met = []
    for size, py, jv, jp in rows:
        pm, jm, jpm = median(py), median(jv), median(jp)
        ratio = jm / pm
        met.append(ratio >= TARGET)
        lines.append(
            f"| {fmt_bytes(size) if size >= 1024 else f'{size} B'} | {_cell(pm, size)} | {_cell(jm, size)} "
            f"| {ratio:.2f} "
            f"| >= {TARGET:g} | {yes_no(ratio >= TARGET)} | {_cell(jpm, size)} | {jpm / pm:.2f} |"
        )
    lines += [
        "",
        f"Gateway process start (`python -m jvm_shim` spawned until its GATEWAY line): median "
        f"{median(starts):.2f} s of {len(starts)} (min {min(starts):.2f} s, max {max(starts):.2f} s).",
        "",
        f"Targets met: {sum(met)}/{len(met)}. Whole benchmark: {seconds:.0f} s.",
        "",
        "Methodology: one machine, one embedded namespace (`distributedlog-local://`) for both sides; writer "
        "configuration writerOutputBufferSize 64 KiB, no periodic or immediate flush, maxLogSegmentBytes 1 GiB, "
        "no time-based rolling. Python: `aw.write()` per record (records built beforehand), the final "
        "`flush()` and every future resolved (bench/_common.py `timed_async_writes`; writer open/close "
        "untimed), one untimed round first. Java: one JVM (tests/jvm/java/ShimBench.java) that starts its own "
        "gateway process; after an untimed round of the same size in the same JVM (JIT, gateway, py4j "
        "connections warm), each timed round runs from the first `AsyncLogWriter.write()` (one call per "
        "record, one shared payload array) to every future completed, `asyncClose()` issued after the last "
        "write so the buffered tail is transmitted (writer open untimed). Every round uses a fresh log. "
        "The shim sends record batches (up to 256 KiB per call) and their acknowledgements over the gateway's "
        "data channel (raw bytes on an authenticated loopback socket, jvm_shim/channel.py); the last two "
        "columns run the same JVM program with `-Ddlog.shim.dataChannel=false`, every byte through py4j "
        "(base64 text). "
        "Rates are medians of the timed rounds; MB/s counts payload bytes (1 MB = 10^6 bytes).",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000, help="records per round (default 100,000)")
    parser.add_argument("--sizes", default="1024,100", help="record sizes in bytes (default 1024,100)")
    parser.add_argument("--reps", type=int, default=3, help="timed rounds per side (default 3)")
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: under bench-data)")
    parser.add_argument("--starts", type=int, default=5, help="gateway process starts timed (default 5)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.perf_counter()
    base, created = make_base("jvm", args.dir)
    try:
        uri = f"distributedlog-local://{base / 'ns'}"
        with tempfile.TemporaryDirectory(prefix="dl-bench-jvm-classes-") as classes:
            classpath = compile_bench(Path(classes))
            rows = []
            for size in sizes:
                print(f"{size} B records: Python async writer ...", file=sys.stderr, flush=True)
                py = python_rates(uri, args.records, size, args.reps)
                print(f"{size} B records: Java through the shim ...", file=sys.stderr, flush=True)
                jv = java_rates(classpath, uri, args.records, size, args.reps)
                print(f"{size} B records: Java, records over py4j only ...", file=sys.stderr, flush=True)
                jp = java_rates(classpath, uri, args.records, size, args.reps, data_channel=False)
                print(
                    f"  python {[round(r) for r in py]}  java {[round(r) for r in jv]}  "
                    f"java/py4j {[round(r) for r in jp]}",
                    file=sys.stderr,
                )
                rows.append((size, py, jv, jp))
        print("gateway process starts ...", file=sys.stderr, flush=True)
        starts = gateway_starts(uri, args.starts)
        print(render(args.records, args.reps, rows, time.perf_counter() - started, starts))
    finally:
        remove_base(base, created)
    return 0


if __name__ == "__main__":
    sys.exit(main())
