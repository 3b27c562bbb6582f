"""NOTIFY: coalescing, retries until acknowledged, with a real UDP peer on loopback."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
from collections.abc import Callable
from typing import cast

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.tsig
import pytest

from clusterset_dns.transfers import notify, zonedata
from clusterset_dns.zone.cache import Cache, SetSynced

from .fakeclock import FakeClock
from .helpers import build_cache


def soa_of(serial: list[int]) -> notify.Soa:
    """An SOA of the shape the zone's has, its serial read from ``serial`` when asked."""
    def soa() -> tuple[int, bytes]:
        rdata = dns.rdata.from_text(
            dns.rdataclass.IN, dns.rdatatype.SOA,
            f"ns.dns.clusterset.local. hostmaster.clusterset.local. {serial[0]} 7200 1800 "
            "86400 5")
        return 5, rdata.to_digestable()
    return soa


def zone_soa(cache: Cache) -> notify.Soa:
    """The zone's own SOA, as the server hands it to the notifier (process.app)."""
    def soa() -> tuple[int, bytes]:
        record = zonedata.soa(cache.zone)
        return record.ttl, record.rdata
    return soa


class Secondary(asyncio.DatagramProtocol):
    """Records NOTIFYs; acknowledges them once ``ignore`` have been dropped."""

    def __init__(self, ignore: int, refuse: int = 0) -> None:
        self.ignore = ignore
        self.refuse = refuse  # then answer that many with REFUSED
        self.received: list[dns.message.Message] = []
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        message = dns.message.from_wire(data)
        self.received.append(message)
        if len(self.received) <= self.ignore:
            return
        reply = dns.message.make_response(message)
        if len(self.received) <= self.ignore + self.refuse:
            reply.set_rcode(dns.rcode.REFUSED)
        assert self.transport is not None
        self.transport.sendto(reply.to_wire(), addr)


async def run(ignore: int, bursts: int, serial: list[int], soa: notify.Soa | None = None,
              change: Callable[[], None] | None = None,
              clock: FakeClock | None = None) -> tuple[Secondary, list[str]]:
    """Time (the coalescing wait, each answer's timeout, the back-off) moves only while
    no answer can be on its way: every NOTIFY sent has reached the secondary, and the
    secondary has dropped each one."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    transport, peer = await loop.create_datagram_endpoint(lambda: Secondary(ignore), sock=sock)
    results: list[str] = []
    clock = clock or FakeClock()
    notifier = notify.Notifier("clusterset.local", (("127.0.0.1", sock.getsockname()[1]),),
                               soa or soa_of(serial), None, results.append, clock)
    notifier.start()
    try:
        for _ in range(bursts):  # a burst of changes, the serial moving each time
            serial[0] += 1
            if change is not None:
                change()
            notifier.changed()
        deadline = loop.time() + 10
        while not {"acknowledged", "failed"} & set(results) and loop.time() < deadline:
            await asyncio.sleep(0.01)
            if results.count("sent") == len(peer.received) <= ignore:
                clock.jump()
    finally:
        await notifier.stop()
        transport.close()
    return peer, results


def test_a_burst_of_changes_is_one_notify_of_the_newest_serial() -> None:
    serial = [100]
    peer, results = asyncio.run(run(ignore=0, bursts=20, serial=serial))
    assert len(peer.received) == 1 and results == ["sent", "acknowledged"]
    message = peer.received[0]
    assert message.opcode() == dns.opcode.NOTIFY and message.flags & dns.flags.AA
    assert message.answer[0][0].serial == 120


def test_unacknowledged_notify_is_retried_until_acknowledged() -> None:
    peer, results = asyncio.run(run(ignore=2, bursts=1, serial=[7]))
    assert len(peer.received) == 3
    assert results == ["sent", "sent", "sent", "acknowledged"]


def test_notify_gives_up_after_its_tries() -> None:
    """Each try waits for its answer, then backs off: 1 s doubling up to 60 s, each wait
    within 20% of its back-off (jitter), the clock's own."""
    clock = FakeClock()
    peer, results = asyncio.run(asyncio.wait_for(run(ignore=100, bursts=1, serial=[7],
                                                     clock=clock), 20))
    assert len(peer.received) == notify.ATTEMPTS and results.count("failed") == 1
    waits = [s for s in clock.sleeps if s not in (notify.COALESCE, notify.TIMEOUT)]
    assert clock.sleeps.count(notify.TIMEOUT) == notify.ATTEMPTS
    backoffs = [min(notify.FIRST_BACKOFF * 2**i, notify.MAX_BACKOFF)
                for i in range(notify.ATTEMPTS)]
    assert backoffs == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]
    assert len(waits) == notify.ATTEMPTS
    assert all(0.8 * b <= w <= 1.2 * b for w, b in zip(waits, backoffs, strict=True)), waits
    assert len({round(w / b, 6) for w, b in zip(waits, backoffs, strict=True)}) > 1  # jittered


