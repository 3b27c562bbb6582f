"""Remembered responses (Zone.responses): a query seen before since the last zone change
gets the bytes a fresh answer would have, with its own ID; every zone change empties
them; TCP and slow-path answers are never stored; bounded."""

from __future__ import annotations

from typing import Any

import dns.rcode
import pytest

from clusterset_dns import convert
from clusterset_dns import handler as handler_module
from clusterset_dns.cache import RESPONSE_OVERHEAD, PutImport, SetSynced
from clusterset_dns.handler import Handler

from .helpers import (
    DEFAULT_UDP_CAP,
    ask,
    build_cache,
    endpoint,
    endpoint_slice,
    first_rotation,
    port,
    query,
    service_import,
)

Z = "svc.clusterset.local."
WEB, DB, TYPO = f"web.prod.{Z}", f"db.prod.{Z}", f"wbe.prod.{Z}"
IMPORTS = [
    service_import("web", ips=["10.1.0.1"], ports=[port(80, "TCP", "http")]),
    service_import("db", type_="Headless", ports=[port(5432, "TCP", "pg")]),
]
SLICES = [
    endpoint_slice("db-a", "db", cluster="east", ports=[port(5432, "TCP", "pg")],
                   endpoints=[endpoint(f"10.2.0.{i}", hostname=f"db-{i}")
                              for i in range(1, 41)]),
]
QUESTIONS = [(WEB, "A"), (WEB, "AAAA"), (DB, "SRV"), (f"db-1.east.{DB}", "A"), (TYPO, "A"),
             (f"_pg._tcp.{DB}", "SRV")]
VARIANTS: list[dict[str, Any]] = [
    {}, {"rd": False}, {"cd": True}, {"edns": 0}, {"edns": 0, "do": True},
    {"edns": 0, "payload": 4096, "rd": False},
]


def fresh() -> Handler:
    return Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP)


@pytest.mark.parametrize(("qname", "qtype"), QUESTIONS, ids=[f"{n}-{t}" for n, t in QUESTIONS])
def test_a_remembered_response_is_the_fresh_one_with_the_query_id(qname: str,
                                                                   qtype: str) -> None:
    handler = fresh()
    for kw in VARIANTS:
        for name in (qname, qname.upper()):
            first_rotation(handler)
            first = handler.handle(query(name, qtype, qid=1, **kw), False)
            stored = len(handler.zone.responses)
            for qid in (2, 0xFFFF):
                data = query(name, qtype, qid=qid, **kw)
                # A truncated answer moves on to the name's next rotation: compared in
                # the first one. _slow never reads the remembered responses.
                first_rotation(handler)
                again = handler.handle(data, False)
                first_rotation(handler)
                assert again == handler._slow(data, False), (name, kw)
                assert again is not None and first is not None
                assert again[:2] == data[:2] and again[2:] == first[2:]
            assert len(handler.zone.responses) == stored  # served from memory


def test_hits_are_counted_by_rcode() -> None:
    handler = fresh()
    for qid in range(5):
        handler.handle(query(TYPO, "A", qid=qid), False)
        handler.handle(query(WEB, "A", qid=qid), False)
    assert handler.stats.rcodes[dns.rcode.NXDOMAIN] == 5
    assert handler.stats.rcodes[dns.rcode.NOERROR] == 5


def test_a_zone_change_empties_them_and_the_new_answer_is_served() -> None:
    cache = build_cache(IMPORTS, SLICES)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    assert ask(handler, query(WEB, "A")).answer == [f"{WEB} 5 in a 10.1.0.1"]
    assert ask(handler, query(TYPO, "A")).rcode == dns.rcode.NXDOMAIN
    assert len(cache.zone.responses) == 2
    moved = convert.service_import(service_import("web", ips=["10.1.0.2"],
                                                  ports=[port(80, "TCP", "http")]))
    typo = convert.service_import(service_import("wbe", ips=["10.1.0.9"]))
    cache.apply([PutImport(("prod", "web"), moved), PutImport(("prod", "wbe"), typo)])
    assert cache.zone.responses == {}
    assert ask(handler, query(WEB, "A")).answer == [f"{WEB} 5 in a 10.1.0.2"]
    assert ask(handler, query(TYPO, "A")).answer == [f"{TYPO} 5 in a 10.1.0.9"]


def test_losing_sync_empties_them() -> None:
    cache = build_cache(IMPORTS, SLICES)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    assert ask(handler, query(TYPO, "A")).rcode == dns.rcode.NXDOMAIN
    cache.apply([SetSynced(False)])
    assert cache.zone.responses == {}
    assert ask(handler, query(TYPO, "A")).rcode == dns.rcode.SERVFAIL


def test_tcp_and_truncated_answers_are_not_stored() -> None:
    handler = fresh()
    big = query(DB, "A")  # 40 addresses: more than 512 bytes without EDNS
    udp = ask(handler, big)
    assert udp.msg.flags & dns.flags.TC
    assert handler.zone.responses == {}
    assert len(ask(handler, big, tcp=True).answer) == 40
    assert handler.zone.responses == {}
    # A TCP query may use a response remembered from UDP: the same bytes as fresh.
    small = query(WEB, "A", qid=5)
    handler.handle(small, False)
    assert handler.handle(small, True) == handler._slow(small, True)


def test_slow_path_answers_are_not_stored() -> None:
    handler = fresh()
    assert ask(handler, query("example.com.", "A")).rcode == dns.rcode.REFUSED
    assert ask(handler, query(WEB, "ANY")).rcode == dns.rcode.NOERROR
    assert ask(handler, query(WEB, "A", rdclass="CH")).rcode == dns.rcode.REFUSED
    assert handler.zone.responses == {}


def test_the_byte_budget_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounded in bytes, not entries: clients choose how large the responses are."""
    budget = 4 * (RESPONSE_OVERHEAD + 200)
    monkeypatch.setattr(handler_module, "RESPONSES_BYTES", budget)
    handler = fresh()
    for i in range(11):
        data = query(f"typo-{i}.prod.{Z}", "A", qid=i)
        assert ask(handler, data).rcode == dns.rcode.NXDOMAIN
        assert handler.handle(data, False) == handler._slow(data, False)
        zone = handler.zone
        counted = sum(len(k) + len(v[0]) + RESPONSE_OVERHEAD for k, v in zone.responses.items())
        assert len(zone.responses) >= 1 and counted == zone.responses_bytes <= budget
    assert any(b"\x07typo-10" in key for key in handler.zone.responses)  # the latest kept
    handler.zone.changed()
    assert handler.zone.responses == {} and handler.zone.responses_bytes == 0
