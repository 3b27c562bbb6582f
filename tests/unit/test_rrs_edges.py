"""zone/rrs.py at its edges, on messages made by hand: a pointer past offset 255, a chain of
127 pointers and of 128, a record that ends on the message's last byte and one a byte
past it, the presentation form of every byte of a character-string, a type without
one, and the largest RRset by a count over 255. Written for the survivors of
``scripts/mutate clusterset_dns/zone/rrs.py``."""

from __future__ import annotations

import struct

import pytest

from clusterset_dns.zone import rrs, wire

ROOT = b"\x00"
HEAD = b"\x00\x00" + wire.HEADER.pack(wire.QR | wire.AA, 1, 1, 0, 0)  # ID, flags, counts
QNAME = b"\x03web\x04prod\x00"  # at offset 12
KEY = QNAME + struct.pack("!HH", wire.A, wire.CLASS_IN)


def record(owner: bytes, rtype: int, ttl: int, rdata: bytes) -> bytes:
    return owner + wire.RR_HEAD.pack(rtype, wire.CLASS_IN, ttl, len(rdata)) + rdata


def test_record_at_expands_the_owner_and_says_where_the_next_starts() -> None:
    first = record(b"\xc0\x0c", wire.A, 5, b"\x0a\x00\x00\x01")
    second = record(b"\x02db\xc0\x10", wire.AAAA, 7, bytes(15) + b"\x01")  # db.prod.
    message = HEAD + KEY + first + second
    at = 12 + len(KEY)
    got, after = rrs.record_at(message, at)
    assert got == rrs.Record(QNAME, wire.A, 5, b"\x0a\x00\x00\x01")
    assert after == at + len(first)
    got, end = rrs.record_at(message, after)
    assert got == rrs.Record(b"\x02db\x04prod\x00", wire.AAAA, 7, bytes(15) + b"\x01")
    assert end == len(message)


def test_a_pointer_past_offset_255_is_followed() -> None:
    filler = record(b"\xc0\x0c", wire.TXT, 1, b"\xff" + b"t" * 255)  # to offset 300 and on
    target_at = 12 + len(KEY) + len(filler)
    assert target_at > 0xFF
    named = record(b"\x03api" + ROOT, wire.A, 9, bytes(4))
    pointing = record(struct.pack("!H", 0xC000 | target_at), wire.A, 3, b"\x01\x02\x03\x04")
    message = HEAD + KEY + filler + named + pointing
    got, end = rrs.record_at(message, target_at + len(named))
    assert got.owner == b"\x03api\x00" and end == len(message)


def chain(start: int, hops: int) -> bytes:
    """``hops`` pointers, each to the next, the last to a root label."""
    return b"".join(struct.pack("!H", 0xC000 | (start + 2 * (i + 1))) for i in range(hops)) \
        + ROOT


@pytest.mark.parametrize(("hops", "fails"), [(127, False), (128, True)])
def test_a_chain_of_pointers_is_bounded(hops: int, fails: bool) -> None:
    # the owner points at a chain of hops - 1 pointers ending in a root label
    chained = chain(12, hops - 1)
    message = HEAD + chained + record(b"\xc0\x0c", wire.A, 5, bytes(4))
    at = 12 + len(chained)
    if fails:
        with pytest.raises(rrs.DecodeError, match=r"^compression loop$"):
            rrs.record_at(message, at)
    else:
        assert rrs.record_at(message, at) == (rrs.Record(ROOT, wire.A, 5, bytes(4)),
                                              len(message))


def test_the_name_after_a_pointer_ends_at_the_first_pointer() -> None:
    # a name of a label then a pointer to a name that itself ends in a pointer
    message = HEAD + QNAME + b"\x01x\xc0\x0c" + b"\x01y\xc0\x16" + \
        wire.RR_HEAD.pack(wire.A, 1, 5, 4) + bytes(4)
    got, end = rrs.record_at(message, 12 + len(QNAME) + 4)
    assert got.owner == b"\x01y\x01x\x03web\x04prod\x00" and end == len(message)


@pytest.mark.parametrize("cut", range(0, 17))
def test_a_record_cut_anywhere_is_an_error(cut: int) -> None:
    whole = record(b"\xc0\x0c", wire.A, 5, b"\x0a\x00\x00\x01")
    message = HEAD + KEY + whole
    at = 12 + len(KEY)
    if cut == len(whole):
        assert rrs.record_at(message, at)[1] == len(message)
    else:
        said = ("name runs past the message" if cut < 2
                else f"the record at offset {at} runs past the message" if cut < 12
                else "the record of type 1 runs past the message")
        with pytest.raises(rrs.DecodeError, match=f"^{said}$"):
            rrs.record_at(message[: at + cut], at)


def test_a_record_without_rdata_may_end_the_message() -> None:
    message = HEAD + KEY + record(b"\xc0\x0c", wire.TXT, 5, b"")
    assert rrs.record_at(message, 12 + len(KEY)) == \
        (rrs.Record(QNAME, wire.TXT, 5, b""), len(message))
    with pytest.raises(rrs.DecodeError, match="at offset"):
        rrs.record_at(message[:-1], 12 + len(KEY))


