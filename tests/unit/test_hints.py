"""Local-first answers follow the EndpointSlice topology hints (issue 35), as kube-proxy
routes: ``hints.forZones`` for the zone tier, ``hints.forNodes`` for the node tier
(PreferSameNode), each used only when every local answering endpoint has hints of
that level; otherwise the ``zone`` / ``nodeName`` fields, as without hints.

Rows as in test_locality.py: where the server runs, the endpoints' fields and hints,
and every record of the service as zone-file text, written out from the rule
(docs/locality.md, "Topology hints") by :func:`records_of`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from typing import Any

import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import explain
from clusterset_dns.process.dump import zone_lines
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import (
    Cache,
    PutImport,
    PutSlice,
    ReplaceImports,
    ReplaceSlices,
    SetSynced,
)
from clusterset_dns.zone.model import (
    Endpoint,
    EndpointSlice,
    Hints,
    ObjectKey,
    Port,
    Prefer,
    ServiceImport,
    ServiceType,
)
from clusterset_dns.zone.order import Tiers
from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, service_import

from .helpers import ZONE
from .test_locality import E_A, E_B, SVC, W_A, Ep, cache_at, near, records_of, service_lines

Hint = tuple[list[str] | None, list[str] | None]  # (forZones, forNodes); None: absent
NONE: Hint = (None, None)


def z(*zones: str) -> Hint:
    return (list(zones), None)


def hinted(a: Hint = NONE, b: Hint = NONE, w: Hint = NONE) -> list[dict[str, Any]]:
    """The table's slices (test_locality.E_A, E_B in east; W_A in west, all with their
    zone and nodeName fields), each endpoint with the hints given."""
    def ep(item: Ep, hint: Hint) -> dict[str, Any]:
        host, _, ip, zone, node = item
        return endpoint(ip, hostname=None if host[0].isdigit() else host,
                        zone=zone, node=node, for_zones=hint[0], for_nodes=hint[1])

    return [
        endpoint_slice("near-east", "near", cluster="east", ports=[HTTP],
                       endpoints=[ep(E_A, a), ep(E_B, b)]),
        endpoint_slice("near-west", "near", cluster="west", ports=[HTTP],
                       endpoints=[ep(W_A, w)]),
    ]


NINE = [f"zone-{i}" for i in range(9)]  # one more than the API allows
NODE = "PreferSameNode"
ROWS = [
    # Zone hints (PreferClose, PreferSameZone). E_A's field says zone-a, E_B's zone-b.
    pytest.param("zone-b", None, near(), hinted(z("zone-a"), z("zone-b")),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="agree"),
    pytest.param("zone-b", None, near(), hinted(z("zone-b"), z("zone-a")),
                 records_of([E_A], [E_A], [E_B], [W_A]), id="disagree-hints-win"),
    pytest.param("zone-a", None, near("PreferSameZone"), hinted(z("zone-b"), z("zone-a")),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="disagree-prefer-same-zone"),
    pytest.param("zone-b", None, near(), hinted(z("zone-a", "zone-b"), z("zone-b")),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="several-zones-in-one-hint"),
    pytest.param("zone-b", None, near(), hinted(z("zone-c"), z("zone-c")),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="hints-name-another-zone"),
    pytest.param("zone-b", None, near(), hinted(z("zone-b")),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="partial-hints-fields"),
    pytest.param("zone-b", None, near(), hinted(z(), z()),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="empty-lists-are-no-hints"),
    pytest.param("zone-b", None, near(), hinted(z("zone-b"), z()),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="one-empty-list-fields"),
    pytest.param("zone-b", None, near(), hinted(z(*NINE, "zone-b"), z("zone-a")),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="too-many-hints-fields"),
    pytest.param("zone-b", None, near(), hinted(z("zone-b"), z("zone-a"), w=z("zone-b")),
                 records_of([E_A], [E_A], [E_B], [W_A]), id="other-cluster-hints-not-local"),
    pytest.param(None, None, near(), hinted(z("zone-b"), z("zone-a")),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="server-zone-unknown"),
    pytest.param("zone-b", None, near(None), hinted(z("zone-b"), z("zone-a")),
                 records_of([E_A, E_B, W_A], [E_A, E_B, W_A]), id="no-preference-no-tiers"),
    pytest.param("zone-b", "node-1", near(), hinted((["zone-b"], ["node-2"]),
                                                    (["zone-a"], ["node-1"])),
                 records_of([E_A], [E_A], [E_B], [W_A]), id="prefer-close-ignores-node-hints"),
    # Node hints (PreferSameNode): E_A's nodeName is node-1, E_B's node-2.
    pytest.param(None, "node-1", near(NODE), hinted((None, ["node-2"]), (None, ["node-1"])),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="node-hints-win"),
    pytest.param(None, "node-2", near(NODE), hinted((None, ["node-2"]), (None, ["node-2"])),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="node-hints-both-on-the-node"),
    pytest.param("zone-a", "node-3", near(NODE),
                 hinted((["zone-b"], ["node-1"]), (["zone-a"], ["node-2"])),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="no-node-hint-here-zone-hints"),
    pytest.param("zone-b", "node-1", near(NODE),
                 hinted((["zone-a"], ["node-2"]), (["zone-b"], None)),
                 records_of([E_A], [E_A], [E_B], [W_A]), id="partial-node-hints-nodename"),
    pytest.param("zone-a", "node-1", near(NODE),
                 hinted((None, ["node-2"]), (None, ["node-1"])),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="node-hints-zone-fields"),
    pytest.param("zone-a", "node-3", near(NODE),
                 hinted((None, ["node-2"]), (None, ["node-1"])),
                 records_of([E_A], [E_A], [E_B], [W_A]), id="node-hints-elsewhere-zone-field"),
]


@pytest.mark.parametrize(("zone", "node", "imp", "pieces", "expected"), ROWS)
def test_records(zone: str | None, node: str | None, imp: dict[str, Any],
                 pieces: list[dict[str, Any]], expected: list[str]) -> None:
    assert service_lines(cache_at("east", zone, [imp], pieces, node)) == expected


# -- conversion: names only, bounded, bad hints cost only themselves ---------------------------

@pytest.fixture(autouse=True)
def _cold_hints() -> None:
    """Every test converts with an empty table of shared hints: what it checks is
    then worked out, never found from an earlier test."""
    convert._shared_hints.clear()


def _one(raw_hints: Any) -> tuple[Endpoint, list[str]]:
    raw = endpoint("10.0.0.1", zone="zone-a", node="node-1")
    raw["hints"] = raw_hints
    warnings: list[str] = []
    piece = convert.endpoint_slice(endpoint_slice("s", "near", cluster="east", endpoints=[raw]),
                                   warnings.append)
    assert piece is not None and len(piece.endpoints) == 1  # the endpoint always stays
    return piece.endpoints[0], warnings


@pytest.mark.parametrize(("raw", "zones", "nodes"), [
    ({"forZones": [{"name": "zone-b"}]}, {"zone-b"}, set()),
    ({"forNodes": [{"name": "node-2"}], "forZones": [{"name": "zone-b"}, {"name": "zone-c"}]},
     {"zone-b", "zone-c"}, {"node-2"}),
    ({"forZones": [{"name": f"zone-{i}"} for i in range(8)]}, {f"zone-{i}" for i in range(8)},
     set()),  # the API's limit: kept
    ({"forZones": [{"name": "zone-b", "other": 1}]}, {"zone-b"}, set()),  # names only
    ({"forZones": [{"name": "zone-b"}, {"name": "zone-b"}]}, {"zone-b"}, set()),
    ({"forZones": [{"name": "z" * 253}]}, {"z" * 253}, set()),
    ({"forZones": [{"name": "a"}]}, {"a"}, set()),
])
def test_hints_are_read(raw: Any, zones: set[str], nodes: set[str]) -> None:
    found, warnings = _one(raw)
    assert found.hints == Hints(frozenset(zones), frozenset(nodes))
    assert warnings == []


@pytest.mark.parametrize("raw", [None, {}, {"forZones": []}, {"forZones": [], "forNodes": []},
                                 {"forZones": None}])
def test_no_hints(raw: Any) -> None:
    found, warnings = _one(raw)
    assert found.hints is None
    assert warnings == []


@pytest.mark.parametrize(("raw", "message"), [
    ("zone-b", "hints is not an object"),
    ({"forZones": "zone-b"}, "hints.forZones is not a list"),
    ({"forNodes": {"name": "node-1"}}, "hints.forNodes is not a list"),
    ({"forZones": [{"name": f"zone-{i}"} for i in range(9)]},
     "hints.forZones has 9 entries, more than 8"),
    ({"forNodes": [{"name": "n"}] * 1_000_000}, "hints.forNodes has 1000000 entries"),
    ({"forZones": [{"name": "zone-b"}, {}]},
     "hints.forZones has an entry without a name of 1..253 characters"),
    ({"forZones": [{"name": ""}]}, "hints.forZones has an entry without a name"),
    ({"forZones": [{"name": 7}]}, "hints.forZones has an entry without a name"),
    ({"forZones": ["zone-b"]}, "hints.forZones has an entry without a name"),
    ({"forZones": [{"name": "z" * 254}]}, "hints.forZones has an entry without a name"),
    ({"forZones": [{"name": "zone-b"}], "forNodes": [{"nom": "x"}]},
     "hints.forNodes has an entry without a name"),
])
def test_bad_hints_are_dropped_with_a_warning(raw: Any, message: str) -> None:
    found, warnings = _one(raw)
    assert found.hints is None
    assert found.addresses == (ipaddress.IPv4Address("10.0.0.1"),)
    assert found.zone == "zone-a" and found.node == "node-1"  # the fields stay
    assert len(warnings) == 1
    assert warnings[0].startswith(f"endpoints[0]: hints ignored: {message}")


def test_equal_hints_are_shared() -> None:
    raws = [endpoint(f"10.0.0.{i}", for_zones=["zone-b", "zone-a"]) for i in range(1, 4)]
    piece = convert.endpoint_slice(endpoint_slice("s", "near", cluster="east", endpoints=raws))
    assert piece is not None
    first = piece.endpoints[0].hints
    assert first is not None and all(e.hints is first for e in piece.endpoints)


def test_the_table_of_shared_hints_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "_HINTS_CAP", 2)
    for count, zone in ((1, "zone-a"), (2, "zone-b"), (1, "zone-c")):  # full: starts over
        found, _ = _one({"forZones": [{"name": zone}]})
        assert found.hints == Hints(frozenset({zone}))
        assert len(convert._shared_hints) == count


def test_bad_hints_change_no_other_answer() -> None:
    """One endpoint's bad hints: its import ranks by the fields (as row
    too-many-hints-fields); another import's hints still rule its answers."""
    far = service_import("far", type_="Headless", ports=[HTTP], traffic_distribution="PreferClose")
    far_east = endpoint_slice("far-east", "far", cluster="east", ports=[HTTP], endpoints=[
        endpoint("10.0.3.1", zone="zone-a", for_zones=["zone-b"]),
        endpoint("10.0.3.2", zone="zone-b", for_zones=["zone-a"])])
    cache = cache_at("east", "zone-b", [near(), far], [*hinted(z(*NINE), z("zone-a")), far_east])
    lines = zone_lines(cache)
    assert [line for line in lines if line.startswith("far.") and " IN A " in line] == \
        ["far.prod.svc.clusterset.local. 5 IN A 10.0.3.1"]  # by its hint
    assert [line for line in lines if line.startswith(SVC) and " IN A " in line] == \
        [f"{SVC} 5 IN A 10.0.1.2"]  # E_B, by its field


