"""dnstap's bytes at their boundaries (process/dnstapwire.py): the encoder's varint table
at its last entry and past it (queries and messages of 2**14 bytes), the table built by
the first encoder, the first second of the clock, and the control frames Frame Streams
refuses, each with its error. Written for the survivors of ``scripts/mutate
clusterset_dns/process/dnstapwire.py``."""

from __future__ import annotations

import struct

import pytest

from clusterset_dns.process import dnstapwire as wire

PRE = wire.preamble(b"id", b"v")
HEAD = wire.peer_head(True, "192.0.2.1", 53)


def expected(query_ns: int, query: bytes, response_ns: int, response: bytes | None) -> bytes:
    """The frames written field by field (the reference the folded encoder must match)."""
    out = wire.data_frame(wire.dnstap(PRE, wire.query_message(HEAD, query_ns, query)))
    if response is not None:
        out += wire.data_frame(wire.dnstap(PRE, wire.response_message(HEAD, query_ns,
                                                                      response_ns, response)))
    return out


def framed(encoder: wire.Encoder, query_ns: int, query: bytes, response_ns: int,
           response: bytes | None) -> bytes:
    out: list[bytes] = []
    encoder.frames(out, wire.Encoder.heads(HEAD), query_ns, query, response_ns, response)
    return b"".join(out)


# The message's length crosses the table's end a few dozen bytes before the query's does.
SIZES = sorted({*range(wire._TABLE - 48, wire._TABLE - 20), wire._TABLE - 1, wire._TABLE,
                wire._TABLE + 1, 3 * wire._TABLE})


@pytest.mark.parametrize("size", SIZES)
def test_lengths_around_the_end_of_the_varint_table(size: int) -> None:
    encoder = wire.Encoder(PRE)
    query = bytes(size)
    assert framed(encoder, 5_000_000_000, query, 5_000_000_001, query) == expected(
        5_000_000_000, query, 5_000_000_001, query)
    assert framed(encoder, 5_000_000_000, query, 0, None) == expected(
        5_000_000_000, query, 0, None)


def test_the_first_encoder_builds_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "_VARINTS", [])
    encoder = wire.Encoder(PRE)
    assert len(wire._VARINTS) == wire._TABLE
    assert wire._VARINTS[0] == b"\0" and wire._VARINTS[300] == wire.varint(300)
    assert wire._VARINTS[-1] == wire.varint(wire._TABLE - 1)
    assert framed(encoder, 1, b"q" * 300, 2, b"r" * 300) == expected(1, b"q" * 300, 2,
                                                                     b"r" * 300)
    wire.Encoder(PRE)  # built once
    assert len(wire._VARINTS) == wire._TABLE


@pytest.mark.parametrize("seconds", [0, 1, 2])
def test_the_first_seconds_of_the_clock(seconds: int) -> None:
    """A new encoder's first answer, at each of the first seconds (its cached second
    must not pass for one it never wrote)."""
    query_ns = seconds * 1_000_000_000 + 5
    assert framed(wire.Encoder(PRE), query_ns, b"q", query_ns + 1, b"r") == expected(
        query_ns, b"q", query_ns + 1, b"r")


U32 = struct.Struct("!I").pack


@pytest.mark.parametrize(("body", "kind", "types"), [
    (U32(wire.READY), wire.READY, []),
    (U32(wire.READY) + U32(1) + U32(0), wire.READY, [b""]),  # a field's head, the last 8 bytes
    (U32(wire.READY) + U32(2) + U32(1) + b"x" + U32(1) + U32(1) + b"y", wire.READY, [b"y"]),
    (U32(wire.ACCEPT) + U32(1) + U32(3) + b"abc", wire.ACCEPT, [b"abc"]),
])
def test_parse_control(body: bytes, kind: int, types: list[bytes]) -> None:
    assert wire.parse_control(body) == (kind, types)


@pytest.mark.parametrize(("body", "error"), [
    (b"\0\0\0", "control frame of 3 bytes"),
    (U32(wire.READY) + U32(1) + b"\0\0\0", "truncated control frame field"),
    (U32(wire.READY) + U32(1) + U32(4) + b"abc", "control frame field longer than the frame"),
    (U32(wire.READY) + U32(1) + U32(2**32 - 1), "control frame field longer than the frame"),
])
def test_parse_control_refuses(body: bytes, error: str) -> None:
    with pytest.raises(wire.ProtocolError) as raised:
        wire.parse_control(body)
    assert str(raised.value) == error
