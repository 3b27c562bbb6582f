"""explain with and without --serve-terminating: a terminating endpoint (not ready,
still serving) is served only by the fallback (no ready endpoint in any cluster), and
the account says so for each endpoint; the answer agrees with it."""

from __future__ import annotations

from typing import Any

import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process import explain
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import Cache, ReplaceImports, ReplaceSlices, SetSynced
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, service_import

from .helpers import ZONE

NAME = "t.prod.svc.clusterset.local."
SERVING = "not ready (serving: answered with --serve-terminating when no endpoint is ready)"
TERMINATING = endpoint("10.7.0.1", ready=False, serving=True)
DOWN = endpoint("10.7.0.2", ready=False, serving=False)
READY = endpoint("10.7.0.3")

# (what, endpoints, --serve-terminating, addresses answered, address -> (served, reason))
CASES: list[tuple[str, list[dict[str, Any]], bool, list[str],
                  dict[str, tuple[bool, str]]]] = [
    ("only terminating, without the flag", [TERMINATING, DOWN], False, [],
     {"10.7.0.1": (False, SERVING), "10.7.0.2": (False, "not ready")}),
    ("only terminating, with it: the fallback serves them", [TERMINATING, DOWN], True,
     ["10.7.0.1"], {"10.7.0.1": (True, ""), "10.7.0.2": (False, "not ready")}),
    ("a ready one as well, with it: no fallback", [TERMINATING, READY], True, ["10.7.0.3"],
     {"10.7.0.1": (False, SERVING), "10.7.0.3": (True, "")}),
    ("a ready one as well, without it", [TERMINATING, READY], False, ["10.7.0.3"],
     {"10.7.0.1": (False, SERVING), "10.7.0.3": (True, "")}),
]


@pytest.mark.parametrize(("what", "endpoints", "flag", "answered", "accounts"), CASES,
                         ids=[c[0] for c in CASES])
def test_explain_says_which_terminating_endpoints_answer(
        what: str, endpoints: list[dict[str, Any]], flag: bool, answered: list[str],
        accounts: dict[str, tuple[bool, str]]) -> None:
    imp = convert.service_import(service_import("t", type_="Headless"))
    piece = convert.endpoint_slice(endpoint_slice("t-a", "t", cluster="east",
                                                  endpoints=endpoints))
    assert piece is not None
    cache = Cache(ZoneNames(ZONE), 5, serve_terminating=flag)
    cache.apply([ReplaceImports({("prod", "t"): imp}),
                 ReplaceSlices({("prod", "t-a"): piece}), SetSynced(True)])
    result = explain.explain(cache, NAME, "A")
    assert [line.split()[-1] for line in result["answer"]["answer"]] == answered
    got = {" ".join(e["addresses"]): (e["served"], e["reason"])
           for s in result["service"]["slices"] for e in s["endpoints"]}
    assert got == accounts
    assert explain.text(result)  # the human form renders it too
