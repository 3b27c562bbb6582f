"""zone/cache.py's bookkeeping at its edges, table by table: what one update reports
(services rebuilt, objects rejected), the serial an update ends at (forced, wrapped,
held), the state a new worker starts from (snapshot), and what the cache keeps per
service for the metrics and explain (states, changed_at, programmed, unknown_traffic,
counts); the zone itself as zone-file text (process/dump.py's lines).
"""

from __future__ import annotations

import logging
from ipaddress import ip_address

import pytest

from clusterset_dns.base.names import ZoneNames, to_wire
from clusterset_dns.process.dump import zone_lines
from clusterset_dns.zone import delta, rrs, serials
from clusterset_dns.zone.cache import (
    IMPORT,
    NO_ENDPOINT,
    REJECTED,
    SERVED,
    SLICE,
    Cache,
    Change,
    Op,
    PutImport,
    PutRejected,
    PutSlice,
    RebuildError,
    Rejection,
    ReplaceImports,
    ReplaceRejected,
    ReplaceSlices,
    SetClusterId,
    SetSerial,
    SetSynced,
    SetTopologyZone,
)
from clusterset_dns.zone.model import (
    Endpoint,
    EndpointSlice,
    Port,
    Prefer,
    ServiceImport,
    ServiceType,
)

from .helpers import ZONE

HTTP = (Port("http", "tcp", 80),)
NOW = 1_700_000_000.0
S = "svc.clusterset.local."


def _ip_import(name: str, ip: str, ns: str = "ns", version: str = "") -> PutImport:
    return PutImport((ns, name), ServiceImport(ns, name, ServiceType.CLUSTER_SET_IP,
                                               (ip_address(ip),), HTTP,
                                               resource_version=version))


def _headless(name: str, prefer: Prefer = Prefer.NOTHING, traffic: str | None = None
              ) -> PutImport:
    return PutImport(("ns", name), ServiceImport("ns", name, ServiceType.HEADLESS, (), HTTP,
                                                 prefer=prefer, unknown_traffic=traffic))


def _slice(name: str, service: str, *ips: str, trigger: float | None = None,
           version: str = "") -> PutSlice:
    return PutSlice(("ns", name), EndpointSlice(
        "ns", name, service, "east",
        tuple(Endpoint((ip_address(ip),), f"h{i}") for i, ip in enumerate(ips)), HTTP,
        trigger_time=trigger, resource_version=version))


def _cache(**kwargs: object) -> Cache:
    return Cache(ZoneNames(ZONE), 5, clock=lambda: NOW, **kwargs)  # type: ignore[arg-type]


WEB = _ip_import("web", "10.9.0.1")
LONG = _ip_import("y" * 64, "10.9.0.6")  # a service name that is no label
LONG_SLICE = _slice("x-1", "x" * 64, "10.1.0.3")
BASE: list[Op] = [_ip_import("web", "10.9.0.1"), _headless("db"),
                  _slice("db-1", "db", "10.1.0.1", "10.1.0.2"), SetSynced(True)]


@pytest.mark.parametrize(("ops", "rebuilt", "rejected"), [
    ([], 0, 0),
    ([_ip_import("web", "10.9.0.1")], 0, 0),  # the same import again
    ([_ip_import("web", "10.9.0.1", version="7")], 0, 0),  # what only explain shows
    ([_ip_import("web", "10.9.0.2")], 1, 0),
    ([_ip_import("api", "10.9.0.3")], 1, 0),
    ([PutImport(("ns", "web"), None)], 1, 0),
    ([PutImport(("ns", "nope"), None)], 0, 0),
    ([_slice("db-1", "db", "10.1.0.1", "10.1.0.2")], 0, 0),
    ([_slice("db-1", "db", "10.1.0.1", "10.1.0.2", version="9")], 0, 0),
    ([_slice("db-1", "db", "10.1.0.1")], 1, 0),
    ([_slice("db-1", "web", "10.1.0.1")], 2, 0),  # its old service and its new one
    ([PutSlice(("ns", "db-1"), None)], 1, 0),
    ([PutSlice(("ns", "nope"), None)], 0, 0),
    ([_slice("db-2", "db", "10.1.0.3")], 1, 0),
    ([_slice("x-1", "x" * 64, "10.1.0.3")], 1, 1),  # a service name that is no label: explained
    ([SetSerial(5)], 0, 0),
    ([SetClusterId("east")], 0, 0),  # no import prefers anything
    ([SetTopologyZone("z1")], 0, 0),
    ([ReplaceImports({})], 2, 0),
    ([ReplaceSlices({})], 1, 0),
    # a relist with an object that does not fit: reported, the rest applied
    ([ReplaceImports({("ns", "web"): WEB.obj, ("ns", "y" * 64): LONG.obj})], 2, 1),
    ([ReplaceSlices({("ns", "x-1"): LONG_SLICE.obj})], 2, 1),
    ([_ip_import("web", "10.9.0.2"), _ip_import("web", "10.9.0.3")], 1, 0),
])
def test_an_update_reports_the_services_it_rebuilt(ops: list[Op], rebuilt: int,
                                                   rejected: int) -> None:
    cache = _cache()
    cache.apply(BASE)
    applied = cache.apply(ops)
    assert (applied.rebuilt, len(applied.rejected)) == (rebuilt, rejected)


