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


# -- names compressed, to the offset -----------------------------------------------------------

def wire_name(text: str) -> bytes:
    return dns.name.from_text(text).to_wire()


def test_names_are_compressed_against_the_suffixes_written_before() -> None:
    """The second owner is its first label and a pointer to svc.clusterset.local, written
    at 34 + 3 (after the header, the question and the first label of the first owner)."""
    records = [rrs.Record(wire_name("h0.svc.clusterset.local."), wire.A, 5, bytes([10, 0, 0, 0])),
               rrs.Record(wire_name("h1.svc.clusterset.local."), wire.A, 5, bytes([10, 0, 0, 1]))]
    [message] = pack(records, 65535)
    head = wire.RR_HEAD.pack(wire.A, 1, 5, 4)
    assert message == (HEAD + wire.COUNTS.pack(1, 2, 0, 0) + QUESTION
                       + records[0].owner + head + records[0].rdata
                       + b"\x02h1\xc0\x25" + head + records[1].rdata)


def filler(size: int) -> rrs.Record:
    """A record of ``size`` bytes (owned by the root: no name to compress)."""
    text = b"".join(bytes([min(255, n)]) + b"f" * min(255, n)
                    for n in _string_sizes(size - 11))
    return rrs.Record(b"\x00", wire.TXT, 5, text)


def _string_sizes(rdlength: int) -> list[int]:
    sizes = []
    while rdlength > 0:
        take = min(256, rdlength)
        sizes.append(take - 1)
        rdlength -= take
    return sizes


@pytest.mark.parametrize("at", [0x4000 - 2, 0x4000 - 3, 0x4000])
def test_no_name_is_pointed_at_past_what_a_pointer_reaches(at: int) -> None:
    """A suffix written at 0x4000 or later is never pointed at (14 bits): the owner
    x.svc.clusterset.local written at ``at`` - 2 puts svc.clusterset.local at ``at``."""
    start = 12 + len(QUESTION)
    first = rrs.Record(wire_name("x.svc.clusterset.local."), wire.A, 5, bytes(4))
    later = rrs.Record(wire_name("y.svc.clusterset.local."), wire.A, 5, bytes([1, 2, 3, 4]))
    records = [filler(at - 2 - start), first, later]
    [message] = pack(records, 65535)
    assert read([message]) == [[". " + rrs_text(records[0]),
                                "x.svc.clusterset.local. 0.0.0.0",
                                "y.svc.clusterset.local. 1.2.3.4"]]
    pointed = message.endswith(b"\x01y" + (0xC000 | at).to_bytes(2) + wire.RR_HEAD.pack(
        wire.A, 1, 5, 4) + bytes([1, 2, 3, 4]))
    assert pointed == (at < 0x4000)


def rrs_text(record: rrs.Record) -> str:
    return str(dns.rdata.from_wire("IN", record.rtype, record.rdata, 0, len(record.rdata)))


def test_ns_and_soa_names_are_compressed_and_pointed_at() -> None:
    """The names inside an NS's and an SOA's rdata are compressed against what came before
    and are pointed at by later names (their offsets are where they were written)."""
    apex = wire_name("clusterset.local.")
    ns = rrs.Record(apex, wire.NS, 5, wire_name("ns.dns.clusterset.local."))
    soa = rrs.Record(apex, wire.SOA, 5, wire_name("ns2.dns.clusterset.local.")
                     + wire_name("hostmaster.mail.clusterset.local.")
                     + bytes(range(1, 21)))
    records = [ns, soa,
               rrs.Record(wire_name("dns.clusterset.local."), wire.A, 5, bytes([10, 0, 0, 1])),
               rrs.Record(wire_name("mail.clusterset.local."), wire.A, 5, bytes([10, 0, 0, 2]))]
    [message] = pack(records, 65535)
    assert read([message]) == [[
        "clusterset.local. ns.dns.clusterset.local.",
        "clusterset.local. ns2.dns.clusterset.local. hostmaster.mail.clusterset.local. "
        "16909060 84281096 151653132 219025168 286397204",
        "dns.clusterset.local. 10.0.0.1", "mail.clusterset.local. 10.0.0.2"]]
    # the NS: its owner whole, 'ns' 'dns' and a pointer; the SOA: a pointer, 'ns2' and a
    # pointer, 'hostmaster' 'mail' and a pointer, 20 bytes; the A records: a pointer each
    assert len(message) == (12 + len(QUESTION) + len(apex) + 10 + 3 + 4 + 2
                            + 2 + 10 + 4 + 2 + 11 + 5 + 2 + 20 + 2 * (2 + 14))