# -- incremental updates ----------------------------------------------------------------------

def test_a_hint_change_alone_moves_the_preference() -> None:
    """Only the hints change (addresses, fields, readiness as they were): the answers
    follow, as a rebuild from scratch gives them."""
    cache = cache_at("east", "zone-b", [near()], hinted(z("zone-a"), z("zone-b")))
    before = service_lines(cache)
    assert before == records_of([E_B], [E_B], [E_A], [W_A])
    moved = hinted(z("zone-b"), z("zone-a"))
    model = convert.endpoint_slice(moved[0])
    assert model is not None
    cache.apply([PutSlice(("prod", "near-east"), model)])
    assert service_lines(cache) == records_of([E_A], [E_A], [E_B], [W_A])
    assert service_lines(cache) == service_lines(cache_at("east", "zone-b", [near()], moved))


SERVICE: ObjectKey = ("prod", "web")
PORTS = (Port("http", "tcp", 80),)


def _large(prefer: Prefer, hints: Hints | None) -> tuple[ServiceImport,
                                                         dict[ObjectKey, EndpointSlice]]:
    """300 endpoints in three slices of east: the shape delta.py takes."""
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), PORTS, prefer=prefer)
    slices = {}
    for s in range(3):
        endpoints = tuple(Endpoint((ipaddress.IPv4Address(0x0A000001 + s * 100 + i),), None,
                                   zone="zone-a", hints=hints) for i in range(100))
        slices[("prod", f"web-{s}")] = EndpointSlice("prod", f"web-{s}", "web", "east",
                                                     endpoints, PORTS)
    return imp, slices


