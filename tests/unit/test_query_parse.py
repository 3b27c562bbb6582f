"""Reading a query without building DNS objects (serving/query.py), at each boundary: a
question that runs off the end, an OPT where it may not be (answer or authority, twice,
not at the root), its version and DO bit apart, a TSIG record anywhere but last; and a
BADKEY's TSIG record made from the query's, cut at every byte. Written for the survivors
of ``scripts/mutate clusterset_dns/serving/query.py``."""

from __future__ import annotations

import struct

import pytest

from clusterset_dns.serving import query
from clusterset_dns.zone.wire import RR_HEAD

QNAME = b"\x03web\x04prod\x00"
QUESTION = QNAME + b"\x00\x01\x00\x01"
ROOT_OPT = b"\x00" + RR_HEAD.pack(41, 1232, 0, 0)


def opt(ttl: int = 0, owner: bytes = b"\x00") -> bytes:
    return owner + RR_HEAD.pack(41, 1232, ttl, 0)


def a_record() -> bytes:
    return b"\xc0\x0c" + RR_HEAD.pack(1, 1, 60, 4) + b"\x0a\x00\x00\x01"


ALGORITHM = b"\x0bhmac-sha256\x00"


def tsig(mac: bytes, original_id: int, owner: bytes = b"\x03key\x00") -> bytes:
    rdata = (ALGORITHM + (1_700_000_000).to_bytes(6, "big") + struct.pack("!HH", 300, len(mac))
             + mac + struct.pack("!HHH", original_id, 0, 0))
    return owner + RR_HEAD.pack(250, 255, 0, len(rdata)) + rdata


def message(records: list[bytes], an: int = 0, ns: int = 0, question: bytes = QUESTION,
            qd: int = 1) -> bytes:
    ar = len(records) - an - ns
    return struct.pack("!HHHHHH", 7, 0x0100, qd, an, ns, ar) + question + b"".join(records)


FIRST = (QUESTION, [12, 16])


@pytest.mark.parametrize(("data", "records", "expected"), [
    (message([]), 0, (FIRST, None, True, -1)),
    (message([], question=QUESTION[:-1]), 0, (None, None, False, -1)),  # the class cut short
    (message([], question=QNAME + b"\x00\x01\x00"), 0, (None, None, False, -1)),
    (message([opt()]), 0, (FIRST, (1232, 0, 0), True, -1)),
    (message([opt(0x00018000)]), 0, (FIRST, (1232, 1, 1), True, -1)),  # version 1, DO
    (message([opt(0x00010000)]), 0, (FIRST, (1232, 1, 0), True, -1)),  # version 1 alone
    (message([opt(0x00008000)]), 0, (FIRST, (1232, 0, 1), True, -1)),  # DO alone
    (message([opt(0x7FFF)]), 0, (FIRST, (1232, 0, 0), True, -1)),  # the bits below DO
    (message([opt(), opt()]), 0, (FIRST, (1232, 0, 0), False, -1)),  # two OPTs
    (message([opt(owner=b"\x01a\x00")]), 0, (FIRST, None, False, -1)),  # not the root's
    (message([opt()], ns=1), 1, (FIRST, None, False, -1)),  # in the authority section
    (message([opt()], an=1), 1, (FIRST, None, False, -1)),  # in the answer section
    (message([opt(), a_record()[:-1]]), 0, (FIRST, (1232, 0, 0), False, -1)),  # cut after it
    (message([a_record()], an=1), 1, (FIRST, None, True, -1)),
    (message([tsig(b"m" * 32, 7)]), 0, (FIRST, None, True, len(message([])))),
    (message([opt(), tsig(b"m" * 32, 7)]), 0,
     (FIRST, (1232, 0, 0), True, len(message([opt()])))),
    (message([tsig(b"m" * 32, 7), opt()]), 0, (FIRST, None, False, -1)),  # not last
    (message([tsig(b"m" * 32, 7)], ns=1), 1, (FIRST, None, False, -1)),  # last, but authority
])
def test_parse(data: bytes, records: int, expected: tuple[object, ...]) -> None:
    _, _, qd, an, ns, ar = struct.unpack_from("!HHHHHH", data)
    assert records == an + ns
    assert query.parse(data, qd, an + ns, ar) == expected


@pytest.mark.parametrize("mac", [b"m" * 32, bytes(range(256)) + b"m" * 44])  # 32, 300 bytes
def test_a_badkey_record_at_every_cut(mac: bytes) -> None:
    """The query's key name and algorithm, time and fudge; no MAC; its original ID;
    error 17 (BADKEY); TTL 0, class ANY. None until the original ID is there."""
    head = message([])
    data = message([tsig(mac, 0xABCD)])
    tsig_at = len(head)
    whole = (b"\x03key\x00" + RR_HEAD.pack(250, 255, 0, len(ALGORITHM) + 8 + 8)
             + ALGORITHM + (1_700_000_000).to_bytes(6, "big") + struct.pack("!H", 300)
             + struct.pack("!HHHH", 0, 0xABCD, query.BADKEY, 0))
    needed = tsig_at + 5 + 10 + len(ALGORITHM) + 10 + len(mac) + 2  # to the original ID
    for cut in range(tsig_at, len(data) + 1):
        made = query.badkey_record(data[:cut], tsig_at)
        assert made == (whole if cut >= needed else None), cut
