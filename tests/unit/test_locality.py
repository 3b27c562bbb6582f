"""Local-first answers (trafficDistribution + the server's cluster id, node and zone),
issues 12 and 20.

Each row: where the server runs, the import's trafficDistribution and layout,
the slices' readiness, and every record the service then has, as zone-file
text (``clusterset-dns dump``'s lines). The expected records are written out
by :func:`records_of` from the rule (docs/dns-behaviour.md §6), never taken
from the server: every endpoint name exists; the bare name's A holds the best
tier; SRV lists every endpoint, tier ``i`` at priority ``i``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterset_dns.base import names
from clusterset_dns.base.config import Config, ConfigError
from clusterset_dns.base.names import ZoneNames
from clusterset_dns.process.cli import build_parser, to_config
from clusterset_dns.process.dump import dump, zone_lines
from clusterset_dns.sources import convert, properties
from clusterset_dns.sources.manifests import ManifestSource
from clusterset_dns.zone import rrs, wire
from clusterset_dns.zone.cache import (
    EMPTY,
    MISSING,
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
from clusterset_dns_testkit.objects import (
    ABOUT_V1ALPHA1,
    ABOUT_V1BETA1,
    HTTP,
    cluster_property,
    endpoint,
    endpoint_slice,
    service_import,
)

from .helpers import ZONE, build_cache

SVC = "near.prod.svc.clusterset.local."

Ep = tuple[str, str, str, str, str]
# The endpoints of the table: (name label, cluster, address, zone, node). W_A runs on
# a node called node-1 too: node names are only compared within the local cluster.
E_A: Ep = ("10-0-1-1", "east", "10.0.1.1", "zone-a", "node-1")
E_B: Ep = ("h-0", "east", "10.0.1.2", "zone-b", "node-2")
W_A: Ep = ("10-0-2-1", "west", "10.0.2.1", "zone-a", "node-1")


def records_of(a: list[Ep], *tiers: list[Ep]) -> list[str]:
    """Every record of near.prod when the bare name's A holds ``a`` and the SRV answers
    list ``tiers`` (tier i at priority i, weights within the tier); every endpoint of
    the tiers has its name."""
    lines = [f"{SVC} 5 IN A {ip}" for _, _, ip, _, _ in a]
    for priority, tier in enumerate(tiers):
        weight = 100 // len(tier)
        for host, cluster, ip, _, _ in tier:
            target = f"{host}.{cluster}.{SVC}"
            lines += [f"{SVC} 5 IN SRV {priority} {weight} 80 {target}",
                      f"_http._tcp.{SVC} 5 IN SRV {priority} {weight} 80 {target}",
                      f"{target} 5 IN A {ip}"]
    return sorted(lines)


def near(traffic: str | None = "PreferClose", layout: str = "spec",
         type_: str = "Headless") -> dict[str, Any]:
    return service_import("near", type_=type_, ports=[HTTP], layout=layout,
                          ips=["10.9.0.9"] if type_ == "ClusterSetIP" else None,
                          traffic_distribution=traffic)


def slices(east_ready: tuple[bool, bool] = (True, True), west_ready: bool = True,
           zones: bool = True, serving: bool | None = None) -> list[dict[str, Any]]:
    def ep(item: Ep, ready: bool) -> dict[str, Any]:
        host, _, ip, zone, node = item
        return endpoint(ip, hostname=None if host[0].isdigit() else host, ready=ready,
                        zone=zone if zones else None, node=node,
                        serving=None if ready else serving)

    return [
        endpoint_slice("near-east", "near", cluster="east", ports=[HTTP],
                       endpoints=[ep(E_A, east_ready[0]), ep(E_B, east_ready[1])]),
        endpoint_slice("near-west", "near", cluster="west", ports=[HTTP],
                       endpoints=[ep(W_A, west_ready)]),
    ]


def service_lines(cache: Cache) -> list[str]:
    return sorted(line for line in zone_lines(cache) if line.split()[0].endswith(SVC))


def cache_at(cluster: str | None, zone: str | None, imports: list[dict[str, Any]],
             pieces: list[dict[str, Any]], node: str | None = None,
             serve_terminating: bool = False) -> Cache:
    """The objects built by a cache that knows where it runs (node and --serve-terminating
    come from the configuration; cluster and zone arrive as ops, as at run time)."""
    cache = Cache(ZoneNames(ZONE), 5, node_name=node, serve_terminating=serve_terminating)
    models = [convert.service_import(obj) for obj in imports]
    converted = [convert.endpoint_slice(obj) for obj in pieces]
    cache.apply([ReplaceImports({(m.namespace, m.name): m for m in models}),
                 ReplaceSlices({(p.namespace, p.name): p for p in converted if p is not None}),
                 SetSynced(True)])
    cache.apply([SetClusterId(cluster), SetTopologyZone(zone)])
    return cache


ALL = [E_A, E_B, W_A]
ROWS = [
    # PreferClose (and its newer name PreferSameZone): zone, then cluster, then all.
    pytest.param("east", None, None, near(), slices(), records_of([E_A, E_B], [E_A, E_B], [W_A]),
                 id="local-ready"),
    pytest.param("west", None, None, near(), slices(), records_of([W_A], [W_A], [E_A, E_B]),
                 id="local-ready-west"),
    pytest.param("east", None, None, near(), slices(east_ready=(False, False)),
                 records_of([W_A], [W_A]), id="local-none-ready-all"),
    pytest.param("east", None, None, near(None), slices(), records_of(ALL, ALL),
                 id="field-absent-all"),
    pytest.param("east", "zone-a", "node-1", near("SomethingElse"), slices(),
                 records_of(ALL, ALL), id="unknown-value-all"),
    pytest.param(None, "zone-a", None, near(), slices(), records_of(ALL, ALL),
                 id="cluster-unknown-all"),
    pytest.param("north", None, None, near(), slices(), records_of(ALL, ALL),
                 id="cluster-without-slices-all"),
    pytest.param("east", "zone-b", None, near(), slices(),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="zone-preferred"),
    pytest.param("east", "zone-b", None, near("PreferSameZone"), slices(),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="prefer-same-zone-is-prefer-close"),
    pytest.param("east", "zone-a", None, near(), slices(),
                 records_of([E_A], [E_A], [E_B], [W_A]), id="zone-preferred-not-other-cluster"),
    pytest.param("east", "zone-b", None, near(), slices(east_ready=(True, False)),
                 records_of([E_A], [E_A], [W_A]), id="zone-none-ready-whole-cluster"),
    pytest.param("east", "zone-c", None, near(), slices(),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="zone-absent-whole-cluster"),
    pytest.param("east", "zone-a", None, near(), slices(zones=False),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]),
                 id="endpoints-without-zone-whole-cluster"),
    pytest.param("east", None, "node-2", near(), slices(),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="prefer-close-ignores-the-node"),
    # PreferSameNode: node, then zone, then cluster, then all.
    pytest.param("east", None, "node-2", near("PreferSameNode"), slices(),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="node-preferred"),
    pytest.param("east", "zone-b", "node-1", near("PreferSameNode"), slices(),
                 records_of([E_A], [E_A], [E_B], [W_A]), id="node-then-zone"),
    pytest.param("east", "zone-b", "node-3", near("PreferSameNode"), slices(),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="node-absent-zone"),
    pytest.param("east", "zone-a", None, near("PreferSameNode"), slices(),
                 records_of([E_A], [E_A], [E_B], [W_A]), id="node-unknown-zone"),
    pytest.param("east", None, None, near("PreferSameNode"), slices(),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="node-and-zone-unknown-cluster"),
    pytest.param("west", None, "node-2", near("PreferSameNode"), slices(),
                 records_of([W_A], [W_A], [E_A, E_B]), id="node-of-another-cluster-not-matched"),
    pytest.param("east", "zone-b", "node-1", near("PreferSameNode"),
                 slices(east_ready=(False, False)), records_of([W_A], [W_A]),
                 id="node-nothing-ready-locally-all"),
    pytest.param(None, None, "node-1", near("PreferSameNode"), slices(), records_of(ALL, ALL),
                 id="node-cluster-unknown-all"),
    # Layouts and types.
    pytest.param("east", "zone-b", None, near(layout="root"), slices(),
                 records_of([E_B], [E_B], [E_A], [W_A]), id="v1alpha2-root-layout"),
    pytest.param("east", None, None, near(layout="status"), slices(),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="status-layout"),
    pytest.param("east", "zone-a", "node-1", near("PreferSameNode", type_="ClusterSetIP"),
                 slices(), sorted([f"{SVC} 5 IN A 10.9.0.9", f"{SVC} 5 IN SRV 0 100 80 {SVC}",
                                   f"_http._tcp.{SVC} 5 IN SRV 0 100 80 {SVC}"]),
                 id="clustersetip-unchanged"),
    pytest.param("east", None, None, near(), slices(east_ready=(False, False), west_ready=False),
                 [], id="nothing-ready-no-name"),
    # Serving (terminating) endpoints are not answered without --serve-terminating.
    pytest.param("east", None, None, near(),
                 slices(east_ready=(False, False), west_ready=False, serving=True), [],
                 id="serving-without-the-flag-no-name"),
]


@pytest.mark.parametrize(("cluster", "zone", "node", "imp", "pieces", "expected"), ROWS)
def test_records(cluster: str | None, zone: str | None, node: str | None, imp: dict[str, Any],
                 pieces: list[dict[str, Any]], expected: list[str]) -> None:
    assert service_lines(cache_at(cluster, zone, [imp], pieces, node)) == expected


def wire_name(text: str) -> bytes:
    return names.to_wire(names.split(text))


@pytest.mark.parametrize(("traffic", "cluster"), [(None, None), ("PreferClose", "east"),
                                                   ("PreferSameNode", "west")])
def test_cluster_names_exist_as_without_the_field(traffic: str | None, cluster: str | None
                                                   ) -> None:
    """``<clusterid>.<svc>`` is an empty non-terminal (NODATA) for every cluster with an
    endpoint name, preferred or not (§2.5); a cluster without one does not exist."""
    cache = cache_at(cluster, "zone-a", [near(traffic)], slices(), "node-1")
    assert cache.zone.lookup(wire_name(f"east.{SVC}")) == EMPTY
    assert cache.zone.lookup(wire_name(f"west.{SVC}")) == EMPTY
    assert cache.zone.lookup(wire_name(f"north.{SVC}")) == MISSING


# -- --serve-terminating ----------------------------------------------------------------------

SERVING_ROWS = [
    # Nothing ready anywhere, serving ones exist: they answer (names included), ranked.
    pytest.param("east", near(), slices(east_ready=(False, False), west_ready=False,
                                        serving=True),
                 records_of([E_A, E_B], [E_A, E_B], [W_A]), id="serving-fallback-ranked"),
    pytest.param(None, near(None), slices(east_ready=(False, False), west_ready=False,
                                          serving=True),
                 records_of(ALL, ALL), id="serving-fallback-no-preference"),
    # One ready endpoint anywhere: the serving ones are not used.
    pytest.param("east", near(), slices(east_ready=(False, False), serving=True),
                 records_of([W_A], [W_A]), id="ready-elsewhere-wins-over-serving-locally"),
    # Not ready and not serving (serving false or absent): nothing.
    pytest.param("east", near(), slices(east_ready=(False, False), west_ready=False,
                                        serving=False), [], id="not-serving-no-name"),
    pytest.param("east", near(), slices(east_ready=(False, False), west_ready=False), [],
                 id="serving-absent-no-name"),
]


@pytest.mark.parametrize(("cluster", "imp", "pieces", "expected"), SERVING_ROWS)
def test_serve_terminating(cluster: str | None, imp: dict[str, Any],
                           pieces: list[dict[str, Any]], expected: list[str]) -> None:
    cache = cache_at(cluster, None, [imp], pieces, serve_terminating=True)
    assert service_lines(cache) == expected


@pytest.mark.parametrize("serve_terminating", [False, True])
def test_a_terminating_endpoints_serving_flip_changes_answers_only_with_the_flag(
        serve_terminating: bool) -> None:
    """Nothing else ready: the serving endpoint answers only with --serve-terminating;
    its flip to not serving then takes it away. Without the flag no record changes."""
    cache = cache_at("east", None, [near()],
                     slices(east_ready=(False, False), west_ready=False, serving=True),
                     serve_terminating=serve_terminating)
    before = service_lines(cache)
    assert before == (records_of([E_A, E_B], [E_A, E_B], [W_A]) if serve_terminating else [])
    flip = convert.endpoint_slice(slices(east_ready=(False, False), serving=False)[0])
    assert flip is not None
    cache.apply([PutSlice(("prod", "near-east"), flip)])
    assert service_lines(cache) == (records_of([W_A], [W_A]) if serve_terminating else [])


# -- dual stack: the preference per address family (issue 19) -------------------------------

DUAL = "dual.prod.svc.clusterset.local."


def dual_slices(east_v4: bool) -> list[dict[str, Any]]:
    pieces = [
        endpoint_slice("dual-east-v6", "dual", cluster="east", address_type="IPv6",
                       ports=[HTTP], endpoints=[endpoint("fd00::1", zone="zone-a")]),
        endpoint_slice("dual-west-v4", "dual", cluster="west", ports=[HTTP],
                       endpoints=[endpoint("10.0.2.1", zone="zone-a")]),
        endpoint_slice("dual-west-v6", "dual", cluster="west", address_type="IPv6",
                       ports=[HTTP], endpoints=[endpoint("fd00::2", zone="zone-a")]),
    ]
    if east_v4:
        pieces.append(endpoint_slice("dual-east-v4", "dual", cluster="east", ports=[HTTP],
                                     endpoints=[endpoint("10.0.1.1", zone="zone-b")]))
    return pieces


@pytest.mark.parametrize(("east_v4", "zone", "expected"), [
    # The local cluster has only IPv6: A comes from west, AAAA from east.
    (False, None, [
        f"{DUAL} 5 IN A 10.0.2.1", f"{DUAL} 5 IN AAAA fd00::1",
        f"{DUAL} 5 IN SRV 0 100 80 fd00--1.east.{DUAL}",
        f"{DUAL} 5 IN SRV 1 50 80 10-0-2-1.west.{DUAL}",
        f"{DUAL} 5 IN SRV 1 50 80 fd00--2.west.{DUAL}",
    ]),
    # The local zone-a has only IPv6: A from east's other zone, AAAA from zone-a.
    (True, "zone-a", [
        f"{DUAL} 5 IN A 10.0.1.1", f"{DUAL} 5 IN AAAA fd00::1",
        f"{DUAL} 5 IN SRV 0 100 80 fd00--1.east.{DUAL}",
        f"{DUAL} 5 IN SRV 1 100 80 10-0-1-1.east.{DUAL}",
        f"{DUAL} 5 IN SRV 2 50 80 10-0-2-1.west.{DUAL}",
        f"{DUAL} 5 IN SRV 2 50 80 fd00--2.west.{DUAL}",
    ]),
])
def test_dual_stack_prefers_per_family(east_v4: bool, zone: str | None,
                                       expected: list[str]) -> None:
    imp = service_import("dual", type_="Headless", ports=[HTTP],
                         traffic_distribution="PreferClose")
    cache = cache_at("east", zone, [imp], dual_slices(east_v4))
    got = [line for line in zone_lines(cache) if line.split()[0] == DUAL]
    assert sorted(got) == sorted(expected)


# -- the size rule: a cut answer keeps the preferred tiers --------------------------------------


def test_a_cut_srv_answer_keeps_the_lower_priorities() -> None:
    """1,500 endpoints in west, 3 in east: the SRV answer exceeds one TCP message; the
    records listed first, and so kept, are east's (priority 0), then west's in order."""
    # west's names sort before east's: only the tier puts east first
    east = [endpoint(f"10.1.0.{i}", hostname=f"z-{i}") for i in range(1, 4)]
    west = [endpoint(f"10.2.{i // 250}.{i % 250 + 1}", hostname=f"a-pod-{i}-{'x' * 30}")
            for i in range(1500)]
    pieces = [endpoint_slice("near-east", "near", cluster="east", ports=[HTTP], endpoints=east),
              endpoint_slice("near-west", "near", cluster="west", ports=[HTTP], endpoints=west)]
    cache = cache_at("east", None, [near()], pieces)
    key = wire.question_key(names.split(SVC), wire.SRV)
    answer = dict(cache.zone.every_answer())[key]
    assert answer.cut  # TC: not every record fits one message
    records = [rrs.data_text(r).split() for r in rrs.answer_records(key, answer)]
    priorities = [int(fields[3]) for fields in records]
    assert priorities[:3] == [0, 0, 0] and set(priorities[3:]) == {1}, priorities[:5]
    assert [fields[6] for fields in records[:3]] == [
        f"z-{i}.east.{SVC}" for i in range(1, 4)]
    assert all(fields[4] == "1" for fields in records[3:])  # max(1, 100 // 1500)
    assert 3 < len(records) < 1503


def test_readiness_flip_switches_the_answers_and_back() -> None:
    cache = cache_at("east", None, [near()], slices())
    assert service_lines(cache) == records_of([E_A, E_B], [E_A, E_B], [W_A])
    serial = cache.zone.serial
    down = convert.endpoint_slice(slices(east_ready=(False, False))[0])
    assert down is not None
    cache.apply([PutSlice(("prod", "near-east"), down)])
    assert service_lines(cache) == records_of([W_A], [W_A])
    assert cache.zone.serial > serial
    one_up = convert.endpoint_slice(slices(east_ready=(False, True))[0])
    cache.apply([PutSlice(("prod", "near-east"), one_up)])
    assert service_lines(cache) == records_of([E_B], [E_B], [W_A])


def test_field_added_and_removed_at_run_time() -> None:
    cache = cache_at("east", None, [near(None)], slices())
    assert service_lines(cache) == records_of(ALL, ALL)
    cache.apply([PutImport(("prod", "near"), convert.service_import(near()))])
    assert service_lines(cache) == records_of([E_A, E_B], [E_A, E_B], [W_A])
    cache.apply([PutImport(("prod", "near"), convert.service_import(near(None)))])
    assert service_lines(cache) == records_of(ALL, ALL)


def test_cluster_id_and_zone_changes_rebuild_only_when_they_change() -> None:
    cache = cache_at(None, None, [near(), service_import("plain", type_="Headless")], slices())
    serial = cache.zone.serial
    applied = cache.apply([SetClusterId("west")])
    assert applied.rebuilt == 1  # near only: plain has no PreferClose
    assert cache.zone.serial > serial
    assert service_lines(cache) == records_of([W_A], [W_A], [E_A, E_B])
    assert cache.apply([SetClusterId("west")]).rebuilt == 0
    assert cache.apply([SetClusterId("east"), SetTopologyZone("zone-a")]).rebuilt == 1
    assert service_lines(cache) == records_of([E_A], [E_A], [E_B], [W_A])
    cache.apply([SetClusterId(None)])
    assert service_lines(cache) == records_of(ALL, ALL)


def test_a_worker_snapshot_carries_the_locality() -> None:
    parent = cache_at("east", "zone-b", [near()], slices())
    worker = Cache(ZoneNames(ZONE), 5)
    worker.apply(parent.snapshot())
    assert service_lines(worker) == service_lines(parent) == records_of([E_B], [E_B], [E_A],
                                                                         [W_A])


def test_constructor_locality_is_used_from_the_first_build() -> None:
    cache = Cache(ZoneNames(ZONE), 5, cluster_id="west")
    fresh = build_cache([near()], slices())
    cache.apply(fresh.snapshot()[2:])  # the objects, not fresh's (unknown) locality
    assert service_lines(cache) == records_of([W_A], [W_A], [E_A, E_B])


@pytest.mark.parametrize(("raw", "expected"), [
    ("East", "east"), ("east.eu.", "east.eu"), (" west ", "west")])
def test_cluster_ids_are_read_as_slice_labels_are(raw: str, expected: str) -> None:
    assert properties.cluster_id(raw) == expected


@pytest.mark.parametrize("raw", ["", ".", "a b", 7, None, "x" * 64])
def test_bad_cluster_ids_are_refused(raw: Any) -> None:
    with pytest.raises(convert.InvalidObject):
        properties.cluster_id(raw)


def test_cluster_property_gives_the_cluster_id() -> None:
    for version in (ABOUT_V1ALPHA1, ABOUT_V1BETA1):
        assert properties.cluster_property(cluster_property("East", api_version=version)) == "east"
    assert properties.cluster_property(cluster_property("set-1", "clusterset.k8s.io")) is None
    with pytest.raises(convert.InvalidObject):
        properties.cluster_property(cluster_property("a b"))


def test_node_zone_label() -> None:
    node = {"metadata": {"name": "n1", "labels": {properties.ZONE_LABEL: "zone-a"}}}
    assert properties.node_zone(node) == "zone-a"
    assert properties.node_zone({"metadata": {"name": "n1"}}) is None


# -- values not understood: answered without a preference, counted, logged once -------------


def test_unknown_values_are_logged_once_per_import_and_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    cache = cache_at("east", None, [], [])
    other = convert.service_import(near("PreferSomewhere"))
    assert other.unknown_traffic == "PreferSomewhere"
    with caplog.at_level("WARNING", logger="clusterset_dns.zone.cache"):
        cache.apply([PutImport(("prod", "near"), other)])
        cache.apply([PutImport(("prod", "near"), other)])  # a relist: the same object
        cache.apply([PutImport(("prod", "near"), convert.service_import(
            near("PreferSomewhere") | {"metadata": {"name": "near", "namespace": "prod",
                                                    "labels": {"a": "b"}}}))])
    assert caplog.text.count("trafficDistribution 'PreferSomewhere' is not understood") == 1
    assert cache.unknown_traffic == {("prod", "near"): "PreferSomewhere"}
    cache.apply([PutImport(("prod", "near"), convert.service_import(near("PreferClose")))])
    assert cache.unknown_traffic == {}
    cache.apply([PutImport(("prod", "near"), other)])
    cache.apply([PutImport(("prod", "near"), None)])
    assert cache.unknown_traffic == {}
    assert caplog.text.count("is not understood") == 2  # it came back: said again


@pytest.mark.parametrize(("raw", "prefer", "unknown"), [
    (None, "NOTHING", None), ("PreferClose", "ZONE", None), ("PreferSameZone", "ZONE", None),
    ("PreferSameNode", "NODE", None), ("preferclose", "NOTHING", "preferclose"),
    (7, "NOTHING", "7")])
def test_traffic_distribution_values(raw: Any, prefer: str, unknown: str | None) -> None:
    obj = near(None)
    if raw is not None:
        obj["spec"]["trafficDistribution"] = raw
    imp = convert.service_import(obj)
    assert (imp.prefer.name, imp.unknown_traffic) == (prefer, unknown)


def test_slices_keep_node_names_and_serving_endpoints() -> None:
    piece = convert.endpoint_slice(endpoint_slice("s", "near", cluster="east", endpoints=[
        endpoint("10.0.0.1", node="n1"), endpoint("10.0.0.2", ready=False, serving=True),
        endpoint("10.0.0.3", ready=False, serving=False), endpoint("10.0.0.4", ready=False),
        endpoint("10.0.0.5", ready=True, serving=False)]))
    assert piece is not None
    assert [(str(e.addresses[0]), e.node) for e in piece.endpoints] == [
        ("10.0.0.1", "n1"), ("10.0.0.5", None)]
    assert [str(e.addresses[0]) for e in piece.serving] == ["10.0.0.2"]


# -- the file source reads the ClusterProperty ------------------------------------------------

NEAR_FILE = """
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: near, namespace: prod}
spec: {type: Headless, trafficDistribution: PreferClose}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: near-east
  namespace: prod
  labels: {multicluster.kubernetes.io/service-name: near,
           multicluster.kubernetes.io/source-cluster: east}
