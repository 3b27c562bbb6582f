"""A bounded journal of zone differences by serial, for IXFR (RFC 1995).

The cache reports each update's changed answer keys (old and new answer); the
records of those answers are compared here, so a difference holds exactly the
records that left and joined the zone: the same change the cache applied,
seen as ``dump`` would see it. SOA records are left out: IXFR frames every
difference with the SOAs of its two serials itself.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

from clusterset_dns import rrs, wire
from clusterset_dns.cache import Change

_SOA_TYPE = wire.SOA.to_bytes(2, "big")
# A change of more answer keys than this (the first load, a big relist) is not kept:
# it clears the journal instead, and clients before it get the whole zone, which is
# about as large as such a difference and costs no memory while waiting.
MAX_DIFF_KEYS = 20_000


@dataclass(frozen=True, slots=True)
class Diff:
    old_serial: int
    new_serial: int
    removed: tuple[rrs.Record, ...]
    added: tuple[rrs.Record, ...]


def diff_of(old_serial: int, new_serial: int, changes: list[Change]) -> Diff:
    removed: list[rrs.Record] = []
    added: list[rrs.Record] = []
    for key, before, after in changes:
        if key[-4:-2] == _SOA_TYPE:
            continue
        old = set(rrs.answer_records(key, before)) if before is not None else set()
        new = set(rrs.answer_records(key, after)) if after is not None else set()
        removed.extend(old - new)
        added.extend(new - old)
    # Sorted here, once per update, so that sending a difference costs no sort.
    return Diff(old_serial, new_serial, tuple(sorted(removed)), tuple(sorted(added)))


class Journal:
    """The last ``limit`` differences, oldest dropped first (0: none kept, every IXFR
    is answered with the whole zone)."""

    def __init__(self, limit: int) -> None:
        self.diffs: deque[Diff] = deque(maxlen=limit) if limit > 0 else deque(maxlen=0)
        self.records = 0  # records held, for the metric

    def record(self, old_serial: int, new_serial: int, changes: list[Change] | None) -> None:
        """``changes`` None: a step of a zone not synced yet (a first list coming in
        page by page), whose half-loaded serials are never worth an IXFR."""
        if self.diffs.maxlen == 0:
            return
        # Not a step forward (RFC 1982): a worker's own start-up serial replaced by its
        # parent's, which may be lower and may even equal one of the parent's later
        # serials. History before it is not ours to replay: keep none of it.
        if (changes is None or not 0 < (new_serial - old_serial) % 2**32 < 2**31
                or len(changes) > MAX_DIFF_KEYS):
            self.diffs.clear()
            self.records = 0
            return
        if len(self.diffs) == self.diffs.maxlen:
            dropped = self.diffs[0]
            self.records -= len(dropped.removed) + len(dropped.added)
        diff = diff_of(old_serial, new_serial, changes)
        self.diffs.append(diff)
        self.records += len(diff.removed) + len(diff.added)

    def since(self, serial: int, current: int) -> list[Diff] | None:
        """The differences that lead from ``serial`` to ``current``: [] when they are
        equal; None when the journal does not reach back to ``serial`` (not one of
        ours, or too old), which calls for the whole zone."""
        if serial == current:
            return []
        diffs = list(self.diffs)
        for index, diff in enumerate(diffs):
            if diff.old_serial == serial:
                chain = diffs[index:]
                if chain[-1].new_serial != current:
                    return None
                if all(a.new_serial == b.old_serial for a, b in itertools.pairwise(chain)):
                    return chain
                return None
        return None
