"""Differences (delta.py) of services past what test_delta's drawn services reach: SRV
answers with glue whose targets lie past a compression pointer's reach, SRV answers
without glue that still fit one message, answers cut in their second port, both
address families. After every update the zone equals a full rebuild's (answers, names,
EDE texts, every truncated form) and the service stayed on the difference path."""

from __future__ import annotations

import ipaddress
from dataclasses import replace

import pytest

from clusterset_dns.base.names import ZoneNames, to_wire
from clusterset_dns.transfers.journal import Journal
from clusterset_dns.zone import delta, truncate
from clusterset_dns.zone.cache import (
    Cache,
    PutImport,
    PutSlice,
    ReplaceImports,
    ReplaceSlices,
    SetClusterId,
    SetSynced,
)
from clusterset_dns.zone.model import (
    IP,
    Endpoint,
    EndpointSlice,
    ObjectKey,
    Port,
    Prefer,
    ServiceImport,
    ServiceType,
)

from .helpers import ZONE
from .test_delta import SERVICE, _same_zone

HTTP = Port("http", "tcp", 80)
GRPC = Port("grpc", "tcp", 9090)
PER = 100  # endpoints a slice
SVC = (b"web", b"prod", b"svc", b"clusterset", b"local")


def _address(i: int, v6: bool) -> IP:
    return ipaddress.IPv6Address(0xFD00 << 112 | i) if v6 else ipaddress.IPv4Address(0x0A000000 + i)


def _slices(count: int, ports: tuple[Port, ...], v6_every: int) -> dict[ObjectKey, EndpointSlice]:
    """``count`` endpoints in slices of PER, every ``v6_every``-th one IPv6 (0: none)."""
    slices = {}
    for s in range(count // PER):
        endpoints = tuple(
            Endpoint((_address(s * PER + i, bool(v6_every) and (s * PER + i) % v6_every == 0),),
                     None)
            for i in range(PER))
        slices[("prod", f"web-{s}")] = EndpointSlice("prod", f"web-{s}", "web", "east",
                                                     endpoints, ports)
    return slices


def _caches(slices: dict[ObjectKey, EndpointSlice], ports: tuple[Port, ...],
            lazy: bool = True) -> list[Cache]:
    """Two caches holding ``slices``: one rebuilding the service whole (``lazy``: its
    endpoint names encoded on first use, Zone.hosts), one by difference."""
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), ports)
    caches = []
    for minimum in (None, 256):  # rebuilt whole; by difference
        cache = Cache(ZoneNames(ZONE), 5, clock=lambda: 1_000_000.0, lazy=lazy)
        cache.incremental_min = minimum
        cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices(slices), SetSynced(True)])
        # a change after the sync: rebuilt whole, and the lists kept from then on
        first = next(iter(slices))
        down = Endpoint((_address(90_000, False),), None)
        cache.apply([PutSlice(first, replace(slices[first], not_ready=(down,)))])
        caches.append(cache)
    return caches


