"""zone/records.py's RecordBuilder called directly, as delta.py and the cache call it:
each answer rendered as zone-file text by dnspython (an independent decoder), and the
pieces delta.py joins (one_address, family_answer, srv_answer) equal to what a whole
build makes, at the sizes where an answer is first cut. Written for the survivors of
``scripts/mutate clusterset_dns/zone/records.py``."""

from __future__ import annotations

import ipaddress
import logging
import struct

import pytest

from clusterset_dns.base import names
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.zone import truncate, wire
from clusterset_dns.zone.model import (
    NO_ENDPOINTS,
    Endpoint,
    Endpoints,
    EndpointSlice,
    Port,
    ServiceImport,
    ServiceType,
)
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
    """(labels, wire form, A or AAAA question) of ``service`` (in prod unless named
    ``namespace/name``)."""
    namespace, _, name = service.rpartition("/")
    labels = ZONE.service(namespace or "prod", name)
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
# p/web's A question (32 bytes) leaves 8 bytes of room past its last A record: half a
# record, which a room counted 8 bytes too large would take for a whole one
HALF_A = "p/web"
assert (wire.TCP_MAX - 12 - 32 - wire.OPT_LEN) % 16 == 8


def sizes() -> list[tuple[str, int, int]]:
    rows = [(WEB, 4, 2), (WEB, 4, 40), (WEB, 16, 2), (WEB, 16, 1170), (WEB, 16, 1171)]
    for service, size in ((WEB, 4), (WEB, 16), (EXACT_A, 4), (EXACT_AAAA, 16), (HALF_A, 4)):
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
    rotation = truncate.Rotation()  # delta.py's, shared by the name's two families
    made.family_answer(pieces, name, family, 0, count, rotation)
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
        assert mine.rotation is rotation
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


@pytest.mark.parametrize("size", [4, 16])
def test_cuts_ranked_by_endpoint_say_their_family(size: int) -> None:
    """A name's A and AAAA cuts tell the two families apart (the rotation they share
    counts each family's turn), ranked or not."""
    family = sorted(v4(30) if size == 4 else v6(30))
    out = Built()
    builder()._addresses(out, SVC, family, {packed: i for i, packed in enumerate(family)})
    key, bit = (A_KEY, truncate.A_BIT) if size == 4 else (AAAA_KEY, truncate.AAAA_BIT)
    assert out.cuts[key].family == bit


def test_a_target_without_addresses_gets_its_srv_record_and_no_glue() -> None:
    east = names.EndpointNames(SVC, names.subdomain("east"))
    one, _ = east.name("web-0")
    bare, _ = east.name("bare")
    out = Built()
    builder(ttl=6).srv_answer(out, SVC, [(one, 80), (bare, 80)], {one: v4(1)})
    reply = decode(b"\x00\x00" + out.answers[SRV_KEY].heads[0] + SRV_KEY
                   + out.answers[SRV_KEY].body)
    web, east_name = "web.prod.svc.clusterset.local.", "east.web.prod.svc.clusterset.local."
    assert reply.answer == [f"{web} 6 in srv 0 50 80 bare.{east_name}",
                            f"{web} 6 in srv 0 50 80 web-0.{east_name}"]
    assert reply.additional == [f"web-0.{east_name} 6 in a 10.0.0.1"]


def test_an_srv_answer_past_a_pointers_reach_keeps_targets_without_addresses() -> None:
    """Targets written past offset 0x3FFF cannot be pointed at: the general encoder
    writes that answer, and a target without addresses still gets its record only."""
    east = names.EndpointNames(SVC, names.subdomain("east"))
    targets = [east.name(f"host-{i:04d}")[0] for i in range(400)]
    glue = {target: v4(1, 0x0A000001 + i) for i, target in enumerate(targets[1:])}
    out = Built()
    builder().srv_answer(out, SVC, [(target, 80) for target in targets], glue)
    answer = out.answers[SRV_KEY]
    reply = decode(b"\x00\x00" + answer.heads[0] + SRV_KEY + answer.body)
    assert len(reply.answer) == 400
    assert reply.additional == sorted(
        f"host-{i:04d}.east.web.prod.svc.clusterset.local. 5 in a "
        f"{ipaddress.IPv4Address(0x0A000000 + i)}" for i in range(1, 400))


# -- a ClusterSetIP import without a usable IP ---------------------------------------------

def test_a_clustersetip_import_without_an_ip_says_why_on_each_of_its_names() -> None:
    imp = ServiceImport("prod", "web", ServiceType.CLUSTER_SET_IP, (),
                        (Port("http", "tcp", 80), Port("", "udp", 53)))
    out = builder().service(imp, [])
    why = wire.ede(wire.EDE_OTHER, "no address: ServiceImport prod/web has no usable IP")
    http = names.to_wire(ZONE.port_srv(SVC, "http", "tcp"))
    assert out.explained == {SVC_WIRE: why, http: why}
    assert out.answers == {}


