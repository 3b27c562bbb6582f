"""Worker processes for ``--workers N``: one source, N servers, supervised.

The parent starts each worker as a fresh interpreter (fork + exec, so it is safe
from a process that already runs an event loop and threads) with one end of a
socketpair. Over it the parent sends the :class:`~clusterset_dns.base.config.Config`,
then numbered :class:`Update` messages (the very op lists its source produced,
pickled) and :class:`StartServing`; each worker binds its own sockets with
SO_REUSEPORT (the kernel spreads queries across them) and keeps its own cache.
The API server sees one watch whatever N is.

Every process applies every update, or the parent knows: a worker reports once a
second its counters, the number of the last update it applied and whether it
serves. The parent restarts a worker that exits (killed, or its receive loop
failed: the worker then logs why and exits non-zero rather than serve a frozen
zone) and one that stops reporting or applying for :data:`STALL_SECONDS` plus
three times the longest update the parent itself has applied (a worker cannot
report while it applies one; it is killed first). A new worker is resynced: the
first update it gets is the parent's whole current state (``snapshot``), then
StartServing if the parent serves. :meth:`WorkerPool.missing` lists workers not serving, for /ready.
Workers exit when the parent goes away (EOF on the socketpair).
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.base.config import Config
from clusterset_dns.serving.stats import Stats
from clusterset_dns.zone.cache import Op

log = logging.getLogger(__name__)
_FRAME = struct.Struct("!I")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]

REPORT_SECONDS = 1.0  # how often a worker reports
STALL_SECONDS = 10.0  # no report, or no progress on a pending update, this long: restart
RESTART_FIRST, RESTART_CAP = 0.5, 30.0  # back-off between restarts of one worker
HEALTHY_SECONDS = 60.0  # a worker serving this long resets its restart back-off
STOP_SECONDS = 2.0  # at shutdown, for a worker to exit on its socketpair's EOF


@dataclass(frozen=True, slots=True)
class Update:
    """Parent -> worker: apply ``ops``; ``seq`` numbers the updates of one worker."""

    seq: int
    ops: list[Op]


@dataclass(frozen=True, slots=True)
class StartServing:
    """Parent -> worker: the first sync is done (or timed out); open the listeners."""


@dataclass(frozen=True, slots=True)
class Report:
    """Worker -> parent, every REPORT_SECONDS."""

    stats: Stats
    applied: int  # seq of the last update applied
    serving: bool


def _frame(obj: object) -> bytes:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(len(payload)) + payload


async def _read_frame(reader: asyncio.StreamReader) -> object:
    size = _FRAME.unpack(await reader.readexactly(4))[0]
    return pickle.loads(await reader.readexactly(size))


# -- the parent's side -------------------------------------------------------------------------

class Worker:
    """The parent's handle on one worker slot; the process in it changes on restarts."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: subprocess.Popen[bytes] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.stats = Stats()
        self.sent = 0  # seq of the last update sent
        self.applied = 0
        self.serving = False
        self.last_report = 0.0
        self.last_progress = 0.0  # when ``applied`` last caught up or moved
        self.started = 0.0
        self.restart_delay = RESTART_FIRST

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def send(self, message: Update | StartServing) -> None:
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(_frame(message))


