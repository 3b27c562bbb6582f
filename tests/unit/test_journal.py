"""transfers/journal.Journal on its own: a difference is kept only for a step forward in
serial arithmetic (RFC 1982: up to half the serial space, to the serial), only up to
MAX_DIFF_KEYS changed keys (to the key); the oldest dropped first, its records no longer
counted; since() only for an unbroken chain to the current serial."""

from __future__ import annotations

from typing import Any

import dns.name
import pytest

from clusterset_dns.transfers import journal
from clusterset_dns.transfers.journal import Journal
from clusterset_dns.zone import rrs, wire
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


# -- a difference holds exactly the records that left and joined, whatever the answer --
# diff_of compares the bytes of records that stand alone (owned by the question, of a
# type without compressed names) and decodes the rest: either way the difference must
# be the decoded records' (rrs.answer_records), which these answers check at the edges
# of the shortcut: a second type, a record length that is not an address's, a length
# of two bytes, a record owned elsewhere, a name compressed in an NS.

NAME = KEY[:-4]


def rr(rtype: int, rdata: bytes, owner: bytes = b"\xc0\x0c", ttl: int = 5) -> bytes:
    return owner + wire.RR_HEAD.pack(rtype, 1, ttl, len(rdata)) + rdata


def answer(*records: bytes) -> wire.Answer:
    return wire.Answer(wire.heads(0, len(records), 0, 0), b"".join(records), 0)


def srv(port: int, target: bytes) -> bytes:
    return rr(wire.SRV, wire.SRV_FIXED.pack(0, 10, port) + target)


def a(last: int, ttl: int = 5) -> bytes:
    return rr(wire.A, bytes([10, 0, 0, last]), ttl=ttl)


# a target of 254 bytes: the SRV's rdlength is 260, more than one byte holds
LONG_TARGET = b"".join(bytes([n]) + b"t" * n for n in (63, 63, 63, 60)) + b"\x00"
ANSWERS = {
    "addresses": answer(a(1), a(2)),
    "TTLs that differ": answer(a(1), a(2, ttl=7)),
    "an A, then an AAAA": answer(a(1), rr(wire.AAAA, bytes(15) + b"\x01")),
    "an A of 5 bytes": answer(rr(wire.A, bytes([10, 0, 0, 1, 9]))),
    "an A of 260 bytes": answer(rr(wire.A, bytes(range(4)) * 65)),
    "SRVs": answer(srv(80, b"\x01h\x00"), srv(81, b"\x01h\x00")),
    "an SRV of 260 bytes": answer(srv(80, LONG_TARGET)),
    "an SRV, then an NS naming the question": answer(srv(80, b"\x01h\x00"),
                                                     rr(wire.NS, b"\xc0\x0c")),
    "an SRV, then one owned by svc.clusterset.local": answer(srv(80, b"\x01h\x00"), rr(
        wire.SRV, wire.SRV_FIXED.pack(0, 10, 81) + b"\x01h\x00", owner=b"\xc0\x0e")),
    "NS records": answer(rr(wire.NS, b"\x02ns\xc0\x0c"), rr(wire.NS, b"\x02nt\xc0\x0c")),
    "one NS": answer(rr(wire.NS, b"\x02ns\xc0\x0c")),
    "owned by the name written out": answer(rr(wire.A, bytes([10, 0, 0, 1]), owner=NAME)),
}


def decoded(before: wire.Answer | None, after: wire.Answer | None) -> tuple[list[Any], ...]:
    old = set(rrs.answer_records(KEY, before)) if before is not None else set()
    new = set(rrs.answer_records(KEY, after)) if after is not None else set()
    return sorted(old - new), sorted(new - old)


@pytest.mark.parametrize("before", [None, *ANSWERS])
@pytest.mark.parametrize("after", [None, *ANSWERS])
def test_a_difference_is_the_decoded_records_that_left_and_joined(
        before: str | None, after: str | None) -> None:
    old = ANSWERS[before] if before is not None else None
    new = ANSWERS[after] if after is not None else None
    diff = journal.diff_of(1, 2, [(KEY, old, new)])
    assert (list(diff.removed), list(diff.added)) == decoded(old, new)


