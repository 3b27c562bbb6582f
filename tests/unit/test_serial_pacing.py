"""The serial steps at most once a tick (1/serials.TICKS s) and never runs ahead of the
clock (app.Sink): updates within a tick wait for the next one and are one step, one
journal difference. The clock is the seam: a test clock moves by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from ipaddress import ip_address

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import app, workers
from clusterset_dns.transfers.journal import Journal
from clusterset_dns.zone import serials
from clusterset_dns.zone.cache import Cache, Op, PutImport, PutSlice, SetSynced
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

from .fakeclock import FakeClock

HTTP = (Port("http", "tcp", 80),)
START = 2_000_000_000.01  # the test clock's start (unix time), early in a tick
TICK = 1.0 / serials.TICKS


def headless(name: str, addresses: list[str]) -> list[Op]:
    endpoints = tuple(Endpoint((ip_address(a),), None) for a in addresses)
    return [PutImport(("ns", name), ServiceImport("ns", name, ServiceType.HEADLESS, (), HTTP)),
            PutSlice(("ns", f"{name}-east"),
                     EndpointSlice("ns", f"{name}-east", name, "east", endpoints, HTTP))]


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def sink() -> tuple[app.Sink, Cache, Journal, Clock, list[int]]:
    clock = Clock()
    journal = Journal(1000)
    cache = Cache(ZoneNames("clusterset.local"), 5, clock=clock, on_change=journal.record)
    pool = workers.WorkerPool(Config(), 0, app.WORKER_ENTRY, lambda: [])
    notified: list[int] = []
    return (app.Sink(cache, pool, Metrics(), lambda: notified.append(cache.zone.serial)), cache,
            journal, clock, notified)


def test_updates_within_a_tick_wait_for_the_next_and_are_one_step() -> None:
    async def main() -> None:
        s, cache, journal, clock, notified = sink()
        s.apply([*headless("web", ["10.0.0.1"]), SetSynced(True)])  # the first sync: at once
        first = cache.zone.serial
        # A second past the clock: above any previous run's (their clocks agreeing).
        assert first == serials.at(clock()) + serials.TICKS
        clock.now += 0.5  # still before the sync's serial: held
        s.apply(headless("web", ["10.0.0.9"]))
        assert s.held and cache.zone.serial == first
        clock.now += 0.6  # past it: applied at once (with what was held)
        s.apply(headless("web", ["10.0.0.2"]))
        second = cache.zone.serial
        assert second == serials.at(clock()) and not s.held
        clock.now += TICK * 0.3  # the same tick: held
        s.apply(headless("web", ["10.0.0.3"]))
        s.apply(headless("api", ["10.0.1.1"]))
        assert cache.zone.serial == second and len(s.held) == 4
        clock.now += TICK * 0.7  # the next tick (the timer's moment): one step for both
        s.flush()
        assert cache.zone.serial == second + 1 == serials.at(clock())
        diffs = journal.since(second, cache.zone.serial)
        assert diffs is not None and len(diffs) == 1
        assert notified == [first, second, second + 1]
        chain = journal.since(first, cache.zone.serial)  # the held update and the next
        assert chain is not None and len(chain) == 2  # one: one step
        # An update a tick or more after the last step is applied at once: no wait.
        clock.now += TICK * 1.5
        s.apply(headless("web", ["10.0.0.4"]))
        assert not s.held and cache.zone.serial == serials.at(clock())

    asyncio.run(main())


def test_an_update_storm_never_puts_the_serial_ahead_of_the_clock() -> None:
    """300 updates over 3 seconds (the old rule, max(previous + 1, time), ended 297
    seconds ahead: a restarted server started below what its secondaries held)."""
    async def main() -> None:
        s, cache, journal, clock, _ = sink()
        s.apply([*headless("web", ["10.0.0.1"]), SetSynced(True)])
        clock.now += 2.0
        synced = cache.zone.serial
        steps = set()
        for i in range(300):
            clock.now += 0.01
            if s.held and serials.after(serials.at(clock()), cache.zone.serial):
                s.flush()  # what the timer does once the clock passes the serial
            s.apply(headless("web", [f"10.1.{i // 250}.{i % 250 + 1}"]))
            assert not serials.after(cache.zone.serial, serials.at(clock()))
            steps.add(cache.zone.serial)
        clock.now += 1.0
        s.flush()
        assert not serials.after(cache.zone.serial, serials.at(clock()))
        assert len(steps | {cache.zone.serial}) <= 3 * serials.TICKS + 2  # one a tick
        # Every step is in the journal, one chain: IXFR from any of them works.
        assert journal.since(synced, cache.zone.serial)

    asyncio.run(main())


def test_the_serial_is_unix_seconds_at_its_epoch_and_wraps_as_rfc_1982_says() -> None:
    assert serials.at(serials.EPOCH) == serials.EPOCH
    assert serials.at(serials.EPOCH + 1.0) == serials.EPOCH + serials.TICKS
    assert serials.at(serials.EPOCH + 0.99 / serials.TICKS) == serials.EPOCH
    # Above unix seconds (what the serial was before it counted ticks) for 3.5 years.
    for years in (0.01, 1, 3.5):
        unix = serials.EPOCH + years * 365 * 86400
        assert serials.after(serials.at(unix), int(unix))
    # The 32 bits wrap: still a step forward, and the Sink's wait is one tick.
    wrap = serials.EPOCH + (2**32 - serials.EPOCH) / serials.TICKS
    before, across = serials.at(wrap - TICK / 2), serials.at(wrap + TICK / 2)
    assert before == 2**32 - 1 and across == 0 and serials.after(across, before)
    assert serials.later(across, before) == across == serials.later(before, across)
    assert abs(serials.wait(before, wrap - TICK / 2) - TICK / 2) < 1e-6
    assert serials.wait(before, wrap + TICK / 2) == 0.0


def test_a_restart_past_the_wrap_steps_forward() -> None:
    """The sync's serial is the clock's plus a second, taken modulo 2**32: after the
    wrap it is a small number, and RFC 1982 makes it the later one."""
    clock = Clock()
    clock.now = serials.EPOCH + (2**32 - serials.EPOCH) / serials.TICKS - 0.5
    cache = Cache(ZoneNames("clusterset.local"), 5, clock=clock)
    start = cache.zone.serial
    cache.apply([*headless("web", ["10.0.0.1"]), SetSynced(True)])
    assert cache.zone.serial < start and serials.after(cache.zone.serial, start)
    assert cache.zone.serial == (serials.at(clock()) + serials.TICKS) % 2**32


def fake_sink() -> tuple[app.Sink, Cache, FakeClock]:
    """A Sink on the injected clock (its unix time at the start of a tick)."""
    clock = FakeClock()
    assert (clock.time() - serials.EPOCH) * serials.TICKS % 1.0 == 0.0
    cache = Cache(ZoneNames("clusterset.local"), 5, clock=clock.time)
    pool = workers.WorkerPool(Config(), 0, app.WORKER_ENTRY, lambda: [])
    return app.Sink(cache, pool, Metrics()), cache, clock


# (the zone's serial, in ticks past the clock's; the seconds an update then waits)
HOLDS = [
    (serials.TICKS - 2, 1.0 - TICK),      # the next serial within the second: its tick
    (serials.TICKS - 1, 1.0),             # exactly a second
    (serials.TICKS, 1.0),                 # a second and a tick: the cap
    (3600 * serials.TICKS, 1.0),          # the clock set back an hour: still a second
    (0, TICK),                            # the clock's own serial: the next tick
    (-1, 0.0),                            # behind the clock: no wait
]


def test_held_updates_wait_for_the_next_serial_and_at_most_one_second() -> None:
    s, cache, clock = fake_sink()
    for ahead, seconds in HOLDS:
        cache.zone.serial = (serials.at(clock.time()) + ahead) % 2**32
        assert s.hold(clock.time()) == pytest.approx(seconds, abs=1e-9), ahead


def test_the_timer_applies_held_updates_within_a_second() -> None:
    """The timer is set for the hold (capped at a second, plus a millisecond past the
    tick) and, when it fires, applies what was held: checked on the injected clock and
    the timer's recorded delay, not by waiting."""
    async def main() -> None:
        s, cache, clock = fake_sink()
        s.apply([*headless("web", ["10.0.0.1"]), SetSynced(True)])  # a second ahead
        loop = asyncio.get_running_loop()
        timers: list[tuple[float, Callable[[], None]]] = []
        real = loop.call_later

        def call_later(delay: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
            timers.append((delay, callback))
            return real(3600, lambda: None)

        loop.call_later = call_later  # type: ignore[method-assign,assignment]
        clock.now -= 3600  # and the clock set back an hour
        s.apply(headless("web", ["10.0.0.2"]))
        s.apply(headless("web", ["10.0.0.3"]))  # one timer for both
        assert s.held and [d for d, _ in timers] == [1.001]
        timers[0][1]()
        assert not s.held
        assert any(b"10-0-0-3" in key for key in dict(cache.zone.every_answer()))

    asyncio.run(main())


def test_the_update_completing_the_first_sync_is_never_held() -> None:
    async def main() -> None:
        s, cache, _, clock, _ = sink()
        s.apply(headless("web", ["10.0.0.1"]))  # a first list's page in the start's
        assert s.held  # second: held
        s.apply([SetSynced(True)])  # the sync: everything at once
        assert not s.held and cache.zone.synced and s.synced.is_set()
        assert any(b"10-0-0-1" in key for key in dict(cache.zone.every_answer()))
        assert cache.zone.serial == serials.at(clock()) + serials.TICKS  # a second ahead

    asyncio.run(main())


def test_no_ixfr_history_from_the_serial_a_process_starts_with() -> None:
    """A restart may start at the serial its previous run ended on (other data): the
    update completing the first sync is no difference, so an IXFR from that serial
    gets the whole zone, never this load replayed onto the old data."""
    clock = Clock()
    journal = Journal(10)
    cache = Cache(ZoneNames("clusterset.local"), 5, clock=clock, on_change=journal.record)
    start = cache.zone.serial
    cache.apply([*headless("web", ["10.0.0.1"]), SetSynced(True)])
    assert cache.zone.serial != start and journal.since(start, cache.zone.serial) is None
    synced = cache.zone.serial
    cache.apply(headless("web", ["10.0.0.2"]))  # then, differences as usual
    assert journal.since(synced, cache.zone.serial)


def test_serial_arithmetic_at_its_edges() -> None:
    """RFC 1982 leaves a difference of exactly 2**31 undefined: neither is after the
    other here. The wait counts across the 32-bit wrap, and a serial 2**31 - 1 ticks
    ahead is the furthest the clock is waited for."""
    half = serials.HALF
    assert serials.after(half - 1, 0) and not serials.after(0, half - 1)
    assert not serials.after(half, 0) and not serials.after(0, half)
    assert serials.after(0, half + 1)
    unix = serials.EPOCH + 10.0  # at the start of a tick
    now = serials.at(unix)
    assert serials.wait(now + half - 2, unix) == (half - 1) / serials.TICKS
    assert serials.wait(now + half - 1, unix) == 0.0  # as good as behind
    # the clock just before the wrap, the serial just past it: three ticks and a half
    wrap = serials.EPOCH + (2**32 - serials.EPOCH) / serials.TICKS
    assert serials.at(wrap - TICK / 2) == 2**32 - 1
    assert abs(serials.wait(2, wrap - TICK / 2) - 3.5 * TICK) < 1e-6
