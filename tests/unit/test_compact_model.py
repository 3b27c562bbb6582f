"""The compact model (zone/model.py ``Endpoints``): a converted EndpointSlice keeps its
endpoints as columns, and gives back exactly what the object said, endpoint by
endpoint: every kept address (IPv4, IPv6, repeated), the hostname, zone, nodeName and
hints, in the ready, serving and not-ready lists, in the object's order.

The expected endpoints are worked out here from the API's rules (docs/dns-behaviour.md
and the EndpointSlice reference), independently of convert.py.
"""

from __future__ import annotations

import ipaddress
import pickle
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterset_dns.base import names
from clusterset_dns.sources import convert
from clusterset_dns.zone.model import (
    NOWHERE,
    Endpoint,
    Endpoints,
    EndpointSlice,
    Hints,
    Place,
    ServiceImport,
    ServiceType,
)

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Address texts: each family's, repeated ones (a small pool), the other family's
# (dropped), IPv4-mapped IPv6, and texts that do not parse (dropped).
V4_TEXTS = ["10.0.0.1", "10.0.0.2", "192.168.255.254", "0.0.0.0", "255.255.255.255"]
V6_TEXTS = ["fd00::1", "fd00::2", "FD00::A", "2001:db8::", "::ffff:10.0.0.1", "::",
            "2001:db8:1:2:3:4:5:6"]
BAD_TEXTS = ["10.0.0.256", "010.0.0.1", "fe80::1%eth0", "", "not-an-ip"]
HOSTNAMES = [None, None, "web-0", "web-1", "db"]
ZONES = [None, "", "zone-a", "zone-b"]
NODES = [None, "", "node-1", "node-2", "node-3"]


@st.composite
def raw_hints(draw: st.DrawFn) -> dict[str, Any] | None:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return None
    zones = draw(st.lists(st.sampled_from(["zone-a", "zone-b", "zone-c"]), max_size=3))
    nodes = draw(st.lists(st.sampled_from(["node-1", "node-2"]), max_size=2))
    return {"forZones": [{"name": z} for z in zones], "forNodes": [{"name": n} for n in nodes]}


@st.composite
def raw_endpoint(draw: st.DrawFn) -> dict[str, Any]:
    texts = draw(st.lists(st.sampled_from(V4_TEXTS + V6_TEXTS + BAD_TEXTS), max_size=4))
    endpoint: dict[str, Any] = {"addresses": texts}
    conditions = {}
    for condition in ("ready", "serving"):
        value = draw(st.sampled_from([None, True, False]))
        if value is not None:
            conditions[condition] = value
    if conditions or draw(st.booleans()):
        endpoint["conditions"] = conditions
    for field, pool in (("hostname", HOSTNAMES), ("zone", ZONES), ("nodeName", NODES)):
        value = draw(st.sampled_from(pool))
        if value is not None:
            endpoint[field] = value
    hints = draw(raw_hints())
    if hints is not None:
        endpoint["hints"] = hints
    return endpoint


@st.composite
def raw_slice(draw: st.DrawFn) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "s", "namespace": "prod",
                         "labels": {convert.SERVICE_NAME_LABEL: "web",
                                    convert.SOURCE_CLUSTER_LABEL: "east"}},
            "addressType": draw(st.sampled_from(["IPv4", "IPv6"])),
            "endpoints": draw(st.lists(raw_endpoint(), max_size=12)),
            "ports": [{"port": 80, "name": "http"}]}


