"""Lifespan: ordered start-up and shutdown of one server process (and its workers).

Start-up: worker processes (``--workers N``: N - 1 of them beside this one),
metrics/health endpoints, the source, wait for the first full sync (at most
--startup-timeout), then DNS listeners. Shutdown, on SIGTERM/SIGINT: /ready
turns 503 at once, DNS keeps answering for --lameduck seconds, then the rest
stops in reverse order and the process exits 0. The parent's run is a
:class:`Server` in three phases: ``startup()``, ``main_loop()``, ``shutdown()``.
This module builds every process's state, the parent's and each worker's
(:func:`process_state`, :func:`worker_process`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterset_dns.base import metrics
from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.base.config import Config, ConfigError, HostPort
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import collector, logs, workers
from clusterset_dns.process.dnstap import Tap
from clusterset_dns.process.explain_http import ExplainEndpoint
from clusterset_dns.process.health import HTTPEndpoints, Route
from clusterset_dns.process.querylog import QueryLog
from clusterset_dns.process.sink import BULK, Sink, build_pending, release_memory
from clusterset_dns.serving.handler import Handler
from clusterset_dns.serving.observe import Observer, fan_out
from clusterset_dns.serving.server import DNSServer, raise_fd_limit
from clusterset_dns.serving.stats import Stats
from clusterset_dns.sources import convert
from clusterset_dns.transfers.journal import Journal
from clusterset_dns.zone.cache import (
    Cache,
    Op,
)

if TYPE_CHECKING:
    from clusterset_dns.transfers import xfr

log = logging.getLogger(__name__)

# The sink (and the memory release after a load) is sink.py's; its names stay
# importable here, where callers have always found them.
__all__ = ["BULK", "ProcessState", "Server", "Sink", "release_memory", "run", "serve",
           "worker_process"]

@dataclass(frozen=True, slots=True)
class ProcessState:
    """What every serving process has, parent or worker: an event set by a stop signal,
    its cache and the handler reading it."""

    stop: asyncio.Event
    cache: Cache
    handler: Handler
    transfers: xfr.Transfers | None  # None: transfers are REFUSED (no --allow-transfer)
    journal: Journal | None
    tap: Tap | None  # --dnstap: this process's queue and connection to the collector

    def server(self, config: Config, reuse_port: bool) -> DNSServer:
        return DNSServer(self.handler.handle, list(config.listen), config.tcp_idle_timeout,
                         reuse_port=reuse_port, udp_io=config.udp_io,
                         max_tcp_connections=config.max_tcp_connections,
                         stats=self.handler.stats,
                         transfer=self.transfers.start if self.transfers else None,
                         remembering=self.handler,
                         observe=answer_observer(config, self.handler.stats, self.tap),
                         sample_every=config.duration_sample)


def answer_observer(config: Config, stats: Stats, tap: Tap | None = None) -> Observer | None:
    """What the flags ask to see of every answer (observe.Observer), in each process
    that answers; None (the default): nothing, and the transports' plain path."""
    query_log = None
    if config.query_log != "off":
        # The rate is the server's: each of the processes answering gets its share.
        query_log = QueryLog(config.query_log, config.query_log_rate / config.workers,
                             stats).observe
    return fan_out([query_log, tap.observe if tap is not None else None])


