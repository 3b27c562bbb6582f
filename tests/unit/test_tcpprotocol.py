"""server.TCPProtocol driven call by call: the connection cap and the per-address share
to the connection, pipelined answers framed and written in chunks, the answers a client
is owed after it half-closed, the zone transfer that holds the queries behind it, the
idle timeout to the instant, and what a closed connection leaves behind.

The transport is a recording stand-in (the seam asyncio calls us through), and the idle
timer's loop a stand-in whose time moves only when the test moves it; tests/unit/
test_server.py runs the same code over real sockets."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import pytest

from clusterset_dns.serving import server
from clusterset_dns.serving.server import Counters, DNSServer, TCPProtocol
from clusterset_dns.serving.udpbatch import Peer

from .fakeclock import FakeClock


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
        self.high: int | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peer, "socket": self.sock}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = high

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

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


# -- the cap ----------------------------------------------------------------------------------


def test_a_connection_is_counted_limited_and_timed() -> None:
    async def main() -> None:
        dns = make(idle=7.5)
        transport = Transport()
        proto = connect(dns, transport)
        assert dns.connections == {proto} and dns.stats.tcp_open == 1
        assert dns.per_client == {"127.0.0.2": 1} and proto.client == "127.0.0.2"
        assert transport.high == server.WRITE_HIGH
        loop = asyncio.get_running_loop()
        assert proto.loop is loop and proto.last_activity <= loop.time()
        assert proto.timer is not None
        assert proto.timer.when() - proto.last_activity == pytest.approx(7.5, abs=0.5)
        proto.connection_lost(None)
    run(main)


@pytest.mark.parametrize(("cap", "open_", "held", "refused"), [
    (8, 7, 0, False), (8, 8, 0, True),  # the cap, to the connection
    (8, 1, 1, False), (8, 2, 2, True),  # a quarter of it for one address: 2
    (3, 0, 0, False), (3, 1, 1, True),  # and at least one
    (9, 2, 2, True),  # a quarter, rounded down: 2
])
def test_the_cap_and_one_address_share_to_the_connection(cap: int, open_: int, held: int,
                                                         refused: bool) -> None:
    async def main() -> None:
        dns = make(cap=cap)
        for n in range(open_):  # `held` of them from 127.0.0.2, the rest from others
            connect(dns, Transport(("127.0.0.2" if n < held else f"127.0.1.{n}", 1)))
        transport = Transport(("127.0.0.2", 2))
        proto = connect(dns, transport)
        assert transport.aborted is refused
        assert dns.stats.tcp_refused == int(refused)
        assert (proto in dns.connections) is not refused
        assert dns.stats.tcp_open == open_ + (not refused)
        assert dns.per_client.get("127.0.0.2", 0) == held + (not refused)
        if refused:  # refused again: counted again; its end changes nothing
            connect(dns, Transport(("127.0.0.2", 3))).connection_lost(None)
            proto.connection_lost(None)
            assert dns.stats.tcp_refused == 2 and dns.stats.tcp_open == open_
            assert dns.per_client.get("127.0.0.2", 0) == held
        for each in list(dns.connections):
            each.connection_lost(None)
    run(main)


def test_a_refused_connection_ends_without_touching_the_counts() -> None:
    """Its end (asyncio calls connection_lost after the abort) leaves the counted
    connections alone, an address-less one included, and has no timer to cancel."""
    async def main() -> None:
        dns = make(cap=1)
        counted = connect(dns, Transport(None))  # client "": the same key a refused one has
        refused = connect(dns, Transport(("127.0.0.3", 1)))
        refused.connection_lost(None)
        assert dns.per_client == {"": 1} and dns.connections == {counted}
        assert dns.stats.tcp_open == 1
        counted.connection_lost(None)
    run(main)


def test_a_closed_connection_gives_back_its_place() -> None:
    async def main() -> None:
        dns = make()
        first, second = Transport(), Transport()
        a, b = connect(dns, first), connect(dns, second)
        timer = a.timer
        assert dns.per_client == {"127.0.0.2": 2}
        a.connection_lost(None)
        assert timer is not None and timer.cancelled() and a.timer is None
        assert dns.per_client == {"127.0.0.2": 1} and dns.connections == {b}
        assert dns.stats.tcp_open == 1 and a.transport is None
        b.connection_lost(None)
        assert dns.per_client == {} and dns.stats.tcp_open == 0
        b.connection_lost(None)  # twice (asyncio does not, a test may): nothing more
        assert dns.per_client == {} and dns.stats.tcp_open == 0
    run(main)


def test_a_peer_without_an_address_is_counted_as_empty() -> None:
    async def main() -> None:
        dns = make()
        proto = connect(dns, Transport(None))
        assert dns.per_client == {"": 1}
        assert proto.peer() == "" and proto.address() == ("", 0)
        proto.connection_lost(None)
        assert proto.peer() == "" and proto.address() == ("", 0)
    run(main)


# -- answers ----------------------------------------------------------------------------------


def test_pipelined_queries_are_answered_in_order_in_one_write() -> None:
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        proto.data_received(frame(b"q1") + frame(b"drop") + frame(b"q2") + frame(b"q3")[:3])
        assert [frames(w) for w in transport.written] == [[b"re:q1", b"re:q2"]]
        proto.data_received(frame(b"q3")[3:])  # the rest of the third
        assert frames(transport.written[1]) == [b"re:q3"]
        assert proto.buffer == bytearray()
        proto.connection_lost(None)
    run(main)


def test_messages_of_every_length_are_framed() -> None:
    """An empty message (its length alone) and one longer than 255 bytes (both bytes of
    its length) are read and answered."""
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        long = b"q" * 300
        proto.data_received(frame(b""))  # two bytes in all
        assert [frames(w) for w in transport.written] == [[b"re:"]]
        proto.data_received(frame(long)[:200])
        assert len(transport.written) == 1
        proto.data_received(frame(long)[200:])
        assert frames(transport.written[1]) == [b"re:" + long]
        proto.connection_lost(None)
    run(main)


def test_writes_are_chunked_at_write_chunk_bytes() -> None:
    """A write as soon as the framed answers reach WRITE_CHUNK bytes, to the byte."""
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        half = server.WRITE_CHUNK // 2 - 2
        exact = [frame(b"big:%d" % half), frame(b"big:%d" % half)]  # 2 x (2 + half) bytes
        short = [frame(b"big:%d" % half), frame(b"big:%d" % (half - 1))]  # one byte short
        proto.data_received(b"".join(exact) + b"".join(short) + frame(b"big:1"))
        # a write at the chunk, then the count starts again from nothing
        assert [len(w) for w in transport.written] == [server.WRITE_CHUNK,
                                                       server.WRITE_CHUNK - 1 + 3]
        proto.connection_lost(None)
    run(main)


def test_an_answer_too_long_for_tcp_is_dropped_and_the_next_sent(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        biggest = server.MAX_TCP_MESSAGE
        proto.data_received(frame(b"big:%d" % (biggest + 1)) + frame(b"big:%d" % biggest)
                            + frame(b"q"))
        assert [len(a) for w in transport.written for a in frames(w)] == [biggest, 4]
        proto.connection_lost(None)
    with caplog.at_level(logging.ERROR, "clusterset_dns.serving.server"):
        run(main)
    assert [r.getMessage() for r in caplog.records] == ["TCP answer of 65536 bytes dropped"]


def test_a_complete_message_is_progress_a_partial_one_is_not() -> None:
    async def main() -> None:
        dns = make()
        proto = connect(dns, Transport())
        loop = Loop()
        proto.loop = cast(asyncio.AbstractEventLoop, loop)
        proto.last_activity = 50.0
        proto.data_received(frame(b"q1")[:3])
        assert proto.last_activity == 50.0
        loop.now = 60.0
        proto.data_received(frame(b"q1")[3:])
        assert proto.last_activity == 60.0
        proto.connection_lost(None)
    run(main)


def test_progress_is_taken_once_a_read_at_its_first_message() -> None:
    """The loop's time when the read's first complete message is taken (a handler that
    takes a second per query does not move it on within the read)."""
    loop = Loop()

    def slow(data: bytes, tcp: bool, peer: Peer | None) -> bytes | None:
        loop.now += 1.0
        return echo(data, tcp, peer)

    async def main() -> None:
        dns = make(slow)
        proto = connect(dns, Transport())
        proto.loop = cast(asyncio.AbstractEventLoop, loop)
        proto.data_received(frame(b"q1") + frame(b"q2") + frame(b"q3"))
        assert proto.last_activity == 100.0 and loop.now == 103.0
        proto.connection_lost(None)
    run(main)


def test_a_paused_writer_is_not_answered_until_it_resumes() -> None:
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        proto.pause_writing()
        assert not transport.reading
        proto.data_received(frame(b"q1"))
        assert transport.written == []
        loop = Loop()
        loop.now = 70.0
        proto.loop = cast(asyncio.AbstractEventLoop, loop)
        proto.resume_writing()
        assert frames(transport.written[0]) == [b"re:q1"]
        assert transport.reading and proto.last_activity == 70.0
        proto.pause_writing()
        loop.now = 80.0
        proto.resume_writing()  # nothing waiting: the peer read, which is progress too
        assert transport.reading and proto.last_activity == 80.0
        proto.connection_lost(None)
    run(main)


@pytest.mark.parametrize(("waiting", "owed"), [
    (b"", False), (b"\x00", False), (frame(b"q2")[:3], False), (frame(b"q2")[:-1], False),
    (frame(b"q2"), True), (frame(b"q2") + b"\x00", True), (frame(b""), True),
    (frame(bytes(300))[:-1], False), (frame(bytes(300)), True)])
def test_a_half_close_keeps_the_write_side_while_a_query_is_owed(waiting: bytes,
                                                                 owed: bool) -> None:
    async def main() -> None:
        dns = make()
        proto = connect(dns, Transport())
        proto.pause_writing()
        proto.data_received(waiting)
        assert proto.eof_received() is owed
        proto.connection_lost(None)
    run(main)


def test_after_a_half_close_the_owed_answers_are_sent_then_closed() -> None:
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        proto.pause_writing()
        proto.data_received(frame(b"q1") + frame(b"q2") + frame(b"q3")[:3])
        assert proto.eof_received() is True
        assert not transport.closed
        proto.resume_writing()
        assert frames(transport.written[0]) == [b"re:q1", b"re:q2"]
        assert transport.closed  # what is left can never complete
        assert not transport.reading  # at end of file: not read again
        proto.connection_lost(None)
    run(main)


def test_observer_and_sampler_over_tcp() -> None:
    """The observer sees the query, the response, TCP, the peer's address, and the clock
    in ns before the handler; 1 in 2 answers is timed, to the response made."""
    seen: list[tuple[bytes, bytes | None, bool, tuple[Any, ...], int]] = []

    def watch(query: bytes, response: bytes | None, tcp: bool, peer: tuple[Any, ...],
              started: int) -> None:
        seen.append((query, response, tcp, peer, started))

    async def main() -> None:
        stats = Counters()
        durations = stats.durations
        dns = DNSServer(echo, [], 5.0, max_tcp_connections=8, stats=stats, observe=watch,
                        sample_every=2, clock=FakeClock(tick=0.25))
        proto = connect(dns, Transport(("127.0.0.2", 40000)))
        proto.data_received(frame(b"q1") + frame(b"drop"))
        # q1: started read (1000.25), no timing; drop: started (1000.5), timed from
        # 1000.75 to 1001.0
        assert seen == [(b"q1", b"re:q1", True, ("127.0.0.2", 40000), 1_000_250_000_000),
                        (b"drop", None, True, ("127.0.0.2", 40000), 1_000_500_000_000)]
        assert sum(durations.counts[True]) == 1 and durations.sums == [0.0, 0.25]
        assert sum(durations.counts[False]) == 0
        proto.connection_lost(None)
    run(main)


# -- the idle timeout ---------------------------------------------------------------------------


@pytest.mark.parametrize(("buffered", "paused", "aborted"), [(0, False, False), (1, False, True),
                                                            (0, True, True)])
def test_the_idle_timeout_to_the_instant(buffered: int, paused: bool, aborted: bool) -> None:
    """Re-armed for what is left of the timeout while the connection is younger than
    it; at the timeout, closed, or aborted when answers are stuck (bytes in the write
    buffer, or writing paused)."""
    async def main() -> None:
        dns = make(idle=5.0)
        transport = Transport()
        proto = connect(dns, transport)
        loop = Loop()
        proto.loop = cast(asyncio.AbstractEventLoop, loop)
        proto.last_activity = 100.0
        loop.now = 104.75
        proto._check_idle()
        assert [t.delay for t in loop.timers] == [pytest.approx(0.25)]
        assert proto.timer is loop.timers[0]
        assert not transport.closed and not transport.aborted
        transport.buffered, proto.writing_paused = buffered, paused
        loop.now = 105.0
        loop.timers[0].callback()
        assert len(loop.timers) == 1 and proto.timer is None
        assert (transport.aborted, transport.closed) == (aborted, not aborted)
        assert dns.stats.tcp_aborted == int(aborted)
        # another one in the same state: counted again
        other = connect(dns, Transport())
        other.loop = cast(asyncio.AbstractEventLoop, loop)
        other.last_activity = 100.0
        other.writing_paused = paused
        cast(Transport, other.transport).buffered = buffered
        other._check_idle()
        assert dns.stats.tcp_aborted == 2 * int(aborted)
        proto.connection_lost(None)
        other.connection_lost(None)
    run(main)


def test_the_idle_check_of_a_closed_connection_does_nothing() -> None:
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        proto.connection_lost(None)
        loop = Loop()
        proto.loop = cast(asyncio.AbstractEventLoop, loop)
        proto._check_idle()
        assert loop.timers == [] and not transport.closed
    run(main)


# -- zone transfers --------------------------------------------------------------------------


class Transfers:
    """A transfer for a query starting b"axfr": it sends two messages through the
    connection once ``go`` is set, then ends as ``ending`` says."""

    def __init__(self, ending: BaseException | None = None) -> None:
        self.go = asyncio.Event()
        self.ending = ending
        self.messages = [b"soa", b"end"]
        self.asked: list[tuple[bytes, str]] = []

    def __call__(self, message: bytes, peer: str,
                 proto: TCPProtocol) -> Coroutine[Any, Any, None] | None:
        if not message.startswith(b"axfr"):
            return None
        self.asked.append((message, peer))
        return self.send(proto)

    async def send(self, proto: TCPProtocol) -> None:
        await self.go.wait()
        for message in self.messages:
            await proto.send(message)
        if self.ending is not None:
            raise self.ending


def test_a_transfer_holds_the_queries_behind_it_and_answers_them_after() -> None:
    async def main() -> None:
        transfers = Transfers()
        dns = make(transfer=transfers)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        transport = Transport(("127.0.0.2", 40000), sock)
        proto = connect(dns, transport)
        proto.data_received(frame(b"q1") + frame(b"axfr") + frame(b"q2"))
        assert transfers.asked == [(b"axfr", "127.0.0.2")]
        assert [frames(w) for w in transport.written] == [[b"re:q1"]]  # before it: sent
        assert not transport.reading and proto.transferring is not None
        # the kernel doubles what it is given (up to net.core.wmem_max)
        wmem_max = int(Path("/proc/sys/net/core/wmem_max").read_text())
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == \
            2 * min(server.TRANSFER_SNDBUF, wmem_max)
        proto.data_received(frame(b"q3"))  # arrives during the transfer: waits
        proto.resume_writing()  # a drained write buffer does not end the wait either
        assert len(transport.written) == 1
        transfers.go.set()
        task = proto.transferring
        await task
        assert [frames(w) for w in transport.written[1:]] == [[b"soa"], [b"end"],
                                                              [b"re:q2", b"re:q3"]]
        assert proto.transferring is None and transport.reading
        assert not transport.aborted and not transport.closed
        proto.connection_lost(None)
        sock.close()
    run(main)


class NoBuffer:
    """A socket whose send buffer cannot be set."""

    def setsockopt(self, level: int, option: int, value: int) -> None:
        raise OSError(22, "Invalid argument")


def test_a_transfer_starts_where_the_send_buffer_cannot_be_set() -> None:
    async def main() -> None:
        transfers = Transfers()
        transfers.go.set()
        dns = make(transfer=transfers)
        transport = Transport(sock=NoBuffer())
        proto = connect(dns, transport)
        proto.data_received(frame(b"axfr"))
        task = proto.transferring
        assert task is not None
        await task
        assert [a for w in transport.written for a in frames(w)] == [b"soa", b"end"]
        proto.connection_lost(None)
    run(main)


@pytest.mark.parametrize("after", ["paused", "eof", "another transfer"])
def test_after_a_transfer_reading_resumes_only_for_a_client_still_owed_nothing(
        after: str) -> None:
    """Not while the client does not read, not after it half-closed, not while a
    transfer asked for behind the first runs."""
    async def main() -> None:
        transfers = Transfers()
        dns = make(transfer=transfers)
        transport = Transport()
        proto = connect(dns, transport)
        proto.data_received(frame(b"axfr") + (frame(b"axfr2") if after == "another transfer"
                                              else b""))
        first = proto.transferring
        assert first is not None
        if after == "paused":
            proto.pause_writing()
            transfers.messages = []  # it ends while the client still does not read
        if after == "eof":
            assert proto.eof_received() is True
        transfers.go.set()
        await asyncio.wait([first])
        assert not transport.reading
        if after == "another transfer":
            assert proto.transferring is not None and proto.transferring is not first
            await proto.transferring
            assert transport.reading  # after the last one
        proto.connection_lost(None)
    run(main)


@pytest.mark.parametrize(("ending", "aborted"), [
    (ConnectionResetError("peer gone"), False),
    (TimeoutError(), True),  # over --xfr-timeout: cut mid-stream, so not a clean close
    (RuntimeError("a bug"), True),
])
def test_a_transfer_that_fails_costs_only_itself(ending: BaseException, aborted: bool,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        transfers = Transfers(ending)
        transfers.go.set()
        dns = make(transfer=transfers)
        transport = Transport()
        proto = connect(dns, transport)
        proto.data_received(frame(b"axfr") + frame(b"q2"))
        task = proto.transferring
        assert task is not None
        await task
        assert proto.transferring is None
        assert transport.aborted is aborted
        answers = [a for w in transport.written for a in frames(w)]
        # after a failure the connection is not answered any more (it is being closed)
        assert answers == [b"soa", b"end"]
        proto.connection_lost(None)
    with caplog.at_level(logging.ERROR, "clusterset_dns.serving.server"):
        run(main)
    assert [r.getMessage() for r in caplog.records] == (
        ["zone transfer failed"] if isinstance(ending, RuntimeError) else [])


def test_a_transfer_waits_while_the_client_does_not_read() -> None:
    async def main() -> None:
        dns = make()
        transport = Transport()
        proto = connect(dns, transport)
        loop = asyncio.get_running_loop()
        proto.pause_writing()
        sending = loop.create_task(proto.send(b"m1"))
        await asyncio.sleep(0)
        assert frames(transport.written[0]) == [b"m1"] and not sending.done()
        proto.resume_writing()
        await sending
        assert proto.drained is None
        before = proto.last_activity
        await proto.send(b"m2")  # not paused: progress, no wait
        assert proto.last_activity >= before and frames(transport.written[1]) == [b"m2"]
        proto.pause_writing()
        sending = loop.create_task(proto.send(b"m3"))
        await asyncio.sleep(0)
        proto.connection_lost(None)
        with pytest.raises(ConnectionResetError, match=r"^connection lost$"):
            await sending
        proto.connection_lost(None)  # twice: nothing waits any more
        with pytest.raises(ConnectionResetError, match=r"^connection closed$"):
            await proto.send(b"m4")
    run(main)


def test_a_transfer_message_gives_other_connections_one_turn() -> None:
    async def main() -> None:
        dns = make()
        proto = connect(dns, Transport())
        sending = asyncio.get_running_loop().create_task(proto.send(b"m1"))
        for _ in range(3):  # the task's start, its turn given away, its end
            await asyncio.sleep(0)
        assert sending.done()
        proto.connection_lost(None)
    run(main)


def test_a_lost_connection_cancels_its_transfer() -> None:
    async def main() -> None:
        transfers = Transfers()
        dns = make(transfer=transfers)
        transport = Transport()
        proto = connect(dns, transport)
        proto.data_received(frame(b"axfr"))
        task = proto.transferring
        assert task is not None
        await asyncio.sleep(0)
        proto.connection_lost(None)
        await task  # the cancellation ends the transfer quietly
        assert proto.transferring is None and not transport.aborted and not transport.written
    run(main)
