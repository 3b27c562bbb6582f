"""Transfers under attack: UDP IXFR costs bounded by the client's UDP size and rate,
transfers taking turns on the loop, IXFR from a newer serial, and TSIG for queries
that are not transfers (RFC 8945 5.2, 5.3). dnspython is the oracle."""

from __future__ import annotations

import asyncio
import base64
import struct
import time
from collections.abc import Iterator
from ipaddress import ip_address, ip_network
from typing import Any

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.tsigkeyring
import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving import query as query_module
from clusterset_dns.serving.handler import Handler
from clusterset_dns.transfers import xfr, zonedata
from clusterset_dns.transfers.journal import Journal
from clusterset_dns.zone import rrs
from clusterset_dns.zone.cache import Cache, PutImport, PutSlice, SetSynced
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

ZONE = "clusterset.local"
HTTP = (Port("http", "tcp", 80),)
SECRET = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
KEY = dns.tsig.Key("xfr-key", SECRET, dns.tsig.HMAC_SHA256)
ALLOWED = (ip_network("127.0.0.0/8"),)


def loopback() -> str:
    """The sender, as a transport gives it to the handler."""
    return "127.0.0.1"


def headless(name: str, addresses: list[str]) -> list[PutImport | PutSlice]:
    endpoints = tuple(Endpoint((ip_address(a),), None) for a in addresses)
    return [PutImport(("ns", name), ServiceImport("ns", name, ServiceType.HEADLESS, (), HTTP)),
            PutSlice(("ns", f"{name}-east"),
                     EndpointSlice("ns", f"{name}-east", name, "east", endpoints, HTTP))]


def big_cache(services: int = 8, each: int = 500) -> tuple[Cache, Journal]:
    journal = Journal(10)
    cache = Cache(ZoneNames(ZONE), 5, on_change=journal.record)
    ops: list[Any] = []
    for i in range(services):
        ops += headless(f"s{i}", [f"10.{i}.{j // 250}.{j % 250 + 1}" for j in range(each)])
    cache.apply([*ops, SetSynced(True)])
    return cache, journal


def ixfr_query(serial: int, payload: int = 1232) -> dns.message.Message:
    query = dns.message.make_query(ZONE, "IXFR", use_edns=True, payload=payload)
    query.authority.append(dns.rrset.from_text(ZONE + ".", 0, "IN", "SOA",
                                               f". . {serial} 0 0 0 0"))
    return query


def transfers_for(cache: Cache, journal: Journal, key: dns.tsig.Key | None = None,
                  limit: xfr.RateLimit | None = None) -> xfr.Transfers:
    return xfr.Transfers(cache.zone, journal, ALLOWED, key, xfr.Counts({}), limit=limit)


class Unlimited(xfr.RateLimit):
    def allow(self, source: str) -> bool:
        return True


class Collect:
    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def send(self, message: bytes) -> None:
        self.messages.append(message)


def soa_serials(messages: list[bytes]) -> list[int]:
    out = []
    for wire_message in messages:
        message = dns.message.from_wire(wire_message, xfr=True, one_rr_per_rrset=True)
        out += [int(r[0].serial) for r in message.answer if r.rdtype == dns.rdatatype.SOA]
    return out


# -- IXFR from a serial newer than ours: our SOA alone (RFC 1995 2) --------------------------

@pytest.mark.parametrize("ahead", [1, 1000, 2**31 - 1])
def test_ixfr_from_a_newer_serial_is_one_soa_over_tcp_and_udp(ahead: int) -> None:
    cache, journal = big_cache(2, 10)
    serial = cache.zone.serial
    query = ixfr_query((serial + ahead) % 2**32)
    transfers = transfers_for(cache, journal, limit=Unlimited())
    out = Collect()
    coro = transfers.start(query.to_wire(), "127.0.0.1", out)
    assert coro is not None
    asyncio.run(coro)
    assert soa_serials(out.messages) == [serial]
    reply = transfers.udp(query.to_wire(), "127.0.0.1", 1232)
    assert reply and soa_serials([reply]) == [serial]


