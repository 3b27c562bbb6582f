"""zone/wire.py's own pieces at their boundaries: the name and record walkers every reader
of messages uses (a label of 63 bytes and of 64, a name of 255 bytes and of 256, a
pointer cut short, a record one byte short), the EDE option cut at 200 bytes, the eight
header variants, and the sizing of a stored answer to one TCP message (the body that
fits to the byte and the one a byte over). Written for the survivors of
``scripts/mutate clusterset_dns/zone/wire.py``."""

from __future__ import annotations

import struct

import pytest

from clusterset_dns.zone import wire

ROOT = b"\x00"


def name_of(*sizes: int) -> bytes:
    """A name in wire form of labels of these sizes."""
    return b"".join(bytes([n]) + b"a" * n for n in sizes) + ROOT


# A name of 255 bytes: 3 labels of 63 (64 bytes each), one of 61 (62), the root (1).
LONGEST = name_of(63, 63, 63, 61)


@pytest.mark.parametrize(("data", "offset", "pointers", "expected"), [
    (b"", 0, False, None),  # nothing there
    (ROOT, 0, False, ([], 1)),
    (b"\x01a" + ROOT, 0, False, ([0], 3)),
    (b"xx" + name_of(1, 2), 2, False, ([2, 4], 8)),  # at an offset
    (b"\x03abc", 0, False, None),  # no root: runs off the end
    (b"\x03ab", 0, False, None),
    (name_of(63), 0, False, ([0], 65)),  # the longest label
    (b"\x40" + b"a" * 64 + ROOT, 0, False, None),  # a label of 64
    (b"\x80" + b"a" * 128 + ROOT, 0, False, None),  # the reserved 10 label type
    (LONGEST, 0, False, ([0, 64, 128, 192], 255)),  # the longest name
    (name_of(63, 63, 63, 62), 0, False, None),  # 256 bytes
    (b"\xc0\x0c", 0, False, None),  # compressed, not allowed here
    (b"\xc0\x0c", 0, True, ([], 2)),
    (b"\x01a\xc0\x0c", 0, True, ([0], 4)),
    (b"\x01a\xc0", 0, True, None),  # the pointer cut short
    (b"\x80\x0c", 0, True, None),  # 10 is no pointer
    (b"\x40\x0c", 0, True, None),  # nor 01
    (b"xx\x01a\xc0\x0c", 2, True, ([2], 6)),
])
def test_walk_name(data: bytes, offset: int, pointers: bool,
                   expected: tuple[list[int], int] | None) -> None:
    assert wire.walk_name(data, offset, pointers) == expected


def test_walk_name_counts_a_pointer_in_the_length() -> None:
    # 253 bytes of labels and a pointer make 255: the longest; one more label byte: 256
    labels = name_of(63, 63, 63, 60)[:-1]  # 253 bytes
    assert wire.walk_name(labels + b"\xc0\x0c", 0, pointers=True) == ([0, 64, 128, 192], 255)
    longer = name_of(63, 63, 63, 61)[:-1]
    assert wire.walk_name(longer + b"\xc0\x0c", 0, pointers=True) is None


@pytest.mark.parametrize(("data", "offset", "expected"), [
    (ROOT, 0, 1),
    (name_of(3), 0, 5),
    (b"\x03abc\xc0\x0c", 0, 6),  # a pointer (C0) ends the name
    (b"\x03abc\xff\xff", 0, 6),
    (b"xx\xc0\x0c", 2, 4),
    (b"\x3fabc", 0, IndexError),  # a label running off the end
])
def test_skip_name(data: bytes, offset: int, expected: int | type[Exception]) -> None:
    if isinstance(expected, int):
        assert wire.skip_name(data, offset) == expected
    else:
        with pytest.raises(expected):
            wire.skip_name(data, offset)


def test_read_name_follows_pointers_and_lower_cases() -> None:
    data = b"\x03Web\x04Prod\x00" + b"\x03DB\x32\xc0\x04"  # db2 -> prod.
    assert wire.read_name(data, 0) == b"\x03web\x04prod\x00"
    assert wire.read_name(data, 10) == b"\x03db2\x04prod\x00"
    assert wire.read_name(data, 4) == b"\x04prod\x00"


