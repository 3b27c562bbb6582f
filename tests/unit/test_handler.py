"""The per-packet path: fast path = slow path, EDNS, truncation, malformed packets, fuzzing."""

from __future__ import annotations

import random
import struct
from typing import Any

import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import pytest

from clusterset_dns.serving import handler as handler_module
from clusterset_dns.serving import stats as counters
from clusterset_dns.serving.handler import Handler
from clusterset_dns.serving.stats import Stats
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import (
    DEFAULT_UDP_CAP,
    ask,
    build_cache,
    check_cut,
    cookie,
    decode,
    first_rotation,
    query,
)

Z = "svc.clusterset.local."
WEB, DB, BIG = f"web.prod.{Z}", f"db.prod.{Z}", f"big.prod.{Z}"
BIG_COUNT = 80

IMPORTS = [
    service_import("web", ips=["10.1.0.1", "fd00::101"], ports=[port(80, "TCP", "http")]),
    service_import("db", type_="Headless", ports=[port(5432, "TCP", "pg")]),
    service_import("big", type_="Headless", ports=[port(80, "TCP", "http")]),
]
SLICES = [
    endpoint_slice("db-a", "db", cluster="east", ports=[port(5432, "TCP", "pg")],
                   endpoints=[endpoint("10.2.0.1", hostname="db-0"), endpoint("10.2.0.2")]),
    endpoint_slice("big-a", "big", cluster="east", ports=[port(80, "TCP", "http")],
                   endpoints=[endpoint(f"10.3.{i // 250}.{i % 250 + 1}")
                              for i in range(BIG_COUNT)]),
]


@pytest.fixture(scope="module")
def handler() -> Handler:
    return Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP)


# -- fast path = slow path --------------------------------------------------------------------

SAME_BYTES = [
    (WEB, "A", {}), (WEB, "AAAA", {}), ("WEB.prod.SVC.clusterset.local.", "A", {}),
    (f"_http._tcp.{WEB}", "SRV", {}), (DB, "A", {}), (f"db-0.east.{DB}", "A", {}),
    ("clusterset.local.", "SOA", {}), ("clusterset.local.", "NS", {}),
    ("dns-version.clusterset.local.", "TXT", {}), (WEB, "ANY", {}),
    (WEB, "A", {"edns": 0}), (WEB, "A", {"edns": 0, "do": True}),
    (WEB, "A", {"edns": 0, "payload": 512}), (WEB, "A", {"edns": 0, "payload": 100}),
    (WEB, "A", {"edns": 0, "payload": 65535}),
    (DB, "SRV", {"edns": 0}), (DB, "SRV", {}), (BIG, "A", {"edns": 0, "payload": 4096}),
    (BIG, "A", {}), (f"_http._tcp.{BIG}", "SRV", {"edns": 0}),
    (f"nothere.prod.{Z}", "A", {}), (f"nothere.prod.{Z}", "A", {"edns": 0}),
]


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
@pytest.mark.parametrize(("rd", "cd"), [(True, False), (False, True)], ids=["rd", "cd"])
@pytest.mark.parametrize(("qname", "qtype", "kw"), SAME_BYTES,
                         ids=[f"{n}-{t}-{k}" for n, t, k in SAME_BYTES])
def test_fast_and_slow_path_give_the_same_bytes(handler: Handler, qname: str, qtype: str,
                                                 kw: dict[str, Any], rd: bool, cd: bool,
                                                 tcp: bool) -> None:
    data = query(qname, qtype, rd=rd, cd=cd, qid=0xBEEF, **kw)

    first_rotation(handler)  # a truncated answer's rotation moves with every answer
    fast = handler.handle(data, tcp)
    first_rotation(handler)
    assert fast == handler._slow(data, tcp)


