"""sources/liststream.py: a list response read item by item as its bytes arrive."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clusterset_dns.sources import liststream
from clusterset_dns.sources.liststream import (
    MAX_PENDING,
    RETRY_GROWTH,
    STREAM_BATCH,
    STREAM_BYTES,
    ListReader,
)

ITEMS = [
    {"metadata": {"name": "a", "namespace": "prod"}, "spec": {"ips": ["10.0.0.1"]}},
    {"metadata": {"name": "b"}, "text": 'brackets ]}[{ and "quotes", commas, \\ backslashes'},
    {"metadata": {"name": "é-ü-雪"}, "n": 12345, "f": -1.5e3, "t": True, "z": None},
    {},
]
MEMBERS = {"apiVersion": "v1", "kind": "ServiceImportList",
           "metadata": {"resourceVersion": "4711", "continue": "tok"}}


def body(items: Any = ITEMS, indent: int | None = None, **members: Any) -> bytes:
    """As the API server writes it: members around the items (in either order)."""
    document = {"apiVersion": "v1", "items": items, "kind": "ServiceImportList",
                "metadata": {"resourceVersion": "4711", "continue": "tok"}, **members}
    return json.dumps(document, indent=indent, ensure_ascii=False).encode()


def read(data: bytes, cuts: list[int]) -> tuple[list[Any], dict[str, Any], list[int]]:
    """Items, members, and how many items each feed gave, the data cut at ``cuts``."""
    reader, items, given = ListReader(), [], []
    start = 0
    for end in [*cuts, len(data)]:
        got = reader.feed(data[start:end])
        items += got
        given.append(len(got))
        start = end
    items += reader.close()
    return items, reader.members, given


def test_cut_at_every_byte_the_items_and_members_are_the_same() -> None:
    """Including inside a multi-byte character, a string's escape, a key, a number."""
    data = body(indent=1)
    for at in range(len(data) + 1):
        items, members, _ = read(data, [at])
        assert items == ITEMS and members == MEMBERS, at


@pytest.mark.parametrize("seed", range(20))
def test_cut_in_many_random_pieces(seed: int) -> None:
    data = body(items=ITEMS * 30)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(len(data)), 40))
    items, members, _ = read(data, cuts)
    assert items == ITEMS * 30 and members == MEMBERS


def test_members_before_the_items_and_a_number_at_a_cut() -> None:
    """A typed list (EndpointSliceList) puts metadata first; a number ending at a cut
    may go on in the next piece (12 then 345)."""
    data = b'{"kind":"L","count":12345,"metadata":{"resourceVersion":"9"},"items":[{"a":1}]}'
    at = data.index(b"345")
    items, members, _ = read(data, [at])
    assert items == [{"a": 1}]
    assert members == {"kind": "L", "count": 12345, "metadata": {"resourceVersion": "9"}}


@pytest.mark.parametrize(("items_text", "expected"), [
    (b"null", []), (b"[]", []), (b"[ ]", []), (b' [ {"a" : 1} , {} ] ', [{"a": 1}, {}])])
def test_empty_null_and_spaced_items(items_text: bytes, expected: list[Any]) -> None:
    data = b'{ "items" : ' + items_text + b' , "metadata" : {} }\n'
    for at in range(len(data) + 1):
        items, members, _ = read(data, [at])
        assert items == expected and members == {"metadata": {}}, at


def test_a_piece_that_ends_an_item_gives_it() -> None:
    """Streaming, not buffering: pieces cut at items' last bytes give one item each
    (none was tried unfinished, which would wait for RETRY_GROWTH more)."""
    data = body()
    ends = []
    start = data.index(b"[") + 1
    for item in ITEMS:
        text = json.dumps(item, ensure_ascii=False).encode()
        at = data.index(text, start) + len(text)
        ends.append(at)
        start = at
    _, _, given = read(data, ends)
    assert given == [1, 1, 1, 1, 0]


