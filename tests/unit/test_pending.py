"""Answers built after the sync (zone/pending.py, ``Cache(defer=True)``): a first list
puts its services on a list instead of building them; the zone is synced once the
model is whole; a question about a name still waiting builds its service first and
gets exactly the bytes the prebuilt path gives; the rest are built in bounded slices
(process/sink.py ``build_pending``), with the event loop's turns in between.

Two caches take the same updates: one defers (the server's way), one encodes every
answer at update time (``Cache(lazy=False)``, test_lazy's reference). Every name, its
siblings, children and made-up names, in every type, lower and mixed case, with and
without EDNS, over UDP and TCP, asked in a random order while the rest still waits,
gets the same bytes from both; so do the zone's records (dump, AXFR), and the
journal (IXFR) of updates made while services still wait.
"""

from __future__ import annotations

import asyncio
import gc
import random
from ipaddress import ip_address
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterset_dns.base.config import Config
from clusterset_dns.base.metrics import Metrics
from clusterset_dns.base.names import ZoneNames, to_wire
from clusterset_dns.process import collector, workers
from clusterset_dns.process import sink as sink_module
from clusterset_dns.serving.handler import Handler
from clusterset_dns.transfers import zonedata
from clusterset_dns.zone import wire
from clusterset_dns.zone.cache import (
    Cache,
    Change,
    Op,
    PutImport,
    PutSlice,
    ReplaceImports,
    SetSynced,
)
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

from .fakeclock import FakeClock
from .helpers import DEFAULT_UDP_CAP, ZONE, clock_at
from .test_lazy import SETTINGS, TYPES, _mixed, _names, _query, _same, headless_updates
from .test_properties import OBJECTS, to_op

Log = list[set[tuple[bytes, bytes | None, bytes | None]]]


def _journal(into: Log) -> Any:
    def note(_old: int, _new: int, changes: list[Change] | None) -> None:
        into.append({(key, None if before is None else before.body,
                      None if after is None else after.body)
                     for key, before, after in changes or ()})
    return note


def _pair(journal: bool = True) -> tuple[Cache, Cache, Log, Log]:
    def clock() -> float:
        return 1_700_000_000.0  # one serial for both

    deferred_log: Log = []
    eager_log: Log = []
    deferred = Cache(ZoneNames(ZONE), 5, clock=clock, defer=True,
                     on_change=_journal(deferred_log) if journal else None)
    eager = Cache(ZoneNames(ZONE), 5, clock=clock, lazy=False,
                  on_change=_journal(eager_log) if journal else None)
    return deferred, eager, deferred_log, eager_log


def _ask_all(deferred: Cache, eager: Cache, rnd: random.Random) -> None:
    """Every name around the zone, in every form, in a random order, while what was
    not asked yet still waits."""
    hd, he = Handler(deferred.zone, DEFAULT_UDP_CAP), Handler(eager.zone, DEFAULT_UDP_CAP)
    clock_at(hd, 0.0)
    clock_at(he, 0.0)
    questions = [(asked, qtype, edns, tcp) for name in sorted(_names(eager))
                 for asked in {name, _mixed(name)} for qtype in TYPES
                 for edns in (False, True) for tcp in (False, True)]
    rnd.shuffle(questions)
    for asked, qtype, edns, tcp in questions:
        q = _query(asked, qtype, edns)
        for _ in range(2):  # the first time, then what was remembered of it
            assert hd.handle(q, tcp) == he.handle(q, tcp), (asked, qtype, edns, tcp)


def _first_list(ops: list[Op], *caches: Cache) -> None:
    """A first list as the watch applies it: page by page, then the sync alone."""
    for cache in caches:
        for op in ops:
            cache.apply([op])
        cache.apply([SetSynced(True)])


@pytest.mark.timeout(300)
@SETTINGS
@given(st.lists(OBJECTS, max_size=10), st.randoms(use_true_random=False))
def test_a_name_still_waiting_answers_what_the_built_one_does(
        objects: list[dict[str, Any]], rnd: random.Random) -> None:
    """The property suite's universe: colliding names, limits, junk."""
    ops = [op for op in map(to_op, objects) if op is not None]
    deferred, eager, _, _ = _pair()
    _first_list(ops, deferred, eager)
    assert deferred.zone.synced
    assert set(deferred.pending.services) == set(deferred.imports) - set(deferred._built)
    _ask_all(deferred, eager, rnd)
    _same(deferred, eager)  # what was never asked is built by the zone's readers
    assert not deferred.pending and deferred.zone.unbuilt is None


