"""server.TCPProtocol driven call by call: the connection cap and the per-address share
to the connection, pipelined answers framed and written in chunks, the answers a client
is owed after it half-closed, the idle timeout to the instant, and what a closed
connection leaves behind (zone transfers: test_tcptransfer.py).

The transport is a recording stand-in (the seam asyncio calls us through), and the idle
timer's loop a stand-in whose time moves only when the test moves it (both in
tcpfakes.py); tests/unit/test_server.py runs the same code over real sockets."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest

from clusterset_dns.serving import outq, server
from clusterset_dns.serving.server import Counters, DNSServer
from clusterset_dns.serving.udpbatch import Peer

from .fakeclock import FakeClock
from .tcpfakes import Loop, Transport, connect, echo, frame, frames, make, run

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


@pytest.mark.parametrize("taken", [0, 1, 40_000])
def test_a_client_draining_the_buffer_without_a_resume_is_not_idle(taken: int) -> None:
    """asyncio calls resume_writing only once the buffer is down to a quarter of
    WRITE_HIGH: a client taking bytes out of it more slowly makes progress all the same
    (each check that finds it smaller than at the pause or the last check), while one
    taking nothing is aborted at the instant of the timeout, as before."""
    async def main() -> None:
        dns = make(idle=5.0)
        transport = Transport()
        proto = connect(dns, transport)
        loop = Loop()
        proto.loop = cast(asyncio.AbstractEventLoop, loop)
        proto.last_activity = 100.0
        loop.now = 101.0
        proto._check_idle()  # the size at this check: 0 (nothing written yet)
        transport.buffered = 2 * server.WRITE_HIGH
        proto.pause_writing()  # by the write that filled it: this size is what to drain
        transport.buffered -= taken
        loop.now = 105.0
        loop.timers[0].callback()
        if not taken:
            assert transport.aborted and dns.stats.tcp_aborted == 1 and len(loop.timers) == 1
            proto.connection_lost(None)
            return
        assert not transport.aborted and not transport.closed
        assert proto.last_activity == 105.0
        assert [t.delay for t in loop.timers[1:]] == [5.0] and proto.timer is loop.timers[1]
        loop.now = 110.0  # nothing taken since that check: cut at the instant
        loop.timers[1].callback()
        assert transport.aborted and dns.stats.tcp_aborted == 1
        proto.connection_lost(None)
    run(main)


@pytest.mark.parametrize("taken", [0, 1, 65_536])
def test_the_kernels_queue_draining_is_progress_too(taken: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio's buffer can hold still at a pause for longer than the timeout while the
    client reads what the kernel queued before it (hundreds of KiB on a transfer's
    socket): the kernel's unacknowledged bytes shrinking is progress; not shrinking by
    a byte is not, and the client is aborted at the instant of the timeout."""
    queued = {"bytes": 300_000}
    sock = object()
    monkeypatch.setattr(outq, "kernel_unsent",
                        lambda s: queued["bytes"] if s is sock else 0)

    async def main() -> None:
        dns = make(idle=5.0)
        transport = Transport(sock=sock)
        proto = connect(dns, transport)
        loop = Loop()
        proto.loop = cast(asyncio.AbstractEventLoop, loop)
        proto.last_activity = 100.0
        loop.now = 101.0
        proto._check_idle()  # arms the timer on this loop
        transport.buffered = 2 * server.WRITE_HIGH
        proto.pause_writing()  # asyncio's buffer stays at this size from here on
        queued["bytes"] -= taken
        loop.now = 105.0
        loop.timers[0].callback()
        if not taken:
            assert transport.aborted and dns.stats.tcp_aborted == 1
        else:
            assert not transport.aborted and proto.last_activity == 105.0
        proto.connection_lost(None)
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