def test_rdata_names_are_expanded() -> None:
    srv = record(b"\xc0\x0c", wire.SRV, 5, struct.pack("!HHH", 1, 2, 80) + b"\x01a\xc0\x0c")
    ns = record(b"\xc0\x0c", wire.NS, 5, b"\x02ns\xc0\x10")
    soa = record(b"\xc0\x0c", wire.SOA, 5, b"\x01m\xc0\x10\x01r\xc0\x0c"
                 + struct.pack("!IIIII", 7, 1, 2, 3, 4))
    message = HEAD + KEY + srv + soa + ns  # the SOA's rdata ends where its record does
    at = 12 + len(KEY)
    got = []
    while at < len(message):
        one, at = rrs.record_at(message, at)
        got.append(one)
    assert [r.rdata for r in got] == [
        struct.pack("!HHH", 1, 2, 80) + b"\x01a" + QNAME,
        b"\x01m\x04prod\x00\x01r" + QNAME + struct.pack("!IIIII", 7, 1, 2, 3, 4),
        b"\x02ns\x04prod\x00",
    ]
    assert [rrs.data_text(r) for r in got] == [
        "5 IN SRV 1 2 80 a.web.prod.", "5 IN SOA m.prod. r.web.prod. 7 1 2 3 4", "5 IN NS ns.prod."]


def test_skip_name_and_skip_record() -> None:
    whole = record(b"\x01a\xc0\x0c", wire.SRV, 5, bytes(9))
    message = HEAD + KEY + whole
    at = 12 + len(KEY)
    assert rrs.skip_name(message, at) == at + 4
    assert rrs.skip_record(message, at) == (wire.SRV, len(message))
    with pytest.raises(rrs.DecodeError, match=r"^name runs past the message$"):
        rrs.skip_name(message[: at + 2], at)
    # the head to its last byte is needed (not the rdata: the caller steps over it)
    assert rrs.skip_record(message[: at + 14], at) == (wire.SRV, len(message))
    with pytest.raises(rrs.DecodeError, match=r"^a record runs past the message$"):
        rrs.skip_record(message[: at + 13], at)


def test_a_name_running_past_the_message() -> None:
    with pytest.raises(rrs.DecodeError, match="name runs past"):
        rrs.record_at(HEAD + b"\x03web", 12)
    with pytest.raises(rrs.DecodeError, match="name runs past"):
        rrs.record_at(HEAD + b"\x03web\x04prod", 12)


def answer(count: int, rcode: int = 0) -> wire.Answer:
    return wire.Answer(wire.heads(rcode, count, 0, 0), b"", rcode)


def test_largest_rrset() -> None:
    assert rrs.largest_rrset({}) == (0, b"")
    assert rrs.largest_rrset({b"a": answer(0)}) == (0, b"")
    # the count is 16 bits: 256 records outnumber 255; the first of equals is kept
    answers = {b"a": answer(255), b"b": answer(256), b"c": answer(256), b"d": answer(1)}
    assert rrs.largest_rrset(answers) == (256, b"b")
    assert rrs.largest_rrset({b"a": answer(3), b"b": answer(3)}) == (3, b"a")


def test_zone_records_of_a_dict_or_of_pairs() -> None:
    body = record(b"\xc0\x0c", wire.A, 5, b"\x0a\x00\x00\x01")
    one = wire.Answer(wire.heads(0, 1, 0, 0), body, 0)
    want = {rrs.Record(QNAME, wire.A, 5, b"\x0a\x00\x00\x01")}
    assert rrs.zone_records({KEY: one}) == want
    assert rrs.zone_records([(KEY, one), (KEY, one)]) == want
    assert list(rrs.answer_records(KEY, answer(0))) == []


@pytest.mark.parametrize(("key", "text"), [
    (QNAME + b"\x00\x01\x00\x01", "web.prod. A"),
    (QNAME + b"\x00\x21\x00\x01", "web.prod. SRV"),
    (ROOT + b"\x00\x06\x00\x01", ". SOA"),
    (QNAME + b"\x01\x00\x00\x01", "web.prod. TYPE256"),
    (QNAME + b"\x00\x63\x00\xff", "web.prod. TYPE99"),
])
def test_key_text(key: bytes, text: str) -> None:
    assert rrs.key_text(key) == text


@pytest.mark.parametrize(("rtype", "rdata", "text"), [
    (wire.A, b"\x0a\x00\x00\x01", "10.0.0.1"),
    (wire.AAAA, b"\xfd" + bytes(14) + b"\x01", "fd00::1"),
    (wire.SRV, struct.pack("!HHH", 10, 20, 443) + b"\x01a\x00", "10 20 443 a."),
    (wire.NS, b"\x02ns\x00", "ns."),
    (wire.SOA, b"\x01m\x00\x01r\x00" + struct.pack("!IIIII", 1, 2, 3, 4, 5), "m. r. 1 2 3 4 5"),
    (wire.TXT, b"", ""),
    (wire.TXT, b"\x00", '""'),
    (wire.TXT, b"\x031.0\x01x", '"1.0" "x"'),
    # the printable ASCII as itself, but the quote and backslash escaped, the rest \DDD
    (wire.TXT, b"\x06\x1f\x20\x7e\x7f\x22\x5c", '"\\031 ~\\127\\"\\\\"'),
    (wire.TXT, b"\x03\x00\x09\xff", '"\\000\\009\\255"'),
    (wire.HINFO, b"\x03cpu\x02os", '"cpu" "os"'),
])
def test_rdata_text(rtype: int, rdata: bytes, text: str) -> None:
    assert rrs.rdata_text(rtype, rdata) == text


def test_a_type_without_a_presentation_form_is_an_error() -> None:
    with pytest.raises(rrs.DecodeError, match=r"^no presentation form for type 99$"):
        rrs.rdata_text(99, b"")


def test_record_text() -> None:
    got = rrs.Record(QNAME, wire.HINFO, 60, b"\x01a\x01b")
    assert rrs.record_text(got) == 'web.prod. 60 IN HINFO "a" "b"'