def _caches(imp: ServiceImport, slices: dict[ObjectKey, EndpointSlice]) -> list[Cache]:
    """A cache that rebuilds every touched service whole, and one that applies
    differences (delta.py), both past the sync."""
    caches = []
    for minimum in (None, 256):
        cache = Cache(ZoneNames(ZONE), 5, cluster_id="east", topology_zone="zone-b",
                      clock=lambda: 1_000_000.0)
        cache.incremental_min = minimum
        cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices(slices), SetSynced(True)])
        # The first rebuild past the sync starts the lists (delta.start): web-2 loses
        # its last endpoint.
        last = slices[("prod", "web-2")]
        cache.apply([PutSlice(("prod", "web-2"), replace(last, endpoints=last.endpoints[:-1]))])
        caches.append(cache)
    return caches


def _answers(cache: Cache) -> dict[bytes, tuple[bytes, bytes]]:
    # every answer the zone serves, stored or encoded on first use from the compact index
    return {k: (v.heads, v.body) for k, v in cache.zone.every_answer()}


def _first_zone_b(slices: dict[ObjectKey, EndpointSlice]) -> EndpointSlice:
    """web-0 with its first endpoint hinted for zone-b, the others for zone-a."""
    piece = slices[("prod", "web-0")]
    first = piece.endpoints[0]
    return EndpointSlice(piece.namespace, piece.name, piece.service, piece.cluster,
                         (Endpoint(first.addresses, None, zone="zone-a",
                                   hints=Hints(frozenset({"zone-b"}))), *piece.endpoints[1:]),
                         piece.ports)


