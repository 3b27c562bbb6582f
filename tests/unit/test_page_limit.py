"""sources/reflector's two pure helpers on their own: the next list page's limit (at most
twice the last, at most PAGE_SIZE, what PAGE_BYTES holds at the largest bytes per item
seen, never below 1: 0 would mean "no limit" to the API server) and the comparison of
resourceVersions (etcd revisions, numerically; anything else never older)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from clusterset_dns.sources.reflector import PAGE_BYTES, PAGE_SIZE, _older, page_limit


@pytest.mark.parametrize(("previous", "largest", "limit"), [
    (2, 100.0, 4),  # twice the last page
    (1, 100.0, 2),
    (0, 100.0, 1),  # never 0
    (300, 1.0, PAGE_SIZE),  # at most PAGE_SIZE
    (PAGE_SIZE, 1.0, PAGE_SIZE),
    (PAGE_SIZE, PAGE_BYTES / 7, 7),  # what the bytes hold, to the item
    (PAGE_SIZE, PAGE_BYTES / 7 + 1, 6),
    (PAGE_SIZE, PAGE_BYTES, 1),
    (PAGE_SIZE, PAGE_BYTES * 3.0, 1),  # an item over the budget: alone, never 0
    (PAGE_SIZE, 0.5, PAGE_SIZE),  # under a byte an item counts as one
    (PAGE_SIZE, PAGE_BYTES / (PAGE_SIZE - 1), PAGE_SIZE - 1),
])
def test_the_next_page_limit(previous: int, largest: float, limit: int) -> None:
    assert page_limit(previous, largest) == limit


def test_a_byte_or_less_per_item_is_counted_as_one() -> None:
    """PAGE_BYTES is far above PAGE_SIZE: a small size per item leaves the other bounds."""
    assert PAGE_BYTES // 1 > PAGE_SIZE
    assert page_limit(3, 0.0) == page_limit(3, 1.0) == 6


@pytest.mark.parametrize(("version", "than", "older"), [
    ("9", "10", True),  # numbers, not text
    ("10", "9", False),
    ("10", "10", False),
    ("0", "1", True),
    ("abc", "10", False),
    ("9", "x10", False),
    ("", "10", False),
    ("9", "", False),
    ("-1", "10", False),
])
def test_only_a_lower_etcd_revision_is_older(version: str, than: str, older: bool) -> None:
    assert _older(version, than) is older


def test_a_page_never_asks_for_more_than_the_bytes_hold() -> None:
    """To the fraction of a byte: PAGE_BYTES / 5 as a float is a hair over a fifth, so
    five such items would be over the budget: four are asked for."""
    for items in range(2, PAGE_SIZE):
        for largest in (PAGE_BYTES / items, math.nextafter(PAGE_BYTES / items, math.inf),
                        math.nextafter(PAGE_BYTES / items, 0.0)):
            limit = page_limit(PAGE_SIZE, largest)
            assert Fraction(limit) * Fraction(largest) <= PAGE_BYTES
            assert Fraction(limit + 1) * Fraction(largest) > PAGE_BYTES
    assert page_limit(PAGE_SIZE, PAGE_BYTES / 5) == 4
