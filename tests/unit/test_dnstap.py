"""dnstap: the hand-written protobuf and Frame Streams bytes, read back by the testkit's
decoder (written from the protobuf wire format, not from the encoder), and the Tap's
queue, handshake, reconnection and drop counting against a collector on a Unix
socket, on a fake clock. The real reader (golang-dnstap) is driven in
tests/conformance/test_dnstap.py."""

from __future__ import annotations

import asyncio
import socket
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from clusterset_dns.base.config import Config, ConfigError, DnstapTarget, parse_dnstap
from clusterset_dns.process import dnstap
from clusterset_dns.process import dnstapwire as wire
from clusterset_dns.serving.stats import Stats
from clusterset_dns_testkit.dnstapreader import fields, varint

from .fakeclock import FakeClock

T = TypeVar("T")


# -- the bytes -------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "encoded"), [
    (0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f"), (2**64 - 1, b"\xff" * 9 + b"\x01")])
def test_varint(value: int, encoded: bytes) -> None:
    assert wire.varint(value) == encoded
    assert varint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(("host", "family", "packed"), [
    ("127.0.0.1", wire.INET, b"\x7f\x00\x00\x01"),
    ("::ffff:127.0.0.2", wire.INET, b"\x7f\x00\x00\x02"),  # IPv4 on an IPv6 socket
    ("::1", wire.INET6, b"\x00" * 15 + b"\x01"),
    ("fe80::1%lo", wire.INET6, b"\xfe\x80" + b"\x00" * 13 + b"\x01")])
def test_address(host: str, family: int, packed: bytes) -> None:
    assert wire.address(host) == (family, packed)


def test_query_and_response_messages_carry_every_field() -> None:
    head = wire.peer_head(True, "::1", 53211)
    query, response = b"\x12\x34query", b"\x12\x34response"
    pre = wire.preamble(b"host-a", b"clusterset-dns 9")
    sent = (1_700_000_123_456_789_012, 1_700_000_124_000_000_001)
    q = fields(wire.dnstap(pre, wire.query_message(head, sent[0], query)))
    r = fields(wire.dnstap(pre, wire.response_message(head, sent[0], sent[1], response)))
    for d in (q, r):
        assert set(d) == {1, 2, 14, 15}
        assert (d[1], d[2], d[15]) == (b"host-a", b"clusterset-dns 9", wire.DNSTAP_MESSAGE)
    qm, rm = fields(q[14]), fields(r[14])
    assert qm == {1: wire.AUTH_QUERY, 2: wire.INET6, 3: wire.TCP, 4: b"\x00" * 15 + b"\x01",
                  6: 53211, 8: 1_700_000_123, 9: 456_789_012, 10: query}
    assert rm == {1: wire.AUTH_RESPONSE, 2: wire.INET6, 3: wire.TCP, 4: b"\x00" * 15 + b"\x01",
                  6: 53211, 8: 1_700_000_123, 9: 456_789_012, 12: 1_700_000_124, 13: 1,
                  14: response}
    assert fields(wire.peer_head(False, "10.1.2.3", 0)) == {2: wire.INET, 3: wire.UDP,
                                                         4: b"\x0a\x01\x02\x03", 6: 0}


@pytest.mark.parametrize(("query_size", "response_size"), [
    (12, 100), (40, 127), (40, 128), (100, 16000), (200, 16384), (300, 65535), (17, None)])
def test_encoder_frames_are_the_messages_framed(query_size: int,
                                                response_size: int | None) -> None:
    """The folded encoder writes the same bytes as the field-by-field functions, across
    the varint lengths (one, two and three bytes) and a second that changes."""
    pre = wire.preamble(b"id", b"v")
    encoder = wire.Encoder(pre)
    head = wire.peer_head(False, "192.0.2.1", 65535)
    query = bytes(range(256)) * (query_size // 256) + bytes(query_size % 256)
    response = None if response_size is None else b"\xab" * response_size
    for query_ns, response_ns in ((1_700_000_000_999_999_999, 1_700_000_001_000_000_000),
                                  (1_700_000_002_000_000_000, 1_700_000_002_000_000_001)):
        expected = wire.data_frame(wire.dnstap(pre, wire.query_message(head, query_ns, query)))
        if response is not None:
            expected += wire.data_frame(wire.dnstap(pre, wire.response_message(
                head, query_ns, response_ns, response)))
        out: list[bytes] = []
        encoder.frames(out, wire.Encoder.heads(head), query_ns, query, response_ns, response)
        assert b"".join(out) == expected


def test_no_identity_no_version_no_field() -> None:
    assert set(fields(wire.dnstap(wire.preamble(b"", b""), b""))) == {14, 15}


def test_frames() -> None:
    # fstrm: READY = escape, length 34, type 4, field CONTENT_TYPE (1) of 22 bytes
    assert wire.control_frame(wire.READY) == (b"\0\0\0\0" + b"\0\0\0\x22" + b"\0\0\0\x04"
                                              + b"\0\0\0\x01\0\0\0\x16protobuf:dnstap.Dnstap")
    assert wire.control_frame(wire.STOP, None) == b"\0\0\0\0\0\0\0\x04\0\0\0\x03"
    assert wire.data_frame(b"abc") == b"\0\0\0\x03abc"
    assert wire.parse_control(wire.control_frame(wire.ACCEPT)[8:]) == (
        wire.ACCEPT, [wire.CONTENT_TYPE])
    for bad in (b"\0\0", b"\0\0\0\x01\0\0\0\x01", b"\0\0\0\x01\0\0\0\x01\0\0\0\x09abc"):
        with pytest.raises(wire.ProtocolError):
            wire.parse_control(bad)


@pytest.mark.parametrize(("text", "target"), [
    ("unix:/run/dnstap.sock", DnstapTarget(path="/run/dnstap.sock")),
    ("tcp:127.0.0.1:6000", DnstapTarget(host="127.0.0.1", port=6000)),
    ("tcp:[::1]:65535", DnstapTarget(host="::1", port=65535))])
def test_parse_target(text: str, target: DnstapTarget) -> None:
    assert parse_dnstap(text) == target
    assert str(target) == text.replace("[::1]", "::1")


@pytest.mark.parametrize("text", ["unix:", "udp:1.2.3.4:5", "tcp:127.0.0.1", "tcp:host:53",
                                  "tcp:127.0.0.1:0", "tcp:127.0.0.1:65536", "/run/x.sock"])
def test_parse_target_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_dnstap(text)


def test_queue_must_hold_one() -> None:
    with pytest.raises(ConfigError, match="dnstap-queue"):
        Config(dnstap_queue=0)


# -- the Tap against a collector -------------------------------------------------------

class Collector:
    """A Frame Streams reader on a Unix socket: answers READY with ACCEPT (of
    ``content_type``), keeps every data frame, answers STOP with FINISH."""

    def __init__(self, path: str, content_type: bytes = wire.CONTENT_TYPE,
                 reads: bool = True) -> None:
        self.path = path
        self.content_type = content_type
        self.reads = reads
        self.frames: list[bytes] = []
        self.controls: list[int] = []
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self.server = await asyncio.start_unix_server(self._serve, self.path)

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            kind, _ = await dnstap.read_control(reader)
            self.controls.append(kind)
            writer.write(wire.control_frame(wire.ACCEPT, self.content_type))
            if not self.reads:
                await asyncio.Event().wait()  # never reads again
            kind, _ = await dnstap.read_control(reader)
            self.controls.append(kind)
            while True:
                length = int.from_bytes(await reader.readexactly(4), "big")
                if length == 0:  # STOP
                    kind, _ = wire.parse_control(
                        await reader.readexactly(int.from_bytes(await reader.readexactly(4),
                                                                "big")))
                    self.controls.append(kind)
                    writer.write(wire.control_frame(wire.FINISH, None))
                    await writer.drain()
                    return
                self.frames.append(await reader.readexactly(length))
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


async def until(check: Callable[[], bool], what: str, clock: FakeClock | None = None) -> None:
    """Lets the loop run until ``check`` holds (bounded); with ``clock``, moves it to the
    next sleeper's deadline whenever nothing else is left to do."""
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.005)
        if clock is not None:
            clock.jump()
    raise AssertionError(f"never: {what}")


def run(body: Callable[[str, Stats, FakeClock], Awaitable[T]]) -> T:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(asyncio.wait_for(
            body(str(Path(tmp) / "tap.sock"), Stats(), FakeClock()), 30))


async def connected_tap(path: str, stats: Stats, clock: FakeClock, queue: int, *,
                        reads: bool = True, identity: str = "",
                        version: str = "") -> tuple[Collector, dnstap.Tap]:
    """A collector on ``path`` and a started Tap of ``queue`` messages, once connected."""
    collector = Collector(path, reads=reads)
    await collector.start()
    tap = dnstap.Tap(DnstapTarget(path=path), identity, version, queue, stats, clock)
    tap.start()
    await until(lambda: tap.connected, "connected")
    return collector, tap


async def stuck_tap(path: str, stats: Stats,
                    clock: FakeClock) -> tuple[Collector, dnstap.Tap]:
    """A Tap (queue of 50) connected to a collector that takes the handshake and then
    reads nothing, sent 20 x 50 large messages: far more than the socket and WRITE_HIGH
    hold; the queue never holds more than its bound meanwhile."""
    collector, tap = await connected_tap(path, stats, clock, 50, reads=False)
    big = b"\0\0" + bytes(4000)
    for _ in range(20):
        for _ in range(50):
            tap.observe(big, big, False, ("127.0.0.1", 1), 0)
            assert len(tap.queue) <= 50
        await asyncio.sleep(0.01)
    return collector, tap


def answer(n: int) -> tuple[bytes, bytes]:
    return n.to_bytes(2, "big") + b"q", n.to_bytes(2, "big") + b"r"


def test_tap_sends_each_answer_as_two_messages_then_stop() -> None:
    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        collector, tap = await connected_tap(path, stats, clock, 10, identity="id",
                                             version="v1")
        started = clock.perf_counter_ns()
        for n in range(3):
            tap.observe(*answer(n), n == 1, ("::ffff:127.0.0.1", 4000 + n), started)
        tap.observe(b"\0\x09x", None, False, ("127.0.0.1", 5), started)  # no response sent
        await until(lambda: len(collector.frames) == 7, "7 frames")
        await tap.stop()
        await collector.close()
        assert collector.controls == [wire.READY, wire.START, wire.STOP]
        assert (stats.dnstap_sent, stats.dnstap_dropped) == (7, 0)
        messages = [fields(fields(frame)[14]) for frame in collector.frames]
        assert [m[1] for m in messages] == [wire.AUTH_QUERY, wire.AUTH_RESPONSE] * 3 + [
            wire.AUTH_QUERY]
        for n in range(3):
            q, r = messages[2 * n], messages[2 * n + 1]
            assert (q[10], r[14]) == answer(n)
            assert q[2] == r[2] == wire.INET and q[4] == r[4] == b"\x7f\0\0\x01"
            assert q[3] == r[3] == (wire.TCP if n == 1 else wire.UDP)
            assert q[6] == r[6] == 4000 + n
            assert (q[8], q[9]) == (r[8], r[9])
            assert r[12] * 10**9 + r[13] >= r[8] * 10**9 + r[9]
        assert messages[6][10] == b"\0\x09x"

    run(body)


def test_queue_bound_drops_and_counts_while_no_collector_then_connects() -> None:
    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 3, stats, clock)
        tap.start()
        await until(lambda: bool(clock.pending()), "a retry waiting")
        assert not tap.connected
        for n in range(5):  # 3 fit; the 4th and 5th answers' 4 messages are dropped
            tap.observe(*answer(n), False, ("127.0.0.1", 1), 0)
        assert (len(tap.queue), stats.dnstap_dropped) == (3, 4)
        collector = Collector(path)
        await collector.start()
        await until(lambda: len(collector.frames) == 6, "the 3 queued answers", clock)
        assert [fields(fields(f)[14]).get(10) for f in collector.frames[::2]] == [
            answer(n)[0] for n in range(3)]
        await tap.stop()
        await collector.close()
        assert (stats.dnstap_sent, stats.dnstap_dropped) == (6, 4)

    run(body)


