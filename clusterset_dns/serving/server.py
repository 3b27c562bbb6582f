"""UDP and TCP transports. No task per packet: the protocol callbacks call the
handler directly and write its bytes back."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, cast

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.serving import udpbatch
from clusterset_dns.serving.observe import Observer, failed
from clusterset_dns.serving.outq import unsent_bytes
from clusterset_dns.serving.stats import SAMPLE_EVERY, Durations, Sampler
from clusterset_dns.serving.udpplain import UDPReader, udp_reader

log = logging.getLogger(__name__)

# (query, over TCP, the sender's address when asked for; None over TCP) -> the response
Handle = udpbatch.Handle
# A zone transfer: (message, peer address, the connection to send through) -> None
# when the message is not a transfer, else the coroutine that sends it.
Transfer = Callable[[bytes, str, "TCPProtocol"], "Coroutine[Any, Any, None] | None"]

RCVBUF = 4 << 20  # ride out bursts without drops
MAX_TCP_MESSAGE = 65535
# TCP back-pressure (see TCPProtocol).
READ_SIZE = 16 << 10
WRITE_HIGH = 64 << 10
WRITE_CHUNK = 16 << 10
# Ceiling of the default connection cap. Measured: an idle connection costs about
# 2 KiB of RSS here (plus the kernel's socket); one whose client sends and never
# reads at most READ_SIZE + WRITE_HIGH + WRITE_CHUNK + one answer (about 160 KiB),
# so 1,024 of them stay under 200 MiB. Legitimate TCP clients (forwarders, TC
# retries) need far fewer.
MAX_TCP_CONNECTIONS = 1024
PER_CLIENT_SHARE = 4  # one client address holds at most a quarter of the connections
FD_LIMIT_IF_UNLIMITED = 1 << 20
EPHEMERAL_ATTEMPTS = 20
TRANSFER_SNDBUF = 128 << 10  # a zone transfer's socket send buffer (the kernel doubles it)



def make_socket(host: str, port: int, kind: int, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.socket(family, kind)
    except OSError:
        if host != "::":
            raise
        host, family = "0.0.0.0", socket.AF_INET  # no IPv6 on this host
        sock = socket.socket(family, kind)
    try:
        if family == socket.AF_INET6 and host == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        if kind == socket.SOCK_STREAM:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class ConnectionStats(Protocol):
    """The TCP counters the server keeps (``stats.Stats`` has them, so workers
    report them with the rest)."""

    tcp_open: int
    tcp_refused: int
    tcp_aborted: int
    durations: Durations  # sampled answer durations (clusterset_dns_request_duration_seconds)


class Counters:
    __slots__ = ("durations", "tcp_aborted", "tcp_open", "tcp_refused")

    def __init__(self) -> None:
        self.tcp_open = self.tcp_refused = self.tcp_aborted = 0
        self.durations = Durations()


def raise_fd_limit() -> int:
    """Raises the soft descriptor limit to the hard one (the usual soft default, 1024,
    is far below what a DNS server with many TCP clients needs); returns the soft
    limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit still stops at the kernel's nr_open.
    target = FD_LIMIT_IF_UNLIMITED if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY:
        return target
    if soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("cannot raise the descriptor limit from %d to %d: %s", soft, target, exc)
        return soft
    return target


