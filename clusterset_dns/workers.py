"""Worker processes for ``--workers N``: one source, N servers.

The parent forks the workers before it starts its event loop. Each worker
binds its own sockets with SO_REUSEPORT (the kernel spreads queries across
them) and keeps its own cache, fed with the very op lists the parent's
source produces, pickled over a socketpair: the API server sees one watch
whatever N is. Workers send their counters back once a second for /metrics,
and exit when the parent goes away (EOF on the socketpair).
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

from clusterset_dns.cache import Cache, Op
from clusterset_dns.config import Config
from clusterset_dns.handler import Handler, Stats
from clusterset_dns.names import ZoneNames
from clusterset_dns.server import DNSServer

log = logging.getLogger(__name__)
_FRAME = struct.Struct("!I")


@dataclass(frozen=True, slots=True)
class StartServing:
    """Parent -> worker: the first sync is done (or timed out); open the listeners."""


Message = list[Op] | StartServing


async def _read_frame(reader: asyncio.StreamReader) -> object:
    size = _FRAME.unpack(await reader.readexactly(4))[0]
    return pickle.loads(await reader.readexactly(size))


def _frame(obj: object) -> bytes:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(len(payload)) + payload


class Worker:
    """The parent's handle on one child process."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self.writer: asyncio.StreamWriter | None = None
        self.stats = Stats()
        self._task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        reader, self.writer = await asyncio.open_unix_connection(sock=self.sock)
        self._task = asyncio.create_task(self._read_stats(reader))

    async def _read_stats(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                stats = await _read_frame(reader)
                if isinstance(stats, Stats):
                    self.stats = stats
        except (asyncio.IncompleteReadError, ConnectionError):
            log.warning("worker %d went away", self.pid)

    def send(self, message: Message) -> None:
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(_frame(message))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self.writer is not None:
            self.writer.close()
        try:
            os.kill(self.pid, signal.SIGTERM)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def spawn(config: Config, count: int, child_main: Callable[[socket.socket], int]) -> list[Worker]:
    """Forks ``count`` workers; call before any event loop or thread exists."""
    workers: list[Worker] = []
    for _ in range(count):
        parent_end, child_end = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            parent_end.close()
            for earlier in workers:
                earlier.sock.close()
            code = 1
            try:
                code = child_main(child_end)
            finally:
                os._exit(code)
        child_end.close()
        workers.append(Worker(pid, parent_end))
    return workers


def process_state(config: Config) -> tuple[asyncio.Event, Cache, Handler]:
    """What every serving process starts with, parent or worker: an event set by
    SIGTERM/SIGINT, an empty cache and the handler reading it."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    cache = Cache(ZoneNames(config.zone), config.ttl, config.ns_addresses)
    return stop, cache, Handler(cache.zone, config.edns_udp_size)


async def worker_main(config: Config, sock: socket.socket) -> int:
    """A child: apply the parent's ops, serve DNS once told to, report counters."""
    stop, cache, handler = process_state(config)
    server = DNSServer(handler.handle, list(config.listen), config.tcp_idle_timeout,
                       reuse_port=True, udp_io=config.udp_io,
                       max_tcp_connections=config.max_tcp_connections, stats=handler.stats)
    reader, writer = await asyncio.open_unix_connection(sock=sock)

    async def receive() -> None:
        try:
            while True:
                message = await _read_frame(reader)
                if isinstance(message, StartServing):
                    await server.start()
                else:
                    assert isinstance(message, list)
                    cache.apply(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the parent is gone
        stop.set()

    async def report() -> None:
        while True:
            await asyncio.sleep(1)
            writer.write(_frame(handler.stats))

    tasks = [asyncio.create_task(receive()), asyncio.create_task(report())]
    await stop.wait()
    for task in tasks:
        task.cancel()
    await server.stop()
    return 0
