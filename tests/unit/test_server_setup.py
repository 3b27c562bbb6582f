"""server.py around the transports: the sockets it makes (options, binding, the IPv4
fallback of "::"), the descriptor limit it raises, the connection cap it derives, the
ephemeral port it retries, the samplers it makes, and how stop() ends connections.

The operating system's calls (socket creation, rlimits) are replaced only where a
condition cannot be made on this machine (no IPv6, a fixed limit, a port in use, a
wildcard address: the tests bind loopback only)."""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
from typing import Any, ClassVar, cast

import pytest

from clusterset_dns.serving import server, udpbatch
from clusterset_dns.serving.server import Counters, DNSServer, TCPProtocol, make_socket
from clusterset_dns.serving.udpbatch import Peer

from .fakeclock import FakeClock
from .tcpfakes import Transport, connect


def echo(data: bytes, tcp: bool, peer: Peer | None = None) -> bytes | None:
    return b"re:" + data


class FakeSocket:
    """Records what make_socket asks of a socket; ``fail_bind``: bind raises it."""

    made: ClassVar[list[FakeSocket]] = []

    def __init__(self, family: int, kind: int, fail_bind: OSError | None = None) -> None:
        self.family, self.kind = family, kind
        self.options: list[tuple[int, int, int]] = []
        self.bound: tuple[Any, ...] | None = None
        self.blocking: bool | None = None
        self.closed = False
        self.fail_bind = fail_bind
        FakeSocket.made.append(self)

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options.append((level, option, value))

    def bind(self, address: tuple[Any, ...]) -> None:
        if self.fail_bind is not None:
            raise self.fail_bind
        self.bound = address

    def setblocking(self, flag: bool) -> None:
        self.blocking = flag

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def sockets(monkeypatch: pytest.MonkeyPatch) -> list[FakeSocket]:
    FakeSocket.made = []
    monkeypatch.setattr(server.socket, "socket", FakeSocket)
    return FakeSocket.made


SOL, IPV6 = socket.SOL_SOCKET, socket.IPPROTO_IPV6


@pytest.mark.parametrize(("host", "kind", "reuse", "family", "options"), [
    ("127.0.0.1", socket.SOCK_DGRAM, False, socket.AF_INET,
     [(SOL, socket.SO_RCVBUF, server.RCVBUF)]),
    ("127.0.0.1", socket.SOCK_STREAM, True, socket.AF_INET,
     [(SOL, socket.SO_REUSEADDR, 1), (SOL, socket.SO_REUSEPORT, 1)]),
    ("::1", socket.SOCK_STREAM, False, socket.AF_INET6, [(SOL, socket.SO_REUSEADDR, 1)]),
    # the wildcard of both families: IPv4 clients too (v4-mapped)
    ("::", socket.SOCK_DGRAM, True, socket.AF_INET6,
     [(IPV6, socket.IPV6_V6ONLY, 0), (SOL, socket.SO_RCVBUF, server.RCVBUF),
      (SOL, socket.SO_REUSEPORT, 1)]),
])
def test_a_socket_is_made_with_its_options_bound_and_not_blocking(
        sockets: list[FakeSocket], host: str, kind: int, reuse: bool, family: int,
        options: list[tuple[int, int, int]]) -> None:
    sock: Any = make_socket(host, 53, kind, reuse)
    assert sockets == [sock]
    assert (sock.family, sock.kind, sock.options, sock.bound, sock.blocking, sock.closed) == \
        (family, kind, options, (host, 53), False, False)


def test_without_ipv6_the_wildcard_is_ipv4s(monkeypatch: pytest.MonkeyPatch) -> None:
    made: ClassVar[list[FakeSocket]] = []

    def no_ipv6(family: int, kind: int) -> FakeSocket:
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        made.append(FakeSocket(family, kind))
        return made[-1]

    monkeypatch.setattr(server.socket, "socket", no_ipv6)
    sock: Any = make_socket("::", 53, socket.SOCK_STREAM, False)
    assert (sock.family, sock.kind, sock.bound, sock.options) == \
        (socket.AF_INET, socket.SOCK_STREAM, ("0.0.0.0", 53), [(SOL, socket.SO_REUSEADDR, 1)])
    with pytest.raises(OSError, match="not supported"):  # an IPv6 address asked for: an error
        make_socket("::1", 53, socket.SOCK_STREAM, False)
    assert made == [sock]