def default_max_tcp_connections(fd_limit: int) -> int:
    """Half the descriptors (the rest stays for the source, the HTTP endpoints,
    the API connections and the files), at most MAX_TCP_CONNECTIONS."""
    return max(1, min(fd_limit // 2, MAX_TCP_CONNECTIONS))


class TCPProtocol(asyncio.BufferedProtocol):
    """Length-prefixed messages; pipelined queries are answered in order.

    Reads go into one READ_SIZE buffer shared by every connection of the server
    (the loop runs one callback at a time), so a read never brings in more than
    READ_SIZE bytes of queries (a plain Protocol gets 256 KiB chunks).

    Back-pressure: answers are written in chunks of at most WRITE_CHUNK bytes and
    the transport pauses us once more than WRITE_HIGH bytes wait to be sent; from
    then on no further query is answered and the socket is not read until the
    client has read enough. So a client that never reads costs at most one read,
    WRITE_HIGH + WRITE_CHUNK + one answer, whatever it sends.

    Idle timeout: a connection without progress (no complete message received,
    nothing drained: resume_writing, or a write buffer smaller than at the last
    check) for ``idle_timeout`` is closed, and aborted (RST, buffer
    dropped) when answers are still waiting: a close would wait forever for a peer
    that never reads. Bytes that do not complete a message are not progress, so a
    client trickling a message a byte at a time cannot hold a connection."""

    __slots__ = ("buffer", "client", "drained", "eof", "last_activity", "loop", "server",
                 "timer", "transferring", "transport", "unsent", "writing_paused")

    def __init__(self, server: DNSServer) -> None:
        self.server = server
        self.client = ""  # the peer's address, counted in server.per_client while open
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.writing_paused = False
        self.eof = False
        self.last_activity = 0.0
        # The write buffer's size at the last idle check or pause: less at the next
        # check is the client reading (see _check_idle).
        self.unsent = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        # A zone transfer in progress: no further query is read or answered until it
        # ends (answers stay in order), and it waits on ``drained`` while paused.
        self.transferring: asyncio.Task[None] | None = None
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        server = self.server
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if peer else ""
        held = server.per_client.get(client, 0)
        # One address holds at most a share of the cap: else one client's idle
        # connections, opened again as they time out, would refuse every other TCP
        # client (TC retries, zone transfers) for good.
        if (len(server.connections) >= server.max_tcp_connections
                or held >= max(1, server.max_tcp_connections // PER_CLIENT_SHARE)):
            server.stats.tcp_refused += 1
            cast(asyncio.Transport, transport).abort()  # at once: the cap saves descriptors
            return
        server.per_client[client] = held + 1
        self.client = client
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=WRITE_HIGH)
        server.connections.add(self)
        server.stats.tcp_open = len(server.connections)
        self.loop = loop = asyncio.get_running_loop()
        self.last_activity = loop.time()
        self.timer = loop.call_later(server.tcp_idle_timeout, self._check_idle)

    def _check_idle(self) -> None:
        # Activity only moves a timestamp; the timer is re-armed here, once per
        # timeout, instead of on every packet.
        transport, loop = self.transport, self.loop
        if transport is None or loop is None:
            return
        unsent = unsent_bytes(transport)
        if unsent < self.unsent:
            # Drained since the last look without a resume_writing: asyncio calls it
            # only below a quarter of WRITE_HIGH, which a client reading steadily but
            # slowly out of large socket buffers may take longer than the timeout to
            # reach. Counted with the kernel's unacknowledged bytes (outq.py), which
            # shrink only as the client takes them: one that reads nothing is still
            # cut at the same instant.
            self.last_activity = loop.time()
        self.unsent = unsent
        idle = loop.time() - self.last_activity
        timeout = self.server.tcp_idle_timeout
        if idle < timeout:
            self.timer = loop.call_later(timeout - idle, self._check_idle)
            return
        self.timer = None
        if transport.get_write_buffer_size() or self.writing_paused:
            self.server.stats.tcp_aborted += 1
            transport.abort()
        else:
            transport.close()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.server.read_view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.server.read_view[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        self.buffer += data
        self._answer()

    def _answer(self) -> None:
        transport = self.transport
        if transport is None:
            return
        handle = self.server.handle
        transfer = self.server.transfer
        observe = self.server.observe
        sampler = self.server.tcp_sampler
        clock = self.server.clock
        started = 0
        timed = 0.0
        buffer = self.buffer
        out: list[bytes] = []
        size = 0
        while len(buffer) >= 2 and not self.writing_paused and self.transferring is None:
            length = (buffer[0] << 8) | buffer[1]
            if len(buffer) < 2 + length:
                break
            if not out and self.loop is not None:  # a complete message: progress
                self.last_activity = self.loop.time()
            message = bytes(buffer[2 : 2 + length])
            del buffer[: 2 + length]
            if transfer is not None:
                coro = transfer(message, self.peer(), self)
                if coro is not None:
                    if out:
                        transport.write(b"".join(out))
                        out.clear()
                    self._start_transfer(coro)
                    return
            if observe is not None:
                started = clock.perf_counter_ns()
            if sampler is not None:
                sampler.left -= 1
                if sampler.left <= 0:
                    timed = clock.perf_counter()
            response = handle(message, True, None)
            if timed:  # to the response made (its write is the transport's, later)
                assert sampler is not None
                sampler.timed(clock.perf_counter() - timed)
                timed = 0.0
            if observe is not None:
                try:
                    observe(message, response, True, self.address(), started)
                except Exception:
                    failed()
            if response is None:
                continue
            if len(response) > MAX_TCP_MESSAGE:  # cannot be framed; the handler never should
                log.error("TCP answer of %d bytes dropped", len(response))
                continue
            out.append(len(response).to_bytes(2, "big"))
            out.append(response)
            size += 2 + len(response)
            if size >= WRITE_CHUNK:
                transport.write(b"".join(out))  # may call pause_writing at once
                out.clear()
                size = 0
        if out:
            transport.write(b"".join(out))
        if self.eof and not self.writing_paused and not self._complete_message() \
                and self.transferring is None:
            transport.close()

    # -- zone transfers ---------------------------------------------------------------------

    def peer(self) -> str:
        name = self.transport.get_extra_info("peername") if self.transport else None
        return str(name[0]) if name else ""

    def address(self) -> tuple[Any, ...]:
        """The client's socket address (observe.Address); ("", 0) when unknown."""
        name = self.transport.get_extra_info("peername") if self.transport else None
        return tuple(name) if name else ("", 0)

    def _start_transfer(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self.transport is not None and self.loop is not None
        self.transport.pause_reading()  # queries behind it wait in the socket
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            # The kernel would buffer megabytes for a client that does not read (the
            # send buffer grows on its own); flow control should hold the rest here,
            # as snapshot records not yet encoded.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, TRANSFER_SNDBUF)
        self.transferring = self.loop.create_task(self._transfer(coro))

    async def _transfer(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except (ConnectionError, asyncio.CancelledError):
            return
        except TimeoutError:  # over --xfr-timeout: the stream stops mid-transfer, so close
            if self.transport is not None:
                self.transport.abort()
            return
        except Exception:  # a bug costs this transfer, never the connection's owner
            log.exception("zone transfer failed")
            if self.transport is not None:
                self.transport.abort()
            return
        finally:
            self.transferring = None
        if self.transport is None:
            return
        self._answer()  # queries that came with the transfer's
        if self.transport is not None and not self.writing_paused and not self.eof \
                and self.transferring is None:
            self.transport.resume_reading()

    async def send(self, message: bytes) -> None:
        """One framed message of a transfer; waits while the client does not read."""
        transport, loop = self.transport, self.loop
        if transport is None or loop is None:
            raise ConnectionResetError("connection closed")
        transport.write(len(message).to_bytes(2, "big") + message)
        # What the client has to read from here on for the idle check to see progress
        # (the last messages of a transfer may sit below the pause until it reads).
        self.unsent = unsent_bytes(transport)
        if self.writing_paused:
            self.drained = loop.create_future()
            await self.drained  # resume_writing or connection_lost ends the wait
        else:
            self.last_activity = loop.time()
        await asyncio.sleep(0)  # other connections' queries between messages

    def _complete_message(self) -> bool:
        buffer = self.buffer
        return len(buffer) >= 2 and len(buffer) >= 2 + ((buffer[0] << 8) | buffer[1])

    def pause_writing(self) -> None:  # a client that does not read stops being read
        self.writing_paused = True
        if self.transport is not None:
            # Called by the write that filled the buffer: what it holds from here on
            # is what the client has to read for the idle check to see progress.
            self.unsent = unsent_bytes(self.transport)
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.loop is not None:  # the peer reads: progress
            self.last_activity = self.loop.time()
        if self.drained is not None:
            if not self.drained.done():
                self.drained.set_result(None)
            self.drained = None
        if self.transferring is not None:
            return  # the transfer goes on; queries behind it wait for its end
        self._answer()  # what was received while paused, before reading more
        if self.transport is not None and not self.writing_paused and not self.eof:
            self.transport.resume_reading()

    def eof_received(self) -> bool:
        # Queries still waiting to be answered: keep the write side open until they are.
        self.eof = True
        return self._complete_message() or self.transferring is not None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_exception(ConnectionResetError("connection lost"))
            self.drained = None
        if self.transferring is not None:
            self.transferring.cancel()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.transport is not None:
            server = self.server
            server.connections.discard(self)
            server.stats.tcp_open = len(server.connections)
            left = server.per_client.pop(self.client, 1) - 1
            if left > 0:
                server.per_client[self.client] = left
        self.transport = None


class DNSServer:
    """Every UDP and TCP listener of one process."""

    def __init__(self, handle: Handle, listen: list[tuple[str, int]], tcp_idle_timeout: float,
                 reuse_port: bool = False, udp_io: str = "auto", max_tcp_connections: int = 0,
                 stats: ConnectionStats | None = None, transfer: Transfer | None = None,
                 remembering: udpbatch.Remembering | None = None,
                 observe: Observer | None = None, sample_every: int = SAMPLE_EVERY,
                 clock: Clock = SYSTEM) -> None:
        """``max_tcp_connections`` 0: derived from the descriptor limit at start;
        ``transfer``: zone transfers over TCP (None: the handler refuses them);
        ``remembering``: the handler behind ``handle``, whose remembered UDP responses
        the batched reader answers itself (see udpbatch); ``observe``: shown every
        answer, over UDP and TCP (see observe.Observer); ``sample_every``: 1 in so many
        answers of each transport is timed into ``stats.durations`` (0: none); ``clock``:
        the stopwatch of those timings and of observed answers."""
        self.handle = handle
        self.clock = clock
        self.observe = observe
        self.transfer = transfer
        self.remembering = remembering
        self.udp_io = udp_io
        self.listen = listen
        self.tcp_idle_timeout = tcp_idle_timeout
        self.reuse_port = reuse_port
        self.max_tcp_connections = max_tcp_connections
        self.stats: ConnectionStats = stats if stats is not None else Counters()
        durations = self.stats.durations
        self.udp_sampler = Sampler(sample_every, durations, False) if sample_every > 0 else None
        self.tcp_sampler = Sampler(sample_every, durations, True) if sample_every > 0 else None
        self.readers: list[UDPReader | udpbatch.BatchReader] = []
        self.servers: list[asyncio.Server] = []
        self.connections: set[TCPProtocol] = set()
        self.per_client: dict[str, int] = {}  # address -> its connections open
        self.read_view = memoryview(bytearray(READ_SIZE))  # see TCPProtocol
        self.bound: list[tuple[str, int]] = []

    async def start(self, sockets: list[tuple[socket.socket, socket.socket]] | None = None) -> None:
        loop = asyncio.get_running_loop()
        fd_limit = raise_fd_limit()
        if self.max_tcp_connections <= 0:
            self.max_tcp_connections = default_max_tcp_connections(fd_limit)
        elif self.max_tcp_connections > fd_limit // 2:
            log.warning("--max-tcp-connections %d leaves less than half of the %d descriptors "
                        "to the rest of the server; TCP clients may exhaust them",
                        self.max_tcp_connections, fd_limit)
        if sockets is None:
            sockets = [self.bind(host, port) for host, port in self.listen]
        for udp, tcp in sockets:
            reader = udp_reader(udp, self.handle, self.udp_io, self.remembering,
                                self.observe, self.udp_sampler, self.clock)
            reader.start(loop)
            self.readers.append(reader)
            server = await loop.create_server(
                lambda: TCPProtocol(self),
                sock=tcp, backlog=1024)
            self.servers.append(server)
            self.bound.append(udp.getsockname()[:2])
        log.info("serving DNS on %s (UDP and TCP; UDP I/O: %s); at most %d TCP connections "
                 "(descriptor limit %d)", ", ".join(f"{h}:{p}" for h, p in self.bound),
                 self.udp_mode, self.max_tcp_connections, fd_limit)

    @property
    def udp_mode(self) -> str:
        """How UDP datagrams are read and answered (log and metrics)."""
        return self.readers[0].kind if self.readers else "none"

    def bind(self, host: str, port: int) -> tuple[socket.socket, socket.socket]:
        # Port 0: one ephemeral port for both transports. The kernel picks it for UDP;
        # TCP may already use it, so try again with another (a few times).
        for attempt in range(EPHEMERAL_ATTEMPTS if port == 0 else 1):
            udp = make_socket(host, port, socket.SOCK_DGRAM, self.reuse_port)
            try:
                tcp = make_socket(host, udp.getsockname()[1], socket.SOCK_STREAM,
                                  self.reuse_port)
            except OSError as exc:
                udp.close()
                if exc.errno != errno.EADDRINUSE or attempt == EPHEMERAL_ATTEMPTS - 1 \
                        or port != 0:
                    raise
                continue
            return udp, tcp
        raise AssertionError("unreachable")

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        loop = asyncio.get_running_loop()
        for reader in self.readers:
            reader.stop(loop)
        for connection in list(self.connections):
            transport = connection.transport
            if transport is not None:
                # A client that does not read would hold a plain close (and shutdown).
                if transport.get_write_buffer_size():
                    transport.abort()
                else:
                    transport.close()
        for server in self.servers:
            await server.wait_closed()