def expected_lists(raw: dict[str, Any]) -> tuple[list[Endpoint], list[Endpoint], list[Endpoint]]:
    """(ready, serving, not ready) as the API's rules say: absent ``ready`` is ready,
    absent ``serving`` is as ``ready``; addresses of the slice's family that parse,
    in order, repeats kept; an endpoint without one is left out."""
    family = 4 if raw["addressType"] == "IPv4" else 6
    lists: tuple[list[Endpoint], list[Endpoint], list[Endpoint]] = ([], [], [])
    for endpoint in raw["endpoints"]:
        addresses = []
        for text in endpoint["addresses"]:
            try:
                ip = ipaddress.ip_address(text)
            except ValueError:
                continue
            if ip.version == family and not getattr(ip, "scope_id", None):
                addresses.append(ip)
        if not addresses:
            continue
        conditions = endpoint.get("conditions", {})
        ready = conditions.get("ready", True) is not False
        serving = conditions.get("serving", conditions.get("ready", True)) is True
        hints = None
        raw_hints = endpoint.get("hints")
        if raw_hints is not None:
            zones = frozenset(z["name"] for z in raw_hints["forZones"])
            nodes = frozenset(n["name"] for n in raw_hints["forNodes"])
            hints = Hints(zones, nodes) if zones or nodes else None
        made = Endpoint(tuple(addresses), endpoint.get("hostname"),
                        endpoint.get("zone") or None, endpoint.get("nodeName") or None, hints)
        lists[0 if ready else 1 if serving else 2].append(made)
    return lists


def check_columns(found: Endpoints, expected: list[Endpoint]) -> None:
    """Every way of reading ``found`` gives ``expected``."""
    assert len(found) == len(expected) and bool(found) == bool(expected)
    assert list(found) == expected
    assert [found[i] for i in range(len(expected))] == expected
    assert [found[i - len(expected)] for i in range(len(expected))] == expected
    assert found[1:] == tuple(expected[1:]) and found[::-2] == tuple(expected[::-2])
    assert found.packs() == [[ip.packed for ip in e.addresses] for e in expected]
    assert found.addresses() == [ip.packed for e in expected for ip in e.addresses]
    assert list(found.hostname_list()) == [e.hostname for e in expected]
    assert found.place_list() == [Place(e.zone, e.node, e.hints) for e in expected]
    assert list(found.rows()) == [([ip.packed for ip in e.addresses], e.hostname,
                                   Place(e.zone, e.node, e.hints)) for e in expected]
    assert set(found.places) == {Place(e.zone, e.node, e.hints) for e in expected}
    for past in (len(expected), -len(expected) - 1):
        try:
            found[past]
        except IndexError:
            pass
        else:
            raise AssertionError(f"endpoint {past} of {len(expected)} given")
    # As compact as the endpoints allow: one family's addresses back to back, no count
    # column when each has one address, no hostname column when none has a hostname.
    addresses = [ip.packed for e in expected for ip in e.addresses]
    widths = {len(packed) for packed in addresses}
    if len(widths) == 1:
        assert (found.width, found.packed) == (widths.pop(), b"".join(addresses))
    elif widths:
        assert found.width == 0
    assert (found.counts is None) == all(len(e.addresses) == 1 for e in expected)
    assert (found.hostnames is None) == all(e.hostname is None for e in expected)
    # The same endpoints written in code make the same columns (equal slices compare
    # equal, whichever way they were made), and a worker gets them whole.
    assert Endpoints.of(expected) == found
    assert hash(Endpoints.of(expected)) == hash(found)
    assert pickle.loads(pickle.dumps(found)) == found


@SETTINGS
@given(raw_slice())
def test_a_converted_slice_gives_exactly_the_objects_endpoints(raw: dict[str, Any]) -> None:
    piece = convert.endpoint_slice(raw)
    assert piece is not None
    ready, serving, down = expected_lists(raw)
    check_columns(piece.endpoints, ready)
    check_columns(piece.serving, serving)
    check_columns(piece.not_ready, down)
    made = EndpointSlice("prod", "s", "web", "east", tuple(ready), piece.ports,
                         serving=tuple(serving), not_ready=tuple(down))
    assert made == piece
    kept = EndpointSlice("prod", "s", "web", "east", piece.endpoints, piece.ports)
    assert kept.endpoints is piece.endpoints  # columns are taken as they are
    assert pickle.loads(pickle.dumps(piece)) == piece


