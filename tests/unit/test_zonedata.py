"""transfers/zonedata on its own: a snapshot holds every answer of the zone (stored, derived
from a service name's, and the compact index's endpoint names), the SOA's included, each
once; its records are the zone's but the SOA, grouped by RRset; a later update of the zone
never reaches it."""

from __future__ import annotations

import itertools
from ipaddress import ip_address

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.transfers import zonedata
from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.cache import Cache, Op, PutImport, PutSlice, SetSynced
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

HTTP = (Port("http", "tcp", 80),)


def zone_of(last: int = 3) -> Cache:
    """A ClusterSetIP service, a Headless one with named endpoints (the compact index)
    and one without a name; their _http._tcp SRV answers are derived from the service's."""
    cache = Cache(ZoneNames("clusterset.local"), 5)
    cache.apply([*service(last), SetSynced(True)])
    return cache


def service(last: int) -> list[Op]:
    endpoints = tuple(Endpoint((ip_address(f"10.2.0.{i}"),), f"h{i}") for i in range(last))
    return [PutImport(("ns", "web"), ServiceImport("ns", "web", ServiceType.CLUSTER_SET_IP,
                                                   (ip_address("10.1.0.1"),), HTTP)),
            PutImport(("ns", "db"), ServiceImport("ns", "db", ServiceType.HEADLESS, (), HTTP)),
            PutSlice(("ns", "db-east"), EndpointSlice(
                "ns", "db-east", "db", "east",
                (*endpoints, Endpoint((ip_address("fd00::1"),), None)), HTTP))]


def texts(pairs: list[tuple[bytes, wire.Answer]]) -> list[set[str]]:
    return [{rrs.record_text(r) for r in rrs.answer_records(key, answer)} for key, answer in pairs]


def test_a_snapshot_holds_every_answer_of_the_zone_once() -> None:
    zone = zone_of().zone
    assert zone.derived and zone.hosts  # the zone has each kind of answer
    pairs = list(zonedata.take(zone).pairs())
    every = list(zone.every_answer())
    assert len(pairs) == zone.count() == len(every)
    assert len({key for key, _ in pairs}) == len(pairs)
    assert sorted(zip((k for k, _ in pairs), map(sorted, texts(pairs)), strict=True)) == \
        sorted(zip((k for k, _ in every), map(sorted, texts(every)), strict=True))
    # to the byte: the derived SRV answers' glue pointers shifted as the zone's own
    assert sorted(whole(pairs)) == sorted(whole(every))


def whole(pairs: list[tuple[bytes, wire.Answer]]) -> list[tuple[bytes, bytes, bytes, int]]:
    return [(key, answer.heads[0], answer.body, answer.glue_at) for key, answer in pairs]


def test_its_records_are_the_zones_but_the_soa_grouped_by_rrset() -> None:
    zone = zone_of().zone
    records = list(zonedata.take(zone).records())
    everything = rrs.zone_records(zone.every_answer())
    soa = zonedata.soa(zone)
    assert soa.rtype == wire.SOA and soa in everything
    assert sorted(records) == sorted(everything - {soa}) and len(records) == len(everything) - 1
    groups = [key for key, _ in itertools.groupby(records, lambda r: (r.owner, r.rtype))]
    assert len(groups) == len(set(groups))


def test_a_later_update_never_reaches_a_snapshot() -> None:
    cache = zone_of()
    snapshot = zonedata.take(cache.zone)
    before = [(k, a.heads, a.body) for k, a in snapshot.pairs()]
    serial, generation = cache.zone.serial, cache.zone.generation
    cache.apply(service(5))
    assert cache.zone.serial != serial and cache.zone.generation != generation
    assert [(k, a.heads, a.body) for k, a in snapshot.pairs()] == before
    assert (snapshot.serial, snapshot.generation) == (serial, generation)
    assert snapshot.soa.rdata[-20:-16] == serial.to_bytes(4, "big")
    assert zonedata.soa(cache.zone).rdata[-20:-16] == cache.zone.serial.to_bytes(4, "big")
    assert len(list(zonedata.take(cache.zone).pairs())) == len(before) + 2  # h3, h4


def test_the_soa_key_is_the_apex_soa_question() -> None:
    zone = zone_of().zone
    assert zonedata.soa_key(zone) == zone.apex_wire + b"\x00\x06\x00\x01"
    assert zonedata.soa(zone).owner == zone.apex_wire