@pytest.mark.parametrize(("qname", "qtype", "kw"), [
    (WEB, "A", {}), (WEB, "A", {"edns": 0}), (f"_http._tcp.{WEB}", "SRV", {"edns": 0}),
    ("clusterset.local.", "SOA", {}), (f"db-0.east.{DB}", "A", {"edns": 0, "do": True}),
])
def test_fast_path_answers_option_less_queries(handler: Handler, qname: str, qtype: str,
                                               kw: dict[str, Any],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    expected = handler.handle(query(qname, qtype, qid=7, **kw), False)

    def no_slow_path(data: bytes, tcp: bool, peer: object = None) -> bytes | None:
        raise AssertionError("slow path taken")

    monkeypatch.setattr(handler, "_slow", no_slow_path)
    assert handler.handle(query(qname, qtype, qid=7, **kw), False) == expected


@pytest.mark.parametrize(("qname", "qtype"), [
    (WEB, "A"), (WEB, "AAAA"), (f"_http._tcp.{WEB}", "SRV"), (DB, "SRV"), (DB, "A"),
    ("clusterset.local.", "SOA"), (f"nothere.prod.{Z}", "A"), (WEB, "TXT"),
    ("dns-version.clusterset.local.", "TXT"),
])
@pytest.mark.parametrize("do", [False, True], ids=["", "do"])
def test_cookie_option_gives_the_same_answer(handler: Handler, qname: str, qtype: str,
                                             do: bool) -> None:
    plain = ask(handler, query(qname, qtype, edns=0, do=do, qid=77))
    with_cookie = ask(handler, query(qname, qtype, edns=0, do=do, options=[cookie()], qid=77))
    assert with_cookie.rcode == plain.rcode
    assert with_cookie.flags == plain.flags
    assert (with_cookie.answer, with_cookie.authority, with_cookie.additional) == \
        (plain.answer, plain.authority, plain.additional)
    assert with_cookie.msg.opt is not None
    assert with_cookie.wire == plain.wire  # the OPT of the answer carries no option


# -- EDNS -------------------------------------------------------------------------------------

EDNS_QUERIES = [
    pytest.param(WEB, "A", [], id="fast"),
    pytest.param(WEB, "A", [cookie()], id="slow"),
    pytest.param(f"nothere.prod.{Z}", "A", [], id="nxdomain"),
    pytest.param(WEB, "TXT", [], id="nodata"),
    pytest.param("example.com.", "A", [], id="refused"),
]


@pytest.mark.parametrize("payload", [512, 1232, 4096])
@pytest.mark.parametrize("do", [False, True], ids=["", "do"])
@pytest.mark.parametrize(("qname", "qtype", "options"), EDNS_QUERIES)
def test_edns_opt_echoed(handler: Handler, qname: str, qtype: str, options: list[Any],
                         do: bool, payload: int) -> None:
    reply = ask(handler, query(qname, qtype, edns=0, do=do, payload=payload, options=options))
    assert reply.msg.opt is not None
    assert reply.msg.edns == 0
    assert reply.msg.payload == 1232  # the server's own limit, whatever the client's
    assert bool(reply.msg.ednsflags & dns.flags.DO) is do
    assert not reply.msg.options


@pytest.mark.parametrize("do", [False, True], ids=["", "do"])
def test_edns_opt_echoed_on_servfail(do: bool) -> None:
    handler = Handler(build_cache(IMPORTS, SLICES, synced=False).zone, DEFAULT_UDP_CAP)
    reply = ask(handler, query(f"nothere.prod.{Z}", "A", edns=0, do=do, payload=4096))
    assert reply.rcode == dns.rcode.SERVFAIL
    assert reply.msg.opt is not None and reply.msg.payload == 1232
    assert bool(reply.msg.ednsflags & dns.flags.DO) is do


@pytest.mark.parametrize(("qname", "qtype"), [(WEB, "A"), ("example.com.", "A")])
def test_no_opt_without_edns(handler: Handler, qname: str, qtype: str) -> None:
    reply = ask(handler, query(qname, qtype))
    assert reply.msg.opt is None
    assert reply.msg.edns == -1


@pytest.mark.parametrize("version", [1, 2, 255])
@pytest.mark.parametrize("do", [False, True], ids=["", "do"])
@pytest.mark.parametrize(("qname", "qtype"), [(WEB, "A"), (f"nothere.prod.{Z}", "A"),
                                              ("example.com.", "A")])
def test_edns_version_badvers(handler: Handler, qname: str, qtype: str, do: bool,
                              version: int) -> None:
    data = query(qname, qtype, edns=version, do=do, qid=99)
    reply = ask(handler, data)
    assert reply.rcode == dns.rcode.BADVERS == 16
    assert reply.msg.opt is not None
    assert reply.msg.edns == 0  # the version the server speaks
    assert bool(reply.msg.ednsflags & dns.flags.DO) is do
    assert (reply.answer, reply.authority, reply.additional) == ([], [], [])
    assert reply.msg.question[0].name.to_text() == qname


# -- truncation -------------------------------------------------------------------------------

def _check_truncated(handler: Handler, data: bytes, qname: str, edns: bool,
                     limit: int) -> None:
    """The UDP answer to ``data``: TC and the records that fit (helpers.check_cut)."""
    reply = ask(handler, data)
    assert reply.has(dns.flags.QR) and reply.has(dns.flags.AA)
    assert reply.has(dns.flags.RD) and not reply.has(dns.flags.RA)
    assert reply.rcode == dns.rcode.NOERROR
    assert [q.name.to_text() for q in reply.msg.question] == [qname]
    assert (reply.msg.opt is not None) is edns
    check_cut(reply, ask(handler, data, tcp=True), limit)


@pytest.mark.parametrize(("qname", "qtype"), [(BIG, "A"), (BIG, "SRV"),
                                              (f"_http._tcp.{BIG}", "SRV")])
@pytest.mark.parametrize("options", [[], [cookie()]], ids=["fast", "slow"])
def test_truncation(handler: Handler, qname: str, qtype: str, options: list[Any]) -> None:
    full = ask(handler, query(qname, qtype), tcp=True)
    assert not full.has(dns.flags.TC)
    assert len(full.answer) >= BIG_COUNT
    assert len(full.wire) > 1232 + 11
    # UDP without EDNS: 512 bytes at most
    _check_truncated(handler, query(qname, qtype), qname, False, 512)
    # EDNS asking for 4096: the server's cap (1232) applies
    _check_truncated(handler, query(qname, qtype, edns=0, payload=4096, options=options), qname,
                     True, DEFAULT_UDP_CAP)
    # TCP: the whole answer, with or without EDNS
    over_tcp = ask(handler, query(qname, qtype, edns=0, payload=512, options=options), tcp=True)
    assert not over_tcp.has(dns.flags.TC)
    assert (over_tcp.answer, over_tcp.additional) == (full.answer, full.additional)


def test_truncation_respects_a_larger_configured_cap() -> None:
    handler = Handler(build_cache(IMPORTS, SLICES).zone, udp_payload_cap=4096)
    full = ask(handler, query(BIG, "A"), tcp=True)
    reply = ask(handler, query(BIG, "A", edns=0, payload=4096))
    assert not reply.has(dns.flags.TC)
    assert reply.answer == full.answer
    assert reply.msg.payload == 4096
    _check_truncated(handler, query(BIG, "A", edns=0, payload=1232), BIG, True, 1232)


def _medium_handler(count: int) -> Handler:
    piece = endpoint_slice("m", "big", cluster="east",
                           endpoints=[endpoint(f"10.4.0.{i + 1}") for i in range(count)])
    return Handler(build_cache(IMPORTS[2:], [piece]).zone, DEFAULT_UDP_CAP)


@pytest.mark.parametrize("options", [[], [cookie()]], ids=["fast", "slow"])
def test_truncation_boundary_is_the_client_payload(options: list[Any]) -> None:
    """An answer between 512 and 1232 bytes: the client's payload decides, to the byte."""
    handler = _medium_handler(40)
    size = len(handler.handle(query(BIG, "A", edns=0), True) or b"")
    assert 512 < size < 1232
    fits = ask(handler, query(BIG, "A", edns=0, payload=size, options=options))
    assert not fits.has(dns.flags.TC)
    assert len(fits.wire) == size
    assert len(fits.answer) == 40
    _check_truncated(handler, query(BIG, "A", edns=0, payload=size - 1, options=options),
                     BIG, True, size - 1)
    # a payload below 512 means 512 (RFC 6891 6.2.5)
    _check_truncated(handler, query(BIG, "A", edns=0, payload=100, options=options),
                     BIG, True, 512)
    _check_truncated(handler, query(BIG, "A"), BIG, False, 512)


def test_truncation_boundary_without_edns() -> None:
    """The largest answer that fits 512 bytes is sent whole; one more record truncates."""
    sizes = {}
    for count in range(20, 40):
        handler = _medium_handler(count)
        full = handler.handle(query(BIG, "A", qid=3), True) or b""
        reply = ask(handler, query(BIG, "A", qid=3))
        sizes[count] = len(full)
        if len(full) <= 512:
            assert not reply.has(dns.flags.TC)
            assert reply.wire == full
        else:
            _check_truncated(handler, query(BIG, "A", qid=3), BIG, False, 512)
    assert min(sizes.values()) <= 512 < max(sizes.values())


# -- answers near the size of a TCP message ----------------------------------------------------
# RFC 1035 4.2.2: a TCP message has a two-byte length prefix, so it carries at most 65,535
# bytes. RFC 2181 9: TC is set only when the records that must be there (the answer
# section) do not fit; additional data (an SRV target's addresses) is left out first.

TCP_MAX = 65535
# The largest record these answers can hold: an SRV whose owner is a compression pointer
# and whose target is a 255-byte name. Whatever room is left unused when TC is set must be
# smaller than this, or one more record would have fitted.
LARGEST_RECORD = 2 + 10 + 6 + 255
FITS_COUNT, SRV_COUNT, MANY_COUNT = 950, 1200, 4200
FITS, SRV, MANY = f"fits.prod.{Z}", f"srv.prod.{Z}", f"many.prod.{Z}"


def _addresses(second: int, count: int) -> list[str]:
    return [f"10.{second}.{i // 250}.{i % 250 + 1}" for i in range(count)]


def _huge_handler() -> Handler:
    """Headless services whose answers are near or over what a TCP message can carry:
    ``fits``: 950 SRV records fit, their 950 addresses beside them do not; ``srv``:
    1,200 SRV records alone do not fit; ``many``: 4,200 A records do not fit."""
    http = [port(80, "TCP", "http")]
    imports = [service_import(name, type_="Headless", ports=http if name != "many" else [])
               for name in ("fits", "srv", "many")]
    slices = [
        endpoint_slice("fits-a", "fits", cluster="east", ports=http,
                       endpoints=[endpoint(ip) for ip in _addresses(4, FITS_COUNT)]),
        endpoint_slice("srv-a", "srv", cluster="east", ports=http,
                       endpoints=[endpoint(ip) for ip in _addresses(5, SRV_COUNT)]),
        endpoint_slice("many-a", "many", cluster="east",
                       endpoints=[endpoint(ip) for ip in _addresses(6, MANY_COUNT)]),
    ]
    return Handler(build_cache(imports, slices).zone, DEFAULT_UDP_CAP)


@pytest.fixture(scope="module")
def huge() -> Handler:
    return _huge_handler()


def _srv_zone(service: str, second: int, count: int) -> tuple[list[str], list[str]]:
    """The SRV records of a headless service of ``count`` unnamed endpoints, and their
    targets' A records, as zone-file text."""
    weight = max(1, 100 // count)
    targets = [(f"{ip.replace('.', '-')}.east.{service}", ip) for ip in _addresses(second, count)]
    return ([f"{service} 5 in srv 0 {weight} 80 {t}" for t, _ in targets],
            [f"{t} 5 in a {ip}" for t, ip in targets])


def _least_size(records: list[str]) -> int:
    """The fewest bytes ``records`` can take in a response: each owner a compression
    pointer, and SRV targets written out whole (RFC 2782: never compressed)."""
    size = 0
    for line in records:
        rdtype, rdata = line.split(" ", 4)[3:]
        if rdtype == "srv":
            size += 2 + 10 + 6 + len(dns.name.from_text(rdata.split()[3]).to_wire())
        else:
            size += 2 + 10 + {"a": 4, "aaaa": 16}[rdtype]
    return size


TCP_ANSWERS = [
    pytest.param(FITS, "SRV", {}, id="srv-fits-without-addresses"),
    pytest.param(FITS, "SRV", {"edns": 0, "options": [cookie()]}, id="srv-fits-slow"),
    pytest.param(f"_http._tcp.{FITS}", "SRV", {"edns": 0}, id="named-srv-fits-edns"),
]


@pytest.mark.parametrize(("qname", "qtype", "kw"), TCP_ANSWERS)
def test_tcp_answer_without_tc_when_the_answer_section_fits(
        huge: Handler, qname: str, qtype: str, kw: dict[str, Any]) -> None:
    srv, addresses = _srv_zone(FITS, 4, FITS_COUNT)
    # the premise: the SRV records fit a TCP message, with their addresses they do not
    header_and_question = 12 + len(dns.name.from_text(qname).to_wire()) + 4
    assert header_and_question + _least_size(srv) + 11 < TCP_MAX  # 11: an OPT
    assert header_and_question + _least_size(srv + addresses) > TCP_MAX
    response = huge.handle(query(qname, qtype, qid=0x4242, **kw), True)
    assert response is not None and len(response) <= TCP_MAX
    reply = decode(response)
    assert reply.msg.id == 0x4242 and reply.rcode == 0
    assert not reply.has(dns.flags.TC)
    owner = qname.lower()
    assert reply.answer == sorted(line.replace(FITS + " ", owner + " ", 1) for line in srv)
    assert set(reply.additional) <= set(addresses)  # as many addresses as there is room for


@pytest.mark.parametrize(("qname", "qtype", "kw"), [
    pytest.param(SRV, "SRV", {}, id="srv"),
    pytest.param(SRV, "SRV", {"edns": 0, "options": [cookie()]}, id="srv-slow"),
    pytest.param(MANY, "A", {}, id="a"),
    pytest.param(MANY, "A", {"edns": 0, "options": [cookie()]}, id="a-slow"),
])
def test_tcp_answer_too_big_carries_as_many_records_as_fit(
        huge: Handler, qname: str, qtype: str, kw: dict[str, Any]) -> None:
    if qtype == "SRV":
        expected, _ = _srv_zone(SRV, 5, SRV_COUNT)
    else:
        expected = [f"{MANY} 5 in a {ip}" for ip in _addresses(6, MANY_COUNT)]
    assert _least_size(expected) > TCP_MAX  # the premise: the records alone cannot fit
    response = huge.handle(query(qname, qtype, qid=0x4242, **kw), True)
    assert response is not None and len(response) <= TCP_MAX
    reply = decode(response)
    assert reply.msg.id == 0x4242 and reply.rcode == 0
    assert reply.has(dns.flags.TC)
    assert reply.answer and set(reply.answer) <= set(expected)
    assert TCP_MAX - len(response) < LARGEST_RECORD, "room for more records was left unused"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("qname", "qtype"), [(FITS, "SRV"), (SRV, "SRV"), (MANY, "A")])
def test_fast_and_slow_path_agree_on_huge_tcp_answers(huge: Handler, qname: str,
                                                       qtype: str) -> None:
    data = query(qname, qtype, qid=0x4243)
    assert huge.handle(data, True) == huge._slow(data, True)


# -- malformed packets ------------------------------------------------------------------------

def _valid(qid: int = 0x1234, **kw: Any) -> bytes:
    return query(WEB, "A", qid=qid, **kw)


def _with_flags(data: bytes, flags: int) -> bytes:
    return data[:2] + struct.pack("!H", flags) + data[4:]


def _with_counts(data: bytes, qd: int, an: int = 0, ns: int = 0, ar: int = 0) -> bytes:
    return data[:4] + struct.pack("!HHHH", qd, an, ns, ar) + data[12:]


HEADER = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
QUESTION = b"\x03web\x04prod\x03svc\nclusterset\x05local\x00\x00\x01\x00\x01"
OPT = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"
A_RECORD = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x01"


@pytest.mark.parametrize("data", [
    b"", b"\x12", b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00", _valid()[:11],
], ids=["empty", "1-byte", "11-bytes", "valid-cut-to-11"])
def test_no_header_no_answer(handler: Handler, data: bytes) -> None:
    before = handler.stats.dropped
    assert handler.handle(data, False) is None
    assert handler.handle(data, True) is None
    assert handler.stats.dropped == before + 2  # each one counted


@pytest.mark.parametrize("data", [
    _with_flags(_valid(), 0x8100), _with_flags(_valid(), 0x8500),
    _with_flags(_valid(edns=0), 0x8000), _with_flags(HEADER, 0x8000),
    _with_flags(_valid(), 0x8000 | 0x2000),
], ids=["response", "aa-response", "edns-response", "header-only-response", "response-notify"])
def test_responses_are_never_answered(handler: Handler, data: bytes) -> None:
    before = handler.stats.dropped
    assert handler.handle(data, False) is None
    assert handler.handle(data, True) is None
    assert handler.stats.dropped == before + 2  # each one counted


def _check_error(handler: Handler, data: bytes, rcode: int) -> dns.message.Message:
    for tcp in (False, True):
        response = handler.handle(data, tcp)
        assert response is not None
        assert response[:2] == data[:2]
        assert response[2] & 0x80, "QR must be set"
        assert not response[3] & 0x80, "RA must be clear"
        assert response[3] & 0x0F == rcode
        assert struct.unpack_from("!HH", response, 6) == (0, 0)  # no answer, no authority
        msg = decode(response).msg
    return msg


FORMERR_PACKETS = [
    ("qdcount-0", _with_counts(_valid(), 0)),
    ("qdcount-0-header-only", struct.pack("!HHHHHH", 0x1234, 0x0100, 0, 0, 0, 0)),
    ("qdcount-2", _with_counts(_valid(), 2)),
    ("qdcount-2-two-questions", _with_counts(HEADER + QUESTION + QUESTION, 2)),
    ("qdcount-65535", _with_counts(_valid(), 0xFFFF)),
    ("header-only", HEADER),
    ("label-64", HEADER + b"\x40" + b"a" * 64 + b"\x00\x00\x01\x00\x01"),
    ("label-length-0x80", HEADER + b"\x80" + b"a" * 0x80 + b"\x00\x00\x01\x00\x01"),
    ("pointer-in-question", HEADER + b"\xc0\x0c\x00\x01\x00\x01"),
    ("pointer-after-label", HEADER + b"\x03web\xc0\x0c\x00\x01\x00\x01"),
    ("name-256-bytes", HEADER + (b"\x3f" + b"a" * 63) * 3 + b"\x3e" + b"b" * 62
     + b"\x00\x00\x01\x00\x01"),
    ("question-cut-in-label", HEADER + QUESTION[:8]),
    ("question-no-root", HEADER + QUESTION[:-5]),
    ("question-no-type", HEADER + QUESTION[:-4]),
    ("question-half-type", HEADER + QUESTION[:-3]),
    ("question-no-class", HEADER + QUESTION[:-2]),
    ("question-half-class", HEADER + QUESTION[:-1]),
    ("opt-cut", _with_counts(HEADER + QUESTION + OPT[:-1], 1, ar=1)),
    ("opt-cut-in-fixed-part", _with_counts(HEADER + QUESTION + OPT[:5], 1, ar=1)),
    ("opt-rdata-cut", _with_counts(HEADER + QUESTION + OPT[:-2] + b"\x00\x0c\x00\x0a\x00\x08"
                                   + b"\x01\x02\x03", 1, ar=1)),
    ("arcount-without-record", _with_counts(HEADER + QUESTION, 1, ar=1)),
    ("two-opts", _with_counts(HEADER + QUESTION + OPT + OPT, 1, ar=2)),
    ("opt-in-answer-section", _with_counts(HEADER + QUESTION + OPT, 1, an=1)),
    ("opt-owner-not-root", _with_counts(HEADER + QUESTION + b"\x01x" + OPT, 1, ar=1)),
    ("answer-record-cut", _with_counts(HEADER + QUESTION + A_RECORD[:-1], 1, an=1)),
]


@pytest.mark.parametrize("data", [d for _, d in FORMERR_PACKETS],
                         ids=[i for i, _ in FORMERR_PACKETS])
def test_formerr(handler: Handler, data: bytes) -> None:
    msg = _check_error(handler, data, dns.rcode.FORMERR)
    assert msg.rcode() == dns.rcode.FORMERR


@pytest.mark.parametrize(("an", "ns"), [(1, 0), (0, 1), (1, 1)])
def test_records_in_other_sections_are_skipped(handler: Handler, an: int, ns: int) -> None:
    """Well-formed records in the answer and authority sections of a query do not stop
    the answer, and the OPT after them is found."""
    data = _with_counts(HEADER + QUESTION + A_RECORD * (an + ns) + OPT, 1, an=an, ns=ns,
                        ar=1)
    reply = ask(handler, data)
    assert reply.answer == [f"{WEB} 5 in a 10.1.0.1"]
    assert reply.msg.opt is not None


@pytest.mark.parametrize("opcode", [dns.opcode.IQUERY, dns.opcode.STATUS, dns.opcode.NOTIFY,
                                    dns.opcode.UPDATE, 3, 15], ids=str)
@pytest.mark.parametrize("qd", [1, 0])
def test_notimp(handler: Handler, opcode: int, qd: int) -> None:
    data = _with_counts(_with_flags(_valid(), 0x0100 | (opcode << 11)), qd)
    response = handler.handle(data, False)
    assert response is not None
    assert response[:2] == data[:2]
    assert response[2] & 0x80
    assert response[3] & 0x0F == dns.rcode.NOTIMP
    assert struct.unpack_from("!HH", response, 6) == (0, 0)


# RFC 6891 7: an answer to a query with an OPT carries an OPT, errors included.
EDNS_ERRORS = [
    ("notimp", _with_flags(_valid(edns=0), 0x0100 | (dns.opcode.NOTIFY << 11)), dns.rcode.NOTIMP,
     True),
    ("notimp-no-question", _with_counts(_with_flags(HEADER + OPT, 0x0100 | (5 << 11)), 0, ar=1),
     dns.rcode.NOTIMP, False),
    ("formerr-qdcount-0", _with_counts(HEADER + OPT, 0, ar=1), dns.rcode.FORMERR, False),
    ("formerr-qdcount-2", _with_counts(HEADER + QUESTION + QUESTION + OPT, 2, ar=1),
     dns.rcode.FORMERR, False),
    ("formerr-record-after-opt-cut",
     _with_counts(HEADER + QUESTION + OPT + A_RECORD[:-1], 1, ar=2), dns.rcode.FORMERR, True),
]


@pytest.mark.parametrize(("data", "rcode", "question"), [(d, r, q) for _, d, r, q in EDNS_ERRORS],
                         ids=[i for i, _, _, _ in EDNS_ERRORS])
@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_errors_to_edns_queries_carry_opt(handler: Handler, data: bytes, rcode: int,
                                          question: bool, tcp: bool) -> None:
    response = handler.handle(data, tcp)
    assert response is not None
    assert response[3] & 0x0F == rcode
    qd, an, ns, ar = struct.unpack_from("!HHHH", response, 4)
    assert (qd, an, ns, ar) == (1 if question else 0, 0, 0, 1)
    opt = response[-11:]
    assert opt[:3] == b"\x00\x00\x29"  # root owner, type OPT
    assert struct.unpack("!H", opt[3:5])[0] == 1232  # our payload size
    if question:
        assert dns.message.from_wire(response).opt is not None


@pytest.mark.parametrize("data", [_with_flags(_valid(), 0x0100 | (dns.opcode.NOTIFY << 11)),
                                  _with_counts(_valid(), 0)], ids=["notimp", "formerr"])
def test_errors_without_edns_carry_no_opt(handler: Handler, data: bytes) -> None:
    response = handler.handle(data, False)
    assert response is not None
    assert struct.unpack_from("!H", response, 10)[0] == 0


# -- fuzzing ----------------------------------------------------------------------------------

SEEDS = [
    _valid(), _valid(edns=0), _valid(edns=0, options=[cookie()]),
    query(f"_http._tcp.{WEB}", "SRV", qid=5), query(BIG, "A", edns=0, payload=4096, qid=6),
    query(f"nothere.prod.{Z}", "A", qid=8), query("example.com.", "A", qid=9),
    query("clusterset.local.", "SOA", edns=0, do=True, qid=10),
]


def _expect_answer(data: bytes) -> bool:
    """docs/dns-behaviour.md §3.5: dropped only when no header can be read, or when it is
    a response."""
    return len(data) >= 12 and not data[2] & 0x80


def _check(handler: Handler, data: bytes, tcp: bool) -> None:
    response = handler.handle(data, tcp)
    if not _expect_answer(data):
        assert response is None, data
        return
    assert response is not None, f"no answer to {data!r}"
    assert len(response) >= 12
    assert response[:2] == data[:2], data
    assert response[2] & 0x80, data  # QR
    if not tcp:
        limit = 512
        if response[3] & 0x0F != dns.rcode.FORMERR and b"\x00\x00\x29" in data:
            limit = 1232
        assert len(response) <= limit, data
    decode(response)  # a response dnspython can read, with counts that match


@pytest.mark.timeout(120)
def test_fuzz_random_packets(handler: Handler) -> None:
    rng = random.Random(20240601)
    for _ in range(20_000):
        size = rng.choice((rng.randrange(0, 16), rng.randrange(12, 64), rng.randrange(12, 600)))
        data = bytes(rng.randrange(256) for _ in range(size))
        if rng.random() < 0.5 and len(data) >= 12:
            data = data[:2] + bytes((data[2] & 0x07, data[3])) + data[4:]  # a QUERY
        if rng.random() < 0.5 and len(data) >= 12:
            data = data[:4] + b"\x00\x01" + data[6:]  # one question
        _check(handler, data, rng.random() < 0.2)


@pytest.mark.timeout(120)
def test_fuzz_mutated_queries(handler: Handler) -> None:
    rng = random.Random(1645)
    for _ in range(20_000):
        data = bytearray(rng.choice(SEEDS))
        for _ in range(rng.randrange(1, 4)):
            action = rng.randrange(5)
            if action == 0:  # flip a byte
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif action == 1:  # flip one bit
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
            elif action == 2:  # cut
                del data[rng.randrange(len(data)):]
            elif action == 3:  # insert bytes
                i = rng.randrange(len(data) + 1)
                data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
            else:  # change a count
                i = 4 + 2 * rng.randrange(4)
                if len(data) >= i + 2:
                    data[i:i + 2] = struct.pack("!H", rng.choice((0, 1, 2, 3, 0xFFFF)))
            if not data:
                break
        _check(handler, bytes(data), rng.random() < 0.2)


# -- the sender's address, asked for only by an IXFR over UDP ---------------------------------

def _ixfr_udp() -> bytes:
    msg = dns.message.make_query("clusterset.local.", "IXFR", use_edns=0, payload=1232)
    return msg.to_wire()


def test_an_ixfr_over_udp_asks_for_the_sender_and_the_answer_comes_from_transfers() -> None:
    calls: list[tuple[str, int]] = []

    def udp_transfer(data: bytes, peer: str, limit: int) -> bytes | None:
        calls.append((peer, limit))
        return data[:2] + b"the transfer's answer"

    handler = Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP,
                      udp_transfer=udp_transfer)
    asked: list[int] = []

    def sender() -> str:
        asked.append(1)
        return "192.0.2.7"

    assert handler.handle(query(WEB, "A", qid=3), False, sender) is not None
    assert asked == []  # any other query: the address is not asked for
    data = _ixfr_udp()
    assert handler.handle(data, False, sender) == data[:2] + b"the transfer's answer"
    assert calls == [("192.0.2.7", 1232)]


