"""Shared hypothesis settings and strategies for the format tests."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: Settings for fuzz tests: no deadline (slow 2-core CI machines), a fixed example budget.
FUZZ = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
#: Settings for round-trip properties.
PROPERTY = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])

int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)
int32s = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` damaged by one of: truncation, a flipped byte, an overwritten 4-byte window, appended garbage."""
    if not data:
        return draw(st.binary(max_size=64))
    kind = draw(st.sampled_from(["truncate", "flip", "window", "append"]))
    buf = bytearray(data)
    if kind == "truncate":
        return bytes(buf[: draw(st.integers(0, len(buf) - 1))])
    if kind == "flip":
        i = draw(st.integers(0, len(buf) - 1))
        buf[i] ^= draw(st.integers(1, 255))
        return bytes(buf)
    if kind == "window":
        i = draw(st.integers(0, len(buf) - 1))
        buf[i : i + 4] = draw(st.binary(min_size=4, max_size=4))
        return bytes(buf)
    return bytes(buf) + draw(st.binary(min_size=1, max_size=16))
