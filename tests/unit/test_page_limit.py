"""sources/reflector's two pure helpers on their own: the next list page's limit (at most
twice the last, at most PAGE_SIZE, what PAGE_BYTES holds at the largest bytes per item
seen, never below 1: 0 would mean "no limit" to the API server) and the comparison of
resourceVersions (etcd revisions, numerically; anything else never older)."""

from __future__ import annotations

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
