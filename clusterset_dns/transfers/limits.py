"""What bounds the work transfers cost others: token buckets for UDP requests that
need dnspython, and one transfer step per turn of the event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from clusterset_dns.base.clock import SYSTEM

# UDP requests that need dnspython (IXFR, TSIG): per source and in all, a second.
UDP_RATE, UDP_BURST = 10.0, 20.0
UDP_TOTAL_RATE, UDP_TOTAL_BURST = 100.0, 200.0
MAX_SOURCES = 4096


class RateLimit:
    """Token buckets for UDP requests that need dnspython (IXFR, TSIG): one per source
    address and one for all. A source's bucket starts full; the table of sources is
    bounded (full: it starts over, and the total still holds)."""

    def __init__(self, rate: float = UDP_RATE, burst: float = UDP_BURST,
                 total_rate: float = UDP_TOTAL_RATE, total_burst: float = UDP_TOTAL_BURST,
                 clock: Callable[[], float] = SYSTEM.monotonic) -> None:
        self.rate, self.burst = rate, burst
        self.total_rate, self.total_burst = total_rate, total_burst
        self.clock = clock
        self.sources: dict[str, tuple[float, float]] = {}  # source -> (tokens, when)
        self.total = (total_burst, clock())

    def allow(self, source: str) -> bool:
        now = self.clock()
        tokens, when = self.total
        total = min(self.total_burst, tokens + (now - when) * self.total_rate)
        found = self.sources.get(source)
        mine = self.burst if found is None else min(
            self.burst, found[0] + (now - found[1]) * self.rate)
        if total < 1 or mine < 1:
            self.total = (total, now)
            if found is not None:
                self.sources[source] = (mine, now)
            return False
        if found is None and len(self.sources) >= MAX_SOURCES:
            self.sources.clear()
        self.total = (total - 1, now)
        self.sources[source] = (mine - 1, now)
        return True


class Turns:
    """At most one transfer step per iteration of the event loop, in FIFO order.

    A step that finds the loop's turn taken waits; the next iteration (after the loop
    has polled its sockets, so queries got their turn) hands it to the first waiter.
    A plain lock would not do: a task that slept between steps finds it free and
    runs in the same iteration as the others."""

    def __init__(self) -> None:
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.taken = False

    async def turn(self) -> None:
        loop = asyncio.get_running_loop()
        if not self.taken and not self.waiters:
            self.taken = True
            loop.call_soon(self._next)
            return
        waiter = loop.create_future()
        self.waiters.append(waiter)
        await waiter  # _next has marked the turn taken for us

    def _next(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():  # (a cancelled transfer's)
                waiter.set_result(None)
                asyncio.get_running_loop().call_soon(self._next)
                return
        self.taken = False
