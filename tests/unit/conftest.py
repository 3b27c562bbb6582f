"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture
def clients() -> Iterator[Callable[[str], socket.socket]]:
    """UDP client sockets bound to the given loopback address (IPv4 or IPv6), closed
    after the test."""
    made: list[socket.socket] = []

    def make(host: str) -> socket.socket:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.bind((host, 0))
        sock.settimeout(2)
        made.append(sock)
        return sock

    yield make
    for sock in made:
        sock.close()
