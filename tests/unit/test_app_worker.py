"""A worker's run (process/app.py: worker_process, _worker_serve) in this process, fed by
this test as its parent over a socketpair: it applies the updates, serves when told (on
a port it shares, SO_REUSEPORT), reports, and exits 0 when the parent goes away, 1 when
following it fails; after SIGTERM it keeps answering for its lame duck (on the injected
clock) only while it serves; memory is released after exactly BULK services or the
first sync, and the answers the sync left waiting are built by one task at a time.
(tests/unit/test_workers.py runs workers as real processes.) Written for the survivors
of ``scripts/mutate clusterset_dns/process/app.py``."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
from collections.abc import Callable
from typing import Any, cast

import dns.asyncquery
import dns.exception
import dns.message
import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.process import app, logs, workers
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import Cache, Op, PutImport, SetSynced
from clusterset_dns_testkit.objects import service_import
from clusterset_dns_testkit.peers import free_port

from .fakeclock import FakeClock
from .helpers import ZONE

LOCAL = "127.0.0.1"


def put(name: str, ip: str = "10.1.0.1") -> PutImport:
    return PutImport(("prod", name), convert.service_import(service_import(name, ips=[ip])))


class Parent:
    """This test as a worker's parent: its end of the socketpair; the worker runs on a
    fake clock (its reports and its lame duck)."""

    def __init__(self, lameduck: float = 5.0) -> None:
        self.port = free_port()
        self.config = Config(listen=((LOCAL, self.port),), lameduck=lameduck,
                             log_level="warning")
        self.clock = FakeClock()
        self.mine, self.theirs = socket.socketpair()
        self.seq = 0

    async def start(self) -> None:
        self.worker = asyncio.create_task(
            app._worker_serve(self.config, self.theirs, self.clock))
        self.reader, self.writer = await asyncio.open_unix_connection(sock=self.mine)

    def send(self, message: object) -> None:
        self.writer.write(workers._frame(message))

    def update(self, ops: list[Op]) -> None:
        self.seq += 1
        self.send(workers.Update(self.seq, ops))

    async def next_report(self) -> workers.Report:
        return cast(workers.Report, await asyncio.wait_for(workers._read_frame(self.reader), 10))

    async def report_where(self, wanted: Callable[[workers.Report], bool]) -> workers.Report:
        """The first later report that says ``wanted``: the clock moved a report's period
        for each (the worker's first report, at once, is read by next_report)."""
        for _ in range(200):
            self.clock.advance(workers.REPORT_SECONDS)
            report = await self.next_report()
            if wanted(report):
                return report
        raise AssertionError("no such report")

    async def serving(self) -> None:
        self.update([put("web"), SetSynced(True)])
        self.send(workers.StartServing())
        await self.report_where(lambda r: r.serving and r.applied == self.seq)

    async def answer(self, name: str = "web") -> list[str]:
        query = dns.message.make_query(f"{name}.prod.svc.{ZONE}.", "A")
        try:
            reply = await dns.asyncquery.udp(query, LOCAL, port=self.port, timeout=5)
        except (dns.exception.Timeout, OSError):
            return ["no answer"]
        return sorted(str(rd) for rrset in reply.answer for rd in rrset)

    async def answer_becomes(self, wanted: list[str]) -> bool:
        for _ in range(50):
            if await self.answer() == wanted:
                return True
            await asyncio.sleep(0)
        return False

    async def sigterm(self) -> None:
        """SIGTERM to this process: the worker's handler (its run's loop is this one)."""
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100):
            await asyncio.sleep(0)


def free(port: int) -> bool:
    """Whether nothing listens on ``port`` any more (a plain bind succeeds, UDP and TCP)."""
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as sock:
            try:
                sock.bind((LOCAL, port))
            except OSError:
                return False
    return True


