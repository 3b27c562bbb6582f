"""Remembered negative answers (Zone.negatives): the same bytes as a freshly worked-out
NXDOMAIN/NODATA, for every query's ID, flags, EDNS and case; emptied by every zone
change; bounded."""

from __future__ import annotations

from typing import Any

import dns.rcode
import pytest

from clusterset_dns.serving import handler as handler_module
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import Cache, PutImport, SetSynced
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import DEFAULT_UDP_CAP, ask, build_cache, query

Z = "svc.clusterset.local."
WEB, DB = f"web.prod.{Z}", f"db.prod.{Z}"
TYPO, OTHER_NS = f"wbe.prod.{Z}", f"web.nope.{Z}"

IMPORTS = [
    service_import("web", ips=["10.1.0.1"], ports=[port(80, "TCP", "http")]),  # IPv4 only
    service_import("db", type_="Headless", ports=[port(5432, "TCP", "pg")]),
]
SLICES = [
    endpoint_slice("db-a", "db", cluster="east", ports=[port(5432, "TCP", "pg")],
                   endpoints=[endpoint("10.2.0.1", hostname="db-0")]),
]

# (name, type, expected rcode): NODATA for AAAA of IPv4-only names, NXDOMAIN for typos.
NEGATIVE = [
    (WEB, "AAAA", dns.rcode.NOERROR), (DB, "AAAA", dns.rcode.NOERROR),
    (f"db-0.east.{DB}", "AAAA", dns.rcode.NOERROR), (f"prod.{Z}", "A", dns.rcode.NOERROR),
    (TYPO, "A", dns.rcode.NXDOMAIN), (OTHER_NS, "A", dns.rcode.NXDOMAIN),
    (f"_nope._tcp.{WEB}", "SRV", dns.rcode.NXDOMAIN),
]
# What must come back exactly as the query put it: ID, RD/CD, EDNS (DO, payload), case.
VARIANTS: list[dict[str, Any]] = [
    {"qid": 1}, {"qid": 0xFFFF, "rd": False}, {"qid": 7, "cd": True},
    {"qid": 8, "edns": 0}, {"qid": 9, "edns": 0, "do": True},
    {"qid": 10, "edns": 0, "payload": 512, "rd": False, "cd": True},
]


def fresh() -> Handler:
    return Handler(build_cache(IMPORTS, SLICES).zone, DEFAULT_UDP_CAP)


def mixed_case(name: str) -> str:
    return "".join(c.upper() if i % 2 else c for i, c in enumerate(name))


@pytest.mark.parametrize(("qname", "qtype", "rcode"), NEGATIVE,
                         ids=[f"{n}-{t}" for n, t, _ in NEGATIVE])
def test_a_remembered_negative_gives_the_bytes_of_a_fresh_one(
        qname: str, qtype: str, rcode: int, monkeypatch: pytest.MonkeyPatch) -> None:
    handler = fresh()
    first = ask(handler, query(qname, qtype, qid=0x4242))  # works it out, remembers it
    assert first.rcode == rcode
    assert len(handler.zone.negatives) == 1
    # From now on the fast path finds it remembered: it is never worked out again.
    monkeypatch.setattr(handler, "_negative", lambda key: pytest.fail(f"{key!r} again"))
    for kw in VARIANTS:
        for name in (qname, qname.upper(), mixed_case(qname)):
            data = query(name, qtype, **kw)
            remembered = handler.handle(data, False)
            # _slow never reads the remembered answers: it works the answer out again.
            assert remembered == handler._slow(data, False), (name, kw)
            assert remembered is not None
            assert remembered[:2] == data[:2]
            assert ask(handler, data).msg.question[0].name.to_text() == name  # case kept
    assert len(handler.zone.negatives) == 1  # one key for every case and variant


def test_hits_and_slow_path_answers_are_not_remembered() -> None:
    handler = fresh()
    ask(handler, query(WEB, "A"))
    assert ask(handler, query("example.com.", "A")).rcode == dns.rcode.REFUSED
    assert ask(handler, query(TYPO, "A", rdclass="CH")).rcode == dns.rcode.REFUSED
    assert ask(handler, query(WEB, "ANY")).rcode == dns.rcode.NOERROR
    assert handler.zone.negatives == {}


@pytest.mark.parametrize("qtype", ["TYPE507", "TYPE508", "TYPE511"])
def test_a_type_with_the_low_byte_of_ixfr_axfr_or_any_is_remembered(qtype: str) -> None:
    """Types 507, 508 and 511 are plain types (their high byte is not 0): their
    negatives are remembered like any other's, not left to the slow path."""
    handler = fresh()
    for name in (TYPO, WEB):
        data = query(name, qtype)
        assert ask(handler, data).rcode == (dns.rcode.NXDOMAIN if name == TYPO
                                            else dns.rcode.NOERROR)
        assert handler.handle(data, False) == handler._slow(data, False)
    assert len(handler.zone.negatives) == 2


def test_not_remembered_before_the_first_sync() -> None:
    cache = build_cache(IMPORTS, SLICES, synced=False)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    for _ in range(2):
        assert ask(handler, query(TYPO, "A")).rcode == dns.rcode.SERVFAIL
    assert list(cache.zone.negatives) == []


def remembered_then(change: Any) -> tuple[Cache, Handler, int]:
    cache = build_cache(IMPORTS, SLICES)
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    ask(handler, query(TYPO, "A"))
    ask(handler, query(WEB, "AAAA"))
    assert len(cache.zone.negatives) == 2
    serial = cache.zone.serial
    cache.apply(change)
    return cache, handler, serial


def test_a_new_name_empties_them_and_is_answered() -> None:
    imp = convert.service_import(service_import("wbe", ips=["10.1.0.9"]))
    cache, handler, serial = remembered_then([PutImport(("prod", "wbe"), imp)])
    assert cache.zone.negatives == {}
    reply = ask(handler, query(TYPO, "A"))
    assert reply.rcode == dns.rcode.NOERROR
    assert reply.answer == [f"{TYPO} 5 in a 10.1.0.9"]
    nodata = ask(handler, query(WEB, "AAAA"))  # worked out again: carries the new serial
    assert nodata.msg.authority[0][0].serial == cache.zone.serial != serial


def test_a_change_of_addresses_empties_them() -> None:
    dual = convert.service_import(service_import("web", ips=["10.1.0.1", "fd00::1"],
                                                 ports=[port(80, "TCP", "http")]))
    cache, handler, _ = remembered_then([PutImport(("prod", "web"), dual)])
    assert cache.zone.negatives == {}
    assert ask(handler, query(WEB, "AAAA")).answer == [f"{WEB} 5 in aaaa fd00::1"]


def test_losing_sync_empties_them() -> None:
    cache, handler, serial = remembered_then([SetSynced(False)])
    assert cache.zone.serial == serial  # no rebuild: only the sync flag moved
    assert cache.zone.negatives == {}
    assert ask(handler, query(TYPO, "A")).rcode == dns.rcode.SERVFAIL
    assert ask(handler, query(WEB, "AAAA")).rcode == dns.rcode.NOERROR


def test_the_cap_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handler_module, "NEGATIVES_CAP", 4)
    handler = fresh()
    for i in range(11):
        name = f"typo-{i}.prod.{Z}"
        data = query(name, "A", qid=i)
        assert ask(handler, data).rcode == dns.rcode.NXDOMAIN
        assert handler.handle(data, False) == handler._slow(data, False)
        assert 1 <= len(handler.zone.negatives) <= 4
    # Full means start over: the latest names are the ones remembered.
    assert any(key.startswith(b"\x07typo-10") for key in handler.zone.negatives)