def test_an_ixfr_over_udp_without_the_sender_is_truncated_not_empty() -> None:
    """A transport that cannot tell the sender gets TC (the client asks again over TCP,
    where access is checked): never an empty datagram."""
    handler = Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP,
                      udp_transfer=lambda data, peer, limit: pytest.fail("called without a peer"))
    data = _ixfr_udp()
    response = handler.handle(data, False)
    assert response
    reply = dns.message.from_wire(response)
    assert reply.flags & dns.flags.TC and reply.id == dns.message.from_wire(data).id
    assert str(reply.question[0]) == "clusterset.local. IN IXFR"
    assert reply.edns == 0 and reply.payload == DEFAULT_UDP_CAP  # our OPT: an EDNS query


def test_an_ixfr_over_udp_that_does_not_fit_is_truncated_with_our_opt() -> None:
    """The transfers answer None (too big for the client's limit): TC, and an EDNS
    query's TC carries our OPT like any answer to it (RFC 6891 7)."""
    handler = Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP,
                      udp_transfer=lambda data, peer, limit: None)
    data = _ixfr_udp()
    response = handler.handle(data, False, lambda: "127.0.0.1")
    assert response
    reply = dns.message.from_wire(response)
    assert reply.flags & dns.flags.TC and reply.answer == []
    assert reply.edns == 0 and reply.payload == DEFAULT_UDP_CAP