@pytest.mark.parametrize(("slack", "kept"), [(0, 2), (-1, 1)])
def test_queue_bound_in_bytes_while_no_collector(slack: int, kept: int) -> None:
    """Large answers (a TCP answer may be 64 KiB) fill the queue's bytes before its
    count: the answer that fits to the byte is queued, the next dropped and counted;
    what is sent frees its bytes (before: only the count bounded the queue, 10,000
    answers of 64 KiB by default)."""
    big = (b"\0\0" + bytes(60_000), b"\0\0" + bytes(65_533))

    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        size = sum(map(len, big))
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 100, stats, clock,
                         max_bytes=2 * size + slack)
        tap.start()
        await until(lambda: bool(clock.pending()), "a retry waiting")
        for _ in range(3):
            tap.observe(*big, True, ("127.0.0.1", 1), 0)
        assert (len(tap.queue), tap.queued_bytes) == (kept, kept * size)
        assert stats.dnstap_dropped == 2 * (3 - kept)
        # a query without a response (3 bytes): no room in a full queue, else queued
        tap.observe(b"\0\0q", None, True, ("127.0.0.1", 1), 0)
        frames = 2 * kept + (slack < 0)
        assert len(tap.queue) == kept + (slack < 0)
        collector = Collector(path)
        await collector.start()
        await until(lambda: len(collector.frames) == frames, "the queued answers", clock)
        assert tap.queued_bytes == 0
        tap.observe(*big, True, ("127.0.0.1", 1), 0)  # room again
        await until(lambda: len(collector.frames) == frames + 2, "the next answer", clock)
        await tap.stop()
        await collector.close()

    run(body)