def test_the_second_message_counts_its_header() -> None:
    """Records of 12 bytes, a limit of 60: the first message holds 2 (after its 22-byte
    question), every later one 4, each at or under the limit."""
    records = [filler(12)] * 15
    messages = pack(records, 60)
    assert [len(m) for m in messages] == [58, 60, 60, 60, 24]
    assert [int.from_bytes(m[6:8]) for m in messages] == [2, 4, 4, 4, 1]  # ANCOUNT
    read(messages)


def test_an_error_answer_leaves_out_what_follows_the_question() -> None:
    query = dns.message.make_query("clusterset.local.", "AXFR", use_edns=0)
    data = query.to_wire()
    answer = packing.error(data, dns.rcode.FORMERR)
    assert answer[12:] == QUESTION and answer[10:12] == b"\x00\x00"


# -- a zone's RRsets copied from the stored answers ----------------------------------------------

def key(owner: str, rtype: int) -> bytes:
    return wire_name(owner) + rtype.to_bytes(2, "big") + b"\x00\x01"


def stored(rtype: int, *rdatas: bytes, ttl: int = 5) -> wire.Answer:
    body = b"".join(b"\xc0\x0c" + wire.RR_HEAD.pack(rtype, 1, ttl, len(r)) + r for r in rdatas)
    return wire.Answer(wire.heads(0, len(rdatas), 0, 0), body, 0)


def pack_sets(pairs: list[tuple[bytes, wire.Answer]], limit: int = 65535,
              before: tuple[rrs.Record, ...] = ()) -> tuple[list[bytes], int]:
    """The messages (and how many pauses, b"", came between them)."""
    writer = packing.MessageWriter(HEAD, QUESTION, limit)
    out = [done for done in map(writer.add, before) if done is not None]
    pauses = 0
    for done in writer.add_rrsets(pairs):
        if done:
            out.append(done)
        else:
            pauses += 1
    return [*out, writer.finish()], pauses


def expected(pairs: list[tuple[bytes, wire.Answer]]) -> list[str]:
    """Every record of the pairs but the SOA's, as dnspython prints it."""
    out = []
    for k, answer in pairs:
        if int.from_bytes(k[-4:-2]) == wire.SOA:
            continue
        for record in rrs.answer_records(k, answer):
            text = dns.name.from_wire(record.owner, 0)[0].to_text()
            out.append(f"{text} {rrs_text(record)}")
    return out


def everything(messages: list[bytes]) -> list[str]:
    out = []
    for data in messages:
        message = dns.message.from_wire(data, xfr=True, origin=None)
        out += [f"{rrset.name} {rd}" for rrset in message.answer for rd in rrset]
    return out


A1, A2 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
SIX = b"\xfd" + bytes(14) + b"\x01"
SRV_A = wire.SRV_FIXED.pack(0, 10, 80) + wire_name("a.svc.clusterset.local.")
SOA = (wire_name("ns.dns.clusterset.local.") + wire_name("hostmaster.clusterset.local.")
       + bytes(20))


def test_rrsets_are_copied_with_each_owner_written_once() -> None:
    """a's A (2 records) writes its owner at 34 and svc.clusterset.local at 36; a's AAAA
    points at the owner; b's A is 'b' and a pointer to the parent: 134 bytes in all."""
    pairs = [(key("a.svc.clusterset.local.", wire.A), stored(wire.A, A1, A2)),
             (key("a.svc.clusterset.local.", wire.AAAA), stored(wire.AAAA, SIX)),
             (key("b.svc.clusterset.local.", wire.A), stored(wire.A, A2))]
    [message], pauses = pack_sets(pairs)
    assert everything([message]) == expected(pairs) and pauses == 0
    owner = wire_name("a.svc.clusterset.local.")
    assert message == (HEAD + wire.COUNTS.pack(1, 4, 0, 0) + QUESTION
                       + owner + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + A1
                       + b"\xc0\x22" + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + A2
                       + b"\xc0\x22" + wire.RR_HEAD.pack(wire.AAAA, 1, 5, 16) + SIX
                       + b"\x01b\xc0\x24" + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + A2)