def test_hints_keep_the_difference_path_of_an_import_without_preference() -> None:
    """Hints matter only to preferring imports: a large Headless import without one
    keeps its updates by difference (delta.py) through a change of hints alone, and
    the zone is the rebuild's."""
    imp, slices = _large(Prefer.NOTHING, Hints(frozenset({"zone-a"})))
    whole, diff = _caches(imp, slices)
    assert SERVICE in diff._headless
    before = _answers(diff)
    changed = _first_zone_b(slices)
    for cache in (whole, diff):
        cache.apply([PutSlice(("prod", "web-0"), changed)])
    assert SERVICE in diff._headless  # still by difference
    assert _answers(whole) == _answers(diff)
    assert whole.zone.names == diff.zone.names
    after = _answers(diff)
    svc = b"\x03web\x04prod\x03svc"
    assert {k: v for k, v in after.items() if svc in k} == \
        {k: v for k, v in before.items() if svc in k}  # no answer of the service changed


def test_a_preferring_import_with_hints_is_rebuilt_whole() -> None:
    """A preferring import never takes the difference path; a change of hints alone
    moves its answers (the one endpoint hinted for the server's zone answers A)."""
    imp, slices = _large(Prefer.ZONE, Hints(frozenset({"zone-a"})))
    whole, diff = _caches(imp, slices)
    assert SERVICE not in diff._headless
    changed = _first_zone_b(slices)
    for cache in (whole, diff):
        cache.apply([PutSlice(("prod", "web-0"), changed)])
    assert _answers(whole) == _answers(diff)
    assert _service_a(diff) == ["10.0.0.1"]
    # and back to the import without preference: every address again
    for cache in (whole, diff):
        cache.apply([PutImport(SERVICE, ServiceImport("prod", "web", ServiceType.HEADLESS, (),
                                                      PORTS))])
    assert _answers(whole) == _answers(diff)
    assert len(_service_a(diff)) == 299


