"""Coverage-guided fuzz of Handler.handle (atheris / libFuzzer).

Input: first byte's low bit = TCP, the rest is the packet. Checked for every
input: no exception escapes; an answer is sent unless the packet is shorter than
a header or is a response; an answer is a DNS response to that packet (same ID,
QR set), parses, fits its transport (65,535 bytes over TCP; 512, or the EDNS size
up to 1232, over UDP) and never counts as a swallowed error.

    python tests/fuzz/fuzz_handler.py -runs=100000 CORPUS_DIR   # see docs/testing.md
"""

from __future__ import annotations

import sys

import atheris
from zone import UDP_CAP, build_handler, handler_seeds, instrumented, seed_corpus

with instrumented():
    import dns.exception
    import dns.message

HANDLER = build_handler()


def check(data: bytes) -> None:
    if not data:
        return
    tcp, packet = bool(data[0] & 1), data[1:]
    stats = HANDLER.stats  # type: ignore[attr-defined]
    dropped = stats.dropped
    response = HANDLER.handle(packet, tcp)  # type: ignore[attr-defined]
    if len(packet) < 12 or packet[2] & 0x80:
        assert response is None, "a response or a runt was answered"
        return
    assert response is not None, "a query got no answer"
    assert stats.dropped == dropped, "the handler swallowed an exception"
    assert response[:2] == packet[:2], "ID not echoed"
    assert response[2] & 0x80, "QR not set"
    assert len(response) <= 65535
    if not tcp:
        limit = 512 if packet[10:12] == b"\0\0" else UDP_CAP  # no OPT: 512
        assert len(response) <= limit, f"UDP answer of {len(response)} bytes"
    if (response[2] >> 3) & 0xF:  # not QUERY (NOTIMP): dnspython parses UPDATE etc.
        return                    # by their own rules, so only the header is checked
    try:
        # keyring=False: parse a TSIG record without verifying it. A signed query with a
        # key we do not have gets NOTAUTH and a TSIG record with BADKEY and no MAC
        # (RFC 8945 5.2.1), which no keyring can verify.
        dns.message.from_wire(response, keyring=False)
    except dns.exception.DNSException as exc:
        raise AssertionError(f"unparsable answer {response!r}: {exc}") from exc


def main() -> None:
    seed_corpus(sys.argv, handler_seeds())
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