# (endpoints, ports, every n-th address IPv6): the SRV answers each shape makes
SHAPES = {
    # one port: SRV records and glue fit one message; targets past 0x3FFF are owned by
    # their labels, compressed against the question's
    "glued past a pointer's reach": (600, (HTTP,), 0),
    "glued, both families": (500, (HTTP,), 3),
    # two ports, glued: the first port's records are where the glue points
    "glued, two ports": (400, (HTTP, GRPC), 0),
    # the records fit, their glue does not: no glue, not truncated
    "whole without glue": (900, (HTTP,), 0),
    # the first port's records fit, the second's are cut where the message is full
    "cut in the second port": (700, (HTTP, GRPC), 0),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_difference_equals_a_rebuild_in_every_shape(shape: str) -> None:
    count, ports, v6_every = SHAPES[shape]
    slices = _slices(count, ports, v6_every)
    whole, diff = _caches(slices, ports)
    last = ("prod", f"web-{count // PER - 1}")
    first = ("prod", "web-0")
    middle = ("prod", f"web-{count // PER // 2}")
    steps = [
        # the first endpoint not ready, then ready again
        (first, replace(slices[first], endpoints=slices[first].endpoints[1:],
                        not_ready=slices[first].endpoints[:1])),
        (first, slices[first]),
        # a not-ready endpoint whose name a ready one of another slice has: no EDE text
        (middle, replace(slices[middle], not_ready=slices[first].endpoints[:1])),
        # an endpoint of the middle with a new address (a new name, sorted elsewhere)
        (middle, replace(slices[middle], endpoints=(
            *slices[middle].endpoints[:50], Endpoint((_address(50_000, False),), None),
            *slices[middle].endpoints[51:]))),
        # the last endpoint gone; one with a hostname, sorted before every address's name
        (last, replace(slices[last], endpoints=slices[last].endpoints[:-1])),
        (last, replace(slices[last], endpoints=(
            *slices[last].endpoints[:-1], Endpoint((_address(60_000, False),), "a-host")))),
        # a slice deleted, then back
        (middle, None),
        (middle, slices[middle]),
    ]
    # and the same history: what each update changed, as the IXFR journal keeps it
    journals = (Journal(100), Journal(100))
    whole.on_change, diff.on_change = journals[0].record, journals[1].record
    lists = diff._headless[SERVICE]
    for key, piece in steps:
        for cache in (whole, diff):
            cache.apply([PutSlice(key, piece)])
        # the same lists, changed in place: a rebuild would have made new ones
        assert diff._headless[SERVICE] is lists, "rebuilt whole: not the difference's path"
        _same_zone(whole, diff)
        # and where each answer's additional section starts (a transfer leaves it out)
        assert {k: v.glue_at for k, v in whole.zone.every_answer()} == \
            {k: v.glue_at for k, v in diff.zone.every_answer()}
        for cuts in diff.zone.cuts.values():  # the handler asks each for the rotation now
            assert cuts.rotation.take() in range(truncate.ROTATIONS)
        assert [(d.old_serial, d.new_serial, d.removed, d.added) for d in journals[0].diffs] \
            == [(d.old_serial, d.new_serial, d.removed, d.added) for d in journals[1].diffs]
    assert len(journals[1].diffs) == len(steps)
    # an endpoint with two addresses, a slice whose every endpoint has two (no count of
    # one among them), or one with other ports, is not of the shape: the service is
    # rebuilt whole, every answer of the lists replaced (delta.all_keys), then kept as
    # lists again
    two = Endpoint((_address(70_000, False), _address(70_001, True)), None)
    both = tuple(Endpoint((_address(80_000 + i, False), _address(80_000 + i, True)), None)
                 for i in range(PER))
    for piece in (replace(slices[middle], endpoints=(two, *slices[middle].endpoints[1:])),
                  slices[middle], replace(slices[middle], endpoints=both), slices[middle],
                  # ports unlike the other slices'
                  replace(slices[middle], ports=(Port("other", "tcp", 81),)), slices[middle]):
        for cache in (whole, diff):
            cache.apply([PutSlice(middle, piece)])
        _same_zone(whole, diff)
    assert SERVICE in diff._headless


def test_the_glue_past_a_pointers_reach_is_owned_by_compressed_labels() -> None:
    """The name after the first label of a target, as the Encoder writes it after the
    question _http._tcp.web.prod.svc.clusterset.local: its labels up to the suffix it
    shares with the question, then a pointer to that suffix."""
    owner = (b"_http", b"_tcp", b"web", b"prod", b"svc", b"clusterset", b"local")
    tails = delta._Tails(owner)
    east = b"\x04east\x03web\x04prod\x03svc\x0aclusterset\x05local\x00"
    # web.prod... starts at 12 + 6 + 5 = 23 (0x17) in the message
    assert tails[east] == b"\x04east\xc0\x17"
    other = b"\x04west\x05other\x04prod\x03svc\x0aclusterset\x05local\x00"
    assert tails[other] == b"\x04west\x05other\xc0\x1b"  # prod... at 27
    assert tails[b"\x03net\x00"] == b"\x03net\x00"  # nothing shared
    assert list(tails) == [east, other, b"\x03net\x00"]  # each worked out once


def test_only_a_headless_service_with_slices_and_one_tier_is_kept_as_lists() -> None:
    """A Headless import with no slice yet, or ranking its endpoints (a preference and
    the local cluster known), is rebuilt whole on every change: delta.start keeps no
    lists for it. The same service without the preference is kept."""
    slices = _slices(300, (HTTP,), 0)
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), (HTTP,))
    cache = Cache(ZoneNames(ZONE), 5, clock=lambda: 1_000_000.0)
    cache.incremental_min = 256
    cache.apply([ReplaceImports({}), ReplaceSlices({}), SetSynced(True), SetClusterId("east")])
    cache.apply([PutImport(SERVICE, imp)])  # no slice
    assert SERVICE not in cache._headless
    cache.apply([PutSlice(key, piece) for key, piece in slices.items()])
    assert SERVICE in cache._headless
    cache.apply([PutImport(SERVICE, replace(imp, prefer=Prefer.ZONE))])
    assert SERVICE not in cache._headless
    cache.apply([PutSlice(("prod", "web-0"), slices[("prod", "web-0")])])
    assert SERVICE not in cache._headless
    cache.apply([PutImport(SERVICE, imp)])
    assert SERVICE in cache._headless