# -- UDP IXFR: bounded work, bounded rate ---------------------------------------------------

def test_udp_ixfr_of_a_big_zone_never_snapshots_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not in the journal: the whole zone could not fit, so TC at once (the old code
    copied the answer table and encoded 64 KiB of it first)."""
    cache, journal = big_cache()
    transfers = transfers_for(cache, journal, limit=Unlimited())

    def no_snapshot(zone: Any) -> Any:
        raise AssertionError("a UDP IXFR took a snapshot of the zone")

    monkeypatch.setattr(zonedata, "take", no_snapshot)
    assert transfers.udp(ixfr_query(12345).to_wire(), "127.0.0.1", 1232) is None
    assert transfers.counts.by[("ixfr", "udp-truncated")] == 1


def test_udp_ixfr_of_a_big_difference_encodes_at_most_what_fits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache, journal = big_cache()
    old = cache.zone.serial
    cache.apply(headless("s0", [f"10.99.{j // 250}.{j % 250 + 1}" for j in range(500)]))
    assert journal.since(old, cache.zone.serial)  # in the journal: 1,000 records changed
    transfers = transfers_for(cache, journal, limit=Unlimited())
    added = 0
    real_add = xfr.MessageWriter.add

    def counting(self: xfr.MessageWriter, record: rrs.Record) -> bytes | None:
        nonlocal added
        added += 1
        return real_add(self, record)

    monkeypatch.setattr(xfr.MessageWriter, "add", counting)
    assert transfers.udp(ixfr_query(old).to_wire(), "127.0.0.1", 1232) is None
    assert added <= 1232 // xfr.MIN_RECORD
    # A small difference still fits and is sent.
    small = cache.zone.serial
    cache.apply(headless("new", ["10.98.0.1"]))
    reply = transfers.udp(ixfr_query(small, 4096).to_wire(), "127.0.0.1", 4096)
    assert reply is not None and len(reply) <= 4096
    assert soa_serials([reply]) == [cache.zone.serial, small, cache.zone.serial,
                                    cache.zone.serial]


def test_rate_limit_per_source_and_in_total() -> None:
    now = [1000.0]
    limit = xfr.RateLimit(rate=2, burst=4, total_rate=10, total_burst=6, clock=lambda: now[0])
    assert [limit.allow("10.0.0.1") for _ in range(6)] == [True] * 4 + [False] * 2
    # The total: two more sources get what is left of the 6, then nothing.
    assert [limit.allow("10.0.0.2") for _ in range(3)] == [True, True, False]
    assert not limit.allow("10.0.0.3")
    now[0] += 0.5  # one token for 10.0.0.1, five for all
    assert limit.allow("10.0.0.1") and not limit.allow("10.0.0.1")
    assert limit.allow("10.0.0.3")
    # The table of sources is bounded.
    many = xfr.RateLimit(clock=lambda: now[0], total_burst=1e9, total_rate=1e9)
    for i in range(xfr.MAX_SOURCES * 2):
        many.allow(f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}")
    assert len(many.sources) <= xfr.MAX_SOURCES


def test_udp_ixfr_flood_from_one_source_is_cut_to_its_rate() -> None:
    cache, journal = big_cache(2, 10)
    transfers = transfers_for(cache, journal)  # the default limits, the real clock
    wire_query = ixfr_query(cache.zone.serial).to_wire()
    answered = sum(1 for _ in range(3000)
                   if transfers.udp(wire_query, "127.0.0.1", 1232) != b"")
    # At most the burst plus what refills while the loop runs (it takes well under 10 s).
    assert xfr.UDP_BURST <= answered <= xfr.UDP_BURST + 10 * xfr.UDP_RATE
    assert transfers.counts.by[("ixfr", "udp-limited")] == 3000 - answered


def test_handler_drops_a_udp_ixfr_over_the_rate() -> None:
    cache, journal = big_cache(1, 2)
    transfers = transfers_for(cache, journal, limit=xfr.RateLimit(rate=0.001, burst=1))
    handler = Handler(cache.zone, 1232, udp_transfer=transfers.udp)
    data = ixfr_query(cache.zone.serial).to_wire()
    assert handler.handle(data, False, loopback)  # the first: answered
    assert handler.handle(data, False, loopback) is None  # then dropped, nothing sent


# -- concurrent transfers take turns ---------------------------------------------------------

def test_concurrent_transfers_take_turns_and_each_is_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Between any two steps of different transfers the loop polls its sockets (for
    queries): no two transfers encode between two polls (the old code encoded one
    64 KiB message of every transfer between two polls)."""
    cache, journal = big_cache(16, 500)
    transfers = transfers_for(cache, journal)
    want = sorted(" ".join(rrs.record_text(r).split())
                  for r in rrs.zone_records(cache.zone.every_answer()))
    polls = [0]
    encoded: dict[int, set[int]] = {}  # poll count -> the writers that encoded then
    real_add, real_rrsets = xfr.MessageWriter.add, xfr.MessageWriter.add_rrsets

    def noting(self: xfr.MessageWriter, record: rrs.Record) -> bytes | None:
        encoded.setdefault(polls[0], set()).add(id(self))
        return real_add(self, record)

    def noting_rrsets(self: xfr.MessageWriter, pairs: Any) -> Iterator[bytes]:
        # The work between two of its yields runs at once: noted where it ends.
        for out in real_rrsets(self, pairs):
            encoded.setdefault(polls[0], set()).add(id(self))
            yield out

    monkeypatch.setattr(xfr.MessageWriter, "add", noting)
    monkeypatch.setattr(xfr.MessageWriter, "add_rrsets", noting_rrsets)
    query = dns.message.make_query(ZONE, "AXFR").to_wire()
    senders = [Collect() for _ in range(8)]

    async def main() -> None:
        # From distinct addresses: one address runs at most a quarter of the slots.
        coros = [transfers.start(query, f"127.0.0.{i + 1}", s) for i, s in enumerate(senders)]
        await asyncio.gather(*[c for c in coros if c is not None])

    loop = asyncio.new_event_loop()
    selector: Any = loop._selector  # type: ignore[attr-defined]
    real_select = selector.select

    def select(timeout: float | None = None) -> Any:
        polls[0] += 1
        return real_select(timeout)

    selector.select = select
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert max(len(writers) for writers in encoded.values()) == 1
    assert len(encoded) > 8 * 4  # many turns
    # The same query: the same bytes, each transfer whole.
    assert all(s.messages == senders[0].messages for s in senders)
    messages = [dns.message.from_wire(m, xfr=True, one_rr_per_rrset=True)
                for m in senders[0].messages]
    assert len(messages) > 3
    got = [" ".join(f"{r.name} {r.ttl} IN {dns.rdatatype.to_text(r.rdtype)} {r[0]}".split())
           for m in messages for r in m.answer]
    assert got[0] == got[-1]
    assert sorted(got[:-1]) == want
    assert transfers._shared is None  # the shared snapshot went with the last transfer


