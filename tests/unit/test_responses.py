"""Remembered responses (responses.ResponseMemory, Zone.responses): a query seen before
since the last zone change gets the bytes a fresh answer would have, with its own ID;
every zone change empties them; TCP and slow-path answers are never stored; bounded in
bytes."""

from __future__ import annotations

from typing import Any

import dns.rcode
import pytest

from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import PutImport, SetSynced
from clusterset_dns.zone.responses import OVERHEAD, ResponseMemory
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import DEFAULT_UDP_CAP, ask, build_cache, first_rotation, query

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
    assert len(cache.zone.responses) == 0 and cache.zone.responses.used == 0
    assert ask(handler, query(WEB, "A")).answer == [f"{WEB} 5 in a 10.1.0.2"]
    assert ask(handler, query(TYPO, "A")).answer == [f"{TYPO} 5 in a 10.1.0.9"]


def test_losing_sync_empties_them() -> None:
    cache = build_cache(IMPORTS, SLICES)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    assert ask(handler, query(TYPO, "A")).rcode == dns.rcode.NXDOMAIN
    cache.apply([SetSynced(False)])
    assert len(cache.zone.responses) == 0
    assert ask(handler, query(TYPO, "A")).rcode == dns.rcode.SERVFAIL


def test_tcp_and_truncated_answers_are_not_stored() -> None:
    handler = fresh()
    big = query(DB, "A")  # 40 addresses: more than 512 bytes without EDNS
    udp = ask(handler, big)
    assert udp.msg.flags & dns.flags.TC
    assert len(handler.zone.responses) == 0
    assert len(ask(handler, big, tcp=True).answer) == 40
    assert len(handler.zone.responses) == 0
    # A TCP query may use a response remembered from UDP: the same bytes as fresh.
    small = query(WEB, "A", qid=5)
    handler.handle(small, False)
    assert handler.handle(small, True) == handler._slow(small, True)


def test_slow_path_answers_are_not_stored() -> None:
    handler = fresh()
    assert ask(handler, query("example.com.", "A")).rcode == dns.rcode.REFUSED
    assert ask(handler, query(WEB, "ANY")).rcode == dns.rcode.NOERROR
    assert ask(handler, query(WEB, "A", rdclass="CH")).rcode == dns.rcode.REFUSED
    assert len(handler.zone.responses) == 0


def counted(memory: ResponseMemory) -> int:
    return sum(len(key) + len(response) + OVERHEAD for key, (response, _) in memory.items())


def test_the_byte_budget_is_respected() -> None:
    """Bounded in bytes, not entries: clients choose how large the responses are."""
    budget = 4 * (OVERHEAD + 200)
    handler = fresh()
    handler.zone.responses.budget = budget
    for i in range(11):
        data = query(f"typo-{i}.prod.{Z}", "A", qid=i)
        assert ask(handler, data).rcode == dns.rcode.NXDOMAIN
        assert handler.handle(data, False) == handler._slow(data, False)
        memory = handler.zone.responses
        assert len(memory) >= 1 and counted(memory) == memory.used <= budget
    assert any(b"\x07typo-10" in key for key, _ in handler.zone.responses.items())  # latest
    handler.zone.changed()
    assert len(handler.zone.responses) == 0 and handler.zone.responses.used == 0


def test_the_memory_hits_what_it_holds_and_misses_the_rest() -> None:
    memory = ResponseMemory()
    assert memory.get(b"q1") is None
    memory.put(b"q1", b"r1", 7)
    memory.put(b"q2", b"r2", 9)
    assert memory.get(b"q1") == (b"r1", 7) and memory.get(b"q2") == (b"r2", 9)
    assert memory.get(b"Q1") is None  # the bytes as sent: another case is another key
    assert len(memory) == 2 and memory.used == counted(memory)


def test_the_memory_starts_over_when_the_next_entry_would_pass_its_budget() -> None:
    memory = ResponseMemory(budget=3 * (OVERHEAD + 9))
    for i in range(3):
        memory.put(b"query-%d" % i, b"xx", i)  # 9 bytes + OVERHEAD each: fits exactly
    assert len(memory) == 3 and memory.used == memory.budget
    memory.put(b"query-3", b"xx", 3)
    assert [key for key, _ in memory.items()] == [b"query-3"]
    assert memory.get(b"query-0") is None and memory.used == counted(memory) == OVERHEAD + 9
    memory.put(b"huge", b"x" * memory.budget, 4)  # larger than the budget: kept alone
    assert [key for key, _ in memory.items()] == [b"huge"]


def test_a_zone_change_empties_the_memory_the_handler_and_reader_hold() -> None:
    cache = build_cache(IMPORTS, SLICES)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    held = handler.responses.get  # what the batched reader keeps
    handler.handle(query(WEB, "A"), False)
    key = query(WEB, "A")[2:]
    assert held(key) is not None
    cache.apply([SetSynced(False)])
    assert held(key) is None and len(cache.zone.responses) == 0
    assert cache.zone.responses.used == 0


def test_only_names_in_lower_case_are_remembered() -> None:
    """A name in mixed case (DNS 0x20: every query spelled anew) is answered by the
    fast path every time, never stored; a name in lower case is stored, also for a type
    whose low byte is a capital letter's (HTTPS, 65: bytes.lower() changes it)."""
    handler = fresh()
    for qname, qtype, stored in ((WEB.upper(), "A", 0), ("wEb.pRoD." + Z, "A", 0),
                                 (TYPO.capitalize(), "A", 0), (WEB, "HTTPS", 1),
                                 (WEB, "A", 2), (TYPO, "A", 3)):
        for edns in (None, 0):
            data = query(qname, qtype, edns=edns)
            assert handler.handle(data, False) == handler._slow(data, False)
        assert len(handler.zone.responses) == stored * 2, qname
