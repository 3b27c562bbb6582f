"""/health, /ready, /metrics and /explain over a minimal HTTP/1.1 server (GET and HEAD).

Small on purpose: these endpoints are probed by the kubelet and scraped by
Prometheus, and must keep answering whatever the API server does, and whatever
other clients of these ports do.

Connections are capped and timed out like DNS TCP: at most MAX_CONNECTIONS open
over every endpoint of the process; one exchange (request read, answer written)
may take REQUEST_TIMEOUT seconds. At the cap a new connection takes the place of
the oldest one that has not sent its request yet, so idle clients can never
keep a probe out (a probe sends its request at once), nor take the descriptors
that DNS over TCP and the file source need.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import NamedTuple

from clusterset_dns.base.config import HostPort

log = logging.getLogger(__name__)



class Reply(NamedTuple):
    """An answer that needs headers of its own (e.g. Retry-After)."""

    status: int
    ctype: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


# (the query string's parameters, the last of each name) -> status, content type, body;
# or a coroutine giving a Reply (a route whose work gives the loop back: /explain)
Route = Callable[[Mapping[str, str]], tuple[int, str, bytes] | Awaitable[Reply]]
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           429: "Too Many Requests", 503: "Service Unavailable"}
# Probes and scrapes need a handful; the rest of the descriptors stay for DNS.
MAX_CONNECTIONS = 64
REQUEST_TIMEOUT = 5.0  # a probe's default timeout is 1 s, a scrape's 10 s


class HTTPEndpoints:
    def __init__(self, max_connections: int = MAX_CONNECTIONS,
                 timeout: float = REQUEST_TIMEOUT,
                 on_evict: Callable[[], None] = lambda: None) -> None:
        self.servers: list[asyncio.Server] = []
        self.max_connections = max_connections
        self.timeout = timeout
        # Open connections, oldest first -> whether the request has arrived (dicts
        # keep insertion order: the first waiting one is the oldest idle).
        self.connections: dict[asyncio.StreamWriter, bool] = {}
        self.on_evict = on_evict  # an idle connection closed to make room, or a new one refused

    def _admit(self, writer: asyncio.StreamWriter) -> bool:
        if len(self.connections) >= self.max_connections:
            oldest_idle = next((w for w, busy in self.connections.items() if not busy), None)
            self.on_evict()
            if oldest_idle is None:  # every one is being answered: refuse the new one
                writer.transport.abort()
                return False
            del self.connections[oldest_idle]
            oldest_idle.transport.abort()  # its handler ends on the reset read
        self.connections[writer] = False
        return True

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        routes: dict[str, Route]) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        if writer in self.connections:
            self.connections[writer] = True
        method, _, rest = request.decode("latin-1").partition(" ")
        path, _, query = rest.split(" ", 1)[0].partition("?")
        headers: tuple[tuple[str, str], ...] = ()
        if method not in ("GET", "HEAD"):
            status, ctype, body = 405, "text/plain", b"GET only\n"
        elif path in routes:
            try:
                params = dict(urllib.parse.parse_qsl(query, max_num_fields=16))
            except ValueError:
                status, ctype, body = 400, "text/plain", b"too many parameters\n"
            else:
                answer = routes[path](params)
                if inspect.isawaitable(answer):
                    status, ctype, body, headers = await answer
                else:
                    status, ctype, body = answer
        else:
            status, ctype, body = 404, "text/plain", b"not found\n"
        head = (f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\n"
                f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                + "".join(f"{key}: {value}\r\n" for key, value in headers)
                + "Connection: close\r\n\r\n").encode()
        writer.write(head + (b"" if method == "HEAD" else body))
        await writer.drain()

    async def serve(self, where: HostPort, routes: dict[str, Route]) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if not self._admit(writer):
                return
            try:
                # The whole exchange: a client that never reads the answer is cut too.
                await asyncio.wait_for(self._exchange(reader, writer, routes), self.timeout)
                writer.close()
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ConnectionError):
                writer.transport.abort()  # a close would wait for a peer that does not read
            except Exception:
                log.exception("HTTP endpoint failed")
                writer.transport.abort()
            finally:
                self.connections.pop(writer, None)

        host, port = where
        # asyncio makes a "::" socket IPv6-only, so the kubelet's IPv4 probes would be
        # refused: "every address" means one socket per family (host None)
        bind_host = None if host in ("::", "") else host
        server = await asyncio.start_server(handle, bind_host, port)
        self.servers.append(server)
        log.info("serving %s on %s:%d", ", ".join(routes), host, port)

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        for writer in list(self.connections):
            writer.transport.abort()
        for server in self.servers:
            await server.wait_closed()