# -- which SRV answers get cuts: more than one record, and an answer section (glue apart)
# -- longer than the least room a UDP client has (489 bytes less the question) -------------

LONG_OWNER = (b"x" * 63, b"y" * 63, b"z" * 63, b"w" * 30, *ZONE.apex)  # 241 bytes
LONG_TARGET = (b"t" * 63, b"u" * 63, b"v" * 63, b"s" * 30, *ZONE.apex)


def srv_cut(owner: tuple[bytes, ...], hosts: list[str], glued: int) -> tuple[wire.Answer, bool]:
    """The SRV answer of ``owner`` to endpoints ``hosts`` of cluster east, each with
    ``glued`` AAAA addresses (the long owner: to the long target), and whether it has
    cuts."""
    east = names.EndpointNames(SVC, names.subdomain("east"))
    targets = [LONG_TARGET] if owner is LONG_OWNER else [east.name(h)[0] for h in hosts]
    glue = {target: v6(glued) for target in targets}
    out = Built()
    builder().srv_answer(out, owner, [(target, 80) for target in targets], glue)
    key = names.to_wire(owner) + struct.pack("!HH", wire.SRV, wire.CLASS_IN)
    return out.answers[key], key in out.cuts


def hosts(count: int) -> list[str]:
    return [f"h{i}" for i in range(count)]


# records to h0..h5 take 57 bytes each (18 + the 39-byte target), one to a 57- or
# 58-character host 112 or 113: 454 or 455 bytes, against the 454 left after web's
# 35-byte question
FITS, PAST = [*hosts(6), "h" + "x" * 56], [*hosts(6), "h" + "x" * 57]


@pytest.mark.parametrize(("owner", "targets", "glued", "cut"), [
    (LONG_OWNER, ["long"], 1, False),  # 259 bytes > 489 - 245, but one record: nothing to cut
    (SVC, hosts(256), 0, True),  # a count with a low byte of 0
    (SVC, hosts(2), 20, False),  # 2 records; their glue alone takes 1120 bytes: dropped first
    (SVC, hosts(30), 0, True),  # no glue at all (no additional section)
    (SVC, FITS, 0, False), (SVC, PAST, 0, True),
    (SVC, FITS, 1, False), (SVC, PAST, 1, True),  # the glue after them is not counted
])
def test_which_srv_answers_are_cut(owner: tuple[bytes, ...], targets: list[str], glued: int,
                                   cut: bool) -> None:
    answer, has_cuts = srv_cut(owner, targets, glued)
    assert int.from_bytes(answer.heads[0][4:6]) == len(targets)
    assert has_cuts == cut


# -- a _port._proto SRV answer equal to its service name's: shared only when lazy ---------

@pytest.mark.parametrize("lazy", [True, False])
def test_a_named_ports_srv_answer_is_shared_only_when_lazy(lazy: bool) -> None:
    """One named port: the ``_http._tcp`` name's SRV records are the service name's,
    answered from them (Built.derived) by a lazy build; delta.py's builds (not lazy)
    encode every answer."""
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), (Port("http", "tcp", 80),))
    ready = Endpoints.of([Endpoint((ipaddress.IPv4Address("10.0.0.1"),), "web-0"),
                          Endpoint((ipaddress.IPv4Address("10.0.0.2"),), "web-1")])
    piece = EndpointSlice("prod", "web-east", "web", "east", ready, (Port("http", "tcp", 80),))
    made = builder()
    made.lazy = lazy
    out = made.service(imp, [piece])
    bare = SVC_WIRE + struct.pack("!HH", wire.SRV, wire.CLASS_IN)
    port_key = names.to_wire(ZONE.port_srv(SVC, "http", "tcp")) + bare[-4:]
    assert bare in out.answers
    if lazy:
        assert out.derived == {port_key: bare} and port_key not in out.answers
    else:
        assert out.derived == {} and port_key in out.answers
        east = "east.web.prod.svc.clusterset.local."
        assert text(port_key, out.answers[port_key]) == [
            f"_http._tcp.web.prod.svc.clusterset.local. 5 in srv 0 50 80 web-{i}.{east}"
            for i in (0, 1)]


@pytest.mark.parametrize(("size", "rtype"), [(4, 1), (16, 28)])
def test_an_answer_cut_to_one_message_is_logged_with_its_name_type_and_records(
        size: int, rtype: int, caplog: pytest.LogCaptureFixture) -> None:
    _, _, key = key_of(WEB, size)
    room = family_room(key, size)
    family = sorted(v4(room + 1) if size == 4 else v6(room + 1))
    with caplog.at_level(logging.WARNING, logger="clusterset_dns.zone.records"):
        builder()._addresses(Built(), SVC, family)
    assert [r.getMessage() for r in caplog.records] == [
        f"answer to web.prod.svc.clusterset.local. type {rtype} is larger than a DNS message: "
        f"cut to {room} records"]


