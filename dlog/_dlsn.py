"""``dlog dlsn encode`` / ``dlog dlsn decode``: DLSNs between the text form and DistributedLog's base64 form."""

from __future__ import annotations

import binascii
from typing import Any

import click

from dlog._common import CONTEXT_SETTINGS, DLSN_TYPE, out
from storage.errors import InvalidArgumentError
from storage.formats.dlsn import DLSN


class SerializedDLSNType(click.ParamType):
    """A DLSN in DistributedLog's base64 form (``DLSN.serialize``)."""

    name = "BASE64"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> DLSN:
        if isinstance(value, DLSN):
            return value
        try:
            return DLSN.deserialize(str(value))
        except InvalidArgumentError as e:
            self.fail(str(e), param, ctx)


SERIALIZED_DLSN_TYPE = SerializedDLSNType()


@click.group(context_settings=CONTEXT_SETTINGS)
def dlsn() -> None:
    """Convert DLSNs between the text form l,e,s and DistributedLog's base64 form (no --uri needed)."""


@dlsn.command()
@click.argument("value", metavar="L,E,S", type=DLSN_TYPE)
@click.option("--hex", "hex_bytes", is_flag=True, help="Print the 25 serialized bytes as hex instead.")
def encode(value: DLSN, hex_bytes: bool) -> None:
    """Print the base64 form of a DLSN (DLSN.serialize), e.g. 1,0,0 -> AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==."""
    out(binascii.hexlify(value.to_bytes()).decode() if hex_bytes else value.serialize())


@dlsn.command()
@click.argument("value", metavar="BASE64", type=SERIALIZED_DLSN_TYPE)
def decode(value: DLSN) -> None:
    """Print the text form l,e,s of a base64-serialized DLSN (DLSN.deserialize)."""
    out(str(value))


COMMANDS: tuple[click.Command, ...] = (dlsn,)
