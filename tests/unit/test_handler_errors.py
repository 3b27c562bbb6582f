"""The handler's answers without records, byte for byte, and the counter each one bumps:
NOTIMP for another opcode, FORMERR for a query it cannot read, REFUSED outside the zone or
class IN or for a transfer over UDP without one, BADVERS for an EDNS version above 0,
SERVFAIL with the Not Ready EDE before the first sync. The expected bytes are written
here with struct (header, the query's question, our OPT), not by the handler's code."""

from __future__ import annotations

import struct

import dns.message
import dns.opcode
import dns.rdatatype
import pytest

from clusterset_dns.serving import stats as counters
from clusterset_dns.serving.handler import Handler

from .helpers import build_cache

QID = b"\x12\x34"
CAP = 1232
QR, AA, RD, CD = 0x8000, 0x0400, 0x0100, 0x0010
FORMERR, SERVFAIL, NOTIMP, REFUSED = 1, 2, 4, 5
NOT_SYNCED_TEXT = (b"not synced: the first full list of ServiceImports and EndpointSlices "
                   b"has not completed yet")


def query(name: str, qtype: str | int = "A", edns: int | None = None, do: bool = False,
          flags: int = RD, rdclass: str = "IN", opcode: int = 0) -> bytes:
    rdtype = dns.rdatatype.RdataType(qtype) if isinstance(qtype, int) else qtype
    msg = dns.message.make_query(name, rdtype, rdclass, use_edns=False if edns is None else edns,
                                 want_dnssec=do, payload=4096)
    msg.flags = flags
    msg.set_opcode(dns.opcode.Opcode(opcode))
    return QID + msg.to_wire()[2:]


def question_of(data: bytes) -> bytes:
    end = data.index(b"\x00", 12) + 5
    return data[12:end]


def opt(do: bool, high_rcode: int = 0, rdata: bytes = b"") -> bytes:
    return (b"\x00\x00\x29" + struct.pack("!HBBHH", CAP, high_rcode, 0, 0x8000 if do else 0,
                                          len(rdata)) + rdata)


def head(flags: int, qdcount: int, arcount: int) -> bytes:
    return QID + struct.pack("!HHHHH", flags, qdcount, 0, 0, arcount)


def counted(handler: Handler) -> dict[tuple[str, str, int | None, int], int]:
    return {counters.slot_of(i): n for i, n in enumerate(handler.stats.requests) if n}


def transport(tcp: bool) -> str:
    return "tcp" if tcp else "udp"


TCP = pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
EDNS = pytest.mark.parametrize(("edns", "do"), [(None, False), (0, False), (0, True)],
                               ids=["plain", "edns", "edns-do"])


def handler(synced: bool = True) -> Handler:
    return Handler(build_cache(synced=synced).zone, CAP)


@TCP
@EDNS
@pytest.mark.parametrize(("opcode", "flags"), [(2, RD), (4, CD), (5, RD | CD), (15, 0)])
def test_another_opcode_gets_notimp_with_the_opcode_and_question(
        tcp: bool, edns: int | None, do: bool, opcode: int, flags: int) -> None:
    h = handler()
    data = query("web.prod.svc.clusterset.local.", edns=edns, do=do, flags=flags,
                 opcode=opcode)
    extra = opt(do) if edns is not None else b""
    assert h.handle(data, tcp) == (head(QR | opcode << 11 | flags | NOTIMP, 1,
                                        1 if extra else 0) + question_of(data) + extra)
    assert counted(h) == {("A", transport(tcp), None, NOTIMP): 1}


@TCP
@EDNS
def test_two_questions_get_formerr_without_a_question(tcp: bool, edns: int | None,
                                                      do: bool) -> None:
    h = handler()
    one = query("clusterset.local.", "SOA", edns=edns, do=do, flags=RD | CD)
    question = question_of(one)
    data = one[:4] + b"\x00\x02" + one[6:12] + question + one[12:]  # the question twice
    extra = opt(do) if edns is not None else b""
    assert h.handle(data, tcp) == head(QR | RD | CD | FORMERR, 0, 1 if extra else 0) + extra
    assert counted(h) == {("other", transport(tcp), None, FORMERR): 1}