def test_reconnects_after_the_collector_goes_with_a_growing_jittered_delay() -> None:
    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        collector, tap = await connected_tap(path, stats, clock, 100)
        await collector.close()
        Path(path).unlink()
        await until(lambda: not tap.connected, "lost")
        await until(lambda: len(clock.sleeps) >= 8, "8 retries", clock)
        retries = clock.sleeps[:8]
        window = dnstap.RETRY_FIRST
        for delay in retries:  # full jitter: within [window/2, window], doubling to a cap
            assert window / 2 <= delay <= window
            window = min(window * 2, dnstap.RETRY_CAP)
        assert window == dnstap.RETRY_CAP
        assert len(set(retries)) == len(retries)
        tap.observe(*answer(7), False, ("127.0.0.1", 1), 0)
        collector = Collector(path)
        await collector.start()
        await until(lambda: len(collector.frames) == 2, "sent after the reconnection", clock)
        await tap.stop()
        await collector.close()

    run(body)


def test_a_collector_that_drops_each_connection_after_the_handshake_is_retried_slower(
) -> None:
    """A collector that completes the handshake and closes at once, again and again: the
    delays still double to the cap (before, each handshake reset them: a reconnection
    and two log lines every ~0.2 s, forever); a connection that lasted the cap resets
    them."""
    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        handshakes = 0
        hold = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal handshakes
            await dnstap.read_control(reader)
            writer.write(wire.control_frame(wire.ACCEPT, wire.CONTENT_TYPE))
            await dnstap.read_control(reader)  # START
            handshakes += 1
            if handshakes == 9:  # this one stays up until the test lets it go
                await hold.wait()
            writer.close()

        def delays() -> list[float]:  # the waits between tries (not a connect's timeout)
            return [d for d in clock.sleeps if d != dnstap.CONNECT_TIMEOUT]

        server = await asyncio.start_unix_server(serve, path)
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 100, stats, clock)
        tap.start()
        await until(lambda: handshakes == 9 and tap.connected, "9 handshakes", clock)
        window = dnstap.RETRY_FIRST
        for delay in delays()[:8]:
            assert window / 2 <= delay <= window, delays()
            window = min(window * 2, dnstap.RETRY_CAP)
        assert window == dnstap.RETRY_CAP
        clock.advance(dnstap.RETRY_CAP)  # the ninth lasts exactly the cap: delays reset
        hold.set()
        await until(lambda: handshakes == 10, "the 10th handshake", clock)
        assert dnstap.RETRY_FIRST / 2 <= delays()[-1] <= dnstap.RETRY_FIRST, delays()
        await tap.stop()
        server.close()

    run(body)