def test_read_name_is_bounded_to_128_steps() -> None:
    # 127 one-byte labels and the root: 128 steps, the longest name there is
    longest = b"\x01a" * 127 + ROOT
    assert wire.read_name(longest, 0) == longest
    # a chain of 127 pointers to that root takes 128 steps; 128 pointers take 129
    def chain(hops: int) -> bytes:
        return b"".join(struct.pack("!H", 0xC000 | (2 * (i + 1))) for i in range(hops)) + ROOT
    assert wire.read_name(chain(127), 0) == ROOT
    with pytest.raises(ValueError, match=r"^compression loop$"):
        wire.read_name(chain(128), 0)
    with pytest.raises(ValueError, match=r"^compression loop$"):
        wire.read_name(b"\xc0\x00", 0)


A_RECORD = b"\xc0\x0c" + wire.RR_HEAD.pack(wire.A, wire.CLASS_IN, 300, 4) + b"\x0a\x00\x00\x01"


@pytest.mark.parametrize(("data", "offset", "expected"), [
    (A_RECORD, 0, (wire.A, wire.CLASS_IN, 300, 16, False)),
    (A_RECORD[:-1], 0, None),  # the rdata a byte short
    (A_RECORD[:12], 0, None),  # the head a byte short
    (A_RECORD[:11], 0, None),
    (b"\x00" + wire.RR_HEAD.pack(wire.OPT, 1232, 0, 0), 0, (wire.OPT, 1232, 0, 11, True)),
    (b"\x01a\x00" + wire.RR_HEAD.pack(wire.A, 1, 5, 0), 0, (wire.A, 1, 5, 13, False)),
    (b"xx" + ROOT + wire.RR_HEAD.pack(wire.TXT, 3, 7, 1) + b"z", 2, (wire.TXT, 3, 7, 14, True)),
    (b"\x40" + bytes(80), 0, None),  # a malformed owner
])
def test_skip_rr(data: bytes, offset: int,
                 expected: tuple[int, int, int, int, bool] | None) -> None:
    assert wire.skip_rr(data, offset) == expected


def test_ede_text_is_cut_at_200_bytes_on_a_character_boundary() -> None:
    def text_of(option: bytes) -> tuple[int, int, bytes]:
        rdlength, code, length, info = struct.unpack_from("!HHHH", option)
        assert rdlength == len(option) - 2 == 4 + length
        assert code == wire.EDE_OPTION
        return info, length - 2, option[8:]

    assert text_of(wire.ede(wire.EDE_INVALID_DATA, "")) == (24, 0, b"")
    fits = "x" * 200
    assert text_of(wire.ede(wire.EDE_OTHER, fits)) == (0, 200, fits.encode())
    over = "x" * 201
    assert text_of(wire.ede(wire.EDE_OTHER, over)) == (0, 200, b"x" * 197 + b"...")
    # a two-byte character across byte 197 is left out whole
    wide = "x" * 196 + "\u00e9" + "y" * 10
    assert text_of(wire.ede(wire.EDE_NOT_READY, wide)) == (14, 199,
                                                           b"x" * 196 + b"...")
    # INFO-CODE is 16 bits unsigned: 49152-65535 are for private use (RFC 8914 4)
    assert text_of(wire.ede(0xFFFF, "p")) == (0xFFFF, 1, b"p")


def test_heads_are_the_eight_variants_and_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    # a cache of this test's own: what earlier tests left there would hide one not kept
    monkeypatch.setattr(wire, "_heads_cache", {})
    made = wire.heads(wire.NXDOMAIN, 2, 1, 3)
    assert len(made) == 8
    for i, head in enumerate(made):
        flags, qd, an, ns, ar = wire.HEADER.unpack(head)
        assert flags == (wire.QR | wire.AA | wire.NXDOMAIN | (wire.RD if i & 1 else 0)
                         | (wire.CD if i & 2 else 0)), i
        assert (qd, an, ns, ar) == (1, 2, 1, 3 + (1 if i & 4 else 0)), i
    assert wire.heads(wire.NXDOMAIN, 2, 1, 3) is made  # kept and shared
    assert wire.heads(wire.NOERROR, 2, 1, 3) is not made  # the rcode is part of the key
    assert wire.heads(wire.NXDOMAIN, 2, 1, 3, wire.QR) is not made  # and the flags
    # not shared: made anew, and never kept for the shared ones (a count no other test uses)
    flags = wire.QR | wire.AA | wire.TC
    cut = wire.heads(wire.NOERROR, 12345, 0, 0, flags, shared=False)
    assert wire.HEADER.unpack(cut[0])[0] == flags
    shared = wire.heads(wire.NOERROR, 12345, 0, 0, flags)
    assert shared is not cut and shared == cut
    assert wire.heads(wire.NOERROR, 12345, 0, 0, flags, shared=False) is not shared


