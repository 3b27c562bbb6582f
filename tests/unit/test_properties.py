"""Property-based tests (hypothesis) over raw ServiceImport and EndpointSlice dicts.

The objects are drawn from a small universe of names, so they collide (same
service, same key twice), with any field swapped for a wrong type, names at and
over the DNS limits, labels that are not labels, and now and then lists of a
thousand items. Two invariants:

- **isolation**: the zone built from all the objects equals the zone built from
  the valid ones alone: a bad object never changes another object's answers;
- **incremental = from scratch**: after any sequence of updates (puts, deletes,
  full lists, changes of the server's cluster id and zone), the zone equals one
  built in one go from the objects that are left, at the last cluster id and zone.

"Valid" is decided per object, alone: conversion accepts it and an empty cache
admits it. Conversion may only raise ``InvalidObject``; anything else fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import (
    Cache,
    Op,
    PutImport,
    PutSlice,
    ReplaceImports,
    ReplaceSlices,
    SetClusterId,
    SetSynced,
    SetTopologyZone,
)
from clusterset_dns.zone.model import EndpointSlice, ObjectKey, ServiceImport

from .helpers import ZONE

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

JUNK = st.one_of(st.none(), st.integers(-1, 70000), st.booleans(), st.floats(allow_nan=False),
                 st.text(max_size=4), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``strategy``, one time in eight a value of the wrong type. (Not one_of:
    it flattens JUNK's branches beside ``strategy`` and would mostly draw junk.)"""
    # Hypothesis favours boundary values (0, the maximum): junk sits in the middle.
    return st.integers(0, 1000).flatmap(lambda i: JUNK if i % 8 == 5 else strategy)


def pick(good: list[str], bad: list[str]) -> st.SearchStrategy[str]:
    """One of ``good`` mostly; one time in five one of ``bad`` (over a limit, not a label)."""
    return st.integers(0, 1000).flatmap(
        lambda i: st.sampled_from(bad) if i % 5 == 3 else st.sampled_from(good))


NAMESPACES = pick(["prod", "dev", "Prod", "n" * 63], ["n" * 64, "", "a b", "x.y"])
SERVICES = pick(["web", "db", "WEB", "s" * 63, "_x"], ["s" * 64, "", ".", "a b", "é"])
PORT_NAMES = pick(["http", "HTTP", "dns", "p" * 62, "q" * 63], ["r" * 64, "a b", "", "x.y"])
CLUSTERS = pick(["east", "west.eu", "East", "c" * 63, f"{'c' * 63}.{'d' * 63}", "west.eu."],
                ["", ".", "a b", "a..b"])
HOSTNAMES = pick(["h0", "h1", "H0", "h" * 63], ["h" * 64, "", "a b", "x.y"])
IPV4 = st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.1.1", " 10.0.0.3 ", "10.0.0.300", "bad"])
IPV6 = st.sampled_from(["fd00::1", "fd00::2", "FD00::3", "fe80::1%eth0", "::"])

PORTS = st.fixed_dictionaries(
    {"port": maybe(st.sampled_from([80, 443, 53, 0, 65536, 8080]))},
    optional={"name": maybe(PORT_NAMES),
              "protocol": maybe(st.sampled_from(["TCP", "UDP", "SCTP", "tcp", "HTTP"]))})


def _bulk_ports(count: int) -> list[dict[str, Any]]:
    return [{"port": 1000 + i, "protocol": "TCP", "name": f"p{i}"} for i in range(count)]


def _bulk_endpoints(count: int) -> list[dict[str, Any]]:
    return [{"addresses": [f"10.9.{i // 250}.{i % 250 + 1}"]} for i in range(count)]


@st.composite
def service_imports(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "type": draw(maybe(st.sampled_from(["ClusterSetIP", "Headless"]))),
        "ips": draw(maybe(st.lists(maybe(st.one_of(IPV4, IPV6)), max_size=3))),
        "ports": draw(maybe(st.lists(PORTS, max_size=4))),
        "trafficDistribution": draw(maybe(st.sampled_from(["PreferClose", "Other"]))),
    }
    if draw(st.integers(0, 1000)) % 20 == 13 and isinstance(fields["ports"], list):
        fields["ports"] += _bulk_ports(1000)  # a huge list
    meta = draw(maybe(st.fixed_dictionaries({"name": maybe(SERVICES),
                                             "namespace": maybe(NAMESPACES)})))
    obj: dict[str, Any] = {"apiVersion": "multicluster.x-k8s.io/v1beta1",
                           "kind": "ServiceImport", "metadata": meta}
    layout = draw(st.sampled_from(["spec", "status", "root"]))
    if layout == "root":
        obj.update(fields)
    else:
        obj[layout] = fields
    return obj