@pytest.mark.parametrize(("packed", "rtype", "line"), [
    (v4(1)[0], wire.A, "web.prod.svc.clusterset.local. 5 in a 10.0.0.1"),
    (v6(1)[0], wire.AAAA, "web.prod.svc.clusterset.local. 5 in aaaa fd00::1"),
])
def test_a_name_with_one_address_answers_its_family_only(packed: bytes, rtype: int,
                                                         line: str) -> None:
    out = Built()
    builder()._addresses(out, SVC, [packed])
    key = SVC_WIRE + struct.pack("!HH", rtype, wire.CLASS_IN)
    assert list(out.answers) == [key]
    assert text(key, out.answers[key]) == [line]


def test_every_endpoint_of_a_slice_without_a_cluster_answers_the_service_name() -> None:
    """A slice without a source cluster names no endpoint, but each of its endpoints is
    in the service name's answer."""
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), ())
    ready = Endpoints.of([Endpoint((ipaddress.IPv4Address(f"10.0.0.{i}"),), None)
                          for i in (1, 2, 3)])
    out = builder().service(imp, [EndpointSlice("prod", "web-x", "web", None, ready, ())])
    assert text(A_KEY, out.answers[A_KEY]) == [
        f"web.prod.svc.clusterset.local. 5 in a 10.0.0.{i}" for i in (1, 2, 3)]
    assert out.hosts == {} and list(out.answers) == [A_KEY]


def test_a_lazy_build_indexes_names_of_one_address_and_encodes_the_others() -> None:
    """Endpoint names with one address go to the compact index (answered on first use);
    a name two endpoints share keeps both addresses in an answer encoded now."""
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), ())
    ready = Endpoints.of([Endpoint((ipaddress.IPv4Address(f"10.0.0.{i}"),), hostname)
                          for i, hostname in ((1, "web-0"), (2, "shared"), (3, "shared"))])
    made = RecordBuilder(ZONE, 5)  # lazy, as the cache builds
    out = made.service(imp, [EndpointSlice("prod", "web-east", "web", "east", ready, ())])
    east = names.to_wire(names.EndpointNames(SVC, names.subdomain("east")).name("web-0")[0])
    parent = east[east[0] + 1:]
    assert {name: dict(index) for name, index in out.hosts.items()} == {
        parent: {b"\x05web-0": ipaddress.IPv4Address("10.0.0.1").packed}}
    shared = b"\x06shared" + parent + struct.pack("!HH", wire.A, wire.CLASS_IN)
    assert text(shared, out.answers[shared]) == [
        f"shared.east.web.prod.svc.clusterset.local. 5 in a 10.0.0.{i}" for i in (2, 3)]


def test_an_import_without_endpoints_makes_its_namespace_exist() -> None:
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), ())
    out = builder().service(imp, [])
    # prod.svc.clusterset.local, and svc.clusterset.local above it
    assert out.names == {names.to_wire(SVC[1:]), names.to_wire(SVC[2:])}
    assert out.answers == {}


def test_the_apex_answers_own_their_records_by_a_pointer_to_the_question() -> None:
    """(the serial is rendered as a placeholder by helpers.decode)"""
    out = builder(ttl=5).apex(7, [ipaddress.IPv4Address("10.0.0.53")])
    apex = names.to_wire(ZONE.apex)
    for rtype, line in ((wire.SOA, "clusterset.local. 5 in soa ns.dns.clusterset.local. "
                                   "hostmaster.clusterset.local. serial 7200 1800 86400 5"),
                        (wire.NS, "clusterset.local. 5 in ns ns.dns.clusterset.local.")):
        key = apex + struct.pack("!HH", rtype, wire.CLASS_IN)
        body = out.answers[key].body
        assert body[:2] == b"\xc0\x0c"  # the owner is the question's name
        assert text(key, out.answers[key]) == [line]
    version = names.to_wire(ZONE.dns_version) + struct.pack("!HH", wire.TXT, wire.CLASS_IN)
    assert out.answers[version].body[:2] == b"\xc0\x0c"
    assert text(version, out.answers[version]) == [
        'dns-version.clusterset.local. 28800 in txt "1.0.0"']
    # the mailbox as written (names compare without case; the bytes keep it)
    soa = apex + struct.pack("!HH", wire.SOA, wire.CLASS_IN)
    assert b"\x0ahostmaster\xc0\x0c" in out.answers[soa].body


def test_a_builder_made_without_the_flag_answers_no_terminating_endpoint() -> None:
    serving = Endpoints.of([Endpoint((ipaddress.IPv4Address("10.0.0.1"),), None)])
    piece = EndpointSlice("prod", "web-east", "web", "east", NO_ENDPOINTS, (), serving=serving)
    assert RecordBuilder(ZONE, 5).answering([piece]) == [piece]
    assert RecordBuilder(ZONE, 5, serve_terminating=True).answering([piece])[0].endpoints \
        == serving
