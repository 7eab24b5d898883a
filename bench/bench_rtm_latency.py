"""Real-Time Mode latency: from a record's ``write()`` in a producer process to the moment its copy is readable in
the output log, at a steady 1,000 and 10,000 records/s, beside the micro-batch pipeline and the floors.

Run::

    .venv/bin/python bench/bench_rtm_latency.py [--rates 1000,10000] [--seconds 60] [--warmup 5] [--master local[4]]

For each rate, a producer process (``storage`` only) appends records of 108 bytes (8 bytes of ``time.time_ns()`` at
the ``write()`` call, then padding) to an input log of an embedded namespace, paced by the clock, each record
durable and published at once (``enableImmediateFlush``). The pipelines, in one run and one SparkSession:

(a) Real-Time Mode: ``format("distributedlog-rt")`` into the exactly-once real-time sink
    (``dl_spark.realtime.write_stream``), ``trigger(realTime="5 seconds")``. A reader in this process tails the
    output log (``readAheadWaitTime`` 2 ms) and stamps each record when it becomes readable. Records whose way
    from the input to the output spans the gap between two batches (written before a batch ended and read by the
    next one) are counted apart: the targets are for the others, the records that flow while a batch runs.
(b) Micro-batch: ``format("distributedlog")`` into the ``distributedlog`` sink, ``processingTime="0 seconds"``
    (``bench_latency.py``'s case (a)).
(c) Floor, Spark and the source without a sink: ``distributedlog-rt`` into a JVM ``ForeachWriter`` that only stamps
    each row as it arrives (``bench/rtm_probe``).
(d) Floor, the gateway without Spark: a Java program reads the input log through DistributedLog's Java API and
    appends each record to an output log (the reads and writes the real-time source and sink make), tailed as (a).

Latency = stamp - the write time carried in the record; records written in the first ``--warmup`` seconds of a case
are not counted. Prints one markdown table: p50 / p90 / p99 / p99.9 / max in milliseconds, with the targets for
(a): p50 <= 20 ms and p99 <= 100 ms at 1,000 records/s, p99 <= 200 ms at 10,000.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench_latency

# _common first: it puts the checkout on sys.path for `storage`
from _common import REPO, percentile

import storage

#: (p50, p99) targets in ms of case (a), by rate; None: no target on that percentile.
TARGETS: dict[int, tuple[float | None, float]] = {1000: (20.0, 100.0), 10000: (None, 200.0)}
PROBE_SOURCES = Path(__file__).resolve().parent / "rtm_probe"
PROBE_CLASS = "org.apache.distributedlog.bench.LatencyProbe"
RELAY_CLASS = "org.apache.distributedlog.bench.GatewayRelay"
TRIGGER = "5 seconds"
#: A case has drained when its output has not grown for this long.
QUIET_S = 3.0


class Tail(threading.Thread):
    """Tails ``log`` from its start; stamps every record (``time.time_ns()``) when it becomes readable."""

    def __init__(self, uri: str, log: str) -> None:
        super().__init__(daemon=True, name=f"tail-{log}")
        self.uri, self.log = uri, log
        self.stamped: list[tuple[int, bytes]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with storage.open_namespace(self.uri, {"readAheadWaitTime": 2}) as ns:
            dlm = ns.open_log(self.log)
            with dlm.open_reader(storage.DLSN.INITIAL) as r:
                while not self.stop.is_set():
                    recs = r.read_bulk(10_000)
                    now = time.time_ns()
                    self.stamped.extend((now, bytes(rec.payload[:8])) for rec in recs)

    def count(self) -> int:
        return len(self.stamped)


def build_probe_jar(work: Path) -> Path:
    """Compile ``bench/rtm_probe`` against the shim's, the real-time source's and Spark's jars."""
    import jvm_shim
    from jvm_shim import build

    shim = jvm_shim.jar_path()
    return build.build_jar(
        work / "rtm-probe.jar",
        src_dir=PROBE_SOURCES,
        classpath=[shim, build.spark_rt_jar_path(shim), build.pyspark_jars_dir() / "*"],
    )