addressType: IPv4
endpoints: [{addresses: ["10.0.1.1"]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: near-west
  namespace: prod
  labels: {multicluster.kubernetes.io/service-name: near,
           multicluster.kubernetes.io/source-cluster: west}
addressType: IPv4
endpoints: [{addresses: ["10.0.2.1"]}]
"""


def property_file(value: str, name: str = "cluster.clusterset.k8s.io",
                  version: str = "v1alpha1") -> str:
    return (f"apiVersion: about.k8s.io/{version}\nkind: ClusterProperty\n"
            f"metadata: {{name: {name}}}\nspec: {{value: {value}}}\n")


def addresses(cache: Cache) -> list[str]:
    return [line.split()[-1] for line in service_lines(cache) if line.startswith(f"{SVC} 5 IN A")]


@pytest.mark.parametrize(("use_property", "expected"), [
    (True, [["10.0.1.1"], ["10.0.2.1"], ["10.0.1.1", "10.0.2.1"]]),
    # --cluster-id given: the files' property is not read (the flag wins)
    (False, [["10.0.1.1", "10.0.2.1"]] * 3),
])
def test_manifests_cluster_property(tmp_path: Path, use_property: bool,
                                    expected: list[list[str]]) -> None:
    (tmp_path / "near.yaml").write_text(NEAR_FILE)
    prop = tmp_path / "property.yaml"
    prop.write_text(property_file("East"))
    cache = Cache(ZoneNames(ZONE), 5)
    source = ManifestSource(tmp_path, cache.apply, 0, cluster_property=use_property)
    seen = []
    source.scan()
    seen.append(addresses(cache))
    prop.write_text(property_file("west") + "# changed size\n")
    source.scan()
    seen.append(addresses(cache))
    prop.unlink()
    source.scan()
    seen.append(addresses(cache))
    assert seen == expected


def test_manifests_both_cluster_property_names(tmp_path: Path) -> None:
    """id.k8s.io (the MCS DNS specification's name) names the cluster too; with both,
    cluster.clusterset.k8s.io wins, whichever file sorts last; v1beta1 is read too."""
    (tmp_path / "near.yaml").write_text(NEAR_FILE)
    old = tmp_path / "z-old.yaml"
    old.write_text(property_file("west", "id.k8s.io", "v1beta1"))
    cache = Cache(ZoneNames(ZONE), 5)
    source = ManifestSource(tmp_path, cache.apply, 0)
    source.scan()
    assert addresses(cache) == ["10.0.2.1"]
    new = tmp_path / "a-new.yaml"
    new.write_text(property_file("east", version="v1beta1"))
    source.scan()
    assert addresses(cache) == ["10.0.1.1"]
    new.unlink()
    source.scan()
    assert addresses(cache) == ["10.0.2.1"]


def test_manifests_invalid_cluster_property_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "near.yaml").write_text(NEAR_FILE)
    (tmp_path / "property.yaml").write_text(property_file("'a b'"))
    invalid: list[str] = []
    cache = Cache(ZoneNames(ZONE), 5)
    ManifestSource(tmp_path, cache.apply, 0, invalid=invalid.append).scan()
    assert invalid == ["ClusterProperty"]
    assert addresses(cache) == ["10.0.1.1", "10.0.2.1"]


# -- flags ------------------------------------------------------------------------------------


def config_of(*argv: str, environ: dict[str, str] | None = None) -> Config:
    parser = build_parser()
    return to_config(parser.parse_args(["serve", *argv]), environ or {})


def test_flags_and_environment() -> None:
    config = config_of("--cluster-id", "East.EU", "--topology-zone", "zone-a")
    assert (config.cluster_id, config.topology_zone) == ("east.eu", "zone-a")
    assert (config.node_name, config.serve_terminating) == (None, False)
    config = config_of("--node-name", "node-1", "--serve-terminating")
    assert (config.node_name, config.serve_terminating) == ("node-1", True)
    config = config_of(environ={"CLUSTERSET_DNS_NODE_NAME": "node-2",
                                "CLUSTERSET_DNS_SERVE_TERMINATING": "true"})
    assert (config.node_name, config.serve_terminating) == ("node-2", True)
    assert not config_of(environ={"CLUSTERSET_DNS_SERVE_TERMINATING": "false"}
                         ).serve_terminating
    config = config_of(environ={"CLUSTERSET_DNS_TOPOLOGY_ZONE_FROM_NODE": "node-1"})
    assert config.topology_zone_from_node == "node-1"
    assert config_of().cluster_id is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--cluster-id", "a b"], "--cluster-id='a b': not a cluster id"),
    (["--topology-zone", "z", "--topology-zone-from-node", "n"], "--topology-zone-from-node"),
    (["--topology-zone-from-node", "n", "--manifests", "x"], "needs the Kubernetes source"),
    (["--topology-zone", ""], "--topology-zone: must not be empty"),
    (["--node-name", ""], "--node-name: must not be empty"),
])
def test_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_of(*argv)


# -- incremental = from scratch, with the locality changing --------------------------------------

SLICE_STEP = st.builds(
    lambda service, name, cluster, eps: ("slice", endpoint_slice(
        f"{service}-{name}", service, cluster=cluster, ports=[HTTP],  # near-east: the table's
        endpoints=[endpoint(f"10.0.{i}.{n}", ready=ready, zone=zone, node=node,
                            serving=serving)
                   for i, (n, ready, zone, node, serving) in enumerate(eps)])),
    st.sampled_from(["near", "plain"]), st.sampled_from(["east", "west", "c"]),
    st.sampled_from(["east", "west", None]),
    st.lists(st.tuples(st.integers(1, 3), st.booleans(), st.sampled_from(["z1", "z2", None]),
                       st.sampled_from(["node-1", "node-2", None]),
                       st.sampled_from([True, False, None])),
             max_size=3))
STEPS = st.one_of(
    SLICE_STEP,
    st.tuples(st.just("cluster"), st.sampled_from(["east", "west", "north", None])),
    st.tuples(st.just("zone"), st.sampled_from(["z1", "z2", None])),
    st.tuples(st.just("field"), st.sampled_from(["PreferClose", "PreferSameZone",
                                                 "PreferSameNode", "Other", None])),
)


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.lists(STEPS, min_size=1, max_size=3), min_size=1, max_size=6),
       st.sampled_from(["node-1", "node-2", None]), st.booleans())
def test_incremental_locality_equals_a_rebuild_from_scratch(
        batches: list[list[tuple[str, Any]]], node: str | None, serve_terminating: bool) -> None:
    plain = service_import("plain", type_="Headless", ports=[HTTP])
    state: dict[str, Any] = {"cluster": None, "zone": None, "field": "PreferClose"}
    # Starts from the table's slices (both clusters ready, two zones), so that a batch
    # changing only the locality changes answers.
    pieces = {piece["metadata"]["name"]: piece for piece in slices()}
    cache = cache_at(None, None, [near(), plain], list(pieces.values()), node,
                     serve_terminating)
    for batch in batches:
        ops: list[Op] = []
        for step, arg in batch:
            if step == "slice":
                model = convert.endpoint_slice(arg)
                assert model is not None
                pieces[arg["metadata"]["name"]] = arg
                ops.append(PutSlice(("prod", arg["metadata"]["name"]), model))
            elif step == "cluster":
                ops.append(SetClusterId(arg))
            elif step == "zone":
                ops.append(SetTopologyZone(arg))
            else:
                ops.append(PutImport(("prod", "near"), convert.service_import(near(arg))))
            state[step if step != "slice" else "_"] = arg
        cache.apply(ops)
    # Built in one go, the locality given before any object (no SetClusterId op).
    expected = Cache(ZoneNames(ZONE), 5, cluster_id=state["cluster"],
                     topology_zone=state["zone"], node_name=node,
                     serve_terminating=serve_terminating)
    models = [convert.service_import(obj) for obj in (near(state["field"]), plain)]
    converted = [convert.endpoint_slice(obj) for obj in pieces.values()]
    expected.apply([ReplaceImports({(m.namespace, m.name): m for m in models}),
                    ReplaceSlices({(p.namespace, p.name): p for p in converted if p is not None}),
                    SetSynced(True)])
    assert zone_lines(cache)[2:] == zone_lines(expected)[2:]  # past NS and SOA (serial)


# -- dump over examples/ ----------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NEAR_DEMO = "near.demo.svc.clusterset.local. 5 IN A"


@pytest.mark.parametrize(("argv", "expected"), [
    ([], ["10.4.0.1", "10.4.0.2"]),  # examples/cluster-property.yaml: east
    (["--cluster-id", "West.Example.com"], ["10.4.1.1"]),  # the flag wins
    (["--topology-zone", "zone-b"], ["10.4.0.2"]),
])
def test_dump_of_the_examples(argv: list[str], expected: list[str]) -> None:
    config = to_config(build_parser().parse_args(["dump", "--manifests", str(EXAMPLES), *argv]),
                       {})
    out = io.StringIO()
    assert dump(config, out) == 0
    assert [line.split()[-1] for line in out.getvalue().splitlines()
            if line.startswith(NEAR_DEMO)] == expected


# -- the StatefulSet example of docs/locality.md keeps working ---------------------------------

LOCALITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "locality.md"


def test_the_statefulset_example_of_the_docs(tmp_path: Path) -> None:
    text = LOCALITY_DOC.read_text()
    example = text[text.index("<!-- statefulset-example"):]
    yaml_text = example.split("```yaml\n", 1)[1].split("```", 1)[0]
    shown = example.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    (tmp_path / "pg.yaml").write_text(yaml_text)
    config = to_config(build_parser().parse_args(
        ["dump", "--manifests", str(tmp_path / "pg.yaml"), "--cluster-id", "east",
         "--node-name", "east-2"]), {})
    out = io.StringIO()
    assert dump(config, out) == 0
    got = [line for line in out.getvalue().splitlines() if line.split()[0].endswith(
        "pg.demo.svc.clusterset.local.")]
    assert got == shown
