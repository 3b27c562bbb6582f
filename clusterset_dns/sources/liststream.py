"""A list response read as it arrives: its items one by one, each as soon as the bytes
that end it are in, then the rest of the response (``metadata``: resourceVersion and
continue token).

Why: a first list asked with ``resourceVersion=0`` is served from the API server's
watch cache, in one response whatever the ``limit`` (kube-apiserver ignores a limit at
that version), which costs the API server a fraction of a list paged from etcd. At a
million endpoints that one response is about 150 MB of JSON; decoded whole it would be
several times our settled memory. Read here, only the item being decoded and the
bytes after it exist at once, so the list's peak is the model's size plus one object.

The response must be one JSON object; every member but ``items`` (an array of
objects, or null) is kept as decoded. Anything else is :class:`ValueError`, as is a
response that ends early, or a value still unfinished after :data:`MAX_PENDING`
characters (which bounds the memory a malformed response can take): the caller
(kube.KubeClient) reports it as a malformed response.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

# Characters an unfinished item may hold before the response is given up on: four
# times the largest object etcd stores (1.5 MiB by default), as JSON.
MAX_PENDING = 8 << 20
# An unfinished item is tried again once this many characters more arrived, or as
# many as it already held, whichever is more: a large item costs a few failed
# decodes, never one per chunk.
RETRY_GROWTH = 64 << 10

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODE = json.JSONDecoder().raw_decode

# Items handed over at once by read_list: what a page holds (reflector.PAGE_SIZE and
# PAGE_BYTES), so that a batch of the largest objects is as large as a page of them.
STREAM_BATCH, STREAM_BYTES = 500, 4 << 20
Each = Callable[[list[dict[str, Any]]], None]


async def read_list(chunks: AsyncIterator[bytes], each: Each,
                    cut: Callable[[dict[str, Any]], dict[str, Any]],
                    sizes: list[int] | None = None) -> dict[str, Any]:
    """Reads a list response: its items, each passed through ``cut`` as it is decoded,
    to ``each`` in batches of STREAM_BATCH; returns the response's other members with
    an empty ``items``; a batch is handed over once it holds STREAM_BATCH items or
    STREAM_BYTES of the response. ``sizes``: gets the response's length in bytes."""
    reader, total, since = ListReader(), 0, 0
    batch: list[dict[str, Any]] = []
    async for chunk in chunks:
        total += len(chunk)
        since += len(chunk)
        batch += map(cut, reader.feed(chunk))
        if batch and (len(batch) >= STREAM_BATCH or since >= STREAM_BYTES):
            while len(batch) > STREAM_BATCH:
                each(batch[:STREAM_BATCH])
                del batch[:STREAM_BATCH]
            each(batch)
            batch, since = [], 0
    batch += map(cut, reader.close())
    for start in range(0, len(batch), STREAM_BATCH):
        each(batch[start : start + STREAM_BATCH])
    if sizes is not None:
        sizes.append(total)
    return {**reader.members, "items": []}


# Where the reader is in the response: what comes next.
(_START, _FIRST_MEMBER, _NEXT_MEMBER, _KEY, _COLON, _VALUE, _ITEMS, _FIRST_ITEM, _NEXT_ITEM,
 _ITEM, _DONE) = range(11)

_ALLOWED = {_START: "{", _FIRST_MEMBER: '"}', _NEXT_MEMBER: ",}", _COLON: ":", _NEXT_ITEM: ",]"}


