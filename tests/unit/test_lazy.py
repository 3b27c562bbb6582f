"""Endpoint names answered on first use (Zone.hosts) answer exactly what the answers
encoded at update time did.

Two caches take the same updates: one builds lazily (the server's way), one encodes
every answer (``Cache(lazy=False)``). Every name either has, its siblings, children
and made-up names, in every type, in lower and mixed case, with and without EDNS,
over UDP and TCP, get the same bytes from both; so do the zone's records (dump,
AXFR) and the journal's changes (IXFR).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process.dump import zone_lines
from clusterset_dns.serving.handler import Handler
from clusterset_dns.transfers import zonedata
from clusterset_dns.zone import firstuse, wire
from clusterset_dns.zone.cache import (
    Cache,
    Change,
    Op,
    PutImport,
    PutSlice,
    ReplaceImports,
    ReplaceSlices,
    SetSynced,
)
from clusterset_dns.zone.model import Endpoint, EndpointSlice, Port, ServiceImport, ServiceType

from .helpers import DEFAULT_UDP_CAP, ZONE, clock_at
from .test_properties import OBJECTS, to_op

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TYPES = (wire.A, wire.AAAA, wire.SRV, wire.TXT, wire.ANY, 15)  # 15: MX, none here
_OPT = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"  # option-less OPT, 1232 bytes

# -- valid ClusterSets of Headless services (the names this is about) ----------------------

CLUSTERS = st.sampled_from(["east", "west", "c.eu", None])
HOSTS = st.sampled_from(["h0", "h1", "web-0", None])


@st.composite
def _endpoint(draw: st.DrawFn) -> Endpoint:
    kind = draw(st.integers(0, 9))
    v4 = ipaddress.IPv4Address(0x0A000000 + draw(st.integers(1, 40)))
    v6 = ipaddress.IPv6Address((0xFD00 << 112) + draw(st.integers(1, 40)))
    addresses: tuple[Any, ...] = (v4, v6) if kind == 0 else (v6,) if kind == 1 else (v4,)
    return Endpoint(addresses, draw(HOSTS), zone=draw(st.sampled_from([None, "z1"])))


@st.composite
def _slice(draw: st.DrawFn, name: str) -> EndpointSlice:
    return EndpointSlice("prod", name, draw(st.sampled_from(["web", "db"])), draw(CLUSTERS),
                         tuple(draw(st.lists(_endpoint(), max_size=5))),
                         (Port("http", "tcp", 80),),
                         not_ready=tuple(draw(st.lists(_endpoint(), max_size=1))))


@st.composite
def headless_updates(draw: st.DrawFn) -> list[list[Op]]:
    """A first list, then a few updates: slices put, changed and deleted, or the same
    slice with its endpoints' addresses moved (names kept: what a remembered answer
    must not outlive)."""
    imports = {("prod", svc): ServiceImport("prod", svc, ServiceType.HEADLESS, (),
                                            (Port("http", "tcp", 80),))
               for svc in ("web", "db")}
    names = [f"s{i}" for i in range(4)]
    first = {("prod", n): draw(_slice(n)) for n in draw(st.lists(st.sampled_from(names),
                                                                 max_size=4))}
    steps: list[list[Op]] = [[ReplaceImports(imports), ReplaceSlices(first), SetSynced(True)]]
    now = dict(first)
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.sampled_from(names))
        old = now.get(("prod", n))
        if old is not None and draw(st.booleans()):
            piece: EndpointSlice | None = replace(old, endpoints=tuple(
                replace(e, addresses=tuple(ipaddress.ip_address(int(ip) + draw(
                    st.integers(0, 2))) for ip in e.addresses)) for e in old.endpoints))
        else:
            piece = draw(st.one_of(st.none(), _slice(n)))
        now[("prod", n)] = piece  # type: ignore[assignment]
        steps.append([PutSlice(("prod", n), piece)])
    return steps


# -- the two caches ---------------------------------------------------------------------------

def _pair() -> tuple[Cache, Cache, list[set[tuple[bytes, bytes | None, bytes | None]]],
                     list[set[tuple[bytes, bytes | None, bytes | None]]]]:
    def journal(into: list[set[tuple[bytes, bytes | None, bytes | None]]]) -> Any:
        def note(_old: int, _new: int, changes: list[Change] | None) -> None:
            into.append({(key, None if before is None else before.body,
                          None if after is None else after.body)
                         for key, before, after in changes or ()})
        return note

    lazy_log: list[set[tuple[bytes, bytes | None, bytes | None]]] = []
    eager_log: list[set[tuple[bytes, bytes | None, bytes | None]]] = []
    def clock() -> float:
        return 1_700_000_000.0  # one serial for both

    lazy = Cache(ZoneNames(ZONE), 5, on_change=journal(lazy_log), clock=clock)
    eager = Cache(ZoneNames(ZONE), 5, on_change=journal(eager_log), lazy=False, clock=clock)
    return lazy, eager, lazy_log, eager_log


def _query(name: bytes, qtype: int, edns: bool) -> bytes:
    return (b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00" + (b"\x00\x01" if edns else b"\x00\x00")
            + name + struct.pack("!HH", qtype, wire.CLASS_IN) + (_OPT if edns else b""))


def _mixed(name: bytes) -> bytes:
    return bytes(c - 32 if i % 2 and 97 <= c <= 122 else c for i, c in enumerate(name))


def _names(eager: Cache) -> set[bytes]:
    """Every name of the zone, and around each: a made-up sibling and child."""
    found = {key[:-4] for key in eager.zone.answers} | set(eager.zone.names)
    around = set(found)
    for name in found:
        around.add(b"\x04nope" + name[name[0] + 1:] if name != b"\x00" else name)
        around.add(b"\x01x" + name)
    return around


def _same(lazy: Cache, eager: Cache) -> None:
    assert not eager.zone.hosts
    za, zb = lazy.zone, eager.zone
    assert za.serial == zb.serial
    assert {k: (v.heads, v.body) for k, v in za.every_answer()} == \
        {k: (v.heads, v.body) for k, v in zb.answers.items()}
    assert za.names == zb.names
    assert za.explained == zb.explained
    assert za.count() == len(zb.answers)
    assert zone_lines(lazy) == zone_lines(eager)
    assert set(zonedata.take(za).records()) == set(zonedata.take(zb).records())
    ha, hb = Handler(za, DEFAULT_UDP_CAP), Handler(zb, DEFAULT_UDP_CAP)
    clock_at(ha, 0.0)
    clock_at(hb, 0.0)
    for name in sorted(_names(eager)):
        for qtype in TYPES:
            for asked in {name, _mixed(name)}:
                for edns in (False, True):
                    for tcp in (False, True):
                        q = _query(asked, qtype, edns)
                        # Twice: the first use, then what was remembered of it.
                        for _ in range(2):
                            assert ha.handle(q, tcp) == hb.handle(q, tcp), (asked, qtype)


# The default budget, and one of a few answers a half: the memory turns all the time.
BUDGETS = st.sampled_from([firstuse.BUDGET, 600])


@pytest.mark.timeout(300)
@SETTINGS
@given(headless_updates(), BUDGETS)
def test_first_use_answers_what_the_encoded_answers_did(steps: list[list[Op]],
                                                        budget: int) -> None:
    """After every update, with what earlier updates left remembered."""
    lazy, eager, lazy_log, eager_log = _pair()
    lazy.zone.first_use.budget = budget
    for ops in steps:
        lazy.apply(ops)
        eager.apply(ops)
        _same(lazy, eager)
    assert lazy_log == eager_log


@pytest.mark.timeout(300)
@SETTINGS
@given(st.lists(OBJECTS, max_size=10), BUDGETS)
def test_first_use_over_any_objects(objects: list[dict[str, Any]], budget: int) -> None:
    """The property suite's universe: colliding names, limits, junk, bulk lists."""
    ops = [op for op in map(to_op, objects) if op is not None]
    lazy, eager, lazy_log, eager_log = _pair()
    lazy.zone.first_use.budget = budget
    for cache in (lazy, eager):
        cache.apply([SetSynced(True)])
    for op in ops:
        for cache in (lazy, eager):
            cache.apply([op])
        _same(lazy, eager)
    assert lazy_log == eager_log


