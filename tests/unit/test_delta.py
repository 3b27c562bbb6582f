"""Updates of a large Headless service by difference (delta.py) equal a rebuild.

Two caches take the same updates: one rebuilds every touched service whole
(``incremental_min = None``), the other applies differences from 17 endpoint
names on. After every update both must hold the same answers, names, EDE texts,
truncated forms (every rotation, several client sizes) and IXFR differences.
The updates are drawn to hit the shape's edges: readiness flips, address and
hostname changes, endpoints moving between slices, slices coming and going,
ports changing, a second address, names and addresses twice, tiers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterset_dns.base.names import ZoneNames, to_wire
from clusterset_dns.transfers.journal import Journal, diff_of
from clusterset_dns.zone import delta, rrs
from clusterset_dns.zone.cache import (
    Cache,
    Change,
    Op,
    PutImport,
    PutSlice,
    RebuildError,
    ReplaceImports,
    ReplaceSlices,
    SetClusterId,
    SetSynced,
)
from clusterset_dns.zone.model import (
    Endpoint,
    EndpointSlice,
    ObjectKey,
    Port,
    Prefer,
    ServiceImport,
    ServiceType,
)
from clusterset_dns.zone.wire import Answer

from .helpers import ZONE

V4 = [ipaddress.IPv4Address(0x0A000000 + i) for i in range(1, 90)]
V6 = [ipaddress.IPv6Address(0xFD00 << 112 | i) for i in range(1, 12)]
HOSTS = ["h0", "h1", "web-0", "x" * 40]
CLUSTERS = ["east", "east", "west.eu"]
PORT_SETS = [
    (Port("http", "tcp", 80), Port("", "tcp", 8080), Port("dns", "udp", 53),
     Port("dns", "tcp", 53)),
    (Port("http", "tcp", 80),),
    (),
    (Port("p" * 40, "tcp", 9000), Port("q", "sctp", 9001)),
]
SERVICE: ObjectKey = ("prod", "web")
SLICE_NAMES = ["web-a", "web-b", "web-c", "web-d"]


def _endpoint(data: st.DataObject) -> Endpoint:
    """Mostly of the shape delta.py takes (one address, no name or address twice); in
    some examples, now and then not (a second address, an address or a hostname from
    a small pool)."""
    odd = data.draw(st.integers(0, 29)) if data.draw(st.integers(0, 29)) == 0 else 29
    if odd == 0:
        addresses: tuple[Any, ...] = (data.draw(st.sampled_from(V4)),
                                      data.draw(st.sampled_from(V6)))
    elif odd == 1:
        addresses = (data.draw(st.sampled_from(V4[:4])),)  # likely twice
    elif odd < 4:
        addresses = (ipaddress.IPv6Address(0xFD00 << 112 | data.draw(st.integers(1, 10**6))),)
    else:
        addresses = (ipaddress.IPv4Address(0x0A000000 + data.draw(st.integers(1, 10**6))),)
    hostname = data.draw(st.sampled_from(HOSTS)) if odd == 4 else None
    return Endpoint(addresses, hostname, zone=data.draw(st.sampled_from([None, "z1"])))


def _slice(data: st.DataObject, name: str, ports: tuple[Port, ...], size: int) -> EndpointSlice:
    ready = tuple(_endpoint(data) for _ in range(size))
    ports = ports if data.draw(st.integers(0, 9)) else data.draw(st.sampled_from(PORT_SETS))
    down = tuple(_endpoint(data) for _ in range(data.draw(st.integers(0, 2))))
    return EndpointSlice("prod", name, "web", data.draw(st.sampled_from(CLUSTERS)), ready,
                         ports, not_ready=down)


def _changed(data: st.DataObject, piece: EndpointSlice, ports: tuple[Port, ...]
             ) -> EndpointSlice | None:
    ready, down = list(piece.endpoints), list(piece.not_ready)
    for _ in range(data.draw(st.integers(1, 3))):
        step = data.draw(st.sampled_from(["flip", "flip", "back", "add", "drop", "readdress",
                                          "ports", "delete"]))
        if step == "flip" and ready:
            down.append(ready.pop(data.draw(st.integers(0, len(ready) - 1))))
        elif step == "back" and down:
            ready.insert(data.draw(st.integers(0, len(ready))), down.pop())
        elif step == "add":
            ready.append(_endpoint(data))
        elif step == "drop" and ready:
            ready.pop(data.draw(st.integers(0, len(ready) - 1)))
        elif step == "readdress" and ready:
            ready[data.draw(st.integers(0, len(ready) - 1))] = _endpoint(data)
        elif step == "ports":
            ports = data.draw(st.sampled_from(PORT_SETS))
        elif step == "delete":
            return None
    return EndpointSlice(piece.namespace, piece.name, piece.service, piece.cluster,
                         tuple(ready), ports, not_ready=tuple(down))


def _same_zone(a: Cache, b: Cache) -> None:
    za, zb = a.zone, b.zone
    assert za.serial == zb.serial
    # Whether an endpoint name is encoded now or on first use (Zone.hosts), its
    # answer is the same.
    assert {k: (v.heads, v.body) for k, v in za.every_answer()} == \
        {k: (v.heads, v.body) for k, v in zb.every_answer()}
    assert za.names == zb.names
    assert za.explained == zb.explained
    assert za.cuts.keys() == zb.cuts.keys()
    for key, cuts in za.cuts.items():
        for rotation in range(4):
            for room in (300, 1200, 4000, 65000):
                assert cuts.form(rotation, room, 12 + len(key)) == \
                    zb.cuts[key].form(rotation, room, 12 + len(key)), key


def _cache(minimum: int | None) -> tuple[Cache, Journal]:
    cache = Cache(ZoneNames(ZONE), 5, clock=lambda: 1_000_000.0)
    cache.incremental_min = minimum
    journal = Journal(1000)
    cache.on_change = journal.record
    return cache, journal


@pytest.mark.timeout(600)
@settings(max_examples=80, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_updates_by_difference_equal_a_rebuild(data: st.DataObject) -> None:
    ports = data.draw(st.sampled_from(PORT_SETS[:2]))
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), ports)
    slices = {("prod", name): _slice(data, name, ports, data.draw(st.integers(4, 12)))
              for name in SLICE_NAMES[:3]}
    whole, whole_journal = _cache(None)
    diff, diff_journal = _cache(17)
    for cache in (whole, diff):
        cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices(slices), SetSynced(True)])
        cache.apply([PutSlice(key, piece) for key, piece in slices.items()][:1])
    for _ in range(data.draw(st.integers(1, 8))):
        ops: list[Op] = []
        for name in data.draw(st.lists(st.sampled_from(SLICE_NAMES), min_size=1, max_size=2,
                                       unique=True)):
            key = ("prod", name)
            old = slices.get(key)
            new = (_changed(data, old, old.ports)
                   if old is not None else _slice(data, name, ports, 6))
            ops.append(PutSlice(key, new))
            if new is None:
                slices.pop(key, None)
            else:
                slices[key] = new
        extra = data.draw(st.integers(0, 12))
        if extra == 0:
            imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), ports,
                                prefer=data.draw(st.sampled_from(list(Prefer))))
            ops.append(PutImport(SERVICE, imp))
        elif extra == 1:
            ops.append(SetClusterId(data.draw(st.sampled_from([None, "east"]))))
        elif extra == 2 and len(slices) > 1:  # an endpoint moves to another slice
            source, sink = data.draw(st.lists(st.sampled_from(sorted(slices)), min_size=2,
                                              max_size=2, unique=True))
            if slices[source].endpoints:
                moved = slices[source].endpoints[-1]
                slices[source] = replace(slices[source],
                                         endpoints=slices[source].endpoints[:-1])
                slices[sink] = replace(slices[sink],
                                       endpoints=(moved, *slices[sink].endpoints))
                ops += [PutSlice(sink, slices[sink]), PutSlice(source, slices[source])]
        whole.apply(ops)
        diff.apply(ops)
        _same_zone(whole, diff)
        assert [(d.old_serial, d.new_serial, d.removed, d.added) for d in whole_journal.diffs] \
            == [(d.old_serial, d.new_serial, d.removed, d.added) for d in diff_journal.diffs]


def _large(count: int, per: int = 100) -> tuple[ServiceImport, dict[ObjectKey, EndpointSlice]]:
    ports = (Port("http", "tcp", 80), Port("grpc", "tcp", 9090))
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), ports)
    slices = {}
    for s in range(count // per):
        endpoints = tuple(Endpoint((ipaddress.IPv4Address(0x0A000000 + s * per + i),), None)
                          for i in range(per))
        slices[("prod", f"web-{s}")] = EndpointSlice("prod", f"web-{s}", "web", "east",
                                                     endpoints, ports)
    return imp, slices


@pytest.mark.parametrize("flipped", [0, 1999])  # within and past the cut SRV answers
def test_a_readiness_flip_changes_only_what_it_changes(flipped: int) -> None:
    """A flip of one endpoint in 2,000: the same zone as a rebuild, and the IXFR
    difference holds the endpoint's own record and its SRV records (and the service's
    A record) only."""
    imp, slices = _large(2000)
    caches = [_cache(None), _cache(256)]
    for cache, _ in caches:
        cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices(slices), SetSynced(True)])
        cache.apply([PutSlice(("prod", "web-0"), slices[("prod", "web-0")])])  # after the sync
    key = ("prod", f"web-{flipped // 100}")
    piece = slices[key]
    ready = list(piece.endpoints)
    down = ready.pop(flipped % 100)
    flip = EndpointSlice("prod", key[1], "web", "east", tuple(ready), piece.ports,
                         not_ready=(down,))
    for cache, _ in caches:
        cache.apply([PutSlice(key, flip)])
    (whole, whole_journal), (diff, diff_journal) = caches
    assert SERVICE in diff._headless
    _same_zone(whole, diff)
    assert whole_journal.diffs[-1].removed == diff_journal.diffs[-1].removed
    assert whole_journal.diffs[-1].added == diff_journal.diffs[-1].added
    svc = ("web", "prod", "svc", "clusterset", "local")
    endpoint_name = to_wire((f"10-0-{flipped // 256}-{flipped % 256}".encode(), b"east",
                             *(label.encode() for label in svc)))
    owners = {to_wire(tuple(label.encode() for label in (*head, *svc)))
              for head in ((), ("_http", "_tcp"), ("_grpc", "_tcp"))}
    removed = {record.owner for record in diff_journal.diffs[-1].removed}
    assert endpoint_name in removed
    assert removed <= owners | {endpoint_name}
    # what joins: records a cut answer had no room for (none past the cut)
    assert {record.owner for record in diff_journal.diffs[-1].added} <= owners
    assert bool(diff_journal.diffs[-1].added) == (flipped < 1000)
    assert endpoint_name in diff.zone.explained  # "endpoint not ready"


@pytest.mark.parametrize("flipped", [0, 1999])
def test_ixfr_difference_of_large_answers_equals_their_decoded_records(
        flipped: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """journal.diff_of compares the records of large answers as bytes, decoding none of
    them whole: the difference is the one rrs.answer_records' decoded records give."""
    imp, slices = _large(2000)
    cache = Cache(ZoneNames(ZONE), 5)
    seen: list[list[Change]] = []
    cache.on_change = lambda _old, _new, changes: seen.append(changes or [])
    cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices(slices), SetSynced(True)])
    key = ("prod", f"web-{flipped // 100}")
    piece = slices[key]
    ready = list(piece.endpoints)
    down = ready.pop(flipped % 100)
    cache.apply([PutSlice(key, replace(piece, endpoints=tuple(ready), not_ready=(down,)))])
    changes = seen[-1]
    assert any(after is not None and len(after.body) > 30_000 for _, _, after in changes)
    removed: set[rrs.Record] = set()
    added: set[rrs.Record] = set()
    for answer_key, before, after in changes:
        if answer_key[-4:-2] == b"\x00\x06":
            continue
        old = set(rrs.answer_records(answer_key, before)) if before is not None else set()
        new = set(rrs.answer_records(answer_key, after)) if after is not None else set()
        removed |= old - new
        added |= new - old
    decoded: list[int] = []
    answer_records = rrs.answer_records

    def counted(answer_key: bytes, answer: Answer) -> Iterator[rrs.Record]:
        decoded.append(len(answer.body))
        return answer_records(answer_key, answer)

    monkeypatch.setattr(rrs, "answer_records", counted)
    diff = diff_of(1, 2, changes)
    assert max(decoded, default=0) < 1000
    assert (diff.removed, diff.added) == (tuple(sorted(removed)), tuple(sorted(added)))
    assert removed