def test_owners_of_one_label_are_written_out() -> None:
    """Their parent is the root, one byte: a pointer to it would take two."""
    pairs = [(key("x.", wire.A), stored(wire.A, A1)), (key("y.", wire.A), stored(wire.A, A2))]
    [message], _ = pack_sets(pairs)
    assert everything([message]) == expected(pairs)
    assert len(message) == 12 + len(QUESTION) + 2 * (3 + 14)


ZONE = [(key("clusterset.local.", wire.SOA), stored(wire.SOA, SOA)),
        (key("clusterset.local.", wire.NS), stored(wire.NS, wire_name("ns.dns.clusterset.local."))),
        (key("a.svc.clusterset.local.", wire.A), stored(wire.A, A1, A2)),
        (key("_http._tcp.a.svc.clusterset.local.", wire.SRV), stored(wire.SRV, SRV_A, SRV_A[:4]
                                                                      + b"\x00\x51" + SRV_A[6:])),
        (key("a.svc.clusterset.local.", wire.TXT), stored(wire.TXT, b"\x02hi")),
        (key("b.svc.clusterset.local.", wire.AAAA), stored(wire.AAAA, SIX))]


def test_a_zone_goes_whole_but_its_soa_and_in_order() -> None:
    messages, _ = pack_sets(ZONE)
    assert everything(messages) == expected(ZONE)
    assert len(expected(ZONE)) == 7


@pytest.mark.parametrize("first", range(len(ZONE)))
def test_any_rrset_may_come_first(first: int) -> None:
    pairs = ZONE[first:] + ZONE[:first]
    messages, _ = pack_sets(pairs)
    assert everything(messages) == expected(pairs)


def test_an_answer_not_copied_as_it_stands_is_decoded() -> None:
    """An authority section (NSCOUNT), an additional section not marked by glue_at, a
    record not owned by the question, a TTL holding C0 0C: each decoded; glue cut off."""
    plain = stored(wire.A, A1)
    authority = wire.Answer(wire.heads(0, 1, 1, 0), plain.body + b"\xc0\x0c" + wire.RR_HEAD.pack(
        wire.NS, 1, 5, 2) + b"\xc0\x0c", 0)
    extra = b"\xc0\x0c" + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + A2
    unmarked = wire.Answer(wire.heads(0, 1, 0, 1), plain.body + extra, 0)
    marked = wire.WithAdditional(wire.heads(0, 1, 0, 1), plain.body + extra, 0, len(plain.body))
    elsewhere = wire.Answer(wire.heads(0, 1, 0, 0), wire_name("c.svc.clusterset.local.")
                            + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + A1, 0)
    ttl = wire.Answer(wire.heads(0, 1, 0, 0), b"\xc0\x0c" + wire.RR_HEAD.pack(
        wire.A, 1, 0xC00C, 4) + A1, 0)
    big = wire.Answer(wire.heads(0, 256, 0, 0), stored(wire.A, *[bytes([10, 1, 0, i])
                                                                 for i in range(256)]).body, 0)
    pairs = [(key(f"{name}.svc.clusterset.local.", wire.A), answer) for name, answer in (
        ("p", authority), ("q", unmarked), ("r", marked), ("s", elsewhere), ("t", ttl),
        ("u", big))]
    messages, _ = pack_sets(pairs)
    got = everything(messages)
    assert got == [line for k, a in pairs for line in expected([(k, a)])[:a.heads[0][5] or 256]]
    assert "q.svc.clusterset.local. 10.0.0.2" not in got  # additional, not answer


def test_a_pause_comes_every_chunk_of_answers() -> None:
    pairs = [(key(f"h{i}.svc.clusterset.local.", wire.A), stored(wire.A, A1))
             for i in range(2 * packing.CHUNK)]
    assert pack_sets(pairs)[1] == 2
    assert pack_sets(pairs[:-1])[1] == 1
    assert pack_sets(pairs[: packing.CHUNK - 1])[1] == 0


def test_an_rrset_fits_a_message_to_the_byte() -> None:
    pairs = [(key("a.svc.clusterset.local.", wire.A), stored(wire.A, A1, A2)),
             (key("b.svc.clusterset.local.", wire.A), stored(wire.A, A1, A2))]
    [whole], _ = pack_sets(pairs)
    exact, _ = pack_sets(pairs, len(whole))
    assert exact == [whole]
    short, _ = pack_sets(pairs, len(whole) - 1)
    assert len(short) == 2 and everything(short) == expected(pairs)
    assert all(len(m) <= len(whole) - 1 for m in short)


