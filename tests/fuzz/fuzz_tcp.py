"""Coverage-guided fuzz of the TCP framing and back-pressure (server.TCPProtocol)
with the real handler, behind a fake transport whose peer reads when the input
says so.

The input is a script (see ``parse``): a stream of bytes the client sends
(seeded with real length-prefixed queries), cut into chunks, with "the peer reads
N bytes" steps in between. Checked for every input: what the peer finally receives is exactly the
framed answers to the complete messages of the stream, in order (a reference
framing done here, message by message); no data is read while the protocol asked
not to be; the answers waiting to be sent never exceed WRITE_HIGH + WRITE_CHUNK
+ one answer; nothing raises.

    python tests/fuzz/fuzz_tcp.py -runs=100000 CORPUS_DIR   # see docs/testing.md
"""

from __future__ import annotations

import asyncio
import sys

import atheris
from zone import build_handler, instrumented, seed_corpus, tcp_seeds

with instrumented():
    from clusterset_dns.serving import server

HANDLER = build_handler()
DNS = server.DNSServer(HANDLER.handle, [], 10.0, max_tcp_connections=4)  # type: ignore[attr-defined]
SMALL_HIGH = 1024
server.WRITE_CHUNK = 256  # likewise: the chunking is exercised with small answers
MAX_STREAM = 8 << 10
ANSWERS: dict[bytes, bytes | None] = {}  # the reference's memo (answers are pure)


class Transport(asyncio.Transport):
    """Buffers what is written; the peer drains it on request. Flow control as in
    asyncio (pause_writing above ``high``, resume_writing at ``high // 4``), but with
    ``high`` at most SMALL_HIGH."""

    def __init__(self, protocol: server.TCPProtocol) -> None:
        super().__init__()
        self.protocol = protocol
        self.pending = bytearray()
        self.delivered = bytearray()
        self.high = 64 << 10
        self.bound = 1 << 30  # set per input
        self.paused_writing = False
        self.reading = True
        self.closed = False

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        # Pause far earlier than asked, so that small (fast) inputs reach back-pressure.
        self.high = min(high if high is not None else self.high, SMALL_HIGH)

    def get_write_buffer_size(self) -> int:
        return len(self.pending)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "write after close"
        self.pending += data
        assert len(self.pending) <= self.bound, f"{len(self.pending)} bytes waiting to be sent"
        if not self.paused_writing and len(self.pending) > self.high:
            self.paused_writing = True
            self.protocol.pause_writing()

    def drain(self, count: int) -> None:
        self.delivered += self.pending[:count]
        del self.pending[:count]
        if self.paused_writing and len(self.pending) <= self.high // 4:
            self.paused_writing = False
            self.protocol.resume_writing()

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def reference(stream: bytes) -> tuple[bytes, int]:
    """The framed answers to every complete message of ``stream``, one at a time, and
    the size of the largest answer."""
    out, offset, largest = bytearray(), 0, 0
    while offset + 2 <= len(stream):
        length = int.from_bytes(stream[offset : offset + 2], "big")
        if offset + 2 + length > len(stream):
            break
        message = stream[offset + 2 : offset + 2 + length]
        if message not in ANSWERS:
            if len(ANSWERS) > 20_000:
                ANSWERS.clear()
            ANSWERS[message] = HANDLER.handle(message, True)  # type: ignore[attr-defined]
        response = ANSWERS[message]
        if response is not None:
            out += len(response).to_bytes(2, "big") + response
            largest = max(largest, len(response))
        offset += 2 + length
    return bytes(out), largest


def parse(data: bytes) -> tuple[list[tuple[bool, int]], bytes]:
    """Input layout: byte 0 = number of steps (n), byte 1 = repeat count of the
    stream, then n steps of 3 bytes (kind: low bit 1 = send, else the peer reads;
    a 16-bit size in units of 8 bytes), then the stream the client sends (repeated:
    real pipelining)."""
    if len(data) < 2:
        return [], b""
    steps, repeat = data[0] % 41, 1 + data[1]
    body = data[2:]
    script = [(bool(body[i] & 1), 8 * int.from_bytes(body[i + 1 : i + 3], "big"))
              for i in range(0, min(3 * steps, len(body) - 2), 3)]
    return script, (body[3 * len(script):] * repeat)[:MAX_STREAM]


def receive(protocol: server.TCPProtocol, data: bytes) -> int:
    """One read as a transport does it (into the protocol's buffer); bytes taken."""
    view = protocol.get_buffer(-1)
    count = min(len(view), len(data))
    view[:count] = data[:count]
    protocol.buffer_updated(count)
    return count


def settle(transport: Transport) -> None:
    """The peer reads until the protocol reads again (each drain lets it answer what
    it holds, which may pause it again)."""
    while transport.pending or not transport.reading:
        assert transport.pending, "not reading, and nothing left to send"
        transport.drain(1 << 30)


def check(data: bytes) -> None:
    script, stream = parse(data)
    expected, largest = reference(stream)
    protocol = server.TCPProtocol(DNS)
    transport = Transport(protocol)
    protocol.connection_made(transport)
    # the promise: the transport's high-water mark + one chunk + one framed answer
    transport.bound = transport.high + server.WRITE_CHUNK + 2 + largest
    sent = 0
    try:
        for send, size in script:
            if send and sent < len(stream):
                if not transport.reading:  # a real transport would not read: the peer waits
                    continue
                sent += receive(protocol, stream[sent : sent + size + 1])
            else:
                transport.drain(size)
        while sent < len(stream):  # the rest: the peer reads everything, then we send
            settle(transport)
            sent += receive(protocol, stream[sent : sent + (1 << 18)])
        settle(transport)
        assert transport.reading and not protocol.writing_paused
        assert bytes(transport.delivered) == expected, "answers differ from framing"
    finally:
        protocol.connection_lost(None)


async def fuzz() -> None:
    # TCPProtocol reads the running loop's clock; libFuzzer drives us from inside it.
    atheris.Fuzz()


def main() -> None:
    seed_corpus(sys.argv, tcp_seeds())
    atheris.Setup(sys.argv, check)
    asyncio.run(fuzz())


if __name__ == "__main__":
    main()