def test_a_change_only_explain_shows_keeps_the_newer_object() -> None:
    cache = _cache()
    cache.apply(BASE)
    serial = cache.zone.serial
    cache.apply([_ip_import("web", "10.9.0.1", version="7"),
                 _slice("db-1", "db", "10.1.0.1", "10.1.0.2", version="9")])
    assert cache.zone.serial == serial
    assert cache.imports[("ns", "web")].resource_version == "7"
    assert cache.slices[("ns", "db-1")].resource_version == "9"
    assert [piece.resource_version for piece in cache.slices_of(("ns", "db"))] == ["9"]


@pytest.mark.parametrize(("prefer", "ops", "rebuilt"), [
    (Prefer.ZONE, [SetClusterId("east")], 1),
    (Prefer.ZONE, [SetClusterId(None)], 0),  # as it was
    (Prefer.ZONE, [SetTopologyZone("z1")], 1),
    (Prefer.ZONE, [SetTopologyZone(None)], 0),
    (Prefer.ZONE, [SetClusterId("east"), SetTopologyZone("z1")], 1),
    (Prefer.NODE, [SetTopologyZone("z1")], 1),
    (Prefer.NOTHING, [SetClusterId("east"), SetTopologyZone("z1")], 0),
])
def test_where_the_server_runs_rebuilds_the_imports_that_prefer(
        prefer: Prefer, ops: list[Op], rebuilt: int) -> None:
    cache = _cache()
    cache.apply([*BASE, _headless("db", prefer)])
    assert cache.apply(ops).rebuilt == rebuilt
    assert cache.apply(ops).rebuilt == 0  # the second time nothing changes
    assert cache.snapshot()[:2] == [SetClusterId(cache.builder.cluster_id),
                                    SetTopologyZone(cache.builder.topology_zone)]


# -- the serial ---------------------------------------------------------------------------------

AT = serials.at(NOW)


@pytest.mark.parametrize(("ops", "serial"), [
    ([SetSerial(7)], 7),
    ([SetSerial(2**32 + 7)], 7),  # RFC 1982: 32 bits
    ([SetSerial(2**32 - 1)], 2**32 - 1),
    ([_ip_import("api", "10.9.0.3"), SetSerial(9)], 9),  # forced, whatever changed
    ([SetSerial(9), _ip_import("api", "10.9.0.3")], 9),
    ([_ip_import("api", "10.9.0.3")], AT + serials.TICKS + 1),  # the clock's, held: +1
    ([SetSynced(True)], AT + serials.TICKS),  # synced already: no change
    ([], AT + serials.TICKS),
])
def test_an_update_ends_at_its_serial(ops: list[Op], serial: int) -> None:
    cache = _cache()
    cache.apply(BASE)
    assert cache.zone.serial == AT + serials.TICKS  # the sync steps a tick past the clock
    cache.apply(ops)
    assert cache.zone.serial == serial
    soa = [line for line in zone_lines(cache) if " SOA " in line]
    assert soa == [f"clusterset.local. 5 IN SOA ns.dns.clusterset.local. "
                   f"hostmaster.clusterset.local. {serial} 7200 1800 86400 5"]