def test_a_change_during_the_back_off_sends_the_newer_serial() -> None:
    """The first NOTIFY (serial 8) is not answered; while it backs off, the zone changes
    again: the newer serial (9) goes at once, not the retry of 8."""
    async def main() -> tuple[list[int], list[str]]:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        transport, peer = await loop.create_datagram_endpoint(lambda: Secondary(1), sock=sock)
        results: list[str] = []
        clock = FakeClock()
        serial = [8]
        notifier = notify.Notifier("clusterset.local", (("127.0.0.1", sock.getsockname()[1]),),
                                   soa_of(serial), None, results.append, clock)
        notifier.start()
        notifier.changed()
        changed_again = False
        try:
            deadline = loop.time() + 10  # a bound, not a measure
            while "acknowledged" not in results and loop.time() < deadline:
                await asyncio.sleep(0.01)
                if not changed_again and notify.TIMEOUT in clock.sleeps:
                    serial[0] = 9  # the first went unanswered: it is backing off now
                    notifier.changed()
                    changed_again = True
                elif results.count("sent") == len(peer.received) <= 1:
                    clock.jump()  # only while no answer can be on its way
        finally:
            await notifier.stop()
            transport.close()
        return [m.answer[0][0].serial for m in peer.received], results

    assert asyncio.run(main()) == ([8, 9], ["sent", "sent", "acknowledged"])


def test_the_notify_carries_the_zones_soa_as_it_is_when_sent() -> None:
    """RFC 1996 3.7: the answer section holds the zone's SOA record, all of it (owner,
    TTL, names, serial, timers), as the zone has it after the change."""
    cache = build_cache()
    first = cache.zone.serial

    def change() -> None:  # the zone changes: its serial moves
        cache.apply([SetSynced(False)])
        cache.apply([SetSynced(True)])

    peer, results = asyncio.run(run(ignore=0, bursts=1, serial=[0], soa=zone_soa(cache),
                                    change=change))
    assert results == ["sent", "acknowledged"]
    [message] = peer.received
    assert cache.zone.serial != first
    [rrset] = message.answer
    assert (rrset.name.to_text(), rrset.ttl, rrset.rdtype) == (
        "clusterset.local.", 5, dns.rdatatype.SOA)
    assert [r.to_text() for r in rrset] == [
        f"ns.dns.clusterset.local. hostmaster.clusterset.local. {cache.zone.serial} 7200 "
        "1800 86400 5"]


KEY = dns.tsig.Key("xfr-key", base64.b64encode(b"0123456789abcdef0123456789abcdef").decode(),
                   dns.tsig.HMAC_SHA256)


def test_with_a_key_the_notify_is_signed_with_it() -> None:
    notifier = notify.Notifier("clusterset.local", (), soa_of([7]), KEY, lambda _: None,
                               FakeClock())
    data = notifier.message(notifier.current()).to_wire()
    message = dns.message.from_wire(data, keyring={KEY.name: KEY})  # verified
    assert message.had_tsig and message.keyname == KEY.name
    unsigned = notify.Notifier("clusterset.local", (), soa_of([7]), None, lambda _: None,
                               FakeClock())
    assert not dns.message.from_wire(unsigned.message(unsigned.current()).to_wire()).had_tsig


def test_stop_waits_for_the_tasks_and_needs_no_start() -> None:
    async def main() -> None:
        never = notify.Notifier("clusterset.local", (), soa_of([7]), None, lambda _: None,
                                FakeClock())
        await never.stop()  # never started: nothing to stop
        notifier = notify.Notifier("clusterset.local", (("127.0.0.1", 9), ("::1", 9)),
                                   soa_of([7]), None, lambda _: None, FakeClock())
        notifier.start()
        tasks = list(notifier._tasks)
        # named after their target (task dumps)
        assert [t.get_name() for t in tasks] == ["notify-('127.0.0.1', 9)", "notify-('::1', 9)"]
        await notifier.stop()
        assert all(task.cancelled() for task in tasks)

    asyncio.run(main())


