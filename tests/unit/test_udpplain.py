"""The portable UDP path (serving.udpplain) on real loopback sockets: each datagram's
answer goes back to its sender, the handler is told the transport and can ask for the
sender's address (an IXFR does), an error on one datagram costs only that datagram, the
reader is registered with the loop and taken off it, and --udp-io picks the path.

The socket's calls are wrapped only for errors the kernel cannot be made to return on
demand; the event loop is a stand-in recording the reader it is given."""

from __future__ import annotations

import asyncio
import errno
import select
import socket
from collections.abc import Callable
from typing import Any, cast

import pytest

from clusterset_dns.serving import udpbatch
from clusterset_dns.serving.stats import Durations, Sampler
from clusterset_dns.serving.udpbatch import Peer
from clusterset_dns.serving.udpplain import UDPReader, udp_reader

from .fakeclock import FakeClock
from .helpers import ReaderLoop


class Handler:
    """Answers b"re:" + the datagram (nothing to one starting b"drop"), noting what it
    was told: the datagram, whether over TCP, and the sender it asks for."""

    def __init__(self) -> None:
        self.seen: list[tuple[bytes, bool, str]] = []

    def __call__(self, data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
        assert peer is not None, "the plain path gives the handler the way to the sender"
        self.seen.append((data, tcp, peer()))
        return None if data.startswith(b"drop") else b"re:" + data


class Flaky:
    """A real socket whose next calls of recvfrom or sendto raise the errors queued."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.recv_errors: list[OSError] = []
        self.send_errors: list[OSError] = []

    def recvfrom(self, size: int) -> tuple[bytes, Any]:
        if self.recv_errors:
            raise self.recv_errors.pop(0)
        return self.sock.recvfrom(size)

    def sendto(self, data: bytes, addr: Any) -> int:
        if self.send_errors:
            raise self.send_errors.pop(0)
        return self.sock.sendto(data, addr)

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()



def server() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock



def queued(sock: socket.socket) -> None:
    """Waits (at most 2 s) for a datagram on ``sock`` (on loopback it is there when
    sendto returns; this only keeps a slow machine from failing the test)."""
    select.select([sock], [], [], 2)


def test_each_datagram_is_answered_to_its_sender_whom_the_handler_can_ask_for(
        clients: Callable[[str], socket.socket]) -> None:
    sock, handle = server(), Handler()
    reader = UDPReader(sock, handle)  # no observer, no sampler: nothing timed
    first, second = clients("127.0.0.2"), clients("127.0.0.3")
    first.sendto(b"one", sock.getsockname())
    second.sendto(b"drop", sock.getsockname())
    second.sendto(b"two", sock.getsockname())
    for _ in range(3):
        queued(sock)
        reader._readable()
        if len(handle.seen) == 3:
            break
    assert handle.seen == [(b"one", False, "127.0.0.2"), (b"drop", False, "127.0.0.3"),
                           (b"two", False, "127.0.0.3")]
    assert first.recvfrom(100) == (b"re:one", sock.getsockname())
    assert second.recvfrom(100) == (b"re:two", sock.getsockname())  # none for "drop"
    sock.close()


def test_a_receive_error_costs_only_its_datagram(clients: Callable[[str], socket.socket]) -> None:
    """An ICMP error queued on the socket fails one recvfrom: the datagrams behind it
    are answered in the same wake-up."""
    real, handle = server(), Handler()
    sock = Flaky(real)
    reader = UDPReader(cast(socket.socket, sock), handle)
    client = clients("127.0.0.1")
    client.sendto(b"one", real.getsockname())
    queued(real)
    sock.recv_errors = [OSError(errno.ECONNREFUSED, "refused")]
    reader._readable()
    assert [data for data, _, _ in handle.seen] == [b"one"]
    assert client.recvfrom(100)[0] == b"re:one"
    real.close()


def test_a_send_error_costs_only_its_answer(clients: Callable[[str], socket.socket]) -> None:
    real, handle = server(), Handler()
    sock = Flaky(real)
    reader = UDPReader(cast(socket.socket, sock), handle)
    client = clients("127.0.0.1")
    client.sendto(b"one", real.getsockname())
    client.sendto(b"two", real.getsockname())
    sock.send_errors = [OSError(errno.ENOBUFS, "no buffer space")]
    for _ in range(2):
        queued(real)
        reader._readable()
        if len(handle.seen) == 2:
            break
    assert [data for data, _, _ in handle.seen] == [b"one", b"two"]
    assert client.recvfrom(100)[0] == b"re:two"
    real.close()


def test_the_reader_is_registered_with_the_loop_and_taken_off(
        clients: Callable[[str], socket.socket]) -> None:
    sock, handle, loop = server(), Handler(), ReaderLoop()
    reader = UDPReader(sock, handle)
    fd = sock.fileno()
    reader.start(cast(asyncio.AbstractEventLoop, loop))
    assert loop.readers == {fd: reader._readable}
    client = clients("127.0.0.1")
    client.sendto(b"one", sock.getsockname())
    queued(sock)
    loop.readers[fd]()
    assert client.recvfrom(100)[0] == b"re:one"
    reader.stop(cast(asyncio.AbstractEventLoop, loop))
    assert loop.readers == {}
    assert sock.fileno() == -1  # closed


def test_the_sampled_answer_is_timed_on_the_injected_clock(
        clients: Callable[[str], socket.socket]) -> None:
    """1 in 2 answers timed: the second, from before the handler to after the send (each
    reading of the clock is 0.25 s after the one before); the first and third not."""
    sock, handle = server(), Handler()
    durations = Durations()
    sampler = Sampler(2, durations, False)
    reader = UDPReader(sock, handle, None, sampler, FakeClock(tick=0.25))
    client = clients("127.0.0.1")
    for expected_samples, data in [(0, b"one"), (1, b"two"), (1, b"three")]:
        client.sendto(data, sock.getsockname())
        queued(sock)
        reader._readable()
        assert client.recvfrom(100)[0] == b"re:" + data
        assert sum(durations.counts[False]) == expected_samples
    assert durations.sums == [0.25, 0.0]
    assert sampler.left == 1
    sock.close()


def test_the_observer_is_shown_each_answer_as_it_travelled(
        clients: Callable[[str], socket.socket]) -> None:
    """The query, the response sent (None for none), over UDP, the client's address,
    and the clock's reading in ns when the datagram was read (each reading is 0.5 s
    after the one before)."""
    sock, handle = server(), Handler()
    seen: list[tuple[bytes, bytes | None, bool, Any, int]] = []

    def watch(query: bytes, response: bytes | None, tcp: bool, peer: Any, started: int) -> None:
        seen.append((query, response, tcp, peer, started))

    reader = UDPReader(sock, handle, watch, None, FakeClock(tick=0.5))
    client = clients("127.0.0.2")
    for data in (b"one", b"drop"):
        client.sendto(data, sock.getsockname())
        queued(sock)
        reader._readable()
    where = client.getsockname()
    assert seen == [(b"one", b"re:one", False, where, 1_000_500_000_000),
                    (b"drop", None, False, where, 1_001_000_000_000)]
    sock.close()


def test_without_observer_or_sampler_the_clock_is_not_read(
        clients: Callable[[str], socket.socket]) -> None:
    sock, handle, clock = server(), Handler(), FakeClock(tick=1.0)
    reader = UDPReader(sock, handle, None, None, clock)
    client = clients("127.0.0.1")
    client.sendto(b"one", sock.getsockname())
    queued(sock)
    reader._readable()
    assert client.recvfrom(100)[0] == b"re:one"
    assert clock.now == 1000.0
    sock.close()


class Remembering:
    """What a remembering handler gives the batched reader (handler.Handler)."""

    def __init__(self) -> None:
        self.responses: dict[bytes, tuple[bytes, int]] = {}
        self.stats = type("Counters", (), {"requests": [0]})()

    def fast(self, rest: bytes, tcp: bool, /) -> bytes | None:
        return None

    def slow(self, data: bytes, tcp: bool, peer: Peer | None = None, /) -> bytes | None:
        return None


def observe(query: bytes, response: bytes | None, tcp: bool, peer: Any, started: int) -> None:
    pass


@pytest.mark.parametrize("mode", ["auto", "plain"])
def test_without_batched_io_auto_and_plain_read_one_datagram_a_call(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(udpbatch, "load", lambda: "no recvmmsg here")
    sock, handle, sampler, clock = server(), Handler(), Sampler(4, Durations(), False), FakeClock()
    reader = udp_reader(sock, handle, mode, None, observe, sampler, clock)
    assert isinstance(reader, UDPReader)
    assert (reader.sock, reader.handle, reader.observe, reader.sampler, reader.clock) == \
        (sock, handle, observe, sampler, clock)
    sock.close()


def test_batched_io_asked_for_where_there_is_none_is_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(udpbatch, "load", lambda: "no recvmmsg here")
    sock = server()
    with pytest.raises(OSError, match=r"^--udp-io batched: no recvmmsg here$"):
        udp_reader(sock, Handler(), "batched")
    sock.close()


def test_plain_does_not_look_for_batched_io(monkeypatch: pytest.MonkeyPatch) -> None:
    def load() -> str | None:
        raise AssertionError("plain does not ask")

    monkeypatch.setattr(udpbatch, "load", load)
    sock = server()
    assert isinstance(udp_reader(sock, Handler(), "plain"), UDPReader)
    sock.close()


@pytest.mark.skipif(udpbatch.load() is not None, reason=f"no batched UDP I/O: {udpbatch.load()}")
@pytest.mark.parametrize("mode", ["auto", "batched"])
@pytest.mark.parametrize("remembers", [False, True])
def test_where_there_is_batched_io_auto_and_batched_use_it(mode: str, remembers: bool) -> None:
    sock, handle, sampler, clock = server(), Handler(), Sampler(4, Durations(), False), FakeClock()
    remembering = Remembering()
    reader = udp_reader(sock, handle, mode, cast(udpbatch.Remembering, remembering) if remembers
                        else None, observe, sampler, clock)
    assert isinstance(reader, udpbatch.BatchReader)
    assert (reader.sock, reader.observe, reader.sampler, reader.clock) == \
        (sock, observe, sampler, clock)
    # a remembering handler's slow path answers what its memory does not
    assert reader.handle == (remembering.slow if remembers else handle)
    sock.close()
