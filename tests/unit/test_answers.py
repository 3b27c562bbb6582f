"""Answers of the handler over a small zone (docs/dns-behaviour.md §2 and §3).

The objects below are raw API dicts, converted by :mod:`convert` and put in a
:class:`Cache`; each row of the tables is one query and the whole expected
response as zone-file text (compared lower-cased and sorted; the SOA serial is
a placeholder). SRV weights follow CoreDNS: ``100 // n`` for an RRset of n.
"""

from __future__ import annotations

from typing import Any

import dns.flags
import dns.rcode
import pytest

from clusterset_dns.serving.handler import Handler
from clusterset_dns.zone.cache import SetSynced
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import DEFAULT_UDP_CAP, SOA, ask, build_cache, cookie, query, rcode_name, soa

IMPORTS = [
    service_import("web", ips=["10.1.0.1", "fd00::101"],
                   ports=[port(80, "TCP", "http"), port(53, "UDP", "dns"), port(8080)]),
    # tcp/42 + udp/42: one bare-name SRV record (the conformance suite checks this)
    service_import("v4", ips=["10.1.0.2"], ports=[port(42, "TCP", "a"), port(42, "UDP", "a")]),
    service_import("v6", ips=["fd00::102"], layout="status"),
    service_import("noips", ips=["not-an-ip"], layout="root"),
    service_import("db", type_="Headless", ports=[port(5432, "TCP", "pg")]),
    service_import("v6head", type_="Headless"),
    service_import("lonely", type_="Headless"),
    service_import("noslices", type_="Headless"),
    service_import("api", namespace="other", ips=["10.9.0.1"]),
    service_import("sig", ips=["10.1.0.5"], ports=[port(3868, "SCTP", "Diameter")]),
    # the only import of its namespace, and no endpoint: the namespace still exists
    service_import("idle", namespace="quiet", type_="Headless"),
]

SLICES = [
    endpoint_slice("db-east", "db", cluster="east", ports=[port(5432, "TCP", "pg")], endpoints=[
        endpoint("10.2.0.1", hostname="db-0"),
        endpoint("10.2.0.2"),
        endpoint("10.2.0.3", ready=False),
        endpoint("10.2.0.4", hostname="shared"),
        endpoint("10.2.0.5", hostname="shared"),
    ]),
    endpoint_slice("db-west", "db", cluster="west.eu",
                   ports=[port(5432, "TCP", "pg"), port(9000)],
                   endpoints=[endpoint("10.3.0.1", hostname="db-0")]),
    endpoint_slice("db-west-v6", "db", cluster="west.eu", address_type="IPv6",
                   ports=[port(5432, "TCP", "pg"), port(9000)], endpoints=[endpoint("fd00::201")]),
    # no source cluster: service-level answers only (10.2.0.1 again: answered once)
    endpoint_slice("db-anon", "db", ports=[port(5432, "TCP", "pg")],
                   endpoints=[endpoint("10.2.0.1"), endpoint("10.4.0.1")]),
    endpoint_slice("v6head-a", "v6head", cluster="east", address_type="IPv6",
                   endpoints=[endpoint("fd00::301")]),
    endpoint_slice("lonely-a", "lonely", cluster="east",
                   endpoints=[endpoint("10.5.0.1", ready=False)]),
    # same service label in another namespace: not a slice of prod/db
    endpoint_slice("db-other", "db", namespace="other", cluster="east",
                   ports=[port(5432, "TCP", "pg")], endpoints=[endpoint("10.8.0.1")]),
    # a slice of a ClusterSetIP import and one without any import: no records
    endpoint_slice("web-a", "web", cluster="east", endpoints=[endpoint("10.7.0.1")]),
    endpoint_slice("ghost-a", "ghost", namespace="ghostns", cluster="east",
                   endpoints=[endpoint("10.6.0.1")]),
]