# -- the index and the memory of what was encoded -------------------------------------------

V4 = ipaddress.IPv4Address("10.0.0.1")


def _one(cache: Cache, cluster: str = "east", address: Any = V4, service: str = "web") -> None:
    cache.apply([PutImport(("prod", service), ServiceImport(
                    "prod", service, ServiceType.HEADLESS, (), (Port("http", "tcp", 80),))),
                 PutSlice(("prod", f"{service}-1"), EndpointSlice(
                     "prod", f"{service}-1", service, cluster,
                     (Endpoint((address,), "h0"),), (Port("http", "tcp", 80),))),
                 SetSynced(True)])


def _key(name: str, qtype: int = wire.A) -> bytes:
    out = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00"
    return out + struct.pack("!HH", qtype, wire.CLASS_IN)


def test_an_endpoint_name_is_indexed_not_encoded() -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    _one(cache)
    key = _key(f"h0.east.web.prod.svc.{ZONE}")
    assert key not in cache.zone.answers
    assert cache.zone.hosts == {key[3:-4]: {b"\x02h0": V4.packed}}
    answer = cache.zone.cold(key)
    assert answer is not None and answer.body.endswith(V4.packed)
    assert cache.zone.cold(_key(f"h0.east.web.prod.svc.{ZONE}", wire.AAAA)) is None
    assert cache.zone.cold(_key(f"h1.east.web.prod.svc.{ZONE}")) is None
    assert cache.zone.cold(b"") is None and cache.zone.cold(b"\x00\x00\x01\x00\x01") is None


