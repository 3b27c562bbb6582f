"""docs/dns-behaviour.md §2 (names) and the zone-level rules of §3.3-§3.4: apex,
dns-version, empty non-terminals, NXDOMAIN vs NODATA, case handling."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from .csdns_testlib import (
    DNS_VERSION_TTL,
    OBJECTS_DIR,
    SOA,
    ZONE,
    Dig,
    ServerProcess,
    a_records,
    check,
    check_nodata,
    check_nxdomain,
    rr,
    run_dig,
    svc,
)

APEX = f"{ZONE}."


# ---------------------------------------------------------------- apex


def test_apex_soa(dig: Dig) -> None:
    res = dig(APEX, "SOA")
    check(res, answer=[SOA])
    assert res.serials and res.serials[0] > 0, res.describe()


def test_apex_ns(dig: Dig) -> None:
    check(dig(APEX, "NS"), answer=[rr(APEX, "NS", f"ns.dns.{ZONE}.")])


@pytest.mark.parametrize("rtype", ["A", "AAAA", "TXT", "SRV"])
def test_apex_other_types_nodata(dig: Dig, rtype: str) -> None:
    check_nodata(dig(APEX, rtype))


def test_soa_serial_consistent_between_apex_and_negative_answers(dig: Dig) -> None:
    apex = dig(APEX, "SOA")
    neg = dig(svc("nosuch"), "A")
    check(apex, answer=[SOA])
    check_nxdomain(neg)
    assert apex.serials == neg.serials, f"{apex.describe()}\n{neg.describe()}"


# ---------------------------------------------------------------- dns-version


@pytest.mark.deviation
def test_dns_version_txt_is_mcs_schema_1_0_0(dig: Dig) -> None:
    name = f"dns-version.{ZONE}."
    check(dig(name, "TXT"), answer=[rr(name, "TXT", '"1.0.0"', ttl=DNS_VERSION_TTL)])


def test_dns_version_other_type_nodata(dig: Dig) -> None:
    check_nodata(dig(f"dns-version.{ZONE}.", "A"))


# ---------------------------------------------------------------- empty non-terminals

ENT_NODATA = [
    f"svc.{ZONE}.",
    f"conf.svc.{ZONE}.",  # imports exist in conf
    f"bulk.svc.{ZONE}.",
]


@pytest.mark.parametrize("name", ENT_NODATA, ids=[n.split(f".{ZONE}")[0] for n in ENT_NODATA])
@pytest.mark.parametrize("rtype", ["A", "SRV"])
def test_empty_non_terminal_nodata(dig: Dig, name: str, rtype: str) -> None:
    check_nodata(dig(name, rtype))


CLUSTER_ENT = [
    f"east.db.conf.svc.{ZONE}.",
    f"west.db.conf.svc.{ZONE}.",
    f"east.twohost.conf.svc.{ZONE}.",
    f"east.v6only.conf.svc.{ZONE}.",
]


@pytest.mark.deviation
@pytest.mark.parametrize("name", CLUSTER_ENT, ids=[n.split(".conf")[0] for n in CLUSTER_ENT])
@pytest.mark.parametrize("rtype", ["A", "AAAA", "SRV"])
def test_cluster_level_name_is_empty_non_terminal_nodata(dig: Dig, name: str, rtype: str) -> None:
    """``<clusterid>.<svc>...`` has no records but endpoint names below it:
    NODATA, not NXDOMAIN (RFC 8020). CoreDNS answers NXDOMAIN here."""
    check_nodata(dig(name, rtype))


NXDOMAIN_NAMES = [
    f"nosuchns.svc.{ZONE}.",  # namespace without imports
    f"orphan.svc.{ZONE}.",  # namespace with MCS slices but no import
    svc("nosuch"),
    f"nosuch.db.conf.svc.{ZONE}.",  # unknown cluster id
    f"east.notready.conf.svc.{ZONE}.",  # no endpoint name below (none ready)
    f"foo.{ZONE}.",
    f"a.b.c.{ZONE}.",
    f"conf.{ZONE}.",
    f"hello.conf.{ZONE}.",  # missing the svc label
    f"hello.conf.svc.svc.{ZONE}.",
    f"x.hello.conf.svc.{ZONE}.",
    f"x.dns-version.{ZONE}.",
    f"ns.dns.{ZONE}.x.{ZONE}.",
]


@pytest.mark.parametrize(
    "name", NXDOMAIN_NAMES, ids=[n.split(f".{ZONE}")[0] for n in NXDOMAIN_NAMES]
)
def test_nonexistent_name_nxdomain(dig: Dig, name: str) -> None:
    check_nxdomain(dig(name, "A"))


@pytest.mark.parametrize("rtype", ["A", "AAAA", "SRV", "TXT", "MX"])
def test_nxdomain_whatever_the_type(dig: Dig, rtype: str) -> None:
    check_nxdomain(dig(svc("nosuch"), rtype))


# ---------------------------------------------------------------- case


CASE_QUERIES = [
    ("HeLLo.CoNf.SvC.ClusterSet.LOCAL.", "A", ["10.42.0.10"]),
    ("HELLO.CONF.SVC.CLUSTERSET.LOCAL.", "AAAA", ["fd00:42::10"]),
    ("DB-0.EAST.Db.conf.svc.clusterset.local.", "A", ["10.1.0.1"]),
    ("10-2-0-1.WEST.db.CONF.svc.clusterset.local.", "A", ["10.2.0.1"]),
    ("FD00-6--2.East.V6only.conf.svc.clusterset.local.", "AAAA", ["fd00:6::2"]),
    (
        "Db.Conf.Svc.Clusterset.Local.",
        "A",
        ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2", "10.2.0.4"],
    ),
]


@pytest.mark.parametrize(
    ("qname", "rtype", "addrs"), CASE_QUERIES, ids=[q for q, _, _ in CASE_QUERIES]
)
def test_case_insensitive_match_keeps_question_case(
    dig: Dig, qname: str, rtype: str, addrs: list[str]
) -> None:
    res = dig(qname, rtype)
    check(res, answer=[rr(qname, rtype, a) for a in addrs])
    assert res.question == [f"{qname} IN {rtype}"], res.describe()


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_case_of_each_question_kept_across_repeated_queries(dig: Dig, transport: str) -> None:
    """Answers must not be reused with the case of an earlier question."""
    opts = ("+tcp",) if transport == "tcp" else ()
    for qname in (
        "hello.conf.svc.clusterset.local.",
        "HELLO.conf.svc.clusterset.local.",
        "hello.CONF.svc.clusterset.local.",
        "hello.conf.svc.clusterset.local.",
        "hElLo.cOnF.sVc.cLuStErSeT.lOcAl.",
    ):
        check(dig(qname, "A", *opts), answer=a_records(qname, ["10.42.0.10"]))


def test_case_insensitive_srv_owner_keeps_question_case(dig: Dig) -> None:
    qname = "_HTTP._Tcp.Named.Conf.svc.clusterset.local."
    res = dig(qname, "SRV")
    check(res)
    assert len(res.answer) == 1, res.describe()
    owner, ttl, cls, rtype, *rdata = res.answer[0].split()
    assert owner == qname, res.describe()
    assert [ttl, cls, rtype, *[x.lower() for x in rdata]] == [
        "5",
        "IN",
        "SRV",
        "0",
        "100",
        "80",
        svc("named"),
    ], res.describe()


@pytest.mark.parametrize(
    "qname", ["NoSuch.Conf.Svc.ClusterSet.Local.", "DB-2.EAST.DB.CONF.SVC.CLUSTERSET.LOCAL."]
)
def test_case_insensitive_nxdomain(dig: Dig, qname: str) -> None:
    check_nxdomain(dig(qname, "A"))


def test_case_insensitive_nodata(dig: Dig) -> None:
    check_nodata(dig("V4ONLY.conf.svc.clusterset.local.", "AAAA"))


@pytest.mark.parametrize("qname", ["CLUSTERSET.LOCAL.", "ClusterSet.Local."])
def test_case_insensitive_apex(dig: Dig, qname: str) -> None:
    res = dig(qname, "SOA")
    check(res)
    assert len(res.answer) == 1 and res.answer[0].lower() == SOA.lower(), res.describe()
    assert res.answer[0].split()[0] == qname, res.describe()


@pytest.mark.own_server
def test_0x20_questions_get_their_own_case_back_from_two_workers(
    start_server: Callable[..., ServerProcess],
) -> None:
    """Resolvers using DNS 0x20 (Unbound) spell every name in a random case. With two
    workers (the kernel spreads dig's source ports over both), each spelling, asked
    twice, with and without EDNS, gets its own question and owner names back and the
    right records; so does the lower-case name asked between them (which may come
    from the remembered responses), and a lower-case name asked for a type whose low
    byte is a capital letter's (HTTPS, 65)."""
    srv = start_server(OBJECTS_DIR, "--workers", "2")
    rng = random.Random(0x20)
    hello = "hello.conf.svc.clusterset.local."
    for turn in range(8):
        spelled = "".join(c.upper() if rng.getrandbits(1) else c for c in hello)
        for qname in (spelled, spelled, hello):
            opts = ("+edns=0",) if turn % 2 else ("+noedns",)
            res = run_dig(srv.host, srv.port, qname, "A", *opts)
            check(res, answer=a_records(qname, ["10.42.0.10"]))
            assert res.question == [f"{qname} IN A"], res.describe()
        missing = "".join(c.upper() if rng.getrandbits(1) else c for c in svc("nosuch"))
        res = run_dig(srv.host, srv.port, missing, "A")
        check_nxdomain(res)
        assert res.question == [f"{missing} IN A"], res.describe()
    for _ in range(2):
        res = run_dig(srv.host, srv.port, hello, "TYPE65")
        check_nodata(res)
        assert res.question == [f"{hello} IN HTTPS"], res.describe()
