"""delta.Difference.put: what one update by difference writes into the zone's dicts, and
what it hands the IXFR journal (each answer that changes, as (key, before, after)).

The cache's tests reach put only with the answers a difference makes; here each case of
its contract is one row, and a removal of an answer the zone never had (which the cache
does not make) is handled too: nothing to journal, nothing to remove, the rest still put.
"""

from __future__ import annotations

from clusterset_dns.zone import truncate, wire
from clusterset_dns.zone.delta import Difference


def _answer(body: bytes, records: int = 1) -> wire.Answer:
    return wire.Answer(wire.heads(0, records, 0, 0), body, 0)


def _cuts(answer: wire.Answer) -> truncate.Cuts:
    return truncate.srv_cuts(b"\x01q\x00\x00\x21\x00\x01", answer, truncate.Rotation())


def test_put_journals_each_change_and_puts_every_answer_and_cut() -> None:
    gone, kept, body, head = (_answer(b"gone"), _answer(b"kept"), _answer(b"body"),
                              _answer(b"head"))
    zone = {b"gone": gone, b"kept": kept, b"body": body, b"head": head}
    # equal bytes and head, another object; another body; another head (ANCOUNT)
    same, new_body, new_head, new = (_answer(b"kept"), _answer(b"BODY"),
                                     _answer(b"head", 2), _answer(b"new"))
    # first a removal of a name the zone has no answer for: it is skipped, not the end
    difference = Difference({b"never": None, b"gone": None, b"kept": same, b"body": new_body,
                             b"head": new_head, b"new": new},
                            {}, {})
    changes: list[tuple[bytes, wire.Answer | None, wire.Answer | None]] = []
    difference.put(zone, {}, changes)
    # (Answer has no __eq__: each is compared as the very object)
    assert changes == [(b"gone", gone, None), (b"body", body, new_body),
                       (b"head", head, new_head), (b"new", None, new)]
    assert zone == {b"kept": same, b"body": new_body, b"head": new_head, b"new": new}


def test_put_without_a_journal_puts_the_same() -> None:
    old = _answer(b"old")
    zone = {b"old": old, b"left": _answer(b"left")}
    replaced = _answer(b"replaced")
    Difference({b"never": None, b"left": None, b"old": replaced}, {}, {}).put(zone, {}, None)
    assert zone == {b"old": replaced}


def test_put_sets_and_removes_cuts() -> None:
    """A cut None removes the name's cut (one it may not have); any other is put."""
    first, second, third = (_cuts(_answer(b"a")), _cuts(_answer(b"b")), _cuts(_answer(b"c")))
    cuts = {b"dropped": first, b"stays": second}
    Difference({}, {b"never": None, b"dropped": None, b"new": third}, {}).put({}, cuts, [])
    assert cuts == {b"stays": second, b"new": third}
