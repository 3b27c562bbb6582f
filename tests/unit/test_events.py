"""events.Elector and events.Emitter against a fake API client (the seam the real
kube-apiserver test drives end to end, tests/kube/test_events.py): who takes the
Lease when, what a conflict means, the Emitter's dedup and rate limit (time is the
injected clock's), a new holder after a handover, and the kind and scope an Event
names."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.sources import events
from clusterset_dns.sources.kube import ApiError
from clusterset_dns.sources.locality import property_resource
from clusterset_dns.sources.reflector import Reflector
from clusterset_dns.zone.cache import IMPORT, Cache, PutRejected
from clusterset_dns_testkit.objects import ABOUT_V1BETA1, cluster_property

from .fakeclock import FakeClock

LEASE = "/apis/coordination.k8s.io/v1/namespaces/dns/leases/l"


class FakeApi:
    """One Lease and the Events, with resourceVersion conflicts like the API server's.
    ``listable``: whether the Events may be listed (RBAC); ``posts`` counts every POST
    of an Event, refused or not."""

    def __init__(self, listable: bool = True) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.events: dict[str, dict[str, Any]] = {}
        self.listable = listable
        self.posts = 0
        self.lists: list[dict[str, Any]] = []

    async def get(self, path: str, params: Any = None, timeout: float = 30,
                  sizes: list[int] | None = None) -> Any:
        if path == "/api/v1/events":
            self.lists.append(dict(params))
            if not self.listable:
                raise ApiError(403, "forbidden")
            assert params["fieldSelector"] == "reason=NotServedByDNS,reportingComponent=" \
                "clusterset-dns"
            names = sorted(self.events)
            start = int(params.get("continue", 0))
            end = start + params["limit"]
            return {"metadata": {"continue": str(end) if end < len(names) else ""},
                    "items": [copy.deepcopy(self.events[n]) for n in names[start:end]]}
        assert path == LEASE
        if self.lease is None:
            raise ApiError(404, "not found")
        return copy.deepcopy(self.lease)

    async def send(self, method: str, path: str, body: Any, timeout: float = 10) -> Any:
        if path.endswith("/events"):
            assert method == "POST"
            self.posts += 1
            assert path == f"/api/v1/namespaces/{body['metadata']['namespace']}/events"
            name = body["metadata"]["name"]
            if name in self.events:
                raise ApiError(409, "already exists")
            self.events[name] = body
            return body
        if method == "POST":
            if self.lease is not None:
                raise ApiError(409, "already exists")
        elif str(body["metadata"].get("resourceVersion")) != str(self.version):
            raise ApiError(409, "conflict")
        self.version += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion":
                                           str(self.version)}}
        return self.lease


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_one_holder_then_a_takeover_when_it_stops_renewing() -> None:
    api = FakeApi()
    a, b = (events.Elector(api, "dns", "l", me) for me in ("a", "b"))
    assert run(a.step()) is True  # created it
    assert run(b.step()) is False  # held by a, renewed just now
    assert run(a.step()) is True  # a renews
    assert api.lease is not None and api.lease["spec"]["holderIdentity"] == "a"
    # a stops renewing: once its renewTime is older than the duration, b takes it.
    api.lease["spec"]["renewTime"] = "2000-01-01T00:00:00.000000Z"
    assert run(b.step()) is True
    assert api.lease["spec"]["holderIdentity"] == "b"
    assert api.lease["spec"]["leaseTransitions"] == 1
    assert run(a.step()) is False


def test_a_conflicting_write_means_not_holding() -> None:
    api = FakeApi()
    a = events.Elector(api, "dns", "l", "a")
    assert run(a.step()) is True

    async def racing() -> bool:
        real = api.send

        async def bumped(method: str, path: str, body: Any, timeout: float = 10) -> Any:
            api.version += 1  # another replica wrote the Lease in between
            return await real(method, path, body, timeout)

        api.send = bumped  # type: ignore[method-assign]
        return await a.step()

    assert run(racing()) is False


def test_the_emitter_sends_once_per_rejection_and_only_while_holding() -> None:
    api = FakeApi()
    cache = Cache(ZoneNames("clusterset.local"), 5)
    elector = events.Elector(api, "dns", "l", "a")
    emitter = events.Emitter(api, cache, elector)
    cache.apply([PutRejected(IMPORT, ("prod", "x.y"), ("prod", "x.y"), "bad name",
                             ("multicluster.x-k8s.io/v1beta1", "uid-1")),
                 PutRejected(IMPORT, ("prod", "nouid"), ("prod", "nouid"), "bad", ("", ""))])
    run(emitter.scan())
    assert api.events == {}  # not the holder
    elector.leader = True
    for _ in range(3):
        run(emitter.scan())
    (event,) = api.events.values()
    assert event["involvedObject"] == {"apiVersion": "multicluster.x-k8s.io/v1beta1",
                                       "kind": "ServiceImport", "namespace": "prod",
                                       "name": "x.y", "uid": "uid-1"}
    assert event["message"] == "not served by clusterset-dns: bad name"
    # Another replica (a new holder) sends the same: refused as existing, not repeated.
    other = events.Emitter(api, cache, elector)
    run(other.scan())
    assert len(api.events) == 1 and other.emitted == 0
    # An import served in its last valid form, whose update was rejected, says so.
    from clusterset_dns.sources import convert
    from clusterset_dns.zone.cache import PutImport
    from clusterset_dns_testkit.objects import service_import
    cache.apply([PutImport(("prod", "web"), convert.service_import(
        service_import("web", ips=["10.0.0.1"]))),
        PutRejected(IMPORT, ("prod", "web"), ("prod", "web"), "type 'X'", ("v", "uid-2"))])
    run(emitter.scan())
    (served,) = [e for e in api.events.values() if e["involvedObject"]["name"] == "web"]
    assert served["message"] == ("this version not served by clusterset-dns (the last valid "
                                 "one still is): type 'X'")
    # A new reason is a new Event.
    cache.apply([PutRejected(IMPORT, ("prod", "x.y"), ("prod", "x.y"), "worse",
                             ("multicluster.x-k8s.io/v1beta1", "uid-1"))])
    run(emitter.scan())
    assert len(api.events) == 3


def rejections(start: int, count: int, reason: str = "bad") -> list[PutRejected]:
    return [PutRejected(IMPORT, ("prod", f"o{i}"), ("prod", f"o{i}"), reason,
                        ("multicluster.x-k8s.io/v1beta1", f"uid-{i}"))
            for i in range(start, start + count)]


def holder(api: FakeApi, cache: Cache, clock: FakeClock, me: str) -> events.Emitter:
    """An Emitter whose elector has just taken the Lease (a new term)."""
    elector = events.Elector(api, "dns", "l", me, clock=clock)
    elector.leader, elector.terms = True, 1
    return events.Emitter(api, cache, elector, clock)


def test_the_rate_limit_holds_back_and_catches_up() -> None:
    api, clock = FakeApi(), FakeClock()
    cache = Cache(ZoneNames("clusterset.local"), 5)
    emitter = holder(api, cache, clock, "a")
    cache.apply(rejections(0, events.BURST + 5))
    run(emitter.scan())
    assert len(api.events) == events.BURST
    clock.advance(5 * events.REFILL_SECONDS - 0.001)  # four tokens, nearly five
    run(emitter.scan())
    assert len(api.events) == events.BURST + 4
    clock.advance(0.001)
    run(emitter.scan())
    assert len(api.events) == events.BURST + 5


def previous_holder_sent(api: FakeApi, cache: Cache, old: int) -> None:
    """Holder "a" sends an Event for each of ``old`` rejections (time passes as the
    rate limit needs), then stops: what a new holder finds after a handover."""
    clock = FakeClock()
    emitter = holder(api, cache, clock, "a")
    cache.apply(rejections(0, old))
    while len(api.events) < old:
        run(emitter.scan())
        clock.advance(events.REFILL_SECONDS)
    assert emitter.emitted == old


@pytest.mark.parametrize("listable", [True, False], ids=["seeded-from-a-list", "no-list-right"])
def test_after_a_handover_a_new_rejection_gets_its_event_at_once(
        listable: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """100 rejections sent by the previous holder, then a new one: the new holder sends
    the new one's Event in its first scan, with no time passing (before: the 100 repeats
    went first and each refused one spent a token, so the new one waited 486 s)."""
    api = FakeApi(listable)
    cache = Cache(ZoneNames("clusterset.local"), 5)
    previous_holder_sent(api, cache, 100)
    api.posts, api.lists = 0, []
    monkeypatch.setattr(events, "SEED_PAGE", 40)  # three pages
    clock = FakeClock()
    emitter = holder(api, cache, clock, "b")
    cache.apply(rejections(100, 1, "new"))
    run(emitter.scan())
    assert "prod/o100" in {f"{e['involvedObject']['namespace']}/{e['involvedObject']['name']}"
                           for e in api.events.values()}
    assert emitter.emitted == 1 and len(api.events) == 101
    # The Events that exist are read once, in pages; they are never POSTed again.
    if listable:
        assert [p.get("continue") for p in api.lists] == [None, "40", "80"]
        assert {p["limit"] for p in api.lists} == {40}
    else:
        assert len(api.lists) == 1
    if listable:
        assert api.posts == 1 and emitter.refused == 0
    else:  # refused as existing, costing no token: at most DUPLICATES_PER_SCAN a scan
        assert api.posts == 1 + events.DUPLICATES_PER_SCAN and emitter.refused == 100
    assert emitter.tokens == events.BURST - 1
    for _ in range(3):
        run(emitter.scan())
    assert api.posts == (1 if listable else 101) and len(api.lists) == (3 if listable else 1)


def test_refused_duplicates_cost_no_token_and_new_ones_go_first() -> None:
    """No list right, 100 old rejections and BURST + 1 new ones: the burst goes to the
    new ones (newest first), the last new one needs the next token, exactly
    REFILL_SECONDS later."""
    api = FakeApi(listable=False)
    cache = Cache(ZoneNames("clusterset.local"), 5)
    previous_holder_sent(api, cache, 100)
    clock = FakeClock()
    emitter = holder(api, cache, clock, "b")
    cache.apply(rejections(100, events.BURST + 1, "new"))
    run(emitter.scan())
    assert emitter.emitted == events.BURST
    assert "uid-100" not in {e["involvedObject"]["uid"] for e in api.events.values()}
    clock.advance(events.REFILL_SECONDS - 0.001)
    run(emitter.scan())
    assert emitter.emitted == events.BURST
    clock.advance(0.001)
    run(emitter.scan())
    assert emitter.emitted == events.BURST + 1 and emitter.refused == 0
    # The old ones are tried once a token is there, and refused, which costs none.
    clock.advance(events.REFILL_SECONDS)
    run(emitter.scan())
    assert emitter.refused == 100 and emitter.tokens == 1
    assert len(api.events) == 100 + events.BURST + 1


def test_a_rejected_cluster_property_is_reported_as_one() -> None:
    """The ClusterProperty reflector's rejection names the kind, its apiVersion, and no
    namespace: the Event goes to "default", the only namespace the core Event API
    accepts for a cluster-scoped object (before: an EndpointSlice in default)."""
    reflector = Reflector(None, property_resource(ABOUT_V1BETA1, {}),  # type: ignore[arg-type]
                          lambda ops: None, lambda kind: None, Config(), lambda: None,
                          metrics=Metrics())
    obj = cluster_property("not an id", api_version=ABOUT_V1BETA1)
    obj["metadata"]["uid"] = "uid-p"
    assert reflector._convert(obj) is None
    (op,) = reflector._take_rejections()
    assert isinstance(op, PutRejected)
    assert (op.kind, op.key, op.service) == ("ClusterProperty",
                                             ("", "cluster.clusterset.k8s.io"), None)
    assert op.reference == (ABOUT_V1BETA1, "uid-p")
    del obj["apiVersion"]  # as in a list's items: the resource's version is named
    reflector._convert(obj)
    assert reflector._take_rejections()[0].reference == (ABOUT_V1BETA1, "uid-p")
    api, clock = FakeApi(), FakeClock()
    cache = Cache(ZoneNames("clusterset.local"), 5)
    cache.apply([op])
    emitter = holder(api, cache, clock, "a")
    run(emitter.scan())
    (event,) = api.events.values()
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {"apiVersion": ABOUT_V1BETA1, "kind": "ClusterProperty",
                                       "name": "cluster.clusterset.k8s.io", "uid": "uid-p"}
    assert cache.rejections_of(("default", "cluster.clusterset.k8s.io")) == {}