def test_the_stats_given_are_the_ones_counted() -> None:
    stats = Stats()
    handler = Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP, stats=stats)
    assert handler.handle(query(WEB, "A"), False) is not None
    assert handler.stats is stats and sum(stats.requests) == 1


def test_the_opt_tails_learned_are_cleared_at_exactly_their_bound() -> None:
    """Each distinct EDNS payload size is one tail learned; the 1025th starts over."""
    handler = Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP)
    cap = handler_module._MAX_TAILS
    for size in range(512, 512 + cap):
        assert handler.handle(query(WEB, "A", edns=0, payload=size), False) is not None
    assert len(handler._tails) == cap  # the last one that fits
    # a tail learned already is found, not learned again (which would start over)
    assert handler.fast(query(WEB, "A", edns=0, payload=512)[2:], True) is not None
    assert len(handler._tails) == cap
    assert handler.handle(query(WEB, "A", edns=0, payload=512 + cap), False) is not None
    assert len(handler._tails) == 1


def test_the_fast_path_sends_and_remembers_answers_up_to_the_client_payload() -> None:
    """An answer of more than 1024 bytes to a client of exactly its size: sent whole by
    the fast path (so remembered); the payload is the OPT's class, all 16 bits."""
    handler = _medium_handler(65)
    size = len(handler.handle(query(BIG, "A", edns=0), True) or b"")
    assert 1024 < size <= DEFAULT_UDP_CAP and size & 0xFF
    data = query(BIG, "A", edns=0, payload=size)
    response = handler.handle(data, False)
    assert response is not None and len(response) == size and not response[2] & 0x02
    assert handler.responses.get(data[2:]) is not None


