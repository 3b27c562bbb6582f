"""The zone's SOA serial: a clock of TICKS steps a second, in RFC 1982 arithmetic.

The serial at unix time ``t`` is ``EPOCH + floor((t - EPOCH) * TICKS)`` modulo
2**32: equal to unix seconds at EPOCH and above them after it, so a server that
counted unix seconds before is followed by a higher serial. Steps are at most
one a tick and never ahead of the clock (see app.Sink), so every serial a run
handed out is at most the clock's; a (re)start steps a second past its clock
(see Cache), above every serial of a previous run whose clock agreed with it to
within a second. Serials are compared as RFC 1982 says, so the wrap of the 32
bits (every 2**32 / TICKS seconds: 6.8 years) is one more step; a secondary
whose serial is more than 2**31 ticks (3.4 years) old cannot tell ours newer.
"""

from __future__ import annotations

import math

TICKS = 20  # serial steps a second at most: an update waits at most 1/TICKS s for its step
EPOCH = 1_796_000_000  # 2026-11-30 UTC: here the serial equals unix seconds
HALF = 2**31


def at(unix: float) -> int:
    """The serial of the clock at ``unix`` (seconds)."""
    return (EPOCH + math.floor((unix - EPOCH) * TICKS)) & 0xFFFFFFFF


def after(a: int, b: int) -> bool:
    """Whether serial ``a`` comes after ``b`` (RFC 1982 3.2)."""
    return 0 < (a - b) % 2**32 < HALF


def later(a: int, b: int) -> int:
    """The later of two serials (RFC 1982)."""
    return a if after(a, b) else b


def wait(serial: int, unix: float) -> float:
    """Seconds from ``unix`` until the clock's serial passes ``serial`` (0 if it has)."""
    ahead = (serial + 1 - at(unix)) % 2**32
    if ahead >= HALF or ahead == 0:
        return 0.0
    into_tick = ((unix - EPOCH) * TICKS) % 1.0
    return (ahead - into_tick) / TICKS