def test_a_socket_that_cannot_bind_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    made: ClassVar[list[FakeSocket]] = []

    def in_use(family: int, kind: int) -> FakeSocket:
        made.append(FakeSocket(family, kind, OSError(errno.EADDRINUSE, "in use")))
        return made[-1]

    monkeypatch.setattr(server.socket, "socket", in_use)
    with pytest.raises(OSError, match="in use"):
        make_socket("127.0.0.1", 53, socket.SOCK_DGRAM, False)
    assert [s.closed for s in made] == [True]


def test_a_real_socket_on_loopback() -> None:
    sock = make_socket("127.0.0.1", 0, socket.SOCK_STREAM, True)
    try:
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getblocking() is False
        assert sock.getsockopt(SOL, socket.SO_REUSEPORT) == 1
    finally:
        sock.close()


# -- the descriptor limit and the cap -----------------------------------------------------------

INF = resource.RLIM_INFINITY
UNLIMITED = server.FD_LIMIT_IF_UNLIMITED


@pytest.mark.parametrize(("soft", "hard", "fails", "result", "set_to"), [
    (1024, 4096, False, 4096, (4096, 4096)),
    (4095, 4096, False, 4096, (4096, 4096)),
    (4096, 4096, False, 4096, None),  # already there
    (1024, INF, False, UNLIMITED, (UNLIMITED, INF)),  # unlimited: the kernel's nr_open at most
    (UNLIMITED, INF, False, UNLIMITED, None),
    (INF, INF, False, UNLIMITED, None),
    (1024, 4096, True, 1024, (4096, 4096)),  # refused: what is in force
])
def test_the_descriptor_limit_is_raised_to_the_hard_one(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, soft: int,
        hard: int, fails: bool, result: int, set_to: tuple[int, int] | None) -> None:
    asked: list[tuple[int, tuple[int, int]]] = []

    def setrlimit(which: int, limits: tuple[int, int]) -> None:
        asked.append((which, limits))
        if fails:
            raise ValueError("not allowed")

    monkeypatch.setattr(server.resource, "getrlimit",
                        lambda which: (soft, hard) if which == resource.RLIMIT_NOFILE else None)
    monkeypatch.setattr(server.resource, "setrlimit", setrlimit)
    with caplog.at_level(logging.WARNING, "clusterset_dns.serving.server"):
        assert server.raise_fd_limit() == result
    assert asked == ([] if set_to is None else [(resource.RLIMIT_NOFILE, set_to)])
    assert [r.getMessage() for r in caplog.records] == (
        ["cannot raise the descriptor limit from 1024 to 4096: not allowed"] if fails else [])


@pytest.mark.parametrize(("limit", "cap"), [(65, 32), (3, 1), (1, 1), (2049, 1024)])
def test_the_default_cap_is_a_whole_half_of_the_descriptors(limit: int, cap: int) -> None:
    got = server.default_max_tcp_connections(limit)
    assert got == cap and type(got) is int


