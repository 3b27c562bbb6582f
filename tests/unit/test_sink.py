"""The sink's start-up window (Sink.first_load) and the cache's snapshot for workers:
each owner says what it does, rather than its state being set from outside."""

from __future__ import annotations

import asyncio
import gc
from ipaddress import ip_address

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import sink as sink_module
from clusterset_dns.process import workers
from clusterset_dns.zone.cache import (
    Cache,
    PutImport,
    ReplaceImports,
    ReplaceSlices,
    SetClusterId,
    SetSerial,
    SetSynced,
    SetTopologyZone,
)
from clusterset_dns.zone.model import Port, ServiceImport, ServiceType

from .fakeclock import FakeClock

WEB = ServiceImport("ns", "web", ServiceType.CLUSTER_SET_IP, (ip_address("10.9.0.1"),),
                    (Port("http", "tcp", 80),))


def make_sink() -> tuple[sink_module.Sink, Cache]:
    clock = FakeClock()
    cache = Cache(ZoneNames("clusterset.local"), 5, clock=clock.time)
    pool = workers.WorkerPool(Config(), 0, "clusterset_dns.process.app:worker_process",
                              lambda: [])
    return sink_module.Sink(cache, pool, Metrics()), cache


def test_first_load_turns_the_collector_off_and_back_on() -> None:
    s, _ = make_sink()
    assert gc.isenabled()
    with s.first_load():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), s.first_load():
        raise RuntimeError("start-up failed")
    assert gc.isenabled()  # back on whatever ended the window


@pytest.mark.parametrize("inside", [True, False])
def test_the_first_sync_within_the_window_freezes_without_a_collection(
        inside: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    collects: list[bool] = []
    monkeypatch.setattr(sink_module, "release_memory",
                        lambda collect=True: collects.append(collect))

    async def main() -> None:
        s, _ = make_sink()
        if inside:
            with s.first_load():
                s.apply([PutImport(("ns", "web"), WEB), SetSynced(True)])
        else:
            s.apply([PutImport(("ns", "web"), WEB), SetSynced(True)])
    asyncio.run(main())
    assert collects == [not inside]


def test_snapshot_is_the_whole_state_as_ops() -> None:
    _, cache = make_sink()
    cache.apply([SetClusterId("east"), SetTopologyZone("a"), PutImport(("ns", "web"), WEB),
                 SetSynced(True)])
    assert cache.snapshot() == [SetClusterId("east"), SetTopologyZone("a"),
                                ReplaceImports({("ns", "web"): WEB}), ReplaceSlices({}),
                                SetSynced(True), SetSerial(cache.zone.serial)]
    fresh = Cache(ZoneNames("clusterset.local"), 5, clock=FakeClock().time)
    fresh.apply(cache.snapshot())
    assert fresh.zone.serial == cache.zone.serial and fresh.imports == cache.imports
    assert fresh.builder.cluster_id == "east" and fresh.builder.topology_zone == "a"
    assert sorted(dict(fresh.zone.every_answer())) == sorted(dict(cache.zone.every_answer()))
