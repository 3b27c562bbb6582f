"""What a transfer query must be before anything is sent, to the byte and to the count:
which messages are transfers at all, which addresses --allow-transfer admits, each
refusal's answer and result, the header and question of the answers, and a transfer
that ends counted and giving its slot back. dnspython reads what is sent."""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import time
from ipaddress import ip_network

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TSIG
import dns.rrset
import dns.tsig
import pytest

from clusterset_dns.transfers import packing, xfr, zonedata
from clusterset_dns.transfers.journal import Diff, Journal
from clusterset_dns.zone import rrs
from clusterset_dns.zone.cache import Cache

from .fakeclock import FakeClock
from .test_xfr_limits import (
    ALLOWED,
    KEY,
    ZONE,
    Collect,
    Unlimited,
    big_cache,
    ixfr_query,
    raw_tsig,
)

KEYRING = {KEY.name: KEY}
AXFR, IXFR = 252, 251


def header(flags: int = 0, qdcount: int = 1) -> bytes:
    return struct.pack("!HHHHHH", 0x1234, flags, qdcount, 0, 0, 0)


ROOT_AXFR = header() + b"\x00" + struct.pack("!HH", AXFR, 1)  # 17 bytes: the shortest


@pytest.mark.parametrize(("message", "qtype"), [
    (ROOT_AXFR, AXFR),
    (ROOT_AXFR[:-1], 0),  # a byte short of the class
    (header() + b"\x00" + struct.pack("!HH", IXFR, 1), IXFR),
    (header() + b"\x00" + struct.pack("!HH", 6, 1), 0),  # SOA
    (header() + b"\x00" + struct.pack("!HH", 0x0100 | AXFR, 1), 0),  # AXFR's low byte
    (header(0x8000) + ROOT_AXFR[12:], 0),  # a response
    (header(0x0800) + ROOT_AXFR[12:], 0),  # opcode 1 (IQUERY)
    (header(0x7800) + ROOT_AXFR[12:], 0),  # opcode 15
    (header(0x0700) + ROOT_AXFR[12:], AXFR),  # AA, TC and RD: still a query
    (header(0x00FF) + ROOT_AXFR[12:], AXFR),  # the low byte's bits do not matter
    (header(qdcount=0) + ROOT_AXFR[12:], 0),
    (header(qdcount=2) + ROOT_AXFR[12:], 0),
    (header(qdcount=0x0101) + ROOT_AXFR[12:], 0),
    (header() + b"\x03abc\x00" + struct.pack("!HH", AXFR, 1), AXFR),
    (header() + b"\x03abc\x00" + struct.pack("!H", AXFR) + b"\x00", 0),  # 3 bytes after
    (header() + b"\x03ab", 0),  # the name runs off the end
])
def test_which_messages_are_transfers(message: bytes, qtype: int) -> None:
    assert xfr.transfer_qtype(message) == qtype


@pytest.mark.parametrize(("peer", "allowed"), [
    ("127.0.0.1", True),
    ("127.255.255.255", True),
    ("128.0.0.1", False),
    ("::ffff:127.0.0.1", True),  # an IPv4-mapped address is its IPv4 address
    ("::ffff:10.0.0.1", False),
    ("::1", False),
    ("fe80::1%eth0", True),  # a scope is not part of the address
    ("fe80::2%eth0", False),
    ("garbage", False),
    ("", False),
])
def test_which_senders_may_transfer(peer: str, allowed: bool) -> None:
    cache, journal = big_cache(1, 1)
    t = xfr.Transfers(cache.zone, journal, (*ALLOWED, ip_network("fe80::1/128")), None,
                      xfr.Counts({}))
    assert t.allowed(peer) is allowed


def run(t: xfr.Transfers, data: bytes, peer: str = "127.0.0.1") -> list[bytes]:
    out = Collect()
    coro = t.start(data, peer, out)
    assert coro is not None
    asyncio.run(coro)
    return out.messages


def signed(query: dns.message.Message) -> bytes:
    query.use_tsig(KEYRING, keyname=KEY.name)
    return query.to_wire()


def check_tsig_chain(messages: list[bytes], query: dns.message.Message) -> None:
    """Each message of a transfer verifies, each MAC chained to the one before."""
    context = None
    for message in messages:
        read = dns.message.from_wire(message, keyring=KEYRING, request_mac=query.mac,
                                     xfr=True, tsig_ctx=context, multi=True,
                                     one_rr_per_rrset=True)
        assert read.had_tsig
        context = read.tsig_ctx

