"""/explain on the health port (docs/explain.md): the account DNS reveals and no more,
worked out in bounded steps that give the loop back, admitted by limits of its own;
the full account (offline) still shows everything. Issue 30's items, each a test."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import pytest

from clusterset_dns.process import explain
from clusterset_dns.process.explain_http import BURST, MAX_ADMITTED, RATE, ExplainEndpoint
from clusterset_dns.serving.handler import Handler
from clusterset_dns.zone.cache import Cache
from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, service_import

from .fakeclock import FakeClock
from .helpers import build_cache

NS = "prod"
SECRET_MESSAGE = "controller says: token=hunter2 in vault/db"


def name(*labels: str) -> str:
    return ".".join((*labels, NS, "svc", "clusterset.local")) + "."


def leaky_cache() -> Cache:
    """One object for each thing /explain showed that no DNS question reveals."""
    vip = service_import("vip", NS, "ClusterSetIP", ips=["10.80.9.9"], ports=[HTTP])
    vip["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Synced",
                                     "message": SECRET_MESSAGE}]}
    return build_cache(
        [vip, service_import("mixed", NS, "Headless", ports=[HTTP])],
        [
            # a service nobody imported: DNS says NXDOMAIN
            endpoint_slice("orphan-1", "orphan", NS, "east", endpoints=[
                endpoint("10.80.0.1", hostname="orphan-host", zone="zone-orphan")], ports=[HTTP]),
            # the pods behind a ClusterSetIP VIP: DNS gives the VIP only
            endpoint_slice("vip-1", "vip", NS, "east", endpoints=[
                endpoint("10.80.1.1", hostname="vip-pod", zone="zone-vip")], ports=[HTTP]),
            # a not-ready endpoint beside a ready one
            endpoint_slice("mixed-1", "mixed", NS, "east", endpoints=[
                endpoint("10.80.2.1", hostname="up", zone="zone-up"),
                endpoint("10.80.2.2", hostname="down-host", ready=False)], ports=[HTTP]),
        ])


LEAKS = ["10.80.0.1", "orphan-host", "zone-orphan", "orphan-1", "10.80.1.1", "vip-pod",
         "zone-vip", "vip-1", "10.80.2.2", "down-host", "mixed-1", "zone-up", "hunter2"]
QUESTIONS = [(name("orphan"), "A"), (name("orphan-host", "east", "orphan"), "A"),
             (name("vip"), "A"), (name("vip"), "SRV"), (name("_http", "_tcp", "vip"), "SRV"),
             (name("mixed"), "A"), (name("mixed"), "AAAA"), (name("mixed"), "SRV"),
             (name("down-host", "east", "mixed"), "A"), (name("up", "east", "mixed"), "A")]


@pytest.mark.parametrize(("qname", "qtype"), QUESTIONS)
def test_dns_account_shows_nothing_dns_does_not(qname: str, qtype: str) -> None:
    """What the account holds beyond the DNS answer (its records and EDE, which any
    client gets) and the question (which the asker wrote) holds none of the leaks."""
    cache = leaky_cache()
    result = explain.explain(cache, qname, qtype, full=False)
    dns_answer = json.dumps(result["answer"]) + qname
    shown = json.dumps(result) + explain.text(result)
    assert [leak for leak in LEAKS if leak in shown and leak not in dns_answer] == []


def test_the_full_account_still_shows_them() -> None:
    """The leak test can fail: the same questions' full accounts hold every one."""
    cache = leaky_cache()
    shown = " ".join(json.dumps(explain.explain(cache, q, t)) for q, t in QUESTIONS)
    assert [leak for leak in LEAKS if leak not in shown] == []


def test_dns_account_lists_the_served_endpoints() -> None:
    cache = leaky_cache()
    result = explain.explain(cache, name("mixed"), "AAAA", full=False)
    assert result["account"] == "dns"
    assert result["service"]["slices"] == [{"cluster": "east", "addressType": "IPv4",
                                            "endpoints": [{
                                                "addresses": ["10.80.2.1"], "hostname": "up",
                                                "served": False,
                                                "reason": "other family (IPv4; asked AAAA)"}]}]
    vip = explain.explain(cache, name("vip"), "A", full=False)["service"]
    assert vip["import"] == {"namespace": NS, "name": "vip", "type": "ClusterSetIP",
                             "ips": ["10.80.9.9"], "ports": ["http/tcp/80"],
                             "trafficDistribution": None}
    assert vip["slices"] == []
    assert "rejected" not in vip and "lastChange" not in vip


