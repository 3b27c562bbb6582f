"""zone/model.py's ``Endpoints`` indexed at and past either end: the first index
outside is an IndexError that says what was out of range (written for the survivors of
``scripts/mutate clusterset_dns/zone/model.py``)."""

from __future__ import annotations

import ipaddress

import pytest

from clusterset_dns.zone.model import Endpoint, Endpoints

FIRST = Endpoint((ipaddress.IPv4Address("10.0.0.1"),), None)
LAST = Endpoint((ipaddress.IPv4Address("10.0.0.2"),), "web-1")
TWO = Endpoints.of([FIRST, LAST])


@pytest.mark.parametrize(("index", "expected"), [(0, FIRST), (1, LAST), (-1, LAST),
                                                 (-2, FIRST)])
def test_the_last_index_inside_either_end_gives_its_endpoint(index: int,
                                                             expected: Endpoint) -> None:
    assert TWO[index] == expected


@pytest.mark.parametrize("index", [2, -3])
def test_the_first_index_outside_either_end_is_an_index_error_that_says_so(index: int) -> None:
    with pytest.raises(IndexError, match=r"^endpoint index out of range$"):
        TWO[index]
