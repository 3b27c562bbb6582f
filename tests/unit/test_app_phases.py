"""The serving parent's three phases (process/app.py: Server.startup, main_loop,
shutdown) with the source at its seam (app.make_source): start-up ends at the first
sync, at --startup-timeout (serving anyway, with a warning) or at once when the source
fails (its status, nothing served) or a stop signal comes first (0); the main loop ends
with the source's failure or the stop signal; the shutdown waits --lameduck on the
injected clock only when it is above 0, marks the workers as stopping and cancels the
source. (tests/unit/test_app.py runs the whole serve.) Written for the survivors of
``scripts/mutate clusterset_dns/process/app.py``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from clusterset_dns.base import metrics
from clusterset_dns.base.config import Config, ConfigError
from clusterset_dns.process import app
from clusterset_dns.zone.cache import Cache, Op, SetSynced
from clusterset_dns_testkit.peers import free_port

from .fakeclock import FakeClock

LOCAL = "127.0.0.1"


class Source:
    """The source at its seam: what app gave it, and a run that syncs (or not), then
    waits for ``end`` and raises ``fails`` (if any)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, syncs: bool = True,
                 fails: BaseException | None = None) -> None:
        self.syncs, self.fails = syncs, fails
        self.given: list[tuple[Config, metrics.Metrics, Cache | None]] = []
        self.end = asyncio.Event()
        monkeypatch.setattr(app, "make_source", self.make)

    def make(self, config: Config, apply: Callable[[list[Op]], None], meters: metrics.Metrics,
             cache: Cache | None = None) -> Callable[[], Coroutine[Any, Any, None]]:
        self.given.append((config, meters, cache))

        async def run() -> None:
            if self.syncs:
                apply([SetSynced(True)])
            await self.end.wait()
            if self.fails is not None:
                raise self.fails
        return run


def server(clock: FakeClock, **config: Any) -> app.Server:
    settings: dict[str, Any] = {"listen": ((LOCAL, free_port()),), "health_listen": None,
                                "ready_listen": None, "metrics_listen": None,
                                "startup_timeout": 3600, **config}
    return app.Server(Config(**settings), clock)


async def turns(count: int = 50) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def test_start_up_ends_at_the_first_sync_and_serves(monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    source = Source(monkeypatch)

    async def main() -> None:
        s = server(FakeClock())
        with caplog.at_level(logging.WARNING, logger=app.log.name):
            assert await asyncio.wait_for(s.startup(), 10) is None
        try:
            assert s.dns.bound and s.source is not None and s.source.get_name() == "source"
            assert source.given == [(s.config, s.metrics, s.state.cache)]
            assert s.metrics.registry.get_sample_value(
                "clusterset_dns_udp_io", {"mode": s.dns.udp_mode}) == 1
        finally:
            await s.shutdown()

    asyncio.run(main())
    assert "not synced" not in caplog.text


def test_start_up_serves_unsynced_at_the_startup_timeout(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    Source(monkeypatch, syncs=False)

    async def main() -> None:
        s = server(FakeClock(), startup_timeout=0)
        with caplog.at_level(logging.WARNING, logger=app.log.name):
            assert await asyncio.wait_for(s.startup(), 10) is None
        try:
            assert s.dns.bound and not s.state.cache.zone.synced
        finally:
            await s.shutdown()

    asyncio.run(main())
    assert "not synced after 0.0s; serving anyway" in caplog.text


@pytest.mark.parametrize(("fails", "code"), [
    (ConfigError("no kubeconfig"), 2), (RuntimeError("a bug"), 1)])
def test_a_source_failing_at_start_ends_start_up_with_its_status(
        monkeypatch: pytest.MonkeyPatch, fails: BaseException, code: int) -> None:
    source = Source(monkeypatch, syncs=False, fails=fails)
    source.end.set()

    async def main() -> None:
        s = server(FakeClock())
        assert await asyncio.wait_for(s.serve(), 10) == code
        assert not s.dns.bound and not s.stopping  # nothing served, no lame duck

    asyncio.run(main())


def test_a_stop_signal_during_start_up_ends_it_with_0(monkeypatch: pytest.MonkeyPatch) -> None:
    Source(monkeypatch, syncs=False)

    async def main() -> None:
        clock = FakeClock()
        s = server(clock, lameduck=5)
        s.state.stop.set()
        assert await asyncio.wait_for(s.serve(), 10) == 0
        assert not s.dns.bound and clock.sleeps == []  # nothing served: no lame duck

    asyncio.run(main())


@pytest.mark.parametrize(("fails", "code"), [
    (ConfigError("the kubeconfig went away"), 2), (RuntimeError("a bug"), 1)])
def test_a_source_failing_while_serving_ends_the_main_loop_with_its_status(
        monkeypatch: pytest.MonkeyPatch, fails: BaseException, code: int) -> None:
    source = Source(monkeypatch, fails=fails)

    async def main() -> None:
        clock = FakeClock()
        s = server(clock, lameduck=5)
        assert await asyncio.wait_for(s.startup(), 10) is None
        source.end.set()
        try:
            assert await asyncio.wait_for(s.main_loop(), 10) == code
            assert not s.stopping  # no lame duck: nothing routes here to a failed source
        finally:
            await asyncio.wait_for(s.shutdown(), 10)
        assert clock.sleeps == []

    asyncio.run(main())


@pytest.mark.parametrize("lameduck", [0, 0.5, 1])
def test_after_a_stop_signal_the_shutdown_waits_its_lame_duck_on_the_clock(
        monkeypatch: pytest.MonkeyPatch, lameduck: float) -> None:
    Source(monkeypatch)

    async def main() -> None:
        clock = FakeClock()
        s = server(clock, lameduck=lameduck)
        assert await asyncio.wait_for(s.startup(), 10) is None
        s.state.stop.set()
        assert await asyncio.wait_for(s.main_loop(), 10) == 0
        assert s.stopping
        shutdown = asyncio.ensure_future(s.shutdown())
        await turns()
        assert s.pool.stopping  # the workers are not restarted any more
        if lameduck:
            assert clock.pending() == [clock.now + lameduck] and not shutdown.done()
            assert s.dns.bound and s.dns.servers[0].is_serving()  # still answering
            clock.advance(lameduck)
        await asyncio.wait_for(shutdown, 10)
        assert clock.sleeps == ([lameduck] if lameduck else [])
        await turns()
        assert s.source is not None and s.source.cancelled()
        assert s.stopper is not None and s.stopper.done()
        assert not s.dns.servers[0].is_serving()

    asyncio.run(main())
