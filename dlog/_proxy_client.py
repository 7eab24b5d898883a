"""The client side of the write proxies in ``dlog``: ``dlog write --proxy`` (through :class:`dl_proxy.ProxyClient`)
and ``dlog proxy-status`` (each proxy's status and the streams it owns, from its handshake).

``--proxy`` without a value finds the proxies announced in the ``--uri`` ZooKeeper namespace; with
``HOST:PORT[,HOST:PORT...]`` it uses those. The auth token comes from ``--token-file`` or ``$DLOG_PROXY_TOKEN``;
``--tls-ca`` (and ``--tls-cert``/``--tls-key`` for a client certificate) for proxies that serve TLS. The token goes
in plaintext only to loopback proxies, or with ``--allow-plaintext-token``.

Errors name the CLI's way out (``--token-file``, ``dlog create``, ``--create``) instead of the Python API's. While
a command waits, the proxy client's first warning is shown and its later ones only with ``-v``: the final error
line says how it ended.
:mod:`dl_proxy` (and gRPC) is imported only when one of these runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dlog._common import State, out, pass_state
from storage.errors import DLError, InvalidArgumentError, LogNotFoundError, RequestDeniedError

if TYPE_CHECKING:
    from dl_proxy.client import ProxyClient

#: Environment variable with the proxies' shared auth token.
TOKEN_ENV = "DLOG_PROXY_TOKEN"
#: Value of a bare ``--proxy``: discover the proxies in the ``--uri`` namespace.
DISCOVER = "@zk"


#: How the CLI says where the token goes (a 403 names it).
TOKEN_HINT = f"give the proxies' shared token with --token-file FILE or ${TOKEN_ENV}"
#: The Python API's hints in the proxy client's errors, which the CLI replaces with its own.
_PYTHON_HINTS = re.compile(
    r"\s*\((?:[^()]*create_if_missing[^()]*|give the proxies' shared token: ProxyClient\(token=\.\.\.\))\)"
)


def client_options(*, timeout_help: str, timeout_default: float) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--token-file``, ``--tls-ca``, ``--tls-cert``, ``--tls-key``, ``--allow-plaintext-token`` and ``--timeout``
    (whose meaning, ``timeout_help``, is the command's own)."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed(
            [
                click.option(
                    "--token-file", type=click.Path(dir_okay=False), help=f"Auth token file (or ${TOKEN_ENV})."
                ),
                click.option("--tls-ca", type=click.Path(dir_okay=False), help="PEM CA certificate(s) to trust (TLS)."),
                click.option("--tls-cert", type=click.Path(dir_okay=False), help="PEM client certificate (TLS)."),
                click.option("--tls-key", type=click.Path(dir_okay=False), help="PEM client key (TLS)."),
                click.option(
                    "--allow-plaintext-token",
                    is_flag=True,
                    help="Send the token also to proxies not announced with TLS on a non-loopback address.",
                ),
                click.option(
                    "--timeout",
                    "timeout_s",
                    type=click.FloatRange(min=0, min_open=True),
                    default=timeout_default,
                    show_default=True,
                    help=timeout_help,
                ),
            ]
        ):
            f = opt(f)
        return f

    return decorate


def proxy_write_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``dlog write``'s ``--proxy [HOST:PORT,...]`` and the client options (they apply with ``--proxy`` only)."""
    f = client_options(
        timeout_help="Seconds each record may take to be acknowledged (with --proxy).", timeout_default=30.0
    )(f)
    return click.option(
        "--proxy", "proxy", is_flag=False, flag_value=DISCOVER, default=None, metavar="[HOST:PORT,...]",
        help="Write through write proxies: these (--proxy=H:P,...), or those announced in the --uri namespace "
        "(a bare --proxy, after NAME).",
    )(f)  # fmt: skip


class _FirstClientWarning(logging.Filter):
    """Lets through the first WARNING of the proxy client's loggers (``dl_proxy.*``), saying that later ones are
    hidden, and drops the later ones."""

    def __init__(self) -> None:
        super().__init__()
        self.shown = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not record.name.startswith("dl_proxy."):
            return True
        if self.shown:
            return False
        self.shown = True
        record.msg, record.args = f"{record.getMessage()} (later warnings hidden: dlog -v shows them)", None
        return True


@contextlib.contextmanager
def quiet_client_warnings(state: State) -> Iterator[None]:
    """While the proxy client works for a command: one warning line at most (every one with ``-v``). The client
    warns every second while records wait (for a proxy, an answer, buffer space); the command's own error line
    says how the wait ended."""
    if state.verbose > 0:
        yield
        return
    handlers = list(logging.getLogger().handlers)
    quiet = _FirstClientWarning()
    for h in handlers:
        h.addFilter(quiet)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(quiet)