# Topology hints (issue 35): names of zones, now and then malformed (no name, not a
# list, over the API's 8 entries).
HINT_LISTS = st.one_of(
    maybe(st.lists(maybe(st.fixed_dictionaries({"name": maybe(st.sampled_from(
        ["z1", "z2", ""]))})), max_size=3)),
    st.just([{"name": f"z{i}"} for i in range(9)]), st.just("z1"))
ENDPOINTS = st.fixed_dictionaries(
    {"addresses": maybe(st.lists(maybe(st.one_of(IPV4, IPV6)), max_size=2))},
    optional={"hostname": maybe(HOSTNAMES), "zone": maybe(st.sampled_from(["z1", "z2"])),
              "conditions": maybe(st.fixed_dictionaries({"ready": maybe(st.booleans())})),
              "hints": maybe(st.fixed_dictionaries({}, optional={"forZones": HINT_LISTS,
                                                                 "forNodes": HINT_LISTS}))})


@st.composite
def endpoint_slices(draw: st.DrawFn) -> dict[str, Any]:
    labels: dict[str, Any] = {convert.SERVICE_NAME_LABEL: draw(maybe(SERVICES))}
    if draw(st.booleans()):
        labels[convert.SOURCE_CLUSTER_LABEL] = draw(maybe(CLUSTERS))
    meta = {"name": draw(maybe(st.sampled_from(["s1", "s2", "s3"]))),
            "namespace": draw(maybe(NAMESPACES)), "labels": draw(maybe(st.just(labels)))}
    endpoints = draw(maybe(st.lists(maybe(ENDPOINTS), max_size=4)))
    if draw(st.integers(0, 1000)) % 20 == 13 and isinstance(endpoints, list):
        endpoints += _bulk_endpoints(1000)  # the API's maximum
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": draw(maybe(st.just(meta))),
            "addressType": draw(maybe(st.sampled_from(["IPv4", "IPv6", "FQDN"]))),
            "endpoints": endpoints, "ports": draw(maybe(st.lists(PORTS, max_size=3)))}


OBJECTS = st.one_of(service_imports(), endpoint_slices())

# -- helpers ------------------------------------------------------------------------------------

Model = ServiceImport | EndpointSlice


def to_op(obj: dict[str, Any]) -> Op | None:
    """The op a source would send for ``obj``; None when conversion refuses it (or DNS
    ignores it: an FQDN slice). Any exception but InvalidObject fails the test."""
    try:
        if convert.is_service_import(obj):
            imp = convert.service_import(obj)
            return PutImport((imp.namespace, imp.name), imp)
        piece = convert.endpoint_slice(obj)
    except convert.InvalidObject:
        return None
    if piece is None:
        return None
    return PutSlice((piece.namespace, piece.name), piece)


def admitted_alone(op: Op) -> bool:
    """Whether an empty cache takes the object whole or in part (not skipped)."""
    applied = Cache(ZoneNames(ZONE), 5).apply([op])
    return not any(not r.served for r in applied.rejected)


def zone_state(cache: Cache) -> tuple[dict[bytes, tuple[tuple[bytes, ...], bytes]],
                                      dict[bytes, int]]:
    """Every answer (less the apex SOA, whose serial counts updates) and every name."""
    soa_key = b"\x0aclusterset\x05local\x00\x00\x06\x00\x01"
    answers = {key: (ans.heads, ans.body) for key, ans in dict(cache.zone.every_answer()).items()
               if key != soa_key}
    return answers, dict(cache.zone.names)


def fresh(imports: dict[ObjectKey, ServiceImport], slices: dict[ObjectKey, EndpointSlice],
          cluster_id: str | None = None, topology_zone: str | None = None) -> Cache:
    cache = Cache(ZoneNames(ZONE), 5, cluster_id=cluster_id, topology_zone=topology_zone)
    applied = cache.apply([ReplaceImports(imports), ReplaceSlices(slices), SetSynced(True)])
    assert all(r.served for r in applied.rejected)
    return cache


# -- the invariants -----------------------------------------------------------------------------

@pytest.mark.timeout(300)
@SETTINGS
@given(st.lists(OBJECTS, max_size=12))
def test_a_bad_object_never_changes_the_answers_of_another(objects: list[dict[str, Any]]) -> None:
    ops = [op for op in map(to_op, objects) if op is not None]
    everything = Cache(ZoneNames(ZONE), 5)
    everything.apply([*ops, SetSynced(True)])
    valid = [op for op in ops if admitted_alone(op)]
    only_valid = Cache(ZoneNames(ZONE), 5)
    applied = only_valid.apply([*valid, SetSynced(True)])
    assert all(r.served for r in applied.rejected)
    assert zone_state(everything) == zone_state(only_valid)


