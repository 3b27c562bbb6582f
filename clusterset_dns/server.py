"""UDP and TCP transports. No task per packet: the protocol callbacks call the
handler directly and write its bytes back."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import cast

from clusterset_dns import udpbatch

log = logging.getLogger(__name__)

Handle = Callable[[bytes, bool], "bytes | None"]

RCVBUF = 4 << 20  # ride out bursts without drops
MAX_TCP_MESSAGE = 65535



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


class UDPReader:
    """The portable path: answers a UDP socket from the loop's reader callback,
    draining up to ``BATCH`` datagrams per wake-up with ``recvfrom``/``sendto``.

    This skips the transport layer's per-datagram work (buffer management, protocol
    dispatch), which costs more than answering a query from the ready-made cache.
    Still on the loop thread, so updates and queries never interleave."""

    kind = "recvfrom/sendto"
    BATCH = udpbatch.BATCH  # then yield to the loop, so a flood cannot starve the watch
    MAX_QUERY = udpbatch.MAX_QUERY

    def __init__(self, sock: socket.socket, handle: Handle) -> None:
        self.sock = sock
        self.handle = handle

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.add_reader(self.sock.fileno(), self._readable)

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self.sock.fileno())
        self.sock.close()

    def _readable(self) -> None:
        recvfrom, sendto, handle = self.sock.recvfrom, self.sock.sendto, self.handle
        size = self.MAX_QUERY
        for _ in range(self.BATCH):
            try:
                data, addr = recvfrom(size)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. an ICMP error queued on the socket
                log.debug("UDP receive: %s", exc)
                continue
            response = handle(data, False)
            if response is not None:
                try:
                    sendto(response, addr)
                except OSError as exc:  # send buffer full: UDP may drop, the client retries
                    log.debug("UDP send to %s: %s", addr, exc)


UDPIO = ("auto", "batched", "plain")


def udp_reader(sock: socket.socket, handle: Handle, mode: str) -> UDPReader | udpbatch.BatchReader:
    """``batched`` (recvmmsg/sendmmsg; an error where unavailable), ``plain``, or ``auto``:
    batched where the system has it, else plain."""
    if mode != "plain":
        reason = udpbatch.available()
        if reason is None:
            return udpbatch.BatchReader(sock, handle)
        if mode == "batched":
            raise OSError(f"--udp-io batched: {reason}")
        log.info("batched UDP I/O unavailable (%s): one system call per datagram", reason)
    return UDPReader(sock, handle)


class TCPProtocol(asyncio.Protocol):
    """Length-prefixed messages; pipelined queries are answered in order."""

    def __init__(self, handle: Handle, idle_timeout: float, connections: set[TCPProtocol]) -> None:
        self.handle = handle
        self.idle_timeout = idle_timeout
        self.connections = connections
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.connections.add(self)
        self._arm()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(self.idle_timeout, self._idle)

    def _idle(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._arm()
        buffer = self.buffer
        out = []
        while len(buffer) >= 2:
            length = (buffer[0] << 8) | buffer[1]
            if len(buffer) < 2 + length:
                break
            message = bytes(buffer[2 : 2 + length])
            del buffer[: 2 + length]
            response = self.handle(message, True)
            if response is not None:
                out.append(len(response).to_bytes(2, "big") + response)
        if out and self.transport is not None:
            self.transport.write(b"".join(out))

    def pause_writing(self) -> None:  # a client that does not read stops being read
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None:
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.connections.discard(self)
        self.transport = None


class DNSServer:
    """Every UDP and TCP listener of one process."""

    def __init__(self, handle: Handle, listen: list[tuple[str, int]], tcp_idle_timeout: float,
                 reuse_port: bool = False, udp_io: str = "auto") -> None:
        self.handle = handle
        self.udp_io = udp_io
        self.listen = listen
        self.tcp_idle_timeout = tcp_idle_timeout
        self.reuse_port = reuse_port
        self.readers: list[UDPReader | udpbatch.BatchReader] = []
        self.servers: list[asyncio.Server] = []
        self.connections: set[TCPProtocol] = set()
        self.bound: list[tuple[str, int]] = []

    async def start(self, sockets: list[tuple[socket.socket, socket.socket]] | None = None) -> None:
        loop = asyncio.get_running_loop()
        if sockets is None:
            sockets = [self.bind(host, port) for host, port in self.listen]
        for udp, tcp in sockets:
            reader = udp_reader(udp, self.handle, self.udp_io)
            reader.start(loop)
            self.readers.append(reader)
            server = await loop.create_server(
                lambda: TCPProtocol(self.handle, self.tcp_idle_timeout, self.connections),
                sock=tcp, backlog=1024)
            self.servers.append(server)
            self.bound.append(udp.getsockname()[:2])
        log.info("serving DNS on %s (UDP and TCP; UDP I/O: %s)",
                 ", ".join(f"{h}:{p}" for h, p in self.bound), self.udp_mode)

    @property
    def udp_mode(self) -> str:
        """How UDP datagrams are read and answered (log and metrics)."""
        return self.readers[0].kind if self.readers else "none"

    def bind(self, host: str, port: int) -> tuple[socket.socket, socket.socket]:
        udp = make_socket(host, port, socket.SOCK_DGRAM, self.reuse_port)
        if port == 0:
            port = udp.getsockname()[1]  # one ephemeral port for both transports
        try:
            tcp = make_socket(host, port, socket.SOCK_STREAM, self.reuse_port)
        except OSError:
            udp.close()
            raise
        return udp, tcp

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        loop = asyncio.get_running_loop()
        for reader in self.readers:
            reader.stop(loop)
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.close()
        for server in self.servers:
            await server.wait_closed()