def test_a_bug_in_the_difference_keeps_the_service_and_the_next_update_rebuilds_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug (an exception) while applying a difference: apply raises RebuildError, the
    service keeps answering, and the next update rebuilds it whole: no answer of the
    lists left half-changed survives."""
    imp, slices = _large(400)
    (whole, _), (diff, _) = _cache(None), _cache(256)
    key = ("prod", "web-1")
    piece = slices[key]
    flipped = replace(piece, endpoints=piece.endpoints[1:], not_ready=piece.endpoints[:1])
    for cache in (whole, diff):
        cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices(slices), SetSynced(True)])
        cache.apply([PutSlice(key, flipped)])
        cache.apply([PutSlice(key, piece)])
    assert SERVICE in diff._headless

    def broken(*_args: object) -> None:
        raise RuntimeError("bug")

    whole.apply([PutSlice(key, flipped)])
    monkeypatch.setattr(delta, "_srv", broken)
    with pytest.raises(RebuildError):
        diff.apply([PutSlice(key, flipped)])
    assert SERVICE not in diff._headless
    monkeypatch.undo()
    later = replace(piece, endpoints=piece.endpoints[2:], not_ready=piece.endpoints[:2])
    for cache in (whole, diff):
        cache.apply([PutSlice(key, later)])
    _same_zone(whole, diff)