def _kept(count: int, minimum: int) -> bool:
    """Whether a service of ``count`` endpoint names is kept as lists (delta.start)."""
    slices = {("prod", "web-0"): EndpointSlice(
        "prod", "web-0", "web", "east", tuple(Endpoint((_address(i, False),), None)
                                               for i in range(count)), (HTTP,))}
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), (HTTP,))
    cache = Cache(ZoneNames(ZONE), 5, clock=lambda: 1_000_000.0)
    cache.incremental_min = minimum
    cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices({}), SetSynced(True)])
    cache.apply([PutSlice(key, piece) for key, piece in slices.items()])
    return SERVICE in cache._headless


@pytest.mark.parametrize(("count", "minimum", "kept"), [
    (256, 256, True), (255, 256, False),  # the minimum the cache asks
    (17, 1, True), (16, 1, False),  # past _FEW addresses whatever the minimum
    (18, 18, True), (17, 18, False),
])
def test_lists_are_kept_from_the_minimum_on(count: int, minimum: int, kept: bool) -> None:
    assert _kept(count, minimum) is kept


@pytest.mark.parametrize(("minimum", "floor"), [(1, 17), (20, 20)])
def test_a_difference_down_to_the_minimum_and_not_below(minimum: int, floor: int) -> None:
    """Endpoints leaving one by one: by difference while ``floor`` (the larger of the
    minimum and _FEW + 1) names are left, then rebuilt whole and no lists kept."""
    endpoints = tuple(Endpoint((_address(i, False),), None) for i in range(floor + 1))
    piece = EndpointSlice("prod", "web-0", "web", "east", endpoints, (HTTP,))
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), (HTTP,))
    caches = []
    for incremental in (None, minimum):
        cache = Cache(ZoneNames(ZONE), 5, clock=lambda: 1_000_000.0)
        cache.incremental_min = incremental
        cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices({}), SetSynced(True)])
        cache.apply([PutSlice(("prod", "web-0"), piece)])
        caches.append(cache)
    whole, diff = caches
    lists = diff._headless[SERVICE]
    newer = Endpoint((_address(9_999, False),), None)
    # the second update: two leave and one comes, floor - 1 left
    for now, by_difference in ((endpoints[:floor], True),
                               ((*endpoints[:floor - 2], newer), False)):
        for cache in (whole, diff):
            cache.apply([PutSlice(("prod", "web-0"), replace(piece, endpoints=now))])
        _same_zone(whole, diff)
        assert (diff._headless.get(SERVICE) is lists) is by_difference
    assert SERVICE not in diff._headless


def test_a_cluster_whose_last_endpoint_leaves_or_first_comes_is_rebuilt_whole() -> None:
    """A cluster's name comes and goes with its endpoints: the first endpoint of a new
    cluster and the last of one leaving (one by one or two at once) are not
    differences."""
    slices = _slices(300, (HTTP,), 0)
    west = ("prod", "web-west")
    lone = EndpointSlice("prod", "web-west", "web", "west",
                         (Endpoint((_address(7_000, False),), None),), (HTTP,))
    pair = replace(lone, endpoints=(*lone.endpoints, Endpoint((_address(7_001, False),), None)))
    whole, diff = _caches(slices, (HTTP,))
    none = replace(lone, endpoints=())
    # (pair, lone, pair: the cluster's count goes down by one and up again, by difference)
    for piece, by_difference in ((lone, False), (pair, True), (none, False), (lone, False),
                                 (pair, True), (lone, True), (pair, True), (lone, True),
                                 (none, False), (lone, False)):
        lists = diff._headless[SERVICE]
        for cache in (whole, diff):
            cache.apply([PutSlice(west, piece)])
        _same_zone(whole, diff)
        assert (diff._headless[SERVICE] is lists) is by_difference


