"""docs/dns-behaviour.md §3.5-§3.7: ANY, classes, out-of-zone, zone
transfers, header flags, TTLs, EDNS0 (with dig)."""

from __future__ import annotations

import pytest

from .csdns_testlib import (
    DNS_VERSION_TTL,
    SOA,
    TTL,
    ZONE,
    Dig,
    DigResult,
    check,
    check_nxdomain,
    rr,
    svc,
)

HELLO = svc("hello")


def check_refused(res: DigResult) -> None:
    check(res, "REFUSED", answer=[], authoritative=False)
    assert "ra" not in res.flags, res.describe()


# ---------------------------------------------------------------- ANY (RFC 8482)

ANY_EXISTING = [
    HELLO,
    svc("db"),
    f"db-0.east.db.conf.svc.{ZONE}.",
    f"_http._tcp.{svc('named')}",
    f"{ZONE}.",
]


# dig 9.18 sends ANY over TCP unless told +notcp
TRANSPORT_OPTS = {"udp": ("+notcp",), "tcp": ("+tcp",)}


@pytest.mark.parametrize("name", ANY_EXISTING, ids=[n.split(".svc")[0] for n in ANY_EXISTING])
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_any_on_existing_name_is_minimal_hinfo(dig: Dig, name: str, transport: str) -> None:
    res = dig(name, "ANY", *TRANSPORT_OPTS[transport])
    check(res, answer=[rr(name, "HINFO", '"RFC8482" ""')])
    assert res.transport == transport.upper(), f"not sent over {transport}\n{res.describe()}"


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_any_on_missing_name_nxdomain(dig: Dig, transport: str) -> None:
    res = dig(svc("nosuch"), "ANY", *TRANSPORT_OPTS[transport])
    check_nxdomain(res)
    assert res.transport == transport.upper(), f"not sent over {transport}\n{res.describe()}"


# ---------------------------------------------------------------- classes

OTHER_CLASSES = [
    (HELLO, "A", "CH"),
    (f"{ZONE}.", "SOA", "CH"),
    ("version.bind.", "TXT", "CH"),
    ("hostname.bind.", "TXT", "CH"),
    (HELLO, "A", "HS"),
    (HELLO, "A", "ANY"),
]


@pytest.mark.parametrize(
    ("name", "rtype", "rdclass"),
    OTHER_CLASSES,
    ids=[f"{c}-{n.split('.')[0]}-{t}" for n, t, c in OTHER_CLASSES],
)
def test_class_other_than_in_refused(dig: Dig, name: str, rtype: str, rdclass: str) -> None:
    check_refused(dig(name, rtype, rdclass=rdclass))


# ---------------------------------------------------------------- outside the zone

OUTSIDE = [
    (".", "NS"),  # CoreDNS's forward health check
    (".", "SOA"),
    ("example.com.", "A"),
    ("local.", "SOA"),
    ("cluster.local.", "SOA"),
    ("hello.conf.svc.cluster.local.", "A"),  # the mcs-api "local service" name
    ("fooclusterset.local.", "A"),  # shares a suffix string, not a label
    ("clusterset.local.example.com.", "A"),
    ("10.0.42.10.in-addr.arpa.", "PTR"),
]


@pytest.mark.parametrize(("name", "rtype"), OUTSIDE, ids=[f"{n}-{t}" for n, t in OUTSIDE])
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_outside_zone_refused(dig: Dig, name: str, rtype: str, transport: str) -> None:
    opts = ("+tcp",) if transport == "tcp" else ()
    check_refused(dig(name, rtype, *opts))


def test_outside_zone_with_recursion_desired_still_refused(dig: Dig) -> None:
    res = dig("example.com.", "A", "+rec")
    check_refused(res)
    assert "rd" in res.flags, res.describe()


# ---------------------------------------------------------------- zone transfers


@pytest.mark.parametrize("rtype", ["AXFR", "IXFR=1"])
def test_zone_transfer_refused(dig: Dig, rtype: str) -> None:
    # dig prints the header of a failed transfer only with +comments
    res = dig(f"{ZONE}.", rtype, "+comments")
    assert res.responded, res.describe()
    assert res.rcode == "REFUSED", res.describe()
    assert res.answer == [], res.describe()


# ---------------------------------------------------------------- flags

FLAG_CASES = [
    ("positive", HELLO, "A", "NOERROR", True),
    ("nodata", svc("v4only"), "AAAA", "NOERROR", True),
    ("nxdomain", svc("nosuch"), "A", "NXDOMAIN", True),
    ("refused", "example.com.", "A", "REFUSED", False),
]