def test_each_change_after_an_acknowledgement_is_notified_again(
        caplog: pytest.LogCaptureFixture) -> None:
    """Acknowledged, the target's follower waits for the next change (it does not end),
    and each log line names the serial sent."""
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        transport, peer = await loop.create_datagram_endpoint(lambda: Secondary(0), sock=sock)
        results: list[str] = []
        clock = FakeClock()
        serial = [7]
        notifier = notify.Notifier("clusterset.local", (("127.0.0.1", sock.getsockname()[1]),),
                                   soa_of(serial), None, results.append, clock)
        notifier.start()
        try:
            for acknowledged in (1, 2):
                serial[0] += 1
                notifier.changed()
                deadline = loop.time() + 10  # a bound, not a measure
                while results.count("acknowledged") < acknowledged and loop.time() < deadline:
                    await asyncio.sleep(0.01)
                    if results.count("sent") == results.count("acknowledged"):
                        clock.jump()  # only while no answer can be on its way
        finally:
            await notifier.stop()
            transport.close()
        assert [m.answer[0][0].serial for m in peer.received] == [8, 9]
        return results

    with caplog.at_level(logging.INFO, logger="clusterset_dns.transfers.notify"):
        assert asyncio.run(main()) == ["sent", "acknowledged"] * 2
    acknowledged = [r.getMessage() for r in caplog.records if "acknowledged" in r.getMessage()]
    assert [m.split(" by ")[0] for m in acknowledged] == ["NOTIFY of serial 8 acknowledged",
                                                         "NOTIFY of serial 9 acknowledged"]


def test_an_answer_with_an_error_is_no_acknowledgement_and_one_is_final() -> None:
    """REFUSED (opcode NOTIFY) twice: tried again; then acknowledged: not sent again,
    however long the clock runs on."""
    async def main() -> tuple[int, list[str]]:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        transport, peer = await loop.create_datagram_endpoint(
            lambda: Secondary(0, refuse=2), sock=sock)
        results: list[str] = []
        clock = FakeClock()
        notifier = notify.Notifier("clusterset.local", (("127.0.0.1", sock.getsockname()[1]),),
                                   soa_of([8]), None, results.append, clock)
        notifier.start()
        notifier.changed()
        try:
            deadline = loop.time() + 10  # a bound, not a measure
            while "acknowledged" not in results and loop.time() < deadline:
                await asyncio.sleep(0.01)
                if results.count("sent") == len(peer.received) and len(peer.received) < 3:
                    clock.jump()  # only while no answer can be on its way
            for _ in range(20):  # then the clock runs on: nothing more is sent
                await asyncio.sleep(0)
                clock.jump()
        finally:
            await notifier.stop()
            transport.close()
        return len(peer.received), results

    assert asyncio.run(main()) == (3, ["sent", "sent", "sent", "acknowledged"])


class Garbage(Secondary):
    """Answers every NOTIFY at once with bytes that are no DNS message."""

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.received.append(dns.message.from_wire(data))
        assert self.transport is not None
        self.transport.sendto(data[:2] + b"\x84", addr)  # its id, then not a header


def test_an_unreadable_answer_is_no_acknowledgement_and_each_try_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    """dnspython cannot read the answer (a DNSException): no acknowledgement, tried again
    after the back-off until the tries run out, each failure logged with its reason."""
    async def main() -> tuple[int, list[str], list[str]]:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        transport, peer = await loop.create_datagram_endpoint(lambda: Garbage(0), sock=sock)
        port = sock.getsockname()[1]
        results: list[str] = []
        clock = FakeClock()
        notifier = notify.Notifier("clusterset.local", (("127.0.0.1", port),), soa_of([8]),
                                   None, results.append, clock)
        prefix = f"NOTIFY of serial 8 to 127.0.0.1:{port}: "

        def failures() -> list[str]:
            return [r.getMessage() for r in caplog.records
                    if r.levelno == logging.INFO and r.getMessage().startswith(prefix)]

        notifier.start()
        notifier.changed()
        try:
            deadline = loop.time() + 10  # a bound, not a measure
            while "failed" not in results and loop.time() < deadline:
                await asyncio.sleep(0.01)
                if results.count("sent") == len(failures()):
                    clock.jump()  # only once the try has ended on the unreadable answer
        finally:
            await notifier.stop()
            transport.close()
        return len(peer.received), results, failures()

    with caplog.at_level(logging.INFO, logger="clusterset_dns.transfers.notify"):
        received, results, failures = asyncio.run(main())
    assert (received, results) == (notify.ATTEMPTS, ["sent"] * notify.ATTEMPTS + ["failed"])
    assert len(failures) == notify.ATTEMPTS
    assert {f.split(": ", 1)[1] for f in failures} == {
        "The DNS packet passed to from_wire() is too short."}
