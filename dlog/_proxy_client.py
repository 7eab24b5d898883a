"""The client side of the write proxies in ``dlog``: ``dlog write --proxy`` (through :class:`dl_proxy.ProxyClient`)
and ``dlog proxy-status`` (each proxy's status and the streams it owns, from its handshake).

``--proxy`` without a value finds the proxies announced in the ``--uri`` ZooKeeper namespace; with
``HOST:PORT[,HOST:PORT...]`` it uses those. The auth token comes from ``--token-file`` or ``$DLOG_PROXY_TOKEN``;
``--tls-ca`` (and ``--tls-cert``/``--tls-key`` for a client certificate) for proxies that serve TLS.
:mod:`dl_proxy` (and gRPC) is imported only when one of these runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dlog._common import State, out, pass_state
from storage.errors import DLError, InvalidArgumentError

if TYPE_CHECKING:
    from dl_proxy.client import ProxyClient

#: Environment variable with the proxies' shared auth token.
TOKEN_ENV = "DLOG_PROXY_TOKEN"
#: Value of a bare ``--proxy``: discover the proxies in the ``--uri`` namespace.
DISCOVER = "@zk"


def security_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--token-file``, ``--tls-ca``, ``--tls-cert``, ``--tls-key``, ``--timeout``."""
    for opt in reversed(
        [
            click.option("--token-file", type=click.Path(dir_okay=False), help=f"Auth token file (or ${TOKEN_ENV})."),
            click.option("--tls-ca", type=click.Path(dir_okay=False), help="PEM CA certificate(s) to trust (TLS)."),
            click.option("--tls-cert", type=click.Path(dir_okay=False), help="PEM client certificate (TLS)."),
            click.option("--tls-key", type=click.Path(dir_okay=False), help="PEM client key (TLS)."),
            click.option(
                "--timeout",
                "timeout_s",
                type=click.FloatRange(min=0, min_open=True),
                default=30.0,
                show_default=True,
                help="Seconds each record may take to be acknowledged (with --proxy).",
            ),
        ]
    ):
        f = opt(f)
    return f


def proxy_write_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``dlog write``'s ``--proxy [HOST:PORT,...]`` and the security options (they apply with ``--proxy`` only)."""
    f = security_options(f)
    return click.option(
        "--proxy", "proxy", is_flag=False, flag_value=DISCOVER, default=None, metavar="[HOST:PORT,...]",
        help="Write through write proxies: these (--proxy=H:P,...), or those announced in the --uri namespace "
        "(a bare --proxy, after NAME).",
    )(f)  # fmt: skip


def open_client(state: State, proxies: str, **opts: Any) -> ProxyClient:
    """A ProxyClient for ``--proxy`` (``DISCOVER``: the ``--uri`` namespace's announced proxies).

    Raises:
        InvalidArgumentError: a bad address or an unreadable token file. What ProxyClient raises.
    """
    from dl_proxy.client import ProxyClient

    token_file = opts.pop("token_file", None)
    token = os.environ.get(TOKEN_ENV) or None
    if token_file:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise InvalidArgumentError(f"cannot read the token file {token_file}: {e}") from e
    tls = bool(opts.get("tls_ca") or opts.get("tls_cert"))
    if proxies == DISCOVER:
        return ProxyClient(uri=state.require_uri(), token=token, tls=tls, **opts)
    addresses = [a.strip() for a in proxies.split(",") if a.strip()]
    return ProxyClient(proxies=addresses, token=token, tls=tls, **opts)


def write_through_proxies(
    state: State, name: str, proxies: str, *, create_log: bool, timeout_s: float, **security: Any
) -> None:
    """``dlog write --proxy``: one record per stdin line through the proxies; waits for every acknowledgement.

    Prints ``wrote N records through proxies, last DLSN l,e,s``. Raises the first failed record's DLError
    (naming its line); records before it are written.
    """
    stdin = sys.stdin.buffer
    with open_client(state, proxies, timeout_s=timeout_s, create_if_missing=create_log, **security) as client:
        futures = []
        for line in stdin:
            payload = line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line
            futures.append(client.write(name, payload))
        client.flush()
        last = None
        for lineno, fut in enumerate(futures, 1):
            try:
                last = fut.result()
            except DLError as e:
                raise click.ClickException(f"stdin line {lineno}: {e} ({lineno - 1} lines before it written)") from e
    if last is None:
        out("wrote 0 records")
    else:
        out(f"wrote {len(futures)} records through proxies, last DLSN {last}")


@click.command("proxy-status")
@click.option(
    "--proxy", "proxies", default=DISCOVER, metavar="HOST:PORT[,...]",
    help="Ask these proxies (default: those announced in the --uri namespace).",
)  # fmt: skip
@security_options
@pass_state
def proxy_status(
    state: State,
    proxies: str,
    timeout_s: float,
    token_file: str | None,
    tls_ca: str | None,
    tls_cert: str | None,
    tls_key: str | None,
) -> None:
    """Show every write proxy, its status and the streams it owns (from its handshake).

    Prints one line per proxy `PROXY host:port STATUS N streams`, then one line per owned stream
    `  stream NAME`. An unreachable proxy shows as UNREACHABLE with the reason; exit 1 if none answers.
    """
    security = {"token_file": token_file, "tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key}
    with open_client(state, proxies, timeout_s=timeout_s, **security) as client:
        statuses = client.proxy_status(timeout_s=min(timeout_s, 10.0))
    if not statuses:
        raise click.ClickException("no write proxy announced" + (f" in {state.uri}" if proxies == DISCOVER else ""))
    for s in statuses:
        if s.error is not None:
            out(f"PROXY {s.address} UNREACHABLE ({s.error})")
            continue
        out(f"PROXY {s.address} {s.status} {len(s.ownerships)} streams")
        for stream in sorted(s.ownerships):
            out(f"  stream {stream}")
    if all(s.error is not None for s in statuses):
        raise click.ClickException("no write proxy answered")


COMMANDS: tuple[click.Command, ...] = (proxy_status,)
