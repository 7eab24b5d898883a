"""Fan-in through the write proxy: several producer processes write one log through ``dlog proxy``, each as an
idempotent producer, and every producer's records land once, in the order it wrote them.

1. Creates the log (``--log``, default ``fanin``; it must not exist yet).
2. Starts ``dlog --uri URI proxy --listen 127.0.0.1:0`` as a subprocess (the proxy picks a free loopback port) and
   waits for the one line it prints once serving: ``PROXY listening on HOST:PORT``.
3. Starts ``--producers`` processes (default 4). Each sets up its own :class:`dl_proxy.ProxyClient` (a fresh
   producer id, so an idempotent producer: a resend is never stored twice); once all are ready they write at the
   same time, ``--records`` records each (default 1000), payload ``<producer>:<seq>``, ``--burst`` records
   (default 50) between two flushes, and check every write was acknowledged with a DLSN.
4. Reads the log back from the start with the storage reader and checks that each producer's records are all there,
   in its own order (sequence numbers 0, 1, 2, ... in log order), with no duplicate; prints one line::

       FAN-IN OK records=4000 producers=4 per_producer=1000 in_order=True duplicates=0 missing=0

   and exits 1 (``FAN-IN FAILED ...``) if anything is off.
5. Stops the proxy with SIGTERM (it releases the log and exits 0).

Run::

    python examples/proxy_fan_in.py                          # an embedded namespace in a new temporary directory
    python examples/proxy_fan_in.py --uri distributedlog-local:///tmp/dl-fanin --producers 8 --records 5000

A ZooKeeper namespace works the same (bind it first: ``dlog --uri URI bind --segments file:///shared/abs/path``)::

    python examples/proxy_fan_in.py --uri distributedlog://127.0.0.1:2181/fanin

There the producers find the proxy the way producers on other machines would, through the announcement it makes
in the namespace: ``ProxyClient(uri=URI)`` (every proxy announced there, this one included). With an embedded
namespace they are given its address, ``ProxyClient(proxies=["HOST:PORT"])`` (a proxy announces itself in the
embedded namespace's database too, so ``uri=`` would find it as well).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import storage  # noqa: E402
from storage.errors import DLError, EndOfStreamError  # noqa: E402

#: The line ``dlog proxy`` prints once it serves.
READY_PREFIX = "PROXY listening on "
#: How long the proxy may take to print it.
READY_TIMEOUT_S = 60.0


def child_env() -> dict[str, str]:
    """This environment, with this checkout first on ``PYTHONPATH`` (the example also runs uninstalled)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def is_zookeeper(uri: str) -> bool:
    """True for a ZooKeeper namespace URI (``distributedlog://...``)."""
    return uri.startswith("distributedlog://")


