"""Fan-in through the write proxy: 1 KiB records from 1 / 4 / 16 producer PROCESSES through 1
and 2 ``dlog proxy`` processes, against one direct ``AsyncLogWriter`` on the same namespace, in one run.

Run::

    .venv/bin/python bench/bench_proxy.py [--records 100000] [--producers 1,4,16] [--latency-seconds 8]
        [--kills 10] [--dir DIR]

Setup: a private ZooKeeper server (tests.zk) and a namespace bound to a segment directory on this machine's disk.
Every proxy and producer is a process of its own; producers use :class:`dl_proxy.ProxyClient` (idempotent:
producer id + sequences) with its default batching, and write to one log per proxy (1 proxy: one log; 2 proxies:
two logs, producers split between them, so each proxy owns one). The direct baseline writes the same records to
one log of the same namespace with one AsyncLogWriter (64 KiB buffer). Every acknowledgement is durable (the
proxy acknowledges after the core writer's durable append; the direct writer's futures resolve the same way).

Measured: (1) aggregate throughput = records / (last producer done - first producer started), each row the median
of ``--reps``; (2) ack latency p50/p99 of the direct writer paced at half its maximum, and of 1 and 4 producers
through 1 proxy, each paced at half the maximum of that many producers, with the requests they took and the CPU
each request cost the producers and the proxy (pacing as Kafka's ``ProducerPerformance``: a producer sleeps once
it is 2 ms ahead); (3) failover: a producer writes at a steady pace through 2 proxies;
the owner of its log is SIGKILLed ``--kills`` times (restarted between kills): time from the kill to the first
acknowledgement after it, p50 and max. Prints one markdown table with the project's targets.

The peer a user would otherwise pick for fan-in runs in the same table: NATS JetStream (bench/_nats.py: a private
Debian ``nats-server``, one FILE stream with ``Nats-Msg-Id`` deduplication per run, the same numbers of producer
processes publishing the same records, ``--nats-window`` publishes in flight each, waiting for every acknowledgement,
with ``nats-py`` and with NATS' own Go client ``nats.go``), measured the same way. Its file store does not fsync
before an acknowledgement by default; the ``sync_interval: always`` variant is measured where the installed
nats-server supports it.
"""

from __future__ import annotations

import argparse
import array
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# _common first: it puts the checkout on sys.path for `storage`
from _common import PAYLOAD, REPO, Throttle, fmt_rate, make_base, median, percentile, remove_base, writer_conf, yes_no
from _nats import DEFAULT_WINDOW, nats_server_version
from _nats import fanin as nats_fanin

import storage

TARGET_FANIN_RATIO = 0.9
TARGET_P99_RATIO = 2.0
TARGET_P50_MS = 5.0
SESSION_TIMEOUT_S = 1
READY = "PROXY listening on "
#: Producer processes of the paced latency runs (each at half the maximum rate of that many producers).
LATENCY_PRODUCERS = (1, 4)
#: ProxyClient keyword options of the producers (``--client-option KEY=VALUE``; default: the client's defaults).
CLIENT_OPTIONS: dict[str, Any] = {}


# --- processes ------------------------------------------------------------------------------------------------
def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Proxy:
    """A ``dlog --uri URI proxy`` process; ``address`` from its ready line."""

    def __init__(self, uri: str) -> None:
        session = f"zkSessionTimeoutSeconds={SESSION_TIMEOUT_S}"
        cmd = [sys.executable, "-m", "dlog", "--uri", uri, "proxy", "--set", session]
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith(READY):
            self.proc.kill()
            raise RuntimeError(f"dlog proxy did not start: {line!r}")
        self.address = line[len(READY) :].strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_producers(
    uri: str, streams: Sequence[str], producers: int, records: int, rate: float = 0.0
) -> list[dict[str, Any]]:
    """``producers`` processes (this script, ``--producer``) writing ``records`` in all; their summaries."""
    go = time.time() + 3.0  # every producer starts writing at this wall-clock time (after its imports)
    procs = []
    for i in range(producers):
        args = {"uri": uri, "stream": streams[i % len(streams)], "records": records // producers,
                "rate": rate / producers if rate else 0.0, "go": go, "client": CLIENT_OPTIONS}  # fmt: skip
        cmd = [sys.executable, __file__, "--producer", json.dumps(args)]
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"a producer failed (exit {p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