Z = "svc.clusterset.local."
WEB, V4, V6, NOIPS = f"web.prod.{Z}", f"v4.prod.{Z}", f"v6.prod.{Z}", f"noips.prod.{Z}"
DB, V6HEAD, LONELY = f"db.prod.{Z}", f"v6head.prod.{Z}", f"lonely.prod.{Z}"
DB0_EAST, DB2_EAST, SHARED_EAST = f"db-0.east.{DB}", f"10-2-0-2.east.{DB}", f"shared.east.{DB}"
DB0_WEST, V6_WEST = f"db-0.west.eu.{DB}", f"fd00--201.west.eu.{DB}"
API = f"api.other.{Z}"

HINFO = 'IN HINFO "RFC8482" ""'


def rr(owner: str, rest: str, ttl: int = 5) -> str:
    return f"{owner} {ttl} IN {rest}"


WEB_GLUE = [rr(WEB, "A 10.1.0.1"), rr(WEB, "AAAA fd00::101")]
DB_GLUE = [
    rr(DB0_EAST, "A 10.2.0.1"), rr(DB2_EAST, "A 10.2.0.2"),
    rr(SHARED_EAST, "A 10.2.0.4"), rr(SHARED_EAST, "A 10.2.0.5"),
    rr(DB0_WEST, "A 10.3.0.1"), rr(V6_WEST, "AAAA fd00::201"),
]
DB_PG_TARGETS = [DB0_EAST, DB2_EAST, SHARED_EAST, DB0_WEST, V6_WEST]

NOERROR, NXDOMAIN, REFUSED = "NOERROR", "NXDOMAIN", "REFUSED"


def row(name: str, qtype: str, rcode: str, answer: list[str] | None = None,
        authority: list[str] | None = None, additional: list[str] | None = None,
        edns: bool = False, qclass: str = "IN", id: str | None = None) -> Any:
    expected = (rcode, sorted(x.lower() for x in answer or []),
                sorted(x.lower() for x in authority or []),
                sorted(x.lower() for x in additional or []))
    return pytest.param(name, qtype, qclass, edns, expected,
                        id=id or f"{name.removesuffix('.' + Z) or name}-{qtype}"
                        + ("-edns" if edns else "") + ("" if qclass == "IN" else f"-{qclass}"))


def nodata(name: str, qtype: str, **kw: Any) -> Any:
    return row(name, qtype, NOERROR, authority=[SOA], **kw)


def nxdomain(name: str, qtype: str, **kw: Any) -> Any:
    return row(name, qtype, NXDOMAIN, authority=[SOA], **kw)


def refused(name: str, qtype: str, **kw: Any) -> Any:
    return row(name, qtype, REFUSED, **kw)


