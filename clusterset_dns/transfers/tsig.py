"""TSIG (RFC 8945) around dnspython: the checks it does not make, the error records
it does not write, and the signing of a transfer's messages, each chained to the last.
"""

from __future__ import annotations

from typing import Any

import dns.exception
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TSIG
import dns.tsig

from clusterset_dns.zone import wire

FUDGE = 300

# RFC 8945 5.2: the TSIG error a bad request gets, in an unsigned TSIG record (BADTIME
# wants a signed answer: it gets a plain NOTAUTH instead).
BADSIG, BADKEY = 16, 17
ERRORS: dict[type[Exception], int] = {dns.tsig.BadSignature: BADSIG,
                                            dns.message.UnknownTSIGKey: BADKEY,
                                            dns.tsig.BadKey: BADKEY,
                                            dns.tsig.BadAlgorithm: BADKEY}
FAILURES = (dns.tsig.PeerError, dns.tsig.BadSignature, dns.message.UnknownTSIGKey,
                  dns.tsig.BadTime, dns.tsig.BadKey, dns.tsig.BadAlgorithm)
DIGEST_SIZE = {dns.tsig.HMAC_SHA256: 32}


def error_record(message: bytes, error: int) -> bytes:
    """The request's TSIG record turned into the error answer's: same key name,
    algorithm and time, no MAC, ``error``; b"" when the request's cannot be found."""
    try:
        query = dns.message.from_wire(message, keyring=False)  # False: read, not verified
    except dns.exception.DNSException:
        return b""
    if query.tsig is None:
        return b""
    request = query.tsig[0]
    rdata = dns.rdtypes.ANY.TSIG.TSIG(dns.rdataclass.ANY, dns.rdatatype.TSIG,
                                      request.algorithm, request.time_signed, request.fudge,
                                      b"", request.original_id, error, b"").to_wire() or b""
    name = query.tsig.name.to_wire() or b""
    return name + wire.RR_HEAD.pack(dns.rdatatype.TSIG, dns.rdataclass.ANY, 0, len(rdata)) + rdata


def precheck(key: dns.tsig.Key | None, message: bytes) -> int | None:
    """RFC 8945 5.2.1 and 5.2.2.1, checked before the MAC (dnspython takes a known
    key name with another algorithm, or a MAC of the wrong size, for a bad MAC):
    BADKEY, FORMERR, or None when neither applies."""
    if key is None:
        return None
    try:
        query = dns.message.from_wire(message, keyring=False)  # read, not verified
    except dns.exception.DNSException:
        return None
    if query.tsig is None or query.tsig.name != key.name:
        return None
    rdata = query.tsig[0]
    if rdata.algorithm != key.algorithm:
        return BADKEY
    digest = DIGEST_SIZE.get(key.algorithm, 0)
    if digest and not max(10, digest // 2) <= len(rdata.mac) <= digest:
        return dns.rcode.FORMERR
    return None


def sign(message: bytes, key: dns.tsig.Key, query: dns.message.Message, ctx: Any,
         now: int) -> tuple[bytes, Any]:
    """RFC 8945 5.3.1: ``message`` signed at ``now`` (Unix seconds), its MAC chained to
    the previous one (dnspython's multi-message context ``ctx``) or, first, to the
    query's."""
    tsig = dns.rdtypes.ANY.TSIG.TSIG(dns.rdataclass.ANY, dns.rdatatype.TSIG, key.algorithm,
                                     0, FUDGE, b"", query.id, 0, b"")
    tsig, ctx = dns.tsig.sign(message, key, tsig, now, query.mac if ctx is None else None,
                              ctx, True)
    rdata = tsig.to_wire()
    record = (wire_name(key.name)
              + wire.RR_HEAD.pack(dns.rdatatype.TSIG, dns.rdataclass.ANY, 0, len(rdata))
              + rdata)
    arcount = wire.U16.unpack_from(message, 10)[0] + 1
    return message[:10] + arcount.to_bytes(2, "big") + message[12:] + record, ctx


def size(key: dns.tsig.Key) -> int:
    """The bytes of a TSIG record of ``key`` with a full MAC and no other data."""
    name = len(wire_name(key.name))
    algorithm = len(wire_name(key.algorithm))
    return name + 10 + algorithm + 6 + 2 + 2 + DIGEST_SIZE.get(key.algorithm, 64) + 6


def wire_name(name: dns.name.Name) -> bytes:
    return name.canonicalize().to_digestable()  # uncompressed wire form, lower case