@st.composite
def updates(draw: st.DrawFn) -> list[list[tuple[str, Any]]]:
    """Batches of steps: ("put", raw), ("delete", (kind, key)) or ("list", [raw, ...])."""
    steps = st.one_of(
        st.tuples(st.just("put"), OBJECTS),
        st.tuples(st.just("delete"), st.tuples(st.sampled_from(["import", "slice"]),
                                               st.tuples(NAMESPACES.map(str.lower),
                                                         st.sampled_from(["web", "db", "s1",
                                                                          "s2"])))),
        st.tuples(st.just("list"), st.lists(OBJECTS, max_size=5)),
        # where the server runs (local-first answers of PreferClose imports)
        st.tuples(st.just("cluster"), st.sampled_from([None, "east", "west.eu"])),
        st.tuples(st.just("zone"), st.sampled_from([None, "z1", "z2"])),
    )
    return draw(st.lists(st.lists(steps, min_size=1, max_size=4), min_size=1, max_size=5))


def _replay(state: dict[ObjectKey, Model], new: dict[ObjectKey, Model | None]
            ) -> dict[ObjectKey, Model]:
    """A full list: what it lacks goes; an object it holds that the zone cannot hold
    (None) keeps its last version, if it had one."""
    result: dict[ObjectKey, Model] = {}
    for key, model in new.items():
        if model is not None:
            result[key] = model
        elif key in state:
            result[key] = state[key]
    return result


@pytest.mark.timeout(300)
@SETTINGS
@given(updates())
def test_incremental_updates_equal_a_rebuild_from_scratch(
        batches: list[list[tuple[str, Any]]]) -> None:
    cache = Cache(ZoneNames(ZONE), 5)
    imports: dict[ObjectKey, Model] = {}
    slices: dict[ObjectKey, Model] = {}
    cluster_id: str | None = None
    topology_zone: str | None = None
    for batch in batches:
        ops: list[Op] = []
        for step, arg in batch:
            if step == "cluster":
                ops.append(SetClusterId(arg))
                cluster_id = arg
            elif step == "zone":
                ops.append(SetTopologyZone(arg))
                topology_zone = arg
            elif step == "put":
                op = to_op(arg)
                if op is None:
                    continue
                ops.append(op)
                if admitted_alone(op) and op.obj is not None:
                    (imports if isinstance(op, PutImport) else slices)[op.key] = op.obj
            elif step == "delete":
                kind, key = arg
                ops.append(PutImport(key, None) if kind == "import" else PutSlice(key, None))
                (imports if kind == "import" else slices).pop(key, None)
            else:
                listed = [op for op in map(to_op, arg) if op is not None]
                kind_ops: dict[type, dict[ObjectKey, Model | None]] = {PutImport: {},
                                                                       PutSlice: {}}
                for op in listed:
                    assert op.obj is not None
                    kind_ops[type(op)][op.key] = op.obj if admitted_alone(op) else None
                raw_imports = {op.key: op.obj for op in listed if isinstance(op, PutImport)}
                raw_slices = {op.key: op.obj for op in listed if isinstance(op, PutSlice)}
                ops += [ReplaceImports(raw_imports), ReplaceSlices(raw_slices)]  # type: ignore[arg-type]
                imports = _replay(imports, kind_ops[PutImport])
                slices = _replay(slices, kind_ops[PutSlice])
        cache.apply(ops)
    cache.apply([SetSynced(True)])
    expected = fresh({k: v for k, v in imports.items() if isinstance(v, ServiceImport)},
                     {k: v for k, v in slices.items() if isinstance(v, EndpointSlice)},
                     cluster_id, topology_zone)
    assert zone_state(cache) == zone_state(expected)


# -- conversion itself --------------------------------------------------------------------------

CONVERTERS: list[Callable[[dict[str, Any]], object]] = [convert.service_import,
                                                        convert.endpoint_slice]


@pytest.mark.timeout(120)
@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(OBJECTS, st.sampled_from(CONVERTERS))
def test_conversion_raises_only_invalid_object(obj: dict[str, Any],
                                               converter: Callable[[dict[str, Any]], object]
                                               ) -> None:
    """Whatever the fields hold, conversion returns a model or raises InvalidObject."""
    with contextlib.suppress(convert.InvalidObject):
        converter(obj)
