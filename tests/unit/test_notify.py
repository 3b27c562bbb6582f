"""NOTIFY: coalescing, retries until acknowledged, with a real UDP peer on loopback."""

from __future__ import annotations

import asyncio
import socket
from typing import cast

import dns.flags
import dns.message
import dns.opcode

from clusterset_dns.transfers import notify

from .fakeclock import FakeClock


class Secondary(asyncio.DatagramProtocol):
    """Records NOTIFYs; acknowledges them once ``ignore`` have been dropped."""

    def __init__(self, ignore: int) -> None:
        self.ignore = ignore
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
        assert self.transport is not None
        self.transport.sendto(reply.to_wire(), addr)


async def run(ignore: int, bursts: int, serial: list[int]) -> tuple[Secondary, list[str]]:
    """Time (the coalescing wait, each answer's timeout, the back-off) moves only while
    no answer can be on its way: every NOTIFY sent has reached the secondary, and the
    secondary has dropped each one."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    transport, peer = await loop.create_datagram_endpoint(lambda: Secondary(ignore), sock=sock)
    results: list[str] = []
    clock = FakeClock()
    notifier = notify.Notifier("clusterset.local", (("127.0.0.1", sock.getsockname()[1]),),
                               lambda: serial[0], None, results.append, clock)
    notifier.start()
    try:
        for _ in range(bursts):  # a burst of changes, the serial moving each time
            serial[0] += 1
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
    peer, results = asyncio.run(asyncio.wait_for(run(ignore=100, bursts=1, serial=[7]), 20))
    assert len(peer.received) == notify.ATTEMPTS and results.count("failed") == 1
