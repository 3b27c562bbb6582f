"""Answer sizing (RFC 2181 section 9) over UDP and TCP, and objects as large as the API accepts.

The rules checked here, for every response ``r`` to a query whose whole answer
``F`` (all records) would be ``len(F)`` bytes, sent over a transport that carries
at most ``L`` bytes (512, the EDNS size capped at ``--edns-udp-size``, 65,535 over
TCP):

- ``len(F) <= L``: ``F`` is sent, byte for byte;
- else, when the answer section alone fits: ``F`` less its additional section,
  TC clear;
- else over UDP: TC, and as many whole answer records as fit, with the glue of
  the SRV targets it keeps when their addresses fit too (helpers.check_cut);
- else over TCP: as many answer records as fit, TC set; never TC without records.

Section boundaries are found by a small record walker of this file, not the
server's, and the records are decoded with dnspython.
"""

from __future__ import annotations

import struct
from typing import Any

import dns.flags
import dns.rcode
import pytest

from clusterset_dns.base.names import split
from clusterset_dns.serving.handler import Handler
from clusterset_dns.zone.cache import Cache
from clusterset_dns.zone.wire import AAAA, SRV, A, question_key
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import (
    DEFAULT_UDP_CAP,
    Reply,
    build_cache,
    check_cut,
    cookie,
    decode,
    first_rotation,
    query,
    section_ends,
)

Z = "svc.clusterset.local."
TCP_MAX = 65535


def answer_only_size(full: bytes, edns: bool) -> int:
    """The size of ``full`` without its additional records (the OPT stays)."""
    return section_ends(full)[2] + (11 if edns else 0)


def check_sized(handler: Handler, qname: str, qtype: str, edns: bool,
                options: list[Any] | None = None) -> tuple[Reply, Reply]:
    """Asks over TCP and UDP and checks both responses against the rules above.
    Returns (tcp, udp) replies."""
    kw: dict[str, Any] = {"edns": 0, "payload": 4096, "options": options or []} if edns else {}
    data = query(qname, qtype, qid=0x5151, **kw)
    tcp_wire = handler.handle(data, True)
    assert tcp_wire is not None
    for over_tcp in (False, True):  # the fast path sizes as the slow path does
        first_rotation(handler)
        fast = handler.handle(data, over_tcp)
        first_rotation(handler)
        assert fast == handler._slow(data, over_tcp)
    assert len(tcp_wire) <= TCP_MAX
    tcp = decode(tcp_wire)
    assert tcp.rcode == dns.rcode.NOERROR
    if tcp.has(dns.flags.TC):
        # cut: records that fit, none of the other sections; never TC with nothing
        assert tcp.answer and not tcp.authority and not tcp.additional
        # and as many as fit: one more record of the largest size would not
        largest = max(len(rr.to_wire()) + 12 for rrset in tcp.msg.answer for rr in rrset)
        assert len(tcp_wire) + largest > TCP_MAX - (0 if edns else 11)
    udp_wire = handler.handle(data, False)
    assert udp_wire is not None
    limit = DEFAULT_UDP_CAP if edns else 512
    assert len(udp_wire) <= limit
    udp = decode(udp_wire)
    if tcp.has(dns.flags.TC):
        assert udp.has(dns.flags.TC)
    if udp.has(dns.flags.TC):
        check_cut(udp, tcp, limit)
        assert tcp.has(dns.flags.TC) or answer_only_size(tcp_wire, edns) > limit
    elif len(tcp_wire) <= limit:
        assert udp_wire == tcp_wire
    else:
        assert (udp.answer, udp.authority, udp.additional) == (tcp.answer, tcp.authority, [])
        assert tcp.additional, "dropped nothing but did not fit?"
    assert (udp.msg.opt is not None) is edns and (tcp.msg.opt is not None) is edns
    return tcp, udp


# no EDNS; EDNS (the fast path); EDNS with a cookie option (the slow path)
MODES = [pytest.param(False, None, id="plain"), pytest.param(True, None, id="edns"),
         pytest.param(True, [cookie()], id="edns-option")]


# -- UDP: glue goes before TC --------------------------------------------------------------------

