"""A :class:`clock.Clock` whose time passes only when the test moves it.

Sleeps wait for :meth:`advance` or :meth:`jump` (to the next sleeper's deadline)
and are recorded (:attr:`FakeClock.sleeps`) once they have run their length; random
draws come from a seeded generator. ``tick``: every reading of :meth:`monotonic`
finds the clock that much later, as if the work between two readings took that long.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random

from clusterset_dns.base.clock import Clock


class FakeClock(Clock):
    def __init__(self, tick: float = 0.0, seed: int = 1) -> None:
        self.now = 1000.0
        self.tick = tick
        self.sleeps: list[float] = []
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._random = random.Random(seed)

    def monotonic(self) -> float:
        self.now += self.tick
        return self.now

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def time_ns(self) -> int:
        return round(self.time() * 1e9)

    def perf_counter(self) -> float:
        return self.monotonic()

    def perf_counter_ns(self) -> int:
        return round(self.monotonic() * 1e9)

    def uniform(self, low: float, high: float) -> float:
        return self._random.uniform(low, high)

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + max(seconds, 0.0), next(self._order), future))
        await future
        self.sleeps.append(seconds)  # slept whole (a cancelled wait, a timer cut short, is not)

    def pending(self) -> list[float]:
        """Deadlines of the sleepers still waiting, earliest first."""
        return sorted(deadline for deadline, _, f in self._timers if not f.done())

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while self._timers and self._timers[0][0] <= self.now:
            _, _, future = heapq.heappop(self._timers)
            if not future.done():
                future.set_result(None)

    def jump(self, within: float | None = None) -> bool:
        """To the earliest sleeper's deadline, waking it; False when none waits (or, with
        ``within``, none within that many seconds)."""
        while self._timers and self._timers[0][2].done():
            heapq.heappop(self._timers)  # cancelled sleeps
        if not self._timers or (within is not None and self._timers[0][0] > self.now + within):
            return False
        self.advance(max(0.0, self._timers[0][0] - self.now))
        return True