@pytest.mark.timeout(300)
@SETTINGS
@given(headless_updates(), st.integers(0, 3), st.booleans())
def test_updates_while_services_wait_journal_what_the_built_zone_does(
        steps: list[list[Op]], built: int, journal: bool) -> None:
    """Updates after the sync, some services still waiting (``built`` of them built
    in the background first): the journal gets the same changes, answers the same."""
    deferred, eager, deferred_log, eager_log = _pair(journal)
    first, *later = steps
    _first_list(first[:-1], deferred, eager)
    deferred.pending.build_some(built, lambda _: 1)
    for ops in later:
        deferred.apply(ops)
        eager.apply(ops)
    assert deferred_log == eager_log
    _same(deferred, eager)


def _web(ns: str = "ns", name: str = "web", ip: str = "10.9.0.1") -> PutImport:
    return PutImport((ns, name), ServiceImport(ns, name, ServiceType.CLUSTER_SET_IP,
                                               (ip_address(ip),), (Port("http", "tcp", 80),)))


def _headless(ns: str, name: str, count: int) -> list[Op]:
    imp = ServiceImport(ns, name, ServiceType.HEADLESS, (), (Port("http", "tcp", 80),))
    piece = EndpointSlice(ns, f"{name}-1", name, "east", tuple(
        Endpoint((ip_address(f"10.1.0.{i + 1}"),), f"pod-{i}") for i in range(count)),
        (Port("http", "tcp", 80),))
    return [PutImport((ns, name), imp), PutSlice((ns, f"{name}-1"), piece)]


def _key(name: str, qtype: int = wire.A) -> bytes:
    return to_wire(tuple(label.encode() for label in name.split("."))) + qtype.to_bytes(2) \
        + b"\x00\x01"


def test_a_first_list_builds_nothing_and_the_sync_waits_for_no_answer() -> None:
    cache = Cache(ZoneNames(ZONE), 5, defer=True)
    apex, names = set(cache.zone.answers), dict(cache.zone.names)
    cache.apply([_web(), *_headless("ns", "db", 3)])
    assert (set(cache.zone.answers), cache.zone.names) == (apex, names)  # the model only
    assert list(cache.pending.services) in ([("ns", "web"), ("ns", "db")],
                                            [("ns", "db"), ("ns", "web")])
    cache.apply([SetSynced(True)])
    assert cache.zone.synced and len(cache.pending) == 2
    assert cache.zone.unbuilt is cache.pending
    # After the sync, an update builds what it touches at once, as before.
    cache.apply([_web("ns", "api", "10.9.0.2")])
    assert _key("api.ns.svc.clusterset.local") in cache.zone.answers
    assert len(cache.pending) == 2


def test_a_question_builds_only_the_service_it_is_under() -> None:
    cache = Cache(ZoneNames(ZONE), 5, defer=True)
    cache.apply([_web(), *_headless("ns", "db", 3), _web("other", "x", "10.9.0.3"),
                 SetSynced(True)])
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    key = _key("pod-1.east.db.ns.svc.clusterset.local")
    assert handler.handle(b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + key, False)
    assert set(cache.pending.services) == {("ns", "web"), ("other", "x")}
    # A name above services: one of its namespace's, enough for it to exist.
    assert cache.zone.lookup(to_wire((b"other", b"svc", b"clusterset", b"local"))) == 1
    assert set(cache.pending.services) == {("ns", "web")}
    # A name outside every service builds nothing.
    assert cache.zone.lookup(to_wire((b"nope", b"clusterset", b"local"))) == 0
    assert set(cache.pending.services) == {("ns", "web")}
    assert cache.zone.lookup(to_wire((b"svc", b"clusterset", b"local"))) == 1
    assert set(cache.pending.services) == {("ns", "web")}  # it existed already
    zonedata.take(cache.zone)  # a transfer's snapshot: everything
    assert not cache.pending and cache.zone.unbuilt is None