@pytest.mark.parametrize(
    ("kind", "name", "rtype", "rcode", "in_zone"), FLAG_CASES, ids=[c[0] for c in FLAG_CASES]
)
@pytest.mark.parametrize("rd", ["+rec", "+norec"])
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_flags_aa_set_ra_clear_rd_echoed(
    dig: Dig, kind: str, name: str, rtype: str, rcode: str, in_zone: bool, rd: str, transport: str
) -> None:
    opts = [rd] + (["+tcp"] if transport == "tcp" else [])
    res = dig(name, rtype, *opts)
    check(res, rcode, authoritative=in_zone)
    assert "ra" not in res.flags, res.describe()
    assert ("rd" in res.flags) == (rd == "+rec"), f"RD not echoed\n{res.describe()}"
    assert "tc" not in res.flags, res.describe()
    assert res.transport == transport.upper(), res.describe()
    assert res.opcode == "QUERY", res.describe()


@pytest.mark.parametrize("flag", ["+adflag", "+cdflag"])
def test_ad_cd_query_bits_do_not_break_answers(dig: Dig, flag: str) -> None:
    res = dig(HELLO, "A", flag)
    check(res, answer=[rr(HELLO, "A", "10.42.0.10")])
    assert "ad" not in res.flags, "the zone is not signed: AD must be clear\n" + res.describe()


# ---------------------------------------------------------------- TTL

TTL_QUERIES = [
    (HELLO, "A"),
    (HELLO, "SRV"),
    (svc("db"), "SRV"),
    (f"_pg._tcp.{svc('db')}", "SRV"),
    (f"db-0.east.db.conf.svc.{ZONE}.", "A"),
    (svc("v6only"), "AAAA"),
    (f"{ZONE}.", "SOA"),
    (f"{ZONE}.", "NS"),
    (svc("nosuch"), "A"),
    (svc("v4only"), "AAAA"),
    (HELLO, "ANY"),
]
TTL_OPTS = {"ANY": ("+notcp",)}


@pytest.mark.parametrize(
    ("name", "rtype"), TTL_QUERIES, ids=[f"{n.split('.svc')[0]}-{t}" for n, t in TTL_QUERIES]
)
def test_every_record_has_default_ttl_5(dig: Dig, name: str, rtype: str) -> None:
    res = dig(name, rtype, *TTL_OPTS.get(rtype, ()))
    check(res, "NXDOMAIN" if "nosuch" in name else "NOERROR")
    records = res.answer + res.authority + res.additional
    assert records, res.describe()
    for line in records:
        assert line.split()[1] == str(TTL), f"TTL of {line!r} is not {TTL}\n{res.describe()}"


def test_dns_version_ttl_28800(dig: Dig) -> None:
    res = dig(f"dns-version.{ZONE}.", "TXT")
    check(res)
    assert len(res.answer) == 1 and res.answer[0].split()[1] == str(DNS_VERSION_TTL), res.describe()


def test_negative_answer_soa_ttl_and_minimum(dig: Dig) -> None:
    res = dig(svc("nosuch"), "A")
    check(res, "NXDOMAIN", authority=[SOA])
    fields = res.authority[0].split()
    assert fields[1] == str(TTL) and fields[-1] == str(TTL), res.describe()


# ---------------------------------------------------------------- EDNS0


def test_edns_opt_echoed_with_capped_udp_size(dig: Dig) -> None:
    res = dig(HELLO, "A", "+bufsize=4096")
    check(res, answer=[rr(HELLO, "A", "10.42.0.10")])
    assert res.opt is not None, "no OPT record in the answer\n" + res.describe()
    assert res.opt.get("version") == "0", res.describe()
    assert res.udp_size == 1232, f"UDP size {res.udp_size}, expected 1232\n{res.describe()}"


@pytest.mark.parametrize(
    ("name", "rtype", "rcode"),
    [
        (HELLO, "A", "NOERROR"),
        (svc("nosuch"), "A", "NXDOMAIN"),
        (svc("v4only"), "AAAA", "NOERROR"),
        (HELLO, "SRV", "NOERROR"),
    ],
    ids=["positive", "nxdomain", "nodata", "srv"],
)
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_edns_opt_present_when_query_had_one(
    dig: Dig, name: str, rtype: str, rcode: str, transport: str
) -> None:
    opts = ("+edns=0",) + (("+tcp",) if transport == "tcp" else ())
    res = dig(name, rtype, *opts)
    check(res, rcode)
    assert res.opt is not None, "no OPT record in the answer\n" + res.describe()


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_no_opt_without_edns(dig: Dig, transport: str) -> None:
    opts = ("+noedns",) + (("+tcp",) if transport == "tcp" else ())
    res = dig(HELLO, "A", *opts)
    check(res, answer=[rr(HELLO, "A", "10.42.0.10")])
    assert res.opt is None, "OPT in the answer to a query without EDNS\n" + res.describe()


@pytest.mark.parametrize("cookie", ["+cookie", "+nocookie"])
def test_edns_cookie_option_does_not_break_answers(dig: Dig, cookie: str) -> None:
    res = dig(HELLO, "A", cookie)
    check(res, answer=[rr(HELLO, "A", "10.42.0.10")])
    assert res.opt is not None, res.describe()


def test_edns_do_bit_does_not_break_answers(dig: Dig) -> None:
    res = dig(HELLO, "A", "+dnssec")
    check(res, answer=[rr(HELLO, "A", "10.42.0.10")])
    assert res.opt is not None, res.describe()