def test_an_answer_is_cut_only_with_tc() -> None:
    assert wire.Answer(wire.heads(0, 1, 0, 0, wire.QR | wire.AA | wire.TC), b"", 0).cut
    assert not wire.Answer(wire.heads(0, 1, 0, 0), b"", 0).cut
    assert not wire.Answer(wire.heads(0, 1, 0, 0, wire.QR | wire.AA | 0x0100 | 0x0400),
                           b"", 0).cut
    plain = wire.Answer(wire.heads(0, 1, 0, 0), b"abc", 0)
    assert plain.size == 3 and plain.rcode == 0 and plain.without_additional() is None
    assert plain.glue_at == -1 and plain.opts is None and plain.ede_slot == 0


def test_without_additional_keeps_the_answer_and_authority() -> None:
    answer = wire.WithAdditional(wire.heads(wire.NOERROR, 2, 1, 3), b"0123456789", 0, 6)
    assert answer.glue_at == 6
    less = answer.without_additional()
    assert type(less) is wire.Answer
    assert less.body == b"012345" and less.size == 6 and less.rcode == 0
    assert less.heads == wire.heads(wire.NOERROR, 2, 1, 0)


def test_explained_counts_its_option_in_the_size() -> None:
    plain = wire.Answer(wire.heads(wire.NXDOMAIN, 0, 1, 0), b"x" * 40, wire.NXDOMAIN)
    opts = (b"o" * 20, b"d" * 20)  # the OPT record with the option, DO clear and set
    made = wire.Explained(plain, opts, 3)
    assert made.size == 40 + len(opts[0]) - wire.OPT_LEN
    assert (made.opts, made.plain, made.ede_slot) == (opts, plain, 3)
    assert (made.heads, made.body, made.rcode) == (plain.heads, plain.body, wire.NXDOMAIN)


# One TCP message holds 65,535 bytes: the header (12), the question, an OPT (11) and the body.
QUESTION_LEN = 20
ROOM = wire.TCP_MAX - 12 - QUESTION_LEN - wire.OPT_LEN


@pytest.mark.parametrize(("size", "counts", "additional_at", "ends", "expected"), [
    # (body size, counts, where the additional section starts, answer ends) ->
    # (kind, body size kept, counts in the header, TC)
    (ROOM, (1, 0, 0), ROOM, [ROOM], ("Answer", ROOM, (1, 0, 0), False)),
    (ROOM, (1, 0, 1), 100, [100], ("WithAdditional", ROOM, (1, 0, 1), False)),
    (ROOM + 1, (1, 0, 1), 100, [100], ("Answer", 100, (1, 0, 0), False)),
    (ROOM + 1, (2, 0, 1), ROOM, [100, ROOM], ("Answer", ROOM, (2, 0, 0), False)),
    (ROOM + 2, (2, 0, 1), ROOM + 1, [100, ROOM + 1], ("Answer", 100, (1, 0, 0), True)),
    (ROOM + 1, (2, 0, 0), ROOM + 1, [ROOM, ROOM + 1], ("Answer", ROOM, (1, 0, 0), True)),
    (ROOM + 1, (1, 0, 0), ROOM + 1, [ROOM + 1], ("Answer", 0, (0, 0, 0), True)),
    # counts: 65,535 records are the most a header says
    (100, (0xFFFF, 0, 0), 100, [], ("Answer", 100, (0xFFFF, 0, 0), False)),
    (100, (0, 0xFFFF, 0xFFFE), 50, [], ("WithAdditional", 100, (0, 0xFFFF, 0xFFFE), False)),
    (100, (1, 0, 0x10000), 50, [50], ("Answer", 50, (1, 0, 0), False)),
    (100, (0xFFFF, 0, 0x10000), 50, [50], ("Answer", 50, (0xFFFF, 0, 0), False)),
    (100, (1, 0x10000, 1), 50, [50], ("Answer", 50, (1, 0, 0), True)),
    (100, (0x10000, 0, 1), 50, [50], ("Answer", 50, (1, 0, 0), True)),
])
def test_sized(size: int, counts: tuple[int, int, int], additional_at: int, ends: list[int],
               expected: tuple[str, int, tuple[int, int, int], bool]) -> None:
    body = bytes(size)
    made = wire.sized(QUESTION_LEN, wire.NOERROR, body, counts, additional_at, ends)
    kind, kept, (an, ns, ar), tc = expected
    assert type(made).__name__ == kind
    assert made.rcode == wire.NOERROR
    assert made.body == body[:kept]
    flags = wire.QR | wire.AA | (wire.TC if tc else 0)
    assert made.heads == wire.heads(wire.NOERROR, an, ns, ar, flags)
    if kind == "WithAdditional":
        assert made.glue_at == additional_at


