"""The answer observer: the one hook through which the transports show each answer to
whatever watches answers (the query log, dnstap).

Interface (``Observer``): ``observe(query, response, tcp, peer, started)``, called on
the event loop's thread once per DNS message read from a client, once its response is
made (over UDP after it was sent; over TCP before the transport writes it):

- ``query``: the whole query message as received (ID included);
- ``response``: the whole response message (ID included), or None when none was sent
  (a malformed packet, a dropped TSIG query);
- ``tcp``: False over UDP, True over TCP;
- ``peer``: the client's socket address as the ``socket`` module gives it:
  ``(host, port)``, or ``(host, port, flowinfo, scope_id)`` over IPv6;
- ``started``: ``time.perf_counter_ns()`` when the query was read (over batched UDP:
  when its batch was read), for a duration; a wall-clock time of the query is
  ``time.time_ns() - (time.perf_counter_ns() - started)``.

Zone transfers (AXFR, and IXFR over TCP) are streams, not answers: not observed.

An observer must not block (it runs between two answers) and should be cheap: it is
called for every answer. What it raises is logged once (:func:`failed`) and otherwise
ignored, so that a bug in it never costs an answer. Without an observer the transports
take their usual path: no call, no clock reading, no test per packet (one per batch of
up to 64 datagrams over UDP).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

Address = tuple[Any, ...]
Observer = Callable[[bytes, "bytes | None", bool, Address, int], None]


def fan_out(observers: Sequence[Observer | None]) -> Observer | None:
    """One observer calling each of ``observers`` in turn (None for none at all)."""
    present = [o for o in observers if o is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def observe(query: bytes, response: bytes | None, tcp: bool, peer: Address,
                started: int) -> None:
        # each on its own: a query log that raises must not cost dnstap its message
        for each in present:
            try:
                each(query, response, tcp, peer, started)
            except Exception:
                failed()

    return observe


_failed = False


def failed() -> None:
    """What a transport calls when its observer raised (inside its ``except``): logged
    once per process, with the traceback; answers go on."""
    global _failed
    if not _failed:
        _failed = True
        log.exception("answer observer failed (logged once; answers go on)")