ROWS = [
    # ClusterSetIP: A, AAAA, the missing family is NODATA
    row(WEB, "A", NOERROR, [rr(WEB, "A 10.1.0.1")]),
    row(WEB, "AAAA", NOERROR, [rr(WEB, "AAAA fd00::101")]),
    row("WEB.Prod.SVC.ClusterSet.Local.", "A", NOERROR, [rr(WEB, "A 10.1.0.1")]),
    row(WEB, "A", NOERROR, [rr(WEB, "A 10.1.0.1")], edns=True),
    row(V4, "A", NOERROR, [rr(V4, "A 10.1.0.2")]),
    nodata(V4, "AAAA"),
    nodata(V4, "AAAA", edns=True),
    row(V6, "AAAA", NOERROR, [rr(V6, "AAAA fd00::102")]),
    nodata(V6, "A"),
    nodata(NOIPS, "A"),  # exists although its only IP was invalid
    nodata(NOIPS, "AAAA"),
    nodata(WEB, "TXT"),
    nodata(WEB, "MX"),
    row(API, "A", NOERROR, [rr(API, "A 10.9.0.1")]),
    # ClusterSetIP SRV: named ports; bare name one record per distinct port
    row(f"_http._tcp.{WEB}", "SRV", NOERROR, [rr(f"_http._tcp.{WEB}", f"SRV 0 100 80 {WEB}")],
        additional=WEB_GLUE),
    row(f"_HTTP._Tcp.Web.prod.{Z}", "SRV", NOERROR,
        [rr(f"_http._tcp.{WEB}", f"SRV 0 100 80 {WEB}")], additional=WEB_GLUE),
    row(f"_dns._udp.{WEB}", "SRV", NOERROR, [rr(f"_dns._udp.{WEB}", f"SRV 0 100 53 {WEB}")],
        additional=WEB_GLUE, edns=True),
    row(WEB, "SRV", NOERROR, [rr(WEB, f"SRV 0 33 {p} {WEB}") for p in (80, 53, 8080)],
        additional=WEB_GLUE),
    row(V4, "SRV", NOERROR, [rr(V4, f"SRV 0 100 42 {V4}")], additional=[rr(V4, "A 10.1.0.2")]),
    row(f"_a._tcp.{V4}", "SRV", NOERROR, [rr(f"_a._tcp.{V4}", f"SRV 0 100 42 {V4}")],
        additional=[rr(V4, "A 10.1.0.2")]),
    row(f"_a._udp.{V4}", "SRV", NOERROR, [rr(f"_a._udp.{V4}", f"SRV 0 100 42 {V4}")],
        additional=[rr(V4, "A 10.1.0.2")]),
    row(f"_diameter._sctp.sig.prod.{Z}", "SRV", NOERROR,
        [rr(f"_diameter._sctp.sig.prod.{Z}", f"SRV 0 100 3868 sig.prod.{Z}")],
        additional=[rr(f"sig.prod.{Z}", "A 10.1.0.5")]),
    nxdomain(f"_diameter._tcp.sig.prod.{Z}", "SRV"),
    nxdomain(f"_http._udp.{WEB}", "SRV"),  # no such port/protocol pair
    nxdomain(f"_ftp._tcp.{WEB}", "SRV"),
    nodata(f"_http._tcp.{WEB}", "A"),
    nodata(f"_tcp.{WEB}", "SRV"),  # empty non-terminal above _http._tcp
    nodata(V6, "SRV"),  # no ports
    # Headless: the A/AAAA set, every ready address once, across clusters
    row(DB, "A", NOERROR, [rr(DB, f"A 10.{x}") for x in
                           ("2.0.1", "2.0.2", "2.0.4", "2.0.5", "3.0.1", "4.0.1")]),
    row(DB, "AAAA", NOERROR, [rr(DB, "AAAA fd00::201")]),
    row(DB.upper(), "AAAA", NOERROR, [rr(DB, "AAAA fd00::201")], edns=True),
    row(V6HEAD, "AAAA", NOERROR, [rr(V6HEAD, "AAAA fd00::301")]),
    nodata(V6HEAD, "A"),  # ready endpoints only in the other family
    nxdomain(LONELY, "A"),  # no ready endpoint at all
    nxdomain(LONELY, "AAAA"),
    nxdomain(LONELY, "SRV"),
    nxdomain(f"10-5-0-1.east.{LONELY}", "A"),
    nxdomain(f"noslices.prod.{Z}", "A"),
    # Headless per-endpoint names
    row(DB0_EAST, "A", NOERROR, [rr(DB0_EAST, "A 10.2.0.1")]),
    row(DB2_EAST, "A", NOERROR, [rr(DB2_EAST, "A 10.2.0.2")]),  # derived from the address
    row(SHARED_EAST, "A", NOERROR, [rr(SHARED_EAST, "A 10.2.0.4"),
                                    rr(SHARED_EAST, "A 10.2.0.5")]),
    row(DB0_WEST, "A", NOERROR, [rr(DB0_WEST, "A 10.3.0.1")]),  # dotted cluster id
    row(f"DB-0.West.EU.Db.Prod.{Z}", "A", NOERROR, [rr(DB0_WEST, "A 10.3.0.1")]),
    nodata(DB0_WEST, "AAAA"),
    row(V6_WEST, "AAAA", NOERROR, [rr(V6_WEST, "AAAA fd00::201")]),
    nodata(V6_WEST, "A"),
    row(f"fd00--301.east.{V6HEAD}", "AAAA", NOERROR,
        [rr(f"fd00--301.east.{V6HEAD}", "AAAA fd00::301")]),
    nxdomain(f"10-2-0-3.east.{DB}", "A"),  # not ready
    nxdomain(f"10-8-0-1.east.{DB}", "A"),  # a slice of other/db
    nxdomain(f"db.other.{Z}", "A"),  # slices alone make no service
    nxdomain(f"10-4-0-1.east.{DB}", "A"),  # its slice has no cluster id
    nxdomain(f"db-0.north.{DB}", "A"),
    nxdomain(f"x.{DB0_EAST}", "A"),
    # <clusterid>.<svc>...: reserved, an empty non-terminal: NODATA, not NXDOMAIN
    nodata(f"east.{DB}", "A"),
    nodata(f"east.{DB}", "SRV"),
    nodata(f"West.Eu.{DB}", "A"),
    nodata(f"eu.{DB}", "A"),
    nxdomain(f"west.{DB}", "A"),
    nodata(f"east.{V6HEAD}", "AAAA"),
    nxdomain(f"east.{WEB}", "A"),  # ClusterSetIP imports have no endpoint names
    nxdomain(f"10-7-0-1.east.{WEB}", "A"),
    # Headless SRV: targets are the endpoint names, their addresses in additional
    row(f"_pg._tcp.{DB}", "SRV", NOERROR,
        [rr(f"_pg._tcp.{DB}", f"SRV 0 20 5432 {t}") for t in DB_PG_TARGETS],
        additional=DB_GLUE),
    row(DB, "SRV", NOERROR,
        [rr(DB, f"SRV 0 14 5432 {t}") for t in DB_PG_TARGETS]
        + [rr(DB, f"SRV 0 14 9000 {t}") for t in (DB0_WEST, V6_WEST)],
        additional=DB_GLUE),
    nxdomain(f"_pg._udp.{DB}", "SRV"),
    nodata(DB0_EAST, "SRV"),
    # empty non-terminals of the tree
    nodata(Z, "A"),
    nodata(Z, "SOA"),
    nodata(f"prod.{Z}", "A"),
    nodata(f"Other.{Z}", "SRV"),
    nxdomain(f"empty.{Z}", "A"),  # a namespace without any import
    nodata(f"quiet.{Z}", "A"),
    nxdomain(f"idle.quiet.{Z}", "A"),
    nxdomain(f"ghostns.{Z}", "A"),  # only a slice there, no import
    nxdomain(f"ghost.ghostns.{Z}", "A"),
    nxdomain(f"nothere.prod.{Z}", "A"),
    nxdomain(f"foo.{WEB}", "A"),
    nxdomain("pod.clusterset.local.", "A"),
    nxdomain(f"x.web.prod.{Z}", "A", edns=True),
    # the zone's own names
    row("dns-version.clusterset.local.", "TXT", NOERROR,
        ['dns-version.clusterset.local. 28800 IN TXT "1.0.0"']),
    row("DNS-Version.ClusterSet.local.", "TXT", NOERROR,
        ['dns-version.clusterset.local. 28800 IN TXT "1.0.0"'], edns=True),
    nodata("dns-version.clusterset.local.", "A"),
    row("clusterset.local.", "SOA", NOERROR, [SOA]),
    row("ClusterSet.LOCAL.", "SOA", NOERROR, [SOA], edns=True),
    row("clusterset.local.", "NS", NOERROR,
        [rr("clusterset.local.", "NS ns.dns.clusterset.local.")]),
    nodata("clusterset.local.", "A"),
    nodata("clusterset.local.", "TXT"),
    # ANY: one HINFO (RFC 8482), never the whole node
    row(WEB, "ANY", NOERROR, [f"{WEB} 5 {HINFO}"]),
    row(DB, "ANY", NOERROR, [f"{DB} 5 {HINFO}"]),
    row(f"_http._tcp.{WEB}", "ANY", NOERROR, [f"_http._tcp.{WEB} 5 {HINFO}"]),
    row(DB0_EAST, "ANY", NOERROR, [f"{DB0_EAST} 5 {HINFO}"]),
    row("clusterset.local.", "ANY", NOERROR, [f"clusterset.local. 5 {HINFO}"], edns=True),
    row("dns-version.clusterset.local.", "ANY", NOERROR,
        [f"dns-version.clusterset.local. 5 {HINFO}"]),
    nodata(f"east.{DB}", "ANY"),  # reserved cluster-id name: no records, not even HINFO
    nodata(Z, "ANY"),
    nxdomain(f"nothere.prod.{Z}", "ANY"),
    nxdomain(LONELY, "ANY"),
    # outside the zone, another class, zone transfers: REFUSED, nothing else
    refused("example.com.", "A"),
    refused("example.com.", "A", edns=True),
    refused(".", "NS"),
    refused("local.", "SOA"),
    refused("xclusterset.local.", "A"),  # the zone name inside a label
    refused("clusterset.local.example.", "A"),
    refused("web.prod.svc.cluster.local.", "A"),
    refused("dns-version.clusterset.local.", "TXT", qclass="CH"),
    refused(WEB, "A", qclass="CH", edns=True),
    refused("version.bind.", "TXT", qclass="CH"),
    refused(WEB, "A", qclass="ANY"),
    refused("clusterset.local.", "AXFR"),
    refused("clusterset.local.", "IXFR"),
    refused(WEB, "AXFR", edns=True),
]


