"""health.HTTPEndpoints piece by piece: the cap's bookkeeping (_admit) on stand-in
writers, one exchange (_exchange) from request bytes to the exact response bytes, and
serve()'s handler over real loopback sockets for the ways an exchange ends. The stand-in
writer is the seam asyncio hands the handler: it records what is written and aborted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import pytest

from clusterset_dns.process import health


class Transport:
    def __init__(self) -> None:
        self.aborted = 0

    def abort(self) -> None:
        self.aborted += 1


class Writer:
    """What _admit and _exchange use of an asyncio.StreamWriter."""

    def __init__(self) -> None:
        self.transport = Transport()
        self.written: list[bytes] = []
        self.drained = 0

    def write(self, data: bytes) -> None:
        self.written.append(data)

    async def drain(self) -> None:
        self.drained += 1


def endpoints(cap: int) -> tuple[health.HTTPEndpoints, list[int]]:
    evicted: list[int] = []
    return health.HTTPEndpoints(cap, timeout=60, on_evict=lambda: evicted.append(1)), evicted


def admit(http: health.HTTPEndpoints, writer: Writer) -> bool:
    return http._admit(writer)  # type: ignore[arg-type]


def tracked(http: health.HTTPEndpoints) -> list[tuple[object, bool]]:
    """The open connections, oldest first, with whether each one's request arrived."""
    return list(http.connections.items())


def busy(http: health.HTTPEndpoints, writer: Writer) -> None:
    http.connections[writer] = True  # type: ignore[index]


def test_below_the_cap_a_connection_is_admitted_idle_and_nothing_is_evicted() -> None:
    http, evicted = endpoints(3)
    first, second, third = Writer(), Writer(), Writer()
    assert admit(http, first) is True and admit(http, second) is True
    assert admit(http, third) is True  # the third of 3: at len 2, one below the cap
    assert tracked(http) == [(first, False), (second, False), (third, False)]
    assert all(v is False for v in http.connections.values())
    assert evicted == []
    assert [w.transport.aborted for w in (first, second, third)] == [0, 0, 0]


def test_at_the_cap_the_oldest_idle_makes_room_not_a_busy_one_nor_a_younger_one() -> None:
    http, evicted = endpoints(3)
    busy_one, oldest_idle, younger_idle, new = Writer(), Writer(), Writer(), Writer()
    for writer in (busy_one, oldest_idle, younger_idle):
        admit(http, writer)
    busy(http, busy_one)  # its request has arrived
    assert admit(http, new) is True
    assert tracked(http) == [(busy_one, True), (younger_idle, False),
                                              (new, False)]
    assert [w.transport.aborted for w in (busy_one, oldest_idle, younger_idle, new)] == [0, 1, 0, 0]
    assert evicted == [1]


def test_at_the_cap_with_every_one_busy_the_new_one_is_refused_and_aborted() -> None:
    http, evicted = endpoints(2)
    first, second, new = Writer(), Writer(), Writer()
    for writer in (first, second):
        admit(http, writer)
        busy(http, writer)
    assert admit(http, new) is False
    assert tracked(http) == [(first, True), (second, True)]
    assert [w.transport.aborted for w in (first, second, new)] == [0, 0, 1]
    assert evicted == [1]


async def _routes_ok(_: Mapping[str, str]) -> health.Reply:
    return health.Reply(429, "text/plain", b"later\n", (("Retry-After", "7"),
                                                       ("X-Two", "b")))


ROUTES: dict[str, health.Route] = {
    "/health": lambda _: (200, "text/plain", b"ok\n"),
    "/odd": lambda _: (299, "text/x", b"?"),
    "/params": lambda params: (200, "text/plain",
                               "".join(f"{k}={v};" for k, v in params.items()).encode()),
    "/slow": _routes_ok,
}


def head(status: str, ctype: str, length: int, extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {length}\r\n"
            f"{extra}Connection: close\r\n\r\n").encode()


