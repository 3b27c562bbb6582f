"""The handler's TSIG-signed queries that are not transfers, byte for byte: BADKEY
(NOTAUTH) without a key, FORMERR for a TSIG record it cannot read, TC for a signed UDP
query whose sender is unknown, and what it hands the signer (a stand-in at the
query.Signer seam: what it is asked to verify and sign) and the room it keeps for the
signature. Expected bytes are written out here with struct, not by the handler's code."""

from __future__ import annotations

import struct
from typing import Any

import dns.message
import dns.name
import pytest

from clusterset_dns.serving import stats as counters
from clusterset_dns.serving.handler import Handler
from clusterset_dns.serving.stats import Stats

from .fakeclock import FakeClock
from .helpers import build_cache

ZONE = "clusterset.local."
QID = b"\xbe\xef"
CAP = 1232
QR, AA, TC, RD = 0x8000, 0x0400, 0x0200, 0x0100
NOTAUTH, FORMERR = 9, 1


def wire_name(text: str) -> bytes:
    found = dns.name.from_text(text).to_wire()
    assert found is not None
    return found


ALGORITHM = wire_name("hmac-sha256")
KEY_NAME = wire_name("xfr-key")
TIME_FUDGE = b"\x00\x00\x65\x00\x00\x00\x01\x2c"  # time signed (6 bytes), fudge 300


def unsigned(qtype: str = "SOA", edns: bool = False, do: bool = False, rd: bool = True,
             name: str = ZONE) -> bytes:
    msg = dns.message.make_query(name, qtype, use_edns=0 if edns else False,
                                 want_dnssec=do, payload=4096)
    msg.flags = RD if rd else 0
    data = msg.to_wire()
    return QID + data[2:]


def question_of(data: bytes) -> bytes:
    end = data.index(b"\x00", 12) + 5  # no compression in a question
    return data[12:end]


def tsig_record(mac: bytes = b"x" * 32, original_id: bytes = QID) -> bytes:
    rdata = ALGORITHM + TIME_FUDGE + struct.pack("!H", len(mac)) + mac + original_id \
        + b"\x00\x00\x00\x00"
    return KEY_NAME + struct.pack("!HHIH", 250, 255, 0, len(rdata)) + rdata


def signed(data: bytes, record: bytes) -> bytes:
    arcount = struct.unpack_from("!H", data, 10)[0] + 1
    return data[:10] + struct.pack("!H", arcount) + data[12:] + record


def opt(do: bool) -> bytes:
    """Our OPT record: payload the handler's cap, version 0, DO as the query's."""
    return b"\x00\x00\x29" + struct.pack("!HBBH", CAP, 0, 0, 0x8000 if do else 0) + b"\x00\x00"


def head(flags: int, arcount: int) -> bytes:
    return QID + struct.pack("!HHHHH", flags, 1, 0, 0, arcount)


def counted(stats: Stats) -> dict[tuple[str, str, int | None, int], int]:
    return {counters.slot_of(i): n for i, n in enumerate(stats.requests) if n}


# One clock for every cache built here: the SOA's serial is the time it was built, so
# answers from two caches built a second apart would differ in it.
CLOCK = FakeClock()


def handler_without_key() -> Handler:
    return Handler(build_cache(clock=CLOCK.time).zone, CAP)


BADKEY_RDATA = ALGORITHM + TIME_FUDGE + b"\x00\x00" + QID + b"\x00\x11\x00\x00"
BADKEY_RECORD = KEY_NAME + struct.pack("!HHIH", 250, 255, 0, len(BADKEY_RDATA)) + BADKEY_RDATA


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
@pytest.mark.parametrize(("edns", "do", "rd"), [(False, False, True), (True, False, True),
                                                (True, True, False)],
                         ids=["plain", "edns", "edns-do-nord"])
def test_without_a_key_a_signed_query_gets_notauth_badkey(tcp: bool, edns: bool, do: bool,
                                                          rd: bool) -> None:
    handler = handler_without_key()
    query = unsigned(edns=edns, do=do, rd=rd)
    response = handler.handle(signed(query, tsig_record()), tcp, lambda: "127.0.0.1")
    extra = opt(do) if edns else b""
    assert response == (head(QR | (RD if rd else 0) | NOTAUTH, 1 + (1 if edns else 0))
                        + question_of(query) + extra + BADKEY_RECORD)
    assert counted(handler.stats) == {("SOA", "tcp" if tcp else "udp", None, NOTAUTH): 1}
    assert handler.stats.truncated == 0 and handler.stats.dropped == 0


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
@pytest.mark.parametrize(("edns", "do"), [(False, False), (True, True), (True, False)])
def test_a_tsig_record_that_cannot_be_read_gets_formerr(tcp: bool, edns: bool,
                                                        do: bool) -> None:
    handler = handler_without_key()
    query = unsigned("A", edns=edns, do=do, name="x.svc." + ZONE)
    # well formed as a record (its rdata within the message), but the rdata is only an
    # algorithm's root name: no time, fudge or MAC to read
    unreadable = KEY_NAME + struct.pack("!HHIH", 250, 255, 0, 1) + b"\x00"
    response = handler.handle(signed(query, unreadable), tcp, lambda: "127.0.0.1")
    extra = opt(do) if edns else b""
    assert response == (head(QR | RD | FORMERR, 1 if edns else 0) + question_of(query)
                        + extra)
    assert counted(handler.stats) == {("A", "tcp" if tcp else "udp", None, FORMERR): 1}