def test_an_rrset_larger_than_a_message_is_split_into_records() -> None:
    pairs = [(key("a.svc.clusterset.local.", wire.A),
              stored(wire.A, *[bytes([10, 0, 0, i]) for i in range(10)])),
             (key("b.svc.clusterset.local.", wire.A), stored(wire.A, A1))]
    messages, _ = pack_sets(pairs, 100)
    assert everything(messages) == expected(pairs)
    assert len(messages) > 2 and all(len(m) <= 100 for m in messages)


def test_an_rrset_after_a_record_that_fills_the_message_starts_the_next() -> None:
    before = (filler(100 - 12 - len(QUESTION) - 20),)
    pairs = [(key("a.svc.clusterset.local.", wire.A), stored(wire.A, A1))]
    messages, _ = pack_sets(pairs, 100, before)
    assert [len(m) for m in messages] == [80, 12 + 24 + 14]
    assert everything(messages)[1:] == expected(pairs)


@pytest.mark.parametrize(("size", "messages"), [(packing._REACH, 2), (packing._REACH - 1, 1)])
def test_an_rrset_past_what_pointers_reach_starts_a_new_message(size: int,
                                                                messages: int) -> None:
    """An RRset starting at _REACH or later could have an owner no pointer reaches."""
    before = (filler(size - 12 - len(QUESTION)),)
    pairs = [(key("a.svc.clusterset.local.", wire.A), stored(wire.A, A1, A2))]
    out, _ = pack_sets(pairs, 65535, before)
    assert len(out) == messages and everything(out)[1:] == expected(pairs)


def glued(rtype: int, answers: list[bytes], extra: list[bytes], authority: bool) -> wire.Answer:
    """An answer with records after its answer section (authority or additional ones,
    owned by their own names, no C0 0C among them), not marked by glue_at."""
    body = stored(rtype, *answers).body + b"".join(extra)
    ns, ar = (len(extra), 0) if authority else (0, len(extra))
    return wire.Answer(wire.heads(0, len(answers), ns, ar), body, 0)


def target(i: int) -> bytes:
    return wire_name(f"t{i}.svc.clusterset.local.") + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + A1


@pytest.mark.parametrize("extra", [1, 256])
@pytest.mark.parametrize("authority", [False, True])
def test_records_after_the_answer_section_are_never_copied_into_it(extra: int,
                                                                    authority: bool) -> None:
    pairs = [(key("a.svc.clusterset.local.", wire.A),
              glued(wire.A, [A1], [target(i) for i in range(extra)], authority))]
    messages, _ = pack_sets(pairs)
    assert everything(messages) == ["a.svc.clusterset.local. 10.0.0.1"]


def test_a_record_owned_elsewhere_is_decoded_whatever_its_data_holds() -> None:
    """Its address holds C0 0C: as many owner pointers as records, but not as owners."""
    address = b"\xc0\x0c\x00\x01"
    answer = wire.Answer(wire.heads(0, 1, 0, 0), wire_name("a.svc.clusterset.local.")
                         + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + address, 0)
    messages, _ = pack_sets([(key("a.svc.clusterset.local.", wire.A), answer)])
    assert everything(messages) == ["a.svc.clusterset.local. 192.12.0.1"]


def test_an_rrset_of_256_records_is_copied() -> None:
    """Copied, its owner is written whole (its parent, svc.clusterset.local, was not
    written before); decoded, it would have pointed at clusterset.local."""
    many = [bytes([10, 1, 0, i]) for i in range(256)]
    pairs = [(key("x.clusterset.local.", wire.A), stored(wire.A, A1)),
             (key("b.svc.clusterset.local.", wire.A), stored(wire.A, *many))]
    [message], _ = pack_sets(pairs)
    assert everything([message]) == expected(pairs)
    assert len(message) == 12 + len(QUESTION) + (20 + 14) + 24 + 14 + 255 * 16


def test_an_rrset_of_one_label_too_large_for_a_message_is_split() -> None:
    """Its parent, the root, was never noted: nothing to forget there."""
    pairs = [(key("x.", wire.A), stored(wire.A, *[bytes([10, 0, 0, i]) for i in range(9)]))]
    messages, _ = pack_sets(pairs, 90)
    assert everything(messages) == expected(pairs) and len(messages) > 1