def test_a_forced_serial_that_is_already_the_zones_changes_nothing() -> None:
    journal: list[tuple[int, int, list[Change] | None]] = []
    cache = _cache(on_change=lambda old, new, changes: journal.append((old, new, changes)))
    cache.apply(BASE)
    del journal[:]
    cache.apply([SetSerial(cache.zone.serial)])
    cache.apply([SetSerial(cache.zone.serial + 2**32)])
    assert journal == []
    cache.apply([SetSerial(3)])
    assert [(old, new) for old, new, _ in journal] == [(AT + serials.TICKS, 3)]


def test_a_forced_serial_holds_for_its_own_update_only() -> None:
    cache = _cache()
    cache.apply(BASE)
    cache.apply([SetSerial(7)])
    cache.apply([_ip_import("api", "10.9.0.3")])
    # RFC 1982: 8 is later than the clock's serial (AT + TICKS, more than 2**31 behind)
    assert cache.zone.serial == 8
    cache.apply([])
    assert cache.zone.serial == 8


def test_the_update_completing_the_sync_steps_a_tick_and_keeps_no_history() -> None:
    journal: list[tuple[int, int, bool]] = []
    cache = _cache(on_change=lambda old, new, changes: journal.append(
        (old, new, changes is None)))
    start = cache.zone.serial
    assert start == AT
    cache.apply(BASE[:3])  # before the sync: the serial moves, no history
    cache.apply([SetSynced(True)])
    cache.apply([_ip_import("api", "10.9.0.3")])
    assert journal == [(AT, AT + 1, True), (AT + 1, AT + serials.TICKS, True),
                       (AT + serials.TICKS, AT + serials.TICKS + 1, False)]


# -- what is kept per service ---------------------------------------------------------------------

def test_each_service_stands_as_the_metrics_say() -> None:
    cache = _cache()
    cache.apply([*BASE, _headless("empty"), _slice("x-1", "x" * 64, "10.1.0.3")])
    assert cache.states == {("ns", "web"): SERVED, ("ns", "db"): SERVED,
                            ("ns", "empty"): NO_ENDPOINT}
    cache.apply([PutImport(("ns", "web"), None), PutSlice(("ns", "db-1"), None)])
    assert cache.states == {("ns", "db"): NO_ENDPOINT, ("ns", "empty"): NO_ENDPOINT}
    # An import the source refused is explained by its name's empty answers; deleted
    # (the refusal withdrawn) it leaves no state.
    cache.apply([PutRejected(IMPORT, ("ns", "bad"), ("ns", "bad"), "type 'X' is wrong")])
    assert cache.states[("ns", "bad")] == REJECTED
    cache.apply([PutRejected(IMPORT, ("ns", "bad"), None, None)])
    assert ("ns", "bad") not in cache.states and ("ns", "bad") not in cache.changed_at


def test_changed_at_follows_the_services_built_and_forgets_the_deleted() -> None:
    cache = _cache()
    cache.apply(BASE)
    first = cache.zone.serial
    assert {k: v[0] for k, v in cache.changed_at.items()} == {("ns", "web"): first,
                                                              ("ns", "db"): first}
    cache.apply([_ip_import("web", "10.9.0.2")])
    assert {k: v[0] for k, v in cache.changed_at.items()} == {
        ("ns", "web"): first + 1, ("ns", "db"): first}
    cache.apply([PutImport(("ns", "web"), None)])
    assert set(cache.changed_at) == {("ns", "db")}


def test_changed_at_covers_a_service_whose_answers_wait() -> None:
    cache = _cache(defer=True)
    cache.apply(BASE)
    assert list(cache.pending.services) == [("ns", "web"), ("ns", "db")] or \
        list(cache.pending.services) == [("ns", "db"), ("ns", "web")]
    assert set(cache.changed_at) == {("ns", "web"), ("ns", "db")}


@pytest.mark.parametrize(("record", "ops", "programmed"), [
    (True, [_slice("db-2", "db", "10.1.0.3", trigger=12.5)], [("Headless", 12.5)]),
    (True, [_slice("db-2", "db", "10.1.0.3")], []),  # no trigger time
    (True, [_slice("x-2", "x", "10.1.0.3", trigger=12.5)], []),  # no import
    (False, [_slice("db-2", "db", "10.1.0.3", trigger=12.5)], []),
    (True, [_slice("db-1", "db", "10.1.0.1", "10.1.0.2", trigger=12.5)], []),  # unchanged
    (True, [_slice("w-1", "web", "10.1.0.3", trigger=1.0)], [("ClusterSetIP", 1.0)]),
])
def test_the_slices_whose_programming_is_measured(record: bool, ops: list[Op],
                                                 programmed: list[tuple[str, float]]) -> None:
    cache = _cache(record_programming=record)
    cache.apply(BASE)
    del cache.programmed[:]
    cache.apply(ops)
    assert cache.programmed == programmed