@pytest.mark.parametrize(("bad", "message"), [
    (b"[]", "'\\[' where one of '{' was due"), (b'"items"', "where one of '{' was due"),
    (b'{"items": [1]}', "an item is not an object"),
    (b'{"items": [{}, ]}', "list response: Expecting value"),
    (b'{"items": [{} {}]}', "'{' where one of ',]' was due"),
    (b'{"items": {}}', "'{' where one of '\\[' was due"),
    (b'{"items": X]}', "'X' where one of '\\[' was due"),
    (b'{"items": nul}', "items is neither an array nor null"),
    (b'{"items": nulls}', "'s' where one of ',}' was due"),
    (b'{"items": [{}],}', "list response: Expecting value"),
    (b'{"items": [{}] "kind": "L"}', "where one of ',}' was due"),
    (b'{"items": []} {}', "data after the end of the list response"),
    (b'{"items": []} x', "data after the end of the list response"),
    (b'{"items": []}X', "data after the end of the list response"),
    (b'{"items": []}\x0c', "data after the end of the list response"),
    (b"{1: 2}", "'1' where one of '\"}' was due"),
    (b'{"items": [{"a": 1}]', "the list response ends before its end"),
    (b'{"items": [{"a": 1}', "the list response ends before its end"),
    (b'{"items": [{"a": 1', "list response: Expecting ',' delimiter"),
    (b'{"items": [{"a": "x', "list response: Unterminated string starting at"),
    (b"", "the list response ends before its end"),
    (b"{", "the list response ends before its end"),
    (b'{"items": [{}]}\xff', "invalid start byte"),
    (b'{"kind": "\xc3"}', "invalid continuation byte"),
    (b'{"kind": "\xc3', "unexpected end of data"),
    (b'{"items": [], 7: 1}', "a member name is not a string"),
    (b'{"items": [], "kind": [1, 2}', "list response: Expecting ',' delimiter"),
])
def test_a_malformed_or_short_response_is_an_error(bad: bytes, message: str) -> None:
    """Cut at every byte: the same error, whichever call finds it."""
    for at in range(len(bad) + 1):
        reader = ListReader()
        with pytest.raises(ValueError, match=f"{message}$"):  # either call may find it
            reader.feed(bad[:at])
            reader.feed(bad[at:])
            reader.close()


def test_every_prefix_of_a_response_is_short() -> None:
    data = body()
    for end in range(len(data)):
        reader = ListReader()
        with pytest.raises(ValueError):
            reader.feed(data[:end])
            reader.close()


def test_spaces_after_the_end_are_fine() -> None:
    items, members, _ = read(body() + b" \n\t\r", [])
    assert items == ITEMS and members == MEMBERS


def test_an_unfinished_value_is_given_up_after_max_pending_characters() -> None:
    """The memory a malformed (or endless) item can take is bounded: the characters of
    one unfinished value, MAX_PENDING at most."""
    reader = ListReader()
    reader.feed(b'{"items": [{"a": "')
    reader.feed(b"x" * (MAX_PENDING - len('{"a": "')))  # the value's text: MAX_PENDING
    with pytest.raises(ValueError, match=f"^list response: a value still unfinished after "
                                         f"{MAX_PENDING} characters, or a malformed one$"):
        reader.feed(b"x")


