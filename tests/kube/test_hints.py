"""Local-first answers follow the topology hints a real API server stores (issue 35):
``hints.forZones`` and ``hints.forNodes`` (the session's apiserver runs with the
PreferSameTrafficDistribution gate, without which Kubernetes 1.33 drops
``forNodes``), written, changed and removed at run time."""

from __future__ import annotations

from typing import Any

import pytest

from clusterset_dns.sources import convert
from clusterset_dns_testkit.dnsserver import ServerProcess, expect
from clusterset_dns_testkit.objects import HTTP, endpoint, endpoint_slice, service_import
from clusterset_dns_testkit.peers import ApiError, KubeAPI

from .names import a, fqdn


def near(namespace: str, traffic: str) -> dict[str, Any]:
    obj = service_import("near", namespace, ports=[HTTP], type_="Headless")
    obj["spec"]["trafficDistribution"] = traffic
    return obj


def east(namespace: str, first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """east's two endpoints: 10.31.0.1 (zone-a, node-1) and 10.31.0.2 (zone-b, node-2),
    with the hints given (keyword arguments of objects.endpoint)."""
    return endpoint_slice("near-east", "near", namespace, "east", ports=[HTTP], endpoints=[
        endpoint("10.31.0.1", ready=True, zone="zone-a", node="node-1", **first),
        endpoint("10.31.0.2", ready=True, zone="zone-b", node="node-2", **second)])


def stored_hints(api: KubeAPI, namespace: str) -> list[Any]:
    piece = api.get("discovery.k8s.io/v1", "EndpointSlice", namespace, "near-east")
    assert piece is not None
    return [e.get("hints") for e in piece["endpoints"]]


def test_hints_written_changed_and_removed_through_the_api(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    server = server_for("--cluster-id", "east", "--topology-zone", "zone-b",
                        "--node-name", "node-1").start()
    server.wait_ready()
    name = fqdn("near", namespace)
    api.apply(near(namespace, "PreferClose"))
    api.apply(endpoint_slice("near-west", "near", namespace, "west", ports=[HTTP],
                             endpoints=[endpoint("10.31.1.1", ready=True, zone="zone-b")]))
    # Fields only: zone-b's endpoint.
    api.apply(east(namespace, {}, {}))
    expect(server, name, "A", "NOERROR", a(name, "10.31.0.2"))
    # Hints that disagree with the fields win (the data path follows them).
    api.apply(east(namespace, {"for_zones": ["zone-b"]}, {"for_zones": ["zone-a"]}))
    assert stored_hints(api, namespace) == [{"forZones": [{"name": "zone-b"}]},
                                            {"forZones": [{"name": "zone-a"}]}]
    expect(server, name, "A", "NOERROR", a(name, "10.31.0.1"))
    # One endpoint without hints: the fields of all, as kube-proxy ignores partial hints.
    api.apply(east(namespace, {"for_zones": ["zone-b"]}, {}))
    expect(server, name, "A", "NOERROR", a(name, "10.31.0.2"))
    # PreferSameNode: node hints over nodeName (node-1 is 10.31.0.1's nodeName).
    api.apply(near(namespace, "PreferSameNode"))
    api.apply(east(namespace, {"for_zones": ["zone-a"], "for_nodes": ["node-2"]},
                   {"for_zones": ["zone-b"], "for_nodes": ["node-1"]}))
    assert stored_hints(api, namespace)[1] == {"forZones": [{"name": "zone-b"}],
                                               "forNodes": [{"name": "node-1"}]}
    expect(server, name, "A", "NOERROR", a(name, "10.31.0.2"))
    expect(server, name, "SRV", "NOERROR", [
        f"{name} 5 IN SRV 0 100 80 {fqdn('10-31-0-2', 'east', 'near', namespace)}",
        f"{name} 5 IN SRV 1 100 80 {fqdn('10-31-0-1', 'east', 'near', namespace)}",
        f"{name} 5 IN SRV 2 100 80 {fqdn('10-31-1-1', 'west', 'near', namespace)}"])
    # Hints removed: nodeName again.
    api.apply(east(namespace, {}, {}))
    expect(server, name, "A", "NOERROR", a(name, "10.31.0.1"))


def test_the_api_refuses_more_zone_hints_than_the_model_keeps(api: KubeAPI, namespace: str) -> None:
    """The bound the model keeps (convert.MAX_HINTS) is the API's own."""
    nine = [f"zone-{i}" for i in range(convert.MAX_HINTS + 1)]
    with pytest.raises(ApiError) as refused:
        api.apply(east(namespace, {"for_zones": nine}, {}))
    assert refused.value.status == 422
    api.apply(east(namespace, {"for_zones": nine[:8]}, {}))