def test_an_unchanged_slice_among_those_touched_stops_nothing() -> None:
    """delta.update passes over a touched slice that is the one it knows (``touched``
    in this order: the unchanged one first) and still applies the next one's change."""
    slices = _slices(300, (HTTP,), 0)
    _, diff = _caches(slices, (HTTP,))
    state = diff._headless[SERVICE]
    same, changed = ("prod", "web-0"), ("prod", "web-1")
    now = dict(state.slices)
    now[changed] = replace(slices[changed], endpoints=slices[changed].endpoints[1:])
    found = delta.update(diff.builder, state, state.imp, now, [same, changed], diff.zone.answers)
    assert found is not None
    gone = to_wire((b"10-0-0-100", b"east", *SVC)) + b"\x00\x01\x00\x01"  # its A answer
    assert found.answers[gone] is None


def test_a_changed_import_is_rebuilt_whole() -> None:
    """Another ServiceImport (its ports here; no tiers): not a difference."""
    slices = _slices(300, (HTTP,), 0)
    whole, diff = _caches(slices, (HTTP,))
    lists = diff._headless[SERVICE]
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), (HTTP, GRPC))
    for cache in (whole, diff):
        cache.apply([PutImport(SERVICE, imp)])
    _same_zone(whole, diff)
    assert diff._headless[SERVICE] is not lists


def test_a_slice_put_and_deleted_in_one_update_changes_nothing() -> None:
    """A slice the lists never knew, touched but gone by the end of the update: no
    change, no error, still by difference."""
    slices = _slices(300, (HTTP,), 0)
    whole, diff = _caches(slices, (HTTP,))
    lists = diff._headless[SERVICE]
    key = ("prod", "web-new")
    piece = EndpointSlice("prod", "web-new", "web", "east",
                          (Endpoint((_address(9_000, False),), None),), (HTTP,))
    for cache in (whole, diff):
        cache.apply([PutSlice(key, piece), PutSlice(key, None)])
    _same_zone(whole, diff)
    assert diff._headless[SERVICE] is lists


def _sequence(slices: dict[ObjectKey, EndpointSlice],
              steps: list[tuple[ObjectKey, EndpointSlice | None, bool]],
              lazy: bool = True) -> Cache:
    """Each step's slice put in both caches: the same zone after each, made by
    difference (the same lists) or not as the step says. The cache by difference."""
    whole, diff = _caches(slices, (HTTP,), lazy)
    for key, piece, by_difference in steps:
        lists = diff._headless.get(SERVICE)
        for cache in (whole, diff):
            cache.apply([PutSlice(key, piece)])
        _same_zone(whole, diff)
        assert (lists is not None and diff._headless.get(SERVICE) is lists) is by_difference
    return diff


def test_a_name_or_an_address_twice_is_rebuilt_whole() -> None:
    slices = _slices(300, (HTTP,), 0)
    key = ("prod", "web-2")
    piece = slices[key]
    named = Endpoint((_address(8_000, False),), "10-0-0-1")  # web-0's second endpoint's name
    again = Endpoint((_address(1, False),), "other")  # and its address
    _sequence(slices, [(key, replace(piece, endpoints=(*piece.endpoints, named)), False),
                       (key, piece, False),  # no lists kept with a name twice
                       (key, replace(piece, endpoints=(*piece.endpoints, again)), False),
                       (key, piece, False),
                       # two new endpoints of one new address
                       (key, replace(piece, endpoints=(*piece.endpoints, Endpoint(
                           (_address(8_001, False),), "p"), Endpoint(
                           (_address(8_001, False),), "q"))), False),
                       (key, piece, False),
                       # a name or an address of an endpoint leaving in the same update
                       (key, replace(piece, endpoints=piece.endpoints[1:]), True),
                       (key, replace(piece, endpoints=(*piece.endpoints[1:], Endpoint(
                           (_address(200, False),), "moved"))), True)])


