"""``dlog gateway``: serve the namespace to Java programs over py4j (the :mod:`jvm_shim` gateway)."""

from __future__ import annotations

import click

from dlog._common import State, flush_stdout, out, pass_state


@click.command()
@click.option(
    "--port",
    "-p",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on (0: a free one, printed on the GATEWAY line).",
)
@click.option("--address", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --address (the py4j token then travels in clear over the network).",
)
@click.option("--parent-watch", is_flag=True, help="Stop when stdin reaches EOF (the parent process died).")
@pass_state
def gateway(state: State, port: int, address: str, allow_remote: bool, parent_watch: bool) -> None:
    """Serve the namespace of --uri to Java programs (jvm_shim's py4j gateway).

    Once listening, prints one line: GATEWAY port=<port> token=<token>. The auth token is
    $DLOG_GATEWAY_TOKEN when set (printed as token=env), else generated. Several JVMs can share the
    gateway; without --uri each client names its namespace. Serves until a client calls
    gateway.shutdown, SIGTERM/SIGINT, or (--parent-watch) EOF on stdin; then closes every writer,
    reader and namespace and exits 0.
    """
    from jvm_shim.process import run  # py4j is imported only by this command

    def print_line(line: str) -> None:
        out(line)
        flush_stdout()

    run(
        state.uri,
        port=port,
        address=address,
        allow_remote=allow_remote,
        parent_watch=parent_watch,
        conf=state.conf(),
        out=print_line,
    )


COMMANDS: tuple[click.Command, ...] = (gateway,)