@TCP
@EDNS
@pytest.mark.parametrize(("name", "qtype", "rdclass", "slot"), [
    ("example.com.", "A", "IN", "A"),
    ("xclusterset.local.", "AAAA", "IN", "AAAA"),  # the apex must start on a label
    ("x.clusterset.lokal.", "A", "IN", "A"),  # a label where the apex would start: not it
    ("a\\010clusterset.local.", "A", "IN", "A"),  # its bytes inside one label: not the apex
    ("clusterset.local.", "SOA", "CH", "SOA"),  # class IN only
    ("clusterset.local.", "AXFR", "IN", "AXFR"),  # transfers: none configured
    ("clusterset.local.", "IXFR", "IN", "IXFR"),
    ("example.com.", 257, "IN", "other"),  # CAA: the low byte is A's, the type is not
    ("example.com.", 256, "IN", "other"),
])
def test_refused(tcp: bool, edns: int | None, do: bool, name: str, qtype: str | int,
                 rdclass: str, slot: str) -> None:
    h = handler()
    data = query(name, qtype, edns=edns, do=do, rdclass=rdclass)
    extra = opt(do) if edns is not None else b""
    assert h.handle(data, tcp) == (head(QR | RD | REFUSED, 1, 1 if extra else 0)
                                   + question_of(data) + extra)
    assert counted(h) == {(slot, transport(tcp), None, REFUSED): 1}


@TCP
@pytest.mark.parametrize("do", [False, True])
@pytest.mark.parametrize("version", [1, 255])
@pytest.mark.parametrize("name", ["web.prod.svc.clusterset.local.", "example.com."])
def test_an_edns_version_above_0_gets_badvers(tcp: bool, do: bool, version: int,
                                              name: str) -> None:
    h = handler()
    data = query(name, "AAAA", edns=version, do=do, flags=CD)
    # rcode 16: 0 in the header, 1 in the OPT's extended rcode
    assert h.handle(data, tcp) == (head(QR | CD, 1, 1) + question_of(data) + opt(do, 1))
    assert counted(h) == {("AAAA", transport(tcp), None, 16): 1}


@TCP
@EDNS
def test_before_the_first_sync_a_name_not_there_gets_servfail_not_ready(
        tcp: bool, edns: int | None, do: bool) -> None:
    h = handler(synced=False)
    data = query("nothere.prod.svc.clusterset.local.", "SRV", edns=edns, do=do)
    ede = struct.pack("!HHH", 15, 2 + len(NOT_SYNCED_TEXT), 14) + NOT_SYNCED_TEXT
    extra = opt(do, rdata=ede) if edns is not None else b""
    assert h.handle(data, tcp) == (head(QR | RD | SERVFAIL, 1, 1 if extra else 0)
                                   + question_of(data) + extra)
    ede_code = 14 if edns is not None else None  # the EDE goes only where an OPT does
    assert counted(h) == {("SRV", transport(tcp), ede_code, SERVFAIL): 1}


@TCP
@pytest.mark.parametrize("edns", [None, 0])
def test_each_error_is_counted_once_more(tcp: bool, edns: int | None) -> None:
    """Errors are never remembered: every one is worked out and counted again."""
    h, unsynced = handler(), handler(synced=False)
    for _ in range(3):
        h.handle(query("example.com.", edns=edns), tcp)
        unsynced.handle(query("nothere.prod.svc.clusterset.local.", edns=edns), tcp)
    assert counted(h) == {("A", transport(tcp), None, REFUSED): 3}
    ede_code = 14 if edns is not None else None
    assert counted(unsynced) == {("A", transport(tcp), ede_code, SERVFAIL): 3}


def test_a_bug_costs_one_answer_counted_as_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception on the slow path (a bug) is caught: no answer, one drop each time."""
    h = handler()

    def broken(*args: object) -> bytes:
        raise KeyError("a bug")

    monkeypatch.setattr(h, "_slow", broken)
    for tcp in (False, True, False):
        assert h.slow(query("example.com."), tcp) is None
    assert h.stats.dropped == 3 and counted(h) == {}