def test_a_family_whose_last_address_leaves_or_first_comes_is_rebuilt_whole() -> None:
    slices = _slices(300, (HTTP,), 0)
    key = ("prod", "web-1")
    piece = slices[key]
    v6 = Endpoint((_address(5, True),), None)
    one, two = (replace(piece, endpoints=(*piece.endpoints, *extra))
                for extra in ((v6,), (v6, Endpoint((_address(6, True),), None))))
    _sequence(slices, [(key, one, False), (key, two, True), (key, one, True),
                       (key, piece, False)])


def test_an_endpoint_named_as_a_cluster_is_rebuilt_whole() -> None:
    """Clusters eu and west.eu: an endpoint west of eu has the cluster west.eu's name.
    Compared with a rebuild that encodes every endpoint name at once (lazy=False), as
    the cache does for a service past incremental_min: Zone.names differs between the
    two ways for such a name (listed when encoded on first use), not the answers."""
    slices = _slices(300, (HTTP,), 0)
    for cluster, base in (("eu", 3_000), ("west.eu", 4_000)):
        key = ("prod", f"web-{cluster}")
        slices[key] = EndpointSlice("prod", key[1], "web", cluster, tuple(
            Endpoint((_address(base + i, False),), None) for i in range(2)), (HTTP,))
    key = ("prod", "web-eu")
    piece = slices[key]
    west = Endpoint((_address(5_000, False),), "west")
    diff = _sequence(slices, [(key, replace(piece, endpoints=piece.endpoints[1:]), True),
                              (key, replace(piece, endpoints=(*piece.endpoints, west)), False)],
                     lazy=False)
    assert SERVICE not in diff._headless  # delta.start keeps no lists for it


@pytest.mark.parametrize(("longer", "kept"), [(22, 1007), (23, 1006)])
def test_a_cut_srv_answer_keeps_the_record_that_fits_to_the_byte(longer: int, kept: int) -> None:
    """One unnamed port: only web's SRV answer, cut where one TCP message is full
    (65,535 less the header, the question and the OPT: 65,477 bytes of records). Each
    record is 55 bytes and its hostname's: ``longer`` hostnames of 11 characters sort
    first, then ones of 10: with 22, 1,007 records take 65,477 bytes exactly and all
    are kept; with 23, the 1,007th ends a byte past and is left out."""
    port = Port("", "tcp", 80)
    hosts = [f"a{i:010d}" for i in range(longer)] + \
        [f"b{i:09d}" for i in range(1_100 - longer)]
    endpoints = [Endpoint((_address(i, False),), host) for i, host in enumerate(hosts)]
    first = Endpoint((_address(5_000, False),), "0")  # sorts first; leaves in the update
    slices = {("prod", f"web-{s}"): EndpointSlice(
        "prod", f"web-{s}", "web", "east",
        tuple(endpoints[s * PER:(s + 1) * PER]) + ((first,) if s == 0 else ()), (port,))
        for s in range(11)}
    whole, diff = _caches(slices, (port,))
    lists = diff._headless[SERVICE]
    key = ("prod", "web-0")
    for cache in (whole, diff):
        cache.apply([PutSlice(key, replace(slices[key], endpoints=slices[key].endpoints[:-1],
                                           not_ready=(first,)))])
    assert diff._headless[SERVICE] is lists
    _same_zone(whole, diff)
    answer = diff.zone.answers[to_wire(SVC) + b"\x00\x21\x00\x01"]
    assert int.from_bytes(answer.heads[0][4:6]) == kept  # ANCOUNT (a head has no ID)


