"""transfers/tsig.py on its own (RFC 8945): the bytes a TSIG record takes, signed
messages chained to the query's MAC and to each other, the error record an answer
carries, and the checks made before the MAC. dnspython is the oracle; the handler's
paths are in test_xfr_limits.py."""

from __future__ import annotations

import base64
import struct
import time

import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.tsig
import pytest

from clusterset_dns.transfers import tsig
from clusterset_dns.zone import wire

SECRET = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
KEY = dns.tsig.Key("xfr-key", SECRET, dns.tsig.HMAC_SHA256)
ZONE = "clusterset.local."
# dnspython checks a signature's time against its own clock (within the fudge), so each
# test signs at the time it runs (set before it: the whole suite takes longer than the
# fudge, and a time read at import was 22 minutes old when this module's tests ran)
NOW = int(time.time())


@pytest.fixture(autouse=True)
def _now() -> None:
    global NOW
    NOW = int(time.time())


def signed_query(key: dns.tsig.Key, qtype: str = "AXFR") -> tuple[bytes, dns.message.Message]:
    """A query signed with ``key``, as sent and as the server reads it (its MAC known)."""
    query = dns.message.make_query(ZONE, qtype)
    query.use_tsig({key.name: key}, keyname=key.name)
    data = query.to_wire()
    return data, dns.message.from_wire(data, keyring={key.name: key})


def response_to(query: dns.message.Message, records: int = 0) -> bytes:
    """An unsigned answer to ``query`` with ``records`` A records: what sign() signs."""
    response = dns.message.make_response(dns.message.make_query(ZONE, "AXFR"))
    response.id = query.id
    for i in range(records):
        response.answer.append(dns.rrset.from_text(ZONE, 0, "IN", "A", f"10.0.0.{i + 1}"))
    return response.to_wire()


def read_record(data: bytes) -> tuple[dns.name.Name, int, int, int, dns.rdata.Rdata]:
    """(owner, type, class, TTL, rdata) of one record written out uncompressed."""
    owner, at = dns.name.from_wire(data, 0)
    rdtype, rdclass, ttl, rdlength = wire.RR_HEAD.unpack_from(data, at)
    at += wire.RR_HEAD.size
    assert at + rdlength == len(data)  # the record and nothing else
    return owner, rdtype, rdclass, ttl, dns.rdata.from_wire(rdclass, rdtype, data, at, rdlength)


# -- size: what the handler leaves room for ---------------------------------------------------

@pytest.mark.parametrize("name", ["k", "xfr-key", "Transfer.Key.EXAMPLE"])
@pytest.mark.parametrize("algorithm", [dns.tsig.HMAC_SHA256, dns.tsig.HMAC_SHA512])
def test_size_is_exactly_what_signing_adds(name: str, algorithm: dns.name.Name) -> None:
    """To the byte, for names of several lengths (and case: written lower case) and the
    hash whose MAC size is known (32) as well as the widest (64, the default)."""
    key = dns.tsig.Key(name, SECRET, algorithm)
    _, query = signed_query(key)
    message = response_to(query, 2)
    signed, _ = tsig.sign(message, key, query, None, NOW)
    assert len(signed) - len(message) == tsig.size(key)


def test_the_wire_name_is_lower_case_and_uncompressed() -> None:
    assert tsig.wire_name(dns.name.from_text("Xfr.KEY")) == b"\x03xfr\x03key\x00"


# -- sign: every message of a transfer, chained ---------------------------------------------------

def test_signed_messages_verify_chained_to_the_query_and_each_other() -> None:
    """dnspython verifies the first against the query's MAC and each next one against
    the one before (how a secondary reads a transfer); every record says who, when,
    with what fudge, for which query id, with no error."""
    _, query = signed_query(KEY)
    ring = {KEY.name: KEY}
    ctx = None
    verifier = None
    for count in (1, 3, 2):
        message = response_to(query, count)
        signed, ctx = tsig.sign(message, KEY, query, ctx, NOW + count)
        assert signed[:10] == message[:10] and signed[12:len(message)] == message[12:]
        reply = dns.message.from_wire(signed, keyring=ring, request_mac=query.mac,
                                      multi=True, tsig_ctx=verifier)
        verifier = reply.tsig_ctx
        assert reply.had_tsig and len(reply.answer[0]) == count
        assert len(reply.additional) == 0  # ARCOUNT counts the TSIG record, once
        assert struct.unpack_from("!H", signed, 10)[0] == 1
        record = reply.tsig[0]
        # the record as written (dnspython reads every TSIG record's TTL as 0)
        owner, rdtype, rdclass, ttl, _ = read_record(signed[len(message):])
        assert (owner, rdtype, rdclass, ttl) == (KEY.name, dns.rdatatype.TSIG,
                                                 dns.rdataclass.ANY, 0)
        assert (record.algorithm, record.time_signed, record.fudge, record.original_id,
                record.error, record.other) == (KEY.algorithm, NOW + count, tsig.FUDGE,
                                                query.id, 0, b"")
        assert len(record.mac) == 32
    assert tsig.FUDGE == 300  # RFC 8945 10: the recommended fudge