@dataclass
class Paced:
    """One paced run through one proxy: its producers, rate, ack latencies, and what it cost."""

    producers: int
    rate: float
    latencies: list[float]
    requests_per_s: float
    records_per_request: float
    producer_cpu_per_request_ms: float  # all producer processes' CPU (user + system) / requests
    proxy_cpu_per_request_ms: float  # the proxy process's CPU / requests


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process used so far, from ``/proc`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def paced_through_proxy(uri: str, producers: int, rate: float, seconds: float) -> Paced:
    """``producers`` processes writing ``rate`` records/s in all to one log through a fresh proxy."""
    log = f"latency-{producers}"
    proxy = Proxy(uri)
    try:
        with storage.open_namespace(uri) as ns:
            ns.create_log(log)
        print(f"latency: {producers} producer(s) at {rate:,.0f} records/s ...", file=sys.stderr, flush=True)
        cpu0 = process_cpu_s(proxy.proc.pid)
        got = run_producers(uri, [log], producers, int(rate * seconds), rate=rate)
        proxy_cpu = process_cpu_s(proxy.proc.pid) - cpu0  # includes the producers' warm-up writes: a few requests
    finally:
        proxy.stop()
    requests = max(1.0, sum(g["requests"] for g in got))
    wall = max(g["end"] for g in got) - min(g["start"] for g in got)
    return Paced(
        producers,
        rate,
        [x for g in got for x in g["latencies"]],
        requests / wall,
        sum(g["records"] for g in got) / requests,
        sum(g["cpu"] for g in got) / requests * 1000,
        proxy_cpu / requests * 1000,
    )


class Acks:
    """A run's outcomes, counted by the futures' callbacks; with ``stamp``, each acknowledgement's latency from
    ``sent``. The futures themselves are not kept: holding hundreds of thousands of them would make Python's cyclic
    garbage collector stop the process for tens of milliseconds now and then, a pause of the benchmark, not of the
    writer it measures (an application keeps a future until it is done, not for the whole run)."""

    def __init__(self, expected: int, stamp: bool) -> None:
        # an array, not a list: the collector walks a list's items at every full collection (a pause that grows
        # with the run)
        self.latencies = array.array("d")
        self.failures: list[BaseException] = []
        self._stamp = stamp
        self._left = expected
        self._mu = threading.Lock()
        self._all = threading.Event()
        if expected == 0:
            self._all.set()

    def watch(self, fut: Future[storage.DLSN], sent: float) -> None:
        fut.add_done_callback(functools.partial(self._done, sent))

    def _done(self, sent: float, fut: Future[storage.DLSN]) -> None:
        error = fut.exception()
        with self._mu:
            if error is not None:
                self.failures.append(error)
            elif self._stamp:
                self.latencies.append(time.perf_counter() - sent)
            self._left -= 1
            if self._left == 0:
                self._all.set()

    def wait(self, timeout_s: float = 600.0) -> None:
        """Until every watched future is done. Raises RuntimeError: one failed, or they did not end in time."""
        if not self._all.wait(timeout_s):
            raise RuntimeError(f"{self._left} writes still unanswered after {timeout_s:.0f}s")
        if self.failures:
            raise RuntimeError(f"{len(self.failures)} writes failed, the first with {self.failures[0]!r}")


def producer_main(spec: str) -> int:
    """One producer process: write its records through the proxies of ``uri``; print a JSON summary."""
    from dl_proxy import ProxyClient

    args = json.loads(spec)
    n, rate = int(args["records"]), float(args["rate"])
    with ProxyClient(uri=args["uri"], timeout_s=120, **args["client"]) as client:
        client.write(args["stream"], PAYLOAD).result()  # connect, route, own: untimed
        time.sleep(max(0.0, args["go"] - time.time()))
        t0, cpu0 = time.time(), time.process_time()
        pace = Throttle(rate, time.perf_counter()) if rate else None
        acks = Acks(n, stamp=bool(rate))
        for i in range(n):
            if pace is not None:
                pace.wait(i)
            sent = time.perf_counter()
            acks.watch(client.write(args["stream"], PAYLOAD), sent)
        client.flush()
        acks.wait()
        t1, cpu1 = time.time(), time.process_time()
        requests = client.metrics.registry.get_sample_value("dl_proxy_client_requests_sent_total") or 0.0
    summary = {"start": t0, "end": t1, "records": n, "cpu": cpu1 - cpu0, "requests": requests - 1}  # - the warm-up's
    print(json.dumps({**summary, "latencies": acks.latencies.tolist()}))
    return 0


# --- the direct baseline ------------------------------------------------------------------------------------------
def direct(uri: str, log: str, records: int, rate: float = 0.0) -> tuple[float, list[float]]:
    """One AsyncLogWriter (64 KiB buffer): records/s unpaced (one flush at the end), or the ack latencies paced at
    ``rate`` (the writer transmits every 2 ms by itself)."""
    # paced: transmit every 2 ms (periodicFlushFrequencyMilliSeconds/2), as the proxy client's 2 ms linger
    conf = writer_conf(periodicFlushFrequencyMilliSeconds=4) if rate else writer_conf()
    with storage.open_namespace(uri, conf) as ns:
        ns.create_log(log)
        with ns.open_log(log) as dlm:
            aw = dlm.open_async_writer()
            try:
                first = aw.write(storage.LogRecord(1, PAYLOAD))
                aw.flush().result()  # no periodic flush: a buffered record goes out on flush (untimed warm-up)
                first.result()
                acks = Acks(records, stamp=bool(rate))
                t0 = time.perf_counter()
                pace = Throttle(rate, t0) if rate else None
                for i in range(records):
                    if pace is not None:
                        pace.wait(i)
                    sent = time.perf_counter()
                    acks.watch(aw.write(storage.LogRecord(i + 2, PAYLOAD)), sent)
                aw.flush().result()
                acks.wait()
                elapsed = time.perf_counter() - t0
            finally:
                aw.close()
    return records / elapsed, acks.latencies.tolist()


# --- failover ------------------------------------------------------------------------------------------------------
def failover(uri: str, kills: int) -> list[float]:
    """Seconds from each SIGKILL of the log's owner to the first acknowledgement after it."""
    from dl_proxy import ProxyClient

    proxies = [Proxy(uri), Proxy(uri)]
    gaps: list[float] = []
    acks: list[float] = []
    mu = threading.Lock()
    stop = threading.Event()

    def on_ack(f: Future[storage.DLSN]) -> None:
        if f.exception() is None:
            with mu:
                acks.append(time.monotonic())

    try:
        with ProxyClient(uri=uri, timeout_s=60, create_if_missing=True) as client:

            def produce() -> None:
                while not stop.is_set():
                    client.write("failover", PAYLOAD).add_done_callback(on_ack)
                    time.sleep(0.002)

            writer = threading.Thread(target=produce, daemon=True)
            writer.start()
            time.sleep(1.0)
            for _ in range(kills):
                owner = client.owners.get("failover")
                victim = next((p for p in proxies if p.address == owner), proxies[0])
                victim.proc.kill()
                victim.proc.wait()
                # from its death: an answer it sent just before can no longer be taken for one after the kill
                killed = time.monotonic()
                while True:
                    with mu:
                        after = [t for t in acks if t > killed]
                    if after:
                        gaps.append(after[0] - killed)
                        break
                    time.sleep(0.01)
                proxies[proxies.index(victim)] = Proxy(uri)
                time.sleep(0.5)
            stop.set()
            writer.join()
    finally:
        for p in proxies:
            p.stop()
    return gaps


# --- main ----------------------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--producer":
        return producer_main(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--producers", default="1,4,16")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--latency-seconds", type=float, default=8.0)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--nats-window", type=int, default=DEFAULT_WINDOW, help="NATS publishes in flight per producer")
    parser.add_argument("--client-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a ProxyClient option of the producers (JSON value), e.g. max_inflight=1")  # fmt: skip
    args = parser.parse_args(argv)
    for item in args.client_option:
        key, _, value = item.partition("=")
        CLIENT_OPTIONS[key] = json.loads(value)
    counts = [int(x) for x in args.producers.split(",")]

    from tests.zk import ZooKeeperServer, free_port

    base, created = make_base("proxy", args.dir)
    server = ZooKeeperServer(workdir=base / "zk", port=free_port())
    started = time.perf_counter()
    try:
        server.start()
        uri = f"distributedlog://{server.hosts}/bench-{uuid.uuid4().hex[:12]}"
        storage.bind_namespace(uri, segments=f"file://{base / 'segments'}")
        print("direct writer ...", file=sys.stderr, flush=True)
        direct_rates = [direct(uri, f"direct-{r}", args.records)[0] for r in range(args.reps)]
        rows: list[tuple[int, int, float]] = []
        for n_proxies in (1, 2):
            proxies = [Proxy(uri) for _ in range(n_proxies)]
            try:
                for producers in counts:
                    rates = []
                    for r in range(args.reps):
                        streams = [f"fanin-{n_proxies}-{producers}-{r}-{i}" for i in range(n_proxies)]
                        with storage.open_namespace(uri) as ns:
                            for s in streams:
                                ns.create_log(s)
                        print(f"{producers} producers, {n_proxies} proxies ...", file=sys.stderr, flush=True)
                        got = run_producers(uri, streams, producers, args.records)
                        total = sum(g["records"] for g in got)
                        rates.append(total / (max(g["end"] for g in got) - min(g["start"] for g in got)))
                    rows.append((n_proxies, producers, median(rates)))
            finally:
                for p in proxies:
                    p.stop()
        nats = nats_fanin(base / "nats", counts, args.records, args.reps, args.nats_window)
        # latency at half the maximum rate: the direct writer, then 1 and 4 producers through 1 proxy, each at half
        # its own maximum
        half_direct = median(direct_rates) / 2
        n_direct = int(half_direct * args.latency_seconds)
        _, direct_lat = direct(uri, "direct-latency", n_direct, rate=half_direct)
        paced = []
        for producers in LATENCY_PRODUCERS:
            top = next((rate for np_, pr, rate in rows if np_ == 1 and pr == producers), None)
            if top is not None:
                paced.append(paced_through_proxy(uri, producers, top / 2, args.latency_seconds))
        print("failover ...", file=sys.stderr, flush=True)
        gaps = failover(uri, args.kills) if args.kills else []
        print(render(args, median(direct_rates), rows, (half_direct, direct_lat), paced, gaps,
                     time.perf_counter() - started, nats))  # fmt: skip
        return 0
    finally:
        server.stop()
        remove_base(base, created)


def render(
    args: argparse.Namespace,
    direct_rate: float,
    rows: list[tuple[int, int, float]],
    direct_lat: tuple[float, list[float]],
    paced: list[Paced],
    gaps: list[float],
    seconds: float,
    nats: tuple[list[tuple[bool, str, int, float]], list[str]],
) -> str:
    nats_rows, nats_notes = nats
    jetstream: dict[int, float] = {}  # the peer at its best: the faster client, default sync
    for sync, _client, producers, rate in nats_rows:
        if not sync:
            jetstream[producers] = max(rate, jetstream.get(producers, 0.0))
    lines = [
        f"## Write proxy fan-in: 1 KiB records, {args.records:,} per run (ZooKeeper namespace, local segments), "
        f"vs NATS JetStream (nats-server {nats_server_version()}, nats-py and nats.go, {args.nats_window} publishes "
        "in flight per producer; ÷ JetStream: the faster client)",
        "",
        "| setup | fsync before each ack | aggregate | ÷ direct writer | ÷ JetStream | target | met |",
        "|---|---|---|---|---|---|---|",
        f"| direct AsyncLogWriter (1 process) | yes | {fmt_rate(direct_rate)} | 1.00 | - | - | - |",
    ]
    for n_proxies, producers, rate in rows:
        ratio = rate / direct_rate
        js = jetstream.get(producers)
        vs_js = f"{rate / js:.2f}" if js else "-"
        target, met = "-", "-"
        if n_proxies == 1:
            target = f">= {TARGET_FANIN_RATIO} and > JetStream"
            met = yes_no(ratio >= TARGET_FANIN_RATIO and (js is None or rate > js))
        lines.append(f"| {producers} producer(s) → {n_proxies} proxy(ies) | yes | {fmt_rate(rate)} | {ratio:.2f} "
                     f"| {vs_js} | {target} | {met} |")  # fmt: skip
    for sync, client, producers, rate in nats_rows:
        fsync = "yes (`sync_interval: always`)" if sync else "no (file store, default `sync_interval`)"
        lines.append(f"| {producers} producer(s) ({client}) → NATS JetStream, FILE stream, Nats-Msg-Id dedup | {fsync} "
                     f"| {fmt_rate(rate)} | {rate / direct_rate:.2f} | - | - | - |")  # fmt: skip
    lines += [f"\n{note}." for note in nats_notes]
    d_rate, d_lat = direct_lat
    if d_lat and paced:
        d99 = percentile(d_lat, 0.99) * 1000
        lines += [
            "",
            "| ack latency at half the maximum rate | rate | p50 | p99 | p99 ÷ direct | requests/s | records per "
            "request | CPU per request: producers / proxy | target | met |",
            "|---|---|---|---|---|---|---|---|---|---|",
            f"| direct writer (1 process) | {d_rate:,.0f}/s | {percentile(d_lat, 0.5) * 1000:.1f} ms | {d99:.1f} ms "
            "| 1.00 | - | - | - | - | - |",
        ]
        for run in paced:
            if not run.latencies:
                continue
            p50, p99 = percentile(run.latencies, 0.5) * 1000, percentile(run.latencies, 0.99) * 1000
            met = yes_no(p50 <= TARGET_P50_MS and p99 / d99 <= TARGET_P99_RATIO)
            lines.append(
                f"| {run.producers} producer(s) → 1 proxy | {run.rate:,.0f}/s | {p50:.1f} ms | {p99:.1f} ms "
                f"| {p99 / d99:.2f} | {run.requests_per_s:,.0f} | {run.records_per_request:.0f} "
                f"| {run.producer_cpu_per_request_ms:.2f} / {run.proxy_cpu_per_request_ms:.2f} ms "
                f"| p50 <= {TARGET_P50_MS:g} ms, p99 ÷ direct <= {TARGET_P99_RATIO:g} | {met} |"
            )
    if gaps:
        bound = SESSION_TIMEOUT_S + 1.0
        ok = median(gaps) <= bound and max(gaps) <= bound
        lines += [
            "",
            f"Failover over {len(gaps)} SIGKILLs of the owner (session timeout {SESSION_TIMEOUT_S} s): kill → first "
            f"acknowledgement p50 {median(gaps):.2f} s, max {max(gaps):.2f} s; target <= {bound:g} s: {yes_no(ok)}.",
        ]
    lines += ["", f"Whole benchmark: {seconds:.0f} s."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
