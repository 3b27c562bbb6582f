"""server.py in process over real loopback sockets: the connection cap, the idle
timeout (close when nothing is owed, abort when answers are stuck), a half-closed
client still gets its pipelined answers, and the descriptor limit is raised."""

from __future__ import annotations

import asyncio
import resource
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import pytest

from clusterset_dns.serving import server
from clusterset_dns.serving.server import Counters, DNSServer, Handle
from clusterset_dns.serving.udpbatch import Peer


def echo(data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
    """A stand-in handler: the query back with QR set, padded to 1,000 bytes."""
    return data[:2] + bytes([data[2] | 0x80]) + data[3:] + bytes(1000)


def frame(payload: bytes) -> bytes:
    return struct.pack("!H", len(payload)) + payload


QUERY = bytes(12) + b"\x03www\x00\x00\x01\x00\x01"


@asynccontextmanager
async def running(handle: Handle = echo,
                  idle: float = 5.0, cap: int = 0) -> AsyncIterator[DNSServer]:
    dns = DNSServer(handle, [("127.0.0.1", 0)], idle, max_tcp_connections=cap,
                    stats=Counters())
    await dns.start()
    try:
        yield dns
    finally:
        await dns.stop()


async def read_frames(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        size = struct.unpack("!H", await reader.readexactly(2))[0]
        out.append(await reader.readexactly(size))
    return out


async def wait_until(probe: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_connections_over_the_cap_are_closed_at_once() -> None:
    async def main() -> None:
        async with running(cap=3) as dns:
            host, port = dns.bound[0]
            # From three addresses: one address alone holds at most a quarter (here 1).
            kept = [await asyncio.open_connection(host, port, local_addr=(f"127.0.0.{n}", 0))
                    for n in (2, 3, 4)]
            await wait_until(lambda: dns.stats.tcp_open == 3)
            reader, writer = await asyncio.open_connection(host, port,
                                                           local_addr=("127.0.0.5", 0))
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, no answer
            assert dns.stats.tcp_refused == 1 and dns.stats.tcp_open == 3
            # the kept ones still work; once one leaves, a new one is served
            kept[0][1].write(frame(QUERY))
            assert len((await read_frames(kept[0][0], 1))[0]) == len(QUERY) + 1000
            kept[0][1].close()
            await wait_until(lambda: dns.stats.tcp_open == 2)
            reader, writer = await asyncio.open_connection(host, port,
                                                           local_addr=("127.0.0.5", 0))
            writer.write(frame(QUERY))
            assert await read_frames(reader, 1)
            for _, w in [*kept[1:], (reader, writer)]:
                w.close()
    asyncio.run(main())


def test_one_address_holds_at_most_a_quarter_of_the_connections() -> None:
    """Cap 8: 127.0.0.2 holds 2 connections, its 3rd is closed at once while another
    address still gets in; once one of its two closes, it gets one more. Before, one
    client's idle connections took the whole cap: every other TCP client (a TC retry,
    a secondary's AXFR) was refused for as long as it opened them again."""
    async def main() -> None:
        async with running(cap=8) as dns:
            host, port = dns.bound[0]

            async def connect(source: str) -> tuple[asyncio.StreamReader,
                                                    asyncio.StreamWriter]:
                return await asyncio.open_connection(host, port, local_addr=(source, 0))

            mine = [await connect("127.0.0.2") for _ in range(2)]
            await wait_until(lambda: dns.stats.tcp_open == 2)
            reader, _ = await connect("127.0.0.2")
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, no answer
            assert dns.stats.tcp_refused == 1 and dns.stats.tcp_open == 2
            other_reader, other = await connect("127.0.0.1")
            other.write(frame(QUERY))
            assert await read_frames(other_reader, 1)
            mine[0][1].close()
            await wait_until(lambda: dns.stats.tcp_open == 2)
            reader, writer = await connect("127.0.0.2")
            writer.write(frame(QUERY))
            assert await read_frames(reader, 1)
            assert dns.stats.tcp_refused == 1 and dns.per_client == {"127.0.0.2": 2,
                                                                     "127.0.0.1": 1}
            for w in (mine[1][1], other, writer):
                w.close()
            await wait_until(lambda: dns.stats.tcp_open == 0)
            assert dns.per_client == {}
    asyncio.run(main())


def test_idle_connection_is_closed_not_aborted() -> None:
    async def main() -> None:
        async with running(idle=0.3) as dns:
            reader, writer = await asyncio.open_connection(*dns.bound[0])
            writer.write(frame(QUERY))
            await read_frames(reader, 1)
            assert await asyncio.wait_for(reader.read(), 10) == b""  # orderly FIN
            assert dns.stats.tcp_aborted == 0
            await wait_until(lambda: dns.stats.tcp_open == 0)
    asyncio.run(main())


def test_activity_keeps_a_connection_open() -> None:
    async def main() -> None:
        async with running(idle=0.5) as dns:
            reader, writer = await asyncio.open_connection(*dns.bound[0])
            for _ in range(6):  # 1.2 s in all, never 0.5 s silent
                writer.write(frame(QUERY))
                await read_frames(reader, 1)
                await asyncio.sleep(0.2)
            assert dns.stats.tcp_open == 1
            writer.close()
    asyncio.run(main())


def test_trickling_client_is_closed() -> None:
    """A byte every 0.05 s never completes a 1,000-byte message: not progress, so the
    0.3 s idle timeout closes the connection while the message is still incomplete."""
    async def main() -> None:
        async with running(idle=0.3) as dns:
            _, writer = await asyncio.open_connection(*dns.bound[0])
            writer.write(b"\x03\xe8")  # a 1,000-byte message follows ... slowly
            await wait_until(lambda: dns.stats.tcp_open == 1)
            for _ in range(200):  # 200 of the 1,000 bytes at most
                if not dns.stats.tcp_open:
                    break
                writer.write(b"x")
                await asyncio.sleep(0.05)
            assert dns.stats.tcp_open == 0
            writer.close()
    asyncio.run(main())


def test_non_reading_client_is_aborted_and_stops_being_read() -> None:
    answered = [0]

    def counting(data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
        answered[0] += 1
        return echo(data, tcp)

    async def main() -> None:
        async with running(counting, idle=0.5) as dns:
            sock = socket.create_connection(dns.bound[0])
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            burst = frame(QUERY) * 20_000  # 20 MB of answers asked for
            sent = 0
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while sent < len(burst) and not dns.stats.tcp_aborted and loop.time() < deadline:
                try:
                    sent += sock.send(burst[sent : sent + 65536])
                except BlockingIOError:
                    await asyncio.sleep(0.05)  # the server stopped reading us
            # Answered: what the kernel's buffers took plus what the protocol may hold
            # (one read's worth of queries); never the 20,000 asked for.
            wmem_max = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
            bound = (wmem_max + 4096 + server.WRITE_HIGH + server.WRITE_CHUNK) // 1000 \
                + server.READ_SIZE // len(frame(QUERY))
            assert answered[0] <= bound < 20_000, (answered[0], bound)
            await wait_until(lambda: dns.stats.tcp_aborted == 1)
            await wait_until(lambda: dns.stats.tcp_open == 0)
            sock.close()
    asyncio.run(main())


def test_half_closed_client_gets_every_answer() -> None:
    async def main() -> None:
        async with running() as dns:
            reader, writer = await asyncio.open_connection(*dns.bound[0])
            queries = [bytes([0, i]) + QUERY[2:] for i in range(200)]
            writer.write(b"".join(frame(q) for q in queries))
            writer.write_eof()  # shut down our side before reading anything
            answers = await asyncio.wait_for(read_frames(reader, 200), 10)
            assert [a[:2] for a in answers] == [q[:2] for q in queries]
            assert await reader.read() == b""
    asyncio.run(main())


def test_descriptor_limit_raised_to_hard() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, hard))
        got = server.raise_fd_limit()
        now = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert got == now and now > 32
        if hard != resource.RLIM_INFINITY:
            assert now == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(("limit", "cap"), [(64, 32), (1024, 512), (4096, 1024),
                                            (1 << 20, 1024), (1, 1)])
def test_default_cap(limit: int, cap: int) -> None:
    assert server.default_max_tcp_connections(limit) == cap


def test_stop_does_not_wait_for_a_client_that_does_not_read() -> None:
    async def main() -> None:
        dns = DNSServer(echo, [("127.0.0.1", 0)], 60.0, stats=Counters())
        await dns.start()
        sock = socket.create_connection(dns.bound[0])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        try:
            for _ in range(200):  # ask for far more than the socket buffers hold
                with suppress(BlockingIOError):
                    sock.send(frame(QUERY) * 1000)
                await asyncio.sleep(0.01)
                protocols = list(dns.connections)
                if protocols and protocols[0].writing_paused:
                    break
            assert dns.connections and next(iter(dns.connections)).writing_paused
            await asyncio.wait_for(dns.stop(), 10)
            await wait_until(lambda: not dns.connections)
        finally:
            sock.close()
    asyncio.run(main())