def no_soa_ixfr() -> bytes:
    return dns.message.make_query(ZONE, "IXFR").to_wire()


def other_zone() -> bytes:
    return dns.message.make_query("example.org", "AXFR").to_wire()


def chaos_class() -> bytes:
    return dns.message.make_query(ZONE, "AXFR", rdclass=dns.rdataclass.CH).to_wire()


def unparsable() -> bytes:
    # a transfer question, then an answer count with no record behind it
    return ROOT_AXFR[:6] + b"\x00\x01" + ROOT_AXFR[8:12] + b"\x00" + ROOT_AXFR[13:]


NOT_ALLOWED = "refused: not in --allow-transfer"


@pytest.mark.parametrize(("case", "peer", "keyed", "rcode", "counted", "logged"), [
    ("axfr", "10.0.0.1", False, dns.rcode.REFUSED, ("axfr", "refused"),
     f"AXFR from 10.0.0.1 {NOT_ALLOWED}"),
    ("ixfr", "10.0.0.1", False, dns.rcode.REFUSED, ("ixfr", "refused"),
     f"IXFR from 10.0.0.1 {NOT_ALLOWED}"),
    ("axfr", "127.0.0.1", True, dns.rcode.REFUSED, ("axfr", "refused"),
     "AXFR from 127.0.0.1 refused: not signed with the TSIG key"),
    ("other zone", "127.0.0.1", False, dns.rcode.NOTAUTH, ("axfr", "notauth"), None),
    ("class CH", "127.0.0.1", False, dns.rcode.NOTAUTH, ("axfr", "notauth"), None),
    ("ixfr without a SOA", "127.0.0.1", False, dns.rcode.FORMERR, ("ixfr", "formerr"), None),
    ("unparsable", "127.0.0.1", False, dns.rcode.FORMERR, ("axfr", "formerr"), None),
])
def test_a_refused_transfer_is_one_error_answer_counted_by_its_result(
        case: str, peer: str, keyed: bool, rcode: int, counted: tuple[str, str],
        logged: str | None, caplog: pytest.LogCaptureFixture) -> None:
    cache, journal = big_cache(1, 1)
    t = xfr.Transfers(cache.zone, journal, ALLOWED, KEY if keyed else None, xfr.Counts({}))
    data = {"axfr": dns.message.make_query(ZONE, "AXFR").to_wire(),
            "ixfr": ixfr_query(1).to_wire(), "other zone": other_zone(),
            "class CH": chaos_class(), "ixfr without a SOA": no_soa_ixfr(),
            "unparsable": unparsable()}[case]
    with caplog.at_level(logging.INFO, "clusterset_dns.transfers.xfr"):
        messages = run(t, data, peer)
    assert [r.getMessage() for r in caplog.records] == ([logged] if logged else [])
    assert len(messages) == 1
    assert messages[0][:2] == data[:2]
    assert dns.message.from_wire(messages[0]).rcode() == rcode
    assert t.counts.by == {counted: 1}
    assert t.active == 0 and t.running == {}  # no slot taken


def test_a_signed_transfer_is_taken_and_signed() -> None:
    cache, journal = big_cache(1, 1)
    t = xfr.Transfers(cache.zone, journal, ALLOWED, KEY, xfr.Counts({}))
    query = dns.message.make_query(ZONE, "AXFR")
    data = signed(query)
    messages = run(t, data)
    read = dns.message.from_wire(messages[0], keyring=KEYRING, request_mac=query.mac,
                                 xfr=True, one_rr_per_rrset=True)
    assert read.had_tsig and read.answer
    assert t.counts.by == {("axfr", "full"): 1}


@pytest.mark.parametrize(("asked", "copied"), [
    (dns.flags.RD, dns.flags.RD),
    (dns.flags.RD | dns.flags.CD | dns.flags.AD, dns.flags.RD),
    (0, 0),
])
def test_the_answers_header_and_question_as_asked(asked: int, copied: int) -> None:
    """QR and AA, the query's RD alone; its id; the question with its case kept."""
    cache, journal = big_cache(1, 1)
    t = xfr.Transfers(cache.zone, journal, ALLOWED, None, xfr.Counts({}))
    query = dns.message.make_query(dns.name.from_text("ClusterSet.LOCAL"), "AXFR")
    query.flags = asked
    messages = run(t, query.to_wire())
    read = dns.message.from_wire(messages[0], xfr=True, one_rr_per_rrset=True)
    assert read.flags == dns.flags.QR | dns.flags.AA | copied and read.id == query.id
    assert b"\x0aClusterSet\x05LOCAL\x00" in messages[0]
    assert str(read.question[0].name) == "ClusterSet.LOCAL."
    assert (read.question[0].rdtype, read.question[0].rdclass) == (AXFR, dns.rdataclass.IN)