def _glue_handler(count: int) -> Handler:
    """A headless service with ``count`` endpoints and one named port."""
    imp = service_import("hl", type_="Headless", ports=[port(80, "TCP", "http")])
    piece = endpoint_slice("hl-a", "hl", cluster="east", ports=[port(80, "TCP", "http")],
                           endpoints=[endpoint(f"10.4.0.{i + 1}") for i in range(count)])
    return Handler(build_cache([imp], [piece]).zone, DEFAULT_UDP_CAP)


@pytest.mark.parametrize(("edns", "options"), MODES)
@pytest.mark.parametrize("qname", [f"hl.prod.{Z}", f"_http._tcp.hl.prod.{Z}"])
def test_udp_srv_that_fits_without_glue_is_not_truncated(qname: str, edns: bool,
                                                         options: list[Any] | None) -> None:
    """From 1 to 30 endpoints, the answer crosses the limit with its glue first, then
    without: every step follows the rules, and the glue-less step is seen."""
    seen = set()
    for count in range(1, 31):
        tcp, udp = check_sized(_glue_handler(count), qname, "SRV", edns, options)
        assert len(tcp.answer) == count and len(tcp.additional) == count
        seen.add("tc" if udp.has(dns.flags.TC) else "whole" if udp.additional else "no-glue")
    assert seen == {"whole", "no-glue", "tc"}


def test_udp_srv_without_glue_exact_boundary() -> None:
    """The first size at which the glue is dropped: the answer is whole, TC is clear."""
    for count in range(1, 31):
        handler = _glue_handler(count)
        data = query(f"hl.prod.{Z}", "SRV", qid=1)
        full = handler.handle(data, True) or b""
        if len(full) > 512 >= answer_only_size(full, False):
            reply = decode(handler.handle(data, False) or b"")
            assert not reply.has(dns.flags.TC)
            assert len(reply.answer) == count and reply.additional == []
            return
    raise AssertionError("no endpoint count puts the SRV answer between the two sizes")


# -- TCP: over 65,535 bytes, cut to what fits ----------------------------------------------------

@pytest.fixture(scope="module")
def huge_cache() -> Cache:
    """A-record answers of 4,200 and 5,000 addresses (67 and 80 KB), an SRV of 1,000
    targets whose glue does not fit a TCP message, and the bare-name SRV of 1,000
    endpoints x 66 named ports: 66,000 records, more than a header can count."""
    imports = [service_import("many", type_="Headless"),
               service_import("srv", type_="Headless", ports=[port(80, "TCP", "http")]),
               service_import("ports", type_="Headless")]
    named_ports = [port(1000 + i, "TCP", f"port-{i}") for i in range(66)]
    slices = [
        endpoint_slice("many-a", "many", cluster="east",
                       endpoints=[endpoint(f"10.6.{i // 250}.{i % 250 + 1}")
                                  for i in range(4200)]),
        endpoint_slice("many-b", "many", cluster="west", address_type="IPv6",
                       endpoints=[endpoint(f"fd00::{i + 1:x}") for i in range(5000)]),
        endpoint_slice("srv-a", "srv", cluster="east", ports=[port(80, "TCP", "http")],
                       endpoints=[endpoint(f"10.5.{i // 250}.{i % 250 + 1}")
                                  for i in range(1000)]),
        endpoint_slice("ports-a", "ports", cluster="east", ports=named_ports,
                       endpoints=[endpoint(f"10.7.{i // 250}.{i % 250 + 1}")
                                  for i in range(1000)]),
    ]
    return build_cache(imports, slices)


@pytest.fixture(scope="module")
def huge(huge_cache: Cache) -> Handler:
    return Handler(huge_cache.zone, DEFAULT_UDP_CAP)


