"""dnstap.Tap.from_config (the identity and version each message carries, by default and
given; the queue's bound) and read_control's limits (a data frame where a control frame
belongs, a control frame of MAX_CONTROL bytes and one byte more). Written for the
survivors of scripts/mutate on process/dnstap.py."""

from __future__ import annotations

import asyncio
import socket

import pytest

from clusterset_dns import __version__
from clusterset_dns.base.config import Config, DnstapTarget
from clusterset_dns.process import dnstap
from clusterset_dns.process import dnstapwire as wire
from clusterset_dns.serving.stats import Stats

TARGET = DnstapTarget(path="/nowhere/tap.sock")


@pytest.mark.parametrize(("identity", "version", "preamble"), [
    (None, None, wire.preamble(socket.gethostname().encode(),
                               f"clusterset-dns {__version__}".encode())),
    ("ns-1", "v9", wire.preamble(b"ns-1", b"v9")),
    ("", "", wire.preamble(b"", b"")),  # given empty: no field, not the defaults
])
def test_from_config(identity: str | None, version: str | None, preamble: bytes) -> None:
    stats = Stats()
    config = Config(dnstap=TARGET, dnstap_identity=identity, dnstap_version=version,
                    dnstap_queue=7)
    tap = dnstap.Tap.from_config(config, stats)
    expected = wire.Encoder(preamble)
    out: list[bytes] = []
    tap.encoder.frames(out, wire.Encoder.heads(b""), 1, b"q", 2, b"r")
    again: list[bytes] = []
    expected.frames(again, wire.Encoder.heads(b""), 1, b"q", 2, b"r")
    assert b"".join(out) == b"".join(again)
    assert (tap.target, tap.capacity, tap.stats, tap.max_bytes) == (
        TARGET, 7, stats, dnstap.QUEUE_BYTES)


def control(body: bytes, escape: bytes = b"\0\0\0\0") -> bytes:
    return escape + len(body).to_bytes(4, "big") + body


def read(data: bytes) -> tuple[int, list[bytes]]:
    async def reading() -> tuple[int, list[bytes]]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await dnstap.read_control(reader)

    return asyncio.run(reading())


def test_a_control_frame_of_max_control_bytes_is_read() -> None:
    frame = wire.control_frame(wire.ACCEPT, wire.CONTENT_TYPE)[8:]
    padding = wire.MAX_CONTROL - len(frame)
    # a second content type fills it to the byte: field 1, its length, its bytes
    filler = b"\x00\x00\x00\x01" + (padding - 8).to_bytes(4, "big") + bytes(padding - 8)
    body = frame + filler
    assert len(body) == wire.MAX_CONTROL
    assert read(control(body)) == (wire.ACCEPT, [wire.CONTENT_TYPE, bytes(padding - 8)])


def test_a_control_frame_one_byte_longer_is_refused() -> None:
    refused = rf"^control frame of {wire.MAX_CONTROL + 1} bytes$"
    with pytest.raises(wire.ProtocolError, match=refused):
        read(control(bytes(wire.MAX_CONTROL + 1)))


@pytest.mark.parametrize("escape", [b"\0\0\0\1", b"\1\0\0\0"])
def test_a_data_frame_where_a_control_frame_belongs(escape: bytes) -> None:
    with pytest.raises(wire.ProtocolError,
                       match=r"^a data frame where a control frame was expected$"):
        read(control(wire.control_frame(wire.ACCEPT)[8:], escape))