def test_a_transfer_gives_its_slot_back_and_another_from_the_address_runs() -> None:
    cache, journal = big_cache(1, 3)
    t = xfr.Transfers(cache.zone, journal, ALLOWED, None, xfr.Counts({}), max_transfers=4,
                      limit=Unlimited(), clock=FakeClock())
    data = dns.message.make_query(ZONE, "AXFR").to_wire()
    for _ in range(3):
        assert dns.message.from_wire(run(t, data, "::ffff:127.0.0.5")[0]).rcode() == 0
        assert t.active == 0 and t.running == {}
    assert t.counts.by == {("axfr", "full"): 3}


def test_an_ixfr_with_a_soa_among_other_authority_records() -> None:
    cache, journal = big_cache(1, 1)
    t = xfr.Transfers(cache.zone, journal, ALLOWED, None, xfr.Counts({}))
    query = ixfr_query(cache.zone.serial)
    query.authority.insert(0, dns.rrset.from_text(ZONE + ".", 0, "IN", "NS", "ns1.example."))
    messages = run(t, query.to_wire())
    assert t.counts.by == {("ixfr", "uptodate"): 1} and len(messages) == 1


@pytest.mark.parametrize(("kind", "algorithm", "mac", "logged"), [
    ("AXFR", "hmac-sha256", b"x" * 8, "TSIG MAC size out of bounds"),
    ("IXFR", "hmac-sha512", b"x" * 64, "TSIG: our key name with another algorithm"),
    ("AXFR", "hmac-sha256", b"x" * 32, f"TSIG: {dns.tsig.BadSignature()}"),
])
def test_a_rejected_signature_is_logged_with_the_transfer_and_its_sender(
        kind: str, algorithm: str, mac: bytes, logged: str,
        caplog: pytest.LogCaptureFixture) -> None:
    cache, journal = big_cache(1, 1)
    t = xfr.Transfers(cache.zone, journal, ALLOWED, KEY, xfr.Counts({}))
    query = ixfr_query(1) if kind == "IXFR" else dns.message.make_query(ZONE, "AXFR")
    with caplog.at_level(logging.INFO, "clusterset_dns.transfers.xfr"):
        run(t, raw_tsig(query, "xfr-key", algorithm, mac), "127.0.0.7")
    assert [r.getMessage() for r in caplog.records] == [
        f"{kind} from 127.0.0.7 rejected: {logged}"]


def test_a_signed_transfer_of_several_messages_verifies_as_one_chain() -> None:
    """RFC 8945 5.3.1: each message after the first is signed over the previous MAC;
    dnspython checks the chain message by message."""
    cache, journal = big_cache()
    t = xfr.Transfers(cache.zone, journal, ALLOWED, KEY, xfr.Counts({}))
    query = dns.message.make_query(ZONE, "AXFR")
    messages = run(t, signed(query))
    assert len(messages) > 1
    check_tsig_chain(messages, query)


def signed_at(query: dns.message.Message, when: int, error: int = 0) -> bytes:
    """``query`` signed with our key at ``when`` (Unix seconds), its MAC right, its TSIG
    error field ``error`` (dnspython signs only at the real time)."""
    unsigned = query.to_wire()
    template = dns.rdtypes.ANY.TSIG.TSIG(dns.rdataclass.ANY, dns.rdatatype.TSIG,
                                         KEY.algorithm, 0, 300, b"", query.id, error, b"")
    rdata = dns.tsig.sign(unsigned, KEY, template, when)[0].to_wire() or b""
    record = (KEY.name.to_wire() or b"") + struct.pack("!HHIH", dns.rdatatype.TSIG,
                                                       dns.rdataclass.ANY, 0, len(rdata))
    arcount = struct.unpack_from("!H", unsigned, 10)[0] + 1
    return unsigned[:10] + struct.pack("!H", arcount) + unsigned[12:] + record + rdata


