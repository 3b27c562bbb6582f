"""zone/records.py's build of a Headless service, table by table: which endpoints are one
(a hostname in a cluster, across slices and families), the order a truncated answer
keeps them in, the SRV records' order and priorities with tiers, and the glue of a name
with several addresses. Records are read in the order they are on the wire (helpers'
render sorts them). Written for the survivors of ``scripts/mutate
clusterset_dns/zone/records.py`` in ``RecordBuilder._headless``."""

from __future__ import annotations

import ipaddress
import struct

import dns.message
import pytest

from clusterset_dns.base import names
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.zone import truncate, wire
from clusterset_dns.zone.model import (
    Endpoint,
    Endpoints,
    EndpointSlice,
    Port,
    Prefer,
    ServiceImport,
    ServiceType,
)
from clusterset_dns.zone.records import Built, RecordBuilder

ZONE = ZoneNames("clusterset.local")
HTTP = (Port("http", "tcp", 80),)


def question(labels: tuple[bytes, ...], rtype: int) -> bytes:
    return names.to_wire(labels) + struct.pack("!HH", rtype, wire.CLASS_IN)


def in_order(key: bytes, heads: bytes, body: bytes) -> tuple[list[str], list[str]]:
    """(answer, additional) rdata as zone-file text, in the order of the wire."""
    msg = dns.message.from_wire(b"\x00\x00" + heads + key + body)
    return ([rdata.to_text() for rrset in msg.answer for rdata in rrset],
            [f"{rrset.name} {rdata.to_text()}" for rrset in msg.additional for rdata in rrset])


def cut_order(out: Built, key: bytes, rotation: int = 0) -> list[str]:
    """The addresses a UDP client without EDNS gets in the truncated answer to ``key``."""
    form = out.cuts[key].form(rotation, truncate._NO_EDNS_ROOM - len(key), 12 + len(key))
    assert form is not None
    heads, body = form
    return in_order(key, heads[0], body)[0]


def headless(name: str = "web", prefer: Prefer = Prefer.NOTHING) -> ServiceImport:
    return ServiceImport("prod", name, ServiceType.HEADLESS, b"", HTTP, prefer)


def piece(name: str, cluster: str | None, *endpoints: Endpoint,
          ports: tuple[Port, ...] = HTTP) -> EndpointSlice:
    return EndpointSlice("prod", name, name.rsplit("-", 1)[0], cluster,
                         Endpoints.of(list(endpoints)), ports)


def ep(*ips: str, hostname: str | None = None, zone: str | None = None) -> Endpoint:
    return Endpoint(tuple(ipaddress.ip_address(ip) for ip in ips), hostname, zone)


# -- which endpoints are one: the truncated AAAA answer keeps them in the A answer's order ---

# 20 endpoints, one slice a family as Kubernetes writes them: web-NN has 10.0.0.(NN+1)
# and fd00::(20-NN), so the AAAA records in numeric order are the endpoints backwards
V4 = [ep(f"10.0.0.{i + 1}", hostname=f"web-{i:02d}") for i in range(20)]
V6 = [ep(f"fd00::{20 - i:x}", hostname=f"web-{i:02d}") for i in range(20)]
BY_ENDPOINT = [f"fd00::{20 - i:x}" for i in range(20)]


@pytest.mark.parametrize("slices", [
    [piece("web-v4", "east", *V4), piece("web-v6", "east", *V6)],
    [piece("web-v6", "east", *V6), piece("web-v4", "east", *V4)],  # the v6 slice first
])
def test_a_dual_stack_endpoint_is_one_by_its_hostname_across_its_slices(
        slices: list[EndpointSlice]) -> None:
    """The AAAA answer cut for a small client keeps endpoints in the order of their first
    address (the IPv4 one), as the A answer does, not the AAAA records' numeric order."""
    out = RecordBuilder(ZONE, 5).service(headless(), slices)
    key = question(ZONE.service("prod", "web"), wire.AAAA)
    kept = cut_order(out, key)
    assert 2 <= len(kept) < 20
    assert kept == BY_ENDPOINT[: len(kept)]
    # the answer itself stays in numeric order
    assert in_order(key, out.answers[key].heads[0], out.answers[key].body)[0] == \
        sorted(BY_ENDPOINT, key=lambda ip: int(ipaddress.ip_address(ip)))


