"""Local-first answers against a real API server (issues 12 and 20): the cluster id
comes from the ClusterProperty ``cluster.clusterset.k8s.io``, else ``id.k8s.io``
(created, changed and deleted at run time, in both about-api versions),
``--cluster-id`` wins over it, and an import's trafficDistribution added and
removed through the API is followed.

The about-api CRD is installed by these tests (the first one makes sure it is
absent); the cluster-scoped ClusterProperty is deleted after each test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from clusterset_dns_testkit.dnsserver import REPO, ServerProcess, expect, wait_for
from clusterset_dns_testkit.objects import (
    ABOUT_V1ALPHA1,
    ABOUT_V1BETA1,
    CLUSTER_ID,
    HTTP,
    V1BETA1,
    cluster_property,
    endpoint_slice,
    ready_endpoints,
    service_import,
)
from clusterset_dns_testkit.peers import KubeAPI

from .names import a, fqdn

CRD = "clusterproperties.about.k8s.io"


OLD_PROPERTY = "id.k8s.io"  # the name the MCS DNS specification still uses


def near(namespace: str, prefer_close: bool) -> dict[str, Any]:
    obj = service_import("near", namespace, ports=[HTTP], type_="Headless")
    if prefer_close:
        obj["spec"]["trafficDistribution"] = "PreferClose"
    return obj


def two_clusters(api: KubeAPI, namespace: str) -> None:
    api.apply(endpoint_slice("near-east", "near", namespace, "east",
                             endpoints=ready_endpoints(["10.30.0.1"]), ports=[HTTP]))
    api.apply(endpoint_slice("near-west", "near", namespace, "west",
                             endpoints=ready_endpoints(["10.30.1.1"]), ports=[HTTP]))


@pytest.fixture
def about_api(api: KubeAPI) -> Iterator[KubeAPI]:
    api.install_crds(["about-api"])
    yield api
    api.delete(ABOUT_V1BETA1, "ClusterProperty", None, CLUSTER_ID)
    api.delete(ABOUT_V1BETA1, "ClusterProperty", None, OLD_PROPERTY)


def test_without_the_crd_nothing_changes_and_nothing_is_repeated(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    api.delete_crd(CRD)
    server = server_for().start()
    server.wait_ready()
    name = fqdn("near", namespace)
    api.apply(near(namespace, prefer_close=True))
    two_clusters(api, namespace)
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1", "10.30.1.1"))
    log = server.log_text()
    assert log.count("no ClusterProperty API") == 1, log
    assert "about.k8s.io" not in log.replace("no ClusterProperty API (about.k8s.io)", ""), log


def test_cluster_property_created_changed_deleted_at_run_time(
        about_api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    api = about_api
    server = server_for().start()
    server.wait_ready()
    name = fqdn("near", namespace)
    east0, west0 = fqdn("10-30-0-1", "east", "near", namespace), \
        fqdn("10-30-1-1", "west", "near", namespace)
    api.apply(near(namespace, prefer_close=True))
    two_clusters(api, namespace)
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1", "10.30.1.1"))
    api.apply(cluster_property("East"))  # read as slice labels are: lower case
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1"))
    expect(server, west0, "A", "NOERROR", a(west0, "10.30.1.1"))  # every name resolves
    expect(server, name, "SRV", "NOERROR", [f"{name} 5 IN SRV 0 100 80 {east0}",
                                            f"{name} 5 IN SRV 1 100 80 {west0}"])
    api.apply(cluster_property("west"))
    expect(server, name, "A", "NOERROR", a(name, "10.30.1.1"))
    expect(server, west0, "A", "NOERROR", a(west0, "10.30.1.1"))
    # Not a cluster id: skipped and counted; the last valid id stays.
    api.apply(cluster_property("not an id"))
    wait_for(lambda: "ClusterProperty cluster.clusterset.k8s.io" in server.log_text()
             and "skipped" in server.log_text(), 10, "the invalid property to be logged")
    expect(server, name, "A", "NOERROR", a(name, "10.30.1.1"))
    assert server.metric("clusterset_dns_invalid_objects_total", kind="ClusterProperty") == 1
    # The local cluster has nothing ready: every cluster's endpoints.
    api.apply(endpoint_slice("near-west", "near", namespace, "west",
                             endpoints=ready_endpoints(["10.30.1.1"], ready=[False]), ports=[HTTP]))
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1"))
    api.apply(endpoint_slice("near-west", "near", namespace, "west",
                             endpoints=ready_endpoints(["10.30.1.1"]), ports=[HTTP]))
    expect(server, name, "A", "NOERROR", a(name, "10.30.1.1"))
    api.delete(ABOUT_V1BETA1, "ClusterProperty", None, CLUSTER_ID)
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1", "10.30.1.1"))


def test_both_property_names_in_both_versions(
        about_api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """id.k8s.io names the cluster (written through v1alpha1); cluster.clusterset.k8s.io
    (v1beta1) wins when both exist; deleted, id.k8s.io counts again."""
    api = about_api
    server = server_for().start()
    server.wait_ready()
    name = fqdn("near", namespace)
    api.apply(near(namespace, prefer_close=True))
    two_clusters(api, namespace)
    api.apply(cluster_property("west", OLD_PROPERTY, ABOUT_V1ALPHA1))
    expect(server, name, "A", "NOERROR", a(name, "10.30.1.1"))
    api.apply(cluster_property("east"))
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1"))
    api.apply(cluster_property("north", OLD_PROPERTY, ABOUT_V1ALPHA1))
    api.apply(cluster_property("west"))  # a later change of the winner still counts
    expect(server, name, "A", "NOERROR", a(name, "10.30.1.1"))
    api.delete(ABOUT_V1BETA1, "ClusterProperty", None, CLUSTER_ID)
    # north has no slices: no preference can apply, every cluster's endpoints
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1", "10.30.1.1"))
    api.apply(cluster_property("east", OLD_PROPERTY))
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1"))


def test_import_field_added_and_removed_through_the_api(
        about_api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    api = about_api
    api.apply(cluster_property("east"))
    server = server_for().start()
    server.wait_ready()
    name = fqdn("near", namespace)
    api.apply(near(namespace, prefer_close=False))
    two_clusters(api, namespace)
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1", "10.30.1.1"))
    api.apply(near(namespace, prefer_close=True))
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1"))
    api.apply(near(namespace, prefer_close=False))
    expect(server, name, "A", "NOERROR", a(name, "10.30.0.1", "10.30.1.1"))
    assert api.get(V1BETA1, "ServiceImport", namespace, "near") is not None


def test_cluster_id_flag_wins_over_the_property(
        about_api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    api = about_api
    api.apply(cluster_property("east"))
    server = server_for("--cluster-id", "west").start()
    server.wait_ready()
    name = fqdn("near", namespace)
    api.apply(near(namespace, prefer_close=True))
    two_clusters(api, namespace)
    expect(server, name, "A", "NOERROR", a(name, "10.30.1.1"))
    assert "watching ClusterProperty" not in server.log_text()


def test_topology_zone_from_the_node_label(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    node = f"node-{namespace}"[:63]
    api.apply({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": "zone-b"}}})
    try:
        server = server_for("--cluster-id", "east", "--topology-zone-from-node", node).start()
        server.wait_ready()
        name = fqdn("near", namespace)
        api.apply(near(namespace, prefer_close=True))
        east = endpoint_slice("near-east", "near", namespace, "east",
                              endpoints=ready_endpoints(["10.30.0.1", "10.30.0.2"]), ports=[HTTP])
        for endpoint, zone in zip(east["endpoints"], ("zone-a", "zone-b"), strict=True):
            endpoint["zone"] = zone
        api.apply(east)
        api.apply(endpoint_slice("near-west", "near", namespace, "west",
                                 endpoints=ready_endpoints(["10.30.1.1"]), ports=[HTTP]))
        expect(server, name, "A", "NOERROR", a(name, "10.30.0.2"))
        # zone-b's endpoint is not ready: the whole local cluster.
        east["endpoints"][1]["conditions"]["ready"] = False
        api.apply(east)
        expect(server, name, "A", "NOERROR", a(name, "10.30.0.1"))
        assert f"topology zone zone-b (label topology.kubernetes.io/zone of Node {node})" \
            in server.log_text()
    finally:
        api.delete("v1", "Node", None, node)


def test_deploy_rbac_is_enough_for_the_cluster_property(
        about_api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """With only deploy/base/rbac.yaml's rights (bound here under other names, removed
    after), the property is read."""
    api = about_api
    role = next(d for d in yaml.safe_load_all((REPO / "deploy" / "base" / "rbac.yaml")
                                                .read_text()) if d["kind"] == "ClusterRole")
    role["metadata"]["name"] = "clusterset-dns-locality-test"
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "clusterset-dns-locality-test"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "clusterset-dns-locality-test"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": "reader"}]}
    api.apply(role)
    api.apply(binding)
    try:
        api.apply(cluster_property("west"))
        server = server_for(kubeconfig=api.reader_kubeconfig).start()
        server.wait_ready()
        name = fqdn("near", namespace)
        api.apply(near(namespace, prefer_close=True))
        two_clusters(api, namespace)
        expect(server, name, "A", "NOERROR", a(name, "10.30.1.1"))
        assert "403" not in server.log_text()
    finally:
        api.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", None,
                   "clusterset-dns-locality-test")
        api.delete("rbac.authorization.k8s.io/v1", "ClusterRole", None,
                   "clusterset-dns-locality-test")