def test_a_traffic_distribution_not_understood_is_logged_once_a_value(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "clusterset_dns.zone.cache")
    cache = _cache()
    steps: list[tuple[Op, dict[tuple[str, str], str], int]] = [
        (_headless("db", traffic="Odd"), {("ns", "db"): "Odd"}, 1),
        (_headless("db", traffic="Odd"), {("ns", "db"): "Odd"}, 1),
        (PutImport(("ns", "db"), ServiceImport("ns", "db", ServiceType.HEADLESS, (), (),
                                               unknown_traffic="Odd")),
         {("ns", "db"): "Odd"}, 1),  # changed otherwise: the same value is not logged again
        (_headless("db", traffic="Other"), {("ns", "db"): "Other"}, 2),
        (_headless("db"), {}, 2),
        (_headless("db", traffic="Odd"), {("ns", "db"): "Odd"}, 3),
        (PutImport(("ns", "db"), None), {}, 3),
    ]
    for op, unknown, logged in steps:
        cache.apply([op])
        assert cache.unknown_traffic == unknown
        assert len([r for r in caplog.records if "trafficDistribution" in r.message]) == logged
    assert "ServiceImport ns/db: trafficDistribution 'Odd' is not understood" in caplog.text


def test_a_worker_logs_no_traffic_distribution(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "clusterset_dns.zone.cache")
    cache = _cache(log_rejected=False)
    cache.apply([_headless("db", traffic="Odd")])
    assert cache.unknown_traffic == {("ns", "db"): "Odd"} and not caplog.records


def test_counts() -> None:
    cache = _cache()
    assert cache.counts() == {"imports": 0, "slices": 0, "answers": cache.zone.count(),
                              "names": len(cache.zone.names)}
    cache.apply(BASE)
    assert cache.counts()["imports"] == 2 and cache.counts()["slices"] == 1
    assert cache.counts()["answers"] == cache.zone.count() > 0
    assert cache.counts()["names"] == len(cache.zone.names) > 0


@pytest.mark.parametrize("synced", [False, True])
def test_a_worker_started_from_a_snapshot_serves_the_same_zone(synced: bool) -> None:
    cache = _cache(cluster_id="east", topology_zone="z1")
    cache.apply(BASE if synced else BASE[:3])
    cache.apply([SetClusterId("west")])
    worker = Cache(ZoneNames(ZONE), 5, clock=lambda: NOW + 1000)
    worker.apply(cache.snapshot())
    assert worker.zone.serial == cache.zone.serial and worker.zone.synced is synced
    assert (worker.builder.cluster_id, worker.builder.topology_zone) == ("west", "z1")
    assert zone_lines(worker) == zone_lines(cache)
    assert f"h1.east.db.ns.{S} 5 IN A 10.1.0.2" in zone_lines(cache)


# -- a large Headless service updated by difference (delta.py) ------------------------------------

def _pods(first: int, count: int, host: bool = True) -> tuple[Endpoint, ...]:
    return tuple(Endpoint((ip_address(f"10.2.{i // 200}.{i % 200 + 1}"),),
                          f"p{i}" if host else None) for i in range(first, first + count))


def _big(name: str, first: int, count: int, host: bool = True, down: int = 0) -> PutSlice:
    """``count`` endpoints from ``first`` on, the last ``down`` of them not ready."""
    pods = _pods(first, count, host)
    return PutSlice(("ns", name), EndpointSlice("ns", name, "big", "east", pods[:count - down],
                                                HTTP, not_ready=pods[count - down:]))