@pytest.mark.parametrize(("what", "offset", "error"), [
    # RFC 8945 5.2.3 would have BADTIME signed: dns-behaviour.md 7.1 gives a plain NOTAUTH
    ("signed an hour ago", -3600, 0),
    ("signed an hour ahead", 3600, 0),
    ("a TSIG error from the client", 0, 16),  # dnspython's PeerError: no error of ours
])
def test_a_signature_failing_without_an_error_of_ours_is_a_plain_notauth(
        what: str, offset: int, error: int) -> None:
    """No TSIG record in the answer at all (no BADSIG, BADKEY or garbage record): the
    query's header bits and question, NOTAUTH, ARCOUNT 0; counted as notauth."""
    cache, journal = big_cache(1, 1)
    t = xfr.Transfers(cache.zone, journal, ALLOWED, KEY, xfr.Counts({}))
    query = dns.message.make_query(ZONE, "AXFR")
    data = signed_at(query, int(time.time()) + offset, error)
    if not error:  # the MAC is right: only the time is wrong
        with pytest.raises(dns.tsig.BadTime):
            dns.message.from_wire(data, keyring=KEYRING)
    messages = run(t, data)
    question = data[12:12 + len(ZONE) + 2 + 4]
    assert messages == [data[:2] + struct.pack("!HHHHH", 0x8000 | dns.flags.RD
                                               | dns.rcode.NOTAUTH, 1, 0, 0, 0) + question]
    assert t.counts.by == {("axfr", "notauth"): 1}


@pytest.mark.parametrize("kind", ["AXFR", "IXFR"])
def test_a_finished_transfer_logs_its_serial_result_and_every_byte_sent(
        kind: str, caplog: pytest.LogCaptureFixture) -> None:
    """The bytes are those of every message sent (several here), not one less or more."""
    cache, journal = big_cache()
    t = xfr.Transfers(cache.zone, journal, ALLOWED, None, xfr.Counts({}))
    query = ixfr_query(1) if kind == "IXFR" else dns.message.make_query(ZONE, "AXFR")
    with caplog.at_level(logging.INFO, "clusterset_dns.transfers.xfr"):
        messages = run(t, query.to_wire())
    assert len(messages) > 1
    assert [r.getMessage() for r in caplog.records] == [
        f"{kind} of serial {cache.zone.serial}: full, {sum(map(len, messages))} bytes"]


class CountedTurns(xfr.Turns):
    """The loop's turns a transfer takes (the first holds the snapshot's taking)."""

    def __init__(self) -> None:
        super().__init__()
        self.taken_turns = 0

    async def turn(self) -> None:
        self.taken_turns += 1
        await super().turn()


def steps(cache: Cache, journal: Journal, tick: float) -> tuple[int, list[bytes]]:
    """The turns an AXFR of ``cache``'s zone takes, and its messages after their ids,
    when each reading of the clock finds it ``tick`` seconds later (as if each record,
    or each message finished, took that long to encode)."""
    t = xfr.Transfers(cache.zone, journal, ALLOWED, None, xfr.Counts({}),
                      clock=FakeClock(tick=tick))
    t.turns = turns = CountedTurns()
    messages = run(t, dns.message.make_query(ZONE, "AXFR").to_wire())
    return turns.taken_turns, [m[2:] for m in messages]  # (the query's random id)


def test_a_step_encodes_while_at_most_step_seconds_have_passed() -> None:
    """A step goes on while the clock reads at most STEP_SECONDS past the step's start:
    when every piece of work costs exactly STEP_SECONDS, the first ends on the deadline
    and the step takes a second one; costing more, each piece is a step of its own. The
    same messages either way. Turns: the snapshot's, the steps, and the last, empty one
    (where the step after the last piece finds nothing left)."""
    cache, journal = big_cache()  # many records
    over, over_messages = steps(cache, journal, xfr.STEP_SECONDS * 1.5)
    exact, exact_messages = steps(cache, journal, xfr.STEP_SECONDS)
    under, _ = steps(cache, journal, xfr.STEP_SECONDS * 0.75)
    pieces = over - 2
    assert pieces > 10 and exact_messages == over_messages
    assert exact - 2 == under - 2 == pieces // 2  # two pieces a step (the last alone if odd)


class BoundedTurns(xfr.Turns):
    """Fails a transfer that asks for more than ``most`` turns of the loop, so a
    transfer that never ends fails here instead of hanging the test."""

    def __init__(self, most: int) -> None:
        super().__init__()
        self.most, self.taken_turns = most, 0

    async def turn(self) -> None:
        self.taken_turns += 1
        if self.taken_turns > self.most:
            raise AssertionError(f"the transfer asked for a turn more than {self.most}")
        await super().turn()


