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

from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.ops import Change

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
        raw_old = _raw(before) if before is not None else []
        raw_new = _raw(after) if after is not None else []
        if raw_old is not None and raw_new is not None:
            # A change of one endpoint in an answer of thousands: compared as bytes,
            # only the records that differ are decoded.
            old_raw, new_raw = set(raw_old), set(raw_new)
            removed.extend(_record(key, raw) for raw in old_raw - new_raw)
            added.extend(_record(key, raw) for raw in new_raw - old_raw)
            continue
        old = set(rrs.answer_records(key, before)) if before is not None else set()
        new = set(rrs.answer_records(key, after)) if after is not None else set()
        removed.extend(old - new)
        added.extend(new - old)
    # Sorted here, once per update, so that sending a difference costs no sort.
    return Diff(old_serial, new_serial, tuple(sorted(removed)), tuple(sorted(added)))


_OWNED = b"\xc0\x0c"  # a record owned by the question
# Types whose records hold no compressed name: an SRV target is never compressed (RFC
# 2782; wire.Encoder.srv copies it whole).
_WHOLE = {wire.A.to_bytes(2, "big"), wire.AAAA.to_bytes(2, "big"), wire.SRV.to_bytes(2, "big")}
_ADDRESS_RECORD = {wire.A.to_bytes(2, "big"): 16, wire.AAAA.to_bytes(2, "big"): 28}


def _raw(answer: wire.Answer) -> list[bytes] | None:
    """The answer records' bytes, when each stands alone (owned by the question, of a type
    of _WHOLE): the same record is then the same bytes in any answer. None otherwise."""
    body = answer.body
    count = int.from_bytes(answer.heads[0][4:6])
    if not count:
        return []
    if body[:2] != _OWNED:
        return None
    step = _ADDRESS_RECORD.get(body[2:4])
    if step is not None:  # every address record of an answer has the same head and size
        head = body[:12]
        if int.from_bytes(head[10:12]) != step - 12 or len(body) < count * step:
            return None
        records = [body[at : at + step] for at in range(0, count * step, step)]
        return records if all(record.startswith(head) for record in records) else None
    out: list[bytes] = []
    at = 0
    for _ in range(count):
        if body[at : at + 2] != _OWNED or body[at + 2 : at + 4] not in _WHOLE:
            return None
        end = at + 12 + int.from_bytes(body[at + 10 : at + 12])
        out.append(body[at:end])
        at = end
    return out


def _record(key: bytes, raw: bytes) -> rrs.Record:
    """The record ``raw`` (of _raw) as rrs.answer_records reads it."""
    rtype, _, ttl, _ = wire.RR_HEAD.unpack_from(raw, 2)
    return rrs.Record(key[:-4], rtype, ttl, raw[12:])


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