def test_a_second_message_is_not_chained_to_the_query_alone() -> None:
    """Signed with the context of the first, a second message verifies only in turn:
    read as if it were the first (against the query's MAC) it is a bad signature."""
    _, query = signed_query(KEY)
    ring = {KEY.name: KEY}
    first, ctx = tsig.sign(response_to(query, 1), KEY, query, None, NOW)
    second, _ = tsig.sign(response_to(query, 2), KEY, query, ctx, NOW)
    with pytest.raises(dns.tsig.BadSignature):
        dns.message.from_wire(second, keyring=ring, request_mac=query.mac, multi=True)
    # and the first one alone is not signed like a chained one either
    alone, _ = tsig.sign(response_to(query, 1), KEY, query, None, NOW)
    assert alone == first


def test_the_first_message_is_chained_to_the_query_mac() -> None:
    _, query = signed_query(KEY)
    _, other = signed_query(KEY)  # another query: another MAC (another id)
    signed, _ = tsig.sign(response_to(query, 1), KEY, query, None, NOW)
    with pytest.raises(dns.tsig.BadSignature):
        dns.message.from_wire(signed, keyring={KEY.name: KEY}, request_mac=other.mac,
                              multi=True)


# -- error_record: the TSIG record of an error answer ------------------------------------------

@pytest.mark.parametrize("error", [tsig.BADSIG, tsig.BADKEY])
def test_the_error_record_repeats_the_request_without_a_mac(error: int) -> None:
    data, query = signed_query(KEY, "SOA")
    request = query.tsig[0]
    owner, rdtype, rdclass, ttl, rdata = read_record(tsig.error_record(data, error))
    assert (owner, rdtype, rdclass, ttl) == (KEY.name, dns.rdatatype.TSIG,
                                             dns.rdataclass.ANY, 0)
    assert (rdata.algorithm, rdata.time_signed, rdata.fudge, rdata.mac, rdata.original_id,
            rdata.error, rdata.other) == (request.algorithm, request.time_signed,
                                          request.fudge, b"", query.id, error, b"")


def test_no_error_record_without_a_readable_tsig() -> None:
    assert tsig.error_record(dns.message.make_query(ZONE, "SOA").to_wire(), tsig.BADKEY) == b""
    assert tsig.error_record(b"\x00\x01garbage", tsig.BADKEY) == b""


def test_the_errors_rfc8945_gives_each_failure() -> None:
    assert (tsig.BADSIG, tsig.BADKEY) == (16, 17)
    errors = dict(tsig.ERRORS)  # RFC 8945 5.2: BADSIG, or BADKEY for a key not ours
    assert errors == {dns.tsig.BadSignature: 16, dns.message.UnknownTSIGKey: 17,
                      dns.tsig.BadKey: 17, dns.tsig.BadAlgorithm: 17}
    assert set(tsig.FAILURES) == {dns.tsig.PeerError, dns.tsig.BadSignature,
                                  dns.message.UnknownTSIGKey, dns.tsig.BadTime,
                                  dns.tsig.BadKey, dns.tsig.BadAlgorithm}


# -- precheck: BADKEY and FORMERR before the MAC ---------------------------------------------------

def with_mac(algorithm: str, mac: bytes, name: str = "xfr-key") -> bytes:
    """A query with a TSIG record of our making (dnspython will not write a bad one)."""
    data = dns.message.make_query(ZONE, "SOA").to_wire()
    rdata = (dns.name.from_text(algorithm).to_wire() + NOW.to_bytes(6, "big")
             + struct.pack("!HH", 300, len(mac)) + mac + data[:2] + b"\x00\x00\x00\x00")
    record = (dns.name.from_text(name).to_wire()
              + struct.pack("!HHIH", dns.rdatatype.TSIG, dns.rdataclass.ANY, 0, len(rdata))
              + rdata)
    return data[:10] + (1).to_bytes(2, "big") + data[12:] + record


PRECHECKS = [
    # (what, the query, the result): the band is max(10, 32 // 2) = 16 to 32 bytes
    ("a MAC of 15 bytes", with_mac("hmac-sha256", b"x" * 15), dns.rcode.FORMERR),
    ("a MAC of 16 bytes", with_mac("hmac-sha256", b"x" * 16), None),
    ("a MAC of 32 bytes", with_mac("hmac-sha256", b"x" * 32), None),
    ("a MAC of 33 bytes", with_mac("hmac-sha256", b"x" * 33), dns.rcode.FORMERR),
    ("another algorithm", with_mac("hmac-sha512", b"x" * 64), tsig.BADKEY),
    ("another key's name", with_mac("hmac-sha512", b"x" * 64, "other"), None),
    ("not signed", dns.message.make_query(ZONE, "SOA").to_wire(), None),
    ("not a message", b"\x00\x01garbage", None),
]


@pytest.mark.parametrize(("what", "data", "want"), PRECHECKS, ids=[p[0] for p in PRECHECKS])
def test_precheck(what: str, data: bytes, want: int | None) -> None:
    assert tsig.precheck(KEY, data) == want
    assert tsig.precheck(None, data) is None  # no key: nothing is checked here


def test_precheck_bounds_only_the_macs_of_a_known_size() -> None:
    """A key of a hash whose MAC size is not listed (sha512 here): no bound is checked,
    the MAC is left to dnspython."""
    key = dns.tsig.Key("xfr-key", SECRET, dns.tsig.HMAC_SHA512)
    for size in (1, 10, 64, 100):
        assert tsig.precheck(key, with_mac("hmac-sha512", b"x" * size)) is None
    assert tsig.precheck(key, with_mac("hmac-sha256", b"x" * 32)) == tsig.BADKEY


def test_precheck_leaves_a_good_signed_query_to_the_mac() -> None:
    data, _ = signed_query(KEY, "SOA")
    assert tsig.precheck(KEY, data) is None