def test_equal_hints_and_places_are_one_object() -> None:
    """Every endpoint of a zone shares its hints and its place (the columns keep an index
    per endpoint, not a copy)."""
    endpoint = {"addresses": ["10.0.0.1"], "zone": "zone-a", "nodeName": "node-1",
                "hints": {"forZones": [{"name": "zone-a"}]}}
    raw = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": "s", "namespace": "prod",
                        "labels": {convert.SERVICE_NAME_LABEL: "web"}},
           "addressType": "IPv4", "endpoints": [endpoint] * 50}
    piece = convert.endpoint_slice(raw)
    assert piece is not None
    assert len(piece.endpoints.places) == 1 and piece.endpoints.where == b""
    first = piece.endpoints[0]
    assert all(e.hints is first.hints and e.zone is first.zone for e in piece.endpoints)


# -- endpoints written in code: families mixed in one endpoint, many places ----------------

V4_POOL = [ipaddress.IPv4Address(0x0A000000 + i) for i in range(4)]
V6_POOL = [ipaddress.IPv6Address((0xFD00 << 112) + i) for i in range(4)]
PLACES = [NOWHERE, Place("zone-a"), Place("zone-a", "node-1"),
          Place(None, None, Hints(frozenset({"zone-b"})))]


@st.composite
def code_endpoint(draw: st.DrawFn) -> Endpoint:
    addresses = draw(st.lists(st.sampled_from(V4_POOL + V6_POOL), max_size=3))
    place = draw(st.sampled_from(PLACES))
    return Endpoint(tuple(addresses), draw(st.sampled_from(HOSTNAMES)), *place)


@SETTINGS
@given(st.lists(code_endpoint(), max_size=10))
def test_endpoints_written_in_code_come_back_as_written(endpoints: list[Endpoint]) -> None:
    check_columns(Endpoints.of(endpoints), endpoints)


def test_a_list_of_more_places_than_a_byte_tells_apart() -> None:
    """Past 256 distinct places an endpoint's index takes two bytes: the 257th and later
    endpoints keep their own place."""
    endpoints = [Endpoint((ipaddress.IPv4Address(0x0A000000 + i),), None, node=f"node-{i}")
                 for i in range(300)]
    found = Endpoints.of(endpoints)
    assert len(found.where) == 600
    check_columns(found, endpoints)
    boundary = Endpoints.of(endpoints[:256])
    assert len(boundary.where) == 256
    check_columns(boundary, endpoints[:256])


def test_an_empty_list_is_one_shared_object() -> None:
    assert Endpoints.of([]) is Endpoints.of(()) and len(Endpoints.of([])) == 0
    assert list(Endpoints.of([])) == [] and Endpoints.of([]).place_list() == []


# -- a ServiceImport's IPs, packed -----------------------------------------------------------

@SETTINGS
@given(st.lists(st.sampled_from(V4_TEXTS + V6_TEXTS + BAD_TEXTS), max_size=6))
def test_an_imports_ips_come_back_in_order(texts: list[str]) -> None:
    """Every IP that parses, either family, in the object's order, each once; the same
    written in code packs the same; through pickle too."""
    raw = {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
           "metadata": {"name": "web", "namespace": "prod"},
           "spec": {"type": "ClusterSetIP", "ips": texts}}
    imp = convert.service_import(raw)
    expected: list[Any] = []
    for text in texts:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            continue
        if not getattr(ip, "scope_id", None) and ip not in expected:
            expected.append(ip)
    assert imp.ips == tuple(expected)
    assert [type(ip) for ip in imp.ips] == [type(ip) for ip in expected]
    assert imp == ServiceImport("prod", "web", ServiceType.CLUSTER_SET_IP, tuple(expected),
                                imp.ports)
    assert pickle.loads(pickle.dumps(imp)) == imp


@SETTINGS
@given(st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)))
def test_a_packed_address_gets_the_name_its_object_gets(ip: Any) -> None:
    """An endpoint without a hostname is named from its packed address as from the
    address object (``10-1-2-3``, ``fd00--1``, a trailing ``-`` made ``-0``)."""
    assert names.packed_hostname(ip.packed) == names.endpoint_hostname(ip)