def big_cache(count: int = 20_000) -> Cache:
    eps = [endpoint(f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}", hostname=f"h{i}")
           for i in range(count)]
    slices = [endpoint_slice(f"big-{j}", "big", NS, "east", endpoints=eps[j:j + 1000],
                             ports=[HTTP]) for j in range(0, count, 1000)]
    return build_cache([service_import("big", NS, "Headless", ports=[HTTP])], slices)


@pytest.fixture(scope="module")
def big() -> Cache:
    return big_cache()


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("qtype", ["A", "SRV"])
def test_records_listed_are_capped(big: Cache, qtype: str, full: bool) -> None:
    response = Handler(big.zone, 1232).handle(explain._query(explain._labels(name("big")),
                                                             explain.TYPES[qtype]), True)
    assert response is not None
    total = sum(struct.unpack_from("!HHH", response, 6))  # an, ns, ar
    result = explain.explain(big, name("big"), qtype, full=full)
    answer = result["answer"]
    listed = len(answer["answer"]) + len(answer["authority"]) + len(answer["additional"])
    assert listed == explain.MAX_RECORDS
    assert answer["recordsNotListed"] == total - 1 - explain.MAX_RECORDS  # less the OPT
    rows = sum(len(s["endpoints"]) for s in result["service"]["slices"])
    assert rows == explain.MAX_ENDPOINTS
    assert result["service"]["endpointsNotListed"] == 20_000 - explain.MAX_ENDPOINTS


def test_steps_are_bounded(big: Cache) -> None:
    """Every step is at most WORK_STEP units: the whole account of the 20,000-endpoint
    import, all that could be listed, takes as many steps as its work needs."""
    work = explain.steps(big, name("big"), "SRV", full=True)
    count = 0
    with pytest.raises(StopIteration):
        while True:
            next(work)
            count += 1
    # walked: ~1,000 records; ranked: none (no local-first); listed: 500 records, 500 rows
    least = (500 * explain.RECORD_COST + 500 * explain.ROW_COST) // explain.WORK_STEP
    assert count >= least


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_dns_waits_behind_at_most_one_step(big: Cache) -> None:
    """Four accounts of the big import at once: between two turns of the loop (when a
    DNS answer is sent) at most one step of explain work was done."""
    async def scenario() -> tuple[list[int], list[int]]:
        endpoint_ = ExplainEndpoint(big, FakeClock())
        requests = [asyncio.ensure_future(endpoint_.route({"name": name("big"), "type": t}))
                    for t in ("A", "SRV", "A", "SRV")]
        between: list[int] = []
        seen = 0
        while not all(r.done() for r in requests):
            await asyncio.sleep(0)  # one turn of the loop, as a DNS answer gets
            between.append(endpoint_.steps - seen)
            seen = endpoint_.steps
        statuses = [r.result().status for r in requests]
        return between, statuses

    between, statuses = run(scenario())
    assert statuses == [200] * 4
    assert sum(between) > 4 * 10  # many steps in all ...
    assert max(between) == 1  # ... one at most between two turns


def test_rate_limit_boundary() -> None:
    clock = FakeClock()
    reasons: list[str] = []
    gate = ExplainEndpoint(build_cache(), clock, on_refused=reasons.append)
    assert [gate.admit() for _ in range(BURST)] == [None] * BURST
    refused = gate.admit()
    assert refused is not None and refused.status == 429
    assert refused.headers == (("Retry-After", "1"),)
    clock.advance(1 / RATE - 0.001)  # not yet a whole token
    assert gate.admit() is not None
    clock.advance(0.002)
    assert gate.admit() is None
    assert gate.admit() is not None
    assert reasons == ["rate"] * 3