@pytest.mark.parametrize(("cap", "warned"), [(0, False), (1, False), (50, False), (51, True)])
def test_the_cap_is_half_the_descriptors_by_default_and_more_is_warned_of(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, cap: int,
        warned: bool) -> None:
    monkeypatch.setattr(server, "raise_fd_limit", lambda: 100)

    async def main() -> None:
        dns = DNSServer(echo, [("127.0.0.1", 0)], 5.0, max_tcp_connections=cap,
                        stats=Counters(), udp_io="plain")
        assert dns.udp_mode == "none"
        await dns.start()
        try:
            assert dns.max_tcp_connections == (cap or 50)
            assert dns.udp_mode == "recvfrom/sendto"
            assert dns.bound == [dns.readers[0].sock.getsockname()[:2]]
            assert dns.bound[0][0] == "127.0.0.1"
            [listener] = dns.servers
            assert listener.sockets[0].getsockname()[:2] == dns.bound[0]  # one port for both
        finally:
            await dns.stop()

    with caplog.at_level(logging.WARNING, "clusterset_dns.serving.server"):
        asyncio.run(main())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ([f"--max-tcp-connections {cap} leaves less than half of the 100 "
                         "descriptors to the rest of the server; TCP clients may exhaust them"]
                        if warned else [])


def test_the_defaults() -> None:
    dns = DNSServer(echo, [], 5.0)
    assert (dns.reuse_port, dns.udp_io, dns.max_tcp_connections, dns.transfer,
            dns.remembering, dns.observe) == (False, "auto", 0, None, None, None)
    assert isinstance(dns.stats, Counters)
    assert dns.udp_sampler is not None and dns.udp_sampler.every == 64


def observe(query: bytes, response: bytes | None, tcp: bool, peer: Any, started: int) -> None:
    pass


def test_start_gives_the_udp_reader_what_the_server_was_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler, the I/O mode, the remembering handler, the observer, the UDP sampler
    and the clock; the TCP listener's backlog; one port for both transports."""
    made: list[tuple[Any, ...]] = []
    backlogs: list[int | None] = []
    real = server.udp_reader

    def udp_reader(*args: Any) -> Any:
        made.append(args)
        return real(*args)

    monkeypatch.setattr(server, "udp_reader", udp_reader)
    clock = FakeClock()
    remembering = object()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        create_server = loop.create_server

        async def recording(*args: Any, **kwargs: Any) -> Any:
            backlogs.append(kwargs.get("backlog"))
            return await create_server(*args, **kwargs)

        loop.create_server = recording  # type: ignore[method-assign]
        dns = DNSServer(echo, [("127.0.0.1", 0)], 5.0, udp_io="plain", observe=observe,
                        remembering=cast(udpbatch.Remembering, remembering), clock=clock,
                        stats=Counters())
        await dns.start()
        try:
            [(udp, handle, mode, remembered, observer, sampler, given)] = made
            assert (handle, mode, remembered, observer, sampler, given) == \
                (echo, "plain", remembering, observe, dns.udp_sampler, clock)
            assert udp.getsockname()[:2] == dns.bound[0]
            assert backlogs == [1024]
        finally:
            await dns.stop()

    asyncio.run(main())


def test_an_ipv6_listener_is_bound_by_address_and_port() -> None:
    async def main() -> None:
        dns = DNSServer(echo, [("::1", 0)], 5.0, udp_io="plain", stats=Counters())
        await dns.start()
        try:
            [(host, port)] = dns.bound
            assert host == "::1" and port > 0
        finally:
            await dns.stop()

    asyncio.run(main())


@pytest.mark.parametrize("every", [0, 1, 64])
def test_one_sampler_per_transport(every: int) -> None:
    stats = Counters()
    dns = DNSServer(echo, [], 5.0, stats=stats, sample_every=every)
    if every == 0:
        assert dns.udp_sampler is None and dns.tcp_sampler is None
        return
    assert dns.udp_sampler is not None and dns.tcp_sampler is not None
    assert (dns.udp_sampler.every, dns.udp_sampler.tcp, dns.udp_sampler.durations) == \
        (every, False, stats.durations)
    assert (dns.tcp_sampler.every, dns.tcp_sampler.tcp, dns.tcp_sampler.durations) == \
        (every, True, stats.durations)


# -- binding ----------------------------------------------------------------------------------