def _service_a(cache: Cache) -> list[str]:
    return [line.split()[-1] for line in zone_lines(cache)
            if line.startswith("web.prod.svc.clusterset.local. ") and " IN A " in line]


# -- explain: which tier and why ---------------------------------------------------------------

def _account(cache: Cache, full: bool) -> dict[str, Any]:
    gen = explain.steps(cache, SVC, "A", full=full)
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        result: dict[str, Any] = stop.value
    return result


def _rows(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["addresses"][0]: row for piece in result["service"]["slices"]
            for row in piece["endpoints"]}


@pytest.mark.parametrize("full", [True, False])
def test_explain_says_the_tier_and_whether_hints_or_fields_placed_it(full: bool) -> None:
    by_hints = _rows(_account(cache_at("east", "zone-b", [near()],
                                       hinted(z("zone-b"), z("zone-a"))), full))
    assert [(ip, row["tier"], row["tierWhy"]) for ip, row in sorted(by_hints.items())] == [
        ("10.0.1.1", 0, "in this server's zone: hints.forZones"),
        ("10.0.1.2", 1, "the local cluster, elsewhere by hints.forZones"),
        ("10.0.2.1", 2, "another cluster")]
    by_fields = _rows(_account(cache_at("east", "zone-b", [near()], hinted(z("zone-b"))),
                               full))
    assert [(ip, row["tier"], row["tierWhy"]) for ip, row in sorted(by_fields.items())] == [
        ("10.0.1.1", 1, "the local cluster, elsewhere by zone"),
        ("10.0.1.2", 0, "in this server's zone: zone"),
        ("10.0.2.1", 2, "another cluster")]
    node = _rows(_account(cache_at("east", "zone-b", [near(NODE)], hinted(
        (["zone-a"], ["node-2"]), (["zone-b"], ["node-1"])), node="node-1"), full))
    assert node["10.0.1.2"]["tierWhy"] == "on this server's node: hints.forNodes"
    assert node["10.0.1.1"]["tierWhy"] == \
        "the local cluster, elsewhere by hints.forNodes and hints.forZones"
    rendered = explain.text(_account(cache_at("east", "zone-b", [near()],
                                              hinted(z("zone-b"), z("zone-a"))), full))
    assert "10.0.1.1: served (tier 0: in this server's zone: hints.forZones)" in rendered
    assert "10.0.1.2 h-0: left out (tier 1: the local cluster, elsewhere by hints.forZones)" \
        in rendered
    row = by_hints["10.0.1.1"]
    if full:  # the objects' own data: the fields and the hints
        assert (row["zone"], row["nodeName"], row["hints"]) == \
            ("zone-a", "node-1", {"forZones": ["zone-b"], "forNodes": []})
    else:  # the health port: no zone, node or hint names (DNS gives none of them)
        assert not {"zone", "nodeName", "hints"} & row.keys()
        assert "zone-" not in repr(_account(cache_at("east", "zone-b", [near()],
                                                     hinted(z("zone-b"), z("zone-a"))), full))


