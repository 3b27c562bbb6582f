"""Reading a query the slow path answers: its questions, its OPT and its TSIG record
(RFC 8945), by walking the bytes (zone/wire.py's walkers), building no DNS objects.
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

from clusterset_dns.zone import wire
from clusterset_dns.zone.wire import RR_HEAD, skip_rr, walk_name

Edns = tuple[int, int, int]  # (UDP payload size, version, DO bit) of a query's OPT
TSIG = 250
BADKEY = 17
_TSIG_ERROR_TAIL = struct.Struct("!HHHH")  # MAC size 0, original ID, error, other length 0


class Signer(Protocol):
    """TSIG for queries that are not transfers (xfr.Transfers): RFC 8945 5.3."""

    room: int  # bytes the TSIG record takes in an answer

    def verify(self, query: bytes, peer: str | None) -> tuple[bytes | None, Any]:
        """(None, a context for sign) when the query's TSIG is good; else (the error
        answer, or DROP, None). ``peer`` None: over TCP."""

    def sign(self, response: bytes, context: Any) -> bytes:
        """The response with its TSIG record."""


def parse(data: bytes, questions: int, records: int, additional: int
           ) -> tuple[tuple[bytes, list[int]] | None, Edns | None, bool, int]:
    """(the first question's bytes and label offsets, the query's OPT, whether the
    whole message is well formed, where its TSIG record starts or -1). No
    compression in a question: there is nothing before it to point at. The OPT
    counts once found, even if what follows it is malformed, so that the FORMERR
    carries it. A TSIG record anywhere but last is malformed (RFC 8945 5.1)."""
    size = len(data)
    offset = 12
    first: tuple[bytes, list[int]] | None = None
    for _ in range(questions):
        walked = walk_name(data, offset)
        if walked is None or walked[1] + 4 > size:
            return first, None, False, -1
        if first is None:
            first = (data[offset : walked[1] + 4], walked[0])
        offset = walked[1] + 4
    edns: Edns | None = None
    tsig_at = -1
    last = records + additional - 1
    for index in range(records + additional):
        parsed = skip_rr(data, offset)
        if parsed is None:
            return first, edns, False, -1
        rtype, rclass, ttl, end, root_owner = parsed
        if rtype == wire.OPT:
            if index < records or edns is not None or not root_owner:
                return first, edns, False, -1
            edns = (rclass, (ttl >> 16) & 0xFF, (ttl >> 15) & 1)
        elif rtype == TSIG:
            if index != last or index < records:
                return first, edns, False, -1
            tsig_at = offset
        offset = end
    return first, edns, True, tsig_at


def badkey_record(data: bytes, tsig_at: int) -> bytes | None:
    """The query's TSIG record (at ``tsig_at``) as a BADKEY error's (RFC 8945 5.2.1):
    its key name and algorithm, no MAC; None when it cannot be read."""
    owner = walk_name(data, tsig_at)
    algorithm = walk_name(data, owner[1] + 10) if owner is not None else None
    if owner is None or algorithm is None or algorithm[1] + 10 > len(data):
        return None
    at = algorithm[1]
    mac_size = (data[at + 8] << 8) | data[at + 9]
    if at + 12 + mac_size > len(data):
        return None
    original_id = (data[at + 10 + mac_size] << 8) | data[at + 11 + mac_size]
    rdata = (data[owner[1] + 10 : at + 8]  # algorithm, time signed, fudge
             + _TSIG_ERROR_TAIL.pack(0, original_id, BADKEY, 0))
    return data[tsig_at : owner[1]] + RR_HEAD.pack(TSIG, 255, 0, len(rdata)) + rdata
