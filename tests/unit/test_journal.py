"""transfers/journal.Journal on its own: a difference is kept only for a step forward in
serial arithmetic (RFC 1982: up to half the serial space, to the serial), only up to
MAX_DIFF_KEYS changed keys (to the key); the oldest dropped first, its records no longer
counted; since() only for an unbroken chain to the current serial."""

from __future__ import annotations

import dns.name
import pytest

from clusterset_dns.transfers import journal
from clusterset_dns.transfers.journal import Journal
from clusterset_dns.zone import wire
from clusterset_dns.zone.ops import Change

KEY = dns.name.from_text("a.svc.clusterset.local.").to_wire() + b"\x00\x01\x00\x01"  # A, IN


def addresses(*last: int) -> wire.Answer:
    """An A answer as the zone stores it: each record owned by the question (C0 0C)."""
    body = b"".join(b"\xc0\x0c" + wire.RR_HEAD.pack(wire.A, 1, 5, 4) + bytes([10, 0, 0, i])
                    for i in last)
    return wire.Answer(wire.heads(0, len(last), 0, 0), body, 0)


def change(before: tuple[int, ...], after: tuple[int, ...]) -> list[Change]:
    return [(KEY, addresses(*before) if before else None, addresses(*after) if after else None)]


HALF = 2**31


@pytest.mark.parametrize(("old", "new", "kept"), [
    (5, 6, True),
    (5, 5 + HALF - 1, True),  # the farthest step forward
    (5, 5 + HALF, False),  # half the space: neither forward nor back (RFC 1982 3.2)
    (5, 5, False),  # no step
    (5, 4, False),  # a step back (a worker's start-up serial replaced by its parent's)
    (2**32 - 1, 0, True),  # forward across the wrap
    (2**32 - 1, HALF - 2, True),
    (2**32 - 1, HALF - 1, False),
])
def test_only_a_step_forward_is_kept(old: int, new: int, kept: bool) -> None:
    notes = Journal(4)
    notes.record(1, 2, change((), (1,)))  # something to lose
    notes.record(old, new, change((1,), (2,)))
    assert [(d.old_serial, d.new_serial) for d in notes.diffs] == (
        [(1, 2), (old, new)] if kept else [])
    assert notes.records == (3 if kept else 0)


def test_at_most_max_diff_keys_changed_keys_are_kept() -> None:
    same: Change = (KEY, None, None)
    notes = Journal(4)
    notes.record(1, 2, [same] * journal.MAX_DIFF_KEYS)
    assert len(notes.diffs) == 1
    notes.record(2, 3, [same] * (journal.MAX_DIFF_KEYS + 1))
    assert len(notes.diffs) == 0 and journal.MAX_DIFF_KEYS == 20_000


def test_a_step_of_a_zone_not_synced_clears_the_journal() -> None:
    notes = Journal(4)
    notes.record(1, 2, change((), (1,)))
    notes.record(2, 3, None)
    assert len(notes.diffs) == 0 and notes.records == 0


def test_the_oldest_difference_goes_first_and_its_records_with_it() -> None:
    notes = Journal(2)
    notes.record(1, 2, change((), (1, 2, 3)))  # 3 added
    notes.record(2, 3, change((1, 2, 3), (1, 2)))  # 1 removed
    assert notes.records == 4
    notes.record(3, 4, change((1, 2), (1, 2, 7, 8)))  # 2 added; the first dropped
    assert [(d.old_serial, d.new_serial) for d in notes.diffs] == [(2, 3), (3, 4)]
    assert notes.records == 3
    assert [r.rdata for r in notes.diffs[1].added] == [bytes([10, 0, 0, 7]),
                                                       bytes([10, 0, 0, 8])]


@pytest.mark.parametrize("limit", [0, -1])
def test_a_journal_of_no_length_keeps_nothing(limit: int) -> None:
    notes = Journal(limit)
    notes.record(1, 2, change((), (1,)))
    assert len(notes.diffs) == 0 and notes.records == 0 and notes.since(1, 2) is None


def test_since_gives_only_an_unbroken_chain_to_the_current_serial() -> None:
    notes = Journal(8)
    for old in (1, 2, 3):
        notes.record(old, old + 1, change((old,), (old + 1,)))
    assert notes.since(4, 4) == []
    assert [d.old_serial for d in notes.since(1, 4) or []] == [1, 2, 3]
    assert [d.old_serial for d in notes.since(3, 4) or []] == [3]
    assert notes.since(1, 3) is None  # the chain does not end at the current serial
    assert notes.since(9, 4) is None  # not one of ours
    broken = Journal(8)
    broken.record(1, 2, change((1,), (2,)))
    broken.record(5, 6, change((5,), (6,)))  # 2 -> 5 never recorded
    assert broken.since(1, 6) is None
    assert [d.old_serial for d in broken.since(5, 6) or []] == [5]
