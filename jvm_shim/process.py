"""The gateway process (``python -m jvm_shim``, ``dlog gateway``): :func:`run` serves a gateway
(:func:`jvm_shim.server.serve`) and prints the GATEWAY line, handles signals, the parent watch and the shutdown
watchdog; :func:`main` is its command line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from jvm_shim.server import DEFAULT_ADDRESS, SHUTDOWN_GRACE_S, TOKEN_ENV, serve
from storage import Config
from storage.errors import DLError

log = logging.getLogger("jvm_shim.gateway")


# --- the process --------------------------------------------------------------------------------
def _watch_parent(stop: threading.Event) -> None:
    """Read stdin until EOF (the parent died or closed the pipe), then ask the gateway to stop."""
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    log.info("stdin closed: the parent is gone, stopping")
    stop.set()


def _exit_later(seconds: float) -> None:
    def fire() -> None:
        time.sleep(seconds)
        log.error("shutdown did not finish in %.0f s: exiting anyway", seconds)
        os._exit(1)

    threading.Thread(target=fire, name="gateway-shutdown-watchdog", daemon=True).start()


def run(
    uri: str | None,
    *,
    port: int = 0,
    address: str = DEFAULT_ADDRESS,
    allow_remote: bool = False,
    parent_watch: bool = False,
    conf: Config | Mapping[str, object] | None = None,
    out: Callable[[str], None] | None = None,
) -> int:
    """The gateway process: serve until ``gateway.shutdown``, SIGTERM/SIGINT or (``parent_watch``)
    EOF on stdin, then close everything; returns the exit code (0).

    The auth token is ``$DLOG_GATEWAY_TOKEN`` when set, else a fresh ``secrets.token_hex(32)``. Once the
    server listens, exactly one line goes to stdout (through ``out``, default ``print``), flushed::

        GATEWAY port=<port> token=<token>     (token=env when it came from the environment)

    Raises:
        DLError: as :func:`serve` (before anything is printed).
    """
    env_token = os.environ.get(TOKEN_ENV, "")
    token = env_token or secrets.token_hex(32)
    py4j_log = logging.getLogger("py4j")
    if py4j_log.level == logging.NOTSET and logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # py4j logs every call at INFO and expected conditions (a refused token, a port in use: reported
        # here anyway) as ERROR with tracebacks; it speaks only when debugging
        py4j_log.setLevel(logging.CRITICAL)
    server = serve(uri, port=port, address=address, auth_token=token, allow_remote=allow_remote, conf=conf)
    stop = server.gateway.shutdown_requested
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    with contextlib.ExitStack() as cleanup:
        cleanup.callback(server.stop)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, on_signal)
            cleanup.callback(lambda: [signal.signal(s, h) for s, h in previous.items()])
        if parent_watch:
            threading.Thread(target=_watch_parent, args=(stop,), name="gateway-parent-watch", daemon=True).start()
        line = f"GATEWAY port={server.port} token={'env' if env_token else token}"
        if out is None:
            print(line, flush=True)
        else:
            out(line)
        while not stop.wait(1.0):
            pass
        log.info("stopping the gateway")
        _exit_later(SHUTDOWN_GRACE_S)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m jvm_shim``: see :func:`run`; ``--help`` for the options."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m jvm_shim",
        description="Serve DistributedLog's storage API to Java programs over py4j (the jvm_shim gateway). "
        f"Prints 'GATEWAY port=<port> token=<token>' once listening; the token is ${TOKEN_ENV} when set "
        "(then printed as token=env), else generated.",
    )
    parser.add_argument("--uri", "-u", default=os.environ.get("DLOG_URI"), help="namespace URI (default $DLOG_URI)")
    parser.add_argument("--conf", "-c", metavar="FILE", help="DistributedLog properties file for the namespace")
    parser.add_argument("--port", "-p", type=int, default=0, help="port to listen on (default 0: a free one)")
    parser.add_argument("--address", default=DEFAULT_ADDRESS, help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--allow-remote", action="store_true", help="allow a non-loopback --address (the token is sent in clear)"
    )
    parser.add_argument(
        "--parent-watch", action="store_true", help="stop when stdin reaches EOF (the parent process died)"
    )
    parser.add_argument("--verbose", "-v", action="count", default=0, help="log more to stderr (-v info, -vv debug)")
    ns = parser.parse_args(argv)
    setup_logging(ns.verbose)
    try:
        conf = Config.load(ns.conf) if ns.conf else None
        return run(
            ns.uri,
            port=ns.port,
            address=ns.address,
            allow_remote=ns.allow_remote,
            parent_watch=ns.parent_watch,
            conf=conf,
        )
    except DLError as e:
        print(f"jvm_shim: error: {str(e) or type(e).__name__}", file=sys.stderr)
        return 1


def setup_logging(verbose: int) -> None:
    """Log to stderr (stdout carries only the GATEWAY line): warnings by default."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("jvm_shim: %(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbose < 2:  # kazoo reports every reconnect attempt at warning level with tracebacks
        logging.getLogger("kazoo").setLevel(logging.ERROR)