def test_endpoints_of_one_hostname_in_two_clusters_are_two_endpoints() -> None:
    """The same hostname in another cluster is another endpoint: its AAAA address takes
    the place of its own first address (each cluster's v6-only endpoint ranks after
    every IPv4 address)."""
    west_v6 = [ep(f"fd00::{100 + i:x}", hostname=f"web-{i:02d}") for i in range(20)]
    out = RecordBuilder(ZONE, 5).service(headless(), [
        piece("web-v4", "east", *V4), piece("web-v6", "east", *V6),
        piece("web-w6", "west", *west_v6)])
    kept = cut_order(out, question(ZONE.service("prod", "web"), wire.AAAA))
    assert kept == BY_ENDPOINT[: len(kept)]


def test_endpoints_without_a_hostname_keep_their_own_places_in_the_rotation() -> None:
    """40 endpoints of one cluster without hostnames are 40 endpoints: the 4 rotations
    of the truncated A answer start a quarter further each."""
    out = RecordBuilder(ZONE, 5).service(headless(), [
        piece("web-a", "east", *[ep(f"10.0.0.{i + 1}") for i in range(40)])])
    key = question(ZONE.service("prod", "web"), wire.A)
    assert [cut_order(out, key, r)[0] for r in range(truncate.ROTATIONS)] == \
        ["10.0.0.1", "10.0.0.11", "10.0.0.21", "10.0.0.31"]


def test_endpoints_with_the_same_first_address_keep_the_order_of_their_slices() -> None:
    """Two endpoints whose first addresses are equal rank as their slices sort: a slice
    without a cluster first, then by cluster id ("1" sorts before any letter)."""
    others = [ep(f"fd00::{0x100 + i:x}") for i in range(20)]  # enough AAAA to be cut
    out = RecordBuilder(ZONE, 5).service(headless(), [
        piece("web-b", "1", ep("10.0.0.1", "fd00::1")),
        piece("web-a", None, ep("10.0.0.1", "fd00::9"), *others)])
    kept = cut_order(out, question(ZONE.service("prod", "web"), wire.AAAA))
    assert kept[:2] == ["fd00::9", "fd00::1"]


def test_a_long_named_service_with_few_addresses_cuts_aaaa_by_endpoint() -> None:
    """Under the longest service name few AAAA records fill a small client's room (11 of
    28 bytes): 4 dual-stack endpoints and 8 with IPv6 only (16 addresses, 12 AAAA
    records) still keep the dual-stack endpoints first, in the order of their IPv4
    addresses, then the others by their own."""
    name, namespace = "w" * 63, "n" * 63
    labels = ZONE.service(namespace, name)
    key = question(labels, wire.AAAA)
    assert len(key) == 154 and (truncate._NO_EDNS_ROOM - len(key)) // 28 == 11
    v4 = [ep(f"10.0.0.{i + 1}", hostname=f"h{i}") for i in range(4)]
    v6 = [ep(f"fd00::{0xF3 - i:x}", hostname=f"h{i}") for i in range(4)]
    v6 += [ep(f"fd00::{0xA0 + i:x}", hostname=f"x{i}") for i in range(8)]
    imp = ServiceImport(namespace, name, ServiceType.HEADLESS, b"", HTTP)
    out = RecordBuilder(ZONE, 5).service(imp, [
        EndpointSlice(namespace, "s4", name, "east", Endpoints.of(v4), HTTP),
        EndpointSlice(namespace, "s6", name, "east", Endpoints.of(v6), HTTP)])
    assert cut_order(out, key) == ["fd00::f3", "fd00::f2", "fd00::f1", "fd00::f0",
                                   *(f"fd00::{0xA0 + i:x}" for i in range(7))]


# -- SRV records with tiers: lowest rank first, then port, then target -----------------------

