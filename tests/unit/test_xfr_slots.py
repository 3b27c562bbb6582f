"""Transfer slots against slow readers: a transfer lasts at most --xfr-timeout (the
injected clock moves it), one client address holds at most a quarter of the slots,
and the last slot is kept for an address running none."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import dns.message
import dns.rcode
import pytest

from clusterset_dns.transfers import xfr

from .fakeclock import FakeClock
from .test_xfr_limits import ALLOWED, ZONE, big_cache

AXFR = dns.message.make_query(ZONE, "AXFR").to_wire()


class Stuck:
    """A client that reads the first message, then never again (its send never returns)."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.waiting = asyncio.Event()

    async def send(self, message: bytes) -> None:
        self.messages.append(message)
        if len(self.messages) > 1:
            self.waiting.set()
            await asyncio.Event().wait()

    def busy(self) -> bool:
        return (len(self.messages) == 1
                and dns.message.from_wire(self.messages[0]).rcode() == dns.rcode.SERVFAIL)


def transfers(clock: FakeClock, timeout: float = 60.0) -> xfr.Transfers:
    cache, journal = big_cache(8, 500)  # many messages: a stuck reader holds its slot
    return xfr.Transfers(cache.zone, journal, ALLOWED, None, xfr.Counts({}),
                         timeout=timeout, clock=clock)


async def settle(tasks: list[asyncio.Task[Any]], senders: list[Stuck]) -> None:
    """Until every transfer is stuck on its reader or done (bounded)."""
    for _ in range(10_000):
        if all(t.done() or s.waiting.is_set() for t, s in zip(tasks, senders, strict=True)):
            return
        await asyncio.sleep(0)
    raise AssertionError("transfers neither stuck nor done")


def test_a_transfer_lasts_at_most_the_timeout_to_the_second(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        clock = FakeClock()
        t = transfers(clock)
        reader = Stuck()
        coro = t.start(AXFR, "127.0.0.2", reader)
        assert coro is not None
        task = asyncio.ensure_future(coro)
        await settle([task], [reader])
        clock.advance(59.999)
        for _ in range(50):
            await asyncio.sleep(0)
        assert not task.done() and t.active == 1  # a thousandth before: still running
        clock.advance(0.001)
        for _ in range(50):
            await asyncio.sleep(0)
        assert task.done() and isinstance(task.exception(), TimeoutError)
        assert str(task.exception()) == "AXFR not done within 60s"
        assert t.active == 0 and t.running == {}
        assert t.counts.by[("axfr", "timeout")] == 1
        assert t._shared is None  # the snapshot it held is let go

    with caplog.at_level(logging.INFO, "clusterset_dns.transfers.xfr"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == [
        "AXFR to 127.0.0.2 cut: not done within --xfr-timeout 60s"]


def test_slow_readers_of_few_addresses_leave_a_slot_for_another_client() -> None:
    """Four addresses ask 4 + 4 + 4 + 5 transfers and never read on: each runs at most
    4, the 16th slot goes to none of them, and a client running none gets it. Before:
    the first address alone took every slot, and a real secondary got SERVFAIL."""
    async def main() -> None:
        clock = FakeClock()
        t = transfers(clock)
        readers: list[Stuck] = []
        tasks: list[asyncio.Task[Any]] = []

        async def ask(peer: str) -> Stuck:
            reader = Stuck()
            coro = t.start(AXFR, peer, reader)
            assert coro is not None
            tasks.append(asyncio.ensure_future(coro))
            readers.append(reader)
            await settle(tasks, readers)
            return reader

        first = [await ask("127.0.0.2") for _ in range(5)]
        assert [r.busy() for r in first] == [False] * 4 + [True]  # 4 at most per address
        for peer in ("127.0.0.3", "127.0.0.4"):
            assert not any([(await ask(peer)).busy() for _ in range(4)])
        last = [await ask("::ffff:127.0.0.5") for _ in range(4)]  # the same as 127.0.0.5
        assert [r.busy() for r in last] == [False] * 3 + [True]  # the 16th slot is kept
        assert t.active == 15
        assert not (await ask("127.0.0.1")).busy()  # a client running none: the 16th
        assert t.active == 16 and (await ask("127.0.0.6")).busy()  # now full for all
        assert t.counts.by[("axfr", "busy")] == 3
        clock.advance(60)  # every stuck transfer ends at the timeout, freeing its slot
        for _ in range(200):
            await asyncio.sleep(0)
        assert t.active == 0 and t.running == {}
        assert not (await ask("127.0.0.2")).busy()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def test_an_address_and_its_ipv4_mapped_form_are_one_client() -> None:
    """A dual-stack socket gives an IPv4 client as ::ffff:a.b.c.d: both forms run
    against one share, counted under the IPv4 address."""
    async def main() -> None:
        clock = FakeClock()
        t = transfers(clock)
        readers: list[Stuck] = []
        tasks: list[asyncio.Task[Any]] = []
        for peer in ("127.0.0.5", "::ffff:127.0.0.5") * 2 + ("::ffff:127.0.0.5",):
            readers.append(Stuck())
            coro = t.start(AXFR, peer, readers[-1])
            assert coro is not None
            tasks.append(asyncio.ensure_future(coro))
            await settle(tasks, readers)
        assert [r.busy() for r in readers] == [False] * 4 + [True]
        assert t.running == {"127.0.0.5": 4} and t.active == 4
        for left in (3, 2, 1, 0):  # each transfer ended gives its one slot back
            tasks[left].cancel()
            with pytest.raises(asyncio.CancelledError):
                await tasks[left]
            assert t.running == ({"127.0.0.5": left} if left else {}) and t.active == left

    asyncio.run(main())


# a whole share: 5 to 7 transfers are one each (5 / 4 is no share of 1.25), 11 two each
@pytest.mark.parametrize(("most", "share"), [(1, 1), (2, 1), (4, 1), (5, 1), (7, 1), (8, 2),
                                            (11, 2), (16, 4)])
def test_the_share_of_one_address(most: int, share: int) -> None:
    t = xfr.Transfers(big_cache(1, 3)[0].zone, big_cache(1, 3)[1], ALLOWED, None,
                      xfr.Counts({}), max_transfers=most)
    assert t.per_client == share
    t.active = most - 1
    assert t._slot(0) and not t._slot(1)  # the last slot: only for a client with none
    t.active = most
    assert not t._slot(0)