@pytest.mark.parametrize("name", ["", "http"])
def test_a_change_past_a_cut_srv_answers_last_record_keeps_that_answer(name: str) -> None:
    """An SRV answer cut where the message is full (1,100 targets, one port, 1,007
    kept): once the difference has made it (where it is cut is then known), an endpoint
    whose name sorts past the last record kept is replaced by one sorting past it too
    (as many targets: the same weight). The cut answer is kept as it is (the same
    object, not made again), and equals a rebuild's. A named port has two such answers
    (the service's and _http._tcp's): both kept."""
    port = Port(name, "tcp", 80)
    hosts = [f"b{i:09d}" for i in range(1_100)]
    endpoints = [Endpoint((_address(i, False),), host) for i, host in enumerate(hosts)]
    slices = {("prod", f"web-{s}"): EndpointSlice(
        "prod", f"web-{s}", "web", "east", tuple(endpoints[s * PER:(s + 1) * PER]), (port,))
        for s in range(11)}
    whole, diff = _caches(slices, (port,))
    lists = diff._headless[SERVICE]
    srv = to_wire(SVC) + b"\x00\x21\x00\x01"
    named = to_wire((b"_http", b"_tcp", *SVC)) + b"\x00\x21\x00\x01"
    key = ("prod", "web-10")
    made = []
    for i, host in enumerate(("c", "d")):  # each sorts after every b...
        piece = replace(slices[key], endpoints=(
            *slices[key].endpoints[:-1], Endpoint((_address(9_000 + i, False),), host)))
        for cache in (whole, diff):
            cache.apply([PutSlice(key, piece)])
        assert diff._headless[SERVICE] is lists
        _same_zone(whole, diff)
        made.append(diff.zone.answers[srv])
        if name and not i:
            kept_named = diff.zone.answers[named]
    assert int.from_bytes(made[0].heads[0][4:6]) == 1_007  # ANCOUNT: cut
    assert made[1] is made[0]
    if name:
        assert diff.zone.answers[named] is kept_named


def test_a_change_of_a_cut_srv_answers_first_record_left_out_makes_it_again() -> None:
    """Cut where the message is full: 22 hostnames of 11 characters and 984 of 10 take
    65,412 of the 65,477 bytes of records; the next, of 11 characters (66 bytes), is
    left out, where one of 10 would fit. That first record left out replaced by one
    sorting past every target: the answer is made again, and now holds the next one,
    of 10 characters, as a rebuild does."""
    port = Port("", "tcp", 80)
    hosts = ([f"a{i:010d}" for i in range(22)] + [f"b{i:09d}" for i in range(984)]
             + ["c0000000000"] + [f"d{i:09d}" for i in range(93)])
    endpoints = [Endpoint((_address(i, False),), host) for i, host in enumerate(hosts)]
    slices = {("prod", f"web-{s}"): EndpointSlice(
        "prod", f"web-{s}", "web", "east", tuple(endpoints[s * PER:(s + 1) * PER]), (port,))
        for s in range(11)}
    whole, diff = _caches(slices, (port,))
    lists = diff._headless[SERVICE]
    srv = to_wire(SVC) + b"\x00\x21\x00\x01"
    key = ("prod", "web-10")  # holds the c... and the d... hosts
    in_slice = list(slices[key].endpoints)
    # past the cut (the last d...): the difference makes the answer, learning its cut
    in_slice[-1] = Endpoint((_address(9_000, False),), "e")
    for cache in (whole, diff):
        cache.apply([PutSlice(key, replace(slices[key], endpoints=tuple(in_slice)))])
    assert int.from_bytes(diff.zone.answers[srv].heads[0][4:6]) == 1_006  # ANCOUNT
    in_slice[6] = Endpoint((_address(9_001, False),), "f")  # in place of c0000000000
    for cache in (whole, diff):
        cache.apply([PutSlice(key, replace(slices[key], endpoints=tuple(in_slice)))])
    assert diff._headless[SERVICE] is lists
    _same_zone(whole, diff)
    assert int.from_bytes(diff.zone.answers[srv].heads[0][4:6]) == 1_007


def test_srv_records_filling_the_message_to_the_byte_are_whole_without_tc() -> None:
    """One unnamed port, 22 hostnames of 11 characters and 985 of 10: the SRV records
    take 65,477 bytes, exactly what one TCP message holds after the header, question
    and OPT; their glue cannot fit. Made by the difference (one hostname replaced by
    another of its length), the answer holds every record, without TC, as a rebuild."""
    port = Port("", "tcp", 80)
    hosts = [f"a{i:010d}" for i in range(22)] + [f"b{i:09d}" for i in range(985)]
    endpoints = [Endpoint((_address(i, False),), host) for i, host in enumerate(hosts)]
    slices = {("prod", f"web-{s}"): EndpointSlice(
        "prod", f"web-{s}", "web", "east", tuple(endpoints[s * PER:(s + 1) * PER]), (port,))
        for s in range(11)}
    whole, diff = _caches(slices, (port,))
    lists = diff._headless[SERVICE]
    key = ("prod", "web-10")
    in_slice = list(slices[key].endpoints)
    in_slice[-1] = Endpoint((_address(9_000, False),), "b999999999")
    for cache in (whole, diff):
        cache.apply([PutSlice(key, replace(slices[key], endpoints=tuple(in_slice)))])
    assert diff._headless[SERVICE] is lists
    _same_zone(whole, diff)
    answer = diff.zone.answers[to_wire(SVC) + b"\x00\x21\x00\x01"]
    assert len(answer.body) == 65_477
    assert int.from_bytes(answer.heads[0][4:6]) == 1_007  # ANCOUNT
    assert not answer.heads[0][0] & 0x02  # no TC (the flags' first byte: QR, AA, TC, RD)