@pytest.fixture(scope="module")
def handler() -> Handler:
    return Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP)


@pytest.mark.parametrize(("qname", "qtype", "qclass", "edns", "expected"), ROWS)
def test_answer(handler: Handler, qname: str, qtype: str, qclass: str, edns: bool,
                expected: tuple[str, list[str], list[str], list[str]]) -> None:
    data = query(qname, qtype, rdclass=qclass, edns=0 if edns else None)
    reply = ask(handler, data, tcp=True)
    got = (rcode_name(reply.rcode), reply.answer, reply.authority, reply.additional)
    assert got == expected
    assert reply.msg.question[0].name.to_text() == qname  # the question, as sent
    assert (reply.msg.opt is not None) is edns
    # Over UDP (RFC 2181 9): the same bytes when they fit the client's limit; else the
    # answer without its additional section; else TC and no records.
    udp = ask(handler, data, tcp=False)
    limit = 1232 if edns else 512
    if len(reply.wire) <= limit:
        assert udp.wire == reply.wire
    elif udp.has(dns.flags.TC):
        assert (udp.answer, udp.authority, udp.additional) == ([], [], [])
    else:
        assert (udp.answer, udp.authority, udp.additional) == (reply.answer, reply.authority, [])
        assert len(udp.wire) <= limit