def test_transfers_of_one_version_share_one_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    cache, journal = big_cache(2, 100)
    transfers = transfers_for(cache, journal)
    taken = 0
    real = zonedata.take

    def counting(zone: Any) -> zonedata.Snapshot:
        nonlocal taken
        taken += 1
        return real(zone)

    monkeypatch.setattr(zonedata, "take", counting)
    query = dns.message.make_query(ZONE, "AXFR").to_wire()

    async def main() -> None:
        # Every transfer waits at its first message until all five have begun, so the
        # five run at once however fast one alone would finish (a small zone fits one
        # turn: a transfer that ended gives its snapshot up, rightly).
        everyone = asyncio.Event()
        begun: set[int] = set()

        class Gated(Collect):
            async def send(self, message: bytes) -> None:
                begun.add(id(self))
                if len(begun) == 5:
                    everyone.set()
                await everyone.wait()
                await super().send(message)

        senders = [Gated() for _ in range(5)]
        # From distinct addresses: one address runs at most a quarter of the slots.
        coros = [transfers.start(query, f"127.0.0.{i + 1}", s) for i, s in enumerate(senders)]
        await asyncio.wait_for(asyncio.gather(*[c for c in coros if c is not None]), 30)
        assert all(s.messages == senders[0].messages for s in senders)

    asyncio.run(main())
    assert taken == 1