def srv_text(out: Built, owner: tuple[bytes, ...]) -> list[str]:
    key = question(owner, wire.SRV)
    return in_order(key, out.answers[key].heads[0], out.answers[key].body)[0]


def tiered(cluster_id: str, topology_zone: str | None = None) -> RecordBuilder:
    made = RecordBuilder(ZONE, 5, cluster_id, topology_zone)
    made.lazy = False
    return made


def test_a_preferring_services_srv_lists_the_local_cluster_first() -> None:
    """The local cluster (west) sorts after east by name, yet its records come first."""
    out = tiered(cluster_id="west").service(headless(prefer=Prefer.ZONE), [
        piece("web-e", "east", ep("10.0.0.1", hostname="web-0")),
        piece("web-w", "west", ep("10.0.0.2", hostname="web-0"))])
    svc = "web.prod.svc.clusterset.local."
    assert srv_text(out, ZONE.service("prod", "web")) == [
        f"0 100 80 web-0.west.{svc}", f"1 100 80 web-0.east.{svc}"]


def test_srv_records_of_one_rank_and_port_are_in_target_order() -> None:
    """Endpoints listed web-1 then web-0 in their slice: the records follow the names."""
    out = tiered(cluster_id="east").service(headless(prefer=Prefer.ZONE), [
        piece("web-e", "east", ep("10.0.0.2", hostname="web-1"),
              ep("10.0.0.1", hostname="web-0"))])
    svc = "web.prod.svc.clusterset.local."
    assert srv_text(out, ZONE.service("prod", "web")) == [
        f"0 50 80 web-0.east.{svc}", f"0 50 80 web-1.east.{svc}"]


def test_an_endpoint_name_in_two_slices_takes_its_best_rank() -> None:
    """web-0 is in the server's zone in slice web-a and outside it in web-b (listed
    after): its SRV record keeps priority 0; web-1, outside the zone, gets priority 1."""
    out = tiered(cluster_id="east", topology_zone="z1").service(headless(prefer=Prefer.ZONE), [
        piece("web-a", "east", ep("10.0.0.1", hostname="web-0", zone="z1")),
        piece("web-b", "east", ep("10.0.0.1", hostname="web-0", zone="z2"),
              ep("10.0.0.2", hostname="web-1", zone="z2"))])
    svc = "web.prod.svc.clusterset.local."
    assert srv_text(out, ZONE.service("prod", "web")) == [
        f"0 100 80 web-0.east.{svc}", f"1 100 80 web-1.east.{svc}"]


# -- an endpoint name with several addresses: sorted, each once -------------------------------

@pytest.mark.parametrize("lazy", [True, False])
def test_a_name_with_addresses_from_two_slices_has_them_sorted_in_the_glue(lazy: bool) -> None:
    """web-0's AAAA comes from slice web-a, its A from web-b: the SRV answer's glue lists
    the IPv4 address first, as sorted."""
    made = RecordBuilder(ZONE, 5)
    made.lazy = lazy
    out = made.service(headless(), [
        piece("web-a", "east", ep("fd00::1", hostname="web-0")),
        piece("web-b", "east", ep("10.0.0.1", hostname="web-0"))])
    key = question(ZONE.service("prod", "web"), wire.SRV)
    name = "web-0.east.web.prod.svc.clusterset.local."
    assert in_order(key, out.answers[key].heads[0], out.answers[key].body) == (
        [f"0 100 80 {name}"], [f"{name} 10.0.0.1", f"{name} fd00::1"])
    # both families answered by the name itself, encoded now (not one-address: no index)
    assert out.hosts == {}
    for rtype, address in ((wire.A, "10.0.0.1"), (wire.AAAA, "fd00::1")):
        own = names.to_wire(names.EndpointNames(ZONE.service("prod", "web"),
                                                names.subdomain("east")).name("web-0")[0])
        own_key = own + struct.pack("!HH", rtype, wire.CLASS_IN)
        answer = out.answers[own_key]
        assert in_order(own_key, answer.heads[0], answer.body)[0] == [address]
