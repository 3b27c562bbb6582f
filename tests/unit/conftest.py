"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import signal
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


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _signal_handlers() -> Iterator[None]:
    """Each test starts with the handlers the session had and leaves them so: the app's
    tests run its start-up in this process, whose loop adds SIGTERM and SIGHUP handlers
    (uvloop leaves its own in place when the loop closes), and a later test reading a
    handler must not see them."""
    saved = [(signum, signal.getsignal(signum)) for signum in _SIGNALS]
    yield
    for signum, handler in saved:
        if signal.getsignal(signum) is not handler and handler is not None:
            signal.signal(signum, handler)