# -- TSIG on queries that are not transfers ----------------------------------------------------

def signed_handler(key: dns.tsig.Key | None = KEY) -> tuple[Handler, xfr.Transfers]:
    cache, journal = big_cache(1, 3)
    transfers = transfers_for(cache, journal, key)
    handler = Handler(cache.zone, 1232, udp_transfer=transfers.udp,
                      signer=transfers if key is not None else None)
    return handler, transfers


def answer(handler: Handler, data: bytes, tcp: bool) -> bytes:
    response = handler.handle(data, tcp, None if tcp else loopback)
    assert response
    return response


@pytest.mark.parametrize("tcp", [False, True])
@pytest.mark.parametrize("qname,qtype", [(ZONE, "SOA"), ("s0.ns.svc." + ZONE, "A"),
                                         ("nothing.ns.svc." + ZONE, "A")])
def test_a_signed_query_gets_a_signed_answer(tcp: bool, qname: str, qtype: str) -> None:
    handler, _ = signed_handler()
    query = dns.message.make_query(qname, qtype)
    query.use_tsig({KEY.name: KEY}, keyname=KEY.name)
    response = answer(handler, query.to_wire(), tcp)
    # dnspython verifies the MAC against the query's (it raises on a bad or missing one).
    reply = dns.message.from_wire(response, keyring={KEY.name: KEY}, request_mac=query.mac)
    assert reply.had_tsig and reply.tsig[0].error == 0
    unsigned = dns.message.make_query(qname, qtype)
    unsigned.id = query.id
    plain = dns.message.from_wire(handler.handle(unsigned.to_wire(), tcp) or b"")
    assert reply.rcode() == plain.rcode() and reply.answer == plain.answer
    assert reply.authority == plain.authority


def raw_tsig(query: dns.message.Message, name: str, algorithm: str, mac: bytes) -> bytes:
    """``query`` with a TSIG record of our making (dnspython will not write a bad one)."""
    wire_query = query.to_wire()
    arcount = struct.unpack_from("!H", wire_query, 10)[0] + 1
    rdata = (dns.name.from_text(algorithm).to_wire() + int(time.time()).to_bytes(6, "big")
             + struct.pack("!HH", 300, len(mac)) + mac + wire_query[:2] + b"\x00\x00\x00\x00")
    record = (dns.name.from_text(name).to_wire() + struct.pack("!HHIH", 250, 255, 0, len(rdata))
              + rdata)
    return wire_query[:10] + arcount.to_bytes(2, "big") + wire_query[12:] + record


def tsig_of(response: bytes) -> tuple[int, int | None, bytes | None]:
    """(rcode, TSIG error, TSIG MAC) of a response, its TSIG read, not verified."""
    reply = dns.message.from_wire(response, keyring=False)
    if reply.tsig is None:
        return reply.rcode(), None, None
    return reply.rcode(), reply.tsig[0].error, reply.tsig[0].mac


SOA_QUERY = dns.message.make_query(ZONE, "SOA")
TSIG_CASES = [
    # (what, the query's wire form, with a key configured?, (rcode, TSIG error, MAC))
    ("our key name, hmac-sha512", raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha512", b"x" * 64),
     True, (dns.rcode.NOTAUTH, 17, b"")),
    ("our key name, hmac-sha1", raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha1", b"x" * 20),
     True, (dns.rcode.NOTAUTH, 17, b"")),
    ("a MAC truncated to 8 bytes", raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 8),
     True, (dns.rcode.FORMERR, None, None)),
    ("a MAC longer than the hash", raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 40),
     True, (dns.rcode.FORMERR, None, None)),
    # RFC 8945 5.2.2.1: a MAC of max(10, half the hash: 16 bytes) to 32 is the size band;
    # outside it FORMERR, inside it the MAC is checked (this one is wrong: BADSIG)
    ("a MAC a byte short of half the hash",
     raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 15), True,
     (dns.rcode.FORMERR, None, None)),
    ("a MAC of half the hash", raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 16),
     True, (dns.rcode.NOTAUTH, 16, b"")),
    ("a MAC of 10 bytes (the floor, below half the hash)",
     raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 10), True,
     (dns.rcode.FORMERR, None, None)),
    ("a MAC a byte longer than the hash",
     raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 33), True,
     (dns.rcode.FORMERR, None, None)),
    ("a bad MAC", raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 32),
     True, (dns.rcode.NOTAUTH, 16, b"")),
    ("an unknown key", raw_tsig(SOA_QUERY, "other-key", "hmac-sha256", b"x" * 32),
     True, (dns.rcode.NOTAUTH, 17, b"")),
    ("no key configured", raw_tsig(SOA_QUERY, "xfr-key", "hmac-sha256", b"x" * 32),
     False, (dns.rcode.NOTAUTH, 17, b"")),
]


