"""Lifespan: ordered start-up and shutdown of one server process (and its workers).

Start-up: metrics/health endpoints, the source, wait for the first full sync
(at most --startup-timeout), then DNS listeners. Shutdown, on SIGTERM/SIGINT:
/ready turns 503 at once, DNS keeps answering for --lameduck seconds, then the
rest stops in reverse order and the process exits 0.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from clusterset_dns import convert, logs, metrics, workers
from clusterset_dns.cache import Cache, Op
from clusterset_dns.config import Config, HostPort
from clusterset_dns.health import HTTPEndpoints, Route
from clusterset_dns.manifests import ManifestSource
from clusterset_dns.server import DNSServer

log = logging.getLogger(__name__)


class Sink:
    """Where a source's ops go: this process's cache and every worker's."""

    def __init__(self, cache: Cache, children: list[workers.Worker]) -> None:
        self.cache = cache
        self.children = children
        self.synced = asyncio.Event()

    def apply(self, ops: list[Op]) -> None:
        with metrics.update_seconds.time():
            self.cache.apply(ops)
        for child in self.children:
            child.send(ops)
        if self.cache.zone.synced:
            self.synced.set()


def make_source(config: Config,
                apply: Callable[[list[Op]], None]) -> Callable[[], Coroutine[Any, Any, None]]:
    def invalid(kind: str) -> None:
        metrics.invalid_objects.labels(kind or "unknown").inc()

    if config.manifests is not None:
        extra = (api.split("/")[0] for api in config.serviceimport_apis)
        groups = frozenset({convert.GROUP, *extra})
        return ManifestSource(config.manifests, apply, config.poll_interval, groups,
                              frozenset(config.namespaces), invalid).run
    from clusterset_dns.watch import KubeSource

    return KubeSource(config, apply, invalid).run


async def serve(config: Config, children: list[workers.Worker]) -> int:
    stop, cache, handler = workers.process_state(config)
    metrics.registry.register(metrics.ServerCollector(
        cache, handler.stats, lambda: [child.stats for child in children]))
    for child in children:
        await child.connect()
    sink = Sink(cache, children)
    dns = DNSServer(handler.handle, list(config.listen), config.tcp_idle_timeout,
                    reuse_port=bool(children), udp_io=config.udp_io)

    def health() -> tuple[int, str, bytes]:
        return 200, "text/plain", b"OK\n"

    stopping = False

    def ready() -> tuple[int, str, bytes]:
        if stopping:
            return 503, "text/plain", b"shutting down\n"
        if cache.zone.synced and dns.bound:
            return 200, "text/plain", b"OK\n"
        return 503, "text/plain", b"not synced\n"

    def scrape() -> tuple[int, str, bytes]:
        return 200, *metrics.exposition()

    routes: dict[HostPort, dict[str, Route]] = {}
    for where, path, route in ((config.health_listen, "/health", health),
                               (config.ready_listen, "/ready", ready),
                               (config.metrics_listen, "/metrics", scrape)):
        if where is not None:
            routes.setdefault(where, {})[path] = route
    http = HTTPEndpoints()
    try:
        for where, table in routes.items():
            await http.serve(where, table)
        source = asyncio.create_task(make_source(config, sink.apply)(), name="source")
        try:
            await asyncio.wait_for(sink.synced.wait(), config.startup_timeout)
        except TimeoutError:
            log.warning("not synced after %.1fs; serving anyway (SERVFAIL for unknown names)",
                        config.startup_timeout)
        await dns.start()
        metrics.udp_io.labels(dns.udp_mode).set(1)
        for child in children:
            child.send(workers.StartServing())
        log.info("ready: %s", cache.counts())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({stopper, source}, return_when=asyncio.FIRST_COMPLETED)
        if source.done() and not source.cancelled() and source.exception() is not None:
            log.error("source failed", exc_info=source.exception())
            return 1
        # Lame duck: /ready fails at once so the pod leaves its Service's endpoints,
        # while DNS keeps answering the queries still routed here.
        stopping = True
        if config.lameduck > 0:
            log.info("shutting down: /ready is 503, DNS answers for %gs more (--lameduck)",
                     config.lameduck)
            await asyncio.sleep(config.lameduck)
        log.info("shutting down: closing the listeners")
        await dns.stop()
        source.cancel()
        stopper.cancel()
        return 0
    finally:
        await http.stop()
        for child in children:
            child.stop()


def run(config: Config) -> int:
    logs.setup(config.log_level, config.log_format)
    # The cache is a few hundred thousand acyclic objects: the default young-generation
    # threshold (700) would run the cycle collector thousands of times while a large
    # list is converted (a third of the conversion time). Cycles are rare here.
    gc.set_threshold(100_000, 50, 100)
    if config.workers > 1:
        # Bind once before forking so a bad address fails here, with one message.
        for host, port in config.listen:
            probe = DNSServer(lambda data, tcp: None, [], 0, reuse_port=True)
            for sock in probe.bind(host, port):
                sock.close()

    def child(sock: socket.socket) -> int:
        return _loop_run(workers.worker_main(config, sock))

    children = workers.spawn(config, config.workers - 1, child)
    return _loop_run(serve(config, children))


def _loop_run(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        return asyncio.run(main)
    return uvloop.run(main)