def test_a_worker_applies_serves_when_told_reports_and_exits_when_its_parent_goes(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        parent = Parent()
        await parent.start()
        first = await parent.next_report()  # at once
        assert (first.applied, first.serving) == (0, False)
        # The next one a second later, on the worker's clock.
        assert parent.clock.pending() == [parent.clock.now + workers.REPORT_SECONDS]
        parent.update([put("web"), SetSynced(True)])
        synced = await parent.report_where(lambda r: r.applied == 1)
        assert not synced.serving  # not before it is told
        parent.send(workers.StartServing())
        await parent.report_where(lambda r: r.serving)
        assert await parent.answer() == ["10.1.0.1"]
        parent.update([put("web", "10.1.0.2")])
        await parent.report_where(lambda r: r.applied == 2)
        assert await parent.answer() == ["10.1.0.2"]
        # Its own answers' counters.
        await parent.report_where(lambda r: sum(r.stats.requests) == 2)
        # Its listeners share the port, as every worker's must.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            other.bind((LOCAL, parent.port))
        assert not free(parent.port)
        # A SIGHUP to the process group: the parent says it is ignored, not each worker.
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(50):
            await asyncio.sleep(0)
        # What the parent logged already: a worker does not say it again.
        parent.update([PutImport(("prod", "long"), convert.service_import(service_import(
            "long", ips=["10.1.0.9"], ports=[{"name": "p" * 63, "port": 80,
                                             "protocol": "TCP"}])))])
        await parent.report_where(lambda r: r.applied == 3)
        parent.writer.close()  # the parent goes away
        assert await asyncio.wait_for(parent.worker, 10) == 0
        assert free(parent.port)  # its listeners are closed

    with caplog.at_level(logging.DEBUG):
        asyncio.run(main())
    assert "SIGHUP" not in caplog.text
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_worker_that_cannot_follow_its_parent_exits_1(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> int:
        parent = Parent()
        await parent.start()
        await parent.serving()
        parent.send("not a message")
        return await asyncio.wait_for(parent.worker, 10)

    with caplog.at_level(logging.ERROR, logger=app.log.name):
        assert asyncio.run(main()) == 1
    assert "TypeError: unexpected message from the parent: str" in caplog.text


@pytest.mark.parametrize("lameduck", [1, 5])
def test_after_sigterm_a_serving_worker_answers_for_its_lame_duck(lameduck: float) -> None:
    async def main() -> None:
        parent = Parent(lameduck=lameduck)
        await parent.start()
        await parent.serving()
        clock = parent.clock
        await parent.sigterm()
        deadline = clock.now + lameduck
        assert deadline in clock.pending()  # the lame duck, on the clock
        assert await parent.answer() == ["10.1.0.1"]  # still answering
        parent.update([put("web", "10.1.0.3")])
        assert await parent.answer_becomes(["10.1.0.3"])  # and following its parent
        clock.advance(lameduck - 0.001)
        for _ in range(100):
            await asyncio.sleep(0)
        assert not parent.worker.done()  # the last millisecond has not passed
        clock.advance(deadline - clock.now)
        assert await asyncio.wait_for(parent.worker, 10) == 0
        assert lameduck in clock.sleeps and free(parent.port)

    asyncio.run(main())


@pytest.mark.parametrize(("lameduck", "serving", "leaves"), [
    (5, True, True),  # the parent ends the lame duck by going away
    (0, True, False),  # no lame duck
    (5, False, False),  # not serving yet: nothing to drain
])
def test_a_worker_stops_without_waiting_on_the_clock(lameduck: float, serving: bool,
                                                       leaves: bool) -> None:
    async def main() -> None:
        parent = Parent(lameduck=lameduck)
        await parent.start()
        if serving:
            await parent.serving()
        else:
            parent.update([put("web"), SetSynced(True)])
            await parent.report_where(lambda r: r.applied == 1)
        now = parent.clock.now
        await parent.sigterm()
        if leaves:
            assert not parent.worker.done()
            parent.writer.close()
        assert await asyncio.wait_for(parent.worker, 10) == 0
        assert parent.clock.now == now and free(parent.port)
        assert parent.clock.pending() == []  # no wait of its own left behind

    asyncio.run(main())


class Recorded:
    """The worker's memory releases and answer builds, seen at their seam (the names app
    took from sink); the builds still run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, bulk: int) -> None:
        self.released = 0
        self.builds: list[str] = []
        self.built: list[bool] = []
        real = app.build_pending
        monkeypatch.setattr(app, "BULK", bulk)
        monkeypatch.setattr(app, "release_memory", self.release)

        async def build(cache: Cache) -> None:
            task = asyncio.current_task()
            assert isinstance(cache, Cache) and task is not None
            self.builds.append(task.get_name())
            await real(cache)
            gc.unfreeze()  # what the build froze is this test process's
            self.built.append(not cache.pending)

        monkeypatch.setattr(app, "build_pending", build)

    def release(self, *args: Any) -> None:
        assert not args  # a collection first: a worker's release is after any update
        self.released += 1


def test_a_worker_releases_memory_after_bulk_services_and_the_first_sync(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = Recorded(monkeypatch, bulk=3)

    async def main() -> list[tuple[int, list[str]]]:
        parent = Parent()
        await parent.start()
        seen = []
        for ops in ([put("a"), put("b")],  # 2 services, not synced
                    [SetSynced(True)],  # the first sync: the waiting ones are built
                    [put("c"), put("d")],  # 2
                    [put("e"), put("f"), put("g")]):  # 3: BULK
            parent.update(ops)
            await parent.report_where(lambda r: r.applied == parent.seq)
            seen.append((recorded.released, list(recorded.builds)))
        parent.writer.close()
        assert await asyncio.wait_for(parent.worker, 10) == 0
        return seen

    assert asyncio.run(main()) == [(0, []), (1, ["build-pending"]), (1, ["build-pending"]),
                                   (2, ["build-pending"])]
    assert recorded.built == [True]


def test_an_update_while_the_answers_are_built_starts_no_second_build(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = Recorded(monkeypatch, bulk=1_000_000)

    async def main() -> None:
        parent = Parent()
        await parent.start()
        # 100 services wait: several slices of the build (sink.BUILD_SLICE).
        parent.update([put(f"s{i}") for i in range(100)])
        await parent.report_where(lambda r: r.applied == 1)
        # Read together: the second is applied after the first slice was built.
        parent.update([SetSynced(True)])
        parent.update([put("web")])
        await parent.report_where(lambda r: r.applied == 3)
        for _ in range(100):
            if recorded.built:
                break
            await asyncio.sleep(0)
        assert recorded.builds == ["build-pending"] and recorded.built == [True]
        parent.writer.close()
        assert await asyncio.wait_for(parent.worker, 10) == 0

    asyncio.run(main())


@pytest.mark.parametrize("fails", [False, True])
def test_a_worker_process_reads_its_config_then_runs(fails: bool) -> None:
    """worker_process in this thread: the Config from the socketpair, the process's
    logging and collector thresholds, Ctrl-C left to the parent, and the run's exit
    status (0: the parent went away; 1: an unexpected message)."""
    mine, theirs = socket.socketpair()
    config = Config(listen=((LOCAL, free_port()),), log_level="error", log_format="json")
    mine.sendall(workers._frame(config))
    if fails:
        mine.sendall(workers._frame("not a message"))
    mine.shutdown(socket.SHUT_WR)
    root = logging.getLogger()
    saved = (signal.getsignal(signal.SIGINT), gc.get_threshold(), root.handlers[:], root.level)
    try:
        code = app.worker_process(theirs.detach())
        after = (signal.getsignal(signal.SIGINT), gc.get_threshold(), root.level,
                 [type(h.formatter) for h in root.handlers])
    finally:
        signal.signal(signal.SIGINT, saved[0])
        gc.set_threshold(*saved[1])
        root.handlers[:] = saved[2]
        root.setLevel(saved[3])
        mine.close()
    assert code == (1 if fails else 0)
    assert after == (signal.SIG_IGN, (100_000, 50, 100), logging.ERROR, [logs.JSONFormatter])
