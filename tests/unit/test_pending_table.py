"""zone/pending.py at its edges, one table each: which waiting services a question
builds (``build_for``: the service a name is under, one service for a name above
services), how many a slice builds (``build_some``), and what an update builds before it
changes the model (``touched``: the journal's "before" must be the real answers), the
journal written as zone-file text. Quick, unlike test_pending's generated universes.
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import ip_address
from typing import Any

import pytest

from clusterset_dns.base.names import ZoneNames, to_wire
from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.cache import (
    Cache,
    Change,
    Op,
    PutImport,
    PutSlice,
    ReplaceImports,
    SetClusterId,
    SetSerial,
    SetSynced,
)
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

from .helpers import ZONE

HTTP = (Port("http", "tcp", 80),)
NOW = 1_700_000_000.0  # one serial for both caches of a pair


def _import(ns: str, name: str, ip: str | None = None) -> PutImport:
    kind = ServiceType.HEADLESS if ip is None else ServiceType.CLUSTER_SET_IP
    return PutImport((ns, name), ServiceImport(ns, name, kind, () if ip is None
                                               else (ip_address(ip),), HTTP))


def _slice(name: str, service: str, *ips: str) -> PutSlice:
    return PutSlice(("ns", name), EndpointSlice("ns", name, service, "east", tuple(
        Endpoint((ip_address(ip),), f"pod-{i}") for i, ip in enumerate(ips)), HTTP))


# Listed in this order (one apply each: a set of keys has no order), then the sync.
FIRST: list[Op] = [_import("ns", "web", "10.9.0.1"), _import("ns", "db"),
                   _import("other", "x", "10.9.0.3"), _import("ns2", "y", "10.9.0.4"),
                   _slice("db-1", "db", "10.1.0.1", "10.1.0.2", "10.1.0.3")]
LISTED = [("ns", "web"), ("ns", "db"), ("other", "x"), ("ns2", "y")]


def _cache(defer: bool = True, on_change: Any = None) -> Cache:
    cache = Cache(ZoneNames(ZONE), 5, clock=lambda: NOW, on_change=on_change,
                  **({"defer": True} if defer else {"lazy": False}))
    for op in FIRST:
        cache.apply([op])
    cache.apply([SetSynced(True)])
    return cache


def _wire(name: str) -> bytes:
    return to_wire(tuple(label.encode() for label in name.split(".") if label))


def test_the_first_list_waits_in_the_order_it_was_listed() -> None:
    cache = _cache()
    assert list(cache.pending.services) == LISTED
    assert cache.zone.unbuilt is cache.pending and len(cache.pending) == 4
    assert ("ns", "db") in cache.pending and ("ns", "nope") not in cache.pending


@pytest.mark.parametrize(("name", "built"), [
    # a name under a service builds that service, whatever its depth
    ("db.ns.svc.clusterset.local", [("ns", "db")]),
    ("pod-1.east.db.ns.svc.clusterset.local", [("ns", "db")]),
    ("_http._tcp.db.ns.svc.clusterset.local", [("ns", "db")]),
    ("a.b.c.web.ns.svc.clusterset.local", [("ns", "web")]),
    ("y.ns2.svc.clusterset.local", [("ns2", "y")]),
    # a namespace's name: its first listed service, enough for the name to exist
    ("ns.svc.clusterset.local", [("ns", "web")]),
    ("other.svc.clusterset.local", [("other", "x")]),
    ("ns2.svc.clusterset.local", [("ns2", "y")]),
    # svc.<zone> exists with the apex: nothing to build for it
    ("svc.clusterset.local", []),
    # names under no waiting service build nothing
    ("clusterset.local", []),
    ("local", []),
    ("nope.svc.clusterset.local", []),
    ("x.ns.svc.clusterset.local", []),  # under a namespace, not a service of it
    ("s.svc.clusterset.local", []),  # a namespace's name less its first letter
    ("db.ns.svc.clusterset", []),  # the service's name less the last label
    ("db.ns.svc.clusterset.local.x", []),
    ("ns.svc.clusterset.local.x", []),
    ("ns.abc.clusterset.local", []),  # as long as a namespace's name: not one
])
def test_a_question_builds_what_its_name_is_under(name: str,
                                                  built: list[tuple[str, str]]) -> None:
    cache = _cache()
    cache.pending.build_for(_wire(name))
    assert list(cache.pending.services) == [key for key in LISTED if key not in built]


@pytest.mark.parametrize("name", [b"", b"\x00", b"\x3fzz", b"\x02ns", b"\x02ns\x03svc",
                                  b"\xffsvc\x0aclusterset\x05local\x00",
                                  b"\x02n\xff\x03svc\x0aclusterset\x05local\x00"])
def test_any_bytes_are_a_name_that_builds_nothing(name: bytes) -> None:
    cache = _cache()
    cache.pending.build_for(name)
    assert list(cache.pending.services) == LISTED


def test_a_namespace_whose_services_were_deleted_while_waiting_builds_nothing() -> None:
    cache = _cache()
    cache.apply([PutImport(("ns2", "y"), None)])  # ns2's only service, still waiting
    assert list(cache.pending.services) == LISTED[:3]
    assert cache.zone.lookup(_wire("ns2.svc.clusterset.local")) == 0  # MISSING, no error
    assert list(cache.pending.services) == LISTED[:3]
    # A namespace with one of two services left: that one is still found by its name.
    cache.apply([PutImport(("ns", "web"), None)])
    cache.pending.build_for(_wire("ns.svc.clusterset.local"))
    assert list(cache.pending.services) == [("other", "x")]


def test_the_list_is_empty_once_the_last_waiting_service_is_built_or_gone() -> None:
    cache = _cache()
    for key in LISTED[:3]:
        assert cache.pending.discard(key)
        assert cache.zone.unbuilt is cache.pending
    assert not cache.pending.discard(("ns", "web"))  # not on it any more
    cache.pending.build(("ns2", "y"))
    assert not cache.pending and cache.zone.unbuilt is None
    cache.pending.add(("ns", "web"))
    cache.pending.add(("ns", "web"))  # once only
    assert list(cache.pending.services) == [("ns", "web")] and cache.zone.unbuilt is not None


@pytest.mark.parametrize(("budget", "costs", "built"), [
    (0, [1, 1, 1, 1], 0),
    (1, [5, 1, 1, 1], 1),  # one at least, whatever it costs
    (1, [1, 1, 1, 1], 1),
    (2, [1, 1, 1, 1], 2),  # the cost that reaches the budget is the last one
    (3, [2, 2, 2, 2], 2),  # one more begun below the budget, even if it passes it
    (4, [2, 2, 2, 2], 2),
    (5, [2, 2, 2, 2], 3),
    (6, [1, 2, 3, 4], 3),
    (7, [1, 2, 3, 4], 4),
    (100, [1, 1, 1, 1], 4),
])
def test_a_slice_builds_until_its_costs_reach_the_budget(budget: int, costs: list[int],
                                                         built: int) -> None:
    cache = _cache()
    priced = dict(zip(LISTED, costs, strict=True))
    asked: list[tuple[str, str]] = []

    def cost(key: tuple[str, str]) -> int:
        asked.append(key)
        return priced[key]
    assert cache.pending.build_some(budget, cost) == len(LISTED) - built
    assert asked == LISTED[:built]
    assert list(cache.pending.services) == LISTED[built:]


def test_a_build_that_raises_is_left_for_the_next_update(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    cache = _cache()
    failed: list[tuple[str, str]] = []

    def rebuild(key: tuple[str, str]) -> None:
        failed.append(key)
        raise RuntimeError("bug")
    cache.pending.rebuild = rebuild
    cache.pending.build(("ns", "db"))
    assert failed == [("ns", "db")] and cache.pending.failed == {("ns", "db")}
    assert "building the answers of ns/db" in caplog.text
    assert list(cache.pending.services) == [k for k in LISTED if k != ("ns", "db")]


# -- what an update builds before it changes the model -------------------------------------

def _journal(into: list[list[str]]) -> Callable[[int, int, list[Change] | None], None]:
    """Each update's changes as zone-file lines, ``-`` a record gone, ``+`` one come
    (the SOA, whose serial moves every time, left out)."""
    def note(_old: int, _new: int, changes: list[Change] | None) -> None:
        lines: set[str] = set()
        for key, before, after in changes or ():
            if key[-4:-2] == wire.SOA.to_bytes(2, "big"):
                continue
            was = {rrs.record_text(r) for r in rrs.answer_records(key, before)} \
                if before is not None else set()
            now = {rrs.record_text(r) for r in rrs.answer_records(key, after)} \
                if after is not None else set()
            lines |= {f"- {line}" for line in was - now} | {f"+ {line}" for line in now - was}
        into.append(sorted(lines))
    return note


S = "ns.svc.clusterset.local."
WEB_MOVED = [f"+ web.{S} 5 IN A 10.9.0.9", f"- web.{S} 5 IN A 10.9.0.1"]
POD_MOVED = [f"+ pod-1.east.db.{S} 5 IN A 10.1.0.9", f"+ db.{S} 5 IN A 10.1.0.9",
             f"- pod-1.east.db.{S} 5 IN A 10.1.0.2", f"- db.{S} 5 IN A 10.1.0.2"]


@pytest.mark.parametrize(("ops", "expected"), [
    ([_import("ns", "web", "10.9.0.9")], WEB_MOVED),
    ([_slice("db-1", "db", "10.1.0.1", "10.1.0.9", "10.1.0.3")], POD_MOVED),
    # ops that touch no service are passed over, not the end of the list
    ([SetSerial(1_000), _import("ns", "web", "10.9.0.9")], WEB_MOVED),
    ([SetSynced(True), _import("ns", "web", "10.9.0.9")], WEB_MOVED),
    # a slice's old service and its new one
    ([_slice("db-1", "web", "10.1.0.1")], None),
    ([PutSlice(("ns", "db-1"), None)], None),
    # an op that may touch any service builds them all
    ([ReplaceImports({})], None),
    ([SetClusterId("east"), _import("ns", "web", "10.9.0.9")], WEB_MOVED),
    ([_import("ns", "web", "10.9.0.1"), _import("other", "x", "10.9.0.8")], None),
])
def test_an_update_journals_what_the_built_zone_does(ops: list[Op],
                                                    expected: list[str] | None) -> None:
    deferred_log: list[list[str]] = []
    eager_log: list[list[str]] = []
    deferred = _cache(on_change=_journal(deferred_log))
    eager = _cache(defer=False, on_change=_journal(eager_log))
    assert list(deferred.pending.services) == LISTED and not eager.pending
    del deferred_log[:], eager_log[:]
    deferred.apply(ops)
    eager.apply(ops)
    assert deferred_log == eager_log
    if expected is not None:
        assert deferred_log == [sorted(expected)]
    else:
        assert deferred_log[0]  # something changed


def test_an_update_builds_nothing_first_without_a_journal() -> None:
    cache = _cache()
    cache.apply([_import("ns", "web", "10.9.0.9")])
    assert list(cache.pending.services) == LISTED[1:]
    cache.apply([ReplaceImports({})])
    assert not cache.pending
