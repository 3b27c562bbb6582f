"""health.HTTPEndpoints' connection cap over real loopback sockets: at the cap a new
connection takes the place of the oldest one whose request has not arrived; one whose
request has arrived (being answered) is never the one evicted, and when every one is
being answered the new one is refused. Waits are bounded loops on the server's state,
never a timed assertion."""

from __future__ import annotations

import asyncio
import contextlib

from clusterset_dns.process import health

BIG = 16 << 20  # an answer the client does not read stays being written (busy)


async def start(cap: int) -> tuple[health.HTTPEndpoints, int, list[int]]:
    evicted: list[int] = []
    endpoints = health.HTTPEndpoints(cap, timeout=60, on_evict=lambda: evicted.append(1))
    routes: dict[str, health.Route] = {
        "/big": lambda _: (200, "text/plain", b"x" * BIG),
        "/health": lambda _: (200, "text/plain", b"ok\n"),
    }
    await endpoints.serve(("127.0.0.1", 0), routes)
    port = endpoints.servers[0].sockets[0].getsockname()[1]
    return endpoints, port, evicted


async def until(condition: object) -> None:
    for _ in range(2000):  # bounded: 2000 turns of 5 ms at most (a guard)
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the server never got there")


async def connect(port: int, path: str | None) -> tuple[asyncio.StreamReader,
                                                         asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if path is not None:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
    return reader, writer


# A guard, not a measurement: a broken cap fails in seconds, not at the server's timeout.
GUARD = 20.0


async def closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), GUARD) == b""
    except ConnectionError:
        return True


async def whole_answer(reader: asyncio.StreamReader) -> bytes:
    async def read() -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        return head + await reader.readexactly(length)
    return await asyncio.wait_for(read(), GUARD)


def errors_of(loop: asyncio.AbstractEventLoop) -> list[dict[str, object]]:
    """What the loop would log as unhandled (a connection handler that raised)."""
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    return errors


def test_the_cap_evicts_the_oldest_idle_never_one_being_answered() -> None:
    async def main() -> None:
        errors = errors_of(asyncio.get_running_loop())
        endpoints, port, evicted = await start(cap=2)
        busy_r, busy_w = await connect(port, "/big")  # oldest: its request has arrived
        await until(lambda: list(endpoints.connections.values()) == [True])
        idle_r, idle_w = await connect(port, None)  # younger, idle
        await until(lambda: len(endpoints.connections) == 2)
        new_r, new_w = await connect(port, "/health")  # at the cap
        assert (await whole_answer(new_r)).endswith(b"\r\n\r\nok\n")
        assert await closed(idle_r)  # the idle one made room
        assert evicted == [1]
        answer = await whole_answer(busy_r)  # the one being answered is whole
        assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"x" * 1000)
        for w in (busy_w, idle_w, new_w):
            w.close()
        await endpoints.stop()
        assert errors == []

    asyncio.run(main())


def test_at_the_cap_with_every_request_arrived_a_new_connection_is_refused() -> None:
    async def main() -> None:
        errors = errors_of(asyncio.get_running_loop())
        endpoints, port, evicted = await start(cap=1)
        busy_r, busy_w = await connect(port, "/big")
        await until(lambda: list(endpoints.connections.values()) == [True])
        new_r, new_w = await connect(port, "/health")
        assert await closed(new_r)
        assert evicted == [1] and len(endpoints.connections) == 1
        assert (await whole_answer(busy_r)).endswith(b"x" * 1000)
        for w in (busy_w, new_w):
            with contextlib.suppress(ConnectionError):
                w.close()
        await endpoints.stop()
        assert errors == []  # refused on purpose, not by a handler that failed

    asyncio.run(main())


def test_the_query_string_reaches_the_route_and_a_silent_client_is_cut() -> None:
    async def main() -> None:
        errors = errors_of(asyncio.get_running_loop())
        seen: list[dict[str, str]] = []
        endpoints = health.HTTPEndpoints(4, timeout=0.2)
        routes: dict[str, health.Route] = {
            "/explain": lambda params: (seen.append(dict(params)) or 200, "text/plain", b"")}
        await endpoints.serve(("127.0.0.1", 0), routes)
        port = endpoints.servers[0].sockets[0].getsockname()[1]
        r, w = await connect(port, "/explain?name=a.b&type=AAAA&name=c")
        assert (await whole_answer(r)).startswith(b"HTTP/1.1 200 OK")
        assert seen == [{"name": "c", "type": "AAAA"}]  # the last of each name
        silent_r, silent_w = await connect(port, None)  # never sends its request
        assert await closed(silent_r)  # cut at the exchange's timeout
        for writer in (w, silent_w):
            writer.close()
        await endpoints.stop()
        assert errors == []

    asyncio.run(main())
