"""The worker pool with real worker processes (the app's own entry point), fed by this
test as the parent: updates reach every worker, a worker killed, stopped or failing is
restarted and resynced from the parent's state, and /ready's view (``missing``) follows.

Each pool here has one worker on its own port, so every DNS answer comes from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import dns.asyncquery
import dns.message
import pytest

from clusterset_dns.base.clock import SYSTEM, Clock
from clusterset_dns.base.config import Config
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import app, collector, workers
from clusterset_dns.serving.stats import Stats
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import Cache, Op, PutImport, SetSynced
from clusterset_dns_testkit.objects import service_import
from clusterset_dns_testkit.peers import free_port

from .fakeclock import FakeClock
from .helpers import ZONE


def put(name: str, ip: str) -> PutImport:
    return PutImport(("prod", name), convert.service_import(service_import(name, ips=[ip])))


class Parent:
    """This test process as the parent: a cache, a pool of one worker, the ops it sent."""

    def __init__(self, clock: Clock, **config: Any) -> None:
        self.port = free_port()
        self.config = Config(listen=(("127.0.0.1", self.port),), log_level="warning", **config)
        self.cache = Cache(ZoneNames(ZONE), 5)
        self.restarts: list[str] = []
        self.pool = workers.WorkerPool(self.config, 1, app.WORKER_ENTRY,
                                       self.cache.snapshot, self.restarts.append,
                                       clock)

    def apply(self, ops: list[Op]) -> None:
        self.cache.apply(ops)
        self.pool.send(ops)

    @property
    def worker(self) -> workers.Worker:
        return self.pool.workers[0]

    async def answer(self, name: str) -> list[str]:
        query = dns.message.make_query(f"{name}.prod.svc.{ZONE}.", "A")
        try:
            reply = await dns.asyncquery.udp(query, "127.0.0.1", port=self.port, timeout=1)
        except (dns.exception.Timeout, OSError):
            return ["no answer"]
        return sorted(str(rd) for rrset in reply.answer for rd in rrset)


async def until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def until_async(condition: Callable[[], Awaitable[bool]], timeout: float,
                      what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def run_parent(body: Callable[[Parent], Awaitable[None]], clock: Clock = SYSTEM,
               **config: Any) -> Parent:
    parent = Parent(clock, **config)

    async def main() -> None:
        parent.apply([put("web", "10.1.0.1"), SetSynced(True)])
        await parent.pool.start()
        parent.pool.start_serving()
        try:
            await until(lambda: parent.pool.missing() == [], 30, "the worker to serve")
            assert await parent.answer("web") == ["10.1.0.1"]
            await body(parent)
        finally:
            # The stop polls the workers on the clock: a fake one is moved on (to each
            # poll's end) while they exit in real time.
            stopping = asyncio.ensure_future(parent.pool.stop())
            while not stopping.done():
                if isinstance(clock, FakeClock):
                    clock.jump()
                await asyncio.sleep(0.01)
            await stopping

    asyncio.run(main())
    return parent


async def restarted(parent: Parent, old_pid: int | None) -> None:
    """The slot has a new process that serves, with every update applied."""
    worker = parent.worker
    await until(lambda: worker.pid != old_pid and parent.pool.missing() == []
                and worker.applied == worker.sent, 60, "a new, serving, resynced worker")


@pytest.mark.timeout(120)
def test_updates_reach_the_worker_and_are_acknowledged() -> None:
    async def body(parent: Parent) -> None:
        for i in range(20):
            parent.apply([put(f"s{i}", f"10.2.0.{i}")])
        await until(lambda: parent.worker.applied == parent.worker.sent == 21, 30,
                    "every update acknowledged")
        assert await parent.answer("s19") == ["10.2.0.19"]

    run_parent(body)


@pytest.mark.timeout(120)
def test_a_killed_worker_is_restarted_and_resynced(caplog: pytest.LogCaptureFixture) -> None:
    async def body(parent: Parent) -> None:
        old = parent.worker.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        await until(lambda: parent.pool.missing() == [1], 10, "/ready to see it missing")
        # Updates made while it is away reach the new worker through the resync.
        parent.apply([put("web", "10.1.0.9"), put("new", "10.1.0.7")])
        await restarted(parent, old)
        assert await parent.answer("web") == ["10.1.0.9"]
        assert await parent.answer("new") == ["10.1.0.7"]

    parent = run_parent(body)
    assert parent.restarts == ["exited"]
    assert "was killed by signal 9; restarting it" in caplog.text


def scraped(parent: Parent) -> dict[str, float]:
    """The parent's /metrics families of one value (what the app's collector reads)."""
    scrape = collector.ServerCollector(parent.cache, Stats(), parent.pool.stats)
    return {family.name: family.samples[0].value for family in scrape.collect()
            if len(family.samples) == 1}


@pytest.mark.timeout(120)
def test_counters_of_a_restarted_worker_are_kept() -> None:
    """Every counter a worker reported survives its restart (the parent keeps the
    counters of workers that are gone): here refused TCP connections."""
    async def body(parent: Parent) -> None:
        held = await asyncio.open_connection("127.0.0.1", parent.port)  # the one allowed
        refused = await asyncio.open_connection("127.0.0.1", parent.port)
        with contextlib.suppress(ConnectionResetError):
            assert await refused[0].read() == b""  # aborted at once
        refused[1].close()
        await until(lambda: scraped(parent)["clusterset_dns_tcp_refused"] == 1, 10,
                    "the worker to report")
        held[1].close()
        old = parent.worker.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        await restarted(parent, old)
        assert parent.worker.stats.tcp_refused == 0  # the new worker starts from zero
        kept = scraped(parent)
        assert kept["clusterset_dns_tcp_refused"] == 1
        assert kept["clusterset_dns_tcp_connections"] == 0  # a gauge: gone with the worker

    run_parent(body, max_tcp_connections=1)


@pytest.mark.timeout(120)
def test_a_stopped_worker_is_killed_and_restarted() -> None:
    """SIGSTOP: the process is there but applies nothing and reports nothing. The
    supervision's time is a fake clock: it passes the stall limit at once, then moves
    on (the watchdog's rounds, the restart's back-off) only until the slot has a new
    process, whose reports come in real time."""
    clock = FakeClock()

    async def body(parent: Parent) -> None:
        old = parent.worker.pid
        assert old is not None
        os.kill(old, signal.SIGSTOP)
        try:
            parent.apply([put("web", "10.1.0.5")])
            clock.advance(workers.STALL_SECONDS + workers.REPORT_SECONDS)

            def replaced() -> bool:
                if parent.worker.pid != old:
                    return True
                clock.jump()  # the watchdog's next round, then the restart's back-off
                return False

            await until(replaced, 30, "the watchdog to replace the stopped worker")
            await restarted(parent, old)
        finally:
            with_suppressed_kill(old)
        assert await parent.answer("web") == ["10.1.0.5"]

    parent = run_parent(body, clock)
    assert parent.restarts[0] == "stalled"


def with_suppressed_kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_a_worker_whose_update_fails_says_so_exits_and_is_resynced(
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """A bug while applying (here: an op the cache cannot apply) must not leave the
    worker serving a frozen zone: it logs the traceback and exits non-zero."""
    async def body(parent: Parent) -> None:
        old = parent.worker.pid
        parent.worker.sent += 1
        parent.worker.send(workers.Update(parent.worker.sent, ["not an op"]))  # type: ignore[list-item]
        parent.cache.apply([put("web", "10.1.0.3")])  # the parent moved on meanwhile
        await restarted(parent, old)
        assert await parent.answer("web") == ["10.1.0.3"]

    parent = run_parent(body)
    err = capfd.readouterr().err
    assert "following the parent's updates failed" in err
    assert "Traceback" in err
    assert "exited with status 1; restarting it" in caplog.text
    assert parent.restarts == ["exited"]


@pytest.mark.timeout(60)
def test_stop_ends_every_worker() -> None:
    pids: list[int] = []

    async def body(parent: Parent) -> None:
        assert parent.worker.pid is not None
        pids.append(parent.worker.pid)

    run_parent(body)
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)