class WorkerPool:
    """Starts, feeds, supervises and stops the workers of one parent."""

    def __init__(self, config: Config, count: int, entry: str,
                 snapshot: Callable[[], list[Op]],
                 on_restart: Callable[[str], None] = lambda reason: None,
                 clock: Clock = SYSTEM) -> None:
        """``entry``: ``module:function`` taking the socket's fd in the new process and
        returning its exit code; ``snapshot``: the parent's whole current state as ops.
        ``clock``: the time of the supervision (reports, stalls, restart back-off,
        shutdown deadlines); processes are polled in real time."""
        self.config = config
        self.clock = clock
        self.entry = entry
        self.snapshot = snapshot
        self.on_restart = on_restart
        self.workers = [Worker(i + 1) for i in range(count)]
        self.retired = Stats()  # counters of workers that are gone (Stats.add)
        self.serving = False
        self.stopping = False
        self.longest_update = 0.0  # seconds, the parent's own apply: a worker's is alike
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for worker in self.workers:
            await self._spawn(worker)
        if self.workers:
            self._tasks.append(asyncio.create_task(self._watchdog(), name="worker-watchdog"))

    def send(self, ops: list[Op], seconds: float = 0.0) -> None:
        """Sends an update the parent applied in ``seconds`` to every worker."""
        self.longest_update = max(self.longest_update, seconds)
        for worker in self.workers:
            if worker.writer is not None:
                worker.sent += 1
                worker.send(Update(worker.sent, ops))

    def start_serving(self) -> None:
        self.serving = True
        for worker in self.workers:
            worker.send(StartServing())

    def missing(self) -> list[int]:
        """Workers that should serve and do not (dead, restarting, not yet resynced)."""
        if not self.serving:
            return []
        return [w.index for w in self.workers if not w.serving]

    def stats(self) -> list[Stats]:
        return [self.retired, *(w.stats for w in self.workers)]

    async def stop(self) -> None:
        """Closing the socketpair stops a worker at once (a worker that got SIGTERM
        itself waits for that, its lame duck, at most --lameduck); SIGTERM after
        STOP_SECONDS, SIGKILL 10 s later."""
        self.stopping = True
        for task in self._tasks:
            task.cancel()
        for worker in self.workers:
            if worker.writer is not None:
                worker.writer.close()
        deadline = self.clock.monotonic() + STOP_SECONDS
        while self.clock.monotonic() < deadline and any(
                w.proc is not None and w.proc.poll() is None for w in self.workers):
            await self.clock.sleep(0.02)
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is None:
                worker.proc.terminate()
        for worker in self.workers:
            if worker.proc is not None:
                await self._reap(worker.proc, 10.0)

    # -- internals --

    async def _spawn(self, worker: Worker) -> None:
        parent_end, child_end = socket.socketpair()
        module, _, function = self.entry.partition(":")
        code = (f"import sys; from {module} import {function} as entry; "
                f"sys.exit(entry(int(sys.argv[1])))")
        env = dict(os.environ)
        # The child imports the very package the parent runs, wherever it came from.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            worker.proc = subprocess.Popen(
                [sys.executable, "-c", code, str(child_end.fileno())],
                pass_fds=[child_end.fileno()], env=env, stdin=subprocess.DEVNULL)
        finally:
            child_end.close()
        reader, worker.writer = await asyncio.open_unix_connection(sock=parent_end)
        now = self.clock.monotonic()
        worker.stats, worker.sent, worker.applied, worker.serving = Stats(), 0, 0, False
        worker.started = worker.last_report = worker.last_progress = now
        worker.writer.write(_frame(self.config))
        # Resync: the whole current state first (taken now, so no update sent from here
        # on can be older than it), then serving if the parent serves.
        worker.sent = 1
        worker.send(Update(1, self.snapshot()))
        if self.serving:
            worker.send(StartServing())
        log.info("worker %d started (pid %d)", worker.index, worker.proc.pid)
        self._tasks = [task for task in self._tasks if not task.done()]
        self._tasks.append(asyncio.create_task(self._follow(worker, reader),
                                               name=f"worker-{worker.index}"))

    async def _follow(self, worker: Worker, reader: asyncio.StreamReader) -> None:
        """Reads the worker's reports until it goes away, then restarts it."""
        proc = worker.proc
        try:
            while True:
                report = await _read_frame(reader)
                if not isinstance(report, Report):
                    raise TypeError(f"worker sent a {type(report).__name__}")
                now = self.clock.monotonic()
                worker.stats = report.stats
                if report.applied != worker.applied or report.applied == worker.sent:
                    worker.last_progress = now
                worker.applied, worker.serving, worker.last_report = (
                    report.applied, report.serving, now)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the worker went away
        except Exception:
            log.exception("worker %d: unreadable report; restarting it", worker.index)
            if proc is not None and proc.poll() is None:
                proc.kill()
        if self.stopping or proc is not worker.proc:
            # Shutting down (a stop signal to the process group reached the worker too):
            # no restart, no error.
            return
        worker.serving = False
        self.retired.add(worker.stats)
        worker.stats = Stats()
        if worker.writer is not None:
            worker.writer.close()
            worker.writer = None
        assert proc is not None
        returncode = await self._reap(proc, 5.0)
        how = (f"was killed by signal {-returncode}" if returncode < 0
               else f"exited with status {returncode}")
        if self.clock.monotonic() - worker.started > HEALTHY_SECONDS:
            worker.restart_delay = RESTART_FIRST
        delay = worker.restart_delay
        worker.restart_delay = min(delay * 2, RESTART_CAP)
        log.error("worker %d (pid %d) %s; restarting it in %.1fs and resyncing it",
                  worker.index, proc.pid, how, delay)
        self.on_restart("exited")
        await self.clock.sleep(delay)
        if not self.stopping:
            await self._spawn(worker)

    async def _watchdog(self) -> None:
        """Kills a worker that stopped reporting, or has an update it does not apply:
        :meth:`_follow` then restarts it."""
        while True:
            await self.clock.sleep(REPORT_SECONDS)
            now = self.clock.monotonic()
            allowed = STALL_SECONDS + 3 * self.longest_update
            for worker in self.workers:
                proc = worker.proc
                if worker.writer is None or proc is None or proc.poll() is not None:
                    continue
                silent = now - worker.last_report > allowed
                stuck = worker.applied < worker.sent and now - worker.last_progress > allowed
                if silent or stuck:
                    what = "stopped reporting" if silent else (
                        f"has not applied update {worker.applied + 1} of {worker.sent}")
                    log.error("worker %d (pid %d) %s for %.0fs; killing it", worker.index,
                              proc.pid, what, allowed)
                    self.on_restart("stalled")
                    proc.kill()

    async def _reap(self, proc: subprocess.Popen[bytes], timeout: float) -> int:
        deadline = self.clock.monotonic() + timeout
        while proc.poll() is None:
            if self.clock.monotonic() > deadline:
                proc.kill()
                deadline = self.clock.monotonic() + timeout
            await self.clock.sleep(0.05)
        return proc.returncode