BIG: list[Op] = [_headless("big"), _big("big-1", 0, 20), _big("big-2", 20, 20), SetSynced(True)]
# (update, whether the service is kept as lists after it, whether by difference: the
# same lists changed rather than new ones made by a rebuild)
DIFFERENCES: list[tuple[list[Op], bool, bool]] = [
    ([_big("big-1", 0, 19)], True, True),  # one endpoint leaves
    ([_big("big-1", 0, 20)], True, True),  # and comes back
    ([_big("big-1", 0, 20, down=1)], True, True),  # not ready: its name explained
    ([_big("big-1", 0, 20)], True, True),  # ready again: the reason goes
    ([_big("big-2", 21, 19), _big("big-1", 1, 20)], True, True),  # moved between slices
    ([_big("big-3", 40, 5)], True, True),  # a new slice
    ([PutSlice(("ns", "big-3"), None)], True, True),
    ([_headless("big", traffic="Odd")], True, False),  # the import changed: whole
    ([_big("big-2", 20, 20, host=False)], False, False),  # names derived from addresses
    ([PutSlice(("ns", "big-2"), None), _big("big-1", 0, 10)], False, False),  # too few
    ([_big("big-1", 0, 20), _big("big-2", 20, 20)], True, False),  # rebuilt whole
    ([_big("big-1", 0, 19)], True, True),
    ([PutSlice(("ns", "big-1"), None), PutSlice(("ns", "big-2"), None)], False, False),
    ([PutImport(("ns", "big"), None)], False, False),
]


def _pair(journal: list[list[Change] | None] | None = None) -> tuple[Cache, Cache]:
    """Two caches: the service rebuilt whole every time; kept as lists (from 17 names)."""
    whole = _cache()
    whole.incremental_min = None
    lists = _cache(on_change=None if journal is None else
                   lambda _old, _new, changes: journal.append(changes))
    lists.incremental_min = 2
    for cache in (whole, lists):
        cache.apply(BIG)
        cache.apply([_big("big-1", 0, 20, host=True), _big("big-2", 20, 21)])  # the lists start
    return whole, lists


def test_a_service_updated_by_difference_serves_what_a_rebuild_does() -> None:
    whole, lists = _pair()
    assert ("ns", "big") in lists._headless and not whole._headless
    assert [piece.name for piece in lists.slices_of(("ns", "big"))] == ["big-1", "big-2"]
    assert lists.slices_of(("ns", "web")) == [] == lists.slices_of(("ns", "nope"))
    for ops, kept, by_difference in DIFFERENCES:
        before = lists._headless.get(("ns", "big"))
        assert lists.apply(ops).rebuilt == whole.apply(ops).rebuilt
        after = lists._headless.get(("ns", "big"))
        assert (after is not None, after is not None and after is before) == (
            kept, by_difference), ops
        assert zone_lines(lists) == zone_lines(whole), ops
        assert lists.zone.explained == whole.zone.explained
        assert lists.zone.names == whole.zone.names
        assert lists.states == whole.states
        assert lists.zone.serial == whole.zone.serial


@pytest.mark.parametrize(("count", "kept"), [(delta.INCREMENTAL_MIN - 1, False),
                                             (delta.INCREMENTAL_MIN, True)])
def test_by_default_lists_are_kept_from_the_minimum_on(count: int, kept: bool) -> None:
    cache = _cache()
    assert cache.incremental_min == delta.INCREMENTAL_MIN
    cache.apply([_headless("big"), _big("big-1", 0, count), SetSynced(True)])
    cache.apply([_big("big-1", 0, count)])  # after the sync: rebuilt whole, lists kept
    assert not cache._headless
    cache.apply([_big("big-1", 1, count)])
    assert (("ns", "big") in cache._headless) is kept


def _encoded(cache: Cache, name: str) -> bool | None:
    """Whether the endpoint name's A answer is stored (encoded at update time), or
    answered on first use (Zone.hosts: False); None: neither."""
    owner = to_wire(tuple(label.encode() for label in name.split(".") if label))
    if owner + b"\x00\x01\x00\x01" in cache.zone.answers:
        return True
    return False if cache.zone.host(owner) is not None else None