def _serve(cache: Cache, service: str, hosts: dict[str, str], cluster: str = "east") -> None:
    """Service ``service`` with one endpoint a host name -> its address."""
    cache.apply([PutImport(("prod", service), ServiceImport(
                    "prod", service, ServiceType.HEADLESS, (), (Port("http", "tcp", 80),))),
                 PutSlice(("prod", f"{service}-1"), EndpointSlice(
                     "prod", f"{service}-1", service, cluster,
                     tuple(Endpoint((ipaddress.ip_address(ip),), host)
                           for host, ip in hosts.items()), (Port("http", "tcp", 80),))),
                 SetSynced(True)])


def _ask(handler: Handler, name: str, qtype: int = wire.A) -> bytes:
    # Over TCP: the remembered responses (UDP only) do not answer before the zone.
    reply = handler.handle(_query(_key(name)[:-4], qtype, False), True)
    assert reply is not None
    return reply


def test_the_first_use_memory_is_bounded_in_bytes_least_recently_used_first() -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    _serve(cache, "web", {f"h{i}": f"10.0.0.{i + 1}" for i in range(4)})
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    memory = cache.zone.first_use
    keys = [_key(f"h{i}.east.web.prod.svc.{ZONE}") for i in range(4)]
    one = firstuse.cost(keys[0], cache.zone.cold(keys[0]))  # type: ignore[arg-type]
    assert one == len(keys[0]) + 16 + firstuse.OVERHEAD  # owner pointer, head, 4 bytes
    memory.budget = 4 * one  # each half: two answers exactly
    for i in (0, 1):
        _ask(handler, f"h{i}.east.web.prod.svc.{ZONE}")
    assert memory.order() == keys[:2] and memory.recent_used == 2 * one  # the one that fits
    _ask(handler, f"h2.east.web.prod.svc.{ZONE}")  # passes the half: it turns
    assert memory.order() == keys[:3] and (memory.older_used, memory.recent_used) == (2 * one, one)
    _ask(handler, f"h0.east.web.prod.svc.{ZONE}")  # used again: back to the recent half
    assert memory.order() == [keys[1], keys[2], keys[0]]
    assert memory.used == 3 * one
    reply = _ask(handler, f"h3.east.web.prod.svc.{ZONE}")  # turns: h1, least recently used, goes
    assert reply.endswith(bytes([10, 0, 0, 4]))
    assert memory.order() == [keys[2], keys[0], keys[3]] and memory.used == 3 * one
    assert memory.used <= memory.budget
    for i in range(4):  # what went is encoded again, the same bytes
        assert _ask(handler, f"h{i}.east.web.prod.svc.{ZONE}").endswith(bytes([10, 0, 0, i + 1]))
    # One byte less: the second answer no longer fits beside the first.
    small = Cache(ZoneNames(ZONE), 5)
    _serve(small, "web", {f"h{i}": f"10.0.0.{i + 1}" for i in range(4)})
    small.zone.first_use.budget = 4 * one - 2
    handler = Handler(small.zone, DEFAULT_UDP_CAP)
    for i in (0, 1):
        _ask(handler, f"h{i}.east.web.prod.svc.{ZONE}")
    assert (small.zone.first_use.older_used, small.zone.first_use.recent_used) == (one, one)