@pytest.mark.parametrize(("services", "each"), [(1, 1), (8, 500)])
def test_a_transfer_whose_step_never_runs_out_of_time_takes_two_turns(
        services: int, each: int) -> None:
    """On a clock that does not move, the first step encodes and sends the whole zone
    and the transfer ends: the snapshot's turn and that step's, not one more."""
    cache, journal = big_cache(services, each)
    t = xfr.Transfers(cache.zone, journal, ALLOWED, None, xfr.Counts({}), clock=FakeClock())
    t.turns = turns = BoundedTurns(10)
    messages = run(t, dns.message.make_query(ZONE, "AXFR").to_wire())
    assert turns.taken_turns == 2
    assert (len(messages) > 1) is (each > 1)  # one step sends several messages too
    assert t.counts.by == {("axfr", "full"): 1}


@pytest.mark.parametrize(("keyed", "most"), [(False, 65535), (True, 65535 - xfr.TSIG_ROOM)])
def test_the_messages_of_a_tcp_transfer_are_packed_to_64k_less_the_tsig_room(
        keyed: bool, most: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer is given the whole 65,535 bytes of a TCP message, or that less
    TSIG_ROOM when each message is signed; each message sent keeps to it."""
    limits: list[int] = []

    class Noted(xfr.MessageWriter):
        def __init__(self, head: bytes, question: bytes, limit: int) -> None:
            limits.append(limit)
            super().__init__(head, question, limit)

    monkeypatch.setattr(xfr, "MessageWriter", Noted)
    cache, journal = big_cache()
    t = xfr.Transfers(cache.zone, journal, ALLOWED, KEY if keyed else None, xfr.Counts({}))
    query = dns.message.make_query(ZONE, "AXFR")
    messages = run(t, signed(query) if keyed else query.to_wire())
    assert limits == [most]
    assert len(messages) > 1 and max(map(len, messages)) <= 65535


class OneDiff:
    """A journal holding one difference: ``added`` records, none removed."""

    def __init__(self, old: int, new: int, added: tuple[rrs.Record, ...]) -> None:
        self.diff = Diff(old, new, (), added)

    def since(self, serial: int, current: int) -> list[Diff] | None:
        return [self.diff] if serial == self.diff.old_serial else None


@pytest.mark.parametrize(("records", "taken"), [
    (packing.CHUNK - 1, 3),  # the snapshot's turn, the step of the one message, the end
    (packing.CHUNK, 4),  # and a step ended at the CHUNK-th record, before the message
])
def test_an_ixfr_looks_at_the_clock_after_every_chunk_of_records(records: int,
                                                                 taken: int) -> None:
    """Between two looks at the clock an IXFR encodes at most CHUNK records: on a clock
    past every step's deadline, an answer of CHUNK - 1 records (one message) is one
    step, one of exactly CHUNK records two: the first ends at its CHUNK-th record."""
    cache, journal = big_cache(1, 40)
    serial = cache.zone.serial
    body = tuple(itertools.islice(zonedata.take(cache.zone).records(), records - 4))
    t = xfr.Transfers(cache.zone, journal, ALLOWED, None, xfr.Counts({}),
                      clock=FakeClock(tick=1.0))
    t.journal = OneDiff(serial - 1, serial, body)  # type: ignore[assignment]
    t.turns = turns = BoundedTurns(10)
    messages = run(t, ixfr_query(serial - 1).to_wire())
    assert turns.taken_turns == taken
    assert len(messages) == 1 and t.counts.by == {("ixfr", "incremental"): 1}
    read = dns.message.from_wire(messages[0], xfr=True, one_rr_per_rrset=True)
    assert len(read.answer) == records  # the SOA, the old and new SOAs, the body, the SOA


def test_a_signed_ixfr_of_several_messages_verifies_as_one_chain() -> None:
    """As an AXFR's (above), an IXFR's messages made from records one by one (not
    from a snapshot) are each signed over the previous MAC (RFC 8945 5.3.1)."""
    cache, journal = big_cache()
    serial = cache.zone.serial
    t = xfr.Transfers(cache.zone, journal, ALLOWED, KEY, xfr.Counts({}))
    t.journal = OneDiff(serial - 1, serial,  # type: ignore[assignment]
                        tuple(zonedata.take(cache.zone).records()))
    query = ixfr_query(serial - 1)
    messages = run(t, signed(query))
    assert len(messages) > 1 and t.counts.by == {("ixfr", "incremental"): 1}
    check_tsig_chain(messages, query)
