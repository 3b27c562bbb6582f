"""The first-use memory's own bookkeeping (zone/firstuse.py): the bytes each half counts
as entries come, move and are forgotten, at the exact budget boundaries. The memory as
the server uses it (through the handler and the cache) is tested in test_lazy.py."""

from __future__ import annotations

from clusterset_dns.zone import firstuse
from clusterset_dns.zone.wire import Answer


def _answer(size: int) -> Answer:
    return Answer((b"\x84\x00\x00\x01\x00\x00\x00\x00",), bytes(size), 0)


A, B, C = b"a\x00\x00\x01\x00\x01", b"bb\x00\x00\x01\x00\x01", b"ccc\x00\x00\x01\x00\x01"
ANSWERS = {A: _answer(4), B: _answer(20), C: _answer(16)}
COST = {key: firstuse.cost(key, answer) for key, answer in ANSWERS.items()}


def _memory() -> firstuse.FirstUse:
    """A and B fill the recent half exactly; C turns it: A and B are then the older half."""
    memory = firstuse.FirstUse(budget=2 * (COST[A] + COST[B]))
    for key in (A, B, C):
        memory.put(key, ANSWERS[key])
    assert (memory.older_used, memory.recent_used) == (COST[A] + COST[B], COST[C])
    assert len(memory) == 3 and memory.order() == [A, B, C]
    return memory


def test_an_entry_costs_its_key_its_body_and_the_overhead() -> None:
    assert COST[B] == len(B) + 20 + firstuse.OVERHEAD == 7 + 20 + 160


def test_forgetting_counts_off_exactly_the_forgotten_entries_bytes() -> None:
    memory = firstuse.FirstUse(budget=10_000)
    memory.put(A, ANSWERS[A])
    memory.put(B, ANSWERS[B])
    memory.forget([A, b"absent"])
    assert (memory.recent_used, memory.older_used, memory.order()) == (COST[B], 0, [B])
    assert A not in memory and len(memory) == 1
    older = _memory()
    older.forget([A, C])  # one of each half
    assert (older.older_used, older.recent_used) == (COST[B], 0)
    assert older.order() == [B] and A not in older and C not in older
    assert older.take(A) is None  # gone from the older half, not only uncounted
    older.forget([B])
    assert (older.used, len(older), older.order()) == (0, 0, [])


def test_taking_from_the_older_half_counts_off_that_entry_only() -> None:
    memory = _memory()
    taken = memory.take(A)
    assert taken is ANSWERS[A] and A not in memory
    assert (memory.older_used, memory.recent_used) == (COST[B], COST[C])
    assert memory.take(A) is None and memory.older_used == COST[B]
    assert memory.take(C) is None  # the recent half's entries are not taken: get finds them
    assert memory.get(C) is ANSWERS[C]


def test_an_entry_of_exactly_half_the_budget_is_kept_one_byte_more_is_not() -> None:
    exact = firstuse.FirstUse(budget=2 * COST[A])
    exact.put(A, ANSWERS[A])
    assert exact.get(A) is ANSWERS[A] and exact.recent_used == COST[A]
    over = firstuse.FirstUse(budget=2 * COST[A] - 1)  # half: COST[A] - 1
    over.put(A, ANSWERS[A])
    assert A not in over and over.used == 0 and len(over) == 0