@pytest.mark.parametrize(("count", "minimum", "lazy", "encoded"), [
    (20, 2, True, True),  # from the minimum on: encoded, for the lists
    (20, 20, True, True),
    (20, 21, True, False),  # below it: on first use
    (20, None, True, False),  # never kept as lists
    (20, 2, False, True),  # Cache(lazy=False): always encoded
])
def test_endpoint_names_are_encoded_for_a_service_kept_as_lists_only(
        count: int, minimum: int | None, lazy: bool, encoded: bool) -> None:
    cache = _cache(lazy=lazy)
    cache.incremental_min = minimum
    cache.apply([*BIG[:2], SetSynced(True)])
    # the first list (until the sync) starts no lists: on first use, unless lazy=False
    assert _encoded(cache, f"p1.east.big.ns.{S}") is not lazy
    cache.apply([_big("big-1", 1, count)])  # p1 to p20: changed after the sync
    assert _encoded(cache, f"p1.east.big.ns.{S}") is encoded
    assert (("ns", "big") in cache._headless) is (encoded and minimum is not None)
    assert _encoded(cache, f"h0.east.db.ns.{S}") is None
    cache.apply(BASE)  # a service of 2 endpoint names: encoded from a minimum of 2 on
    assert _encoded(cache, f"h0.east.db.ns.{S}") is (
        not lazy or (minimum is not None and minimum <= 2))


def test_a_service_built_after_the_sync_from_the_list_keeps_no_lists() -> None:
    """Built in the background (pending): as it stood at the sync, which starts no
    lists (they cost memory for services that may never change); its first change does."""
    cache = _cache(defer=True)
    cache.incremental_min = 2
    for op in BIG:
        cache.apply([op])
    assert list(cache.pending.services) == [("ns", "big")]
    cache.pending.build_all()
    assert not cache._headless and not cache.pending
    cache.apply([_big("big-1", 0, 19)])
    assert ("ns", "big") in cache._headless


def test_a_preferring_service_stays_on_its_lists_while_it_has_one_tier() -> None:
    """PreferClose: the server's zone alone (no cluster id) makes no tiers; the update it
    brings touches no slice, the same lists. The cluster id known: tiers, rebuilt whole."""
    whole, lists = _cache(), _cache()
    whole.incremental_min, lists.incremental_min = None, 2
    for cache in (whole, lists):
        cache.apply([_headless("big", Prefer.ZONE), *BIG[1:]])
        cache.apply([_big("big-1", 0, 19)])
    state = lists._headless[("ns", "big")]
    for ops, kept in [([SetTopologyZone("z1")], True), ([SetClusterId("east")], False)]:
        assert lists.apply(ops).rebuilt == whole.apply(ops).rebuilt == 1
        assert (lists._headless.get(("ns", "big")) is state) is kept
        assert zone_lines(lists) == zone_lines(whole)


def test_a_difference_journals_the_records_that_changed() -> None:
    journal: list[list[Change] | None] = []
    _, lists = _pair(journal)
    del journal[:]
    lists.apply([_big("big-1", 0, 19)])  # p19 leaves
    assert ("ns", "big") in lists._headless
    (changes,) = journal
    assert changes is not None
    gone = {rrs.key_text(key) for key, _, after in changes if after is None}
    assert gone == {f"p19.east.big.ns.{S} A"}


def test_a_bug_in_a_difference_raises_and_the_next_update_rebuilds_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    whole, lists = _pair()

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("bug")
    monkeypatch.setattr(delta, "update", broken)
    whole.apply([_big("big-1", 0, 19)])
    with pytest.raises(RebuildError) as raised:
        lists.apply([_big("big-1", 0, 19)])
    assert str(raised.value) == ("1 service(s) could not be rebuilt, e.g. ('ns', 'big'): "
                                 "RuntimeError('bug')")
    assert repr(raised.value.__cause__) == "RuntimeError('bug')"
    assert ("ns", "big") not in lists._headless
    assert ("ns", "big") in lists._failed
    monkeypatch.undo()
    for cache in (whole, lists):
        cache.apply([_big("big-1", 0, 18)])
    assert zone_lines(lists) == zone_lines(whole)
    assert not lists._failed


# -- objects a source could not convert ---------------------------------------------------

BAD_IMPORT = (IMPORT, ("ns", "bad"))
BAD_SLICE = (SLICE, ("ns", "db-9"))