def test_sized_keeps_at_most_65535_answer_records() -> None:
    # records of no bytes (none is that small; this is the count's bound alone)
    made = wire.sized(QUESTION_LEN, wire.NOERROR, bytes(ROOM + 1), (0x10001, 0, 0),
                      ROOM + 1, [0] * 0x10001)
    assert made.heads == wire.heads(wire.NOERROR, 0xFFFF, 0, 0, wire.QR | wire.AA | wire.TC)
    assert made.size == 0


def test_sized_keeps_the_rcode() -> None:
    made = wire.sized(QUESTION_LEN, wire.NXDOMAIN, b"", (0, 0, 0), 0, [])
    assert made.rcode == wire.NXDOMAIN
    assert made.heads == wire.heads(wire.NXDOMAIN, 0, 0, 0)


def test_question_key() -> None:
    assert wire.question_key((b"web", b"local"), wire.SRV) == \
        b"\x03web\x05local\x00\x00\x21\x00\x01"


# -- the Encoder ------------------------------------------------------------------------------

QUESTION = (b"web", b"prod", b"svc", b"clusterset", b"local")
Q_WIRE = b"\x03web\x04prod\x03svc\x0aclusterset\x05local\x00"
BASE = 12 + len(Q_WIRE) + 4  # where the body starts in a response: 47
APEX = (b"clusterset", b"local")
TARGET = (b"db-0", b"east", b"db", b"prod", b"svc", b"clusterset", b"local")


def response(answer: wire.Answer, qtype: int = wire.A, question: bytes = Q_WIRE) -> bytes:
    return b"\x00\x07" + answer.heads[0] + question + struct.pack("!HH", qtype, 1) + answer.body


def test_every_record_the_encoder_writes_as_an_independent_parser_reads_it() -> None:
    import dns.message  # an implementation independent of this encoder

    enc = wire.Encoder(QUESTION)
    enc.address(0, QUESTION, 5, b"\x0a\x00\x00\x01")
    enc.address(0, QUESTION, 5, b"\xfd" + bytes(14) + b"\x01")
    enc.srv(0, QUESTION, 6, 1, 2, 80, TARGET, names_to_wire(TARGET))
    enc.ns(1, APEX, 30, (b"ns", b"dns", *APEX))
    enc.soa(1, APEX, 60, (b"ns", b"dns", *APEX), (b"hostmaster", *APEX), 42, 5)
    enc.text(1, (b"dns-version", *APEX), wire.TXT, 7, [b"1.0", b"", b'q"'])
    enc.text(1, APEX, wire.HINFO, 8, [b"RFC8482", b""])
    enc.address(2, TARGET, 9, b"\x0a\x02\x00\x01")
    made = enc.finish(wire.NXDOMAIN)
    assert made.rcode == wire.NXDOMAIN
    assert enc.counts == [3, 4, 1]
    parsed = dns.message.from_wire(response(made))
    assert parsed.rcode() == wire.NXDOMAIN and parsed.flags & 0x8400 == 0x8400
    assert [rrset.to_text() for rrset in parsed.answer] == [
        "web.prod.svc.clusterset.local. 5 IN A 10.0.0.1",
        "web.prod.svc.clusterset.local. 5 IN AAAA fd00::1",
        "web.prod.svc.clusterset.local. 6 IN SRV 1 2 80 db-0.east.db.prod.svc.clusterset.local."]
    assert [rrset.to_text() for rrset in parsed.authority] == [
        "clusterset.local. 30 IN NS ns.dns.clusterset.local.",
        "clusterset.local. 60 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. "
        "42 7200 1800 86400 5",
        'dns-version.clusterset.local. 7 IN TXT "1.0" "" "q\\""',
        'clusterset.local. 8 IN HINFO "RFC8482" ""']
    assert [rrset.to_text() for rrset in parsed.additional] == [
        "db-0.east.db.prod.svc.clusterset.local. 9 IN A 10.2.0.1"]
    # compression: owners equal to the question are C0 0C, the apex points into it, the
    # SRV target is written whole (RFC 2782) and remembered for the glue's owner
    body = made.body
    assert body[:2] == b"\xc0\x0c"
    srv_at = 16 + 28  # two address records
    target_at = srv_at + 12 + 6
    assert body[target_at:target_at + len(names_to_wire(TARGET))] == names_to_wire(TARGET)
    apex_pointer = struct.pack("!H", 0xC000 | (12 + 4 + 5 + 4))  # after web, prod, svc
    ns_at = target_at + len(names_to_wire(TARGET))
    assert body[ns_at:ns_at + 2] == apex_pointer
    glue = body[made.glue_at:]
    assert glue[:2] == struct.pack("!H", 0xC000 | (BASE + target_at))
    assert type(made) is wire.WithAdditional
    assert glue == struct.pack("!H", 0xC000 | (BASE + target_at)) + \
        wire.RR_HEAD.pack(wire.A, 1, 9, 4) + b"\x0a\x02\x00\x01"


