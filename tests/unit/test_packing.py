"""transfers/packing on its own: a transfer message holds records up to its limit to the
byte, a record too large for any message still goes (alone), names are compressed, and
the error answers keep the query's question and its RD and CD bits. dnspython reads
every message back."""

from __future__ import annotations

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import pytest

from clusterset_dns.transfers import packing
from clusterset_dns.zone import rrs, wire

HEAD = b"\x12\x34" + (0x8400).to_bytes(2, "big")  # id, then QR and AA
QUESTION = dns.name.from_text("clusterset.local.").to_wire() + b"\x00\xfc\x00\x01"  # AXFR


def a_record(i: int) -> rrs.Record:
    owner = dns.name.from_text(f"h{i}.svc.clusterset.local.").to_wire()
    return rrs.Record(owner, wire.A, 5, bytes([10, 0, i // 256, i % 256]))


def pack(records: list[rrs.Record], limit: int) -> list[bytes]:
    writer = packing.MessageWriter(HEAD, QUESTION, limit)
    messages = [done for done in map(writer.add, records) if done is not None]
    return [*messages, writer.finish()]


def read(messages: list[bytes]) -> list[list[str]]:
    """Each message's records (owner and address), read by dnspython."""
    out = []
    for data in messages:
        message = dns.message.from_wire(data, xfr=True, origin=None)
        out.append([f"{rrset.name} {rd}" for rrset in message.answer for rd in rrset])
    return out


def test_a_message_holds_records_to_the_byte_of_its_limit() -> None:
    records = [a_record(i) for i in range(6)]
    whole = packing.MessageWriter(HEAD, QUESTION, 65535)
    for record in records[:4]:
        whole.add(record)
    four = whole.size  # the bytes of a message of the first four (names compressed)
    exact = read(pack(records, four))
    assert [len(m) for m in exact] == [4, 2]
    short = read(pack(records, four - 1))
    assert [len(m) for m in short] == [3, 3]
    assert [r for m in short for r in m] == [r for m in exact for r in m] == [
        f"h{i}.svc.clusterset.local. 10.0.0.{i}" for i in range(6)]
    assert len(pack(records, four)[0]) == four


def test_a_record_larger_than_the_limit_goes_alone() -> None:
    """Better a message over the limit than a record lost (the limit keeps room for a
    TSIG record; the hard limit, 64 KiB, no record reaches)."""
    records = [a_record(i) for i in range(3)]
    messages = pack(records, 20)
    assert [len(m) for m in read(messages)] == [1, 1, 1]


def test_only_the_first_message_carries_the_question() -> None:
    messages = pack([a_record(i) for i in range(4)], 80)
    parsed = [dns.message.from_wire(m, xfr=True, origin=None) for m in messages]
    assert len(parsed) > 1
    assert [len(p.question) for p in parsed] == [1] + [0] * (len(parsed) - 1)
    assert all(m[:4] == HEAD for m in messages)


def test_with_serial_changes_only_the_serial() -> None:
    rdata = dns.rdata.from_text("IN", "SOA", "ns.dns.clusterset.local. hostmaster."
                                "clusterset.local. 7 7200 1800 86400 5").to_digestable()
    soa = rrs.Record(b"\x00", wire.SOA, 5, rdata)
    changed = packing.with_serial(soa, 0xFFFFFFFE)
    assert changed.rdata == rdata.replace((7).to_bytes(4, "big"), b"\xff\xff\xff\xfe", 1)
    assert changed._replace(rdata=rdata) == soa


@pytest.mark.parametrize("rd", [False, True])
@pytest.mark.parametrize("cd", [False, True])
def test_an_error_answer_keeps_the_question_and_rd_cd(rd: bool, cd: bool) -> None:
    query = dns.message.make_query("clusterset.local.", "AXFR")
    query.flags = (dns.flags.RD if rd else 0) | (dns.flags.CD if cd else 0) | dns.flags.AD
    data = query.to_wire()
    answer = packing.error(data, dns.rcode.REFUSED)
    assert answer[:2] == data[:2]
    reply = dns.message.from_wire(answer)
    assert reply.rcode() == dns.rcode.REFUSED and reply.flags & dns.flags.QR
    assert bool(reply.flags & dns.flags.RD) == rd and bool(reply.flags & dns.flags.CD) == cd
    assert not reply.flags & (dns.flags.AD | dns.flags.AA)  # only RD and CD are copied
    assert reply.question == query.question and not reply.answer
    assert answer[12:] == data[12:]  # the question as sent, and nothing after it


def test_an_error_answer_carries_the_tsig_record_given() -> None:
    data = dns.message.make_query("clusterset.local.", "AXFR").to_wire()
    record = b"\x00" + wire.RR_HEAD.pack(dns.rdatatype.TXT, 1, 0, 1) + b"\x00"
    answer = packing.error(data, dns.rcode.NOTAUTH, record)
    assert answer.endswith(record) and answer[10:12] == b"\x00\x01"  # ARCOUNT
    assert packing.error(data, dns.rcode.NOTAUTH)[10:12] == b"\x00\x00"


@pytest.mark.parametrize("data", [bytes(10), bytes(10) + b"\x03abc",  # a name cut short
                                  bytes(10) + b"\x00\x00\x01",  # the root, no class
                                  bytes(10) + b"\x00\x00\xfc\x00"])  # half a class
def test_an_error_answer_to_a_broken_question_has_none(data: bytes) -> None:
    """(Only transfer queries, at least a header long, get here.)"""
    answer = packing.error(b"\x12\x34" + data, dns.rcode.FORMERR)
    assert answer == b"\x12\x34" + wire.HEADER.pack(0x8000 | dns.rcode.FORMERR, 0, 0, 0, 0)


def test_an_error_answer_sets_its_own_rcode_only() -> None:
    """A query's header may carry rcode bits: the answer's are ours alone (SERVFAIL, 2:
    a bit of the query's 15 left in would make it another code)."""
    data = bytearray(dns.message.make_query("clusterset.local.", "AXFR").to_wire())
    data[3] |= 0x0F
    assert dns.message.from_wire(packing.error(bytes(data), dns.rcode.SERVFAIL)).rcode() == \
        dns.rcode.SERVFAIL


def test_the_shortest_question_is_kept() -> None:
    """The root's (five bytes: the empty name, type, class) is a question."""
    data = dns.message.make_query(".", "AXFR").to_wire()
    answer = packing.error(data, dns.rcode.NOTAUTH)
    assert answer[12:] == data[12:] == b"\x00\x00\xfc\x00\x01"
    assert answer[4:6] == b"\x00\x01"  # QDCOUNT