class Proxy:
    """A ``dlog proxy`` subprocess: :meth:`start` returns once it serves, :meth:`stop` ends it with SIGTERM."""

    def __init__(self, uri: str, log_file: Path) -> None:
        self.uri = uri
        self.log_file = log_file
        self.address = ""
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> str:
        """Start the proxy and wait for its ``PROXY listening on HOST:PORT`` line; returns ``HOST:PORT``.

        Raises:
            RuntimeError: it exited, or printed no such line within READY_TIMEOUT_S (its log is in the message).
        """
        cmd = [sys.executable, "-m", "dlog", "--uri", self.uri, "proxy", "--listen", "127.0.0.1:0"]
        with open(self.log_file, "w") as err:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env())
        threading.Thread(target=self._pump, daemon=True).start()
        try:
            line = self._lines.get(timeout=READY_TIMEOUT_S)
        except queue.Empty:
            line = None
        if line is None or not line.startswith(READY_PREFIX):
            self._proc.kill()
            self._proc.wait()
            raise RuntimeError(f"the proxy did not start (first line {line!r}); its log:\n{self.log_text()}")
        self.address = line[len(READY_PREFIX) :].strip()
        return self.address

    def _pump(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # end of its output

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then wait for the exit (SIGKILL after ``timeout_s``); returns the exit code."""
        if self._proc is None:
            return 0
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                return self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        return self._proc.wait()

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def produce(name: str, uri: str, address: str, log: str, records: int, burst: int) -> int:
    """One producer process: ``records`` writes of ``<name>:<seq>`` through the proxy, ``burst`` at a time (each
    burst flushed); prints a JSON summary line. Returns the exit code: 0 if every write was acknowledged."""
    from dl_proxy import ProxyClient

    client = ProxyClient(uri=uri) if is_zookeeper(uri) else ProxyClient(proxies=[address])
    print("ready", flush=True)
    sys.stdin.readline()  # every producer starts writing at once: "go" (or the end of input)
    started = time.monotonic()
    failed: list[str] = []
    with client:
        futures = []
        for first in range(0, records, burst):  # a burst at a time, each flushed: the producers' writes interleave
            futures += [
                client.write(log, f"{name}:{seq}".encode()) for seq in range(first, min(first + burst, records))
            ]
            client.flush()
        dlsns = []
        for fut in futures:
            try:
                dlsns.append(fut.result())
            except DLError as e:  # its outcome_unknown says whether it may be stored (once)
                failed.append(f"{type(e).__name__}: {e}")
    summary = {
        "producer": name,
        "producer_id": client.producer_id,
        "acked": len(dlsns),
        "failed": len(failed),
        "first_error": failed[0] if failed else None,
        "last_dlsn": str(dlsns[-1]) if dlsns else None,
        "seconds": round(time.monotonic() - started, 2),
    }
    print(json.dumps(summary), flush=True)
    return 0 if not failed else 1


def read_back(uri: str, log: str) -> list[tuple[str, int]]:
    """``(producer, seq)`` of every record of ``log``, in log order."""
    out: list[tuple[str, int]] = []
    with (
        storage.open_namespace(uri, create=False) as ns,
        ns.open_log(log) as dlm,
        dlm.open_reader(storage.DLSN.INITIAL) as reader,
    ):
        while True:
            try:
                batch = reader.read_bulk(1000, non_blocking=True)
            except EndOfStreamError:
                break
            if not batch:
                break
            for rec in batch:
                name, _, seq = bytes(rec.payload).decode().rpartition(":")
                out.append((name, int(seq)))
    return out


def check(records: list[tuple[str, int]], producers: list[str], per_producer: int) -> dict[str, object]:
    """Per producer: its sequence numbers in log order must be exactly 0 .. per_producer-1."""
    seqs: dict[str, list[int]] = {name: [] for name in producers}
    strangers = 0
    for name, seq in records:
        if name in seqs:
            seqs[name].append(seq)
        else:
            strangers += 1
    duplicates = sum(len(s) - len(set(s)) for s in seqs.values()) + strangers
    missing = sum(len(set(range(per_producer)) - set(s)) for s in seqs.values())
    in_order = all(s == sorted(s) for s in seqs.values())
    ok = duplicates == 0 and missing == 0 and in_order and len(records) == per_producer * len(producers)
    return {"ok": ok, "in_order": in_order, "duplicates": duplicates, "missing": missing}


def run(args: argparse.Namespace, workdir: Path) -> int:
    with storage.open_namespace(args.uri) as ns:
        if ns.log_exists(args.log):
            print(f"log {args.log!r} already exists in {args.uri}; pick another --log or --uri", file=sys.stderr)
            return 1
        ns.create_log(args.log)
    proxy = Proxy(args.uri, workdir / "proxy.log")
    address = proxy.start()
    print(f"proxy listening on {address} (namespace {args.uri})", flush=True)
    producers = [f"p{k}" for k in range(args.producers)]
    failures = 0
    procs: list[subprocess.Popen[str]] = []
    try:
        common = ["--uri", args.uri, "--log", args.log, "--records", str(args.records), "--burst", str(args.burst)]
        common += ["--proxy-address", address]
        for name in producers:
            procs.append(
                subprocess.Popen(
                    [sys.executable, __file__, *common, "--produce", name],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=child_env(),
                )
            )
        for proc in procs:  # each says "ready" once its client is set up (or exits)
            assert proc.stdout is not None
            proc.stdout.readline()
        for proc in procs:  # then all of them write at once
            assert proc.stdin is not None
            try:
                proc.stdin.write("go\n")
                proc.stdin.close()
            except BrokenPipeError:  # it exited already: its exit code says why
                pass
        for name, proc in zip(producers, procs, strict=True):
            assert proc.stdout is not None
            lines = proc.stdout.read().strip().splitlines()
            proc.wait()
            print(f"producer {name}: exit {proc.returncode} {lines[-1] if lines else '(no summary)'}", flush=True)
            failures += proc.returncode != 0
    finally:
        for proc in procs:  # after a failure here: no producer outlives the run
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        code = proxy.stop()
    print(f"proxy stopped: exit {code}", flush=True)
    records = read_back(args.uri, args.log)
    result = check(records, producers, args.records)
    runs = sum(1 for i, (name, _) in enumerate(records) if i == 0 or records[i - 1][0] != name)
    print(f"read back {len(records)} records: {runs} runs of one producer's records in a row (interleaved writes)")
    ok = bool(result["ok"]) and failures == 0 and code == 0
    print(
        f"FAN-IN {'OK' if ok else 'FAILED'} records={len(records)} producers={len(producers)} "
        f"per_producer={args.records} in_order={result['in_order']} duplicates={result['duplicates']} "
        f"missing={result['missing']}"
    )
    if code != 0:
        print(f"the proxy exited {code}; its log:\n{proxy.log_text()}", file=sys.stderr)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--uri", help="namespace URI (default: an embedded namespace in a new temporary directory)")
    p.add_argument("--log", default="fanin", help="the log to write (must not exist yet)")
    p.add_argument("--producers", type=int, default=4, help="producer processes")
    p.add_argument("--records", type=int, default=1000, help="records each producer writes")
    p.add_argument("--burst", type=int, default=50, help="records a producer writes before it flushes")
    p.add_argument("--produce", metavar="NAME", help=argparse.SUPPRESS)  # a producer process
    p.add_argument("--proxy-address", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.producers < 1 or args.records < 1 or args.burst < 1:
        p.error("--producers, --records and --burst must be at least 1")
    if args.produce is not None:
        return produce(args.produce, args.uri, args.proxy_address, args.log, args.records, args.burst)
    workdir = Path(tempfile.mkdtemp(prefix="dl-fanin-"))
    if args.uri is None:
        args.uri = f"distributedlog-local://{workdir / 'ns'}"
    try:
        return run(args, workdir)
    except (DLError, RuntimeError) as e:
        print(f"proxy_fan_in: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
