"""clusterset_dns_dns_programming_duration_seconds (app.Sink): from an EndpointSlice's
last-change trigger time to the moment its answers are served, for changes made while
the server runs. A trigger time before the server started is a change it could not
have programmed sooner (a slice last changed two days ago, listed at start): not
observed, as kube-proxy drops it. Time is the injected clock's."""

from __future__ import annotations

import asyncio
from ipaddress import ip_address

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import app, workers
from clusterset_dns.zone.cache import Cache, Op, PutImport, PutSlice, SetSynced
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

from .fakeclock import FakeClock

HTTP = (Port("http", "tcp", 80),)
HISTOGRAM = "clusterset_dns_dns_programming_duration_seconds"


def slice_op(name: str, trigger: float, address: str) -> Op:
    return PutSlice(("ns", name), EndpointSlice(
        "ns", name, "db", "east", (Endpoint((ip_address(address),), None),), HTTP,
        trigger_time=trigger))


def observed(metrics: Metrics) -> tuple[float, float]:
    labels = {"service_kind": ServiceType.HEADLESS.value}
    count = metrics.registry.get_sample_value(f"{HISTOGRAM}_count", labels)
    total = metrics.registry.get_sample_value(f"{HISTOGRAM}_sum", labels)
    return count or 0.0, total or 0.0


def test_trigger_times_before_the_start_are_not_observed() -> None:
    async def main() -> None:
        clock = FakeClock()
        metrics = Metrics()
        cache = Cache(ZoneNames("clusterset.local"), 5, clock=clock.time,
                      record_programming=True)
        pool = workers.WorkerPool(Config(), 0, app.WORKER_ENTRY, lambda: [])
        sink = app.Sink(cache, pool, metrics)
        start = clock.time()
        clock.advance(30)  # the first list comes in a while after the start
        sink.apply([PutImport(("ns", "db"), ServiceImport("ns", "db", ServiceType.HEADLESS,
                                                          (), HTTP)),
                    slice_op("two-days-old", start - 172_800, "10.0.0.1"),
                    slice_op("just-before", start - 0.001, "10.0.0.2"),
                    slice_op("at-the-start", start, "10.0.0.3"),
                    SetSynced(True)])
        # Only the change made at the start itself: 30 s from it to the first sync.
        assert observed(metrics) == (1.0, 30.0)
        clock.advance(5)
        sink.apply([slice_op("two-days-old", clock.time() - 2.0, "10.0.0.4")])
        sink.flush()
        assert observed(metrics) == (2.0, 32.0)
        # A change of an old slice that keeps its old trigger time: still not observed.
        clock.advance(5)
        sink.apply([slice_op("just-before", start - 0.001, "10.0.0.5")])
        sink.flush()
        assert observed(metrics) == (2.0, 32.0)
        assert len(cache.slices) == 3

    asyncio.run(main())