class Binder:
    """make_socket for bind(): the UDP socket on the port asked for (or 5300 + the
    attempt for port 0), the TCP one failing ``failures`` times with ``error``."""

    def __init__(self, failures: int, error: int = errno.EADDRINUSE) -> None:
        self.failures, self.error = failures, error
        self.udp: list[FakeSocket] = []
        self.tcp_ports: list[int] = []
        self.reuse: list[bool] = []

    def __call__(self, host: str, port: int, kind: int, reuse_port: bool) -> Any:
        self.reuse.append(reuse_port)
        if kind == socket.SOCK_DGRAM:
            sock = FakeSocket(socket.AF_INET, kind)
            sock.bound = (host, port or 5300 + len(self.udp))
            sock.getsockname = lambda: sock.bound  # type: ignore[attr-defined]
            self.udp.append(sock)
            return sock
        self.tcp_ports.append(port)
        if len(self.tcp_ports) <= self.failures:
            raise OSError(self.error, "in use")
        return FakeSocket(socket.AF_INET, kind)


@pytest.mark.parametrize(("failures", "bound"), [(0, True), (1, True),
                                                 (server.EPHEMERAL_ATTEMPTS - 1, True),
                                                 (server.EPHEMERAL_ATTEMPTS, False)])
def test_an_ephemeral_port_taken_over_tcp_is_tried_again(
        monkeypatch: pytest.MonkeyPatch, failures: int, bound: bool) -> None:
    binder = Binder(failures)
    monkeypatch.setattr(server, "make_socket", binder)
    dns = DNSServer(echo, [], 5.0)
    if bound:
        udp, tcp = dns.bind("127.0.0.1", 0)
        assert binder.udp[-1] is udp and not cast_any(udp).closed
        assert cast_any(tcp).kind == socket.SOCK_STREAM
    else:
        with pytest.raises(OSError, match="in use"):
            dns.bind("127.0.0.1", 0)
    attempts = min(failures + 1, server.EPHEMERAL_ATTEMPTS)
    assert binder.tcp_ports == [5300 + n for n in range(attempts)]  # each UDP socket's port
    assert [s.closed for s in binder.udp] == [True] * failures + [False] * (attempts - failures)


@pytest.mark.parametrize("reuse", [False, True])
def test_both_sockets_are_made_with_the_servers_reuse_port(
        monkeypatch: pytest.MonkeyPatch, reuse: bool) -> None:
    binder = Binder(0)
    monkeypatch.setattr(server, "make_socket", binder)
    DNSServer(echo, [], 5.0, reuse_port=reuse).bind("127.0.0.1", 53)
    assert binder.reuse == [reuse, reuse]


@pytest.mark.parametrize(("port", "error"), [(53, errno.EADDRINUSE), (0, errno.EACCES)])
def test_a_fixed_port_or_another_error_is_not_tried_again(
        monkeypatch: pytest.MonkeyPatch, port: int, error: int) -> None:
    binder = Binder(1, error)
    monkeypatch.setattr(server, "make_socket", binder)
    with pytest.raises(OSError):
        DNSServer(echo, [], 5.0).bind("127.0.0.1", port)
    assert len(binder.tcp_ports) == 1 and [s.closed for s in binder.udp] == [True]


def cast_any(value: object) -> Any:
    return value


# -- stop ---------------------------------------------------------------------------------------


def test_stop_closes_connections_and_aborts_those_owed_answers() -> None:
    async def main() -> None:
        dns = DNSServer(echo, [("127.0.0.1", 0)], 5.0, stats=Counters(), udp_io="plain")
        await dns.start()
        reader = dns.readers[0]
        idle, stuck = Transport(), Transport()
        stuck.buffered = 1
        protos: list[TCPProtocol] = [connect(dns, idle), connect(dns, stuck)]
        gone = connect(dns, Transport())
        gone.connection_lost(None)  # closed already: nothing to do
        await dns.stop()
        assert (idle.closed, idle.aborted) == (True, False)
        assert (stuck.closed, stuck.aborted) == (False, True)
        assert reader.sock.fileno() == -1  # the UDP reader stopped and closed
        assert not dns.servers[0].is_serving()
        for proto in protos:
            proto.connection_lost(None)
    asyncio.run(main())
