"""Truncated UDP answers carry the whole records that fit (RFC 2181 9), rotate among a
few precomputed subsets, keep A and AAAA on the same endpoints, keep SRV records in
the order listed, and stay out of the response memory."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator

import dns.flags
import dns.message
import dns.rrset
import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving import stats as counters
from clusterset_dns.serving import udpbatch
from clusterset_dns.serving.handler import Handler
from clusterset_dns.serving.server import make_socket
from clusterset_dns.sources import convert
from clusterset_dns.sources.convert import endpoint_slice as convert_slice
from clusterset_dns.zone import truncate, wire
from clusterset_dns.zone.cache import (
    Cache,
    PutSlice,
    ReplaceImports,
    ReplaceSlices,
    SetClusterId,
    SetSynced,
)
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import (
    DEFAULT_UDP_CAP,
    ZONE,
    Reply,
    ask,
    build_cache,
    check_cut,
    clock_at,
    decode,
    query,
)

Z = "svc.clusterset.local."
BIG, DUAL, SMALL = f"big.prod.{Z}", f"dual.prod.{Z}", f"small.prod.{Z}"
HTTP = [port(80, "TCP", "http")]
BIG_IPS = [f"10.3.{i // 250}.{i % 250 + 1}" for i in range(200)]
DUAL_COUNT = 100


def _v6(i: int) -> str:
    return f"fd00::{(i * 37) % DUAL_COUNT + 1:x}"  # numeric order differs from the IPv4 one


def _objects() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    imports = [service_import(name, type_="Headless", ports=HTTP) for name in ("big", "dual")]
    imports.append(service_import("small", ips=["10.9.0.1"], ports=HTTP))
    slices = [
        endpoint_slice("big-a", "big", cluster="east", ports=HTTP,
                       endpoints=[endpoint(ip) for ip in BIG_IPS]),
        # A dual-stack endpoint is one endpoint per family, sharing its hostname.
        endpoint_slice("dual-4", "dual", cluster="east", ports=HTTP, endpoints=[
            endpoint(f"10.4.0.{i + 1}", hostname=f"pod-{i}") for i in range(DUAL_COUNT)]),
        endpoint_slice("dual-6", "dual", cluster="east", ports=HTTP, address_type="IPv6",
                       endpoints=[endpoint(_v6(i), hostname=f"pod-{i}")
                                  for i in range(DUAL_COUNT)]),
    ]
    return imports, slices


def fresh(cap: int = DEFAULT_UDP_CAP) -> Handler:
    return Handler(build_cache(*_objects()).zone, cap)


def addresses(reply: Reply) -> list[str]:
    """The answer's rdata, in the order sent."""
    return [rdata.to_text() for rrset in reply.msg.answer for rdata in rrset]


# -- what fits: (question, EDNS payload or None, expected answer records) ----------------------
# 12 header + question + 11 OPT with EDNS; an A record 16 bytes, AAAA 28. BIG's question is
# 34 bytes ("big.prod.svc.clusterset.local." 30 + type, class), DUAL's 35.