class ListReader:
    """Feed the response's bytes in chunks of any size (:meth:`feed` gives the items
    they complete, in order), then :meth:`close`."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._text = ""
        self._at = 0  # where reading goes on in _text
        self._state = _START
        self._key = ""
        self._final = False
        # Characters the text must hold (it starts where an unfinished value does)
        # before that value is tried again; 0: none is unfinished.
        self._retry_at = 0
        self.members: dict[str, Any] = {}  # every member but the items, as decoded

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The items ``chunk`` completes (UnicodeDecodeError, ValueError: malformed)."""
        return self._read(self._utf8.decode(chunk))

    def close(self) -> list[dict[str, Any]]:
        """The last items, once the whole response was fed; then :attr:`members` holds
        the rest. ValueError when the response ended early or went on after its end."""
        self._final = True
        self._retry_at = 0
        items = self._read(self._utf8.decode(b"", final=True))
        if self._state != _DONE:
            raise ValueError("the list response ends before its end")
        if self._text[self._at :].strip(" \t\n\r"):
            raise ValueError("data after the end of the list response")
        return items

    def _read(self, text: str) -> list[dict[str, Any]]:
        self._text = self._text[self._at :] + text
        self._at = 0
        items: list[dict[str, Any]] = []
        # An unfinished value is tried again once it doubled, or once it holds more than
        # MAX_PENDING characters (the text starts with it): then it must be whole.
        if len(self._text) >= self._retry_at or (self._retry_at
                                                 and len(self._text) > MAX_PENDING):
            while self._step(items):
                pass
        return items

    def _skip(self) -> bool:
        """Skips spaces; whether a character follows."""
        self._at = _SPACE.match(self._text, self._at).end()  # type: ignore[union-attr]
        return self._at < len(self._text)

    def _take(self, allowed: str) -> str | None:
        """The next character after spaces, taken, if it is one of ``allowed``; None at
        the end of what was fed; ValueError for any other."""
        if not self._skip():
            return None
        char = self._text[self._at]
        if char not in allowed:
            raise ValueError(f"list response: {char!r} where one of {allowed!r} was due")
        self._at += 1
        return char

    def _value(self) -> tuple[bool, Any]:
        """(True, the JSON value at the next character), or (False, None) when it has
        not all arrived (tried again after RETRY_GROWTH more characters at least)."""
        if not self._skip():
            return False, None
        text = self._text
        try:
            value, end = _DECODE(text, self._at)
        except json.JSONDecodeError as exc:
            pending = len(text) - self._at
            if self._final:
                raise ValueError(f"list response: {exc.msg}") from None
            if pending > MAX_PENDING:
                raise ValueError(f"list response: a value still unfinished after {MAX_PENDING} "
                                 "characters, or a malformed one") from None
            # counted from where the value starts, where the next feed's text starts
            self._retry_at = pending + max(RETRY_GROWTH, pending)
            return False, None
        if end == len(text) and not self._final and type(value) in (int, float):
            return False, None  # more digits may follow
        self._at = end
        self._retry_at = 0
        return True, value

    def _step(self, items: list[dict[str, Any]]) -> bool:
        """One move; False when it must wait for more of the response (or is done)."""
        state = self._state
        if state in (_START, _FIRST_MEMBER, _NEXT_MEMBER, _COLON, _NEXT_ITEM):
            char = self._take(_ALLOWED[state])
            if char is None:
                return False
            if char == '"':
                self._at -= 1  # the key's opening quote: decoded with the key
                self._state = _KEY
            elif char == "}":
                self._state = _DONE
            elif char == ":":
                self._state = _ITEMS if self._key == "items" else _VALUE
            else:
                self._state = {_START: _FIRST_MEMBER, _NEXT_MEMBER: _KEY}.get(
                    state, _ITEM if char == "," else _NEXT_MEMBER)
            return True
        if state in (_KEY, _VALUE):
            done, value = self._value()
            if not done:
                return False
            if state == _KEY:
                if type(value) is not str:
                    raise ValueError("list response: a member name is not a string")
                self._key, self._state = value, _COLON
            else:
                self.members[self._key] = value
                self._state = _NEXT_MEMBER
            return True
        if state == _ITEMS:  # an array, or null
            if not self._skip():
                return False
            rest = self._text[self._at : self._at + 4]
            if rest[:1] == "n":
                if len(rest) < 4 and not self._final:
                    return False
                if rest != "null":
                    raise ValueError("list response: items is neither an array nor null")
                self._at += 4
                self._state = _NEXT_MEMBER
                return True
            self._take("[")
            self._state = _FIRST_ITEM
            return True
        if state == _FIRST_ITEM and self._skip() and self._text[self._at] == "]":
            self._at += 1
            self._state = _NEXT_MEMBER
            return True
        if state in (_FIRST_ITEM, _ITEM):
            done, item = self._value()
            if not done:
                return False
            if type(item) is not dict:
                raise ValueError("list response: an item is not an object")
            items.append(item)
            self._state = _NEXT_ITEM
            return True
        return False  # _DONE
