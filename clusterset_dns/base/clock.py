"""Time, as the parts that wait, retry and jitter see it.

Everything that sleeps, times out, backs off or draws jitter takes a :class:`Clock`
(the system's by default), so that tests drive time with a fake one instead of
waiting or patching. A zero-length ``asyncio.sleep(0)`` is a yield to the event
loop, not time, and stays as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

# The C functions the class hands out as they are (inside the class, ``time`` is its
# method).
_time_ns, _perf_counter, _perf_counter_ns = time.time_ns, time.perf_counter, time.perf_counter_ns


class Clock:
    """The system's monotonic and wall clocks, ``asyncio.sleep`` and ``random``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        """Wall-clock seconds since the epoch (for timestamps people read)."""
        return time.time()

    # The per-packet readings are the C functions themselves, so that the DNS path,
    # which keeps them (``now = clock.perf_counter_ns``), pays no Python frame per
    # answer; a fake clock overrides them with methods.
    #: Wall-clock nanoseconds since the epoch (timestamps sent to others: dnstap).
    time_ns = staticmethod(_time_ns)
    #: The stopwatch of an answer (durations, the query log, dnstap), in seconds and ns.
    perf_counter = staticmethod(_perf_counter)
    perf_counter_ns = staticmethod(_perf_counter_ns)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def uniform(self, low: float, high: float) -> float:
        return random.uniform(low, high)

    def jitter(self, seconds: float, spread: float) -> float:
        """``seconds`` times a random factor in [1 - spread, 1 + spread]."""
        return seconds * self.uniform(1 - spread, 1 + spread)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        """Waits for ``event`` at most ``timeout`` seconds of this clock; whether it is set."""
        if not event.is_set():
            with contextlib.suppress(TimeoutError):
                await self.within(event.wait(), timeout)
        return event.is_set()

    async def within(self, awaitable: Awaitable[T], timeout: float) -> T:
        """``awaitable``'s result if it comes within ``timeout`` seconds of this clock;
        else it is cancelled and TimeoutError raised."""
        work = asyncio.ensure_future(awaitable)
        timer = asyncio.ensure_future(self.sleep(timeout))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not work.done():
                work.cancel()
        if work.done() and not work.cancelled():
            return work.result()
        await asyncio.gather(work, return_exceptions=True)  # let it finish cancelling
        raise TimeoutError(f"not done within {timeout:g}s")

SYSTEM = Clock()


class Backoff:
    """Delays between retries: full jitter over a window that doubles from ``first`` up
    to ``cap`` seconds; :meth:`reset` once the retried thing works."""

    def __init__(self, clock: Clock, first: float, cap: float) -> None:
        self.clock = clock
        self.first, self.cap = first, cap
        self.delay = first

    def next(self) -> float:
        delay = self.clock.uniform(self.delay / 2, self.delay)
        self.delay = min(self.delay * 2, self.cap)
        return delay

    def reset(self) -> None:
        self.delay = self.first
