"""Transport behaviour over real sockets: TCP connection reuse and
pipelining, idle TCP timeout, truncation and EDNS size limits (dig),
malformed packets (raw sockets; dig cannot send those)."""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Callable

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdatatype
import pytest

from .csdns_testlib import (
    OBJECTS_DIR,
    ZONE,
    Dig,
    DigResult,
    ServerProcess,
    Target,
    a_records,
    aaaa_records,
    check,
    encode_name,
    family_of,
    make_header,
    parse_header,
    question_bytes,
    svc,
    tcp_frame,
    tcp_read_message,
    udp_exchange,
)

HELLO = svc("hello")
BIG = svc("big", "bulk")
BIG_A = a_records(BIG, [f"10.8.0.{i}" for i in range(1, 61)])
BIG_AAAA = aaaa_records(BIG, [f"fd00:8::{i:x}" for i in range(1, 61)])


def assert_alive(dig: Dig) -> None:
    check(dig(HELLO, "A"), answer=a_records(HELLO, ["10.42.0.10"]))
    check(dig(HELLO, "A", "+tcp"), answer=a_records(HELLO, ["10.42.0.10"]))


def connect(target: Target, timeout: float = 5.0) -> socket.socket:
    s = socket.socket(family_of(target.host), socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((target.host, target.port))
    return s


def query(name: str, rtype: str, ident: int) -> dns.message.Message:
    q = dns.message.make_query(name, rtype, use_edns=False)
    q.id = ident
    q.flags &= ~dns.flags.RD
    return q


def addresses(msg: dns.message.Message) -> list[str]:
    return sorted(rd.to_text() for rrset in msg.answer for rd in rrset)


# ---------------------------------------------------------------- TCP


def test_tcp_several_queries_on_one_connection(target: Target) -> None:
    cases = [
        (HELLO, "A", dns.rcode.NOERROR, ["10.42.0.10"]),
        (HELLO, "AAAA", dns.rcode.NOERROR, ["fd00:42::10"]),
        (svc("nosuch"), "A", dns.rcode.NXDOMAIN, []),
        (
            svc("db"),
            "A",
            dns.rcode.NOERROR,
            ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2", "10.2.0.4"],
        ),
    ]
    with connect(target) as s:
        for i, (name, rtype, rcode, addrs) in enumerate(cases):
            ident = 0x4000 + i
            s.sendall(tcp_frame(query(name, rtype, ident).to_wire()))
            resp = dns.message.from_wire(tcp_read_message(s))
            assert resp.id == ident
            assert resp.rcode() == rcode, resp
            assert addresses(resp) == sorted(addrs), resp


def test_tcp_pipelined_queries_answered_and_matched_by_id(target: Target) -> None:
    cases = {
        0x1111: (HELLO, "A", dns.rcode.NOERROR, ["10.42.0.10"]),
        0x2222: (
            svc("db"),
            "A",
            dns.rcode.NOERROR,
            ["10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2", "10.2.0.4"],
        ),
        0x3333: (svc("nosuch"), "A", dns.rcode.NXDOMAIN, []),
    }
    payload = b"".join(tcp_frame(query(n, t, i).to_wire()) for i, (n, t, _, _) in cases.items())
    with connect(target) as s:
        s.sendall(payload)  # all three at once, before reading anything
        got = {}
        for _ in cases:
            resp = dns.message.from_wire(tcp_read_message(s))
            got[resp.id] = resp
    assert sorted(got) == sorted(cases), f"answer ids {sorted(got)}"
    for ident, (name, _t, rcode, addrs) in cases.items():
        resp = got[ident]
        assert resp.question[0].name.to_text() == name
        assert resp.rcode() == rcode, resp
        assert addresses(resp) == sorted(addrs), resp


def test_tcp_query_arriving_in_small_pieces(target: Target) -> None:
    framed = tcp_frame(query(HELLO, "A", 0x5151).to_wire())
    with connect(target) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in (framed[:1], framed[1:2], framed[2:10], framed[10:]):
            s.sendall(piece)
            time.sleep(0.15)
        resp = dns.message.from_wire(tcp_read_message(s))
    assert resp.id == 0x5151 and addresses(resp) == ["10.42.0.10"], resp


@pytest.mark.own_server
def test_tcp_idle_connection_closed_after_timeout(
    start_server: Callable[..., ServerProcess],
) -> None:
    srv = start_server(OBJECTS_DIR, "--tcp-idle-timeout", "1")
    tgt = Target(srv.host, srv.port, srv)

    def wait_closed(s: socket.socket) -> float:
        start = time.monotonic()
        s.settimeout(10)
        try:
            data = s.recv(1)
        except ConnectionResetError:
            data = b""
        except TimeoutError:
            pytest.fail("idle TCP connection still open after 10 s with --tcp-idle-timeout 1")
        assert data == b"", f"unexpected data {data!r} on an idle connection"
        return time.monotonic() - start

    # a connection that never sends anything
    with connect(tgt) as s:
        elapsed = wait_closed(s)
    assert 0.5 <= elapsed <= 5.0, f"closed after {elapsed:.2f}s, timeout 1 s"

    # a connection that sent one query: answered, then closed once idle
    with connect(tgt) as s:
        s.sendall(tcp_frame(query(HELLO, "A", 0x6161).to_wire()))
        resp = dns.message.from_wire(tcp_read_message(s))
        assert resp.id == 0x6161 and addresses(resp) == ["10.42.0.10"]
        # a prompt second query on the same connection is still served
        s.sendall(tcp_frame(query(HELLO, "AAAA", 0x6262).to_wire()))
        resp = dns.message.from_wire(tcp_read_message(s))
        assert resp.id == 0x6262 and addresses(resp) == ["fd00:42::10"]
        elapsed = wait_closed(s)
    assert 0.5 <= elapsed <= 5.0, f"closed {elapsed:.2f}s after the last answer, timeout 1 s"

    # the server still accepts new connections
    with connect(tgt) as s:
        s.sendall(tcp_frame(query(HELLO, "A", 0x6363).to_wire()))
        assert dns.message.from_wire(tcp_read_message(s)).id == 0x6363


# ---------------------------------------------------------------- truncation / EDNS size


def check_truncated(res: DigResult, limit: int, rtype: str) -> None:
    assert res.responded, res.describe()
    assert res.rcode == "NOERROR", res.describe()
    assert "tc" in res.flags, f"TC not set\n{res.describe()}"
    assert res.transport == "UDP", res.describe()
    assert res.question == [f"{BIG} IN {rtype}"], f"question not kept\n{res.describe()}"
    assert res.msg_size is not None and res.msg_size <= limit, (
        f"UDP answer of {res.msg_size} bytes over the {limit}-byte limit\n{res.describe()}"
    )
    full = BIG_A if rtype == "A" else BIG_AAAA
    assert set(res.answer) <= set(full), res.describe()


def test_udp_without_edns_truncated_at_512(dig: Dig) -> None:
    res = dig(BIG, "A", "+noedns", "+ignore")
    check_truncated(res, 512, "A")
    assert res.opt is None, res.describe()


def test_tcp_without_edns_full_answer(dig: Dig) -> None:
    res = dig(BIG, "A", "+noedns", "+tcp")
    check(res, answer=BIG_A)
    assert "tc" not in res.flags, res.describe()


def test_udp_edns_512_honoured(dig: Dig) -> None:
    res = dig(BIG, "A", "+bufsize=512", "+ignore")
    check_truncated(res, 512, "A")
    assert res.opt is not None, res.describe()


def test_udp_edns_4096_a_fits_under_1232_cap(dig: Dig) -> None:
    """60 A records (~1 KB) fit the 1232-byte cap: a full answer, or TC."""
    res = dig(BIG, "A", "+bufsize=4096", "+ignore")
    assert res.responded and res.msg_size is not None and res.msg_size <= 1232, res.describe()
    assert res.transport == "UDP", res.describe()
    assert res.opt is not None and res.udp_size == 1232, res.describe()
    if "tc" in res.flags:
        check_truncated(res, 1232, "A")
    else:
        check(res, answer=BIG_A)


def test_udp_edns_4096_capped_at_1232(dig: Dig) -> None:
    """60 AAAA records (~1.7 KB) fit 4096 but not the 1232 cap: TC."""
    res = dig(BIG, "AAAA", "+bufsize=4096", "+ignore")
    check_truncated(res, 1232, "AAAA")
    assert res.opt is not None, (
        "a truncated answer to an EDNS query keeps its OPT\n" + res.describe()
    )


@pytest.mark.parametrize(
    "opts",
    [("+bufsize=4096", "+tcp"), ("+noedns", "+tcp"), ("+bufsize=4096",)],
    ids=["tcp-edns", "tcp-noedns", "udp-then-tcp-retry"],
)
def test_large_aaaa_full_over_tcp(dig: Dig, opts: tuple[str, ...]) -> None:
    # without +ignore dig retries over TCP after TC, as a resolver does
    res = dig(BIG, "AAAA", *opts)
    check(res, answer=BIG_AAAA)
    assert "tc" not in res.flags and res.transport == "TCP", res.describe()


def test_size_limits_do_not_leak_between_queries(dig: Dig) -> None:
    """The same question asked with different transports and sizes gets the
    answer that fits each one (no answer reused across limits)."""
    for _ in range(2):
        check_truncated(dig(BIG, "AAAA", "+noedns", "+ignore"), 512, "AAAA")
        full = dig(BIG, "AAAA", "+tcp")
        check(full, answer=BIG_AAAA)
        check_truncated(dig(BIG, "AAAA", "+bufsize=4096", "+ignore"), 1232, "AAAA")
        check_truncated(dig(BIG, "A", "+bufsize=512", "+ignore"), 512, "A")
        res = dig(BIG, "A", "+noedns", "+tcp")
        check(res, answer=BIG_A)
        assert res.opt is None, res.describe()


def test_truncated_srv_keeps_question(dig: Dig) -> None:
    res = dig(BIG, "SRV", "+noedns", "+ignore")
    assert res.responded and "tc" in res.flags, res.describe()
    assert res.question == [f"{BIG} IN SRV"], res.describe()
    assert res.msg_size is not None and res.msg_size <= 512, res.describe()
    full = dig(BIG, "SRV", "+tcp")
    check(full)
    assert len(full.answer) == 120, full.describe()


# ---------------------------------------------------------------- malformed packets

ID = 0xBEEF


def valid_question() -> bytes:
    return question_bytes(HELLO)


MALFORMED = {
    # header claims one question; the "question" is pseudo-random junk that
    # starts with a 63-byte label but ends after 3 bytes
    "random-junk": make_header(ID) + bytes([0x3F, 0x8A, 0x11, 0xFE]),
    "header-only-qdcount-1": make_header(ID),
    "qdcount-2": make_header(ID, qd=2) + valid_question() + question_bytes(svc("db")),
    "compression-pointer-loop": make_header(ID) + b"\xc0\x0c" + struct.pack("!HH", 1, 1),
    "compression-pointer-out-of-range": make_header(ID) + b"\xc0\xff" + struct.pack("!HH", 1, 1),
    "two-pointer-loop": make_header(ID) + b"\x01a\xc0\x10\xc0\x0c" + struct.pack("!HH", 1, 1),
    "reserved-label-type": make_header(ID)
    + b"\x41"
    + b"a" * 10
    + b"\x00"
    + struct.pack("!HH", 1, 1),
    "name-over-255-octets": make_header(ID)
    + b"".join(b"\x3f" + b"a" * 63 for _ in range(5))
    + b"\x00"
    + struct.pack("!HH", 1, 1),
    "question-without-type": make_header(ID) + encode_name(HELLO) + b"\x00",
}


@pytest.mark.parametrize("packet", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_query_formerr_over_udp(target: Target, dig: Dig, packet: bytes) -> None:
    reply = udp_exchange(target.host, target.port, packet, timeout=2.0)
    assert reply is not None, "no answer to a malformed query whose header is readable"
    assert len(reply) >= 12, reply
    h = parse_header(reply)
    assert h.id == ID and h.qr, h
    assert h.rcode == dns.rcode.FORMERR, (
        f"rcode {dns.rcode.to_text(dns.rcode.Rcode(h.rcode))}, expected FORMERR"
    )
    assert h.ancount == 0, h
    assert_alive(dig)


def test_random_queries_always_get_a_reply(target: Target, dig: Dig) -> None:
    """Seeded random junk after a readable query header (QR=0, opcode QUERY,
    one question): the server replies to each with the same ID, FORMERR when
    it cannot parse the rest, and keeps serving."""
    rng = random.Random(20261202)
    formerr = 0
    for n in range(60):
        ident = 0x8000 + n
        junk = rng.randbytes(rng.randint(0, 90))
        counts = struct.pack("!HHH", *(rng.choice([0, 0, 1, 7]) for _ in range(3)))
        packet = (
            struct.pack("!HHH", ident, rng.getrandbits(16) & 0x07FF & ~0x0400, 1) + counts + junk
        )
        reply = udp_exchange(target.host, target.port, packet, timeout=2.0)
        assert reply is not None and len(reply) >= 12, f"no reply to {packet.hex()}"
        h = parse_header(reply)
        assert h.id == ident and h.qr, f"{h} for {packet.hex()}"
        assert h.rcode in (
            dns.rcode.FORMERR,
            dns.rcode.REFUSED,
            dns.rcode.NOERROR,
            dns.rcode.NXDOMAIN,
            dns.rcode.NOTIMP,  # e.g. a meta query type (TKEY, MAILB...) parsed from junk
        ), f"rcode {h.rcode} for {packet.hex()}"
        formerr += h.rcode == dns.rcode.FORMERR
    assert formerr > 0
    assert_alive(dig)


@pytest.mark.parametrize(
    "packet",
    [b"", b"\x12", b"\x12\x34\x01", make_header(ID)[:11]],
    ids=["empty", "1-byte", "3-bytes", "11-bytes"],
)
def test_shorter_than_header_dropped(target: Target, dig: Dig, packet: bytes) -> None:
    reply = udp_exchange(target.host, target.port, packet, timeout=1.0)
    assert reply is None, f"answer {reply!r} to a {len(packet)}-byte datagram"
    assert_alive(dig)


@pytest.mark.parametrize(
    ("opcode", "qtype"),
    [
        (dns.opcode.IQUERY, "A"),
        (dns.opcode.STATUS, "A"),
        (dns.opcode.NOTIFY, "SOA"),
        (dns.opcode.UPDATE, "SOA"),
        (3, "A"),
        (6, "A"),
        (15, "A"),
    ],
    ids=["IQUERY", "STATUS", "NOTIFY", "UPDATE", "opcode-3", "opcode-6", "opcode-15"],
)
def test_opcode_other_than_query_notimp(target: Target, dig: Dig, opcode: int, qtype: str) -> None:
    name = f"{ZONE}." if qtype == "SOA" else HELLO
    packet = make_header(0x7A7A, opcode=opcode) + question_bytes(
        name, dns.rdatatype.from_text(qtype)
    )
    reply = udp_exchange(target.host, target.port, packet, timeout=2.0)
    assert reply is not None, f"no answer to opcode {opcode}"
    h = parse_header(reply)
    assert h.id == 0x7A7A and h.qr, h
    assert h.rcode == dns.rcode.NOTIMP, (
        f"rcode {dns.rcode.to_text(dns.rcode.Rcode(h.rcode))}, expected NOTIMP"
    )
    assert h.ancount == 0, h
    assert_alive(dig)


def test_malformed_query_formerr_over_tcp(target: Target, dig: Dig) -> None:
    with connect(target) as s:
        s.sendall(tcp_frame(make_header(ID)))  # qdcount 1, no question
        try:
            reply = tcp_read_message(s)
        except (ConnectionError, TimeoutError) as exc:
            pytest.fail(f"no FORMERR over TCP: {exc}")
    h = parse_header(reply)
    assert h.id == ID and h.qr and h.rcode == dns.rcode.FORMERR, h
    assert_alive(dig)


def test_tcp_short_frame_then_server_still_serves(target: Target, dig: Dig) -> None:
    with connect(target) as s:
        s.sendall(tcp_frame(b"\x01\x02\x03"))
        s.settimeout(2.0)
        try:
            data = s.recv(512)
        except (TimeoutError, ConnectionResetError):
            data = b""
        # nothing to answer: either silence or a closed connection
        assert data == b"", f"answer {data!r} to a 3-byte message"
    assert_alive(dig)


def test_udp_query_with_id_and_question_echoed(target: Target) -> None:
    wire = query(HELLO, "A", 0x0102).to_wire()
    reply = udp_exchange(target.host, target.port, wire)
    assert reply is not None
    resp = dns.message.from_wire(reply)
    assert resp.id == 0x0102 and resp.flags & dns.flags.QR and resp.flags & dns.flags.AA
    assert resp.question[0].name.to_text() == HELLO and addresses(resp) == ["10.42.0.10"]
    assert not resp.flags & dns.flags.RD, "RD echoed as clear"