# -- flags, ID and case -----------------------------------------------------------------------

FLAG_QUERIES = [
    pytest.param(WEB, "A", {}, NOERROR, id="positive"),
    pytest.param(WEB, "A", {"edns": 0}, NOERROR, id="positive-edns"),
    pytest.param(WEB, "A", {"edns": 0, "options": [cookie()]}, NOERROR, id="positive-cookie"),
    pytest.param(f"nothere.prod.{Z}", "A", {}, NXDOMAIN, id="nxdomain"),
    pytest.param(V4, "AAAA", {"edns": 0}, NOERROR, id="nodata-edns"),
    pytest.param(Z, "A", {}, NOERROR, id="ent"),
]


@pytest.mark.parametrize(("rd", "cd"), [(False, False), (True, False), (False, True),
                                        (True, True)], ids=["-", "rd", "cd", "rd+cd"])
@pytest.mark.parametrize(("qname", "qtype", "kw", "rcode"), FLAG_QUERIES)
def test_flags(handler: Handler, qname: str, qtype: str, kw: dict[str, Any], rcode: str,
               rd: bool, cd: bool) -> None:
    for qid in (0, 1, 0x1234, 0xFFFF):
        reply = ask(handler, query(qname, qtype, rd=rd, cd=cd, qid=qid, **kw))
        assert reply.msg.id == qid
        assert rcode_name(reply.rcode) == rcode
        assert reply.has(dns.flags.QR)
        assert reply.has(dns.flags.AA)
        assert not reply.has(dns.flags.RA)
        assert not reply.has(dns.flags.TC)
        assert reply.has(dns.flags.RD) is rd
        assert reply.has(dns.flags.CD) is cd


