"""Shared helpers of the unit tests: a cache built from raw API objects (made by
clusterset_dns_testkit.objects), queries built with dnspython and responses rendered
as zone-file text.

Responses are decoded with dnspython, an implementation independent of the
server's encoder, and every record is rendered as one normalized line
``owner ttl class type rdata``. The SOA serial changes with every update, so
it is rendered as the placeholder ``SERIAL``.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from clusterset_dns.base.clock import SYSTEM
from clusterset_dns.base.config import Config
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import Cache, ReplaceImports, ReplaceSlices, SetSynced

ZONE = "clusterset.local"


def soa(ttl: int = 5) -> str:
    """The apex SOA as rendered by :func:`render` (serial as a placeholder)."""
    return (f"clusterset.local. {ttl} IN SOA ns.dns.clusterset.local. "
            f"hostmaster.clusterset.local. SERIAL 7200 1800 86400 {ttl}")


SOA = soa()

def build_cache(imports: Iterable[dict[str, Any]] = (), slices: Iterable[dict[str, Any]] = (),
                ttl: int = 5, synced: bool = True, ns_addresses: Iterable[Any] = (),
                clock: Callable[[], float] = SYSTEM.time) -> Cache:
    """A cache holding the given raw objects, converted by :mod:`convert`; ``clock``:
    unix time, for the serial (two caches built on one fixed clock have one serial)."""
    models = [convert.service_import(obj) for obj in imports]
    pieces = [convert.endpoint_slice(obj) for obj in slices]
    cache = Cache(ZoneNames(ZONE), ttl, ns_addresses, clock=clock)
    cache.apply([
        ReplaceImports({(m.namespace, m.name): m for m in models}),
        ReplaceSlices({(p.namespace, p.name): p for p in pieces if p is not None}),
        SetSynced(synced),
    ])
    return cache


# -- queries ----------------------------------------------------------------------------------


def query(qname: str, qtype: str = "A", *, rdclass: str = "IN", edns: int | None = None,
          payload: int = 1232, do: bool = False, options: Sequence[dns.edns.Option] = (),
          rd: bool = True, cd: bool = False, qid: int | None = None) -> bytes:
    """Query bytes as dnspython writes them (the question keeps ``qname``'s case)."""
    if edns is None:
        assert not do and not options, "DO and options need EDNS"
        msg = dns.message.make_query(qname, qtype, rdclass, use_edns=False)
    else:
        msg = dns.message.make_query(qname, qtype, rdclass, use_edns=edns, want_dnssec=do,
                                     payload=payload, options=list(options) or None)
    msg.flags = (dns.flags.RD if rd else 0) | (dns.flags.CD if cd else 0)
    if qid is not None:
        msg.id = qid
    return msg.to_wire()


def cookie() -> dns.edns.Option:
    return dns.edns.GenericOption(dns.edns.OptionType.COOKIE, b"\x01\x02\x03\x04\x05\x06\x07\x08")


# -- responses --------------------------------------------------------------------------------


def _line(rrset: dns.rrset.RRset, rdata: Any) -> str:
    rtype = dns.rdatatype.to_text(rrset.rdtype)
    text = rdata.to_text()
    if rrset.rdtype == dns.rdatatype.SOA:
        fields = text.split()
        fields[2] = "SERIAL"
        text = " ".join(fields)
    return (f"{rrset.name.to_text()} {rrset.ttl} {dns.rdataclass.to_text(rrset.rdclass)} "
            f"{rtype} {text}")


def render(section: Iterable[dns.rrset.RRset], lower: bool = True) -> list[str]:
    lines = [_line(rrset, rdata) for rrset in section for rdata in rrset]
    return sorted(line.lower() for line in lines) if lower else sorted(lines)


@dataclass
class Reply:
    wire: bytes
    msg: dns.message.Message
    rcode: int  # extended (BADVERS = 16)
    answer: list[str]
    authority: list[str]
    additional: list[str]

    @property
    def flags(self) -> int:
        return int(self.msg.flags)

    def has(self, flag: int) -> bool:
        return bool(self.msg.flags & flag)


def decode(response: bytes) -> Reply:
    """Decodes a response and checks that the header counts match what was decoded
    (dnspython merges identical records into one, so a duplicate shows up here)."""
    msg = dns.message.from_wire(response)
    reply = Reply(response, msg, msg.rcode(), render(msg.answer), render(msg.authority),
                  render(msg.additional))
    _, _, qd, an, ns, ar = struct.unpack_from("!HHHHHH", response)
    assert qd == len(msg.question)
    assert an == len(reply.answer), f"ANCOUNT {an} but records {reply.answer}"
    assert ns == len(reply.authority), f"NSCOUNT {ns} but records {reply.authority}"
    assert ar == len(reply.additional) + (1 if msg.opt is not None else 0), \
        f"ARCOUNT {ar} but records {reply.additional}"
    return reply


def udp_client() -> Iterator[socket.socket]:
    """A client's UDP socket on 127.0.0.1 (its reads time out after 2 s), closed after;
    made a fixture where used: ``client = pytest.fixture(udp_client, name="client")``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(2)
    yield sock
    sock.close()


DEFAULT_UDP_CAP = Config().edns_udp_size  # the server's default --edns-udp-size


def ask(handler: Handler, data: bytes, tcp: bool = False) -> Reply:
    response = handler.handle(data, tcp)
    assert response is not None, "no response"
    assert response[:2] == data[:2], "ID not echoed"
    return decode(response)


def rcode_name(rcode: int) -> str:
    return dns.rcode.to_text(dns.rcode.Rcode(rcode))


def section_ends(wire: bytes) -> tuple[int, int, int, int]:
    """Offsets where the question, answer, authority and additional sections end."""
    counts = struct.unpack_from("!HHHH", wire, 4)

    def skip_name(offset: int) -> int:
        while True:
            length = wire[offset]
            if length >= 0xC0:
                return offset + 2
            offset += 1 + length
            if length == 0:
                return offset

    offset = 12
    for _ in range(counts[0]):
        offset = skip_name(offset) + 4
    ends = [offset]
    for section in (1, 2, 3):
        for _ in range(counts[section]):
            offset = skip_name(offset)
            offset += 10 + struct.unpack_from("!H", wire, offset + 8)[0]
        ends.append(offset)
    return ends[0], ends[1], ends[2], ends[3]


def first_rotation(handler: Handler) -> None:
    """Holds every name's truncated answers at their first rotation (they move with
    the clock's second), so that two paths can be compared byte for byte."""
    clock_at(handler, 0.0)


def clock_at(handler: Handler, when: float | Callable[[], float]) -> None:
    """The clock the truncated answers' rotations read (truncate.Rotation): a fixed
    time, or a function; for the names the zone has now."""
    clock = when if callable(when) else (lambda: when)
    for cuts in handler.zone.cuts.values():
        cuts.rotation.clock = clock


def check_cut(udp: Reply, full: Reply, limit: int) -> None:
    """A truncated UDP answer (RFC 2181 9): TC, at most ``limit`` bytes, whole records of
    the ``full`` answer (over TCP) and as many as fit: not even the largest of them
    would fit in what is left after the answer section; no authority section; glue only
    for the SRV targets it keeps, each target's addresses whole."""
    assert udp.has(dns.flags.TC)
    assert len(udp.wire) <= limit
    assert udp.answer, "TC with no records"
    assert set(udp.answer) <= set(full.answer)
    assert udp.authority == []
    assert set(udp.additional) <= set(full.additional)
    kept = {line.split()[-1] for line in udp.answer if " srv " in line.lower()}
    for owner in {line.split()[0] for line in udp.additional}:
        assert owner in kept, f"glue for {owner}, whose SRV record was left out"
        assert ({line for line in udp.additional if line.split()[0] == owner}
                == {line for line in full.additional if line.split()[0] == owner})
    if len(udp.answer) < len(full.answer):
        largest = max(len(rdata.to_wire()) + 12 for rrset in full.msg.answer for rdata in rrset)
        answer_end = section_ends(udp.wire)[1] + (11 if udp.msg.opt is not None else 0)
        assert answer_end + largest > limit, "a record more would have fitted"


class ReaderLoop:
    """The two calls of the event loop a UDP reader makes (add and remove its reader)."""

    def __init__(self) -> None:
        self.readers: dict[int, Callable[[], None]] = {}

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        self.readers[fd] = callback

    def remove_reader(self, fd: int) -> bool:
        return self.readers.pop(fd, None) is not None