def test_a_value_finished_by_a_piece_past_max_pending_is_read() -> None:
    """Tried once more than MAX_PENDING characters are in, not refused unread: a value
    that one large piece finishes is whole (the bound is on what stays unfinished)."""
    reader = ListReader()
    reader.feed(b'{"items": [{"a": "')
    reader.feed(b"x" * (MAX_PENDING // 2))  # unfinished: waits for it to double
    rest = b"x" * (MAX_PENDING // 2) + b'"}, {"b": 1}], "metadata": {}}'
    got = reader.feed(rest)
    assert [sorted(item) for item in got] == [["a"], ["b"]] and len(got[0]["a"]) == MAX_PENDING
    assert reader.close() == []


def test_a_large_item_is_decoded_a_few_times_not_once_per_piece(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tries = []
    decode = liststream._DECODE

    def counted(text: str, at: int) -> tuple[Any, int]:
        if text.startswith('{"a": "x', at):
            tries.append(len(text) - at)
        return decode(text, at)

    monkeypatch.setattr(liststream, "_DECODE", counted)
    big = {"a": "x" * (1 << 20)}
    data = body(items=[big, {}])
    items, _, _ = read(data, list(range(4096, len(data), 4096)))  # 257 pieces
    assert items == [big, {}]
    # tried with what the first piece held of it, then once RETRY_GROWTH more was in,
    # then each time it had doubled, and at the end (close): 6 tries, not 257
    assert len(tries) == 6
    assert tries[1] >= tries[0] + RETRY_GROWTH
    assert all(later >= 2 * earlier for earlier, later in itertools.pairwise(tries[1:-1]))


@pytest.fixture
def tries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The characters from each decode try's start to the text's end, in order."""
    found: list[int] = []
    decode = liststream._DECODE

    def counted(text: str, at: int) -> tuple[Any, int]:
        found.append(len(text) - at)
        return decode(text, at)

    monkeypatch.setattr(liststream, "_DECODE", counted)
    return found


def test_retry_waits_for_growth_exactly(tries: list[int]) -> None:
    """An unfinished value of n characters is tried again once n + max(RETRY_GROWTH, n)
    characters of it are in, not one character before."""
    reader = ListReader()
    reader.feed(b'{"items": [')
    start = b'{"a": "'
    reader.feed(start)  # tried at 7 characters: unfinished
    assert tries[-1] == len(start)
    before = len(tries)
    reader.feed(b"x" * (RETRY_GROWTH - 1))  # 7 + RETRY_GROWTH - 1: not yet
    assert len(tries) == before
    reader.feed(b"x")  # 7 + RETRY_GROWTH
    assert len(tries) == before + 1 and tries[-1] == len(start) + RETRY_GROWTH


# -- read_list: what the client hands the reflector ----------------------------------------------

async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _read_list(data: bytes, size: int) -> tuple[list[list[Any]], dict[str, Any], list[int]]:
    batches: list[list[Any]] = []
    sizes: list[int] = []

    def cut(item: dict[str, Any]) -> dict[str, Any]:
        return {**item, "cut": True}

    rest = asyncio.run(liststream.read_list(_chunks(data, size), batches.append, cut, sizes))
    return batches, rest, sizes


@pytest.mark.parametrize(("count", "expected"), [
    (STREAM_BATCH - 1, [STREAM_BATCH - 1]), (STREAM_BATCH, [STREAM_BATCH]),
    (STREAM_BATCH + 1, [STREAM_BATCH, 1]), (2 * STREAM_BATCH + 1, [STREAM_BATCH] * 2 + [1]),
    (0, [])])
@pytest.mark.parametrize("piece", [1 << 30, 12])
def test_read_list_hands_over_batches_of_a_page(count: int, expected: list[int],
                                                piece: int) -> None:
    """Small items, read in one piece or in pieces of about one item: batches of
    STREAM_BATCH items, the rest at the end; each item cut; the members back with no
    items."""
    items = [{"n": i} for i in range(count)]
    data = body(items=items)
    batches, rest, sizes = _read_list(data, piece)
    assert [len(batch) for batch in batches] == expected
    assert [item for batch in batches for item in batch] == [{**i, "cut": True} for i in items]
    assert rest == {**MEMBERS, "items": []}
    assert sizes == [len(data)]


def test_read_list_hands_over_a_batch_once_it_read_stream_bytes() -> None:
    """Large items: a batch once STREAM_BYTES of the response were read since the last,
    whatever its count (a page of the largest objects is no larger)."""
    blob = "x" * ((1 << 20) - 64)  # items of about 1 MiB
    items = [{"n": i, "blob": blob} for i in range(10)]
    data = body(items=items)
    batches, _, _ = _read_list(data, 64 << 10)
    per_batch = [len(batch) for batch in batches]
    assert sum(per_batch) == 10
    # 4 MiB read, then the items it completed: 3 or 4 of them a batch, never all 10
    assert all(count in (3, 4, 5) for count in per_batch[:-1]) and len(per_batch) >= 3, \
        per_batch


def test_read_list_hands_over_at_the_byte_that_reaches_stream_bytes() -> None:
    """Items of about 10 KB (400 in STREAM_BYTES, fewer than STREAM_BATCH): a batch
    after the piece that brings the bytes read since the last one to STREAM_BYTES,
    not a byte before, and counted again from 0 after it."""
    items = [{"n": i, "pad": "x" * 10_000} for i in range(1200)]
    data = body(items=items)
    cuts = [STREAM_BYTES - 1, STREAM_BYTES, 2 * STREAM_BYTES - 1, 2 * STREAM_BYTES]
    pieces = [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)])]
    log: list[str] = []

    async def chunks() -> AsyncIterator[bytes]:
        for i, piece in enumerate(pieces):
            log.append(f"piece {i}")
            yield piece

    def each(batch: list[Any]) -> None:
        log.append("batch")

    asyncio.run(liststream.read_list(chunks(), each, lambda item: item))
    assert log == ["piece 0", "piece 1", "batch", "piece 2", "piece 3", "batch", "piece 4",
                   "batch"]


def test_null_items_are_read_before_the_end() -> None:
    """What follows ``"items": null`` is read as it arrives, not only at the close."""
    reader = ListReader()
    assert reader.feed(b'{"items": null, "metadata": {"resourceVersion": "5"}}') == []
    assert reader.members == {"metadata": {"resourceVersion": "5"}}
    assert reader.close() == []


def test_a_response_of_many_small_items_larger_than_max_pending() -> None:
    """MAX_PENDING bounds one unfinished value, not the response nor what one piece
    holds of finished ones."""
    items = [{"n": i, "pad": "y" * 100} for i in range(MAX_PENDING // 100)]
    data = body(items=items)
    assert len(data) > MAX_PENDING
    reader = ListReader()
    got = reader.feed(data)
    assert len(got) == len(items)
    assert reader.close() == [] and reader.members == MEMBERS


def test_read_list_hands_over_a_batch_once_it_holds_stream_batch_items() -> None:
    """A piece that completes the STREAM_BATCH-th item hands the batch over at once."""
    items = [{"n": i} for i in range(STREAM_BATCH + 3)]
    data = body(items=items)
    cut = data.index(b'{"n": %d}' % STREAM_BATCH)  # before the 501st item
    log: list[str] = []

    async def chunks() -> AsyncIterator[bytes]:
        for i, piece in enumerate([data[:cut], data[cut:]]):
            log.append(f"piece {i}")
            yield piece

    def each(batch: list[Any]) -> None:
        log.append(f"batch {len(batch)}")

    asyncio.run(liststream.read_list(chunks(), each, lambda item: item))
    assert log == ["piece 0", f"batch {STREAM_BATCH}", "piece 1", "batch 3"]


def test_an_unfinished_value_is_tried_again_past_max_pending_not_at_it(
        tries: list[int]) -> None:
    """The forced try comes with the character past MAX_PENDING, not at MAX_PENDING."""
    reader = ListReader()
    reader.feed(b'{"items": [')
    reader.feed(b'{"a": "' + b"x" * (MAX_PENDING // 2))  # tried: unfinished
    assert tries[-1] == len('{"a": "') + MAX_PENDING // 2
    before = len(tries)
    reader.feed(b"x" * (MAX_PENDING // 2 - len('{"a": "')))  # MAX_PENDING in all: waits
    assert len(tries) == before
    reader.feed(b'"}')  # past it: tried, and whole
    assert len(tries) == before + 1 and tries[-1] == MAX_PENDING + 2