def test_srv_records_and_glue_filling_the_message_to_the_byte_keep_the_glue() -> None:
    """Five unnamed ports, 202 targets (127 hostnames of 7 characters, 75 of 6): five
    records a target and an A record each (16 bytes: every target is within a
    pointer's reach in the first port's records) take 65,477 bytes, exactly what one
    TCP message holds. Made by the difference (minimum 17 names), the answer keeps its
    glue, as a rebuild."""
    ports = tuple(Port("", "tcp", 80 + i) for i in range(5))
    hosts = [f"h{i:06d}" for i in range(127)] + [f"g{i:05d}" for i in range(75)]
    endpoints = [Endpoint((_address(i, False),), host) for i, host in enumerate(hosts)]
    slices = {("prod", f"web-{s}"): EndpointSlice(
        "prod", f"web-{s}", "web", "east", tuple(endpoints[s * PER:(s + 1) * PER]), ports)
        for s in range(3)}
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), ports)
    caches = []
    for minimum in (None, 17):  # rebuilt whole; by difference
        cache = Cache(ZoneNames(ZONE), 5, clock=lambda: 1_000_000.0)
        cache.incremental_min = minimum
        cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices(slices), SetSynced(True)])
        caches.append(cache)
    whole, diff = caches
    key = ("prod", "web-2")
    in_slice = list(slices[key].endpoints)
    lists = []
    for step, host in enumerate(("g99998", "g99999")):  # the first keeps the lists
        in_slice[-1] = Endpoint((_address(9_000 + step, False),), host)
        for cache in (whole, diff):
            cache.apply([PutSlice(key, replace(slices[key], endpoints=tuple(in_slice)))])
        lists.append(diff._headless[SERVICE])
    assert lists[1] is lists[0]  # the second by difference
    _same_zone(whole, diff)
    answer = diff.zone.answers[to_wire(SVC) + b"\x00\x21\x00\x01"]
    assert len(answer.body) == 65_477
    assert int.from_bytes(answer.heads[0][8:10]) == 202  # ARCOUNT: the glue, every A


def test_an_address_answer_shrinking_below_its_cut_loses_it_by_difference() -> None:
    """web's A answer after its 35-byte question: 29 records (464 bytes) can exceed a
    UDP client's room (489 bytes less the question: more than 454) and have cuts, 28
    (448) cannot and have none. An endpoint leaving and coming back by difference (the
    minimum 17 names) takes the cut away and puts it back, as a rebuild does."""
    piece = EndpointSlice("prod", "web-0", "web", "east",
                          tuple(Endpoint((_address(i, False),), None) for i in range(29)),
                          (HTTP,))
    imp = ServiceImport("prod", "web", ServiceType.HEADLESS, (), (HTTP,))
    caches = []
    for minimum in (None, 17):  # rebuilt whole; by difference
        cache = Cache(ZoneNames(ZONE), 5, clock=lambda: 1_000_000.0)
        cache.incremental_min = minimum
        cache.apply([ReplaceImports({SERVICE: imp}), ReplaceSlices({}), SetSynced(True)])
        cache.apply([PutSlice(("prod", "web-0"), piece)])  # the lists kept from here
        caches.append(cache)
    whole, diff = caches
    lists = diff._headless[SERVICE]
    a_key = to_wire(SVC) + b"\x00\x01\x00\x01"
    assert a_key in diff.zone.cuts
    for endpoints, cut in ((piece.endpoints[1:], False), (piece.endpoints, True)):
        for cache in (whole, diff):
            cache.apply([PutSlice(("prod", "web-0"), replace(piece, endpoints=endpoints))])
        assert diff._headless[SERVICE] is lists
        _same_zone(whole, diff)
        assert (a_key in diff.zone.cuts) is cut
