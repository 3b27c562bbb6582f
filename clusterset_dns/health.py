"""/health, /ready and /metrics over a minimal HTTP/1.1 server (GET only).

Small on purpose: these endpoints are probed by the kubelet and scraped by
Prometheus, and must keep answering whatever the API server does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from clusterset_dns.config import HostPort

log = logging.getLogger(__name__)

Route = Callable[[], tuple[int, str, bytes]]  # -> status, content type, body
REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class HTTPEndpoints:
    def __init__(self) -> None:
        self.servers: list[asyncio.Server] = []

    async def serve(self, where: HostPort, routes: dict[str, Route]) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                method, _, rest = request.decode("latin-1").partition(" ")
                path = rest.split(" ", 1)[0].split("?", 1)[0]
                if method not in ("GET", "HEAD"):
                    status, ctype, body = 405, "text/plain", b"GET only\n"
                elif path in routes:
                    status, ctype, body = routes[path]()
                else:
                    status, ctype, body = 404, "text/plain", b"not found\n"
                head = (f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\n"
                        f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                        "Connection: close\r\n\r\n").encode()
                writer.write(head + (b"" if method == "HEAD" else body))
                await writer.drain()
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ConnectionError):
                pass
            except Exception:
                log.exception("HTTP endpoint failed")
            finally:
                writer.close()

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
        for server in self.servers:
            await server.wait_closed()
