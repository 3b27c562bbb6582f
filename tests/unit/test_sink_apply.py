"""What Sink._apply hands on (process/sink.py): the workers get the ops and the serial
with the time the update took (on the injected stopwatch), NOTIFY only when the serial
moved, the rejected counted by kind, the programming delay observed as it was (under a
second too), the sync announced once, memory released from exactly BULK services; and
release_memory's calls into the collector and libc. Written for the survivors of
``scripts/mutate clusterset_dns/process/sink.py``."""

from __future__ import annotations

import asyncio
import ctypes
import gc
from ipaddress import ip_address
from typing import Any

import pytest

from clusterset_dns.base.metrics import Metrics
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import sink as sink_module
from clusterset_dns.zone.cache import Cache, Op, PutImport, SetSerial, SetSynced
from clusterset_dns.zone.model import Port, ServiceImport, ServiceType

from .fakeclock import FakeClock


def service(name: str) -> ServiceImport:
    return ServiceImport("ns", name, ServiceType.CLUSTER_SET_IP, (ip_address("10.9.0.1"),),
                         (Port("http", "tcp", 80),))


class Pool:
    def __init__(self) -> None:
        self.sent: list[tuple[list[Op], float]] = []

    def send(self, ops: list[Op], seconds: float = 0.0) -> None:
        self.sent.append((ops, seconds))


class Recorder:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.released: list[bool] = []
        monkeypatch.setattr(sink_module, "release_memory",
                            lambda collect=True: self.released.append(collect))
        # the stopwatch of an update: 0.5 s between its two readings
        monkeypatch.setattr(sink_module, "SYSTEM", FakeClock(tick=0.5))
        self.clock = FakeClock()
        self.cache = Cache(ZoneNames("clusterset.local"), 5, clock=self.clock.time)
        self.pool = Pool()
        self.metrics = Metrics()
        self.serials: list[int] = []
        self.synced: list[int] = []
        self.sink = sink_module.Sink(self.cache, self.pool, self.metrics,  # type: ignore[arg-type]
                                     on_serial=lambda: self.serials.append(
                                         self.cache.zone.serial),
                                     on_synced=lambda: self.synced.append(1))

    def sample(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)


def run(scenario: Any) -> None:
    asyncio.run(scenario())


def test_the_workers_get_the_ops_the_serial_and_the_time(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    r = Recorder(monkeypatch)

    async def scenario() -> None:
        ops: list[Op] = [PutImport(("ns", "web"), service("web")), SetSynced(True)]
        r.sink.apply(ops)
        assert r.pool.sent == [([*ops, SetSerial(r.cache.zone.serial)], 0.5)]
        assert r.sample("clusterset_dns_update_seconds_sum") == 0.5
        assert r.serials == [r.cache.zone.serial] and r.synced == [1]
        # a second sync changes nothing: no NOTIFY, no second announcement
        r.clock.advance(5)
        r.sink.apply([SetSynced(True)])
        assert len(r.pool.sent) == 2 and r.pool.sent[1][0][-1] == SetSerial(r.serials[0])
        assert len(r.serials) == 1 and r.synced == [1]
    run(scenario)


def test_nothing_is_announced_before_the_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    r = Recorder(monkeypatch)

    async def scenario() -> None:
        r.sink.apply([PutImport(("ns", "web"), service("web"))])
        assert r.synced == [] and r.released == [] and not r.sink.synced.is_set()
        r.clock.advance(5)
        r.sink.apply([SetSynced(True)])
        assert r.synced == [1] and r.released == [True] and r.sink.synced.is_set()
    run(scenario)


@pytest.mark.parametrize(("count", "released"), [(1, []), (2, [True]), (3, [True])])
def test_memory_is_released_from_bulk_services(monkeypatch: pytest.MonkeyPatch, count: int,
                                               released: list[bool]) -> None:
    monkeypatch.setattr(sink_module, "BULK", 2)
    r = Recorder(monkeypatch)

    async def scenario() -> None:
        r.sink.apply([SetSynced(True)])
        r.released.clear()
        r.clock.advance(5)
        r.sink.apply([PutImport(("ns", f"s{i}"), service(f"s{i}")) for i in range(count)])
        assert r.released == released
    run(scenario)


def test_a_rejected_object_is_counted_by_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    r = Recorder(monkeypatch)

    async def scenario() -> None:
        long = "x" * 64  # one character over a label
        r.sink.apply([PutImport(("ns", long), service(long)), SetSynced(True)])
        assert r.sample("clusterset_dns_invalid_objects_total",
                        kind="ServiceImport") == 1
    run(scenario)


def test_the_programming_delay_under_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    r = Recorder(monkeypatch)

    async def scenario() -> None:
        r.sink.apply([SetSynced(True)])
        r.clock.advance(5)
        now = r.clock.time()
        r.cache.programmed.append(("Headless", now - 0.25))
        r.cache.programmed.append(("ClusterSetIP", now + 3))  # a skewed clock: 0, not less
        r.sink.apply([PutImport(("ns", "web"), service("web"))])
        assert r.sample("clusterset_dns_dns_programming_duration_seconds_sum",
                        service_kind="Headless") == 0.25
        assert r.sample("clusterset_dns_dns_programming_duration_seconds_sum",
                        service_kind="ClusterSetIP") == 0.0
        assert r.cache.programmed == []
    run(scenario)


class Libc:
    def __init__(self, calls: list[Any], trim: bool = True) -> None:
        self.calls = calls
        if trim:
            self.malloc_trim = lambda pad: calls.append(("malloc_trim", pad))


@pytest.mark.parametrize("collect", [True, False])
def test_release_memory(monkeypatch: pytest.MonkeyPatch, collect: bool) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(gc, "collect", lambda: calls.append("collect"))
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(ctypes, "CDLL", lambda name: calls.append(name) or Libc(calls))
    sink_module.release_memory(collect)
    assert calls == ["collect"] * collect + ["freeze", "libc.so.6", ("malloc_trim", 0)]
    calls.clear()
    sink_module.release_memory()  # a full collection unless told otherwise
    assert calls[0] == "collect"


@pytest.mark.parametrize("missing", [OSError("no libc.so.6"), AttributeError("malloc_trim")])
def test_release_memory_without_glibc(monkeypatch: pytest.MonkeyPatch,
                                      missing: Exception) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(gc, "collect", lambda: calls.append("collect"))
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))

    def cdll(name: str) -> Libc:
        if isinstance(missing, OSError):
            raise missing
        return Libc(calls, trim=False)

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    sink_module.release_memory()  # nothing raised: nothing to trim
    assert calls == ["collect", "freeze"]