HUGE = [
    pytest.param(f"many.prod.{Z}", "A", 4200, id="a-4200"),
    pytest.param(f"many.prod.{Z}", "AAAA", 5000, id="aaaa-5000"),
    pytest.param(f"srv.prod.{Z}", "SRV", 1000, id="srv-1000-glue-dropped"),
    pytest.param(f"_http._tcp.srv.prod.{Z}", "SRV", 1000, id="named-srv-1000-glue-dropped"),
    pytest.param(f"ports.prod.{Z}", "SRV", 66000, id="bare-srv-66000"),
    pytest.param(f"_port-7._tcp.ports.prod.{Z}", "SRV", 1000, id="named-srv-of-66-ports"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("edns", "options"), MODES)
@pytest.mark.parametrize(("qname", "qtype", "records"), HUGE)
def test_huge_answers(huge: Handler, qname: str, qtype: str, records: int, edns: bool,
                      options: list[Any] | None) -> None:
    tcp, udp = check_sized(huge, qname, qtype, edns, options)
    assert udp.has(dns.flags.TC)
    if tcp.has(dns.flags.TC):
        assert 0 < len(tcp.answer) < records
    else:
        assert len(tcp.answer) == records and tcp.additional == []


def _key(name: str, qtype: int) -> bytes:
    return question_key(split(name), qtype)


def test_huge_answers_counted(huge_cache: Cache) -> None:
    """Answers that cannot be sent whole are counted when built (the answers_cut metric);
    an answer whose glue alone does not fit is not one of them."""
    cut = {key for key, ans in dict(huge_cache.zone.every_answer()).items() if ans.cut}
    assert {_key(f"many.prod.{Z}", A), _key(f"many.prod.{Z}", AAAA),
            _key(f"ports.prod.{Z}", SRV)} <= cut
    assert _key(f"srv.prod.{Z}", SRV) not in cut
    assert _key(f"_http._tcp.srv.prod.{Z}", SRV) not in cut
    assert huge_cache.builder.cut == len(cut)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("qname", "qtype", "records"), HUGE)
@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_fast_and_slow_path_agree_on_sizing(huge: Handler, qname: str, qtype: str,
                                            records: int, tcp: bool) -> None:
    for kw in ({}, {"edns": 0}, {"edns": 0, "payload": 512}):
        data = query(qname, qtype, qid=0x4243, **kw)
        first_rotation(huge)
        fast = huge.handle(data, tcp)
        first_rotation(huge)
        assert fast == huge._slow(data, tcp)


# -- the largest objects the API accepts ---------------------------------------------------------

def _largest() -> Cache:
    """EndpointSlice: 1,000 endpoints (the API's maximum) with 63-character hostnames,
    100 ports (the maximum) named with 62 and 63 characters (a 63-character name is a
    legal DNS_LABEL but no ``_<port>`` label); ServiceImport: 2 IPs (the CRD's
    maximum) and 1,000 ports with 62-character names."""
    slice_ports = [port(2000 + i, "TCP", (f"{i:02d}" + "x" * 61) if i % 2 else
                        (f"{i:02d}" + "y" * 60)) for i in range(100)]
    imports = [
        service_import("big", type_="Headless"),
        service_import("wide", ips=["10.9.0.1", "fd00::9"],
                       ports=[port(3000 + i, "UDP" if i % 3 else "TCP", f"{i:04d}" + "z" * 58)
                              for i in range(1000)]),
    ]
    slices = [endpoint_slice("big-a", "big", cluster="c" * 30, ports=slice_ports,
                             endpoints=[endpoint(f"10.8.{i // 250}.{i % 250 + 1}",
                                                 hostname=f"{i:04d}" + "h" * 59)
                                        for i in range(1000)])]
    return build_cache(imports, slices)


@pytest.mark.timeout(300)
def test_largest_objects_the_api_accepts() -> None:
    cache = _largest()
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    # 63-character slice port names lose their SRV name only; 62 keep it
    srv_names = [key for key, _ in cache.zone.every_answer()
                 if key.endswith(b"\x00\x21\x00\x01")]
    assert len(srv_names) == 1 + 50 + 1 + 1000  # bare + named of big, bare + named of wide
    questions = [(f"big.prod.{Z}", "A"), (f"big.prod.{Z}", "SRV"),
                 (f"wide.prod.{Z}", "SRV"), (f"wide.prod.{Z}", "A"), (f"wide.prod.{Z}", "AAAA"),
                 (f"_{'0001' + 'z' * 58}._udp.wide.prod.{Z}", "SRV"),
                 (f"{'0999' + 'h' * 59}.{'c' * 30}.big.prod.{Z}", "A")]
    for qname, qtype in questions:
        for edns in (False, True):
            check_sized(handler, qname, qtype, edns)
    tcp, _ = check_sized(handler, f"big.prod.{Z}", "SRV", True)
    assert tcp.has(dns.flags.TC)  # 100,000 records: cut
    tcp, _ = check_sized(handler, f"wide.prod.{Z}", "SRV", False)
    assert len(tcp.answer) == 1000 and not tcp.has(dns.flags.TC)
    # the 62-character port names have their SRV name: 1,000 targets of 127 bytes, cut
    tcp, _ = check_sized(handler, f"_{'00' + 'y' * 60}._tcp.big.prod.{Z}", "SRV", False)
    assert tcp.has(dns.flags.TC) and 0 < len(tcp.answer) < 1000


