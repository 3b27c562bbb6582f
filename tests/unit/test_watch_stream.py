"""The watch stream's line splitter (kube.Lines) and KubeClient.stream over it: every
event whole wherever the chunks cut the stream, and work linear in the stream's
length whatever the chunk sizes (counted by a buffer that adds up the bytes it
appends, searches, copies and moves: no timing). And what list pages and watch
events keep of each object (kube.lean): only the metadata the server reads."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any, SupportsIndex

import pytest

from clusterset_dns.sources import convert, kube, properties
from clusterset_dns.sources.kube import KubeClient, KubeError, Lines, decode_page
from clusterset_dns_testkit.objects import endpoint_slice


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


# -- what is kept of each object (kube.lean) --------------------------------------------------

MCS = {convert.SERVICE_NAME_LABEL: "web", convert.SOURCE_CLUSTER_LABEL: "east"}


def fat_slice(labels: int) -> dict[str, Any]:
    obj = endpoint_slice("web-east", "web", cluster="east",
                         endpoints=[{"addresses": ["10.0.0.1"], "targetRef": {
                             "kind": "Pod", "name": "p", "namespace": "prod", "uid": "u-p"}}])
    meta = obj["metadata"]
    meta.update(uid="u-1", resourceVersion="7", generation=3, creationTimestamp="2024-01-01",
                finalizers=["x"], ownerReferences=[{"kind": "Service", "name": "web",
                                                    "uid": "u-s"}],
                managedFields=[{"manager": "m", "fieldsV1": {"f:metadata": {}}}],
                annotations={convert.TRIGGER_TIME: "2024-01-01T00:00:00Z", "big": "x" * 1000})
    # a label map that looks like metadata by its keys: never mistaken for it
    meta["labels"] = {**meta["labels"], "uid": "u", "labels": "l", "name": "n",
                      **{f"l{i:05}": "" for i in range(labels)}}
    return obj


@pytest.mark.parametrize("limit", [1, 500], ids=["cut-while-decoded", "cut-after"])
def test_a_page_keeps_only_the_metadata_the_server_reads(limit: int) -> None:
    raw = json.dumps({"metadata": {"resourceVersion": "9", "continue": "c"},
                      "items": [fat_slice(6000)]}).encode()
    decoded = decode_page(raw, limit)
    assert decoded["metadata"] == {"resourceVersion": "9", "continue": "c"}
    (item,) = decoded["items"]
    assert item["metadata"] == {"name": "web-east", "namespace": "prod", "uid": "u-1",
                                "resourceVersion": "7", "labels": MCS, "annotations": {
                                    convert.TRIGGER_TIME: "2024-01-01T00:00:00Z"}}
    # the rest of the object as it was (targetRef has a uid, but no metadata to drop)
    assert item["endpoints"] == fat_slice(0)["endpoints"]
    assert convert.endpoint_slice(item) == convert.endpoint_slice(fat_slice(6000))
    # a Node's zone label is read too; an object without labels keeps none
    node = {"metadata": {"name": "n1", "uid": "u", "labels": {properties.ZONE_LABEL: "z1",
                                                               "other": "x"}}}
    bare = {"metadata": {"name": "x", "uid": "u", "managedFields": []}}
    (node_item, bare_item) = decode_page(json.dumps({"items": [node, bare]}).encode(),
                                         limit)["items"]
    assert node_item["metadata"]["labels"] == {properties.ZONE_LABEL: "z1"}
    assert bare_item == {"metadata": {"name": "x", "uid": "u"}}


def test_pages_of_large_objects_are_cut_while_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """From LEAN_ITEM_BYTES per object asked for, each object's metadata is cut as it
    is decoded (the hook sees every JSON object); one byte less, after the page."""
    calls: list[int] = []
    real = kube.lean

    def counted(obj: dict[str, Any]) -> dict[str, Any]:
        calls.append(1)
        return real(obj)

    monkeypatch.setattr(kube, "lean", counted)
    raw = json.dumps({"items": [fat_slice(6000)]}).encode()
    raw += b" " * (2 * kube.LEAN_ITEM_BYTES - len(raw))
    decode_page(raw, 2)
    assert len(calls) > 10  # every object of the page
    calls.clear()
    decode_page(raw[:-1], 2)
    assert len(calls) == 1  # the one item's metadata, after
    calls.clear()
    decode_page(raw, 0)  # never asked for (0 is no limit): cut after
    assert len(calls) == 1


def test_the_kept_labels_and_annotation_are_the_ones_convert_reads() -> None:
    assert set(kube.KEPT_LABELS) == {convert.SERVICE_NAME_LABEL, convert.SOURCE_CLUSTER_LABEL,
                                     properties.ZONE_LABEL}
    assert kube.KEPT_ANNOTATION == convert.TRIGGER_TIME


def test_list_pages_and_watch_events_are_lean_single_objects_whole() -> None:
    body = json.dumps({"items": [fat_slice(100)]}).encode()
    client = KubeClient(None)  # type: ignore[arg-type]

    class Body:
        def __init__(self, data: bytes) -> None:
            self.data = data

        async def read(self) -> bytes:
            return self.data

        def release(self) -> None:
            pass

    async def request(path: str, params: Any, timeout: Any) -> Body:
        return Body(body)

    client._request = request  # type: ignore[method-assign]
    sizes: list[int] = []
    page = asyncio.run(client.get("/apis/x", {"limit": 500}, sizes=sizes))
    assert page["items"][0]["metadata"]["labels"] == MCS and sizes == [len(body)]
    whole = asyncio.run(client.get("/apis/x/one"))  # a Lease to write back: every field
    assert len(whole["items"][0]["metadata"]["labels"]) == 105
    events, _ = stream_of([json.dumps({"type": "ADDED", "object": fat_slice(100)}).encode()
                           + b"\n"])
    assert events[0]["object"]["metadata"]["labels"] == MCS
