"""The query log's reading of the bytes (process/querylog.py), at each boundary: the
question's name and type however short the query, the rcode and first EDE of responses
shaped as other servers shape them (options before the EDE, a root-owned record before
the OPT), which header makes an answer a success, the line's fields and the token
bucket at its float slack. Written for the survivors of ``scripts/mutate
clusterset_dns/process/querylog.py``."""

from __future__ import annotations

import logging
import math
import struct

import dns.edns
import dns.message
import dns.rrset
import pytest

from clusterset_dns.process import querylog
from clusterset_dns.process.querylog import QueryLog, RateLimit, name_text, rcode_and_ede
from clusterset_dns.serving.stats import Stats

from .fakeclock import FakeClock
from .helpers import query

WEB = "web.prod.svc.clusterset.local."


@pytest.mark.parametrize(("data", "offset", "expected"), [
    (b"", 0, None),  # nothing at the offset
    (b"\x00", 0, (".", 1)),  # the root
    (b"\x03web\x04prod\x00", 0, ("web.prod.", 10)),
    (b"..\x03web\x00", 2, ("web.", 7)),
    (b"\x03a.b\x00", 0, ("a\\.b.", 5)),  # a dot inside a label
    (b"\x05a.b.c\x00", 0, ("a\\.b\\.c.", 7)),  # two
    (b'\x05a\\"#b\x00', 0, ('a\\\\\\"#b.', 7)),  # \ and " escaped, # not
    (b"\x02a\x7f\x00", 0, ("a\\127.", 4)),
    (b"\x3f" + b"a" * 63 + b"\x00", 0, ("a" * 63 + ".", 65)),  # the longest label
    (b"\x40" + b"a" * 64 + b"\x00", 0, None),  # one byte over
    (b"\x03web", 0, None),  # no root
    (b"\x03we", 0, None),  # the label runs off the end
])
def test_name_text(data: bytes, offset: int, expected: tuple[str, int] | None) -> None:
    assert name_text(data, offset) == expected


def response(rcode: int = 0, options: list[dns.edns.Option] | None = None,
             authority: str | None = None) -> bytes:
    msg = dns.message.make_response(dns.message.make_query(WEB, "A"))
    msg.set_rcode(rcode)
    if options is not None:
        msg.use_edns(0, options=options)
    if authority is not None:
        msg.authority.append(dns.rrset.from_text(".", 300, "IN", "SOA", authority))
    return msg.to_wire()


def generic(code: int, data: bytes) -> dns.edns.Option:
    return dns.edns.GenericOption(code, data)


EDE = dns.edns.EDEOption


@pytest.mark.parametrize(("data", "expected"), [
    (response(3), (3, None)),  # no OPT
    (response(0, []), (0, None)),  # an OPT with no option
    (response(2, [EDE(14)]), (2, 14)),  # an INFO-CODE and no text: 2 bytes, the last
    (response(2, [EDE(14, "not ready")]), (2, 14)),
    (response(0, [EDE(0x123)]), (0, 0x123)),  # a code with a high byte
    (response(0, [generic(10, b"\0" * 8), EDE(21)]), (0, 21)),  # after a cookie
    # after an option longer than 255 bytes (its length's high byte counts)
    (response(0, [generic(10, b"\0" * 8), generic(65001, b"\xff" * 300), EDE(21)]), (0, 21)),
    (response(0, [generic(0x010F, b"\0\x07"), EDE(21)]), (0, 21)),  # a code ending in 15
    (response(0, [generic(15, b"\x05")]), (0, None)),  # an EDE too short for a code
    (response(0, [generic(15, b"")]), (0, None)),
    (response(0, [EDE(21)], authority="a. b. 1 2 3 4 5"), (0, 21)),  # a root-owned SOA first
])
def test_rcode_and_ede(data: bytes, expected: tuple[int, int | None]) -> None:
    assert rcode_and_ede(data) == expected


def test_rcode_text() -> None:
    assert [querylog.rcode_text(r) for r in (0, 3, 11, 16)] == [
        "NOERROR", "NXDOMAIN", "RCODE11", "BADVERS"]


def header(flags: int, rcode: int, an: int, qd: int = 0) -> bytes:
    """A bare response header: QR set, the second flags byte's TC etc. in ``flags``."""
    return struct.pack("!HBBHHHH", 7, 0x80 | flags, rcode, qd, an, 0, 0)


