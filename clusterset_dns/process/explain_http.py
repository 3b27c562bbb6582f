"""``GET /explain`` on the health port: the DNS account of :mod:`explain`, admitted by
limits of its own and worked out in steps that give the loop back.

The health port is reachable by every pod and shares the event loop that answers DNS,
so an explain request must never hold an answer back, and a burst of them must not
take the connections that probes need:

- one account is worked out at a time (MAX_RUNNING), one bounded step between two
  turns of the loop (``explain.WORK_STEP``): a DNS answer waits behind at most one
  step, whatever the number of explain requests;
- at most MAX_ADMITTED requests are running or waiting; the next one gets 429 at once
  (Retry-After: 1), so a burst holds only that many of the HTTP connections;
- RATE requests a second on average, BURST at once (a token bucket); above it 429
  with Retry-After, the seconds until the next request is admitted.

Every /explain request counts, a bad one (400) included.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from clusterset_dns.base.clock import Clock
from clusterset_dns.process import explain
from clusterset_dns.process.health import Reply
from clusterset_dns.zone.cache import Cache

MAX_RUNNING = 1  # accounts worked out at once: each step of it is between DNS answers
MAX_ADMITTED = 4  # running or waiting; the rest get 429 at once
RATE = 5.0  # requests a second, on average ...
BURST = 10  # ... and at once, after a quiet moment


def _json(status: int, body: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(status, "application/json", json.dumps(body).encode() + b"\n", headers)


class ExplainEndpoint:
    """The ``/explain`` route: admission (:meth:`admit`), then the account in steps."""

    def __init__(self, cache: Cache, clock: Clock | None = None, *, rate: float = RATE,
                 burst: int = BURST, admitted: int = MAX_ADMITTED,
                 largest: Callable[[], tuple[int, bytes]] | None = None,
                 on_refused: Callable[[str], None] = lambda reason: None) -> None:
        """``largest``: the zone's largest RRset as the server keeps it (collector.Largest),
        so that no request walks every answer for it."""
        self.cache = cache
        self.largest = largest
        self.clock = clock or Clock()
        self.rate, self.burst, self.max_admitted = rate, burst, admitted
        self.tokens = float(burst)
        self.stamp = self.clock.monotonic()
        self.admitted = 0  # running or waiting for the one running
        self.running = asyncio.Semaphore(MAX_RUNNING)
        self.on_refused = on_refused  # "busy" or "rate"
        self.steps = 0  # steps worked, over every request (the tests count them)

    def admit(self) -> Reply | None:
        """None when the request may go on (a token taken), else the 429 to send."""
        if self.admitted >= self.max_admitted:
            self.on_refused("busy")
            return _json(429, {"error": f"{self.admitted} explain requests in progress; "
                                        "retry later"}, (("Retry-After", "1"),))
        now = self.clock.monotonic()
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1.0:
            wait = max(1, math.ceil((1.0 - self.tokens) / self.rate))
            self.on_refused("rate")
            return _json(429, {"error": f"more than {self.rate:g} explain requests a second; "
                                        f"retry in {wait} s"}, (("Retry-After", str(wait)),))
        self.tokens -= 1.0
        return None

    async def route(self, params: Mapping[str, str]) -> Reply:
        refused = self.admit()
        if refused is not None:
            return refused
        self.admitted += 1
        try:
            async with self.running:
                return await self._account(params.get("name", ""), params.get("type", "A"))
        finally:
            self.admitted -= 1

    async def _account(self, name: str, type_text: str) -> Reply:
        try:
            largest = self.largest() if self.largest is not None else None
            result = await self._run(explain.steps(self.cache, name, type_text, False, largest))
        except explain.ExplainError as exc:
            return _json(400, {"error": str(exc)})
        body: bytes = await self._run(explain.render(result))
        return Reply(200, "application/json", body)

    async def _run(self, work: explain.Step) -> Any:
        """The steps of ``work``, the loop given back after each (a zero-length sleep is
        a turn of the loop: every DNS answer ready by then is sent first)."""
        while True:
            try:
                next(work)
            except StopIteration as done:
                return done.value
            self.steps += 1
            await asyncio.sleep(0)
