"""zone/records.py's RecordBuilder called directly, as delta.py and the cache call it:
each answer rendered as zone-file text by dnspython (an independent decoder), and the
pieces delta.py joins (one_address, family_answer, srv_answer) equal to what a whole
build makes, at the sizes where an answer is first cut. Written for the survivors of
``scripts/mutate clusterset_dns/zone/records.py``."""

from __future__ import annotations

import ipaddress
import struct

import pytest

from clusterset_dns.base import names
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.zone import truncate, wire
from clusterset_dns.zone.records import Built, RecordBuilder

from .helpers import decode

ZONE = ZoneNames("clusterset.local")
SVC = ZONE.service("prod", "web")
SVC_WIRE = names.to_wire(SVC)


def builder(ttl: int = 5) -> RecordBuilder:
    made = RecordBuilder(ZONE, ttl)
    made.lazy = False
    return made


def text(key: bytes, answer: wire.Answer) -> list[str]:
    """The answer section of the response to ``key`` (a question) as zone-file lines."""
    return decode(b"\x00\x00" + answer.heads[0] + key + answer.body).answer


def v4(count: int, first: int = 0x0A000001) -> list[bytes]:
    return [ipaddress.IPv4Address(first + i).packed for i in range(count)]


def v6(count: int) -> list[bytes]:
    return [ipaddress.IPv6Address((0xFD00 << 112) + 1 + i).packed for i in range(count)]


A_KEY = SVC_WIRE + struct.pack("!HH", wire.A, wire.CLASS_IN)
AAAA_KEY = SVC_WIRE + struct.pack("!HH", wire.AAAA, wire.CLASS_IN)


# -- one address --------------------------------------------------------------------------

@pytest.mark.parametrize(("packed", "key", "line"), [
    (v4(1)[0], A_KEY, "web.prod.svc.clusterset.local. 7 in a 10.0.0.1"),
    (v6(1)[0], AAAA_KEY, "web.prod.svc.clusterset.local. 7 in aaaa fd00::1"),
])
def test_one_address_is_one_record_under_its_familys_key(packed: bytes, key: bytes,
                                                          line: str) -> None:
    got_key, answer = builder(ttl=7).one_address(SVC_WIRE, packed)
    assert got_key == key
    assert text(key, answer) == [line]
    assert answer.rcode == 0 and not answer.cut


# -- a service name's family answer: delta's pieces equal a whole build ----------------------

def key_of(service: str, size: int) -> tuple[tuple[bytes, ...], bytes, bytes]:
    """(labels, wire form, A or AAAA question) of prod/``service``."""
    labels = ZONE.service("prod", service)
    name = names.to_wire(labels)
    return labels, name, name + struct.pack("!HH", wire.A if size == 4 else wire.AAAA,
                                            wire.CLASS_IN)


def family_room(question: bytes, size: int) -> int:
    """How many records of ``size``-byte addresses one TCP message holds after
    ``question``, with an OPT record: the body bytes wire.sized allows over a record's."""
    return (wire.TCP_MAX - 12 - len(question) - wire.OPT_LEN) // (12 + size)


# "web" leaves the room of an A or AAAA answer past its last record; "web12345"'s A
# question (40 bytes) and "web1234567890123"'s AAAA question (48 bytes) leave exactly
# a whole number of records: a byte less of room holds one record less
WEB, EXACT_A, EXACT_AAAA = "web", "web12345", "web1234567890123"
assert (wire.TCP_MAX - 12 - 40 - wire.OPT_LEN) % 16 == 0
assert (wire.TCP_MAX - 12 - 48 - wire.OPT_LEN) % 28 == 0


def sizes() -> list[tuple[str, int, int]]:
    rows = [(WEB, 4, 2), (WEB, 4, 40), (WEB, 16, 2), (WEB, 16, 1170), (WEB, 16, 1171)]
    for service, size in ((WEB, 4), (WEB, 16), (EXACT_A, 4), (EXACT_AAAA, 16)):
        room = family_room(key_of(service, size)[2], size)
        rows += [(service, size, room), (service, size, room + 1)]  # the last that fits
    return rows


@pytest.mark.parametrize(("service", "size", "count"), sizes())
def test_a_family_answer_is_the_answer_a_whole_build_makes(service: str, size: int,
                                                           count: int) -> None:
    labels, name, key = key_of(service, size)
    family = sorted(v4(count) if size == 4 else v6(count))
    whole, pieces = Built(), Built()
    made = builder()
    made._addresses(whole, labels, family)  # what a service's build stores
    made.family_answer(pieces, name, family, 0, count, truncate.Rotation())
    expected, got = whole.answers[key], pieces.answers[key]
    assert (got.heads, got.body, got.rcode) == (expected.heads, expected.body, expected.rcode)
    kept = min(count, family_room(key, size))
    assert int.from_bytes(got.heads[0][4:6]) == kept
    assert got.cut == (kept < count)
    assert made.cut == 2 * (kept < count)  # each build counted its cut answer
    # past 512 bytes less the question, cut for UDP clients, over the records kept
    assert (key in pieces.cuts) == (key in whole.cuts) == (count > 2)
    for built in (pieces, whole):
        if key in built.cuts:
            cuts = built.cuts[key]
            assert len(cuts.offsets) == kept + 1 and cuts.offsets[-1] == got.size
            # the cuts walk the answer's own body: no second copy of its bytes
            assert cuts.body is built.answers[key].body
    if kept == count > 2:
        mine, theirs = pieces.cuts[key], whole.cuts[key]
        assert (list(mine.offsets), mine.plans, mine.family) == \
            (list(theirs.offsets), theirs.plans, theirs.family)


