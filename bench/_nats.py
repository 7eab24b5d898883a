"""NATS JetStream as bench/bench_proxy.py's fan-in peer: a private ``nats-server`` (Debian's package) and its producers.

The server runs on 127.0.0.1 at a free port with JetStream on and its file store in a directory of the benchmark
(``-js -sd DIR``); with ``sync_always`` it is started from a configuration file holding ``sync_interval: always``
(fsync before each acknowledgement, a key nats-server only knows from 2.10 on: an older server refuses to start and
:class:`NatsServer` raises :class:`NatsUnsupportedError` with its message). Each benchmark run publishes to a FILE
stream of its own with message-id deduplication (the ``Nats-Msg-Id`` header, a two-minute duplicate window).

Producers are processes of their own, with either client, so the peer is measured at its best:

* ``nats-py`` (``python bench/_nats.py --producer JSON``): one connection each, publishing 1 KiB messages with
  ``js.publish`` and waiting for every acknowledgement, ``window`` publishes in flight (``window`` asyncio tasks, each
  publishing the producer's next message when its previous one is acknowledged);
* ``nats.go``, NATS' own Go client (``bench/nats_go/main.go``, built once per run from Debian's ``golang-go`` and
  ``golang-github-nats-io-go-nats-dev``, offline): ``PublishMsgAsync`` with at most ``window`` unacknowledged.

Each prints the same JSON summary as bench_proxy.py's producers: ``start``, ``end`` (wall clock), ``records``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import PAYLOAD, REPO, median

#: messages in flight per producer process (the proxy client has up to 2 batches of up to 1000 records in flight)
DEFAULT_WINDOW = 256
DUPLICATE_WINDOW_S = 120.0
START_TIMEOUT_S = 30.0
#: the clients every fan-in row is measured with
CLIENTS = ("nats-py", "nats.go")
GO_SOURCE = Path(__file__).resolve().parent / "nats_go" / "main.go"
#: where Debian's golang-*-dev packages put their sources (GOPATH mode: no module download)
DEBIAN_GOPATH = "/usr/share/gocode"


class NatsUnsupportedError(RuntimeError):
    """The installed nats-server refuses a configuration this benchmark asked for (e.g. ``sync_interval``)."""


def nats_server_binary() -> str:
    """Path of ``nats-server`` (Debian installs it in /usr/sbin). Raises RuntimeError when it is not installed."""
    found = shutil.which("nats-server") or shutil.which("nats-server", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise RuntimeError("nats-server is not installed (make nats, or apt-get install nats-server)")
    return found


def nats_server_version() -> str:
    """``v2.9.10`` or the like, from ``nats-server --version``."""
    out = subprocess.run([nats_server_binary(), "--version"], capture_output=True, text=True, check=True).stdout
    return out.strip().rsplit(" ", 1)[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class NatsServer:
    """A private ``nats-server -js`` on 127.0.0.1, its store and log under ``workdir``.

    Raises NatsUnsupportedError when the server rejects its configuration, RuntimeError when it exits or does not
    accept connections within START_TIMEOUT_S.
    """

    def __init__(self, workdir: Path, sync_always: bool = False) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.sync_always = sync_always
        store = workdir / "jetstream"
        cmd = [nats_server_binary(), "-a", "127.0.0.1", "-p", str(self.port)]
        if sync_always:
            conf = workdir / "nats.conf"
            conf.write_text(f'jetstream {{\n  store_dir: "{store}"\n  sync_interval: always\n}}\n')
            cmd += ["-c", str(conf)]
        else:
            cmd += ["-js", "-sd", str(store)]
        self.log_path = workdir / "nats-server.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        logged = time.monotonic() + 1.0
        while True:
            if self.proc.poll() is not None:
                text = self.log_path.read_text(errors="replace").strip()
                if "unknown field" in text:
                    raise NatsUnsupportedError(text.splitlines()[-1] if text else "unknown field")
                raise RuntimeError(f"nats-server exited ({self.proc.returncode}): {text[-500:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                pass
            now = time.monotonic()
            if now > deadline:
                self.stop()
                raise RuntimeError(f"nats-server did not listen on port {self.port} within {START_TIMEOUT_S:g} s")
            if now > logged:
                print(f"waiting for nats-server to listen on 127.0.0.1:{self.port} ...", file=sys.stderr, flush=True)
                logged = now + 5.0
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def _add_stream(url: str, name: str, subject: str) -> None:
    import nats
    from nats.js.api import StorageType, StreamConfig

    nc = await nats.connect(url)
    try:
        config = StreamConfig(
            name=name, subjects=[subject], storage=StorageType.FILE, duplicate_window=DUPLICATE_WINDOW_S
        )
        await nc.jetstream().add_stream(config)
    finally:
        await nc.close()


def create_stream(url: str, name: str, subject: str) -> None:
    """A FILE stream ``name`` on ``subject`` with a DUPLICATE_WINDOW_S message-id duplicate window."""
    asyncio.run(_add_stream(url, name, subject))


async def _stream_messages(url: str, name: str) -> int:
    import nats

    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().stream_info(name)
        return int(info.state.messages)
    finally:
        await nc.close()


def stream_messages(url: str, name: str) -> int:
    """How many messages stream ``name`` holds."""
    return asyncio.run(_stream_messages(url, name))


def build_go_producer(workdir: Path) -> Path:
    """Build ``bench/nats_go/main.go`` into ``workdir`` (offline, from Debian's Go packages); the binary's path.

    Raises RuntimeError naming the missing packages when the Go toolchain or nats.go is not installed, or with the
    compiler's output when the build fails."""
    go = shutil.which("go")
    if go is None or not Path(DEBIAN_GOPATH, "src/github.com/nats-io/nats.go").is_dir():
        raise RuntimeError("the Go producer needs golang-go and golang-github-nats-io-go-nats-dev (make nats)")
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "nats_go_producer"
    env = dict(os.environ, GO111MODULE="off", GOPATH=DEBIAN_GOPATH, GOFLAGS="", GOCACHE=str(workdir / "go-cache"))
    done = subprocess.run([go, "build", "-o", str(out), str(GO_SOURCE)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"go build of {GO_SOURCE} failed: {done.stderr.strip()}")
    return out


def run_nats_producers(
    url: str, subject: str, producers: int, records: int, window: int = DEFAULT_WINDOW, go_binary: Path | None = None
) -> list[dict[str, Any]]:
    """``producers`` processes publishing ``records`` messages in all to ``subject`` (nats-py, or the Go producer
    ``go_binary``); their JSON summaries. Raises RuntimeError when a producer fails."""
    go = time.time() + 3.0  # every producer starts publishing at this wall-clock time (after its imports)
    procs = []
    for i in range(producers):
        args = {"url": url, "subject": subject, "records": records // producers, "window": window, "go": go,
                "producer": f"p{i}-{uuid.uuid4().hex[:8]}"}  # fmt: skip
        if go_binary is not None:
            cmd = [str(go_binary), json.dumps(args)]
        else:
            cmd = [sys.executable, __file__, "--producer", json.dumps(args)]
        procs.append(subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"a NATS producer failed (exit {p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


async def _produce(args: dict[str, Any]) -> dict[str, Any]:
    import nats

    n, window, subject, producer = int(args["records"]), int(args["window"]), args["subject"], args["producer"]
    nc = await nats.connect(args["url"])
    try:
        js = nc.jetstream()
        await js.publish(subject, PAYLOAD, headers={"Nats-Msg-Id": f"{producer}-warmup"})  # connect: untimed
        await asyncio.sleep(max(0.0, float(args["go"]) - time.time()))
        next_index = 0
        duplicates = 0

        async def worker() -> None:
            nonlocal next_index, duplicates
            while next_index < n:
                i = next_index
                next_index += 1
                ack = await js.publish(subject, PAYLOAD, timeout=60, headers={"Nats-Msg-Id": f"{producer}-{i}"})
                duplicates += bool(ack.duplicate)

        t0 = time.time()
        await asyncio.gather(*(worker() for _ in range(min(window, max(n, 1)))))
        t1 = time.time()
    finally:
        await nc.close()
    return {"start": t0, "end": t1, "records": n, "duplicates": duplicates}


def producer_main(spec: str) -> int:
    """One producer process: publish its messages, wait for every acknowledgement, print a JSON summary."""
    print(json.dumps(asyncio.run(_produce(json.loads(spec)))))
    return 0


def fanin(
    workdir: Path, counts: Sequence[int], records: int, reps: int, window: int = DEFAULT_WINDOW
) -> tuple[list[tuple[bool, str, int, float]], list[str]]:
    """Aggregate throughput of ``counts`` producer processes into one stream, measured as bench_proxy.py's proxy
    rows (records / (last producer done - first producer started), the median of ``reps``), with each client of
    CLIENTS, on the default server and on one with ``sync_interval: always``. Rows ``(sync_always, client,
    producers, records/s)``, and notes (a variant the server does not support). Raises RuntimeError when a stream
    does not hold exactly the published messages, or when the Go producer cannot be built."""
    rows: list[tuple[bool, str, int, float]] = []
    notes: list[str] = []
    go_binary = build_go_producer(workdir / "go")
    for sync_always in (False, True):
        try:
            server = NatsServer(workdir / ("sync-always" if sync_always else "default"), sync_always)
        except NatsUnsupportedError as e:
            why = str(e).rsplit(": ", 1)[-1]  # e.g. unknown field "sync_interval"
            notes.append(f"NATS with fsync before each ack (`sync_interval: always`, nats-server >= 2.10) not "
                         f"measured: the installed nats-server {nats_server_version()} refuses it ({why})")  # fmt: skip
            continue
        try:
            for client in CLIENTS:
                for producers in counts:
                    rates = []
                    for r in range(reps):
                        tag = f"{client.replace('.', '').replace('-', '')}_{producers}_{r}"
                        name, subject = f"FANIN_{tag}", f"fanin.{tag}"
                        create_stream(server.url, name, subject)
                        label = "sync_interval: always" if sync_always else "default sync"
                        print(f"{producers} producers, NATS JetStream ({label}, {client}) ...", file=sys.stderr,
                              flush=True)  # fmt: skip
                        binary = go_binary if client == "nats.go" else None
                        got = run_nats_producers(server.url, subject, producers, records, window, binary)
                        total = sum(g["records"] for g in got)
                        stored = stream_messages(server.url, name) - producers  # less one warm-up per producer
                        if stored != total or any(g["duplicates"] for g in got):
                            raise RuntimeError(f"NATS stream {name} holds {stored} messages, {total} published")
                        rates.append(total / (max(g["end"] for g in got) - min(g["start"] for g in got)))
                    rows.append((sync_always, client, producers, median(rates)))
        finally:
            server.stop()
    return rows, notes


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "--producer":
        return producer_main(argv[1])
    print("usage: _nats.py --producer JSON (run by bench/bench_proxy.py)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
