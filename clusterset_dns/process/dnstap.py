"""dnstap: every answer as an AUTH_QUERY and an AUTH_RESPONSE message, sent to a
collector over a Unix or TCP socket with Frame Streams (--dnstap).

Answers never wait for the collector. The DNS path only appends what it answered to
a bounded queue (:meth:`Tap.observe`): at most ``--dnstap-queue`` answers and
QUEUE_BYTES of their messages; when it is full, the answer's messages are dropped and
counted (``Stats.dnstap_dropped``). A task encodes what is queued
(dnstapwire) and writes it to the collector; while the collector is absent, gone,
or slower than the answers, the queue fills and drops. The connection is retried
with a doubling, jittered delay (base.clock.Backoff) on the injected clock. Each
process (each --workers worker) has its own Tap and its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import deque
from typing import Any

from clusterset_dns import __version__
from clusterset_dns.base.clock import SYSTEM, Backoff, Clock
from clusterset_dns.base.config import Config, DnstapTarget
from clusterset_dns.process import dnstapwire as wire
from clusterset_dns.serving.stats import Stats

log = logging.getLogger(__name__)

# A client's socket address as the socket module gives it, (host, port, ...): the
# serving.observe.Observer's ``peer``.
Address = tuple[Any, ...]

CONNECT_TIMEOUT = 5.0  # seconds to connect and finish the handshake
STOP_TIMEOUT = 1.0  # seconds the collector has to answer our STOP with FINISH
FLUSH_TIMEOUT = 2.0  # at shutdown: seconds to send what is queued, STOP and read FINISH
RETRY_FIRST, RETRY_CAP = 0.25, 8.0  # reconnection delays (full jitter, doubling)
BATCH = 256  # answers encoded per write: then the loop's other work gets its turn
WRITE_HIGH = 256 << 10  # bytes the connection may hold unsent before we wait for it
# Bytes of queries and responses queued at most, whatever --dnstap-queue says: a TCP
# answer may be 64 KiB, so 10,000 of them (the default count) held while the collector
# is away would be 655 MiB, past the chart's memory limit.
QUEUE_BYTES = 32 << 20


class Tap:
    """The queue between the DNS path and the collector, and the connection to it.

    ``capacity``: answers queued at most (each becomes two frames); ``max_bytes``: bytes
    of their queries and responses queued at most."""

    def __init__(self, target: DnstapTarget, identity: str, version: str, capacity: int,
                 stats: Stats, clock: Clock = SYSTEM, max_bytes: int = QUEUE_BYTES) -> None:
        self.target = target
        self.encoder = wire.Encoder(wire.preamble(identity.encode(), version.encode()))
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.queued_bytes = 0  # of the queries and responses in the queue
        self.stats = stats
        self.clock = clock
        # The messages' times: the clock's wall clock and the stopwatch the transports
        # stamp a query's read with (SYSTEM's are the C functions: no frame per answer).
        self._now = clock.time_ns
        self._stopwatch_ns = clock.perf_counter_ns
        # (query, response, over TCP, the client's socket address, when the query was
        # read and when it was answered, in wall-clock ns)
        self.queue: deque[tuple[bytes, bytes | None, bool, Address, int, int]] = deque()
        self.wake = asyncio.Event()
        self.idle = False  # the sender waits for wake: the next observe() sets it
        self.closing = False
        self.closed = asyncio.Event()  # stop() was called: ends a wait between tries
        self.connected = False
        self.task: asyncio.Task[None] | None = None
        self._heads: dict[tuple[bool, str, int], tuple[bytes, bytes]] = {}

    @classmethod
    def from_config(cls, config: Config, stats: Stats, clock: Clock = SYSTEM) -> Tap:
        """The Tap --dnstap and its companion flags ask for (``config.dnstap`` is set)."""
        assert config.dnstap is not None
        identity = config.dnstap_identity
        version = config.dnstap_version
        return cls(config.dnstap, socket.gethostname() if identity is None else identity,
                   f"clusterset-dns {__version__}" if version is None else version,
                   config.dnstap_queue, stats, clock)

    # -- the DNS path ------------------------------------------------------------------

    def observe(self, query: bytes, response: bytes | None, tcp: bool, peer: Address,
                started: int) -> None:
        """serving.observe.Observer: queues one answer, or drops and counts its messages
        when the queue is full. Never blocks; the encoding waits for the sender."""
        queue = self.queue
        size = len(query) if response is None else len(query) + len(response)
        if len(queue) >= self.capacity or self.queued_bytes + size > self.max_bytes:
            self.stats.dnstap_dropped += 1 if response is None else 2
            return
        self.queued_bytes += size
        # Both clocks read now: the query's time (monotonic, when it was read) becomes
        # wall-clock time with the offset of this instant, not of a later one (a VM's
        # wall clock may be slewed or stepped meanwhile).
        now = self._now()
        queue.append((query, response, tcp, peer, started + now - self._stopwatch_ns(), now))
        if self.idle:
            self.idle = False
            self.wake.set()

    # -- the sender --------------------------------------------------------------------

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run(), name="dnstap")

    async def stop(self) -> None:
        """Sends what is queued, then STOP (the collector answers FINISH), within a
        bounded time; then gives up."""
        if self.task is None:
            return
        self.closing = True
        self.closed.set()
        self.wake.set()
        if self.connected:  # else nothing to say goodbye to: stop at once
            with contextlib.suppress(TimeoutError):
                await self.clock.within(asyncio.shield(self.task), FLUSH_TIMEOUT)
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def run(self) -> None:
        """Connects, sends, reconnects after a delay, until :meth:`stop`."""
        backoff = Backoff(self.clock, RETRY_FIRST, RETRY_CAP)
        failing = False  # log an outage once, not every retry
        while not self.closing:
            try:
                reader, writer = await self.clock.within(self._connect(), CONNECT_TIMEOUT)
            except (OSError, TimeoutError, wire.ProtocolError,
                    asyncio.IncompleteReadError) as exc:
                if not failing:
                    log.warning("dnstap: cannot reach the collector at %s (%s); answers are "
                                "dropped and counted until it can be reached", self.target,
                                exc or type(exc).__name__)
                failing = True
                await self.clock.wait(self.closed, backoff.next())
                continue
            log.info("dnstap: connected to %s", self.target)
            failing = False
            self.connected = True
            since = self.clock.monotonic()
            try:
                await self._send(reader, writer)
            except (OSError, TimeoutError, wire.ProtocolError,
                    asyncio.IncompleteReadError) as exc:
                log.warning("dnstap: lost the collector at %s (%s); reconnecting", self.target,
                            exc or type(exc).__name__)
                failing = True
            finally:
                self.connected = False
                writer.close()
            # Only a connection that lasted resets the delays: a collector that takes the
            # handshake and closes at once would otherwise be retried (and logged) every
            # fraction of a second, forever.
            if self.clock.monotonic() - since >= RETRY_CAP:
                backoff.reset()
            if not self.closing:
                await self.clock.wait(self.closed, backoff.next())

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        target = self.target
        if target.path is not None:
            reader, writer = await asyncio.open_unix_connection(target.path)
        else:
            reader, writer = await asyncio.open_connection(target.host, target.port)
        try:
            writer.transport.set_write_buffer_limits(high=WRITE_HIGH)
            # The bidirectional handshake: READY -> ACCEPT (with our content type) -> START.
            writer.write(wire.control_frame(wire.READY))
            await writer.drain()
            kind, types = await read_control(reader)
            if kind != wire.ACCEPT or wire.CONTENT_TYPE not in types:
                raise wire.ProtocolError(f"the collector answered READY with control frame "
                                         f"{kind} {types} (not ACCEPT of {wire.CONTENT_TYPE!r})")
            writer.write(wire.control_frame(wire.START))
        except BaseException:
            writer.close()
            raise
        return reader, writer

    async def _send(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The collector sends nothing after ACCEPT but FINISH: any byte, or the end of the
        # stream, while we send means it went away.
        gone = asyncio.ensure_future(reader.read(1))
        try:
            while True:
                if not self.queue:
                    if self.closing:
                        await self._finish(reader, writer, gone)
                        return
                    self.idle = True
                    self.wake.clear()
                    waiting = asyncio.ensure_future(self.wake.wait())
                    await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
                    waiting.cancel()
                    if gone.done():
                        raise ConnectionResetError("the collector closed the connection")
                    continue
                writer.write(self._encode())
                if writer.transport.get_write_buffer_size() > WRITE_HIGH:
                    # A slow collector: wait for it here while the DNS path keeps queueing
                    # (and dropping once the queue is full).
                    drained = asyncio.ensure_future(writer.drain())
                    await asyncio.wait({drained, gone}, return_when=asyncio.FIRST_COMPLETED)
                    if not drained.done():
                        drained.cancel()
                        raise ConnectionResetError("the collector closed the connection")
                    drained.result()
                else:
                    await asyncio.sleep(0)
        finally:
            gone.cancel()

    def _encode(self) -> bytes:
        """Up to BATCH queued answers as data frames (two each)."""
        queue, frames, heads = self.queue, self.encoder.frames, self._heads
        out: list[bytes] = []
        count = size = 0
        for _ in range(min(BATCH, len(queue))):
            query, response, tcp, peer, query_ns, response_ns = queue.popleft()
            size += len(query) if response is None else len(query) + len(response)
            key = (tcp, peer[0], peer[1])
            head = heads.get(key)
            if head is None:
                if len(heads) >= 4096:  # clients are many; a few are busy
                    heads.clear()
                head = heads[key] = wire.Encoder.heads(wire.peer_head(tcp, peer[0], peer[1]))
            frames(out, head, query_ns, query, response_ns, response)
            count += 1 if response is None else 2
        self.stats.dnstap_sent += count
        self.queued_bytes -= size
        return b"".join(out)

    async def _finish(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      gone: asyncio.Future[bytes]) -> None:
        """STOP, then FINISH from the collector (bounded)."""
        gone.cancel()
        writer.write(wire.control_frame(wire.STOP, None))
        with contextlib.suppress(OSError, TimeoutError, wire.ProtocolError,
                                 asyncio.IncompleteReadError):
            await self.clock.within(writer.drain(), STOP_TIMEOUT)
            await self.clock.within(read_control(reader), STOP_TIMEOUT)


async def read_control(reader: asyncio.StreamReader) -> tuple[int, list[bytes]]:
    """One control frame from ``reader``: (type, content types)."""
    escape = await reader.readexactly(4)
    if escape != b"\x00\x00\x00\x00":
        raise wire.ProtocolError("a data frame where a control frame was expected")
    length = int.from_bytes(await reader.readexactly(4), "big")
    if length > wire.MAX_CONTROL:
        raise wire.ProtocolError(f"control frame of {length} bytes")
    return wire.parse_control(await reader.readexactly(length))