def process_state(config: Config, signals: tuple[int, ...], worker: bool = False
                  ) -> ProcessState:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    # SIGHUP (a closed terminal, a habit of reloading daemons) is ignored: there is no
    # configuration file to reload, and the sources follow their data on their own.
    loop.add_signal_handler(signal.SIGHUP, _hangup, worker)
    journal = Journal(config.journal_changes) if config.allow_transfer else None
    # A worker gets the parent's updates: the parent has logged what they reject, and
    # measures the programming delay (clusterset_dns_dns_programming_duration_seconds).
    cache = Cache(ZoneNames(config.zone), config.ttl, config.ns_addresses,
                  log_rejected=not worker, cluster_id=config.cluster_id,
                  topology_zone=config.topology_zone, node_name=config.node_name,
                  serve_terminating=config.serve_terminating,
                  on_change=journal.record if journal is not None else None,
                  record_programming=not worker, defer=True)
    stats = Stats()
    transfers = None
    if journal is not None:
        # Imported only when transfers are on: dnspython costs ~9 MiB and ~20 ms of
        # start-up that a server without transfers never uses.
        from clusterset_dns.transfers import keyfile, xfr
        key = keyfile.load_key(config.transfer_tsig_key) if config.transfer_tsig_key else None
        # The slots are the server's, like --query-log-rate: with --workers N each process
        # gets 1/N of them (an address's share with them), else one address would run 4
        # transfers in every process, and the server 16 a process.
        transfers = xfr.Transfers(cache.zone, journal, config.allow_transfer, key,
                                  xfr.Counts(stats.transfers),
                                  max(1, xfr.MAX_TRANSFERS // config.workers),
                                  timeout=config.xfr_timeout)
        # Signed SOA checks get signed answers.
        handler = Handler(cache.zone, config.edns_udp_size, stats, transfers.udp,
                          transfers if key is not None else None)
    else:
        handler = Handler(cache.zone, config.edns_udp_size, stats)
    tap = None
    if config.dnstap is not None:
        # Each process (each worker) connects on its own: the collector sees one stream
        # a process, the DNS path never shares a queue across processes.
        tap = Tap.from_config(config, stats)
        tap.start()
    return ProcessState(stop, cache, handler, transfers, journal, tap)


def _hangup(worker: bool) -> None:
    if not worker:
        log.info("SIGHUP ignored: flags are read at start only; the source follows its "
                 "data without a reload")


def make_source(config: Config, apply: Callable[[list[Op]], None], meters: metrics.Metrics,
                cache: Cache | None = None) -> Callable[[], Coroutine[Any, Any, None]]:
    """``cache``: the one --events reports the rejections of."""
    def file_error(reason: str) -> None:
        meters.manifest_errors.labels(reason).inc()

    if config.manifests is not None:
        # Imported here: a server watching the API never reads files (nor PyYAML).
        from clusterset_dns.sources.manifests import ManifestSource

        extra = (api.split("/")[0] for api in config.serviceimport_apis)
        groups = frozenset({convert.GROUP, *extra})
        return ManifestSource(config.manifests, apply, config.poll_interval, groups,
                              frozenset(config.namespaces), meters.invalid, file_error,
                              cluster_property=config.cluster_id is None).run
    from clusterset_dns.sources.locality import Locality
    from clusterset_dns.sources.watch import KubeSource

    locality = Locality(config, apply, meters)
    tasks: list[Callable[[Any], Coroutine[Any, Any, None]]] = [locality.run]
    if config.events and cache is not None:
        from clusterset_dns.sources import events

        namespace = config.events_namespace or _own_namespace()
        tasks.append(lambda client: events.run(client, cache, namespace, config.events_lease))
    return KubeSource(config, apply, meters, extra=tasks).run


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _own_namespace() -> str:
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


WORKER_ENTRY = "clusterset_dns.process.app:worker_process"


async def serve(config: Config) -> int:
    """The serving parent's whole run: :class:`Server`'s start-up, main loop and
    shutdown; the exit status."""
    return await Server(config).serve()


class Server:
    """The serving parent in three phases, each an awaitable step (the shape of uvicorn's
    ``Server.serve``): :meth:`startup` (workers, HTTP endpoints, the source, the first
    sync, then DNS), :meth:`main_loop` (until a stop signal or the source ends) and
    :meth:`shutdown` (the lame duck, then everything in reverse order). Everything is
    built in the constructor, its own registry of metrics included, so that two runs in
    one process share nothing."""

    def __init__(self, config: Config, clock: Clock = SYSTEM) -> None:
        """``clock``: what the lame duck waits on."""
        self.config = config
        self.clock = clock
        self.state = state = process_state(config, (signal.SIGTERM, signal.SIGINT))
        cache = state.cache
        self.metrics = meters = metrics.Metrics()
        self.pool = pool = workers.WorkerPool(
            config, config.workers - 1, WORKER_ENTRY, cache.snapshot,
            lambda reason: meters.worker_restarts.labels(reason).inc())
        journal = state.journal
        self.largest = collector.Largest(cache)
        meters.registry.register(collector.ServerCollector(
            cache, state.handler.stats, pool.stats, lambda: len(pool.missing()),
            lambda: journal.records if journal is not None else 0, self.largest))
        self.notifier = None
        if config.notify:
            from clusterset_dns.transfers.notify import Notifier  # dnspython: only when used
            from clusterset_dns.transfers.zonedata import soa

            def current_soa() -> tuple[int, bytes]:
                record = soa(cache.zone)
                return record.ttl, record.rdata

            self.notifier = Notifier(config.zone, config.notify, current_soa,
                                     state.transfers.key if state.transfers else None,
                                     lambda result: meters.notifies.labels(result).inc())
        self.sink = Sink(cache, pool, meters,
                         self.notifier.changed if self.notifier else lambda: None,
                         (lambda: collector.warn_large_rrsets(cache)) if config.allow_transfer
                         else lambda: None)
        self.dns = state.server(config, reuse_port=config.workers > 1)
        self.http = HTTPEndpoints(on_evict=meters.http_evicted.inc)
        self.explainer = ExplainEndpoint(
            cache, largest=self.largest.get,
            on_refused=lambda reason: meters.explain_refused.labels(reason).inc())
        self.stopping = False  # a stop signal ended the main loop: /ready says 503
        self.source: asyncio.Task[None] | None = None
        self.stopper: asyncio.Task[bool] | None = None

    async def serve(self) -> int:
        try:
            code = await self.startup()
            if code is None:
                code = await self.main_loop()
            return code
        finally:
            await self.shutdown()

    def routes(self) -> dict[HostPort, dict[str, Route]]:
        """The HTTP endpoints, grouped by the address each listens on."""
        config, cache, dns, pool = self.config, self.state.cache, self.dns, self.pool

        def health(_: Mapping[str, str]) -> tuple[int, str, bytes]:
            return 200, "text/plain", b"OK\n"

        def ready(_: Mapping[str, str]) -> tuple[int, str, bytes]:
            if self.stopping:
                return 503, "text/plain", b"shutting down\n"
            if not (cache.zone.synced and dns.bound):
                return 503, "text/plain", b"not synced\n"
            missing = pool.missing()
            if missing:
                return 503, "text/plain", f"workers not serving: {missing}\n".encode()
            return 200, "text/plain", b"OK\n"

        def scrape(_: Mapping[str, str]) -> tuple[int, str, bytes]:
            return 200, *self.metrics.exposition()

        routes: dict[HostPort, dict[str, Route]] = {}
        for where, path, route in ((config.health_listen, "/health", health),
                                   (config.health_listen, "/explain", self.explainer.route),
                                   (config.ready_listen, "/ready", ready),
                                   (config.metrics_listen, "/metrics", scrape)):
            if where is not None:
                routes.setdefault(where, {})[path] = route
        return routes

    async def startup(self) -> int | None:
        """Workers, HTTP endpoints, the source; the first full sync (at most
        --startup-timeout); then DNS. None once serving; else the exit status (the
        source failed, or a stop signal came first: nothing was served, there is no
        lame duck)."""
        config, sink, state = self.config, self.sink, self.state
        # Now, not when DNS starts: the HTTP endpoints and the source open descriptors first.
        raise_fd_limit()
        await self.pool.start()
        for where, table in self.routes().items():
            await self.http.serve(where, table)
        self.source = source = asyncio.create_task(
            make_source(config, sink.apply, self.metrics, state.cache)(), name="source")
        synced = asyncio.create_task(sink.synced.wait())
        self.stopper = asyncio.create_task(state.stop.wait())
        # Until the first sync, or --startup-timeout at most (see Sink.first_load). A
        # source that fails at start (an unusable kubeconfig) ends start-up at once, and
        # so does a stop signal.
        with sink.first_load():
            await asyncio.wait({synced, source, self.stopper}, timeout=config.startup_timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        synced.cancel()
        failed = _source_failed(source)
        if failed is not None:
            return failed
        if state.stop.is_set():
            log.info("stopped during start-up")
            return 0
        if not sink.synced.is_set():
            log.warning("not synced after %.1fs; serving anyway (SERVFAIL for unknown names)",
                        config.startup_timeout)
        await self.dns.start()
        self.metrics.udp_io.labels(self.dns.udp_mode).set(1)
        self.pool.start_serving()
        if self.notifier is not None:
            self.notifier.start()
            self.notifier.changed()  # a secondary may hold an older zone than this start's
        log.info("ready: %s", state.cache.counts())
        return None

    async def main_loop(self) -> int:
        """Serves until a stop signal (0; the shutdown then starts with the lame duck) or
        the source fails (its exit status)."""
        assert self.source is not None and self.stopper is not None
        await asyncio.wait({self.stopper, self.source}, return_when=asyncio.FIRST_COMPLETED)
        failed = _source_failed(self.source)
        if failed is not None:
            return failed
        self.stopping = True
        return 0

    async def shutdown(self) -> None:
        """Stops what start-up started, in reverse order, whatever phase ended the run.
        After a stop signal while serving, the lame duck first: /ready fails at once so
        the pod leaves its Service's endpoints, while DNS keeps answering the queries
        still routed here for --lameduck seconds."""
        if self.stopping:
            # A stop signal to the whole process group reaches the workers too: they stop
            # with us (their own lame duck), and are not restarted.
            self.pool.stopping = True
            if self.config.lameduck > 0:
                log.info("shutting down: /ready is 503, DNS answers for %gs more "
                         "(--lameduck)", self.config.lameduck)
                await self.clock.sleep(self.config.lameduck)
            log.info("shutting down: closing the listeners")
        await self.dns.stop()
        if self.state.tap is not None:
            await self.state.tap.stop()
        for task in (self.source, self.stopper):
            if task is not None:
                task.cancel()
        if self.notifier is not None:
            await self.notifier.stop()
        await self.http.stop()
        await self.pool.stop()


def _source_failed(source: asyncio.Task[None]) -> int | None:
    """None while the source runs or when it ended cleanly; else the exit status: 2
    for a configuration error, reported in one line; 1 for a bug, with its traceback."""
    if not source.done() or source.cancelled() or source.exception() is None:
        return None
    exc = source.exception()
    if isinstance(exc, ConfigError):
        log.error("cannot start: %s", exc)
        return 2
    log.error("source failed", exc_info=exc)
    return 1


def _process_setup(config: Config) -> None:
    logs.setup(config.log_level, config.log_format)
    # The cache is a few hundred thousand acyclic objects: the default young-generation
    # threshold (700) would run the cycle collector thousands of times while a large
    # list is converted (a third of the conversion time). Cycles are rare here.
    gc.set_threshold(100_000, 50, 100)


def run(config: Config) -> int:
    _process_setup(config)
    if config.transfer_tsig_key is not None:
        from clusterset_dns.transfers import keyfile
        try:  # read once here: a bad key file stops the start with one line
            weak = keyfile.weakness(keyfile.load_key(config.transfer_tsig_key))
        except ConfigError as exc:
            log.error("cannot start: %s", exc)
            return 2
        if weak:
            log.warning("%s", weak)
    if config.workers > 1:
        # Bind once before the workers start, so a bad address fails here, with one
        # message, not once per worker restart.
        for host, port in config.listen:
            probe = DNSServer(lambda data, tcp, peer: None, [], 0, reuse_port=True)
            for sock in probe.bind(host, port):
                sock.close()
    return _loop_run(serve(config))


def worker_process(fd: int) -> int:
    """A worker's process (started by :class:`workers.WorkerPool`): the socketpair end
    ``fd`` brings the Config, then the parent's updates."""
    sock = socket.socket(fileno=fd)
    config = workers.read_config(sock)
    _process_setup(config)
    workers.ignore_interrupts()
    return _loop_run(_worker_serve(config, sock))


async def _worker_serve(config: Config, sock: socket.socket, clock: Clock = SYSTEM) -> int:
    """``clock``: what the lame duck and the reports to the parent wait on."""
    state = process_state(config, (signal.SIGTERM,), worker=True)
    dns = state.server(config, reuse_port=True)

    building: list[asyncio.Task[None]] = []  # build_pending after the sync, as in the parent

    def apply(ops: list[Op]) -> None:
        synced = state.cache.zone.synced
        # A resync or a relist, or the end of a first list, as in the parent.
        if state.cache.apply(ops).rebuilt >= BULK or (state.cache.zone.synced and not synced):
            release_memory()
        if state.cache.zone.synced and state.cache.pending and (
                not building or building[-1].done()):
            building.append(asyncio.get_running_loop().create_task(
                build_pending(state.cache), name="build-pending"))

    follow = asyncio.create_task(workers.follow_parent(
        sock, apply, dns.start, state.handler.stats, lambda: bool(dns.bound), clock))
    stopper = asyncio.create_task(state.stop.wait())
    await asyncio.wait({follow, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if stopper.done() and not follow.done() and dns.bound and config.lameduck > 0:
        # SIGTERM to the whole process group: the parent is in its lame duck; keep
        # answering (and following it) until it ends it by going away, or our own ends.
        lame = asyncio.create_task(clock.sleep(config.lameduck))
        await asyncio.wait({follow, lame}, return_when=asyncio.FIRST_COMPLETED)
        lame.cancel()
    code = 0
    if follow.done() and not follow.cancelled() and follow.exception() is not None:
        # Never serve a zone that stopped changing: exit, the parent restarts us.
        log.error("worker: following the parent's updates failed; exiting so that the "
                  "parent restarts and resyncs this worker", exc_info=follow.exception())
        code = 1
    follow.cancel()
    stopper.cancel()
    await dns.stop()
    if state.tap is not None:
        await state.tap.stop()
    return code


def _loop_run(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        return asyncio.run(main)
    return uvloop.run(main)
