"""zone/order.py on its own: addresses in order (IPv4 first, numeric, each once), the best
tier per family, local-first ranks and why (by fields or by hints, a level at a time),
endpoint ranks by first address, and the SRV weight. Written for the survivors of
``scripts/mutate clusterset_dns/zone/order.py``."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from clusterset_dns.zone.model import Endpoint, Hints
from clusterset_dns.zone.order import (
    Tiers,
    best_per_family,
    endpoint_ranks,
    sorted_ips,
    sorted_packed,
    srv_weight,
)


def packed(text: str) -> bytes:
    return ip_address(text).packed


def test_addresses_ipv4_first_numeric_each_once() -> None:
    ips = [ip_address(t) for t in ("fd00::2", "10.0.0.10", "10.0.0.9", "fd00::1",
                                   "10.0.0.9", "9.255.255.255")]
    assert sorted_ips(ips) == [packed("9.255.255.255"), packed("10.0.0.9"),
                               packed("10.0.0.10"), packed("fd00::1"), packed("fd00::2")]
    assert sorted_packed([packed("::1"), packed("255.255.255.255"), packed("::1")]) == \
        [packed("255.255.255.255"), packed("::1")]
    assert sorted_ips([]) == []


def test_best_per_family() -> None:
    a1, a2, a3 = packed("10.0.0.1"), packed("10.0.0.2"), packed("10.0.0.3")
    b1, b2 = packed("fd00::1"), packed("fd00::2")
    # each family keeps its own best rank: 1 for IPv4, 2 for IPv6
    assert best_per_family([a1, a2, a3, b1, b2], [2, 1, 1, 3, 2]) == [a2, a3, b2]
    assert best_per_family([a1, a2], [0, 0]) == [a1, a2]
    assert best_per_family([a1, b1], [5, 0]) == [a1, b1]
    assert best_per_family([], []) == []
    with pytest.raises(ValueError):
        best_per_family([a1], [])


def endpoint(node: str | None = None, zone: str | None = None,
             hints: Hints | None = None) -> Endpoint:
    return Endpoint((ip_address("10.0.0.1"),), None, zone=zone, node=node, hints=hints)


NODE_AND_ZONE = Tiers("east", "n1", "z1")
ZONE_ONLY = Tiers("east", None, "z1")
NODE_ONLY = Tiers("east", "n1", None)
NEITHER = Tiers("east", None, None)


@pytest.mark.parametrize(("tiers", "local", "one", "rank", "why"), [
    (NODE_AND_ZONE, False, endpoint("n1", "z1"), 3, "another cluster"),
    (NODE_AND_ZONE, True, endpoint("n1", "z1"), 0, "on this server's node: nodeName"),
    (NODE_AND_ZONE, True, endpoint("n2", "z1"), 1, "in this server's zone: zone"),
    (NODE_AND_ZONE, True, endpoint("n2", "z2"), 2,
     "the local cluster, elsewhere by nodeName and zone"),
    (NODE_AND_ZONE, True, endpoint(None, None), 2,
     "the local cluster, elsewhere by nodeName and zone"),
    (ZONE_ONLY, False, endpoint(), 2, "another cluster"),
    (ZONE_ONLY, True, endpoint("n1", "z1"), 0, "in this server's zone: zone"),
    (ZONE_ONLY, True, endpoint(None, None), 1, "the local cluster, elsewhere by zone"),
    (NODE_ONLY, True, endpoint("n1", "z9"), 0, "on this server's node: nodeName"),
    (NODE_ONLY, True, endpoint(None, "z1"), 1, "the local cluster, elsewhere by nodeName"),
    (NODE_ONLY, False, endpoint("n1"), 2, "another cluster"),
    (NEITHER, True, endpoint("n1", "z1"), 0, "the local cluster"),
    (NEITHER, False, endpoint(), 1, "another cluster"),
    # by hints: the fields no longer count
    (Tiers("east", "n1", "z1", node_hints=True, zone_hints=True), True,
     endpoint("n1", "z1", Hints(frozenset({"z1"}), frozenset({"n1"}))), 0,
     "on this server's node: hints.forNodes"),
    (Tiers("east", "n1", "z1", node_hints=True, zone_hints=True), True,
     endpoint("n1", "z1", Hints(frozenset({"z1"}), frozenset({"n2"}))), 1,
     "in this server's zone: hints.forZones"),
    (Tiers("east", "n1", "z1", node_hints=True, zone_hints=True), True,
     endpoint("n1", "z1", Hints(frozenset({"z2"}), frozenset({"n2"}))), 2,
     "the local cluster, elsewhere by hints.forNodes and hints.forZones"),
    (Tiers("east", "n1", "z1", node_hints=True, zone_hints=True), True,
     endpoint("n1", "z1", None), 2,
     "the local cluster, elsewhere by hints.forNodes and hints.forZones"),
    (Tiers("east", "n1", "z1", node_hints=True), True,
     endpoint("n2", "z1", Hints(frozenset({"z2"}), frozenset({"n2"}))), 1,
     "in this server's zone: zone"),
    (Tiers("east", "n1", "z1", zone_hints=True), True,
     endpoint("n2", "z1", Hints(frozenset({"z2"}), frozenset({"n1"}))), 2,
     "the local cluster, elsewhere by nodeName and hints.forZones"),
    (Tiers("east", "n1", "z1", zone_hints=True), True,
     endpoint("n1", "z9", Hints(frozenset({"z2"}), frozenset())), 0,
     "on this server's node: nodeName"),
    (Tiers("east", "n1", "z1", node_hints=True), True,
     endpoint("n1", "z9", None), 2, "the local cluster, elsewhere by hints.forNodes and zone"),
])
def test_rank_and_why(tiers: Tiers, local: bool, one: Endpoint, rank: int, why: str) -> None:
    assert tiers.rank(local, one) == rank
    assert tiers.why(local, one) == why


def test_on_node_and_in_zone() -> None:
    by_hints = Tiers("east", "n1", "z1", node_hints=True, zone_hints=True)
    assert not by_hints.on_node(endpoint("n1", "z1", None))
    assert not by_hints.in_zone(endpoint("n1", "z1", None))
    hinted = endpoint("n9", "z9", Hints(frozenset({"z1"}), frozenset({"n1"})))
    assert by_hints.on_node(hinted) and by_hints.in_zone(hinted)
    assert not NODE_AND_ZONE.on_node(hinted) and not NODE_AND_ZONE.in_zone(hinted)


def hinted(zones: set[str], nodes: set[str]) -> Endpoint:
    return endpoint(hints=Hints(frozenset(zones), frozenset(nodes)))


@pytest.mark.parametrize(("tiers", "local", "node_hints", "zone_hints"), [
    (NODE_AND_ZONE, [hinted({"z1"}, {"n1"}), hinted({"z2"}, {"n2"})], True, True),
    (NODE_AND_ZONE, [hinted({"z1"}, {"n1"}), hinted({"z2"}, set())], False, True),
    (NODE_AND_ZONE, [hinted(set(), {"n1"}), hinted({"z2"}, {"n2"})], True, False),
    (NODE_AND_ZONE, [hinted({"z1"}, set()), hinted(set(), {"n1"})], False, False),
    (NODE_AND_ZONE, [hinted({"z1"}, {"n1"}), endpoint()], False, False),  # one without
    (NODE_AND_ZONE, [endpoint(), hinted({"z1"}, {"n1"})], False, False),
    (NODE_AND_ZONE, [], True, True),  # nothing local: the flags rank nothing
    (ZONE_ONLY, [hinted({"z1"}, {"n1"})], False, True),  # no node: no node level
    (NODE_ONLY, [hinted({"z1"}, {"n1"})], True, False),
    (NEITHER, [hinted({"z1"}, {"n1"})], False, False),
])
def test_following_hints_a_level_at_a_time(tiers: Tiers, local: list[Endpoint],
                                          node_hints: bool, zone_hints: bool) -> None:
    got = tiers.following(local)
    assert (got.node_hints, got.zone_hints) == (node_hints, zone_hints)
    assert (got.cluster, got.node, got.zone) == (tiers.cluster, tiers.node, tiers.zone)
    if not (node_hints or zone_hints) and local:
        assert got is tiers  # unchanged: the same object


def test_endpoint_ranks_by_first_address() -> None:
    a = [packed("10.0.0.5"), packed("fd00::1")]
    b = [packed("fd00::2"), packed("10.0.0.3")]  # its first in order is 10.0.0.3
    c = [packed("fd00::0")]
    d = [packed("10.0.0.3"), packed("10.0.0.9")]  # shares 10.0.0.3 with b: b ranks first
    ranks = endpoint_ranks([a, b, c, d])
    assert ranks == {packed("10.0.0.3"): 0, packed("fd00::2"): 0, packed("10.0.0.9"): 1,
                     packed("10.0.0.5"): 2, packed("fd00::1"): 2, packed("fd00::0"): 3}
    assert endpoint_ranks([]) == {}


@pytest.mark.parametrize(("count", "weight"), [
    (1, 100), (2, 50), (3, 33), (99, 1), (100, 1), (101, 1), (200, 1), (7, 14)])
def test_srv_weight(count: int, weight: int) -> None:
    assert srv_weight(count) == weight

