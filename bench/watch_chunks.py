"""The watch stream's parsing cost by chunk size: the same events handed over in one
4 MiB chunk (what aiohttp gives after a stall) and in 64 KiB chunks, through
KubeClient.stream (kube.Lines) and, as the reference of the same run, through the
splitting it replaced (each event split off, the rest of the buffer kept as a copy).

    python bench/watch_chunks.py [--events 20000] [--size 200] [--rounds 3]

Prints the seconds per stream (best of the rounds) and the ratio 4 MiB / 64 KiB of each:
1.0 means the chunk size does not matter. Nothing is written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

# This checkout's clusterset_dns, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterset_dns.sources.kube import KubeClient, decode_event


class Response:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.content = self

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    def release(self) -> None:
        pass


def ours(chunks: list[bytes]) -> int:
    client = KubeClient(None)  # type: ignore[arg-type]

    async def request(path: str, params: Any, timeout: Any) -> Response:
        return Response(chunks)

    client._request = request  # type: ignore[method-assign]

    async def read() -> int:
        return sum([1 async for _ in client.stream("/apis/x", {})])

    return asyncio.run(read())


def replaced(chunks: list[bytes]) -> int:
    def events() -> Iterator[Any]:
        buffer = b""
        for chunk in chunks:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield decode_event(line)

    return sum(1 for _ in events())


def best(parse: Any, chunks: list[bytes], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        parse(chunks)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=200, help="bytes of padding per event")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    stream = b"".join(json.dumps({"type": "MODIFIED", "object": {
        "metadata": {"name": f"s{i}", "namespace": "prod", "resourceVersion": str(i)},
        "pad": "x" * args.size}}).encode() + b"\n" for i in range(args.events))
    big = [stream[i:i + (4 << 20)] for i in range(0, len(stream), 4 << 20)]
    small = [stream[i:i + 65536] for i in range(0, len(stream), 65536)]
    print(f"{args.events} events, {len(stream) / 2**20:.1f} MiB")
    for name, parse in (("ours", ours), ("replaced", replaced)):
        one, many = best(parse, big, args.rounds), best(parse, small, args.rounds)
        print(f"{name:9} 4 MiB chunks {one:.3f} s, 64 KiB chunks {many:.3f} s: "
              f"ratio {one / many:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
