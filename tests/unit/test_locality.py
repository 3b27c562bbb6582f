"""Local-first answers (PreferClose + the server's cluster id and zone), issue 12.

Each row: where the server runs, the import's trafficDistribution and layout,
the slices' readiness, and every record the service then has, as zone-file
text (``clusterset-dns dump``'s lines). The expected records are written out
by :func:`records_of` from the endpoints the rule keeps, never taken from the
server.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterset_dns import convert
from clusterset_dns.app import snapshot
from clusterset_dns.cache import (
    Cache,
    Op,
    PutImport,
    PutSlice,
    SetClusterId,
    SetTopologyZone,
)
from clusterset_dns.cli import build_parser, to_config
from clusterset_dns.config import Config, ConfigError
from clusterset_dns.dump import dump, zone_lines
from clusterset_dns.manifests import ManifestSource
from clusterset_dns.names import ZoneNames

from .helpers import ZONE, build_cache, endpoint, endpoint_slice, port, service_import

SVC = "near.prod.svc.clusterset.local."
HTTP = port(80, "TCP", "http")

# The endpoints of the table: (name label, cluster, address, zone).
E_A = ("10-0-1-1", "east", "10.0.1.1", "zone-a")
E_B = ("h-0", "east", "10.0.1.2", "zone-b")
W_A = ("10-0-2-1", "west", "10.0.2.1", "zone-a")


def records_of(*kept: tuple[str, str, str, str]) -> list[str]:
    """Every record of near.prod when the answers hold exactly ``kept``."""
    if not kept:
        return []
    weight = 100 // len(kept)
    lines = [f"{SVC} 5 IN A {ip}" for _, _, ip, _ in kept]
    for host, cluster, ip, _ in kept:
        target = f"{host}.{cluster}.{SVC}"
        lines += [f"{SVC} 5 IN SRV 0 {weight} 80 {target}",
                  f"_http._tcp.{SVC} 5 IN SRV 0 {weight} 80 {target}",
                  f"{target} 5 IN A {ip}"]
    return sorted(lines)


def near(traffic: str | None = "PreferClose", layout: str = "spec",
         type_: str = "Headless") -> dict[str, Any]:
    return service_import("near", type_=type_, ports=[HTTP], layout=layout,
                          ips=["10.9.0.9"] if type_ == "ClusterSetIP" else None,
                          traffic_distribution=traffic)


def slices(east_ready: tuple[bool, bool] = (True, True), west_ready: bool = True,
           zones: bool = True) -> list[dict[str, Any]]:
    def ep(item: tuple[str, str, str, str], ready: bool) -> dict[str, Any]:
        host, _, ip, zone = item
        return endpoint(ip, hostname=None if host[0].isdigit() else host, ready=ready,
                        zone=zone if zones else None)

    return [
        endpoint_slice("near-east", "near", cluster="east", ports=[HTTP],
                       endpoints=[ep(E_A, east_ready[0]), ep(E_B, east_ready[1])]),
        endpoint_slice("near-west", "near", cluster="west", ports=[HTTP],
                       endpoints=[ep(W_A, west_ready)]),
    ]


def service_lines(cache: Cache) -> list[str]:
    return sorted(line for line in zone_lines(cache) if line.split()[0].endswith(SVC))


def cache_at(cluster: str | None, zone: str | None, imports: list[dict[str, Any]],
             pieces: list[dict[str, Any]]) -> Cache:
    cache = build_cache(imports, pieces)
    cache.apply([SetClusterId(cluster), SetTopologyZone(zone)])
    return cache


ROWS = [
    pytest.param("east", None, near(), slices(), records_of(E_A, E_B), id="local-ready"),
    pytest.param("west", None, near(), slices(), records_of(W_A), id="local-ready-west"),
    pytest.param("east", None, near(), slices(east_ready=(False, False)), records_of(W_A),
                 id="local-none-ready-all"),
    pytest.param("east", None, near(None), slices(), records_of(E_A, E_B, W_A),
                 id="field-absent-all"),
    pytest.param("east", None, near("SomethingElse"), slices(), records_of(E_A, E_B, W_A),
                 id="other-value-all"),
    pytest.param(None, "zone-a", near(), slices(), records_of(E_A, E_B, W_A),
                 id="cluster-unknown-all"),
    pytest.param("north", None, near(), slices(), records_of(E_A, E_B, W_A),
                 id="cluster-without-slices-all"),
    pytest.param("east", "zone-b", near(), slices(), records_of(E_B), id="zone-preferred"),
    pytest.param("east", "zone-a", near(), slices(), records_of(E_A),
                 id="zone-preferred-not-other-cluster"),
    pytest.param("east", "zone-b", near(), slices(east_ready=(True, False)), records_of(E_A),
                 id="zone-none-ready-whole-cluster"),
    pytest.param("east", "zone-c", near(), slices(), records_of(E_A, E_B),
                 id="zone-absent-whole-cluster"),
    pytest.param("east", "zone-a", near(), slices(zones=False), records_of(E_A, E_B),
                 id="endpoints-without-zone-whole-cluster"),
    pytest.param("east", "zone-b", near(layout="root"), slices(), records_of(E_B),
                 id="v1alpha2-root-layout"),
    pytest.param("east", None, near(layout="status"), slices(), records_of(E_A, E_B),
                 id="status-layout"),
    pytest.param("east", "zone-a", near(type_="ClusterSetIP"), slices(),
                 sorted([f"{SVC} 5 IN A 10.9.0.9", f"{SVC} 5 IN SRV 0 100 80 {SVC}",
                         f"_http._tcp.{SVC} 5 IN SRV 0 100 80 {SVC}"]),
                 id="clustersetip-unchanged"),
    pytest.param("east", None, near(), slices(east_ready=(False, False), west_ready=False), [],
                 id="nothing-ready-no-name"),
]


@pytest.mark.parametrize(("cluster", "zone", "imp", "pieces", "expected"), ROWS)
def test_records(cluster: str | None, zone: str | None, imp: dict[str, Any],
                 pieces: list[dict[str, Any]], expected: list[str]) -> None:
    assert service_lines(cache_at(cluster, zone, [imp], pieces)) == expected


def test_readiness_flip_switches_the_answers_and_back() -> None:
    cache = cache_at("east", None, [near()], slices())
    assert service_lines(cache) == records_of(E_A, E_B)
    serial = cache.zone.serial
    down = convert.endpoint_slice(slices(east_ready=(False, False))[0])
    assert down is not None
    cache.apply([PutSlice(("prod", "near-east"), down)])
    assert service_lines(cache) == records_of(W_A)
    assert cache.zone.serial > serial
    one_up = convert.endpoint_slice(slices(east_ready=(False, True))[0])
    cache.apply([PutSlice(("prod", "near-east"), one_up)])
    assert service_lines(cache) == records_of(E_B)


def test_field_added_and_removed_at_run_time() -> None:
    cache = cache_at("east", None, [near(None)], slices())
    assert service_lines(cache) == records_of(E_A, E_B, W_A)
    cache.apply([PutImport(("prod", "near"), convert.service_import(near()))])
    assert service_lines(cache) == records_of(E_A, E_B)
    cache.apply([PutImport(("prod", "near"), convert.service_import(near(None)))])
    assert service_lines(cache) == records_of(E_A, E_B, W_A)


def test_cluster_id_and_zone_changes_rebuild_only_when_they_change() -> None:
    cache = cache_at(None, None, [near(), service_import("plain", type_="Headless")], slices())
    serial = cache.zone.serial
    applied = cache.apply([SetClusterId("west")])
    assert applied.rebuilt == 1  # near only: plain has no PreferClose
    assert cache.zone.serial > serial
    assert service_lines(cache) == records_of(W_A)
    assert cache.apply([SetClusterId("west")]).rebuilt == 0
    assert cache.apply([SetClusterId("east"), SetTopologyZone("zone-a")]).rebuilt == 1
    assert service_lines(cache) == records_of(E_A)
    cache.apply([SetClusterId(None)])
    assert service_lines(cache) == records_of(E_A, E_B, W_A)


def test_a_worker_snapshot_carries_the_locality() -> None:
    parent = cache_at("east", "zone-b", [near()], slices())
    worker = Cache(ZoneNames(ZONE), 5)
    worker.apply(snapshot(parent))
    assert service_lines(worker) == service_lines(parent) == records_of(E_B)


def test_constructor_locality_is_used_from_the_first_build() -> None:
    cache = Cache(ZoneNames(ZONE), 5, cluster_id="west")
    fresh = build_cache([near()], slices())
    cache.apply(snapshot(fresh)[2:])  # the objects, not fresh's (unknown) locality
    assert service_lines(cache) == records_of(W_A)


@pytest.mark.parametrize(("raw", "expected"), [
    ("East", "east"), ("east.eu.", "east.eu"), (" west ", "west")])
def test_cluster_ids_are_read_as_slice_labels_are(raw: str, expected: str) -> None:
    assert convert.cluster_id(raw) == expected


@pytest.mark.parametrize("raw", ["", ".", "a b", 7, None, "x" * 64])
def test_bad_cluster_ids_are_refused(raw: Any) -> None:
    with pytest.raises(convert.InvalidObject):
        convert.cluster_id(raw)


def cluster_property(name: str, value: Any) -> dict[str, Any]:
    return {"apiVersion": "about.k8s.io/v1alpha1", "kind": "ClusterProperty",
            "metadata": {"name": name}, "spec": {"value": value}}


def test_cluster_property_gives_the_cluster_id() -> None:
    assert convert.cluster_property(
        cluster_property("cluster.clusterset.k8s.io", "East")) == "east"
    assert convert.cluster_property(cluster_property("clusterset.k8s.io", "set-1")) is None
    with pytest.raises(convert.InvalidObject):
        convert.cluster_property(cluster_property("cluster.clusterset.k8s.io", "a b"))


def test_node_zone_label() -> None:
    node = {"metadata": {"name": "n1", "labels": {convert.ZONE_LABEL: "zone-a"}}}
    assert convert.node_zone(node) == "zone-a"
    assert convert.node_zone({"metadata": {"name": "n1"}}) is None


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


def property_file(value: str) -> str:
    return ("apiVersion: about.k8s.io/v1alpha1\nkind: ClusterProperty\n"
            f"metadata: {{name: cluster.clusterset.k8s.io}}\nspec: {{value: {value}}}\n")


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
    config = config_of(environ={"CLUSTERSET_DNS_TOPOLOGY_ZONE_FROM_NODE": "node-1"})
    assert config.topology_zone_from_node == "node-1"
    assert config_of().cluster_id is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--cluster-id", "a b"], "--cluster-id='a b': not a cluster id"),
    (["--topology-zone", "z", "--topology-zone-from-node", "n"], "--topology-zone-from-node"),
    (["--topology-zone-from-node", "n", "--manifests", "x"], "needs the Kubernetes source"),
    (["--topology-zone", ""], "--topology-zone: must not be empty"),
])
def test_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_of(*argv)


# -- incremental = from scratch, with the locality changing --------------------------------------

SLICE_STEP = st.builds(
    lambda service, name, cluster, eps: ("slice", endpoint_slice(
        f"{service}-{name}", service, cluster=cluster, ports=[HTTP],  # near-east: the table's
        endpoints=[endpoint(f"10.0.{i}.{n}", ready=ready, zone=zone)
                   for i, (n, ready, zone) in enumerate(eps)])),
    st.sampled_from(["near", "plain"]), st.sampled_from(["east", "west", "c"]),
    st.sampled_from(["east", "west", None]),
    st.lists(st.tuples(st.integers(1, 3), st.booleans(), st.sampled_from(["z1", "z2", None])),
             max_size=3))
STEPS = st.one_of(
    SLICE_STEP,
    st.tuples(st.just("cluster"), st.sampled_from(["east", "west", "north", None])),
    st.tuples(st.just("zone"), st.sampled_from(["z1", "z2", None])),
    st.tuples(st.just("field"), st.sampled_from(["PreferClose", None])),
)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.lists(STEPS, min_size=1, max_size=3), min_size=1, max_size=6))
def test_incremental_locality_equals_a_rebuild_from_scratch(
        batches: list[list[tuple[str, Any]]]) -> None:
    plain = service_import("plain", type_="Headless", ports=[HTTP])
    state: dict[str, Any] = {"cluster": None, "zone": None, "field": "PreferClose"}
    # Starts from the table's slices (both clusters ready, two zones), so that a batch
    # changing only the locality changes answers.
    pieces = {piece["metadata"]["name"]: piece for piece in slices()}
    cache = build_cache([near(), plain], list(pieces.values()))
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
                     topology_zone=state["zone"])
    expected.apply(snapshot(build_cache([near(state["field"]), plain],
                                        list(pieces.values())))[2:])
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