@pytest.mark.timeout(300)
def test_every_answer_of_the_largest_objects_is_well_formed() -> None:
    """Every question the zone has an answer for, over UDP and TCP, with and without
    EDNS: the response parses to its last byte with the counts its header gives, fits
    the transport, and is TC only when its answer section had to go or be cut."""
    cache = _largest()
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    opt = b"\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x00"  # EDNS, payload 4096
    checked = 0
    for key in dict(cache.zone.every_answer()):
        for edns in (False, True):
            data = (b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00" + (b"\x00\x01" if edns else
                    b"\x00\x00") + key + (opt if edns else b""))
            for tcp, limit in ((True, TCP_MAX), (False, DEFAULT_UDP_CAP if edns else 512)):
                response = handler.handle(data, tcp)
                assert response is not None and len(response) <= limit
                assert response[:2] == b"\x12\x34" and response[3] & 0x0F == 0
                assert response[12 : 12 + len(key)] == key
                # the records the header counts end the message exactly
                assert section_ends(response)[3] == len(response)
                counts = struct.unpack_from("!HHHH", response, 4)
                if response[2] & 0x02:  # TC: never without records, none of authority
                    assert counts[1] > 0 and counts[2] == 0
                    if not tcp:
                        full = handler.handle(data, True) or b""
                        assert section_ends(full)[2] + (11 if edns else 0) > limit
                if edns:  # the OPT comes last
                    assert response[-11:-8] == b"\x00\x00\x29"
                checked += 1
    assert checked == len(dict(cache.zone.every_answer())) * 4


# -- local-first tiers at the largest sizes (docs/dns-behaviour.md §6 rule 5) ------------------

@pytest.mark.timeout(120)
def test_a_tiered_srv_cut_over_tcp_keeps_the_preferred_tier() -> None:
    """PreferSameNode, 1,000 endpoints in each of two clusters, 66 named ports: the
    bare-name SRV (132,000 records) is cut over TCP to the records listed first, the
    server's node and cluster before the other's; UDP gets TC; both paths agree."""
    from clusterset_dns.zone.cache import SetClusterId

    named_ports = [port(1000 + i, "TCP", f"port-{i}") for i in range(66)]
    imp = service_import("tiered", type_="Headless", traffic_distribution="PreferSameNode")
    pieces = [endpoint_slice(f"tiered-{c}", "tiered", cluster=c, ports=named_ports,
                             endpoints=[endpoint(f"10.{n}.{i // 250}.{i % 250 + 1}",
                                                 node="node-1" if i < 10 else "node-2")
                                        for i in range(1000)])
              for c, n in (("west", 20), ("east", 21))]
    cache = build_cache([imp], pieces)
    cache.builder.node_name = "node-1"
    cache.apply([SetClusterId("east")])
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    qname = f"tiered.prod.{Z}"
    tcp, udp = check_sized(handler, qname, "SRV", True)
    assert udp.has(dns.flags.TC) and tcp.has(dns.flags.TC)
    rdatas = [rdata for rrset in tcp.msg.answer for rdata in rrset]
    listed = [(rd.priority, str(rd.target)) for rd in rdatas]
    assert 0 < len(listed) < 132_000
    assert [p for p, _ in listed] == sorted(p for p, _ in listed)
    # node-1's ten east endpoints x 66 ports first, then east's others.
    assert {t.split(".")[1] for p, t in listed if p in (0, 1)} == {"east"}
    assert sum(1 for p, _ in listed if p == 0) == 660
    for kw in ({}, {"edns": 0}):
        data = query(qname, "SRV", qid=0x4243, **kw)
        assert handler.handle(data, True) == handler._slow(data, True)