def test_an_update_keeps_the_remembered_answers_of_other_names_only() -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    _serve(cache, "web", {"h0": "10.0.0.1", "h1": "10.0.0.2"})
    _serve(cache, "db", {"h0": "10.0.1.1"})
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    memory = cache.zone.first_use
    web0, web1 = (f"h{i}.east.web.prod.svc.{ZONE}" for i in (0, 1))
    db0 = f"h0.east.db.prod.svc.{ZONE}"
    missing = f"nope.east.web.prod.svc.{ZONE}"
    for name in (web0, web1, db0, missing):
        _ask(handler, name)
    assert set(memory.order()) == {_key(web0), _key(web1), _key(db0)}
    soa_before = _ask(handler, missing)[-20:]  # its SOA's serial ... minimum
    _serve(cache, "web", {"h0": "10.0.0.9", "h1": "10.0.0.2"})  # web's h0 moves
    assert set(memory.order()) == {_key(web1), _key(db0)}  # db's and web's h1 stay
    assert _ask(handler, web0).endswith(bytes([10, 0, 0, 9]))
    assert _ask(handler, missing)[-20:] != soa_before  # the negative's SOA: the new serial
    assert _ask(handler, missing)[-20:-16] == cache.zone.serial.to_bytes(4, "big")
    _serve(cache, "web", {"h0": "fd00::9", "h1": "10.0.0.2"})  # another family: A is NODATA
    assert _key(web0) not in memory and _key(web1) in memory
    assert _ask(handler, web0, wire.AAAA).endswith(ipaddress.ip_address("fd00::9").packed)
    assert _ask(handler, web0)[3] & 0x0F == 0 and _ask(handler, web0)[6:8] == b"\x00\x00"
    _serve(cache, "db", {"h0": "10.0.1.1"}, cluster="west")  # db moves to another cluster
    assert _key(db0) not in memory and _key(web1) in memory
    assert _ask(handler, db0)[3] & 0x0F == 3  # NXDOMAIN
    cache.apply([PutSlice(("prod", "web-1"), None)])  # web's names go
    assert not any(key.endswith(_key(f"east.web.prod.svc.{ZONE}")) for key in memory.order())
    assert _ask(handler, web1)[3] & 0x0F == 3


