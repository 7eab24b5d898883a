"""Takeover of a large stream by another write proxy: how long after the owner dies the stream serves again, when
its last segment holds ``--gib`` GiB (1 by default) written by idempotent producers.

Run::

    .venv/bin/python bench/bench_takeover.py [--gib 1] [--session 2] [--kills 3] [--dir DIR]

Setup: a private ZooKeeper server (tests.zk), a namespace bound to a segment directory on this machine's disk, two
``dlog proxy`` processes with a ``--session`` seconds ZooKeeper session and no segment roll (size or time) below
the data written, and one :class:`dl_proxy.ProxyClient` (its default batching, 8 KiB records) filling one log
through the first proxy. Then ``--kills`` times: SIGKILL the log's owner and time, from the kill, (1) the first
acknowledgement of a write sent right after it through the other proxy (a takeover waits for the dead owner's
session to expire, then recovers the log: fences the segment, reads its last entry, rebuilds the producers'
state), and (2) the rebuild alone (the new owner's "acquired stream" log line). The killed proxy is restarted
between kills, and a little more is written each time.

Beside it, in the same run: reading every control record of the segment, which is what a rebuild that starts
at the segment's first entry (not at the last producer snapshot) reads.

Target: the takeover within the session timeout + 1 s.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from _common import GIB, MIB, REPO, make_base, median, remove_base, yes_no

import storage

READY = "PROXY listening on "
RECORD = 8 * 1024
ACQUIRED = re.compile(r"acquired stream '([^']+)': (\d+) producers from (\d+) markers in ([0-9.]+)s")


class Proxy:
    """A ``dlog -v --uri URI proxy`` process; its stderr is collected (the acquisition lines)."""

    def __init__(self, uri: str, session_s: int, log_path: Path, listen: str) -> None:
        conf = [f"zkSessionTimeoutSeconds={session_s}", "maxLogSegmentBytes=68719476736", "logSegmentRollingMinutes=0"]
        cmd = [sys.executable, "-m", "dlog", "-v", "--uri", uri, "proxy", "--listen", listen]
        for c in conf:
            cmd += ["--set", c]
        self.log_path = log_path
        self._err = log_path.open("w")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=self._err, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith(READY):
            self.proc.kill()
            raise RuntimeError(f"dlog proxy did not start: {line!r} (see {log_path})")
        self.address = line[len(READY) :].strip()

    def acquisitions(self, stream: str) -> list[tuple[int, int, float]]:
        """(producers, markers, seconds) of every acquisition of ``stream`` it logged."""
        text = self.log_path.read_text(errors="replace")
        return [(int(p), int(m), float(s)) for name, p, m, s in ACQUIRED.findall(text) if name == stream]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()


def fill(client: object, stream: str, nbytes: int) -> float:
    """Write ``nbytes`` of 8 KiB records to ``stream``; seconds taken."""
    from dl_proxy import ProxyClient

    assert isinstance(client, ProxyClient)
    payload = bytes(range(256)) * (RECORD // 256)
    t0 = time.perf_counter()
    futs = []
    for i in range(nbytes // RECORD):
        futs.append(client.write(stream, payload))
        if len(futs) >= 4096:
            for f in futs:
                f.result(timeout=300)
            futs = []
            if i and i % (128 * MIB // RECORD) == 0:
                print(f"  {i * RECORD / GIB:.2f} GiB written", file=sys.stderr, flush=True)
    for f in futs:
        f.result(timeout=300)
    return time.perf_counter() - t0


def scan_markers(uri: str, stream: str) -> tuple[float, int]:
    """Seconds to read every control record of the log's first segment (the large one), and their count."""
    with storage.open_namespace(uri) as ns, ns.open_log(stream) as dlm:
        seg = dlm.log_segments()[0]
        t0 = time.perf_counter()
        n = sum(1 for _ in dlm.control_records(seg))
        return time.perf_counter() - t0, n


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--gib", type=float, default=1.0, help="GiB in the log's last segment")
    parser.add_argument("--session", type=int, default=2, help="the proxies' ZooKeeper session timeout (s)")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)

    from dl_proxy import ProxyClient
    from tests.zk import ZooKeeperServer, free_port

    base, created = make_base("takeover", args.dir)
    server = ZooKeeperServer(workdir=base / "zk", port=free_port())
    proxies: list[Proxy] = []
    try:
        server.start()
        uri = f"distributedlog://{server.hosts}/bench-{uuid.uuid4().hex[:12]}"
        storage.bind_namespace(uri, segments=f"file://{base / 'segments'}")
        stream = "big"
        with storage.open_namespace(uri) as ns:
            ns.create_log(stream)
        listens = [f"127.0.0.1:{free_port()}" for _ in range(2)]
        proxies = [Proxy(uri, args.session, base / f"proxy-{i}.log", listens[i]) for i in range(2)]
        takeovers: list[float] = []
        rebuilds: list[float] = []
        markers: list[int] = []
        with ProxyClient(proxies=[proxies[0].address], timeout_s=300) as filler:
            print(f"writing {args.gib} GiB through one proxy ...", file=sys.stderr, flush=True)
            fill_s = fill(filler, stream, int(args.gib * GIB))
        addresses = [p.address for p in proxies]
        with ProxyClient(proxies=addresses, timeout_s=120, request_timeout_s=1.0) as client:
            client.write(stream, b"warm").result(timeout=120)
            for k in range(args.kills):
                owner = client.owners.get(stream)
                victim = next(p for p in proxies if p.address == owner)
                survivor = next(p for p in proxies if p is not victim)
                before = len(survivor.acquisitions(stream))
                killed = time.monotonic()
                victim.proc.kill()
                victim.proc.wait()
                client.write(stream, b"after-kill-%d" % k).result(timeout=120)
                takeovers.append(time.monotonic() - killed)
                deadline = time.monotonic() + 30
                while len(survivor.acquisitions(stream)) <= before and time.monotonic() < deadline:
                    time.sleep(0.05)
                got = survivor.acquisitions(stream)[before:]
                if got:
                    rebuilds.append(got[-1][2])
                    markers.append(got[-1][1])
                i = proxies.index(victim)
                victim.stop()
                proxies[i] = Proxy(uri, args.session, base / f"proxy-{i}-{k}.log", listens[i])  # the same address
                fill(client, stream, 8 * MIB)
        scan_s, scan_n = scan_markers(uri, stream)
        target = args.session + 1.0
        print(
            f"| last segment | session | takeover p50 / max | rebuild p50 / max (markers) | target ≤ {target:.0f} s |"
        )
        print("|---|---|---|---|---|")
        print(
            f"| {args.gib:.2f} GiB ({fill_s:.0f} s to write) | {args.session} s | {median(takeovers):.2f} / "
            f"{max(takeovers):.2f} s | {median(rebuilds) if rebuilds else float('nan'):.3f} / "
            f"{max(rebuilds) if rebuilds else float('nan'):.3f} s ({max(markers) if markers else 0}) | "
            f"{yes_no(max(takeovers) <= target)} |"
        )
        print(
            f"\nReading every control record of the segment instead (a rebuild from its first entry): "
            f"{scan_s:.2f} s for {scan_n} markers."
        )
        return 0
    finally:
        for p in proxies:
            p.stop()
        server.stop()
        remove_base(base, created)


if __name__ == "__main__":
    sys.exit(main())