@pytest.mark.parametrize("tcp", [False, True])
@pytest.mark.parametrize("what,data,keyed,want", TSIG_CASES, ids=[c[0] for c in TSIG_CASES])
def test_tsig_errors_rfc8945(what: str, data: bytes, keyed: bool,
                             want: tuple[int, int | None, bytes | None], tcp: bool) -> None:
    handler, _ = signed_handler(KEY if keyed else None)
    assert tsig_of(answer(handler, data, tcp)) == want


@pytest.mark.parametrize("what,data,keyed,want", TSIG_CASES[:2], ids=["sha512", "sha1"])
def test_tsig_badkey_for_transfers_too(what: str, data: bytes, keyed: bool,
                                       want: tuple[int, int | None, bytes | None]) -> None:
    cache, journal = big_cache(1, 3)
    transfers = transfers_for(cache, journal, KEY)
    axfr = raw_tsig(dns.message.make_query(ZONE, "AXFR"), "xfr-key",
                    "hmac-sha512" if "512" in what else "hmac-sha1", b"x" * 20)
    out = Collect()
    coro = transfers.start(axfr, "127.0.0.1", out)
    assert coro is not None
    asyncio.run(coro)
    assert [tsig_of(m) for m in out.messages] == [(dns.rcode.NOTAUTH, 17, b"")]


def test_signed_udp_queries_are_rate_limited() -> None:
    cache, journal = big_cache(1, 3)
    transfers = transfers_for(cache, journal, KEY, limit=xfr.RateLimit(rate=0.001, burst=2))
    handler = Handler(cache.zone, 1232, signer=transfers)
    query = dns.message.make_query(ZONE, "SOA")
    query.use_tsig({KEY.name: KEY}, keyname=KEY.name)
    data = query.to_wire()
    got = [handler.handle(data, False, loopback) for _ in range(4)]
    assert [g is not None for g in got] == [True, True, False, False]
    # Over TCP (no spoofing) there is no rate.
    assert all(handler.handle(data, True) for _ in range(4))


def test_a_signed_udp_query_without_the_sender_is_truncated_not_empty() -> None:
    """A transport that cannot tell the sender (the signer rate-limits by it): TC, so
    that the client asks again over TCP; never an empty datagram."""
    handler, _ = signed_handler()
    query = dns.message.make_query(ZONE, "SOA")
    query.use_tsig({KEY.name: KEY}, keyname=KEY.name)
    response = handler.handle(query.to_wire(), False)
    assert response
    reply = dns.message.from_wire(response)
    assert reply.flags & dns.flags.TC and not reply.answer and reply.id == query.id


def test_a_tsig_record_not_last_is_formerr() -> None:
    handler, _ = signed_handler()
    query = dns.message.make_query(ZONE, "SOA", use_edns=True)
    query.use_tsig({KEY.name: KEY}, keyname=KEY.name)
    data = query.to_wire()
    # Move the OPT behind the TSIG: the OPT record is the 11 bytes before the TSIG's.
    reply = dns.message.from_wire(data, keyring=False)
    assert reply.tsig is not None
    tsig_len = len(data) - len(dns.message.make_query(ZONE, "SOA", use_edns=True).to_wire())
    head, opt, tsig = data[: -tsig_len - 11], data[-tsig_len - 11 : -tsig_len], data[-tsig_len:]
    assert opt[:3] == b"\x00\x00\x29"
    swapped = head + tsig + opt
    assert tsig_of(answer(handler, swapped, True))[0] == dns.rcode.FORMERR
    assert query_module.TSIG == dns.rdatatype.TSIG