@pytest.mark.parametrize("first", [0, 5, 37])
def test_a_family_answer_ranks_its_endpoints_from_the_first_rank(first: int) -> None:
    """The endpoints of a family answer ranked from ``first`` on, as a whole build ranks
    them (by endpoint), so that a rotation starts at the same endpoint in both."""
    family = sorted(v4(60))
    whole, pieces = Built(), Built()
    made = builder()
    made._addresses(whole, SVC, family, {packed: first + i for i, packed in enumerate(family)})
    made.family_answer(pieces, SVC_WIRE, family, first, 60, truncate.Rotation())
    mine, theirs = pieces.cuts[A_KEY], whole.cuts[A_KEY]
    assert (list(mine.offsets), mine.plans) == (list(theirs.offsets), theirs.plans)
    assert len(set(mine.plans)) > 1  # rotations that start at different endpoints
    assert mine.body is pieces.answers[A_KEY].body and theirs.body is whole.answers[A_KEY].body


def test_cuts_in_another_order_than_the_answers_walk_their_own_bytes() -> None:
    """Endpoints ranked against the addresses' order: the cuts keep the best ranked
    first, so their records are not the answer's body but the same records reordered."""
    family = sorted(v4(30))
    out = Built()
    builder()._addresses(out, SVC, family, {packed: 29 - i for i, packed in enumerate(family)})
    head = b"\xc0\x0c" + struct.pack("!HHIH", wire.A, wire.CLASS_IN, 5, 4)
    assert out.answers[A_KEY].body == b"".join(head + packed for packed in family)
    assert out.cuts[A_KEY].body == b"".join(head + packed for packed in reversed(family))


def test_a_names_a_and_aaaa_cuts_share_one_rotation() -> None:
    """A client asking both families of a name gets the same endpoints from each: the two
    answers' cuts take their turn from one rotation."""
    out = Built()
    builder()._addresses(out, SVC, sorted(v4(40)) + sorted(v6(40)))
    a, aaaa = out.cuts[A_KEY], out.cuts[AAAA_KEY]
    assert isinstance(a.rotation, truncate.Rotation) and a.rotation is aaaa.rotation
    assert (a.family, aaaa.family) == (truncate.A_BIT, truncate.AAAA_BIT)


def test_a_small_family_answer_in_zone_file_text() -> None:
    out = Built()
    builder(ttl=9).family_answer(out, SVC_WIRE, v4(3), 0, 3, truncate.Rotation())
    assert text(A_KEY, out.answers[A_KEY]) == [
        "web.prod.svc.clusterset.local. 9 in a 10.0.0.1",
        "web.prod.svc.clusterset.local. 9 in a 10.0.0.2",
        "web.prod.svc.clusterset.local. 9 in a 10.0.0.3"]
    assert out.cuts == {}


# -- an SRV answer made outside a service's build (delta.py) ---------------------------------

SRV_KEY = SVC_WIRE + struct.pack("!HH", wire.SRV, wire.CLASS_IN)


def test_an_srv_answer_made_alone_in_zone_file_text() -> None:
    east = names.EndpointNames(SVC, names.subdomain("east"))
    one, one_wire = east.name("web-0")
    two, _ = east.name("web-1")
    out = Built()
    made = builder(ttl=6)
    made.srv_answer(out, SVC, [(one, 80), (two, 80), (one, 8080)],
                    {one: v4(1), two: v6(1)})
    reply = decode(b"\x00\x00" + out.answers[SRV_KEY].heads[0] + SRV_KEY
                   + out.answers[SRV_KEY].body)
    web, east = "web.prod.svc.clusterset.local.", "east.web.prod.svc.clusterset.local."
    assert reply.answer == [f"{web} 6 in srv 0 33 80 web-0.{east}",
                            f"{web} 6 in srv 0 33 80 web-1.{east}",
                            f"{web} 6 in srv 0 33 8080 web-0.{east}"]
    assert reply.additional == [f"web-0.{east} 6 in a 10.0.0.1", f"web-1.{east} 6 in aaaa fd00::1"]
    assert out.cuts == {} and made.cut == 0
    # the names it encoded are forgotten with the answer: the next build starts empty
    assert made._wires == {} and one_wire