@pytest.mark.parametrize(("rd", "cd"), [(False, False), (True, True)], ids=["-", "rd+cd"])
@pytest.mark.parametrize(("qname", "qtype", "qclass"), [
    ("example.com.", "A", "IN"), (WEB, "A", "CH"), ("clusterset.local.", "AXFR", "IN"),
])
def test_flags_refused(handler: Handler, qname: str, qtype: str, qclass: str, rd: bool,
                       cd: bool) -> None:
    reply = ask(handler, query(qname, qtype, rdclass=qclass, rd=rd, cd=cd, qid=4242))
    assert reply.msg.id == 4242
    assert reply.rcode == dns.rcode.REFUSED
    assert not reply.has(dns.flags.RA)
    assert reply.has(dns.flags.RD) is rd
    assert reply.has(dns.flags.CD) is cd


CASE_QUERIES = [
    ("WEB.Prod.SVC.ClusterSet.Local.", "A", {}),
    ("wEb.pRoD.svc.clusterset.local.", "AAAA", {"edns": 0}),
    ("web.prod.svc.clusterset.LOCAL.", "A", {"edns": 0, "options": [cookie()]}),
    (f"_HTTP._TCP.{WEB}", "SRV", {}),
    (f"Db.Prod.{Z}", "SRV", {"edns": 0}),
    (f"SHARED.East.db.prod.{Z}", "A", {}),
    ("Dns-Version.ClusterSet.Local.", "TXT", {}),
    ("CLUSTERSET.local.", "SOA", {}),
    ("CLUSTERSET.local.", "NS", {}),
    ("Web.Prod.svc.clusterset.local.", "ANY", {}),
]


@pytest.mark.parametrize(("qname", "qtype", "kw"), CASE_QUERIES,
                         ids=[f"{n}-{t}" for n, t, _ in CASE_QUERIES])
def test_answer_keeps_the_case_of_the_question(handler: Handler, qname: str, qtype: str,
                                               kw: dict[str, Any]) -> None:
    reply = ask(handler, query(qname, qtype, **kw))
    assert reply.msg.question[0].name.to_text() == qname
    assert reply.msg.answer
    for rrset in reply.msg.answer:
        assert rrset.name.to_text() == qname  # byte for byte, not only equal ignoring case


@pytest.mark.parametrize(("qname", "qtype"), [
    ("NotHere.Prod.svc.ClusterSet.local.", "A"), ("V4.PROD.svc.clusterset.local.", "AAAA"),
])
def test_negative_answer_keeps_the_question(handler: Handler, qname: str, qtype: str) -> None:
    reply = ask(handler, query(qname, qtype))
    assert reply.msg.question[0].name.to_text() == qname
    assert reply.authority == [SOA.lower()]


# -- before the first sync --------------------------------------------------------------------

UNSYNCED = [
    row(WEB, "A", NOERROR, [rr(WEB, "A 10.1.0.1")]),
    row(DB0_EAST, "A", NOERROR, [rr(DB0_EAST, "A 10.2.0.1")]),
    row("clusterset.local.", "SOA", NOERROR, [SOA]),
    nodata(V4, "AAAA"),
    nodata(f"east.{DB}", "A"),
    row(f"nothere.prod.{Z}", "A", "SERVFAIL"),
    row(f"nothere.prod.{Z}", "A", "SERVFAIL", edns=True),
    row(LONELY, "A", "SERVFAIL"),
    row(f"empty.{Z}", "A", "SERVFAIL"),
    refused("example.com.", "A"),
]