def names_to_wire(labels: tuple[bytes, ...]) -> bytes:
    return b"".join(bytes([len(label)]) + label for label in labels) + b"\x00"


def test_a_body_for_any_question_compresses_nothing() -> None:
    enc = wire.Encoder(None)
    enc.soa(1, APEX, 60, (b"ns", b"dns", *APEX), (b"hostmaster", *APEX), 1, 5)
    enc.ns(1, APEX, 30, (b"ns", b"dns", *APEX))
    made = enc.finish(wire.NXDOMAIN)
    apex = names_to_wire(APEX)
    ns = names_to_wire((b"ns", b"dns", *APEX))
    assert made.body == (apex + wire.RR_HEAD.pack(wire.SOA, 1, 60, len(ns) + 11 + len(apex) + 20)
                         + ns + b"\x0ahostmaster" + apex + struct.pack("!IIIII", 1, 7200, 1800,
                                                                       86400, 5)
                         + apex + wire.RR_HEAD.pack(wire.NS, 1, 30, len(ns)) + ns)
    assert type(made) is wire.Answer
    assert made.heads == wire.heads(wire.NXDOMAIN, 0, 2, 0)


def test_a_name_written_without_compression_is_written_whole() -> None:
    enc = wire.Encoder(QUESTION)
    enc.name(QUESTION, compress=False)
    enc.name(QUESTION)
    assert enc.finish().body == Q_WIRE + b"\xc0\x0c"


def text_of_size(size: int) -> list[bytes]:
    """Character-strings making a TXT rdata of exactly ``size`` bytes."""
    out = []
    while size > 256:
        out.append(b"t" * 255)
        size -= 256
    return [*out, b"t" * (size - 1)]


@pytest.mark.parametrize(("at", "remembered"), [(0x3FFE, True), (0x3FFF, False)])
def test_a_name_is_remembered_only_where_a_pointer_reaches(at: int, remembered: bool) -> None:
    other = (b"ns", b"elsewhere")
    # a TXT record (12 bytes and its rdata) and an NS record's head (12) before the name
    filler = at - BASE - 12 - 12
    enc = wire.Encoder(QUESTION)
    enc.text(0, QUESTION, wire.TXT, 5, text_of_size(filler))
    enc.ns(0, QUESTION, 5, other)
    enc.ns(0, QUESTION, 5, other)
    body = enc.finish().body
    first = body.index(b"\x02ns\x09elsewhere\x00")
    assert BASE + first == at
    second = body[first + 14 + 12:]
    assert second == (struct.pack("!H", 0xC000 | at) if remembered
                      else b"\x02ns\x09elsewhere\x00")


@pytest.mark.parametrize(("at", "remembered"), [(0x3FFE, True), (0x3FFF, False)])
def test_an_srv_target_is_remembered_only_where_a_pointer_reaches(at: int,
                                                                  remembered: bool) -> None:
    target = (b"db", b"elsewhere")
    filler = at - BASE - 12 - 18  # the TXT record's head, the SRV's head and fixed fields
    enc = wire.Encoder(QUESTION)
    enc.text(0, QUESTION, wire.TXT, 5, text_of_size(filler))
    enc.srv(0, QUESTION, 5, 0, 0, 80, target, names_to_wire(target))
    enc.address(2, target, 5, b"\x0a\x00\x00\x01")
    made = enc.finish()
    body = made.body
    assert BASE + body.index(b"\x02db\x09elsewhere\x00") == at
    owner = body[made.glue_at:-14]
    assert owner == (struct.pack("!H", 0xC000 | at) if remembered
                     else b"\x02db\x09elsewhere\x00")