def lines(log: QueryLog, caplog: pytest.LogCaptureFixture, data: bytes, answer: bytes,
          tcp: bool = False, peer: tuple[object, ...] = ("127.0.0.1", 5353),
          started: int = 0) -> list[logging.LogRecord]:
    caplog.clear()
    log(data, answer, tcp, peer, started)
    return [r for r in caplog.records if r.name == "clusterset_dns.query"]


@pytest.mark.parametrize(("answer", "kind"), [
    (header(0, 0, 256), "success"),  # 256 answers: only ANCOUNT's high byte is set
    (header(0, 0, 1), "success"),
    (header(0x02, 0, 0), "success"),  # truncated, nothing in it: the client comes back
    (header(0, 0, 0), "denial"),  # NODATA
    (header(0, 3, 1), "denial"),  # NXDOMAIN with a record (a CNAME to a missing name)
    (header(0, 0x10 | 3, 1), "denial"),  # CD set
    (header(0, 2, 1), "error"),
    (header(0x02, 5, 0), "error"),
])
@pytest.mark.parametrize("classes", ["all", "denial", "error"])
def test_the_header_decides_the_class(answer: bytes, kind: str, classes: str,
                                      caplog: pytest.LogCaptureFixture) -> None:
    log = QueryLog(classes, 1000, Stats(), FakeClock())
    expected = 1 if classes in ("all", kind) else 0
    assert len(lines(log, caplog, query(WEB), answer)) == expected


def q_header(qd: int = 1) -> bytes:
    return struct.pack("!HHHHHH", 7, 0x0100, qd, 0, 0, 0)


@pytest.mark.parametrize(("data", "name", "qtype"), [
    (b"\0\x07\x01\x00\x00", "-", "-"),  # shorter than a header
    (q_header(), "-", "-"),  # a header alone
    (q_header(0) + b"\x00\x00\x01\x00\x01", "-", "-"),  # no question
    (q_header() + b"\x00", ".", "-"),  # a name and no type
    (q_header() + b"\x00\x00", ".", "-"),  # half a type
    (q_header() + b"\x00\x00\x01", ".", "A"),  # a type and no class
    (q_header() + b"\x00\x01\x01\x00\x01", ".", "TYPE257"),
    (q_header() + b"\x00\x00\x00\x00\x01", ".", "TYPE0"),
    (q_header() + b"\x00\x00\x21\x00\x01", ".", "SRV"),
])
def test_the_question_however_short(data: bytes, name: str, qtype: str,
                                    caplog: pytest.LogCaptureFixture) -> None:
    log = QueryLog("all", 1000, Stats(), FakeClock())
    [record] = lines(log, caplog, data, header(0, 1, 0))
    fields = record.query  # type: ignore[attr-defined]
    assert (fields["name"], fields["type"], fields["rcode"]) == (name, qtype, "FORMERR")


def test_a_udp_line_in_full(caplog: pytest.LogCaptureFixture) -> None:
    """IPv4 over UDP, no EDE; the duration from ``started`` on the transports'
    stopwatch: a quarter second on the fake clock is 0.25 exactly."""
    clock = FakeClock()
    log = QueryLog("all", 1000, Stats(), clock)
    started = clock.perf_counter_ns()
    clock.advance(0.25)
    answer = header(0, 0, 1)
    [record] = lines(log, caplog, query(WEB), answer, started=started)
    assert record.getMessage() == (f"127.0.0.1:5353 udp {WEB} A NOERROR ede=- size=12 "
                                   "duration=0.250000s")
    assert record.query == {  # type: ignore[attr-defined]
        "client": "127.0.0.1", "port": 5353, "transport": "udp", "name": WEB, "type": "A",
        "rcode": "NOERROR", "ede": None, "size": 12, "duration": 0.25}


def test_the_burst_is_at_least_one_line() -> None:
    """Half a line a second: a burst of one (not of half a line, which would never
    fill), the next a line's worth (2 s) later."""
    clock = FakeClock()
    limit = RateLimit(0.5, 0.5, clock)
    assert [limit.take(), limit.take()] == [True, False]
    clock.advance(1.999)
    assert limit.take() is False
    clock.advance(2.0)
    assert [limit.take(), limit.take()] == [True, False]


def test_the_token_slack_boundary() -> None:
    """A token is whole at 1 - 1e-9 (a rate of 3/s adds up to 0.999...), not below."""
    whole = 1.0 - querylog._EPSILON
    for at, taken in ((whole, True), (math.nextafter(whole, 0.0), False)):
        clock = FakeClock()
        clock.now = 0.0
        limit = RateLimit(1.0, 1.0, clock)
        assert limit.take() is True
        clock.now = at
        assert limit.take() is taken