def drain(count: Any, what: str) -> None:
    """Wait until ``count()`` has not grown for :data:`QUIET_S` (at most 120 s)."""
    deadline = time.monotonic() + 120
    last, still = -1, time.monotonic()
    print(f"  waiting for {what} to drain ...", file=sys.stderr, flush=True)
    while time.monotonic() < deadline:
        n = count()
        if n != last:
            last, still = n, time.monotonic()
        elif time.monotonic() - still >= QUIET_S:
            return
        time.sleep(0.1)


def running(spark: Any, query: Any) -> None:
    """Wait until the real-time query's first batch has its tasks running (at most 120 s)."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 120
    print("  waiting for the query's first batch to run its tasks ...", file=sys.stderr, flush=True)
    while not tracker.getActiveStageIds():
        if query.exception() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the real-time query did not start: {query.exception()}")
        time.sleep(0.05)


def batch_ends(progress: Sequence[Any]) -> list[int]:
    """When each batch ended (ns since the epoch), from the query progress (its start plus its duration)."""
    ends = []
    for p in progress:
        start = dt.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        ends.append(int((start + float(p["batchDuration"]) / 1000) * 1e9))
    return sorted(ends)


def split(stamped: list[tuple[int, int]], since: int, ends: list[int]) -> tuple[list[float], list[float]]:
    """Latencies (ms) of ``(stamp, written)`` pairs written from ``since`` on: those that flowed while a batch ran,
    and those that crossed a boundary: written before the next batch delivered its first record (the first stamp
    after the batch end) and stamped after the batch ended."""
    stamps = sorted(stamp for stamp, _ in stamped)
    gaps = []
    for end in ends:
        i = bisect.bisect_left(stamps, end)
        if i < len(stamps):
            gaps.append((end, stamps[i]))
    within: list[float] = []
    crossing: list[float] = []
    for stamp, written in stamped:
        if written < since:
            continue
        ms = (stamp - written) / 1e6
        if any(written < resumed and stamp >= end for end, resumed in gaps):
            crossing.append(ms)
        else:
            within.append(ms)
    return within, crossing


def _decode(pairs: list[tuple[int, bytes]]) -> list[tuple[int, int]]:
    return [(stamp, int.from_bytes(head, "big", signed=True)) for stamp, head in pairs]


def _produce(uri: str, log: str, rate: float, seconds: float) -> int:
    """Run the producer to its end; the records it wrote."""
    producer = bench_latency.produce(uri, rate, seconds, 0, log)
    out, _ = producer.communicate(timeout=seconds + 120)
    if producer.returncode != 0:
        raise RuntimeError(f"the producer of {log} failed (exit {producer.returncode})")
    return int(out.split()[0])


def rt_case(
    spark: Any, uri: str, work: Path, rate: float, seconds: float, warmup: float, sink: str, tag: str = ""
) -> dict[str, Any]:
    """Case (a) (``sink="log"``) or (c) (``sink="probe"``) at ``rate``."""
    from dl_spark import realtime

    tag = f"{sink}-{int(rate)}{tag}"
    src, out = f"rt-in-{tag}", f"rt-out-{tag}"
    with storage.open_namespace(uri) as ns:
        ns.create_log(src)
        if sink == "log":
            ns.create_log(out)
    ckpt = str(work / f"ck-rt-{tag}")
    df = realtime.read_stream(spark, uri, [src], startingOffsets="earliest")
    tail: Tail | None = None
    stamps = work / f"probe-{tag}"
    if sink == "log":
        tail = Tail(uri, out)
        tail.start()
        query = realtime.write_stream(df, uri, out, ckpt, trigger=TRIGGER)
    else:
        stamps.mkdir()
        jvm = spark._jvm
        probe = jvm
        for part in PROBE_CLASS.split("."):
            probe = getattr(probe, part)
        writer = df.select("value").writeStream
        writer._jwrite = writer._jwrite.foreach(probe(str(stamps)))
        writer = writer.outputMode("update").option("checkpointLocation", ckpt)
        query = writer.trigger(realTime=TRIGGER).start()  # type: ignore[call-overload]

    def probed() -> list[tuple[int, int]]:
        rows = []
        for f in stamps.iterdir():
            for line in f.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:
                    rows.append((int(parts[0]), int(parts[1])))
        return rows

    try:
        running(spark, query)
        since = time.time_ns() + int(warmup * 1e9)
        written = _produce(uri, src, rate, seconds + warmup)
        if tail is not None:
            drain(tail.count, f"log {out}")
        else:
            drain(lambda: sum(f.stat().st_size for f in stamps.iterdir()), "the probe's stamps")
        progress = [p for p in query.recentProgress if p.get("batchDuration")]
    finally:
        query.stop()
        if tail is not None:
            tail.stop.set()
            tail.join(10)
    stamped = _decode(tail.stamped) if tail is not None else probed()
    within, crossing = split(stamped, since, batch_ends(progress))
    return {"within": within, "crossing": crossing, "written": written, "seen": len(stamped), "batches": len(progress)}


def relay_case(uri: str, work: Path, rate: float, seconds: float, warmup: float, probe_jar: Path) -> dict[str, Any]:
    """Case (d): the gateway relay (a JVM, no Spark) at ``rate``."""
    import jvm_shim
    from jvm_shim import build

    tag = f"relay-{int(rate)}"
    src, out = f"{tag}-in", f"{tag}-out"
    with storage.open_namespace(uri) as ns:
        ns.create_log(src)
        ns.create_log(out)
    env = dict(os.environ, DLOG_PYTHON=sys.executable, DLOG_GATEWAY_QUIET="1")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    cp = os.pathsep.join(str(p) for p in (jvm_shim.jar_path(), jvm_shim.py4j_jar(), probe_jar))
    relay = subprocess.Popen(
        [build.require_tool("java"), "-cp", cp, RELAY_CLASS, uri, src, out, str(int(QUIET_S * 2))],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert relay.stdout is not None
    print("  waiting for the relay's JVM and gateway to start ...", file=sys.stderr, flush=True)
    line = relay.stdout.readline()
    if not line.startswith("RELAY ready"):
        relay.kill()
        raise RuntimeError(f"the relay did not start: {line!r}")
    tail = Tail(uri, out)
    tail.start()
    try:
        since = time.time_ns() + int(warmup * 1e9)
        written = _produce(uri, src, rate, seconds + warmup)
        drain(tail.count, f"log {out}")
    finally:
        tail.stop.set()
        tail.join(10)
        try:
            relay.wait(timeout=60)
        except subprocess.TimeoutExpired:
            relay.kill()
    within, _ = split(_decode(tail.stamped), since, [])
    return {"within": within, "crossing": [], "written": written, "seen": len(tail.stamped), "batches": 0}


def micro_case(
    spark: Any, uri: str, work: Path, rate: float, seconds: float, warmup: float, tag: str = ""
) -> dict[str, Any]:
    """Case (b): ``bench_latency.py``'s micro-batch pipeline into the ``distributedlog`` sink at ``rate``."""
    tag = f"-micro{tag}"
    with storage.open_namespace(uri) as ns:
        ns.create_log(f"in{tag}-{int(rate)}")
    r = bench_latency.run_case(
        spark, uri, work, "distributedlog", rate, seconds, warmup, 0, tag=tag, log=f"in{tag}-{int(rate)}"
    )
    return {"within": r["ms"], "crossing": [], "written": r["written"], "seen": len(r["ms"]), "batches": 0}


