"""transfers/limits: RateLimit on the injected clock (each bucket's burst to the request,
its refill to the token, the table of sources bounded to the entry) and Turns counted in
iterations of the event loop (one step an iteration, first come first served)."""

from __future__ import annotations

import asyncio
import itertools

from clusterset_dns.transfers import limits
from clusterset_dns.transfers.limits import RateLimit, Turns

from .fakeclock import FakeClock


def allowed(limit: RateLimit, source: str, asks: int) -> int:
    return sum(limit.allow(source) for _ in range(asks))


def test_a_source_gets_its_burst_then_its_rate() -> None:
    """The defaults: 20 at once, then 10 a second (0.5 s: 5 more, exactly)."""
    clock = FakeClock()
    limit = RateLimit(clock=clock.monotonic)
    assert allowed(limit, "a", 25) == limits.UDP_BURST == 20
    clock.advance(0.5)
    assert allowed(limit, "a", 10) == 0.5 * limits.UDP_RATE == 5
    clock.advance(1000)  # a long silence refills to the burst, not beyond
    assert allowed(limit, "a", 30) == 20


def test_all_sources_share_the_total_burst_then_its_rate() -> None:
    """200 at once in all (10 sources' bursts), then 100 a second."""
    clock = FakeClock()
    limit = RateLimit(clock=clock.monotonic)
    assert sum(allowed(limit, f"s{i}", 20) for i in range(10)) == limits.UDP_TOTAL_BURST == 200
    assert allowed(limit, "fresh", 1) == 0  # its own bucket is full: the total is not
    clock.advance(0.5)
    assert sum(allowed(limit, f"t{i}", 20) for i in range(5)) == 0.5 * limits.UDP_TOTAL_RATE
    clock.advance(1000)
    assert sum(allowed(limit, f"u{i}", 20) for i in range(20)) == 200


def test_the_last_token_is_spent_and_a_fraction_is_not() -> None:
    """Rates in powers of two (exact in floats): 1/8 s gives one token, a hair less none."""
    clock = FakeClock()
    limit = RateLimit(rate=8, burst=4, total_rate=1024, total_burst=1024,
                      clock=clock.monotonic)
    assert allowed(limit, "a", 5) == 4
    clock.advance(0.125 - 1 / 1024)
    assert allowed(limit, "a", 1) == 0
    clock.advance(1 / 1024)  # refused asks take nothing: the fraction kept its time
    assert allowed(limit, "a", 2) == 1


def test_a_refused_source_is_not_added_to_the_table() -> None:
    """Refused by the total, a new source leaves no entry (a flood of new addresses must
    not fill the table); a known one is brought up to date."""
    clock = FakeClock()
    limit = RateLimit(rate=8, burst=4, total_rate=8, total_burst=4, clock=clock.monotonic)
    assert allowed(limit, "a", 4) == 4
    assert allowed(limit, "new", 1) == 0
    assert set(limit.sources) == {"a"}
    clock.advance(0.25)
    assert allowed(limit, "a", 3) == 2
    assert limit.sources["a"] == (0.0, clock.now)


def test_the_table_of_sources_holds_max_sources_then_starts_over() -> None:
    clock = FakeClock()
    limit = RateLimit(total_rate=1, total_burst=10 * limits.MAX_SOURCES, clock=clock.monotonic)
    for i in range(limits.MAX_SOURCES):
        assert limit.allow(f"s{i}")
    assert len(limit.sources) == limits.MAX_SOURCES == 4096
    assert limit.allow("one more")
    assert set(limit.sources) == {"one more"}
    # started over: an old source has a full bucket again (the total still holds)
    assert allowed(limit, "s0", 25) == 20


def run_steps(names: str, cancel: str = "", later: str = "") -> list[tuple[str, int]]:
    """Tasks ``names`` each take one turn, all asked in the same iteration (``cancel``:
    cancelled after the first iteration, while waiting; ``later``: asked once the others
    are done). Returns (name, the loop iteration its step ran in), the loop bounded to a
    number of iterations."""
    async def main() -> list[tuple[str, int]]:
        turns = Turns()
        ran: list[tuple[str, int]] = []
        tick = [0]

        async def step(name: str) -> None:
            await turns.turn()
            ran.append((name, tick[0]))

        tasks = [asyncio.ensure_future(step(name)) for name in names]
        for _ in range(50):
            await asyncio.sleep(0)
            tick[0] += 1
            if tick[0] == 1:
                for name in cancel:
                    tasks[names.index(name)].cancel()
        for name in later:
            tasks.append(asyncio.ensure_future(step(name)))
            for _ in range(3):
                await asyncio.sleep(0)
                tick[0] += 1
        assert all(task.done() for task in tasks)
        assert not turns.waiters
        return ran

    return asyncio.run(main())


def test_turns_give_one_step_an_iteration_first_come_first_served() -> None:
    ran = run_steps("abcd")
    assert [name for name, _ in ran] == list("abcd")
    ticks = [tick for _, tick in ran]
    assert ticks[0] == 0 and all(b > a for a, b in itertools.pairwise(ticks))


def test_a_cancelled_waiter_is_skipped() -> None:
    ran = run_steps("abcd", cancel="b")
    assert [name for name, _ in ran] == ["a", "c", "d"]
    ticks = dict(ran)
    assert ticks["a"] < ticks["c"] < ticks["d"]


def test_once_every_step_ran_the_next_turn_is_free_at_once() -> None:
    ran = run_steps("ab", later="c")
    assert [name for name, _ in ran] == ["a", "b", "c"]
    assert ran[2][1] == 50  # in the iteration it was asked in