# The question's name is 31 bytes: a body of 65,535 - 12 - 35 - 11 = 65,477 bytes fits.
Q_ROOM = wire.TCP_MAX - 12 - len(Q_WIRE) - 4 - wire.OPT_LEN


def test_an_answer_over_one_message_keeps_the_answer_records_that_fit() -> None:
    per = 16  # an A record owned by the question
    fits = Q_ROOM // per  # 4,092 records: 65,472 bytes
    enc = wire.Encoder(QUESTION)
    for _ in range(fits + 1):
        enc.address(0, QUESTION, 5, b"\x0a\x00\x00\x01")
    made = enc.finish()
    assert made.heads == wire.heads(wire.NOERROR, fits, 0, 0, wire.QR | wire.AA | wire.TC)
    assert made.size == fits * per
    # all the answer records fit, an authority record after them does not: it goes
    enc = wire.Encoder(QUESTION)
    for _ in range(fits):
        enc.address(0, QUESTION, 5, b"\x0a\x00\x00\x01")
    enc.text(1, QUESTION, wire.TXT, 5, [b"x" * 10])
    made = enc.finish()
    assert made.heads == wire.heads(wire.NOERROR, fits, 0, 0, wire.QR | wire.AA | wire.TC)
    assert made.size == fits * per


def test_an_answer_over_one_message_loses_its_additional_section_first() -> None:
    enc = wire.Encoder(QUESTION)
    enc.srv(0, QUESTION, 5, 0, 0, 80, TARGET, names_to_wire(TARGET))
    answer_end = 12 + 6 + len(names_to_wire(TARGET))
    glue = 0
    while answer_end + 16 * glue <= Q_ROOM:
        enc.address(2, TARGET, 5, b"\x0a\x00\x00\x01")
        glue += 1
    made = enc.finish()
    assert made.heads == wire.heads(wire.NOERROR, 1, 0, 0)
    assert made.size == answer_end and type(made) is wire.Answer


def test_a_negative_body_is_sized_for_the_longest_question() -> None:
    room = wire.TCP_MAX - 12 - wire.MAX_QUESTION - wire.OPT_LEN
    for size, whole in ((room, True), (room + 1, False)):
        enc = wire.Encoder(None)
        enc.text(1, APEX, wire.TXT, 5, text_of_size(size - len(names_to_wire(APEX)) - 10))
        made = enc.finish(wire.NXDOMAIN)
        if whole:
            assert (made.size, made.heads) == (size, wire.heads(wire.NXDOMAIN, 0, 1, 0))
        else:  # no answer record to keep
            assert (made.size, made.heads) == (0, wire.heads(wire.NXDOMAIN, 0, 0, 0,
                                                             wire.QR | wire.AA | wire.TC))


def test_walk_name_refuses_pointers_unless_asked() -> None:
    # the question of a query is never compressed (serving.query walks it so)
    assert wire.walk_name(b"\xc0\x0c", 0) is None
    assert wire.walk_name(b"\x01a\x00", 0) == ([0], 3)
    # a pointer's offset may have any low bits: C1 00 points at 256
    assert wire.walk_name(b"\xc1\x00", 0, pointers=True) == ([], 2)
    assert wire.walk_name(b"\xff\xff", 0, pointers=True) == ([], 2)


def test_numbers_of_32_and_16_bits_are_unsigned() -> None:
    enc = wire.Encoder(APEX)
    enc.soa(0, APEX, 60, APEX, APEX, 0xFFFFFFFF, 0x80000000)
    body = enc.finish().body
    assert body[-20:] == struct.pack("!IIIII", 0xFFFFFFFF, 7200, 1800, 86400, 0x80000000)
    assert wire.question_key(APEX, 0xFFFF) == names_to_wire(APEX) + b"\xff\xff\x00\x01"