def cli_message(e: DLError, state: State, name: str) -> str:
    """The proxy client's error ``e`` (writing log ``name``) as the CLI says it: the Python API's hints replaced by
    the CLI's options (a refused token: ``--token-file``; a missing log: ``dlog create``, ``--create``)."""
    text = _PYTHON_HINTS.sub("", str(e))
    if isinstance(e, RequestDeniedError) and "token" in text.lower():
        return f"{text}: {TOKEN_HINT}"
    if isinstance(e, LogNotFoundError):
        return f"{text}: create it first (dlog --uri {state.uri or 'URI'} create {name}), or write with --create"
    return text


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

    Prints ``wrote N records through proxies, last DLSN l,e,s``.

    Raises:
        click.ClickException: the first failed record's error (naming its line, as :func:`cli_message` says it);
            records before it are written.
        InvalidArgumentError: a bad address or an unreadable token file. What ProxyClient raises.
    """
    stdin = sys.stdin.buffer
    with (
        quiet_client_warnings(state),
        open_client(state, proxies, timeout_s=timeout_s, create_if_missing=create_log, **security) as client,
    ):
        _check_reachable(client, timeout_s)
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
                raise click.ClickException(
                    f"stdin line {lineno}: {cli_message(e, state, name)} ({lineno - 1} lines before it written)"
                ) from e
    if last is None:
        out("wrote 0 records")
    else:
        out(f"wrote {len(futures)} records through proxies, last DLSN {last}")


#: How long ``dlog write --proxy`` waits for some proxy to answer before it writes anything.
REACH_TIMEOUT_S = 3.0


def _check_reachable(client: Any, timeout_s: float) -> None:
    """Fail at once, before anything is read or sent, when no write proxy answers a handshake.

    Raises:
        click.ClickException: none is known, or none could be reached (nothing written).
    """
    from dl_proxy._transport import UNREACHABLE, failure_kind

    statuses = client.proxy_status(timeout_s=min(timeout_s, REACH_TIMEOUT_S))
    if not statuses:
        raise click.ClickException(f"no write proxy announced ({client.discovery.describe()}): nothing written")
    if all(st.error is not None and failure_kind(st.error) == UNREACHABLE for st in statuses):
        detail = "; ".join(f"{st.address}: {st.error}" for st in statuses[:3])
        raise click.ClickException(f"no write proxy reachable ({detail}): nothing written")


@click.command("proxy-status")
@click.option(
    "--proxy", "proxies", default=DISCOVER, metavar="HOST:PORT[,...]",
    help="Ask these proxies (default: those announced in the --uri namespace).",
)  # fmt: skip
@client_options(timeout_help="Seconds to wait for each proxy's answer.", timeout_default=10.0)
@pass_state
def proxy_status(
    state: State,
    proxies: str,
    timeout_s: float,
    token_file: str | None,
    tls_ca: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    allow_plaintext_token: bool,
) -> None:
    """Show every write proxy, its status and the streams it owns (from its handshake).

    Prints one line per proxy `PROXY host:port STATUS N streams`, then one line per owned stream
    `  stream NAME`. A proxy without an answer shows as UNREACHABLE, one that refused the handshake (a bad or
    missing token) as REFUSED, one not asked (the token would travel in plaintext) as NOT_SENT, each with the
    reason; exit 1 if none answers.
    """
    from dl_proxy._transport import NOT_SENT, REFUSED, failure_kind

    security = {"token_file": token_file, "tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key}
    with (
        quiet_client_warnings(state),
        open_client(
            state, proxies, timeout_s=timeout_s, allow_plaintext_token=allow_plaintext_token, **security
        ) as client,
    ):
        statuses = client.proxy_status(timeout_s=timeout_s)
    if not statuses:
        raise click.ClickException("no write proxy announced" + (f" in {state.uri}" if proxies == DISCOVER else ""))
    kinds = set()
    for s in statuses:
        if s.error is not None:
            kind = failure_kind(s.error)
            kinds.add(kind)
            reason = s.error.partition(": ")[2] if kind == NOT_SENT else s.error
            out(f"PROXY {s.address} {kind} ({reason})")
            continue
        out(f"PROXY {s.address} {s.status} {len(s.ownerships)} streams")
        for stream in sorted(s.ownerships):
            out(f"  stream {stream}")
    if all(s.error is not None for s in statuses):
        if REFUSED in kinds:
            raise click.ClickException(
                f"refused by every write proxy that answered (a bad or missing token): {TOKEN_HINT}"
            )
        if NOT_SENT in kinds:
            raise click.ClickException(
                "no write proxy asked: the token would travel in plaintext (use TLS, or --allow-plaintext-token)"
            )
        raise click.ClickException("no write proxy answered")


COMMANDS: tuple[click.Command, ...] = (proxy_status,)