def test_a_change_empties_what_was_encoded_and_the_index_follows() -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    _one(cache)
    _one(cache, service="db")
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    key = _key(f"h0.east.web.prod.svc.{ZONE}")
    handler.handle(_query(key[:-4], wire.A, False), False)
    assert key in cache.zone.first_use
    _one(cache, address=ipaddress.IPv4Address("10.0.0.2"))  # the service changes
    assert key not in cache.zone.first_use
    reply = handler.handle(_query(key[:-4], wire.A, False), False)
    assert reply is not None and reply.endswith(bytes([10, 0, 0, 2]))
    db = _key(f"h0.east.db.prod.svc.{ZONE}")[:-4]
    assert set(cache.zone.hosts) == {key[3:-4], db[3:]}  # the other service's stays
    _one(cache, cluster="west")  # another cluster: the old parent goes
    assert set(cache.zone.hosts) == {_key(f"west.web.prod.svc.{ZONE}")[:-4], db[3:]}
    cache.apply([PutSlice(("prod", "web-1"), None)])
    assert set(cache.zone.hosts) == {db[3:]}


@pytest.mark.parametrize("second", ["10.0.1.{}", "fd00::{}"])  # glue of one size, of two
def test_a_port_name_with_its_service_names_records_is_answered_from_that_answer(
        second: str) -> None:
    lazy, eager, _, _ = _pair()
    hosts = {f"h{i}": ("10.0.0.{}" if i % 2 else second).format(i + 1) for i in range(30)}
    for cache in (lazy, eager):
        _serve(cache, "web", hosts)
    bare = _key(f"web.prod.svc.{ZONE}", wire.SRV)
    port = _key(f"_http._tcp.web.prod.svc.{ZONE}", wire.SRV)
    assert lazy.zone.derived == {port: bare} and port not in lazy.zone.answers
    assert lazy.zone.cuts[port] is lazy.zone.cuts[bare]  # 30 targets: cut for small clients
    encoded, shifted = eager.zone.answers[port], lazy.zone.cold(port)
    assert shifted is not None and shifted.glue_at > 0
    assert (shifted.heads, shifted.body, shifted.glue_at) == (encoded.heads, encoded.body,
                                                              encoded.glue_at)
    _same(lazy, eager)  # every type, case, transport and size (the cut forms too)
    # Another named port: the service name's records are no longer the port name's.
    piece = lazy.slices[("prod", "web-1")]
    for cache in (lazy, eager):
        cache.apply([PutSlice(("prod", "web-1"), replace(
            piece, ports=(Port("http", "tcp", 80), Port("dns", "udp", 53))))])
    assert not lazy.zone.derived and port in lazy.zone.answers
    _same(lazy, eager)


def test_the_slow_path_answers_from_the_first_use_memory_too() -> None:
    """A query the fast path leaves (an EDNS option: a resolver's cookie) gets the
    remembered answer, and remembers what it encodes, as the fast path does."""
    cache = Cache(ZoneNames(ZONE), 5)
    _serve(cache, "web", {f"h{i}": f"10.0.0.{i + 1}" for i in range(30)})
    handler = Handler(cache.zone, DEFAULT_UDP_CAP)
    memory = cache.zone.first_use
    cookie = b"\x00\x0a\x00\x08" + bytes(range(8))  # option COOKIE, a client cookie

    def ask(name: str, qtype: int) -> bytes:
        query = _query(_key(name)[:-4], qtype, True)
        query = query[:-2] + len(cookie).to_bytes(2) + cookie  # the OPT's RDATA
        reply = handler.handle(query, True)
        assert reply is not None and reply[3] & 0x0F == 0
        return reply

    port = f"_http._tcp.web.prod.svc.{ZONE}"
    for name, qtype in ((f"h0.east.web.prod.svc.{ZONE}", wire.A), (port, wire.SRV)):
        assert _key(name, qtype) not in memory
        first = ask(name, qtype)
        assert _key(name, qtype) in memory  # encoded once, remembered
        assert ask(name, qtype) == first
    remembered = memory.get(_key(port, wire.SRV))
    assert remembered is not None and remembered.body in ask(port, wire.SRV)