def name_of_length(size: int, first: bytes = b"t") -> tuple[bytes, ...]:
    """Labels whose wire form is ``size`` bytes (``first`` starts the first label)."""
    labels: list[bytes] = []
    left = size - 1
    while left:
        take = min(left, 64)
        if left - take == 1:  # leave no label of 0 bytes
            take -= 1
        labels.append((first + b"x" * 62)[: take - 1] if not labels else b"y" * (take - 1))
        left -= take
    return tuple(labels)


def joined_and_encoded(question: tuple[bytes, ...], targets: list[tuple[bytes, ...]],
                       glue: tuple[bytes, ...] | None) -> tuple[wire.Answer | None, wire.Answer]:
    """srv_answer's answer and the Encoder's, for SRV records to ``targets`` and one A
    record of glue for the target ``glue``."""
    joined = wire.srv_answer(question, 5, [(names_to_wire(t), 80, 0, 100) for t in targets],
                             [] if glue is None else [(names_to_wire(glue), [b"\x0a\x00\x00\x09"])])
    enc = wire.Encoder(question)
    for target in targets:
        enc.srv(0, question, 5, 0, 100, 80, target, names_to_wire(target))
    if glue is not None:
        enc.address(2, glue, 5, b"\x0a\x00\x00\x09")
    return joined, enc.finish()


def test_srv_answer_points_glue_at_a_target_inside_the_question() -> None:
    # the SRV of a ClusterSetIP import: its target is the service, a suffix of the question
    # (_https, not _http: there 1 + len(b"clusterset") is also web's offset, so offsets
    # not added up would still find it)
    question = (b"_https", b"_tcp", *QUESTION)
    joined, encoded = joined_and_encoded(question, [QUESTION], QUESTION)
    assert joined is not None
    assert (joined.heads, joined.body) == (encoded.heads, encoded.body)
    assert joined.body[joined.glue_at:joined.glue_at + 2] == struct.pack("!H", 0xC000 | 24)


@pytest.mark.parametrize(("at", "joined"), [(0x3FFE, True), (0x3FFF, False)])
def test_srv_answer_declines_a_target_a_pointer_cannot_reach(at: int, joined: bool) -> None:
    base = BASE + 18  # where the first target is written
    fillers: list[tuple[bytes, ...]] = []
    while at - base >= 82 + 82:  # SRV records to targets of 64 bytes: 82 bytes each
        fillers.append(name_of_length(64, b"f%d" % len(fillers)))
        base += 82
    fillers.append(name_of_length(at - base - 18, b"g"))  # the last filler lands it exactly
    last = name_of_length(20, b"z")
    made, encoded = joined_and_encoded(QUESTION, [*fillers, last], last)
    body = encoded.body
    assert BASE + body.index(names_to_wire(last)) == at
    if not joined:
        assert made is None
        return
    assert made is not None
    assert (made.heads, made.body) == (encoded.heads, encoded.body)
    assert made.body[made.glue_at:made.glue_at + 2] == struct.pack("!H", 0xC000 | at)


def test_the_additional_section_starts_at_its_first_record() -> None:
    # even at the start of the body (no answer or authority record before it)
    enc = wire.Encoder(QUESTION)
    enc.address(2, QUESTION, 5, b"\x0a\x00\x00\x01")
    enc.address(2, QUESTION, 5, b"\x0a\x00\x00\x02")
    made = enc.finish()
    assert made.glue_at == 0 and made.heads == wire.heads(wire.NOERROR, 0, 0, 2)
    enc = wire.Encoder(QUESTION)
    enc.address(0, QUESTION, 5, b"\x0a\x00\x00\x01")
    enc.address(2, QUESTION, 5, b"\x0a\x00\x00\x02")
    enc.address(2, QUESTION, 5, b"\x0a\x00\x00\x03")
    assert enc.finish().glue_at == 16


def test_an_encoded_answer_fits_one_message_to_the_byte() -> None:
    # one TXT record owned by the question: 12 bytes and its rdata
    for size, whole in ((Q_ROOM, True), (Q_ROOM + 1, False)):
        enc = wire.Encoder(QUESTION)
        enc.text(0, QUESTION, wire.TXT, 5, text_of_size(size - 12))
        made = enc.finish()
        if whole:
            assert (made.size, made.heads) == (size, wire.heads(wire.NOERROR, 1, 0, 0))
        else:
            assert (made.size, made.heads) == (0, wire.heads(wire.NOERROR, 0, 0, 0,
                                                             wire.QR | wire.AA | wire.TC))