MANY = "&".join(f"p{i}=v" for i in range(16))  # exactly max_num_fields
TOO_MANY = MANY + "&p16=v"

EXCHANGES = [
    # request line -> the whole response
    ("GET /health HTTP/1.1", head("200 OK", "text/plain", 3) + b"ok\n"),
    ("HEAD /health HTTP/1.1", head("200 OK", "text/plain", 3)),  # the length, no body
    ("POST /health HTTP/1.1", head("405 Method Not Allowed", "text/plain", 9) + b"GET only\n"),
    ("get /health HTTP/1.1", head("405 Method Not Allowed", "text/plain", 9) + b"GET only\n"),
    ("HEAD /nothing HTTP/1.1", head("404 Not Found", "text/plain", 10)),
    ("GET /nothing HTTP/1.1", head("404 Not Found", "text/plain", 10) + b"not found\n"),
    ("GET /health/ HTTP/1.1", head("404 Not Found", "text/plain", 10) + b"not found\n"),
    # the path ends at the first space, not at other white space, nor after a second space
    ("GET /health\tx HTTP/1.1", head("404 Not Found", "text/plain", 10) + b"not found\n"),
    ("GET  /health HTTP/1.1", head("404 Not Found", "text/plain", 10) + b"not found\n"),
    ("GET /caf\xe9 HTTP/1.1", head("404 Not Found", "text/plain", 10) + b"not found\n"),
    ("GET /odd HTTP/1.1", head("299 ", "text/x", 1) + b"?"),  # no reason known: empty
    ("GET /slow HTTP/1.1",
     head("429 Too Many Requests", "text/plain", 6, "Retry-After: 7\r\nX-Two: b\r\n")
     + b"later\n"),
    ("GET /params?a=1&b=%20x&a=2 HTTP/1.1", head("200 OK", "text/plain", 9) + b"a=2;b= x;"),
    ("GET /params?" + MANY + " HTTP/1.1",
     head("200 OK", "text/plain", 86) + "".join(f"p{i}=v;" for i in range(16)).encode()),
    ("GET /params?" + TOO_MANY + " HTTP/1.1",
     head("400 Bad Request", "text/plain", 20) + b"too many parameters\n"),
    ("GET /params?x=\xe9 HTTP/1.1", head("200 OK", "text/plain", 5) + "x=\xe9;".encode()),
]


@pytest.mark.parametrize(("line", "expected"), EXCHANGES)
def test_an_exchange_writes_exactly_this_response_once(line: str, expected: bytes) -> None:
    async def main() -> None:
        http, _ = endpoints(4)
        reader = asyncio.StreamReader()
        reader.feed_data(line.encode("latin-1") + b"\r\nHost: x\r\n\r\n")
        writer = Writer()
        admit(http, writer)
        await http._exchange(reader, writer, ROUTES)  # type: ignore[arg-type]
        assert writer.written == [expected] and writer.drained == 1
        assert tracked(http) == [(writer, True)]  # marked busy once its request arrived

    asyncio.run(main())


def test_a_connection_no_longer_tracked_is_not_tracked_again_by_its_exchange() -> None:
    async def main() -> None:
        http, _ = endpoints(4)
        reader = asyncio.StreamReader()
        reader.feed_data(b"GET /health HTTP/1.1\r\n\r\n")
        writer = Writer()
        await http._exchange(reader, writer, ROUTES)  # type: ignore[arg-type]
        assert http.connections == {}
        assert writer.written == [head("200 OK", "text/plain", 3) + b"ok\n"]

    asyncio.run(main())


class FakeServer:
    def __init__(self) -> None:
        self.sockets: list[object] = []


@pytest.mark.parametrize(("host", "bound"), [("::", None), ("", None),
                                             ("127.0.0.1", "127.0.0.1"), ("::1", "::1")])
