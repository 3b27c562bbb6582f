"""The records decoded from stored answers (:mod:`rrs`), which ``dump`` prints and zone
transfers send, checked against dnspython parsing the very same responses.

dnspython is an implementation independent of our encoder and of :mod:`rrs`; a zone
with every kind of record (addresses of both families, SRV with glue, TXT, the apex
SOA and NS with in-zone addresses, names compressed against the question and against
each other) must decode to the same lines both ways.
"""

from __future__ import annotations

import struct
from ipaddress import ip_address

import dns.message
import dns.name
import dns.rdatatype
import pytest

from clusterset_dns.process.dump import zone_lines
from clusterset_dns.zone import rrs, wire
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import build_cache

ZONE_OBJECTS = (
    [
        service_import("web", ips=["10.1.0.1", "fd00::101"],
                       ports=[port(80, "TCP", "http"), port(53, "UDP", "dns")]),
        service_import("db", type_="Headless", ports=[port(5432, "TCP", "pg")]),
        service_import("empty", ips=[]),
    ],
    [
        endpoint_slice("db-east", "db", cluster="east",
                       endpoints=[endpoint("10.2.0.1", hostname="db-0"),
                                  endpoint("10.2.0.2")],
                       ports=[port(5432, "TCP", "pg")]),
        endpoint_slice("db-west6", "db", cluster="west", address_type="IPv6",
                       endpoints=[endpoint("fd00::201")], ports=[port(5432, "TCP", "pg")]),
    ],
)


def oracle_lines(answers: dict[bytes, wire.Answer]) -> set[str]:
    """Each answer as the full response a client gets, parsed by dnspython."""
    lines: set[str] = set()
    for key, answer in answers.items():
        response = dns.message.from_wire(b"\x00\x00" + answer.heads[0] + key + answer.body)
        for rrset in response.answer:
            for rdata in rrset:
                lines.add(f"{rrset.name.to_text().lower()} {rrset.ttl} IN "
                          f"{dns.rdatatype.to_text(rrset.rdtype)} {rdata.to_text()}")
    return lines


def test_zone_lines_match_an_independent_parser() -> None:
    ns_addresses = [ip_address("10.0.0.53"), ip_address("fd00::53")]
    cache = build_cache(*ZONE_OBJECTS, ns_addresses=ns_addresses)
    lines = zone_lines(cache)
    assert len(lines) == len(set(lines)), "a record printed twice"
    assert set(lines) == oracle_lines(dict(cache.zone.every_answer()))
    # The kinds of record the zone must contain for this comparison to mean something.
    kinds = {line.split(" ")[3] for line in lines}
    assert kinds == {"A", "AAAA", "SRV", "TXT", "SOA", "NS"}


def test_zone_lines_are_ordered_by_owner_from_the_root_down() -> None:
    lines = zone_lines(build_cache(*ZONE_OBJECTS))
    owners = [tuple(reversed(line.split(" ")[0].rstrip(".").split("."))) for line in lines]
    assert owners == sorted(owners)
    assert lines[0].startswith("clusterset.local. ")


TABLE = [
    # (question name, type, the answer section as zone-file text)
    ("web.prod.svc.clusterset.local.", wire.A,
     {"web.prod.svc.clusterset.local. 5 IN A 10.1.0.1"}),
    ("web.prod.svc.clusterset.local.", wire.AAAA,
     {"web.prod.svc.clusterset.local. 5 IN AAAA fd00::101"}),
    # The additional section (glue) is not part of the RRset asked for.
    ("_pg._tcp.db.prod.svc.clusterset.local.", wire.SRV,
     {"_pg._tcp.db.prod.svc.clusterset.local. 5 IN SRV 0 33 5432 "
      "db-0.east.db.prod.svc.clusterset.local.",
      "_pg._tcp.db.prod.svc.clusterset.local. 5 IN SRV 0 33 5432 "
      "10-2-0-2.east.db.prod.svc.clusterset.local.",
      "_pg._tcp.db.prod.svc.clusterset.local. 5 IN SRV 0 33 5432 "
      "fd00--201.west.db.prod.svc.clusterset.local."}),
    ("db-0.east.db.prod.svc.clusterset.local.", wire.A,
     {"db-0.east.db.prod.svc.clusterset.local. 5 IN A 10.2.0.1"}),
    ("clusterset.local.", wire.NS, {"clusterset.local. 5 IN NS ns.dns.clusterset.local."}),
    ("dns-version.clusterset.local.", wire.TXT,
     {'dns-version.clusterset.local. 28800 IN TXT "1.0.0"'}),
]


@pytest.mark.parametrize(("qname", "qtype", "want"), TABLE)
def test_answer_records(qname: str, qtype: int, want: set[str]) -> None:
    cache = build_cache(*ZONE_OBJECTS)
    key = dns.name.from_text(qname).to_wire() + struct.pack("!HH", qtype, wire.CLASS_IN)
    stored = dict(cache.zone.every_answer())[key]
    got = {rrs.record_text(r) for r in rrs.answer_records(key, stored)}
    assert got == want


def test_soa_names_are_expanded_in_rdata() -> None:
    cache = build_cache(*ZONE_OBJECTS)
    key = b"\x0aclusterset\x05local\x00" + struct.pack("!HH", wire.SOA, wire.CLASS_IN)
    (record,) = rrs.answer_records(key, dict(cache.zone.every_answer())[key])
    # No pointer survives: the rdata means the same outside its message.
    assert record.rdata.startswith(b"\x02ns\x03dns\x0aclusterset\x05local\x00"
                                   b"\x0ahostmaster\x0aclusterset\x05local\x00")
    assert rrs.record_text(record).split(" ")[6] == str(cache.zone.serial)


def test_a_damaged_answer_is_an_error_not_garbage() -> None:
    cache = build_cache(*ZONE_OBJECTS)
    key = dns.name.from_text("_pg._tcp.db.prod.svc.clusterset.local.").to_wire() + \
        struct.pack("!HH", wire.SRV, wire.CLASS_IN)
    good = dict(cache.zone.every_answer())[key]
    cut = wire.Answer(good.heads, good.body[:20], good.rcode)
    with pytest.raises(rrs.DecodeError):
        list(rrs.answer_records(key, cut))
    # A pointer to itself: the loop is noticed.
    looped = wire.Answer(wire.heads(0, 1, 0, 0), _self_pointer(len(key)), 0)
    with pytest.raises(rrs.DecodeError):
        list(rrs.answer_records(key, looped))


def _self_pointer(key_len: int) -> bytes:
    """An answer record whose owner name is a pointer to itself."""
    at = 12 + key_len
    return struct.pack("!H", 0xC000 | at) + struct.pack("!HHIH", wire.A, 1, 5, 4) + bytes(4)