def test_busy_beyond_the_admitted(big: Cache) -> None:
    async def scenario() -> list[int]:
        refused: list[str] = []
        gate = ExplainEndpoint(big, FakeClock(), rate=1000, burst=1000,
                               on_refused=refused.append)
        first = [asyncio.ensure_future(gate.route({"name": name("big")}))
                 for _ in range(MAX_ADMITTED)]
        await asyncio.sleep(0)  # all of them admitted, one running
        extra = await gate.route({"name": name("big")})
        assert extra.headers == (("Retry-After", "1"),)
        done = [(await r).status for r in first]
        after = await gate.route({"name": name("big")})
        assert refused == ["busy"]
        return [*done, extra.status, after.status]

    assert run(scenario()) == [200] * MAX_ADMITTED + [429, 200]


@pytest.mark.parametrize("bad", ["", ".", "..", " ", "a..b", "web..", "..web"])
def test_empty_names_are_400(bad: str) -> None:
    reply = run(ExplainEndpoint(build_cache()).route({"name": bad}))
    assert reply.status == 400, reply.body
    assert json.loads(reply.body)["error"]


@pytest.mark.parametrize("qname", [
    "*." + name("vip")[:-1].split(".", 1)[1], name("vip").replace(NS, "*"),
    name("a b"), name("vip").replace(NS, "a+b")])
def test_a_service_or_namespace_no_object_may_have_is_no_service(qname: str) -> None:
    """A wildcard (or a space, a plus) where the service or the namespace stands: DNS
    answers it (NXDOMAIN); so does /explain, without a service (before: the account
    raised InvalidName, so the health port logged a traceback and reset the connection,
    and the offline command exited 1 with a traceback)."""
    reply = run(ExplainEndpoint(leaky_cache()).route({"name": qname, "type": "A"}))
    assert reply.status == 200, reply.body
    body = json.loads(reply.body)
    assert body["answer"]["rcode"] == "NXDOMAIN"
    assert body["service"] is None


def test_a_400_does_not_echo_a_long_name() -> None:
    long_name = "a" * 60_000
    reply = run(ExplainEndpoint(build_cache()).route({"name": long_name, "type": "A"}))
    assert reply.status == 400
    error = json.loads(reply.body)["error"]
    assert "60000 characters" in error
    assert len(reply.body) < explain.ECHO_MAX + 200
    typed = run(ExplainEndpoint(build_cache()).route({"name": "x", "type": "T" * 5000}))
    assert typed.status == 400 and len(typed.body) < explain.ECHO_MAX + 200


def test_missing_name_is_400() -> None:
    reply = run(ExplainEndpoint(build_cache()).route({}))
    assert reply.status == 400 and "no name" in json.loads(reply.body)["error"]


def test_dns_account_hides_what_no_name_serves() -> None:
    """Local-first: an endpoint of a slice with no cluster id in a lower tier has no
    endpoint name and is not in the service's answers, so no DNS question gives it; a
    named one of a lower tier is listed (its name resolves), left out of this answer."""
    from clusterset_dns.base.names import ZoneNames
    from clusterset_dns.sources import convert
    from clusterset_dns.zone.cache import ReplaceImports, ReplaceSlices, SetSynced

    imp = convert.service_import(service_import("near", NS, "Headless", ports=[HTTP],
                                                traffic_distribution="PreferClose"))
    pieces = [convert.endpoint_slice(endpoint_slice(
                  slice_name, "near", NS, cluster, endpoints=[endpoint(ip, hostname=host)],
                  ports=[HTTP]))
              for slice_name, cluster, ip, host in (("near-e", "east", "10.81.0.1", "e-0"),
                                                    ("near-w", "west", "10.81.1.1", "w-0"),
                                                    ("near-x", None, "10.81.2.1", None))]
    cache = Cache(ZoneNames("clusterset.local"), 5, cluster_id="east")
    cache.apply([ReplaceImports({(NS, "near"): imp}),
                 ReplaceSlices({(p.namespace, p.name): p for p in pieces if p is not None}),
                 SetSynced(True)])

    def rows(full: bool) -> dict[str, tuple[bool, str]]:
        result = explain.explain(cache, name("near"), "A", full=full)
        return {e["addresses"][0]: (e["served"], e["reason"])
                for s in result["service"]["slices"] for e in s["endpoints"]}

    lower = "local-first tier 1: the service's addresses are tier 0's"
    assert rows(full=False) == {"10.81.0.1": (True, ""), "10.81.1.1": (False, lower)}
    assert set(rows(full=True)) == {"10.81.0.1", "10.81.1.1", "10.81.2.1"}