@pytest.mark.parametrize("edns", [False, True])
def test_a_signed_udp_ixfr_that_does_not_fit_gets_a_signed_tc(edns: bool) -> None:
    """RFC 8945 5.3/5.4: dnspython with the keyring accepts the TC (it verifies the MAC
    against the query's) and so learns to ask again over TCP. Before: an unsigned TC,
    which such a client rejects (dnspython raises)."""
    cache, journal = big_cache()
    transfers = transfers_for(cache, journal, KEY, limit=Unlimited())
    handler = Handler(cache.zone, 1232, udp_transfer=transfers.udp, signer=transfers)
    query = ixfr_query(12345) if edns else dns.message.make_query(ZONE, "IXFR")
    if not edns:
        query.authority.append(dns.rrset.from_text(ZONE + ".", 0, "IN", "SOA",
                                                   ". . 12345 0 0 0 0"))
    query.use_tsig({KEY.name: KEY}, keyname=KEY.name)
    response = handler.handle(query.to_wire(), False, loopback)
    assert response
    reply = dns.message.from_wire(response, keyring={KEY.name: KEY}, request_mac=query.mac)
    assert reply.had_tsig and reply.tsig[0].error == 0
    assert reply.flags & dns.flags.TC and not reply.answer and reply.id == query.id
    assert reply.question == query.question
    assert transfers.counts.by[("ixfr", "udp-truncated")] == 1


@pytest.mark.parametrize(("algorithm", "mac", "rcode", "result"), [
    ("hmac-sha256", b"x" * 8, dns.rcode.FORMERR, "formerr"),   # out of the size band
    ("hmac-sha256", b"x" * 32, dns.rcode.NOTAUTH, "notauth"),  # a bad MAC
    ("hmac-sha256", b"x" * 16, dns.rcode.NOTAUTH, "notauth"),  # half the hash: checked
    ("hmac-sha512", b"x" * 64, dns.rcode.NOTAUTH, "notauth"),  # our key, another algorithm
])
def test_a_rejected_signed_transfer_is_counted_by_its_result(algorithm: str, mac: bytes,
                                                             rcode: int, result: str) -> None:
    cache, journal = big_cache(1, 3)
    transfers = transfers_for(cache, journal, KEY)
    axfr = raw_tsig(dns.message.make_query(ZONE, "AXFR"), "xfr-key", algorithm, mac)
    out = Collect()
    coro = transfers.start(axfr, "127.0.0.1", out)
    assert coro is not None
    asyncio.run(coro)
    assert [dns.message.from_wire(m, keyring=False).rcode() for m in out.messages] == [rcode]
    assert transfers.counts.by == {("axfr", result): 1}


def test_a_signed_transfer_is_signed_at_the_clock_time() -> None:
    """Every message's TSIG time signed is the injected clock's (RFC 8945 5.3.1), read
    back unverified: the fake clock's second is far from the real one."""
    from .fakeclock import FakeClock

    clock = FakeClock()
    cache, journal = big_cache(1, 3)
    transfers = xfr.Transfers(cache.zone, journal, ALLOWED, KEY, xfr.Counts({}),
                              limit=Unlimited(), clock=clock)
    query = dns.message.make_query(ZONE, "AXFR")
    query.use_tsig({KEY.name: KEY}, keyname=KEY.name)
    out = Collect()
    coro = transfers.start(query.to_wire(), "127.0.0.1", out)
    assert coro is not None
    asyncio.run(coro)
    assert out.messages
    for message in out.messages:
        signed = dns.message.from_wire(message, keyring=False, xfr=True,
                                       one_rr_per_rrset=True)
        assert signed.tsig is not None
        assert signed.tsig[0].time_signed == int(clock.time()) != int(time.time())