def test_a_collector_that_refuses_the_content_type_is_retried() -> None:
    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        collector = Collector(path, content_type=b"protobuf:other")
        await collector.start()
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 100, stats, clock)
        tap.start()
        await until(lambda: len(collector.controls) >= 2, "two READYs", clock)
        assert collector.controls[:2] == [wire.READY, wire.READY]  # never START
        assert not tap.connected
        await tap.stop()
        await collector.close()

    run(body)


def test_a_collector_that_never_reads_holds_the_queue_to_its_bound() -> None:
    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        collector, tap = await stuck_tap(path, stats, clock)
        assert tap.connected
        assert stats.dnstap_dropped > 0
        assert stats.dnstap_sent + stats.dnstap_dropped + 2 * len(tap.queue) == 20 * 50 * 2
        tap.task.cancel() if tap.task else None
        await collector.close()

    run(body)


def test_stop_with_a_collector_that_never_reads_ends_at_the_flush_timeout() -> None:
    """SIGTERM while the collector takes the handshake and then reads nothing: the
    sender is stuck behind a full connection; stop() waits FLUSH_TIMEOUT on the injected
    clock and no longer (still stopping a millisecond before, stopped at it)."""
    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        collector, tap = await stuck_tap(path, stats, clock)
        assert stats.dnstap_dropped > 0  # the sender waits for the collector
        stopping = asyncio.ensure_future(tap.stop())
        await until(lambda: bool(clock.pending()), "the flush timer")
        clock.advance(dnstap.FLUSH_TIMEOUT - 0.001)
        for _ in range(50):
            await asyncio.sleep(0)
        assert not stopping.done() and tap.connected
        clock.advance(0.001)
        await until(stopping.done, "stopped at the flush timeout")
        assert tap.task is not None and tap.task.done() and not tap.connected
        await collector.close()

    run(body)


