"""dnstap.Tap.from_config (the identity and version each message carries, by default and
given; the queue's bound; the clock), read_control's limits (a data frame where a control
frame belongs, a control frame of MAX_CONTROL bytes and one byte more), and the goodbye:
STOP without a content type, then FINISH waited for STOP_TIMEOUT on the injected clock
and no longer, whatever the collector does instead (closes, resets, sends something else,
nothing): the sender ends quietly. Written for the survivors of scripts/mutate on
process/dnstap.py."""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import struct
import tempfile
from pathlib import Path
from typing import Any, cast

import pytest

from clusterset_dns import __version__
from clusterset_dns.base.config import Config, DnstapTarget
from clusterset_dns.process import dnstap
from clusterset_dns.process import dnstapwire as wire
from clusterset_dns.serving.stats import Stats

from .fakeclock import FakeClock
from .test_dnstap import Collector, until

TARGET = DnstapTarget(path="/nowhere/tap.sock")


@pytest.mark.parametrize(("identity", "version", "preamble"), [
    (None, None, wire.preamble(socket.gethostname().encode(),
                               f"clusterset-dns {__version__}".encode())),
    ("ns-1", "v9", wire.preamble(b"ns-1", b"v9")),
    ("", "", wire.preamble(b"", b"")),  # given empty: no field, not the defaults
])
def test_from_config(identity: str | None, version: str | None, preamble: bytes) -> None:
    stats = Stats()
    config = Config(dnstap=TARGET, dnstap_identity=identity, dnstap_version=version,
                    dnstap_queue=7)
    clock = FakeClock()
    tap = dnstap.Tap.from_config(config, stats, clock)
    assert tap.clock is clock
    expected = wire.Encoder(preamble)
    out: list[bytes] = []
    tap.encoder.frames(out, wire.Encoder.heads(b""), 1, b"q", 2, b"r")
    again: list[bytes] = []
    expected.frames(again, wire.Encoder.heads(b""), 1, b"q", 2, b"r")
    assert b"".join(out) == b"".join(again)
    assert (tap.target, tap.capacity, tap.stats, tap.max_bytes) == (
        TARGET, 7, stats, dnstap.QUEUE_BYTES)


def control(body: bytes, escape: bytes = b"\0\0\0\0") -> bytes:
    return escape + len(body).to_bytes(4, "big") + body


def read(data: bytes) -> tuple[int, list[bytes]]:
    async def reading() -> tuple[int, list[bytes]]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await dnstap.read_control(reader)

    return asyncio.run(reading())


def test_a_control_frame_of_max_control_bytes_is_read() -> None:
    frame = wire.control_frame(wire.ACCEPT, wire.CONTENT_TYPE)[8:]
    padding = wire.MAX_CONTROL - len(frame)
    # a second content type fills it to the byte: field 1, its length, its bytes
    filler = b"\x00\x00\x00\x01" + (padding - 8).to_bytes(4, "big") + bytes(padding - 8)
    body = frame + filler
    assert len(body) == wire.MAX_CONTROL
    assert read(control(body)) == (wire.ACCEPT, [wire.CONTENT_TYPE, bytes(padding - 8)])


def test_a_control_frame_one_byte_longer_is_refused() -> None:
    refused = rf"^control frame of {wire.MAX_CONTROL + 1} bytes$"
    with pytest.raises(wire.ProtocolError, match=refused):
        read(control(bytes(wire.MAX_CONTROL + 1)))


@pytest.mark.parametrize("escape", [b"\0\0\0\1", b"\1\0\0\0"])
def test_a_data_frame_where_a_control_frame_belongs(escape: bytes) -> None:
    with pytest.raises(wire.ProtocolError,
                       match=r"^a data frame where a control frame was expected$"):
        read(control(wire.control_frame(wire.ACCEPT)[8:], escape))



# -- the goodbye: STOP, then FINISH within STOP_TIMEOUT ---------------------------------------

FINISHES = ["finish", "late", "never", "close", "garbage", "reset"]


