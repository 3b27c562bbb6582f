"""events.Elector and events.Emitter against a fake API client (the seam the real
kube-apiserver test drives end to end, tests/kube/test_events.py): who takes the
Lease when, what a conflict means, and the Emitter's dedup and rate limit."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from clusterset_dns.sources import events
from clusterset_dns.sources.kube import ApiError
from clusterset_dns.zone.cache import IMPORT, Cache, PutRejected
from clusterset_dns.zone.names import ZoneNames

LEASE = "/apis/coordination.k8s.io/v1/namespaces/dns/leases/l"


class FakeApi:
    """One Lease and the Events, with resourceVersion conflicts like the API server's."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.events: dict[str, dict[str, Any]] = {}

    async def get(self, path: str, params: Any = None, timeout: float = 30,
                  sizes: list[int] | None = None) -> Any:
        assert path == LEASE
        if self.lease is None:
            raise ApiError(404, "not found")
        return copy.deepcopy(self.lease)

    async def send(self, method: str, path: str, body: Any, timeout: float = 10) -> Any:
        if path.endswith("/events"):
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


def test_one_holder_then_a_takeover_when_it_stops_renewing(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
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


def test_the_rate_limit_holds_back_and_catches_up(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi()
    cache = Cache(ZoneNames("clusterset.local"), 5)
    elector = events.Elector(api, "dns", "l", "a")
    elector.leader = True
    emitter = events.Emitter(api, cache, elector)
    cache.apply([PutRejected(IMPORT, ("prod", f"o{i}"), ("prod", f"o{i}"), "bad",
                             ("v", f"uid-{i}")) for i in range(events.BURST + 5)])
    clock = [1000.0]
    monkeypatch.setattr(events.time, "monotonic", lambda: clock[0])
    emitter._refilled = clock[0]
    run(emitter.scan())
    assert len(api.events) == events.BURST
    clock[0] += 5 * events.REFILL_SECONDS
    run(emitter.scan())
    assert len(api.events) == events.BURST + 5