WHY_EP = Endpoint((ipaddress.IPv4Address("10.0.0.1"),), None, zone="zone-a", node="node-1",
                  hints=Hints(frozenset({"zone-b"}), frozenset({"node-2"})))


@pytest.mark.parametrize(("tiers", "local", "why"), [
    (Tiers("east", "node-1", None), True, "on this server's node: nodeName"),
    (Tiers("east", "node-2", None, node_hints=True), True,
     "on this server's node: hints.forNodes"),
    (Tiers("east", None, "zone-a"), True, "in this server's zone: zone"),
    (Tiers("east", None, "zone-b", zone_hints=True), True,
     "in this server's zone: hints.forZones"),
    (Tiers("east", None, None), True, "the local cluster"),
    (Tiers("east", "node-9", None), True, "the local cluster, elsewhere by nodeName"),
    (Tiers("east", "node-9", "zone-9"), True, "the local cluster, elsewhere by nodeName and zone"),
    (Tiers("east", "node-9", "zone-9", node_hints=True), True,
     "the local cluster, elsewhere by hints.forNodes and zone"),
    (Tiers("east", None, "zone-9", zone_hints=True), True,
     "the local cluster, elsewhere by hints.forZones"),
    (Tiers("east", "node-1", "zone-a"), False, "another cluster"),
])
def test_why_names_the_rule(tiers: Tiers, local: bool, why: str) -> None:
    assert tiers.why(local, WHY_EP) == why


def test_following_reads_only_complete_levels() -> None:
    zone_only = Endpoint(WHY_EP.addresses, None, hints=Hints(frozenset({"zone-b"})))
    tiers = Tiers("east", "node-1", "zone-a")
    assert tiers.following([WHY_EP, zone_only]) == Tiers("east", "node-1", "zone-a",
                                                         zone_hints=True)
    assert tiers.following([WHY_EP, WHY_EP]) == Tiers("east", "node-1", "zone-a", True, True)
    assert tiers.following([WHY_EP, replace(WHY_EP, hints=None)]) is tiers
    assert Tiers("east", None, "zone-a").following([replace(WHY_EP, hints=Hints(
        nodes=frozenset({"node-1"})))]) == Tiers("east", None, "zone-a")


def test_explain_gives_no_tier_to_a_clustersetip_import() -> None:
    """A ClusterSetIP import answers with its IP whatever its trafficDistribution: its
    endpoints (full account) have no tier."""
    rows = _rows(_account(cache_at("east", "zone-b", [near(type_="ClusterSetIP")],
                                   hinted(z("zone-b"), z("zone-a"))), True))
    assert len(rows) == 3
    assert not any("tier" in row or "tierWhy" in row for row in rows.values())


@pytest.mark.parametrize(("v6_hints", "a", "aaaa"), [
    (True, "10.0.1.1", "fd00::1"),  # both families hinted: the hints
    (False, "10.0.1.2", "fd00::2"),  # the IPv6 slice without: the fields, both families
])
def test_the_hints_check_spans_both_families(v6_hints: bool, a: str, aaaa: str) -> None:
    def family(name: str, first: str, second: str, hints: bool) -> dict[str, Any]:
        return endpoint_slice(name, "near", cluster="east", ports=[HTTP],
                              address_type="IPv6" if ":" in first else "IPv4", endpoints=[
            endpoint(first, zone="zone-a", for_zones=["zone-b"] if hints else None),
            endpoint(second, zone="zone-b", for_zones=["zone-a"] if hints else None)])

    pieces = [family("near-v4", "10.0.1.1", "10.0.1.2", True),
              family("near-v6", "fd00::1", "fd00::2", v6_hints)]
    lines = service_lines(cache_at("east", "zone-b", [near()], pieces))
    assert [line.split()[-1] for line in lines if line.startswith(SVC)
            and (" IN A " in line or " IN AAAA " in line)] == [a, aaaa]