async def goodbye(behaviour: str, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """A TCP collector that takes the handshake, reads our STOP and then does
    ``behaviour``; the Tap is stopped with nothing queued."""
    stops: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await dnstap.read_control(reader)  # READY
        writer.write(wire.control_frame(wire.ACCEPT))
        await dnstap.read_control(reader)  # START
        head = await reader.readexactly(8)
        stops.append(head + await reader.readexactly(int.from_bytes(head[4:], "big")))
        if behaviour == "late":
            await clock.sleep(dnstap.STOP_TIMEOUT / 2)
        if behaviour in ("finish", "late"):
            writer.write(wire.control_frame(wire.FINISH, None))
        elif behaviour == "garbage":
            writer.write(b"\0\0\0\1" + bytes(8))  # a data frame
        elif behaviour == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        elif behaviour == "never":
            await asyncio.Event().wait()
        await writer.drain()
        writer.close()

    # 127.0.0.2: the host is the target's, not any loopback address
    server = await asyncio.start_server(serve, "127.0.0.2", 0)
    port = server.sockets[0].getsockname()[1]
    tap = dnstap.Tap(DnstapTarget(host="127.0.0.2", port=port), "", "", 10, Stats(), clock)
    tap.start()
    await until(lambda: tap.connected, "connected")
    caplog.clear()
    stopping = asyncio.ensure_future(tap.stop())
    await until(lambda: bool(stops), "STOP")
    assert stops == [wire.control_frame(wire.STOP, None)]  # no content type in a STOP
    assert tap.task is not None
    if behaviour in ("late", "never"):
        wait = dnstap.STOP_TIMEOUT / 2 if behaviour == "late" else dnstap.STOP_TIMEOUT
        await until(lambda: len(clock.pending()) >= (3 if behaviour == "late" else 2),
                    "the timers")
        clock.advance(wait - 0.001)
        for _ in range(50):
            await asyncio.sleep(0)
        assert not stopping.done() and not tap.task.done()  # FINISH is waited for
        clock.advance(0.001)
    await until(stopping.done, "stopped")
    assert stopping.result() is None
    assert tap.task.done() and not tap.task.cancelled()  # it ended, not cut at FLUSH_TIMEOUT
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    server.close()


@pytest.mark.parametrize("behaviour", FINISHES)
def test_the_goodbye(behaviour: str, caplog: pytest.LogCaptureFixture) -> None:
    asyncio.run(asyncio.wait_for(goodbye(behaviour, FakeClock(), caplog), 30))


def test_a_dropped_answer_counts_its_messages() -> None:
    """Two messages an answer, one for a query without a response."""
    async def body() -> Stats:
        stats = Stats()
        tap = dnstap.Tap(TARGET, "", "", 1, stats, FakeClock())
        tap.observe(b"q", b"r", False, ("127.0.0.1", 1), 0)  # the queue's one place
        tap.observe(b"q", None, False, ("127.0.0.1", 1), 0)
        assert stats.dnstap_dropped == 1
        tap.observe(b"q", b"r", False, ("127.0.0.1", 1), 0)
        return stats

    assert asyncio.run(body()).dnstap_dropped == 3


def test_stop_returns_once_the_sender_has_ended() -> None:
    async def body() -> None:
        clock = FakeClock()
        tap = dnstap.Tap(TARGET, "", "", 10, Stats(), clock)
        tap.start()
        await until(lambda: bool(clock.pending()), "a retry waiting")
        await tap.stop()
        assert tap.task is not None and tap.task.done()  # no turn of the loop in between

    asyncio.run(asyncio.wait_for(body(), 30))


def encoded(answers: list[tuple[bool, tuple[str, int]]], tap: dnstap.Tap) -> list[bytes]:
    """Each answer's frames as ``tap`` encodes them (one _encode a batch of BATCH)."""
    out = []
    for tcp, peer in answers:
        tap.observe(b"\0\1q", b"\0\1r", tcp, peer, 0)
    while tap.queue:
        out.append(tap._encode())
    return out


def test_each_client_has_its_own_head() -> None:
    """Clients told apart by address, port and transport: each answer's messages are
    those a Tap that never saw another client writes."""
    answers = [(False, ("127.0.0.1", 5353)), (False, ("127.0.0.2", 5353)),
               (False, ("127.0.0.1", 5354)), (True, ("127.0.0.1", 5353)),
               (False, ("127.0.0.1", 5353))]

    async def body() -> None:
        clock = FakeClock()
        together = b"".join(encoded(answers, dnstap.Tap(TARGET, "", "", 10, Stats(), clock)))
        alone = b"".join(b"".join(encoded([a], dnstap.Tap(TARGET, "", "", 10, Stats(), clock)))
                         for a in answers)
        assert together == alone

    asyncio.run(body())


def test_the_heads_remembered_are_at_most_4096() -> None:
    async def body() -> None:
        tap = dnstap.Tap(TARGET, "", "", 5000, Stats(), FakeClock())
        clients = [(False, ("127.0.0.1", port)) for port in range(1, 4098)]
        encoded(clients[:4096], tap)
        assert len(tap._heads) == 4096
        encoded(clients[4096:], tap)
        assert len(tap._heads) == 1  # forgotten at once, then the new one

    asyncio.run(body())


# -- a collector that pauses, resumes or half-closes -----------------------------------------

class Pausing:
    """A Unix-socket collector that takes the handshake, then reads nothing until
    ``resume`` is set; it counts the data frames it reads."""

    def __init__(self) -> None:
        self.resume = asyncio.Event()
        self.frames = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            await dnstap.read_control(reader)  # READY
            writer.write(wire.control_frame(wire.ACCEPT))
            await dnstap.read_control(reader)  # START
            await self.resume.wait()
            while True:
                length = int.from_bytes(await reader.readexactly(4), "big")
                await reader.readexactly(length)
                self.frames += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass


BIG = b"\0\1" + bytes(4000)


async def paused_tap(path: str, clock: FakeClock, answers: int) -> tuple[Pausing, dnstap.Tap]:
    """A Tap stalled behind the paused collector: ``answers`` large answers queued, more
    than the socket and WRITE_HIGH hold."""
    collector = Pausing()
    await asyncio.start_unix_server(collector.serve, path)
    tap = dnstap.Tap(DnstapTarget(path=path), "", "", answers, Stats(), clock)
    tap.start()
    await until(lambda: tap.connected and bool(collector.writers), "connected")
    for _ in range(answers):
        tap.observe(BIG, BIG, False, ("127.0.0.1", 1), 0)
    await until(lambda: not tap.queue, "all encoded")
    for _ in range(20):
        await asyncio.sleep(0.001)
    return collector, tap


def in_a_directory(body: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(asyncio.wait_for(body(str(Path(tmp) / "tap.sock"), FakeClock()), 30))


def test_a_collector_that_pauses_then_reads_gets_every_frame(
        caplog: pytest.LogCaptureFixture) -> None:
    """The sender waits for a slow collector and goes on when it reads again, on the
    same connection."""
    async def body(path: str, clock: FakeClock) -> None:
        collector, tap = await paused_tap(path, clock, 200)
        assert tap.stats.dnstap_sent == 400 and collector.frames == 0
        collector.resume.set()
        await until(lambda: collector.frames == 400, "every frame")
        tap.observe(b"\0\1q", b"\0\1r", False, ("127.0.0.1", 1), 0)
        await until(lambda: collector.frames == 402, "the next answer")
        assert len(collector.writers) == 1 and tap.connected
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        if tap.task is not None:
            tap.task.cancel()

    in_a_directory(body)


@pytest.mark.parametrize("stalled", [False, True], ids=["idle", "stalled"])
def test_a_collector_that_closes_its_side_is_said_gone(
        stalled: bool, caplog: pytest.LogCaptureFixture) -> None:
    """The end of the collector's stream, while the sender waits for answers or for the
    collector to read: the connection is given up, and the log says why."""
    async def body(path: str, clock: FakeClock) -> None:
        collector, tap = await paused_tap(path, clock, 200 if stalled else 0)
        caplog.clear()
        collector.writers[0].write_eof()
        await until(lambda: not tap.connected, "given up")
        [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warning.endswith(" (the collector closed the connection); reconnecting")
        if tap.task is not None:
            tap.task.cancel()

    in_a_directory(body)


def slept(clock: FakeClock, count: int) -> bool:
    # at least: a jump may end a connection attempt's timer (CONNECT_TIMEOUT) instead of
    # a retry's wait, which fails that attempt all the same
    return len(clock.sleeps) >= count


def test_an_outage_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """The collector absent through three retries: one warning; then it comes, goes for
    good, and is retried three times: one more (its loss), none for the retries."""
    async def body(path: str, clock: FakeClock) -> None:
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 10, Stats(), clock)
        tap.start()
        assert tap.task is not None and tap.task.get_name() == "dnstap"
        for tries in range(1, 4):
            await until(lambda: bool(clock.pending()), "a retry waiting")
            clock.jump()
            await until(functools.partial(slept, clock, tries), f"retry {tries}")
        assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
        collector = Pausing()
        server = await asyncio.start_unix_server(collector.serve, path)
        await until(lambda: tap.connected, "connected", clock)
        caplog.clear()
        server.close()
        collector.writers[0].transport.abort()
        await until(lambda: not tap.connected, "lost")
        for tries in range(len(clock.sleeps) + 1, len(clock.sleeps) + 4):
            await until(lambda: bool(clock.pending()), "a retry waiting")
            clock.jump()
            await until(functools.partial(slept, clock, tries), f"retry {tries}")
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "lost the collector" in warnings[0]
        tap.task.cancel()

    in_a_directory(body)


def test_batch_after_batch_with_one_turn_of_the_loop_between(
        caplog: pytest.LogCaptureFixture) -> None:
    """More than two batches queued while the collector reads: all are encoded within a
    few turns of the event loop (the sender yields a turn, it does not pause)."""
    async def body(path: str, clock: FakeClock) -> None:
        collector = Pausing()
        collector.resume.set()
        await asyncio.start_unix_server(collector.serve, path)
        count = 2 * dnstap.BATCH + 1
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", count, Stats(), clock)
        tap.start()
        await until(lambda: tap.connected, "connected")
        for _ in range(count):
            tap.observe(b"\0\1q", b"\0\1r", False, ("127.0.0.1", 1), 0)
        for _ in range(10):
            await asyncio.sleep(0)
        assert not tap.queue and tap.stats.dnstap_sent == 2 * count
        if tap.task is not None:
            tap.task.cancel()

    in_a_directory(body)


def test_stop_before_start() -> None:
    async def body() -> None:
        tap = dnstap.Tap(TARGET, "", "", 10, Stats(), FakeClock())
        await tap.stop()
        assert tap.task is None and not tap.closing

    asyncio.run(body())


def test_a_collector_that_refuses_the_content_type_is_said_so(
        caplog: pytest.LogCaptureFixture) -> None:
    async def body(path: str, clock: FakeClock) -> None:
        collector = Collector(path, content_type=b"protobuf:other")
        await collector.start()
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 10, Stats(), clock)
        tap.start()
        await until(lambda: bool(collector.controls), "READY")
        await until(lambda: bool(clock.pending()), "a retry waiting")
        [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert (f"(the collector answered READY with control frame {wire.ACCEPT} "
                f"[b'protobuf:other'] (not ACCEPT of {wire.CONTENT_TYPE!r}))") in warning
        await tap.stop()
        await collector.close()

    in_a_directory(body)


# -- the connection's write buffer, and a STOP the collector does not read -------------------

def test_the_connection_holds_write_high_bytes_before_the_sender_waits() -> None:
    """The transport pauses the sender past WRITE_HIGH unsent bytes (asyncio's own
    default is a quarter of it), and resumes it below a quarter of that."""
    async def body(path: str, clock: FakeClock) -> tuple[int, int]:
        collector = Pausing()
        server = await asyncio.start_unix_server(collector.serve, path)
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 10, Stats(), clock)
        _, writer = await tap._connect()
        limits: tuple[int, int] = writer.transport.get_write_buffer_limits()
        writer.close()
        server.close()
        return limits

    with tempfile.TemporaryDirectory() as tmp:
        limits = asyncio.run(asyncio.wait_for(body(str(Path(tmp) / "tap.sock"),
                                                   FakeClock()), 30))
    assert limits == (dnstap.WRITE_HIGH // 4, dnstap.WRITE_HIGH)


class Stalled:
    """A connection's writer whose buffer never drains (the collector reads nothing)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    async def drain(self) -> None:
        await asyncio.Event().wait()


def test_a_stop_that_cannot_be_sent_is_given_up_after_stop_timeout() -> None:
    """The goodbye's STOP waits STOP_TIMEOUT on the clock for room in the buffer, and no
    longer: then the goodbye goes on, quietly."""
    async def body() -> tuple[bool, bool, list[bytes]]:
        clock = FakeClock()
        tap = dnstap.Tap(TARGET, "", "", 10, Stats(), clock)
        reader = asyncio.StreamReader()
        reader.feed_data(wire.control_frame(wire.FINISH, None))
        writer = Stalled()
        gone: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        finishing = asyncio.ensure_future(tap._finish(
            reader, cast(asyncio.StreamWriter, writer), gone))
        for _ in range(5):
            await asyncio.sleep(0)
        assert clock.pending() == [1000.0 + dnstap.STOP_TIMEOUT]
        clock.advance(dnstap.STOP_TIMEOUT - 0.001)
        for _ in range(5):
            await asyncio.sleep(0)
        waited = not finishing.done()
        clock.advance(0.001)
        for _ in range(5):
            await asyncio.sleep(0)
        await finishing  # no error: the goodbye ends quietly
        return waited, gone.cancelled(), writer.written

    waited, cancelled, written = asyncio.run(asyncio.wait_for(body(), 30))
    assert waited and cancelled
    assert written == [wire.control_frame(wire.STOP, None)]
