"""The clock everything that waits takes (base/clock.py): jitter's band, Clock.wait and
Clock.within on the injected clock (a result, the second that elapses, the work
cancelled), Backoff's doubling window and its reset, and the system clock's readings
between the time module's. Written for the survivors of ``scripts/mutate
clusterset_dns/base/clock.py``."""

from __future__ import annotations

import asyncio
import time

import pytest

from clusterset_dns.base.clock import SYSTEM, Backoff, Clock

from .fakeclock import FakeClock


class Ends(Clock):
    """uniform() gives the low end, then the high end, and records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[float, float]] = []

    def uniform(self, low: float, high: float) -> float:
        self.asked.append((low, high))
        return low if len(self.asked) % 2 else high


def test_jitter_spans_the_spread_each_way() -> None:
    clock = Ends()
    assert [clock.jitter(10.0, 0.25), clock.jitter(10.0, 0.25)] == [7.5, 12.5]
    assert clock.asked == [(0.75, 1.25)] * 2


def test_backoff_doubles_to_the_cap_and_resets() -> None:
    clock = Ends()
    backoff = Backoff(clock, 1.0, 6.0)
    delays = [backoff.next() for _ in range(5)]
    assert clock.asked == [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (3.0, 6.0), (3.0, 6.0)]
    assert delays == [0.5, 2.0, 2.0, 6.0, 3.0]
    backoff.reset()
    backoff.next()
    assert clock.asked[-1] == (0.5, 1.0)


async def turns() -> None:
    """Enough turns of the loop for the waits started to reach their sleep."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_wait_for_an_event_to_the_second() -> None:
    async def scenario() -> list[bool]:
        clock = FakeClock()
        event = asyncio.Event()
        results = []
        assert clock.pending() == []
        set_at_once = asyncio.Event()
        set_at_once.set()
        results.append(await clock.wait(set_at_once, 5))  # no timer at all
        assert clock.pending() == []
        waiting = asyncio.ensure_future(clock.wait(event, 5))
        await turns()
        assert clock.pending() == [clock.now + 5]
        clock.advance(4.999)
        await turns()
        assert not waiting.done()
        event.set()
        results.append(await waiting)
        assert clock.pending() == []  # its timer went with it
        never = asyncio.Event()
        waiting = asyncio.ensure_future(clock.wait(never, 2))
        await turns()
        clock.advance(2)
        results.append(await waiting)
        return results

    assert asyncio.run(scenario()) == [True, True, False]


def test_within_gives_the_result_or_cancels_the_work() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        assert await clock.within(asyncio.sleep(0, result="done"), 3) == "done"
        cancelled = []

        async def slow() -> str:
            try:
                await asyncio.Event().wait()
            finally:  # cancelling takes turns of the loop: within waits for them
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                cancelled.append(True)
            return "never"

        late = asyncio.ensure_future(clock.within(slow(), 2.5))
        await turns()
        clock.advance(2.5)
        with pytest.raises(TimeoutError) as raised:
            await late
        assert str(raised.value) == "not done within 2.5s" and cancelled == [True]

        async def fails() -> None:
            raise ValueError("bad")

        with pytest.raises(ValueError, match="bad"):
            await clock.within(fails(), 1)

    asyncio.run(scenario())


def test_the_system_clock_reads_the_time_module() -> None:
    before = (time.monotonic(), time.time(), time.perf_counter(), time.perf_counter_ns(),
              time.time_ns())
    readings = (SYSTEM.monotonic(), SYSTEM.time(), SYSTEM.perf_counter(),
                SYSTEM.perf_counter_ns(), SYSTEM.time_ns())
    after = (time.monotonic(), time.time(), time.perf_counter(), time.perf_counter_ns(),
             time.time_ns())
    assert all(b <= r <= a for b, r, a in zip(before, readings, after, strict=True))
    assert SYSTEM.uniform(2.0, 2.0) == 2.0 and 1.0 <= SYSTEM.uniform(1.0, 2.0) <= 2.0
    assert asyncio.run(SYSTEM.wait(asyncio.Event(), 0)) is False