def test_the_extended_rcode_byte_of_a_query_adds_nothing_to_its_payload() -> None:
    """The OPT's TTL starts with the extended rcode: in a query it is no part of the
    client's size, which stays the class field (one byte short here: TC)."""
    handler = _medium_handler(65)
    size = len(handler.handle(query(BIG, "A", edns=0), True) or b"")
    data = bytearray(query(BIG, "A", edns=0, payload=size - 1))
    data[-6] = 0xFF  # the OPT's extended rcode: 11 bytes from the end, 5 in
    response = handler.handle(bytes(data), False)
    assert response is not None and len(response) <= size - 1 and response[2] & 0x02


@pytest.mark.parametrize("kw", [{}, {"edns": 0, "payload": 512}], ids=["plain", "edns-512"])
def test_the_fast_path_answers_over_tcp_what_udp_could_not_carry(kw: dict[str, Any]) -> None:
    """Over TCP the room is a TCP message's, whatever the client's UDP size: the fast path
    answers (the slow path is not needed), with the slow path's bytes."""
    handler = Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP)
    data = query(BIG, "A", **kw)
    tail = handler.fast(data[2:], True)
    assert tail is not None and len(tail) > 512
    assert data[:2] + tail == handler.slow(data, True)


def test_the_fast_path_counts_each_answer_once_under_its_type() -> None:
    """Over TCP nothing is remembered: each query takes the fast path. Type 284 (0x011C)
    is counted as "other", not as AAAA (28, its low byte)."""
    handler = Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP)
    for _ in range(2):
        for kw in ({}, {"edns": 0}):
            for qtype in ("A", "TYPE284"):
                data = query(WEB, qtype, **kw)
                assert handler.fast(data[2:], True) is not None
    counted = {counters.slot_of(i): n for i, n in enumerate(handler.stats.requests) if n}
    assert counted == {("A", "tcp", None, 0): 4, ("other", "tcp", None, 0): 4}


@pytest.mark.parametrize("kw", [{}, {"edns": 0}], ids=["plain", "edns"])
@pytest.mark.parametrize(("qname", "qtype", "remembered"), [
    (WEB, "TXT", True),
    (WEB, "HTTPS", True),  # 65: only the type's low byte, a capital A, is lowered in the key
    (WEB, "TYPE16641", False),  # 0x4101: the type's high byte is the capital A
    ("Web.prod.svc.clusterset.local.", "TXT", False),  # mixed case (DNS 0x20)
])
def test_a_udp_answer_is_remembered_only_for_a_name_in_lower_case(
        qname: str, qtype: str, remembered: bool, kw: dict[str, Any]) -> None:
    handler = Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP)
    data = query(qname, qtype, **kw)
    assert handler.fast(data[2:], False) is not None
    assert (handler.responses.get(data[2:]) is not None) == remembered