def test_slices_are_bounded_by_their_cost_and_keep_the_order() -> None:
    cache = Cache(ZoneNames(ZONE), 5, defer=True)
    cache.apply([*(_web("ns", f"s{i}", f"10.9.0.{i}") for i in range(1, 6)), SetSynced(True)])
    costs: list[tuple[str, str]] = []

    def cost(key: tuple[str, str]) -> int:
        costs.append(key)
        return 2
    order = list(cache.pending.services)
    assert sorted(order) == [("ns", f"s{i}") for i in range(1, 6)]
    assert cache.pending.build_some(4, cost) == 3  # 2 + 2 reaches 4: two built
    assert costs == order[:2] and list(cache.pending.services) == order[2:]
    assert cache.pending.build_some(1, cost) == 2  # at least one, whatever it costs
    assert cache.pending.build_some(100, cost) == 0
    assert costs == order


def test_a_service_whose_build_raises_is_rebuilt_by_the_next_update(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    cache = Cache(ZoneNames(ZONE), 5, defer=True)
    cache.apply([_web(), SetSynced(True)])
    real = cache.builder.service
    monkeypatch.setattr(cache.builder, "service", lambda *a: 1 / 0)
    cache.pending.build_all()
    assert not cache.pending and "building the answers of ns/web" in caplog.text
    monkeypatch.setattr(cache.builder, "service", real)
    cache.apply([_web("ns", "api", "10.9.0.2")])
    assert _key("web.ns.svc.clusterset.local") in cache.zone.answers


def test_the_cost_of_a_service_is_its_endpoints_and_a_constant() -> None:
    cache = Cache(ZoneNames(ZONE), 5, defer=True)
    cache.apply([_web(), *_headless("ns", "db", 7)])
    cost = sink_module.slice_cost(cache)
    assert cost(("ns", "web")) == sink_module.SERVICE_COST
    assert cost(("ns", "db")) == sink_module.SERVICE_COST + 7


def test_the_background_build_yields_between_slices_with_the_collector_off() -> None:
    cache = Cache(ZoneNames(ZONE), 5, defer=True, clock=FakeClock().time)
    cache.apply([*(_web("ns", f"s{i}", f"10.9.0.{i}") for i in range(1, 7)), SetSynced(True)])
    seen: list[tuple[int, bool]] = []
    real = cache.pending.rebuild

    def rebuild(key: tuple[str, str]) -> None:
        seen.append((len(cache.pending), gc.isenabled()))
        real(key)
    cache.pending.rebuild = rebuild
    turns: list[int] = []

    async def other() -> None:
        for _ in range(10):
            turns.append(len(cache.pending))
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(sink_module.build_pending(cache, 2 * sink_module.SERVICE_COST),
                             other())
    asyncio.run(main())
    assert gc.isenabled()
    assert [enabled for _, enabled in seen] == [False] * 6
    assert turns[:3] == [4, 2, 0]  # two services a slice, a turn of the loop after each
    assert not cache.pending


def test_the_sink_starts_the_background_build_at_the_first_sync() -> None:
    async def main() -> None:
        cache = Cache(ZoneNames(ZONE), 5, defer=True, clock=FakeClock().time)
        pool = workers.WorkerPool(Config(), 0, "clusterset_dns.process.app:worker_process",
                                  lambda: [])
        ticks = iter(range(0, 10**6, 1000))  # every reading long after the last one
        largest = collector.Largest(cache, clock=lambda: float(next(ticks)))
        # on_synced reads the answers (the largest RRset): called once they are built.
        synced: list[tuple[int, int]] = []
        sink = sink_module.Sink(cache, pool, Metrics(),
                                on_synced=lambda: synced.append(largest.get()[:1]))
        with sink.first_load():
            sink.apply([_web(), *_headless("ns", "db", 3)])
            assert sink.building is None
            sink.apply([SetSynced(True)])
        assert sink.synced.is_set() and sink.building is not None and cache.pending
        assert largest.get()[0] == 1 and not synced  # the apex SOA only: nothing built yet
        await sink.building
        assert not cache.pending
        assert synced == [(3,)]
        # Read again though the serial did not move: the build changed the answers.
        assert largest.get()[0] == 3
    asyncio.run(main())


def test_without_defer_the_cache_builds_every_update_at_once() -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    cache.apply([_web(), *_headless("ns", "db", 3)])
    assert not cache.pending and _key("web.ns.svc.clusterset.local") in cache.zone.answers


def test_an_import_deleted_while_it_waits_is_gone_from_the_list() -> None:
    deferred, eager, _, _ = _pair(journal=False)
    for cache in (deferred, eager):
        cache.apply([_web(), ReplaceImports({}), _web("ns", "api", "10.9.0.2")])
        cache.apply([SetSynced(True)])
    assert set(deferred.pending.services) == {("ns", "api")}
    _same(deferred, eager)