def test_a_source_replaces_what_it_could_not_convert() -> None:
    """ReplaceRejected (a relist): the objects it names are refused as given, those it
    no longer names are withdrawn; what admission refused itself stays."""
    cache = _cache()
    cache.apply([*BASE, _slice("x-1", "x" * 64, "10.1.0.3")])  # refused by admission
    own = {key for key, why in cache.rejections.items() if not why.source}
    assert own == {(SLICE, ("ns", "x-1"))}
    cache.apply([ReplaceRejected({BAD_IMPORT: (("ns", "bad"), "type 'X' is wrong"),
                                  BAD_SLICE: (("ns", "db"), "no addressType")})])
    assert cache.rejections[BAD_IMPORT] == Rejection(("ns", "bad"), "type 'X' is wrong",
                                                     False, True)
    assert cache.rejections[BAD_SLICE] == Rejection(("ns", "db"), "no addressType", False,
                                                    True)
    assert cache.states[("ns", "bad")] == REJECTED
    assert cache.rejected_texts(("ns", "db")) == ["EndpointSlice ns/db-9 rejected: "
                                                  "no addressType"]
    assert set(cache.rejections_of(("ns", "db"))) == {BAD_SLICE}
    cache.apply([ReplaceRejected({BAD_SLICE: (("ns", "db"), "no addressType")})])
    assert set(cache.rejections) == {BAD_SLICE, *own}
    assert ("ns", "bad") not in cache.states
    cache.apply([ReplaceRejected({})])
    assert set(cache.rejections) == own
    assert cache.rejected_texts(("ns", "db")) == [] and cache.rejections_of(("ns", "db")) == {}


def test_an_object_refused_then_fixed_is_no_longer_refused() -> None:
    cache = _cache()
    cache.apply([*BASE, _slice("x-1", "x" * 64, "10.1.0.3"),
                 PutImport(("ns", "y" * 64), ServiceImport(
                     "ns", "y" * 64, ServiceType.CLUSTER_SET_IP, (ip_address("10.9.0.6"),),
                     HTTP))])
    assert set(cache.rejections) == {(SLICE, ("ns", "x-1")), (IMPORT, ("ns", "y" * 64))}
    cache.apply([_slice("x-1", "db", "10.1.0.3")])
    assert set(cache.rejections) == {(IMPORT, ("ns", "y" * 64))}
    cache.apply([PutImport(("ns", "y" * 64), None)])  # deleted: nothing to refuse
    assert cache.rejections == {}


def test_a_rejection_put_by_a_source_keeps_its_reference() -> None:
    cache = _cache()
    cache.apply([*BASE, PutRejected(SLICE, ("ns", "db-9"), ("ns", "db"), "no addressType",
                                    ("discovery.k8s.io/v1", "uid-1"))])
    assert cache.rejections_of(("ns", "db")) == {BAD_SLICE: Rejection(
        ("ns", "db"), "no addressType", False, True, ("discovery.k8s.io/v1", "uid-1"))}
    copy = cache.rejections_of(("ns", "db"))
    copy.clear()  # a copy: the cache's own stays
    assert set(cache.rejections_of(("ns", "db"))) == {BAD_SLICE}


def test_a_cache_starts_as_configured() -> None:
    """Where the server runs and what it serves, as given; by default nothing is
    measured for programming and endpoint names are answered on first use."""
    cache = Cache(ZoneNames(ZONE), 5, cluster_id="east", topology_zone="z1",
                  node_name="node-1", serve_terminating=True)
    builder = cache.builder
    assert (builder.cluster_id, builder.topology_zone, builder.node_name,
            builder.serve_terminating) == ("east", "z1", "node-1", True)
    cache.apply([*BASE, _slice("db-2", "db", "10.1.0.9", trigger=12.5)])
    assert cache.programmed == [] and not cache.record_programming
    assert cache.lazy and not cache.defer and not cache.pending
    plain = Cache(ZoneNames(ZONE), 5)
    plain.apply(BASE)
    assert _encoded(plain, f"h0.east.db.ns.{S}") is False  # on first use
    assert plain.programmed == [] and not plain.pending


def test_the_cuts_of_a_service_go_with_its_answers() -> None:
    """Answers too big for some UDP client keep their cuts (truncate.py) beside them;
    a service shrunk or deleted leaves none behind."""
    cache = _cache()
    assert cache.names.svc == ZoneNames(ZONE).svc  # what explain reads its names from
    cache.apply([*BIG, _big("big-1", 0, 40)])
    big = {key for key in cache.zone.cuts if rrs.key_text(key).startswith("big.ns.")}
    assert big  # 60 A records: more than 512 bytes
    cache.apply([_big("big-1", 0, 1), PutSlice(("ns", "big-2"), None)])
    assert not [key for key in cache.zone.cuts if b"\x03big\x02ns" in key]
    cache.apply([*BIG[1:3], PutImport(("ns", "big"), None)])
    assert not cache.zone.cuts