def test_every_address_is_one_socket_per_family_else_the_host_given(
        monkeypatch: pytest.MonkeyPatch, host: str, bound: str | None) -> None:
    # asyncio.start_server is the seam: binding every address is not done in a test
    seen: list[tuple[object, object]] = []

    async def start_server(_: object, bind: object, port: object) -> FakeServer:
        seen.append((bind, port))
        return FakeServer()

    monkeypatch.setattr(asyncio, "start_server", start_server)
    http, _ = endpoints(4)
    asyncio.run(http.serve((host, 8080), ROUTES))
    assert seen == [(bound, 8080)] and len(http.servers) == 1


async def _start(routes: dict[str, health.Route], timeout: float = 60
                 ) -> tuple[health.HTTPEndpoints, int]:
    http = health.HTTPEndpoints(4, timeout=timeout)
    await http.serve(("127.0.0.1", 0), routes)
    return http, http.servers[0].sockets[0].getsockname()[1]


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 20.0):  # a guard
            chunks.append(chunk)
    except ConnectionError:
        chunks.append(b"<reset>")
    return b"".join(chunks)


def test_over_a_socket_the_answer_is_whole_then_the_connection_is_closed() -> None:
    async def main() -> None:
        http, port = await _start(ROUTES)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /health HTTP/1.1\r\n\r\n")
        assert await _read_all(reader) == head("200 OK", "text/plain", 3) + b"ok\n"
        assert http.connections == {}  # forgotten once answered
        writer.close()
        await http.stop()

    asyncio.run(main())


def test_a_route_that_fails_is_logged_and_the_connection_cut_without_an_answer(
        caplog: pytest.LogCaptureFixture) -> None:
    def broken(_: Mapping[str, str]) -> tuple[int, str, bytes]:
        raise RuntimeError("a bug")

    async def main() -> None:
        http, port = await _start({"/broken": broken, **ROUTES})
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /broken HTTP/1.1\r\n\r\n")
        assert await _read_all(reader) in (b"", b"<reset>")  # no response at all
        assert http.connections == {}
        # the server keeps serving
        reader, writer2 = await asyncio.open_connection("127.0.0.1", port)
        writer2.write(b"GET /health HTTP/1.1\r\n\r\n")
        assert await _read_all(reader) == head("200 OK", "text/plain", 3) + b"ok\n"
        writer.close()
        writer2.close()
        await http.stop()

    with caplog.at_level(logging.ERROR, logger="clusterset_dns.process.health"):
        asyncio.run(main())
    failed = [r for r in caplog.records if r.getMessage() == "HTTP endpoint failed"]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert isinstance(failed[0].exc_info[1], RuntimeError)


def test_a_client_that_closes_before_its_request_ends_is_forgotten_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        http, port = await _start(ROUTES)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /health HTT")  # no end of headers: IncompleteReadError
        await writer.drain()
        writer.close()
        for _ in range(2000):  # bounded: 2000 turns of 5 ms at most (a guard)
            if not http.connections and _seen_once[0]:
                break
            _seen_once[0] = _seen_once[0] or bool(http.connections)
            await asyncio.sleep(0.005)
        assert http.connections == {}
        await http.stop()

    _seen_once = [False]
    with caplog.at_level(logging.DEBUG, logger="clusterset_dns.process.health"):
        asyncio.run(main())
    assert _seen_once[0]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_stop_closes_the_servers_and_aborts_the_open_connections() -> None:
    async def main() -> None:
        http, port = await _start(ROUTES)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(2000):  # bounded: until the server has it (a guard)
            if http.connections:
                break
            await asyncio.sleep(0.005)
        assert len(http.connections) == 1
        await http.stop()
        assert await _read_all(reader) in (b"", b"<reset>")
        assert not http.servers[0].is_serving()
        with pytest.raises(ConnectionError):
            await asyncio.open_connection("127.0.0.1", port)
        writer.close()

    asyncio.run(main())
