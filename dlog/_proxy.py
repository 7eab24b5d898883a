"""``dlog proxy``: run one write proxy (:mod:`dl_proxy.server`) for the namespace of ``--uri``.

gRPC and :mod:`dl_proxy` are imported only when the command runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from dlog._common import State, flush_stdout, out, pass_state
from storage.config import Config
from storage.errors import InvalidArgumentError

TOKEN_ENV = "DLOG_PROXY_TOKEN"


def _overrides(conf: Config, settings: tuple[str, ...]) -> Config:
    values: dict[str, object] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        values[key.strip()] = value.strip()
    return conf.with_overrides(values) if values else conf


@click.command()
@click.option(
    "--listen",
    default="127.0.0.1:0",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to serve on (port 0: a free one). A non-loopback host needs --tls-cert/--tls-key and a token; "
    "a wildcard one (0.0.0.0, [::]) needs --advertise.",
)
@click.option(
    "--advertise",
    metavar="HOST:PORT",
    help="Address clients reach this proxy at: announced, and named in redirects (default: the listen address; "
    "port 0: the port listened on).",
)
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="Server certificate (PEM).")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="Server private key (PEM).")
@click.option("--tls-client-ca", type=click.Path(dir_okay=False), help="Require client certificates signed by this CA.")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help=f"File holding the shared auth token (default: ${TOKEN_ENV}); clients send 'authorization: Bearer TOKEN'.",
)
@click.option("--threads", type=click.IntRange(1, 4096), default=128, show_default=True, help="Request threads.")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Configuration override (repeatable), e.g. --set zkSessionTimeoutSeconds=1.",
)
@pass_state
def proxy(
    state: State,
    listen: str,
    advertise: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
    token_file: str | None,
    threads: int,
    settings: tuple[str, ...],
) -> None:
    """Run a write proxy (DistributedLog's write proxy) for the namespace of --uri.

    A ZooKeeper namespace may have several proxies, which share its streams and fail over to one another; an
    embedded namespace (distributedlog-local://) is served by one proxy on its machine.

    Once serving, prints one line: PROXY listening on HOST:PORT. Producers write through it with
    dl_proxy.ProxyClient or `dlog write --proxy`. Runs until SIGTERM/SIGINT, then stops accepting, releases
    every stream it owns (another proxy takes over at once) and exits 0.
    """
    from dl_proxy.server import TlsFiles, read_token, run

    if (tls_cert is None) != (tls_key is None):
        raise InvalidArgumentError("--tls-cert and --tls-key go together")
    if tls_client_ca and tls_cert is None:
        raise InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key")
    tls = (
        TlsFiles(Path(tls_cert), Path(tls_key), Path(tls_client_ca) if tls_client_ca else None)
        if tls_cert is not None and tls_key is not None
        else None
    )

    def print_line(line: str) -> None:
        out(line)
        flush_stdout()

    run(
        state.require_uri(),
        _overrides(state.conf(), settings),
        out=print_line,
        listen=listen,
        tls=tls,
        token=read_token(token_file),
        threads=threads,
        advertise=advertise,
    )


COMMANDS: tuple[click.Command, ...] = (proxy,)