def test_tcp_target() -> None:
    async def body(_: str, stats: Stats, clock: FakeClock) -> None:
        got: list[bytes] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await dnstap.read_control(reader)
            writer.write(wire.control_frame(wire.ACCEPT))
            await dnstap.read_control(reader)
            got.append(await reader.readexactly(4 + int.from_bytes(
                await reader.readexactly(4), "big") - 4))
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        tap = dnstap.Tap(DnstapTarget(host="127.0.0.1", port=port), "", "", 10, stats, clock)
        tap.start()
        tap.observe(*answer(1), False, ("127.0.0.1", 1), 0)
        await until(lambda: bool(got), "a frame over TCP")
        assert fields(fields(got[0])[14])[10] == answer(1)[0]
        tap.task.cancel() if tap.task else None
        server.close()

    assert socket.has_ipv6 is not None
    run(body)


def test_no_dnstap_no_observer() -> None:
    """Without --dnstap (and nothing else watching answers) the transports get no
    observer: their plain path, nothing per answer."""
    from clusterset_dns.process import app

    assert app.answer_observer(Config(), Stats(), None) is None

    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 1, stats, clock)
        assert app.answer_observer(Config(), stats, tap) == tap.observe

    run(body)


def test_stop_while_the_collector_is_absent_does_not_wait() -> None:
    """A shutdown never waits for an absent collector: stop() returns with the fake
    clock never moved (a wait on it would last forever)."""
    async def body(path: str, stats: Stats, clock: FakeClock) -> None:
        tap = dnstap.Tap(DnstapTarget(path=path), "", "", 10, stats, clock)
        tap.start()
        await until(lambda: bool(clock.pending()), "a retry waiting")
        now = clock.now
        await asyncio.wait_for(tap.stop(), 5)
        assert clock.now == now and tap.task is not None and tap.task.done()

    run(body)
