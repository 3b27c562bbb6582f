"""Stand-ins for driving server.TCPProtocol call by call (test_tcpprotocol.py,
test_tcptransfer.py): a recording transport (the seam asyncio calls us through), an idle
timer's loop whose time moves only when the test moves it, DNS framing, and a server
whose handler echoes."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Coroutine
from typing import Any, cast

from clusterset_dns.serving.server import Counters, DNSServer, TCPProtocol
from clusterset_dns.serving.udpbatch import Peer


class Transport:
    """What TCPProtocol asks of its asyncio transport, recorded."""

    def __init__(self, peer: tuple[Any, ...] | None = ("127.0.0.2", 40000),
                 sock: Any = None) -> None:
        self.peer = peer
        self.sock = sock
        self.written: list[bytes] = []
        self.reading = True
        self.closed = self.aborted = False
        self.buffered = 0  # what get_write_buffer_size says
        self.holding = False  # whether writes stay in that buffer (a socket that is full)
        self.high: int | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peer, "socket": self.sock}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = high

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))
        if self.holding:
            self.buffered += len(data)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return self.buffered


class Timer:
    def __init__(self, delay: float, callback: Callable[[], None]) -> None:
        self.delay, self.callback, self.cancelled = delay, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class Loop:
    """The loop's time and timers as the idle timeout uses them; the time moves only
    when the test sets ``now``."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[Timer] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        self.timers.append(Timer(delay, callback))
        return self.timers[-1]


def frame(payload: bytes) -> bytes:
    return struct.pack("!H", len(payload)) + payload


def frames(data: bytes) -> list[bytes]:
    out = []
    while data:
        (size,) = struct.unpack("!H", data[:2])
        out.append(data[2 : 2 + size])
        data = data[2 + size:]
    return out


def echo(data: bytes, tcp: bool, peer: Peer | None) -> bytes | None:
    """The query back after b"re:"; none to a query starting b"drop"; a query b"big:N"
    gets N bytes. No default for ``peer``: a Handle is given all three."""
    assert tcp and peer is None, "over TCP: told so, and no sender (a transfer has its own)"
    if data.startswith(b"drop"):
        return None
    if data.startswith(b"big:"):
        return bytes(int(data[4:]))
    return b"re:" + data


def make(handle: Callable[..., bytes | None] = echo, cap: int = 8, idle: float = 5.0,
         **kwargs: Any) -> DNSServer:
    dns = DNSServer(handle, [], idle, max_tcp_connections=cap, stats=Counters(), **kwargs)
    return dns


def connect(dns: DNSServer, transport: Transport) -> TCPProtocol:
    """A connection made (inside a running loop)."""
    proto = TCPProtocol(dns)
    proto.connection_made(cast(asyncio.Transport, transport))
    return proto


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(main())