FITS = [
    (BIG, "A", None, (512 - 12 - 34) // 16),  # 29: what CoreDNS sends too
    (BIG, "A", 1232, (1232 - 12 - 34 - 11) // 16),  # 73
    (BIG, "A", 4096, (1232 - 12 - 34 - 11) // 16),  # capped at ours
    (BIG, "A", 1000, (1000 - 12 - 34 - 11) // 16),
    (BIG, "A", 100, (512 - 12 - 34 - 11) // 16),  # below 512 means 512
    (DUAL, "AAAA", None, (512 - 12 - 35) // 28),
    (DUAL, "AAAA", 1232, (1232 - 12 - 35 - 11) // 28),
]


@pytest.mark.parametrize(("qname", "qtype", "payload", "expected"), FITS)
def test_a_truncated_answer_carries_the_records_that_fit(qname: str, qtype: str,
                                                         payload: int | None,
                                                         expected: int) -> None:
    handler = fresh()
    data = query(qname, qtype, **({} if payload is None else {"edns": 0, "payload": payload}))
    full = ask(handler, data, tcp=True)
    assert not full.has(dns.flags.TC)
    reply = ask(handler, data)
    assert len(reply.answer) == expected
    check_cut(reply, full, max(512, min(payload or 512, DEFAULT_UDP_CAP)))


def test_a_larger_configured_cap_takes_more() -> None:
    reply = ask(fresh(cap=2048), query(BIG, "A", edns=0, payload=4096))
    assert len(reply.answer) == (2048 - 12 - 34 - 11) // 16
    assert reply.has(dns.flags.TC) and reply.msg.payload == 2048


def test_over_tcp_and_small_answers_are_whole() -> None:
    handler = fresh()
    assert sorted(addresses(ask(handler, query(BIG, "A"), tcp=True))) == sorted(BIG_IPS)
    small = ask(handler, query(SMALL, "A"))
    assert addresses(small) == ["10.9.0.1"] and not small.has(dns.flags.TC)


# -- the fast path cuts too ----------------------------------------------------------------------

@pytest.mark.parametrize(("qname", "qtype"), [
    (BIG, "A"), (BIG.upper(), "A"), ("bIg.PrOd." + Z, "SRV"), (BIG, "SRV"),
    (DUAL, "A"), ("DuAl.pRoD." + Z, "AAAA"), (DUAL, "SRV")])
# 1001: BIG's A records fill the room to the byte (1001 - 12 - 34 - 11 = 59 * 16)
@pytest.mark.parametrize("payload", [None, 100, 512, 1000, 1001, 1232, 4096])
def test_the_fast_path_cuts_what_does_not_fit_as_the_slow_path_does(
        qname: str, qtype: str, payload: int | None) -> None:
    """An answer too large for a UDP client is cut by the fast path, byte for byte as
    the slow path cuts it at the same second, counted once; in any case of the name
    (DNS 0x20: never remembered, so each one took the slow path before)."""
    handler = fresh()
    clock_at(handler, 5.0)
    limit = 512 if payload is None else max(512, min(payload, DEFAULT_UDP_CAP))
    for rd, cd, do in ((False, False, False), (True, False, True), (False, True, False),
                       (True, True, True)):
        data = query(qname, qtype, rd=rd, cd=cd, qid=0x1234, **(
            {} if payload is None else {"edns": 0, "payload": payload, "do": do}))
        assert len(ask(handler, data, tcp=True).wire) > limit  # every case needs a cut
        counts, truncated = sum(handler.stats.requests), handler.stats.truncated
        tail = handler.fast(data[2:], False)
        assert tail is not None
        assert sum(handler.stats.requests) == counts + 1
        assert handler.stats.truncated == truncated + 1
        assert data[:2] + tail == handler.slow(data, False)
        reply = decode(data[:2] + tail)
        assert reply.has(dns.flags.TC) and len(data[:2] + tail) <= limit
        assert reply.has(dns.flags.RD) == rd and reply.has(dns.flags.CD) == cd
        assert (reply.msg.ednsflags & dns.flags.DO != 0) == (do and payload is not None)
        assert handler.fast(data[2:], True) is not None  # over TCP: whole, as before


@pytest.mark.parametrize("name", ["four", "fives"])
@pytest.mark.parametrize("slack", [None, 0, 1])
def test_the_fast_path_cut_fills_the_room_to_the_byte(name: str, slack: int | None) -> None:
    """``slack`` None: no EDNS, 512 bytes; else a payload leaving ``slack`` bytes beside
    whole A records (16 bytes each). The names' lengths put 512 on either side of a
    record's edge: "four" fills it to the byte, "fives" leaves 15 bytes."""
    ips = [f"10.7.0.{i + 1}" for i in range(100)]
    handler = Handler(build_cache(
        [service_import(name, type_="Headless", ports=HTTP)],
        [endpoint_slice(f"{name}-a", name, cluster="east", ports=HTTP,
                        endpoints=[endpoint(ip) for ip in ips])]).zone, DEFAULT_UDP_CAP)
    qname = f"{name}.prod.{Z}"
    question = len(query(qname, "A")) - 12
    if slack is None:
        data, room = query(qname, "A"), 512 - 12 - question
        assert room % 16 == (0 if name == "four" else 15)
    else:
        room = 16 * 50 + slack
        data = query(qname, "A", edns=0, payload=12 + question + 11 + room)
    tail = handler.fast(data[2:], False)
    assert tail is not None and data[:2] + tail == handler.slow(data, False)
    assert len(decode(data[:2] + tail).answer) == room // 16


@pytest.mark.parametrize("payload", [None, 1232])
def test_the_fast_path_answers_tc_alone_when_no_cut_is_kept(payload: int | None) -> None:
    """No cut form for the name (none kept, or nothing fits): TC without records, the
    query's RD and CD echoed, as the slow path answers."""
    handler = fresh()
    extra = {} if payload is None else {"edns": 0, "payload": payload}
    for rd, cd in ((True, False), (False, True)):
        data = query(BIG, "A", rd=rd, cd=cd, **extra)
        key = data[12:] if payload is None else data[12:-11]
        handler.zone.cuts.pop(key.lower(), None)
        tail = handler.fast(data[2:], False)
        assert tail is not None and data[:2] + tail == handler.slow(data, False)
        reply = decode(data[:2] + tail)
        assert reply.has(dns.flags.TC) and not reply.answer
        assert reply.has(dns.flags.RD) == rd and reply.has(dns.flags.CD) == cd


@pytest.mark.parametrize(("qname", "qtype", "payload"), [
    (BIG, "A", None), (BIG, "SRV", None), (DUAL, "AAAA", None),
    (BIG, "A", 1232), (BIG, "SRV", 512), (DUAL, "AAAA", 1000)])
def test_the_fast_path_counts_its_cut_as_a_udp_answer_of_its_type(
        qname: str, qtype: str, payload: int | None) -> None:
    """A cut answer leaves over UDP: counted there, under its type and NOERROR, without
    an EDE, exactly as the slow path counts the same answer (the per-transport counters
    are what clusterset_dns_requests_total reports)."""
    handler = fresh()
    data = query(qname, qtype) if payload is None else query(qname, qtype, edns=0,
                                                               payload=payload)
    for fast in (True, False):
        before = list(handler.stats.requests)
        tail = handler.fast(data[2:], False) if fast else (handler.slow(data, False) or b"")[2:]
        assert tail and tail[0] & 0x02  # TC set: a cut answer
        counted = {counters.slot_of(i): n - before[i]
                   for i, n in enumerate(handler.stats.requests) if n != before[i]}
        assert counted == {(qtype, "udp", None, 0): 1}


# -- rotation ------------------------------------------------------------------------------------

def test_consecutive_truncated_answers_rotate() -> None:
    """A new order every second of the clock: one query a second sees them all."""
    handler = fresh()
    now = [0.0]
    clock_at(handler, lambda: now[0])
    seen = []
    for i in range(2 * truncate.ROTATIONS):
        seen.append(addresses(ask(handler, query(BIG, "A", qid=i))))
        now[0] += 1.0
    firsts = [answer[0] for answer in seen]
    assert len(set(firsts[: truncate.ROTATIONS])) == truncate.ROTATIONS  # all different
    assert seen[truncate.ROTATIONS:] == seen[: truncate.ROTATIONS]  # then round again
    # rotation r starts a quarter further into the endpoints
    assert firsts[: truncate.ROTATIONS] == [BIG_IPS[r * len(BIG_IPS) // truncate.ROTATIONS]
                                            for r in range(truncate.ROTATIONS)]


def test_answers_within_a_second_keep_their_order() -> None:
    """From the second's first instant to its last, one order; the next second's is
    another (the clock is the rotation's seam, set by hand)."""
    handler = fresh()
    now = [7.0]
    clock_at(handler, lambda: now[0])
    seen = set()
    for i, when in enumerate((7.0, 7.25, 7.5, 7.999999)):
        now[0] = when
        seen.add(tuple(addresses(ask(handler, query(BIG, "A", qid=i)))))
    assert len(seen) == 1
    now[0] = 8.0
    assert tuple(addresses(ask(handler, query(BIG, "A", qid=9)))) not in seen


def test_every_process_hands_out_the_same_order_at_the_same_second() -> None:
    """--workers and replicas: a client's A may reach one process and its AAAA another;
    both read the clock, so the pair still keeps the same endpoints."""
    for second in range(truncate.ROTATIONS):
        one, two = fresh(), fresh()
        clock_at(one, second + 0.1)
        clock_at(two, second + 0.9)
        owner = _hostnames(one)
        for _ in range(3):  # other clients asked this process before
            ask(one, query(BIG, "A"))
            ask(one, query(DUAL, "A"))
        assert addresses(ask(one, query(BIG, "A"))) == addresses(ask(two, query(BIG, "A")))
        v4 = {owner[address] for address in addresses(ask(one, query(DUAL, "A")))}
        v6 = {owner[address] for address in addresses(ask(two, query(DUAL, "AAAA")))}
        assert v6 and v6 < v4, second


def test_each_rotation_is_built_once_per_client_size() -> None:
    handler = fresh()
    now = [0.0]
    clock_at(handler, lambda: now[0])
    for kw in ({}, {"edns": 0}):
        for i in range(3 * truncate.ROTATIONS):
            ask(handler, query(BIG, "A", qid=i, **kw))
            now[0] += 1.0
    forms = [key for key in handler.zone.cut_forms if key[0].startswith(b"\x03big")]
    assert len(forms) == 2 * truncate.ROTATIONS


def _hostnames(handler: Handler) -> dict[str, str]:
    """address -> endpoint hostname, from the endpoint names' own answers (over TCP)."""
    found: dict[str, str] = {}
    for i in range(DUAL_COUNT):
        for qtype in ("A", "AAAA"):
            for address in addresses(ask(handler, query(f"pod-{i}.east.{DUAL}", qtype),
                                         tcp=True)):
                found[address] = f"pod-{i}"
    return found


@pytest.mark.parametrize("first", ["A", "AAAA"])
@pytest.mark.parametrize("edns", [None, 0], ids=["plain", "edns"])
def test_a_and_aaaa_keep_the_same_endpoints(first: str, edns: int | None) -> None:
    """A client asking both families (either first) gets the same endpoints in both, as
    far as size allows: every endpoint of the smaller AAAA answer is in the A answer."""
    handler = fresh()
    owner = _hostnames(handler)
    now = [0.5]
    clock_at(handler, lambda: now[0])
    second = "AAAA" if first == "A" else "A"
    starts = set()
    for _ in range(truncate.ROTATIONS):
        got = {qtype: ask(handler, query(DUAL, qtype, edns=edns)) for qtype in (first, second)}
        now[0] += 1.0
        v4 = {owner[address] for address in addresses(got["A"])}
        v6 = {owner[address] for address in addresses(got["AAAA"])}
        assert got["A"].has(dns.flags.TC) and got["AAAA"].has(dns.flags.TC)
        assert v6 and v6 < v4
        starts.add(addresses(got["A"])[0])
    assert len(starts) == truncate.ROTATIONS  # and the pairs still rotate


# -- SRV -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("qname", [BIG, f"_http._tcp.{BIG}"])
def test_srv_keeps_records_that_fit_and_only_their_glue(qname: str) -> None:
    handler = fresh()
    full = ask(handler, query(qname, "SRV", edns=0), tcp=True)
    for kw, limit in (({}, 512), ({"edns": 0}, DEFAULT_UDP_CAP)):
        for _ in range(truncate.ROTATIONS):
            reply = ask(handler, query(qname, "SRV", **kw))
            check_cut(reply, full, limit)
    # Some client sizes leave room after the records for some of their targets' addresses.
    glued = 0
    for payload in range(1100, DEFAULT_UDP_CAP + 1):
        reply = ask(handler, query(qname, "SRV", edns=0, payload=payload))
        check_cut(reply, full, payload)
        glued += bool(reply.additional)
    assert glued


def _srv_answer(question: str, priorities: list[int]) -> tuple[bytes, wire.Answer]:
    """An SRV answer written by dnspython (owner and glue names compressed its own way),
    with the given priorities in the order listed, and each target's A record as glue."""
    msg = dns.message.make_response(dns.message.make_query(question, "SRV"))
    targets = [f"t{i}.{question}" for i in range(len(priorities))]
    msg.answer.append(dns.rrset.from_text_list(
        question, 5, "IN", "SRV", [f"{p} 1 80 {t}" for p, t in zip(priorities, targets,
                                                                   strict=True)]))
    for i, target in enumerate(targets):
        msg.additional.append(dns.rrset.from_text(target, 5, "IN", "A", f"10.0.{i // 250}."
                                                  f"{i % 250 + 1}"))
    data = msg.to_wire(want_shuffle=False)  # in the order listed
    key = data[12 : 12 + len(question) + 1 + 4]  # the question, as sent (lower case)
    body = data[12 + len(key):]
    glue_at = 0  # where the additional section starts: after the answer records
    for _ in priorities:
        walked = wire.skip_rr(body, glue_at)
        assert walked is not None
        glue_at = walked[3]
    answer = wire.WithAdditional(wire.heads(0, len(priorities), 0, len(priorities)), body, 0,
                                 glue_at)
    return key, answer


@pytest.mark.parametrize("priorities", [[0] * 3 + [1] * 40, [0] * 20 + [1] * 20,
                                        [5] * 10 + [7] * 10 + [9] * 30])
def test_srv_cut_keeps_the_listed_order_lowest_priority_first(priorities: list[int]) -> None:
    question = "svc.prod.svc.clusterset.local."
    key, answer = _srv_answer(question, priorities)
    cuts = truncate.srv_cuts(key, answer, truncate.Rotation())
    for index in range(truncate.ROTATIONS):
        for room in (512 - 12 - len(key), 1232 - 12 - len(key) - 11):
            form = cuts.form(index, room, 12 + len(key))
            assert form is not None
            heads, body = form
            response = b"\x00\x00" + heads[0] + key + body
            reply = decode(response)
            kept = [int(line.split()[4]) for line in reply.answer]
            assert kept, "no record kept"
            # as listed: every lower priority whole before any record of a higher one
            ordered = [int(rd.priority) for rrset in reply.msg.answer for rd in rrset]
            assert ordered == sorted(ordered)
            lower = [p for p in priorities if p < max(ordered)]
            assert ordered.count(min(priorities)) == min(len(ordered),
                                                         priorities.count(min(priorities)))
            assert len([p for p in ordered if p < max(ordered)]) == len(lower)
            targets = {line.split()[-1] for line in reply.answer}
            assert {line.split()[0] for line in reply.additional} <= targets
            assert len(response) - 2 <= room + 12 + len(key)


# -- memories --------------------------------------------------------------------------------------

def test_truncated_answers_are_not_remembered_and_keep_rotating() -> None:
    handler = fresh()
    now = [0.0]
    clock_at(handler, lambda: now[0])
    before = len(handler.zone.responses)
    firsts = set()
    for _ in range(truncate.ROTATIONS):  # the same query, a second apart
        firsts.add(addresses(ask(handler, query(BIG, "A", qid=7)))[0])
        now[0] += 1.0
    assert len(firsts) == truncate.ROTATIONS
    assert len(handler.zone.responses) == before
    assert handler.stats.truncated == truncate.ROTATIONS


def test_a_data_change_replaces_the_cuts() -> None:
    imports, slices = _objects()
    cache = build_cache(imports, slices)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    ask(handler, query(BIG, "A"))
    assert handler.zone.cut_forms
    moved = [f"10.5.{i // 250}.{i % 250 + 1}" for i in range(200)]
    piece = convert_slice(endpoint_slice("big-a", "big", cluster="east", ports=HTTP,
                                         endpoints=[endpoint(ip) for ip in moved]))
    assert piece is not None
    cache.apply([PutSlice(("prod", "big-a"), piece)])
    for i in range(truncate.ROTATIONS):
        got = addresses(ask(handler, query(BIG, "A", qid=i)))
        assert got and set(got) <= set(moved)
    # shrunk below what needs a cut: the name's cuts go with it
    few = convert_slice(endpoint_slice("big-a", "big", cluster="east", ports=HTTP,
                                       endpoints=[endpoint("10.6.0.1")]))
    assert few is not None
    cache.apply([PutSlice(("prod", "big-a"), few)])
    assert not any(key.startswith(b"\x03big") for key in handler.zone.cuts)
    assert addresses(ask(handler, query(BIG, "A"))) == ["10.6.0.1"]


@pytest.fixture
def batch() -> Iterator[tuple[udpbatch.BatchReader, Handler, socket.socket, tuple[str, int]]]:
    if udpbatch.load() is not None:
        pytest.skip(f"no batched UDP I/O here: {udpbatch.load()}")
    handler = fresh()
    sock = make_socket("127.0.0.1", 0, socket.SOCK_DGRAM, reuse_port=False)
    reader = udpbatch.BatchReader(sock, handler.handle, handler)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.settimeout(2)
    yield reader, handler, client, sock.getsockname()
    client.close()
    sock.close()


def test_the_batched_reader_rotates_too(
        batch: tuple[udpbatch.BatchReader, Handler, socket.socket, tuple[str, int]]) -> None:
    """The reader answers remembered queries itself: a truncated answer must not be
    frozen into one remembered response."""
    reader, handler, client, where = batch
    now = [0.0]
    clock_at(handler, lambda: now[0])
    firsts = []
    for i in range(truncate.ROTATIONS):
        now[0] = float(i)
        client.sendto(query(BIG, "A", qid=i), where)
        for _ in range(50):
            reader._readable()
            if reader.used:
                break
        reply = decode(client.recvfrom(65535)[0])
        assert reply.has(dns.flags.TC) and reply.answer
        firsts.append(addresses(reply)[0])
    assert len(set(firsts)) == truncate.ROTATIONS
    # nothing with TC remembered (a stored response is the bytes after the ID)
    assert not any(tail[0] & 0x02 for _, (tail, _) in handler.zone.responses.items())


@pytest.mark.parametrize("local", [3, 30])
def test_local_first_srv_keeps_the_local_tier_first(local: int) -> None:
    """A PreferClose import's SRV ranks the local cluster's endpoints priority 0 and the
    rest 1 (dns-behaviour §6): a truncated answer keeps every record of priority 0 that
    fits before any of priority 1, in every rotation."""
    cache = Cache(ZoneNames(ZONE), 5)
    near = service_import("near", type_="Headless", ports=HTTP,
                          traffic_distribution="PreferClose")
    pieces = [endpoint_slice("near-east", "near", cluster="east", ports=HTTP,
                             endpoints=[endpoint(f"10.7.0.{i + 1}") for i in range(local)]),
              endpoint_slice("near-west", "near", cluster="west", ports=HTTP,
                             endpoints=[endpoint(f"10.8.0.{i + 1}") for i in range(40)])]
    imp = convert.service_import(near)
    slices = [convert.endpoint_slice(piece) for piece in pieces]
    cache.apply([ReplaceImports({(imp.namespace, imp.name): imp}),
                 ReplaceSlices({(p.namespace, p.name): p for p in slices if p is not None}),
                 SetSynced(True), SetClusterId("east")])
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    name = f"_http._tcp.near.prod.{Z}"
    full = ask(handler, query(name, "SRV"), tcp=True)
    assert {rd.priority for rrset in full.msg.answer for rd in rrset} == {0, 1}
    for _ in range(truncate.ROTATIONS):
        reply = ask(handler, query(name, "SRV"))
        check_cut(reply, full, 512)
        kept = [(rd.priority, rd.target.to_text()) for rrset in reply.msg.answer for rd in rrset]
        priorities = [priority for priority, _ in kept]
        assert priorities == sorted(priorities)
        assert priorities.count(0) == min(local, len(kept))
        assert all(".east." in target for priority, target in kept if priority == 0)


def test_a_flood_of_client_sizes_keeps_the_forms_bounded() -> None:
    """Every EDNS size from 512 to 4096, and 0x20 case variants: the remembered forms
    stay within their byte budget (they start over), and every answer is still right."""
    handler = fresh()
    handler.zone.cut_forms.budget = budget = 16 * (truncate.FORM_OVERHEAD + 600)
    full = ask(handler, query(BIG, "A"), tcp=True)
    for payload in range(512, 4097, 7):
        name = BIG.upper() if payload % 2 else BIG
        reply = ask(handler, query(name, "A", edns=0, payload=payload))
        check_cut(reply, full, max(512, min(payload, DEFAULT_UDP_CAP)))
        assert handler.zone.cut_forms.used <= budget


# -- exact fits: the byte that fits, and the one that does not ------------------------------------

Q = "s.prod.svc.clusterset.local."
T = "prod.svc.clusterset.local."  # the targets' suffix


def _zone_answer(lines: list[str]) -> tuple[bytes, wire.Answer]:
    """An SRV answer to ``Q`` from zone-file records: the SRV ones are the answer (in
    the order given), the address ones its glue (dnspython writes and compresses them)."""
    msg = dns.message.make_response(dns.message.make_query(Q, "SRV"))
    for line in lines:
        rrset = dns.rrset.from_text(*line.split(maxsplit=4))
        (msg.answer if rrset.rdtype == dns.rdatatype.SRV else msg.additional).append(rrset)
    data = msg.to_wire(want_shuffle=False)
    key = data[12 : 12 + len(dns.name.from_text(Q).to_wire()) + 4]
    body = data[12 + len(key):]
    records = sum(len(r) for r in msg.answer)
    glue_at = 0
    for _ in range(records):
        walked = wire.skip_rr(body, glue_at)
        assert walked is not None
        glue_at = walked[3]
    glue = sum(len(r) for r in msg.additional)
    return key, wire.WithAdditional(wire.heads(0, records, 0, glue), body, 0, glue_at)


def _srv_size(line: str) -> int:
    """An SRV record's bytes in a cut: owner pointer, type to rdlength, priority, weight,
    port, the target written out."""
    return 2 + 10 + 6 + len(dns.name.from_text(line.split()[-1]).to_wire())


def _kept(lines: list[str], room: int) -> list[str]:
    """The records (zone-file owner and data) a cut of rotation 0 keeps in ``room``."""
    key, answer = _zone_answer(lines)
    form = truncate.srv_cuts(key, answer, truncate.Rotation()).form(0, room, 12 + len(key))
    if form is None:
        return []
    reply = decode(b"\x00\x00" + form[0][0] + key + form[1])
    return [" ".join(line.split()[i] for i in (0, 3, 4, 5, 6, 7) if i < len(line.split()))
            for line in reply.answer + reply.additional]


SHORT = f"{Q} 5 IN SRV 0 1 80 a.{T}"
LONG = f"{Q} 5 IN SRV 1 1 80 {'b' * 40}.{T}"
LATER = f"{Q} 5 IN SRV 2 1 80 c.{T}"
GLUE_A = f"a.{T} 5 IN A 10.0.0.1"
GLUE_B = f"{'b' * 40}.{T} 5 IN A 10.0.0.2"
A_16 = 2 + 10 + 4  # a glue A record: a pointer to its target, then type to address

# (what, zone-file records, room in bytes, the records kept: owner, type and data)
EXACT = [
    ("the glue fits to the byte", [SHORT, GLUE_A], _srv_size(SHORT) + A_16,
     [f"{Q} SRV 0 1 80 a.{T}", f"a.{T} A 10.0.0.1"]),
    ("the glue a byte short: the record without it", [SHORT, GLUE_A],
     _srv_size(SHORT) + A_16 - 1, [f"{Q} SRV 0 1 80 a.{T}"]),
    ("two records to the byte", [SHORT, LONG], _srv_size(SHORT) + _srv_size(LONG),
     [f"{Q} SRV 0 1 80 a.{T}", f"{Q} SRV 1 1 80 {'b' * 40}.{T}"]),
    ("a byte short of the second", [SHORT, LONG], _srv_size(SHORT) + _srv_size(LONG) - 1,
     [f"{Q} SRV 0 1 80 a.{T}"]),
    # the order listed is kept: a later, shorter record never jumps a longer one that
    # did not fit, though it would fit in what is left
    ("a later shorter record after one that did not fit", [SHORT, LONG, LATER],
     _srv_size(SHORT) + _srv_size(LATER), [f"{Q} SRV 0 1 80 a.{T}"]),
    ("the glue of the first kept, not of the one cut", [SHORT, LONG, GLUE_A, GLUE_B],
     _srv_size(SHORT) + _srv_size(LONG) + A_16, [f"{Q} SRV 0 1 80 a.{T}",
                                                 f"{Q} SRV 1 1 80 {'b' * 40}.{T}",
                                                 f"a.{T} A 10.0.0.1"]),
    ("not even the first record", [LONG, SHORT], _srv_size(LONG) - 1, []),
]


@pytest.mark.parametrize(("what", "lines", "room", "kept"), EXACT, ids=[c[0] for c in EXACT])
def test_a_cut_keeps_exactly_what_fits(what: str, lines: list[str], room: int,
                                       kept: list[str]) -> None:
    assert [k.lower() for k in _kept(lines, room)] == [k.lower() for k in kept]


# An A answer of 29 records (16 bytes each, 464) to a 33-byte question: 509 bytes
# without EDNS (whole, no TC), 520 with the OPT record of a 512-byte EDNS client: cut.
WINDOW = f"w.prod.{Z}"


def test_an_answer_between_512_and_512_less_the_opt_record() -> None:
    ips = [f"10.5.0.{i + 1}" for i in range(29)]
    cache = build_cache([service_import("w", type_="Headless", ports=HTTP)],
                        [endpoint_slice("w-a", "w", cluster="east", ports=HTTP,
                                        endpoints=[endpoint(ip) for ip in ips])])
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    plain = ask(handler, query(WINDOW, "A"))
    assert len(plain.wire) == 12 + 33 + 29 * 16 == 509
    assert not plain.has(dns.flags.TC) and sorted(addresses(plain)) == sorted(ips)
    full = ask(handler, query(WINDOW, "A", edns=0, payload=512), tcp=True)
    cut = ask(handler, query(WINDOW, "A", edns=0, payload=512))
    assert cut.has(dns.flags.TC) and len(cut.answer) == (512 - 12 - 33 - 11) // 16 == 28
    check_cut(cut, full, 512)
    # the bound itself: an answer section that fits with the OPT record needs no cut
    assert not truncate.needs_cuts(33, 512 - 12 - 11 - 33, 29)
    assert truncate.needs_cuts(33, 512 - 12 - 11 - 33 + 1, 29)
    assert not truncate.needs_cuts(33, 10_000, 1)  # one record: nothing to cut


def _written_out(lines: list[str]) -> tuple[bytes, wire.Answer]:
    """The answer of :func:`_zone_answer` with every name written out (no compression:
    another server's, or a future encoder's, way): the cut must read it the same."""
    key, compressed = _zone_answer(lines)
    reply = dns.message.from_wire(b"\x00\x00" + compressed.heads[0] + key + compressed.body)

    def written(rrsets: list[dns.rrset.RRset]) -> bytes:
        out = io.BytesIO()
        for rrset in rrsets:
            rrset.to_wire(out, None, want_shuffle=False)  # no compression: names written out
        return out.getvalue()

    srv, glue = written(reply.answer), written(reply.additional)
    return key, wire.WithAdditional(compressed.heads, srv + glue, 0, len(srv))


@pytest.mark.parametrize("room", [10_000, 100])
def test_a_cut_of_written_out_names_keeps_the_same_records(room: int) -> None:
    lines = [SHORT, LONG, LATER, GLUE_A, GLUE_B]
    key, answer = _written_out(lines)
    assert b"\xc0" not in answer.body  # not one pointer
    form = truncate.srv_cuts(key, answer, truncate.Rotation()).form(0, room, 12 + len(key))
    assert form is not None
    reply = decode(b"\x00\x00" + form[0][0] + key + form[1])
    kept = sorted(" ".join(line.split()[i] for i in (0, 3, 4, 5, 6, 7) if i < len(line.split()))
                  for line in reply.answer + reply.additional)
    if room == 100:  # the first record and its glue only
        assert sorted(k.lower() for k in kept) == sorted([f"{Q} srv 0 1 80 a.{T}",
                                                          f"a.{T} a 10.0.0.1"])
    else:
        assert sorted(k.lower() for k in kept) == sorted(k.lower() for k in _kept(lines, room))
        assert len(kept) == 5


# -- reading an SRV answer: counts, repeated targets, no glue section, no decoding ----------------

def _fitting(lines: list[str], room: int) -> int:
    """How many of the SRV records ``lines``, in turn, fit in ``room`` bytes."""
    used = count = 0
    for line in lines:
        used += _srv_size(line)
        if used > room:
            break
        count += 1
    return count


def test_an_srv_answer_of_more_than_255_records_is_read_whole() -> None:
    """ANCOUNT is two bytes: 300 records (0x012C) are 300, not 44 (its low byte)."""
    lines = [f"{Q} 5 IN SRV 0 1 80 t{i}.{T}" for i in range(300)]
    room = 4000
    assert 44 < _fitting(lines, room) < 300
    assert len(_kept(lines, room)) == _fitting(lines, room)


def test_a_target_named_twice_takes_its_glue_once() -> None:
    """Two records (two ports) of one target: both kept, its address once."""
    lines = [SHORT, f"{Q} 5 IN SRV 0 1 81 a.{T}", GLUE_A]
    assert [k.lower() for k in _kept(lines, 10_000)] == [
        f"{Q} srv 0 1 80 a.{T}", f"{Q} srv 0 1 81 a.{T}", f"a.{T} a 10.0.0.1"]


def test_an_srv_answer_without_a_glue_section() -> None:
    """A plain Answer (``glue_at`` -1: no additional records) is all answer records."""
    key, answer = _zone_answer([SHORT, LONG, LATER])
    plain = wire.Answer(answer.heads, answer.body, 0)
    assert plain.glue_at == -1
    form = truncate.srv_cuts(key, plain, truncate.Rotation()).form(
        0, _srv_size(SHORT) + _srv_size(LONG), 12 + len(key))
    assert form is not None
    reply = decode(b"\x00\x00" + form[0][0] + key + form[1])
    assert [line.split()[-1].lower() for line in reply.answer] == [f"a.{T}",
                                                                   f"{'b' * 40}.{T}"]
    assert reply.additional == []


class _Counting:
    """The wire module as truncate sees it, counting the name walks it asks for."""

    def __init__(self) -> None:
        self.walks: list[str] = []

    def __getattr__(self, name: str) -> object:
        found = getattr(wire, name)
        if name not in ("skip_name", "read_name"):
            return found

        def counted(*args: object) -> object:
            self.walks.append(name)
            return found(*args)
        return counted


@pytest.mark.parametrize("qname", [BIG, f"_http._tcp.{BIG}"])
def test_our_own_srv_answers_are_cut_without_walking_a_name(
        qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's SRV answers have the usual shapes (owners C0 0C, glue owners pointing
    at their targets, before and after offset 256): cutting one reads no name, as
    SrvCuts says (reading costs about as much as building the answer)."""
    handler = fresh()
    full = ask(handler, query(qname, "SRV", edns=0), tcp=True)
    assert full.additional and len(full.wire) > 512
    counting = _Counting()
    monkeypatch.setattr(truncate, "wire", counting)
    for payload in (512, 1100, DEFAULT_UDP_CAP):
        reply = ask(handler, query(qname, "SRV", edns=0, payload=payload))
        check_cut(reply, full, payload)
    assert counting.walks == []


def test_address_cuts_of_no_address_keep_nothing() -> None:
    """Never asked by the zone (one record needs no cut), but total: no record, no form."""
    head = b"\xc0\x0c" + wire.RR_HEAD.pack(wire.A, 1, 5, 4)
    cuts = truncate.address_cuts(head, [], None, [], 0, truncate.Rotation(), truncate.A_BIT)
    assert all(cuts.form(index, 10_000, 40) is None for index in range(truncate.ROTATIONS))


def test_the_additional_section_goes_first_to_the_byte() -> None:
    """RFC 2181 9: an SRV answer whose records fit but not with their targets' addresses
    is sent without them and without TC. The least payload that gets no TC is exactly
    the size of that answer (the records fill it to the byte), one byte less is TC, and
    the addresses come back only where everything fits."""
    name = f"mid.prod.{Z}"
    handler = Handler(build_cache(
        [service_import("mid", type_="Headless", ports=HTTP)],
        [endpoint_slice("mid-a", "mid", cluster="east", ports=HTTP,
                        endpoints=[endpoint(f"10.5.0.{i + 1}") for i in range(10)])]).zone,
        DEFAULT_UDP_CAP)
    full = ask(handler, query(name, "SRV", edns=0, qid=5), tcp=True)
    assert len(full.answer) == 10 and len(full.additional) == 10
    replies = {payload: ask(handler, query(name, "SRV", edns=0, payload=payload, qid=5))
               for payload in range(512, len(full.wire) + 1)}
    least = min(p for p, reply in replies.items() if not reply.has(dns.flags.TC))
    assert 512 < least < len(full.wire)
    alone = replies[least]
    assert len(alone.wire) == least
    assert (alone.answer, alone.additional) == (full.answer, [])
    assert replies[least - 1].has(dns.flags.TC)
    assert all(not reply.has(dns.flags.TC) and reply.additional == []
               for p, reply in replies.items() if least <= p < len(full.wire))
    assert replies[len(full.wire)].wire == full.wire


def test_no_form_when_not_even_one_record_fits() -> None:
    """None (the handler then answers TC without records), not a form of no record."""
    key, answer = _zone_answer([LONG, SHORT])
    cuts = truncate.srv_cuts(key, answer, truncate.Rotation())
    assert cuts.form(0, _srv_size(LONG) - 1, 12 + len(key)) is None
    form = cuts.form(0, _srv_size(LONG), 12 + len(key))
    assert form is not None
    # an authoritative response, truncated: QR, AA and TC in every header variant
    flags = wire.QR | wire.AA | wire.TC
    assert all(int.from_bytes(head[:2]) & ~(wire.RD | wire.CD) == flags for head in form[0])


# (what, zone-file records, the records kept in plenty of room)
GLUED = [
    ("a target named again, then another", [SHORT, f"{Q} 5 IN SRV 0 1 81 a.{T}", LONG,
                                            GLUE_A, GLUE_B],
     [f"{Q} SRV 0 1 80 a.{T}", f"{Q} SRV 0 1 81 a.{T}", f"{Q} SRV 1 1 80 {'b' * 40}.{T}",
      f"a.{T} A 10.0.0.1", f"{'b' * 40}.{T} A 10.0.0.2"]),
    ("a target without an address, then one with", [SHORT, LONG, GLUE_B],
     [f"{Q} SRV 0 1 80 a.{T}", f"{Q} SRV 1 1 80 {'b' * 40}.{T}",
      f"{'b' * 40}.{T} A 10.0.0.2"]),
]


@pytest.mark.parametrize(("what", "lines", "kept"), GLUED, ids=[g[0] for g in GLUED])
def test_every_kept_target_gets_its_glue(what: str, lines: list[str], kept: list[str]) -> None:
    assert [k.lower() for k in _kept(lines, 10_000)] == [k.lower() for k in kept]


def test_the_glue_of_a_target_too_big_is_left_and_the_next_kept() -> None:
    """a's two addresses (32 bytes) do not fit in what is left, b's one (16) does."""
    lines = [SHORT, LONG, GLUE_A, f"a.{T} 5 IN A 10.0.0.9", GLUE_B]
    room = _srv_size(SHORT) + _srv_size(LONG) + A_16 + A_16 - 1
    assert [k.lower() for k in _kept(lines, room)] == [
        f"{Q} srv 0 1 80 a.{T}", f"{Q} srv 1 1 80 {'b' * 40}.{T}",
        f"{'b' * 40}.{T} a 10.0.0.2"]


@pytest.mark.parametrize(("shift", "glued"), [(-1, 1), (0, 1), (1, 0)])
def test_glue_points_at_a_target_up_to_offset_0x3fff(shift: int, glued: int) -> None:
    """A compression pointer has 14 bits: a target starting at 0x3FFF gets its glue (an
    owner C0 FF FF... that is FF FF), one starting at 0x4000 cannot be pointed at."""
    key, answer = _zone_answer([SHORT, GLUE_A])
    cuts = truncate.srv_cuts(key, answer, truncate.Rotation())
    cuts.form(0, 10_000, 12 + len(key))  # read: target_at known
    base = 0x3FFF - cuts.target_at[0] + shift
    form = cuts.form(0, 10_000, base)
    assert form is not None
    assert int.from_bytes(form[0][0][8:10]) == glued  # ARCOUNT (the heads have no ID)
    if glued:
        assert form[1].endswith(wire.U16.pack(0xC000 | (0x3FFF + shift))
                                + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + bytes([10, 0, 0, 1]))


def test_srv_rotations_start_a_quarter_further_into_a_priority() -> None:
    """Eight records of one priority: rotation r starts at record 2r, then wraps."""
    lines = [f"{Q} 5 IN SRV 0 1 80 t{i}.{T}" for i in range(8)]
    key, answer = _zone_answer(lines)
    cuts = truncate.srv_cuts(key, answer, truncate.Rotation())
    for index in range(truncate.ROTATIONS):
        form = cuts.form(index, 10_000, 12 + len(key))
        assert form is not None
        reply = decode(b"\x00\x00" + form[0][0] + key + form[1])
        order = [rd.target.to_text() for rrset in reply.msg.answer for rd in rrset]
        assert order == [f"t{(2 * index + i) % 8}.{T}" for i in range(8)]


def test_the_forms_headers_stay_out_of_the_shared_table() -> None:
    """Their counts follow the client's size: wire.heads' table (kept for good) must not
    grow with every size asked; the forms' memory bounds them instead."""
    key, answer = _zone_answer([SHORT, LONG, LATER, GLUE_A, GLUE_B])
    cuts = truncate.srv_cuts(key, answer, truncate.Rotation())
    cuts.form(0, 10_000, 12 + len(key))
    before = len(wire._heads_cache)
    for room in range(_srv_size(SHORT), 400):
        assert cuts.form(0, room, 12 + len(key)) is not None
    assert len(wire._heads_cache) == before


@pytest.mark.parametrize("cleared", [False, True])
def test_the_form_memory_holds_its_budget_to_the_byte(cleared: bool) -> None:
    """Forms costing exactly the budget are all kept, fresh or after clear(); a byte more
    and it starts over with the newest."""
    form: truncate.Form = ((b"",), b"x" * 100)
    cost = len(b"key") + 100 + truncate.FORM_OVERHEAD
    memory = truncate.FormMemory(budget=3 * cost)
    if cleared:
        memory.put((b"key", 9, 9), form)
        memory.clear()
        assert (len(memory), memory.used) == (0, 0)
    for room in range(3):
        memory.put((b"key", 0, room), form)
    assert (len(memory), memory.used) == (3, 3 * cost)
    memory.put((b"key", 0, 3), form)
    assert list(memory) == [(b"key", 0, 3)] and memory.used == cost


def test_two_records_can_need_a_cut() -> None:
    assert truncate.needs_cuts(33, 10_000, 2)


@pytest.mark.parametrize("more", [0, 1])
def test_an_answer_of_512_bytes_to_the_byte_goes_whole_and_is_remembered(more: int) -> None:
    """Without EDNS, on the fast path: A records that fill 512 bytes to the byte are the
    whole answer, TC clear, remembered for the next identical query; one record more is
    cut (TC) and never remembered (its cut rotates)."""
    name = "four"  # its question leaves a room of whole A records (16 bytes each)
    qname = f"{name}.prod.{Z}"
    data = query(qname, "A")
    room = 512 - len(data)
    assert room % 16 == 0
    ips = [f"10.7.{i // 250}.{i % 250 + 1}" for i in range(room // 16 + more)]
    handler = Handler(build_cache(
        [service_import(name, type_="Headless", ports=HTTP)],
        [endpoint_slice(f"{name}-a", name, cluster="east", ports=HTTP,
                        endpoints=[endpoint(ip) for ip in ips])]).zone, DEFAULT_UDP_CAP)
    remembered = len(handler.responses)
    tail = handler.fast(data[2:], False)
    assert tail is not None
    reply = decode(data[:2] + tail)
    if more:
        assert reply.has(dns.flags.TC) and len(reply.answer) == room // 16
        assert len(handler.responses) == remembered
    else:
        assert len(data[:2] + tail) == 512 and not reply.has(dns.flags.TC)
        assert sorted(addresses(reply)) == sorted(ips)
        assert len(handler.responses) == remembered + 1