def test_a_cut_address_answer_is_refused_as_decoding_refuses_it() -> None:
    """Three records announced, the last cut after its head: no slice of the body
    passes for it."""
    whole = answer(a(1), a(2), a(3))
    cut = wire.Answer(whole.heads, whole.body[:-4], 0)
    with pytest.raises(rrs.DecodeError):
        list(rrs.answer_records(KEY, cut))
    with pytest.raises(rrs.DecodeError):
        journal.diff_of(1, 2, [(KEY, None, cut)])


def test_the_soa_is_left_out_and_the_changes_after_it_kept() -> None:
    soa_key = NAME + wire.SOA.to_bytes(2, "big") + b"\x00\x01"
    soa = answer(rr(wire.SOA, b"\x00\x00" + bytes(20)))
    diff = journal.diff_of(1, 2, [(soa_key, None, soa), (KEY, None, addresses(1))])
    assert diff.removed == () and [r.rdata for r in diff.added] == [bytes([10, 0, 0, 1])]


def address(ttl: int, *octets: int) -> bytes:
    return rr(wire.A, bytes(octets), ttl=ttl)


# answers whose records stand alone, each compared as bytes (their first octets differ:
# the records share their 12-byte head, no more)
ALONE = {
    "addresses": (address(5, 10, 0, 0, 1), address(5, 192, 168, 0, 1)),
    "IPv6 addresses": (rr(wire.AAAA, bytes(15) + b"\x01"), rr(wire.AAAA, b"\xfd" + bytes(15))),
    "256 addresses": (*(address(5, 10, 0, 1, i) for i in range(255)), address(5, 11, 0, 0, 0)),
    "SRVs": (srv(80, b"\x01h\x00"), srv(8080, b"\x02hh\x00"), srv(81, LONG_TARGET)),
    "one SRV of 260 bytes": (srv(80, LONG_TARGET),),
    "none": (),
}


@pytest.mark.parametrize("name", ALONE)
def test_records_that_stand_alone_are_compared_as_bytes_never_decoded(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change of one endpoint in an answer of thousands decodes that endpoint only:
    answers whose records are owned by the question and hold no compressed name are
    never decoded as a whole."""
    records = ALONE[name]
    assert journal._raw(answer(*records)) == list(records)
    expected = decoded(answer(*records[:1]), answer(*records[1:]))

    def whole(key: bytes, stored: wire.Answer) -> Any:
        raise AssertionError("decoded a whole answer")

    monkeypatch.setattr(journal.rrs, "answer_records", whole)
    diff = journal.diff_of(1, 2, [(KEY, answer(*records[:1]), answer(*records[1:]))])
    assert (list(diff.removed), list(diff.added)) == expected


@pytest.mark.parametrize("name", ["an A, then an AAAA", "an A of 5 bytes", "an A of 260 bytes",
                                  "an SRV, then an NS naming the question",
                                  "an SRV, then one owned by svc.clusterset.local",
                                  "NS records", "owned by the name written out"])
def test_records_that_do_not_stand_alone_are_decoded(name: str) -> None:
    assert journal._raw(ANSWERS[name]) is None


def test_every_changed_key_is_compared() -> None:
    other = dns.name.from_text("b.svc.clusterset.local.").to_wire() + b"\x00\x01\x00\x01"
    diff = journal.diff_of(1, 2, [(KEY, addresses(1), addresses(2)),
                                  (other, addresses(3), addresses(4))])
    assert [(r.owner, r.rdata[3]) for r in diff.removed] == [(NAME, 1), (other[:-4], 3)]
    assert [(r.owner, r.rdata[3]) for r in diff.added] == [(NAME, 2), (other[:-4], 4)]


def test_a_journal_of_one_keeps_the_last_difference() -> None:
    notes = Journal(1)
    notes.record(1, 2, change((), (1,)))
    notes.record(2, 3, change((1,), (2,)))
    assert [(d.old_serial, d.new_serial) for d in notes.diffs] == [(2, 3)]
    assert notes.records == 2 and [d.old_serial for d in notes.since(2, 3) or []] == [2]
