"""The first-use memory: answers encoded when first asked, kept across zone changes.

An endpoint name of the compact index (``table.Hosts``) has no stored answer; its
first query encodes one (``Zone.cold``) and this keeps it, so the next query is one
look-up. Unlike the negatives (whose SOA carries the serial, which moves with every
change), such an answer depends on nothing but its name's entry in the index: the
cache drops it only when an update replaces that entry (:meth:`FirstUse.forget`),
so an update of one service keeps every other service's remembered answers.

Bounded in bytes: each entry counts as its key's and body's lengths plus OVERHEAD
(the key and body objects, an ``Answer``, a dict slot: measured 160 bytes beside an
A answer's 60-byte key and 16-byte body). Least recently used goes first, by halves:
the handler reads the recent half with one look-up (no bookkeeping on a hit); when
the recent half would pass half the budget it becomes the older half and the older
half is dropped; an entry found in the older half moves back to the recent one. So
an answer used since the last turn survives the next, and the memory never holds
more than the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from clusterset_dns.zone.wire import Answer

# 4 MiB: about 17,000 endpoint names per process (each worker has its own), as many as
# the 16,384 entries the negatives held with them before.
BUDGET = 4 << 20
OVERHEAD = 160


def cost(key: bytes, answer: Answer) -> int:
    """What one entry counts against the budget."""
    return len(key) + answer.size + OVERHEAD


class FirstUse:
    """Lower-case question key -> :class:`Answer`, at most ``budget`` bytes counted as
    above. ``get`` is the recent half's own dict method (its identity is kept for the
    memory's life), so a hit on the fast path costs one call."""

    __slots__ = ("_older", "_recent", "budget", "get", "older_used", "recent_used")

    def __init__(self, budget: int = BUDGET) -> None:
        self._recent: dict[bytes, Answer] = {}
        self._older: dict[bytes, Answer] = {}
        self.get: Callable[[bytes], Answer | None] = self._recent.get
        self.budget = budget
        self.recent_used = 0
        self.older_used = 0

    def take(self, key: bytes) -> Answer | None:
        """The answer of ``key`` taken out of the older half (the caller, which missed
        ``get``, puts it back into the recent one: it is being used), or None."""
        answer = self._older.pop(key, None)
        if answer is not None:
            self.older_used -= cost(key, answer)
        return answer

    def put(self, key: bytes, answer: Answer) -> None:
        """Remembers ``answer`` for ``key`` (not already in the recent half)."""
        size = cost(key, answer)
        half = self.budget // 2
        if size > half:
            return  # never: an answer of the index is a few dozen bytes
        if self.recent_used + size > half:
            # The recent half is full: it becomes the older half, whose entries
            # (unused for a whole half's worth of first uses) go. Copied, so that the
            # recent dict keeps its identity (``get`` is bound to it).
            older, recent = self._older, self._recent
            older.clear()
            older.update(recent)
            recent.clear()
            self.older_used, self.recent_used = self.recent_used, 0
        self._recent[key] = answer
        self.recent_used += size

    def forget(self, keys: Iterable[bytes]) -> None:
        """Drops the answers of ``keys`` (their names' entries changed)."""
        recent, older = self._recent, self._older
        for key in keys:
            answer = recent.pop(key, None)
            if answer is not None:
                self.recent_used -= cost(key, answer)
            answer = older.pop(key, None)
            if answer is not None:
                self.older_used -= cost(key, answer)

    @property
    def used(self) -> int:
        """Bytes counted in both halves."""
        return self.recent_used + self.older_used

    def __len__(self) -> int:
        return len(self._recent) + len(self._older)

    def __contains__(self, key: object) -> bool:
        return key in self._recent or key in self._older

    def order(self) -> list[bytes]:
        """Every key, the older half's first (least recently used first)."""
        return [*self._older, *self._recent]