LABELS = {
    "rt": "(a) Real-Time Mode: `distributedlog-rt` -> exactly-once real-time sink",
    "rt-crossing": "(a) the same, records across a batch boundary",
    "micro": "(b) micro-batch: `distributedlog` -> `distributedlog` sink",
    "probe": "(c) floor: `distributedlog-rt` -> JVM `foreach` that only stamps",
    "relay": "(d) floor: the gateway relay, no Spark",
}


def _row(label: str, rate: float, ms: list[float], target: str = "-", met: str = "-") -> str:
    if not ms:
        return f"| {label} | {rate:,.0f} | 0 | - | - | - | - | - | {target} | {met} |"
    cells = " | ".join(f"{percentile(ms, q):.1f}" for q in (0.5, 0.9, 0.99, 0.999))
    return f"| {label} | {rate:,.0f} | {len(ms):,} | {cells} | {max(ms):.1f} | {target} | {met} |"


def render(results: list[tuple[str, float, dict[str, Any]]], seconds: float, elapsed: float) -> str:
    lines = [
        f"## Real-Time Mode: producer `write()` -> readable in the output (ms), {seconds:.0f} s per case",
        "",
        "| pipeline | rate (rec/s) | records counted | p50 | p90 | p99 | p99.9 | max | target | met |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    met: list[bool] = []
    for case, rate, r in results:
        if case == "rt":
            p50_t, p99_t = TARGETS.get(int(rate), (None, None))  # type: ignore[arg-type]
            ms = r["within"]
            ok = bool(ms) and (p50_t is None or percentile(ms, 0.5) <= p50_t)
            ok = ok and (p99_t is None or percentile(ms, 0.99) <= p99_t)
            parts = ([f"p50 <= {p50_t:.0f}"] if p50_t else []) + ([f"p99 <= {p99_t:.0f}"] if p99_t else [])
            target = ", ".join(parts) or "-"
            if parts:
                met.append(ok)
            lines.append(_row(LABELS["rt"], rate, ms, target, ("yes" if ok else "**NO**") if parts else "-"))
            lines.append(_row(LABELS["rt-crossing"], rate, r["crossing"]))
        else:
            lines.append(_row(LABELS[case], rate, r["within"]))
    lines.append("")
    for case, rate, r in results:
        seen = "" if case == "micro" else f", {r['seen']:,} read back"
        batches = f", {r['batches']} batches" if r["batches"] else ""
        lines.append(f"- {case} at {rate:,.0f}/s: {r['written']:,} written{seen}{batches}")
    lines += ["", f"Targets met: {sum(met)}/{len(met)}. Whole benchmark: {elapsed:.0f} s."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rates", default="1000,10000", help="producer rates, records/s (default 1000,10000)")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per case (default 60)")
    parser.add_argument("--warmup", type=float, default=5.0, help="uncounted seconds per case (default 5)")
    parser.add_argument("--master", default="local[4]", help="Spark master (default local[4])")
    parser.add_argument("--cases", default="rt,micro,probe,relay", help="cases to run (default rt,micro,probe,relay)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="dl-bench-rtm-"))
    cases = args.cases.split(",")
    try:
        from dl_spark import realtime
        from dl_spark.session import spark_session

        os.environ["DLOG_PYTHON"] = sys.executable
        os.environ["DLOG_GATEWAY_QUIET"] = "1"
        uri = f"distributedlog-local://{work / 'ns'}"
        storage.open_namespace(uri).close()
        probe_jar = build_probe_jar(work)
        jars = ",".join(str(p) for p in [*realtime.jar_paths(), probe_jar])
        spark = spark_session(args.master, app_name="distributedlog-bench-rtm", pythonpath=[str(REPO)],
                              conf={"spark.jars": jars}, log_level="ERROR")  # fmt: skip
        import dl_spark

        dl_spark.register(spark)
        results: list[tuple[str, float, dict[str, Any]]] = []
        try:
            print("warm-up ...", file=sys.stderr, flush=True)  # JIT, the gateways, the first Python workers
            rt_case(spark, uri, work, 1000.0, 3.0, 1.0, "log", tag="-warm")
            if "micro" in cases:
                micro_case(spark, uri, work, 1000.0, 3.0, 1.0, tag="-warm")
            for rate in (float(r) for r in args.rates.split(",")):
                for case in cases:
                    print(f"{case} at {rate:,.0f} rec/s ...", file=sys.stderr, flush=True)
                    if case == "rt":
                        r = rt_case(spark, uri, work, rate, args.seconds, args.warmup, "log")
                    elif case == "probe":
                        r = rt_case(spark, uri, work, rate, args.seconds, args.warmup, "probe")
                    elif case == "micro":
                        r = micro_case(spark, uri, work, rate, args.seconds, args.warmup)
                    else:
                        r = relay_case(uri, work, rate, args.seconds, args.warmup, probe_jar)
                    results.append((case, rate, r))
        finally:
            spark.stop()
        print(render(results, args.seconds, time.perf_counter() - started))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
