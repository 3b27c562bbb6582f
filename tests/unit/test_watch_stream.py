"""The watch stream's line splitter (kube.Lines) and KubeClient.stream over it: every
event whole wherever the chunks cut the stream, and work linear in the stream's
length whatever the chunk sizes (counted by a buffer that adds up the bytes it
appends, searches, copies and moves: no timing)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any, SupportsIndex

import pytest

from clusterset_dns.sources.kube import KubeClient, KubeError, Lines


class CountingBuffer(bytearray):
    """A bytearray that counts the bytes each operation Lines uses touches."""

    def __init__(self) -> None:
        super().__init__()
        self.work = 0

    def __iadd__(self, other: Any) -> CountingBuffer:
        self.work += len(other)
        super().__iadd__(other)
        return self

    def find(self, sub: Any, start: SupportsIndex | None = None, *rest: Any) -> int:
        begin = 0 if start is None else int(start)
        found = super().find(sub, begin, *rest)
        self.work += (found + 1 if found >= 0 else len(self)) - begin
        return found

    def __getitem__(self, index: Any) -> Any:
        result = super().__getitem__(index)
        if isinstance(index, slice):
            self.work += len(result)
        return result

    def __delitem__(self, index: Any) -> None:
        if isinstance(index, slice):
            self.work += len(self) - (index.stop if index.stop is not None else len(self))
        super().__delitem__(index)


def split(chunks: list[bytes], buffer: bytearray | None = None) -> list[bytes]:
    lines = Lines(buffer)
    return [bytes(line) for chunk in chunks for line in lines.feed(chunk)]


def event(i: int, size: int = 0) -> bytes:
    body = {"type": "MODIFIED", "object": {"metadata": {"name": f"s{i}",
                                                        "resourceVersion": str(i)},
                                           "pad": "x" * size}}
    return json.dumps(body).encode() + b"\n"


SMALL = event(1) + b"\n" + event(2) + b"  \r\n" + event(3)


def test_every_cut_of_a_small_stream_gives_the_same_lines() -> None:
    whole = split([SMALL])
    assert whole == SMALL.split(b"\n")[:-1]
    for cut in range(len(SMALL) + 1):
        assert split([SMALL[:cut], SMALL[cut:]]) == whole, cut
    for a, b in itertools.combinations(range(0, len(SMALL) + 1, 3), 2):
        assert split([SMALL[:a], SMALL[a:b], SMALL[b:]]) == whole, (a, b)
    assert split([SMALL[i:i + 1] for i in range(len(SMALL))]) == whole


def test_an_unfinished_line_is_never_given() -> None:
    assert split([SMALL + b'{"type": "ADD']) == split([SMALL])
    assert split([b"", b"abc"]) == []
    assert split([b"\n\n"]) == [b"", b""]


@pytest.mark.parametrize(("events", "size"), [(4096, 1000), (40_000, 60)],
                         ids=["4096x1KiB", "40000x100B"])
def test_a_4_mib_chunk_costs_work_linear_in_its_length(events: int, size: int) -> None:
    stream = b"".join(event(i, size) for i in range(events))
    assert len(stream) >= 4 << 20
    whole = CountingBuffer()
    lines = split([stream], whole)
    assert len(lines) == events
    # appended once, searched once, each line copied once: 3 bytes of work per byte
    # (keeping the rest per event was ~events/2 times the chunk)
    assert whole.work <= 3 * len(stream)
    small = CountingBuffer()
    assert split([stream[i:i + 65536] for i in range(0, len(stream), 65536)], small) == lines
    # and what is left of one line moved per chunk
    assert small.work <= 3 * len(stream) + (len(stream) // 65536 + 1) * len(event(0, size))


def test_one_large_event_in_small_chunks_is_searched_once() -> None:
    """A 4 MiB event in 100-byte chunks: the bytes already searched are not searched
    again with each chunk (``b"\\n" in buffer`` searched from the start)."""
    big = event(1, 4 << 20)
    buffer = CountingBuffer()
    assert split([big[i:i + 100] for i in range(0, len(big), 100)], buffer) == [big[:-1]]
    assert buffer.work <= 3 * len(big)


class FakeResponse:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.released = False
        self.content = self

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    def release(self) -> None:
        self.released = True


def stream_of(chunks: list[bytes]) -> tuple[list[Any], FakeResponse]:
    response = FakeResponse(chunks)
    client = KubeClient(None)  # type: ignore[arg-type]

    async def request(path: str, params: Any, timeout: Any) -> FakeResponse:
        return response

    client._request = request  # type: ignore[method-assign]

    async def read() -> list[Any]:
        return [e async for e in client.stream("/apis/x", {})]

    return asyncio.run(read()), response


def test_the_stream_yields_every_event_wherever_the_chunks_cut() -> None:
    expected = [json.loads(line) for line in SMALL.split(b"\n") if line.strip()]
    for cut in range(len(SMALL) + 1):
        events, response = stream_of([SMALL[:cut], SMALL[cut:]])
        assert events == expected, cut
        assert response.released


def test_bad_json_in_the_stream_is_a_kube_error() -> None:
    with pytest.raises(KubeError, match="bad JSON"):
        stream_of([event(1) + b"{not json\n"])
