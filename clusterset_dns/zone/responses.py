"""The remembered-response memory: whole UDP responses, by the query's bytes after its ID.

A query seen before since the last zone change is answered by one look-up, without
slicing or case folding; the batched UDP reader (:mod:`udpbatch`) makes that look-up
itself and calls the handler only on a miss. The zone owns the one memory of a
process (``Zone.responses``) and empties it on every change; the handler fills it.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView

# Bounded in bytes, since clients choose both how many queries are distinct (0x20
# case variants) and how large their responses are (an EDNS size up to
# --edns-udp-size): each entry counts as its key's and response's lengths plus
# OVERHEAD (two bytes objects, a tuple and a dict slot: measured 180-200 bytes). When
# the next entry would pass BUDGET it starts over. The benchmark's 14,253 distinct
# queries (6 MiB counted so) fit.
BUDGET = 16 << 20
OVERHEAD = 200

# A stored response: (its bytes after the ID, the index of its counter in
# stats.Stats.requests, bumped once for every answer it gives).
Stored = tuple[bytes, int]


class ResponseMemory:
    """Query bytes after the ID -> :data:`Stored`, at most ``budget`` bytes (counted as
    above). ``get`` is the underlying dict's own method, so a hit costs one call."""

    __slots__ = ("_stored", "budget", "get", "used")

    def __init__(self, budget: int = BUDGET) -> None:
        self._stored: dict[bytes, Stored] = {}
        # Bound once: the dict keeps its identity for the memory's life (emptied in
        # place), so callers may keep this method too.
        self.get: Callable[[bytes], Stored | None] = self._stored.get
        self.budget = budget
        self.used = 0  # bytes counted so far

    def put(self, query: bytes, response: bytes, counter: int) -> None:
        """Remembers ``response`` (after the ID) for ``query`` (after the ID)."""
        cost = len(query) + len(response) + OVERHEAD
        used = self.used + cost
        if used > self.budget:
            # Full (a flood of distinct queries): start over, so that what is asked now
            # gets remembered rather than what was asked first.
            self._stored.clear()
            used = cost
        self.used = used
        self._stored[query] = (response, counter)

    def clear(self) -> None:
        self._stored.clear()
        self.used = 0

    def __len__(self) -> int:
        return len(self._stored)

    def items(self) -> ItemsView[bytes, Stored]:
        return self._stored.items()
