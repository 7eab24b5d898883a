"""Many streams on two write proxies (bench/bench_scale.py's proxy table).

For each size, in a fresh ZooKeeper namespace (the private server of bench_scale.py, segments in local files):
two ``dlog proxy`` processes, and one :class:`dl_proxy.ProxyClient` (an idempotent producer) in this process
writing one 100-byte record to every stream per round:

* **first round**: every stream acquired (goal for 10,000 streams: <= 10 s);
* **steady round**: the median of the next rounds (goal for 10,000: <= 2 s), and the client's calls per round
  (``writeMulti`` packs the streams bound for one proxy);
* **memory**: the proxies' resident memory above their start, per owned stream, once the streams have been idle
  a few seconds (goal <= 20 KiB), and their threads;
* **failover**: one proxy stopped (SIGTERM, it releases its streams); the next round, served by the other for
  every stream (goal for 10,000: <= 5 s);
* **idle release**: with ``proxyStreamIdleSeconds`` set low, seconds until the proxy owns no stream;
* **check**: every write recorded in a history and checked against a final read of every stream (the fault
  tests' checker): nothing lost, nothing duplicated, each stream in order.
"""

from __future__ import annotations

import logging
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from _common import REPO

import storage
from dl_proxy import ProxyClient
from dl_proxy.proto import distributedlog_pb2 as pb
from dl_proxy.proto import distributedlog_pb2_grpc as pb_grpc
from tools.history import History, HistoryRecorder, check

GOALS = {"first_10000": 10.0, "steady_10000": 2.0, "failover_10000": 5.0, "kib_per_stream": 20.0}
#: ``proxyStreamIdleSeconds`` of the proxies, and the largest size whose idle release is measured: the idle time
#: must exceed a round (a stream written early in a round must not be released before the next), and a round of
#: 10,000 streams that must all be acquired again takes minutes (see the docs).
IDLE_SECONDS = 20
IDLE_MAX_STREAMS = 1000
READY = "PROXY listening on "