@pytest.mark.parametrize(("qname", "qtype", "qclass", "edns", "expected"), UNSYNCED)
def test_before_sync_servfail_instead_of_nxdomain(qname: str, qtype: str, qclass: str,
                                                  edns: bool, expected: Any) -> None:
    cache = build_cache(IMPORTS, SLICES, synced=False)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    data = query(qname, qtype, rdclass=qclass, edns=0 if edns else None)
    reply = ask(handler, data)
    assert (rcode_name(reply.rcode), reply.answer, reply.authority,
            reply.additional) == expected
    cache.apply([SetSynced(True)])
    after = ask(handler, data)
    if expected[0] == "SERVFAIL":
        assert after.rcode == dns.rcode.NXDOMAIN
        assert after.authority == [SOA.lower()]
    else:
        assert (rcode_name(after.rcode), after.answer, after.authority,
                after.additional) == expected


# -- TTL option -------------------------------------------------------------------------------

TTL_ROWS = [
    (WEB, "A", lambda t: ([rr(WEB, "A 10.1.0.1", t)], [], [])),
    (f"_http._tcp.{WEB}", "SRV", lambda t: (
        [rr(f"_http._tcp.{WEB}", f"SRV 0 100 80 {WEB}", t)], [],
        [rr(WEB, "A 10.1.0.1", t), rr(WEB, "AAAA fd00::101", t)])),
    (DB0_EAST, "A", lambda t: ([rr(DB0_EAST, "A 10.2.0.1", t)], [], [])),
    ("clusterset.local.", "SOA", lambda t: ([soa(t)], [], [])),
    ("clusterset.local.", "NS", lambda t: (
        [rr("clusterset.local.", "NS ns.dns.clusterset.local.", t)], [], [])),
    (WEB, "ANY", lambda t: ([f"{WEB} {t} {HINFO}"], [], [])),
    (f"nothere.prod.{Z}", "A", lambda t: ([], [soa(t)], [])),
    (V4, "AAAA", lambda t: ([], [soa(t)], [])),
    # the schema version keeps its own TTL
    ("dns-version.clusterset.local.", "TXT", lambda t: (
        ['dns-version.clusterset.local. 28800 IN TXT "1.0.0"'], [], [])),
]


@pytest.mark.parametrize("ttl", [0, 1, 3600])
@pytest.mark.parametrize(("qname", "qtype", "expected"), TTL_ROWS,
                         ids=[f"{n}-{t}" for n, t, _ in TTL_ROWS])
def test_ttl_option(ttl: int, qname: str, qtype: str, expected: Any) -> None:
    handler = Handler(build_cache(IMPORTS, SLICES, ttl=ttl).zone, DEFAULT_UDP_CAP)
    reply = ask(handler, query(qname, qtype))
    want = tuple(sorted(line.lower() for line in section) for section in expected(ttl))
    assert (reply.answer, reply.authority, reply.additional) == want


# -- name server addresses --------------------------------------------------------------------

NS_ROWS = [
    row("clusterset.local.", "NS", NOERROR,
        [rr("clusterset.local.", "NS ns.dns.clusterset.local.")],
        additional=[rr("ns.dns.clusterset.local.", "A 10.0.0.53"),
                    rr("ns.dns.clusterset.local.", "AAAA fd00::53")]),
    row("ns.dns.clusterset.local.", "A", NOERROR, [rr("ns.dns.clusterset.local.", "A 10.0.0.53")]),
    row("ns.dns.clusterset.local.", "AAAA", NOERROR,
        [rr("ns.dns.clusterset.local.", "AAAA fd00::53")]),
    nodata("dns.clusterset.local.", "A"),
]


@pytest.mark.parametrize(("qname", "qtype", "qclass", "edns", "expected"), NS_ROWS)
def test_ns_addresses(qname: str, qtype: str, qclass: str, edns: bool, expected: Any) -> None:
    from ipaddress import ip_address

    cache = build_cache(IMPORTS, SLICES, ns_addresses=[ip_address("fd00::53"),
                                                       ip_address("10.0.0.53")])
    reply = ask(Handler(cache.zone, DEFAULT_UDP_CAP), query(qname, qtype))
    assert (rcode_name(reply.rcode), reply.answer, reply.authority,
            reply.additional) == expected
