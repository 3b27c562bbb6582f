"""GET /explain's replies as the health port sends them (process/explain_http.py): the
DNS account (never the full one), the zone's largest RRset as the server keeps it, the
429s' bodies and Retry-After, and the admitted count given back after each request.
Written for the survivors of ``scripts/mutate clusterset_dns/process/explain_http.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from clusterset_dns.process import explain
from clusterset_dns.process.explain_http import MAX_ADMITTED, ExplainEndpoint
from clusterset_dns.process.health import Reply
from clusterset_dns.zone import rrs

from .fakeclock import FakeClock
from .helpers import build_cache
from .test_explain import big_cache, leaky_cache, name


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_route_gives_the_dns_account_as_rendered() -> None:
    cache = leaky_cache()
    reply = run(ExplainEndpoint(cache, FakeClock()).route({"name": name("mixed"),
                                                          "type": "SRV"}))
    expected = explain.run(explain.render(explain.explain(cache, name("mixed"), "SRV",
                                                          full=False)))
    assert reply == Reply(200, "application/json", expected)
    shown = json.loads(reply.body)
    assert shown["account"] == "dns"
    # a not-ready endpoint's name: in the full account of the question, not in this one
    assert "down-host" in json.dumps(explain.explain(cache, name("mixed"), "SRV"))
    assert "down-host" not in reply.body.decode()


def test_the_type_defaults_to_a() -> None:
    cache = leaky_cache()
    gate = ExplainEndpoint(cache, FakeClock())
    plain = run(gate.route({"name": name("mixed")}))
    assert json.loads(plain.body)["question"]["type"] == "A"
    assert plain == run(gate.route({"name": name("mixed"), "type": "A"}))


def test_the_largest_rrset_is_the_one_the_server_keeps() -> None:
    """The endpoint asks ``largest`` (collector.Largest), not a walk of every answer: a
    count no walk of this zone would find shows it was used."""
    cache = leaky_cache()
    walked = rrs.largest_rrset(cache.zone.answers)
    kept = (walked[0] + 40, walked[1])
    calls: list[int] = []

    def largest() -> tuple[int, bytes]:
        calls.append(1)
        return kept

    reply = run(ExplainEndpoint(cache, FakeClock(), largest=largest).route(
        {"name": name("vip")}))
    assert json.loads(reply.body)["zone"]["largestRRset"] == {"records": walked[0] + 40}
    assert calls == [1]
    alone = run(ExplainEndpoint(cache, FakeClock()).route({"name": name("vip")}))
    assert json.loads(alone.body)["zone"]["largestRRset"] == {"records": walked[0]}


def test_a_rate_refusal_says_when_to_come_back() -> None:
    """Retry-After: the whole seconds until a token is back, at least 1: at 0.5 a
    second an empty bucket needs 2 s, a half-full one 1 s."""
    clock = FakeClock()
    gate = ExplainEndpoint(build_cache(), clock, rate=0.5, burst=1)
    assert gate.admit() is None
    refused = gate.admit()
    assert refused == Reply(429, "application/json",
                            b'{"error": "more than 0.5 explain requests a second; '
                            b'retry in 2 s"}\n', (("Retry-After", "2"),))
    clock.advance(1.0)  # half a token
    assert gate.admit() == Reply(429, "application/json",
                                 b'{"error": "more than 0.5 explain requests a second; '
                                 b'retry in 1 s"}\n', (("Retry-After", "1"),))
    clock.advance(0.999)
    assert gate.admit() is not None
    clock.advance(0.001)
    assert gate.admit() is None


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_the_admitted_are_given_back(rounds: int) -> None:
    """Each round: MAX_ADMITTED at once are admitted, one more is refused as busy (its
    reply in full), and every slot is free again once they are done."""
    async def scenario() -> list[Reply]:
        gate = ExplainEndpoint(big_cache(2_000), FakeClock(), rate=1000, burst=1000)
        extras = []
        for _ in range(rounds):
            first = [asyncio.ensure_future(gate.route({"name": name("big")}))
                     for _ in range(MAX_ADMITTED)]
            await asyncio.sleep(0)
            extras.append(await gate.route({"name": name("big")}))
            assert [(await r).status for r in first] == [200] * MAX_ADMITTED
            assert gate.admitted == 0
        return extras

    busy = Reply(429, "application/json",
                 f'{{"error": "{MAX_ADMITTED} explain requests in progress; retry later"}}\n'
                 .encode(), (("Retry-After", "1"),))
    assert run(scenario()) == [busy] * rounds


def test_a_400_is_json() -> None:
    reply = run(ExplainEndpoint(build_cache(), FakeClock()).route({"name": ""}))
    assert reply.status == 400 and reply.ctype == "application/json"
    assert reply.body.endswith(b"}\n") and set(json.loads(reply.body)) == {"error"}