class _Proxy:
    def __init__(self, uri: str, log_path: Path, idle_s: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cmd = [sys.executable, "-m", "dlog", "--uri", uri, "proxy", "--set", "zkSessionTimeoutSeconds=30",
               "--set", f"proxyStreamIdleSeconds={idle_s}", "--set", "proxyCreateStreamOnWrite=true"]  # fmt: skip
        with open(log_path, "w") as log_file:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log_file, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith(READY):
            self.proc.kill()
            raise RuntimeError(f"dlog proxy did not start: {line!r} (see {log_path})")
        self.address = line[len(READY) :].strip()
        self.rss0 = self.rss_kib()

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def owned(self) -> int:
        import grpc

        with grpc.insecure_channel(self.address) as ch:
            info = pb_grpc.DistributedLogServiceStub(ch).handshake(pb.ClientInfo(get_ownerships=True), timeout=30)
            return len(info.ownerships)

    def stop(self) -> float:
        if self.proc.poll() is not None:
            return 0.0
        started = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return time.perf_counter() - started


def _round(client: ProxyClient, rec: HistoryRecorder, names: list[str], tag: str) -> float:
    """One record to every stream; seconds until every one is acknowledged (or failed)."""
    started = time.perf_counter()
    futures: list[Future[storage.DLSN]] = []
    for name in names:
        value = f"{name}/{tag}".ljust(100, ".")
        rec.invoke(value, "write", value, log=name, producer=client.producer_id)

        def done(f: Future[storage.DLSN], op: str = value) -> None:
            e = f.exception()
            if e is None:
                rec.ok(op, dlsn=f.result())
            else:
                rec.fail(op, error=e, definite=not getattr(e, "outcome_unknown", True))

        f = client.write(name, value.encode())
        f.add_done_callback(done)
        futures.append(f)
    for f in futures:
        f.exception(timeout=600)
    return time.perf_counter() - started


def _calls(client: ProxyClient) -> float:
    total = 0.0
    for line in client.metrics_text().splitlines():
        if line.startswith("dl_proxy_client_calls_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def measure_proxies(zk_hosts: str, base: Path, n: int, rounds: int) -> dict[str, Any]:
    """The proxy row for ``n`` streams (see the module docstring)."""
    logging.getLogger("dl_proxy.client").setLevel(logging.ERROR)  # the one-line "waiting" summaries
    uri = f"distributedlog://{zk_hosts}/proxies-{n}-{uuid.uuid4().hex[:8]}"
    storage.bind_namespace(uri, segments=f"file://{base / f'proxy-segments-{n}'}")
    names = [f"p{i:05d}" for i in range(n)]
    with storage.open_namespace(uri) as ns:
        for name in names:
            ns.create_log(name)
    history = base / f"proxy-history-{n}"
    row: dict[str, Any] = {"streams": n}
    idle_s = IDLE_SECONDS if n <= IDLE_MAX_STREAMS else 0
    proxies = [_Proxy(uri, base / f"proxy-{n}-{i}.log", idle_s) for i in range(2)]
    try:
        with HistoryRecorder(history, "client") as rec, ProxyClient(uri=uri, timeout_s=600) as client:
            row["first"] = _round(client, rec, names, "first")
            steady = []
            for r in range(rounds):
                calls = _calls(client)
                steady.append(_round(client, rec, names, f"r{r}"))
                row["calls"] = _calls(client) - calls
            row["steady"] = statistics.median(steady)
            time.sleep(5)  # idle: the writers' threads end
            grown = sum(max(0, p.rss_kib() - p.rss0) for p in proxies)
            row["kib_per_stream"] = grown / n
            row["threads"] = sum(p.threads() for p in proxies)
            row["release"] = proxies[0].stop()
            row["failover"] = _round(client, rec, names, "failover")
            if idle_s:
                started = time.perf_counter()
                while proxies[1].owned() > 0 and time.perf_counter() - started < 600:
                    time.sleep(0.5)
                row["idle_release"] = time.perf_counter() - started
                row["after_idle"] = _round(client, rec, names, "after-idle")
        with HistoryRecorder(history, "final-reader") as rec, storage.open_namespace(uri, create=False) as ns:
            for name in names:
                with ns.open_log(name) as dlm, dlm.open_reader(storage.DLSN.INITIAL) as reader:
                    while got := reader.read_bulk(1000, non_blocking=True):
                        for got_record in got:
                            rec.final_read(name, got_record.payload, got_record.dlsn, got_record.txid)
        report = check(History.load(history))
        row["check"] = report.line()
        if not report.ok:
            raise AssertionError(str(report))
    finally:
        for p in proxies:
            p.stop()
    return row


def _verdict(key: str, n: int, value: float, unit: str = "s") -> str:
    goal = GOALS.get(f"{key}_{n}", GOALS.get(key))
    text = f"{value:.2f} {unit}" if unit == "s" else f"{value:.1f} {unit}"
    if goal is None:
        return text
    return f"{text} ({'meets' if value <= goal else 'MISSES'} <= {goal:g} {unit})"


def render_proxies(rows: list[dict[str, Any]], rounds: int) -> str:
    lines = [
        "| streams | first round (acquires all) | steady round (median) | calls per steady round | memory per idle "
        "stream | threads (2 proxies, idle) | SIGTERM release | round after failover | idle release "
        "| round after release |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n = r["streams"]
        lines.append(
            f"| {n:,} | {_verdict('first', n, r['first'])} | {_verdict('steady', n, r['steady'])} "
            f"| {r['calls']:.0f} | {_verdict('kib_per_stream', n, r['kib_per_stream'], 'KiB')} | {r['threads']} "
            f"| {r['release']:.2f} s | {_verdict('failover', n, r['failover'])} "
            + (f"| {r['idle_release']:.1f} s | {r['after_idle']:.2f} s |" if "idle_release" in r else "| — | — |")
        )
    lines += [""] + [f"- {r['streams']:,} streams: `{r['check']}`" for r in rows]
    lines += [
        "",
        f"Two `dlog proxy` processes and one client (an idempotent producer) in one process, one 100-byte record "
        f"to every stream per round; steady: the median of {rounds} rounds. Memory: the proxies' resident memory "
        "above their start, per stream, after 5 s idle. Idle release: `proxyStreamIdleSeconds="
        f"{IDLE_SECONDS}`, seconds after the failover round until the remaining proxy owns no stream (measured up to "
        f"{IDLE_MAX_STREAMS:,} streams; above, the proxies never release). The check "
        "line is the history checker's over every write and a final read of every stream.",
    ]
    return "\n".join(lines)