# -- the worker's side -------------------------------------------------------------------------

def read_config(sock: socket.socket) -> Config:
    """In a new worker, before its event loop: the first message, the parent's Config."""
    def read(size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the parent went away before sending the config")
            data += chunk
        return data

    config = pickle.loads(read(_FRAME.unpack(read(4))[0]))
    if not isinstance(config, Config):
        raise TypeError(f"expected the Config, got a {type(config).__name__}")
    return config


async def follow_parent(sock: socket.socket, apply: Callable[[list[Op]], None],
                        start_serving: Callable[[], Awaitable[None]],
                        stats: Stats, serving: Callable[[], bool],
                        clock: Clock = SYSTEM) -> None:
    """In a worker: applies the parent's updates and reports, until the parent goes
    away (returns). Anything else that goes wrong raises: the worker must exit then,
    so that the parent restarts and resyncs it, rather than serve a frozen zone."""
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    applied = 0

    async def receive() -> None:
        nonlocal applied
        while True:
            message = await _read_frame(reader)
            if isinstance(message, StartServing):
                await start_serving()
            elif isinstance(message, Update):
                apply(message.ops)
                applied = message.seq
                # A backlog of updates is read without waiting: let queries and the
                # report in between updates.
                await asyncio.sleep(0)
            else:
                raise TypeError(f"unexpected message from the parent: {type(message).__name__}")

    async def report() -> None:
        while True:
            writer.write(_frame(Report(stats, applied, serving())))
            await writer.drain()
            await clock.sleep(REPORT_SECONDS)

    tasks = [asyncio.create_task(receive(), name="receive"),
             asyncio.create_task(report(), name="report")]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            try:
                task.result()
            except (asyncio.IncompleteReadError, ConnectionError):
                return  # the parent is gone
    finally:
        for task in tasks:
            task.cancel()
        writer.close()


def ignore_interrupts() -> None:
    """A worker leaves Ctrl-C (SIGINT to the whole process group) to its parent, which
    stops it; it still stops on SIGTERM (after its lame duck, see app)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