class Signer:
    """A stand-in query.Signer: records what it is given, answers as told."""

    def __init__(self, room: int, error: bytes | None = None) -> None:
        self.room = room
        self.error = error
        self.verified: list[tuple[bytes, str | None]] = []
        self.signed: list[tuple[bytes, Any]] = []

    def verify(self, query: bytes, peer: str | None) -> tuple[bytes | None, Any]:
        self.verified.append((query, peer))
        return (self.error, None) if self.error is not None else (None, "context")

    def sign(self, response: bytes, context: Any) -> bytes:
        self.signed.append((response, context))
        return response + b"<signed>"


def keyed(room: int = 0, error: bytes | None = None) -> tuple[Handler, Signer]:
    signer = Signer(room, error)
    return Handler(build_cache(clock=CLOCK.time).zone, CAP, signer=signer), signer


@pytest.mark.parametrize("edns", [False, True])
def test_a_signed_udp_query_without_its_sender_gets_tc_and_is_not_verified(edns: bool) -> None:
    handler, signer = keyed()
    query = unsigned(edns=edns, do=True) if edns else unsigned()
    response = handler.handle(signed(query, tsig_record()), False, None)
    extra = opt(True) if edns else b""
    assert response == (head(QR | AA | TC | RD, 1 if edns else 0) + question_of(query) + extra)
    assert signer.verified == [] and handler.stats.truncated == 1


@pytest.mark.parametrize(("tcp", "peer", "seen"), [
    (True, lambda: "127.0.0.9", None),  # over TCP no sender is given (no rate limit)
    (True, None, None),
    (False, lambda: "127.0.0.9", "127.0.0.9"),
])
def test_the_signer_verifies_the_whole_query_and_signs_the_unsigned_answer(
        tcp: bool, peer: Any, seen: str | None) -> None:
    handler, signer = keyed()
    query = unsigned(edns=True)
    data = signed(query, tsig_record())
    response = handler.handle(data, tcp, peer)
    assert signer.verified == [(data, seen)]
    plain = handler_without_key().handle(query, tcp)
    assert plain is not None
    assert signer.signed == [(plain, "context")] and response == plain + b"<signed>"


@pytest.mark.parametrize(("error", "expected"), [(b"", None), (b"refused", b"refused")])
def test_a_query_the_signer_rejects_gets_its_answer_or_nothing(error: bytes,
                                                               expected: bytes | None) -> None:
    handler, signer = keyed(error=error)
    data = signed(unsigned(), tsig_record())
    assert handler.handle(data, False, lambda: "127.0.0.1") == expected
    assert signer.signed == []


@pytest.mark.parametrize("edns", [False, True])
def test_the_room_for_the_signature_is_kept_to_the_byte(edns: bool) -> None:
    """A UDP answer has the client's limit (512 bytes without EDNS, our cap for a payload
    above it) less the signer's room: the SOA answer that fits them exactly is whole;
    with one byte more of room it is TC, with no record (the SOA has no smaller form)
    and with our OPT for an EDNS query."""
    query = unsigned(edns=edns)
    plain = handler_without_key().handle(query, False)
    assert plain is not None and not plain[2] & 0x02
    room = (CAP if edns else 512) - len(plain)  # the answer fills what is left exactly
    handler, _ = keyed(room)
    assert handler.handle(signed(query, tsig_record()), False, lambda: "127.0.0.1") == \
        plain + b"<signed>"
    handler, _ = keyed(room + 1)
    cut = handler.handle(signed(query, tsig_record()), False, lambda: "127.0.0.1")
    assert cut == (head(QR | AA | TC | RD, 1 if edns else 0) + question_of(query)
                   + (opt(False) if edns else b"") + b"<signed>")
    assert handler.stats.truncated == 1


def test_each_badkey_and_each_tc_is_counted_once_more() -> None:
    handler = handler_without_key()
    data = signed(unsigned(), tsig_record())
    for _ in range(3):
        handler.handle(data, False, lambda: "127.0.0.1")
    assert counted(handler.stats) == {("SOA", "udp", None, NOTAUTH): 3}
    keyed_handler, _ = keyed()
    for _ in range(3):
        keyed_handler.handle(data, False, None)
    assert keyed_handler.stats.truncated == 3
