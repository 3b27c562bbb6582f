"""Raw Kubernetes API objects as a controller writes them (plain dicts): ServiceImports
in each layout, EndpointSlices with the MCS labels, ClusterProperties. The one builder
of the unit tests (through clusterset_dns.sources.convert), the API tests, the benchmark and
the cluster tests; a field left as None is left out of the object."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

Obj = dict[str, Any]

V1ALPHA1 = "multicluster.x-k8s.io/v1alpha1"
V1BETA1 = "multicluster.x-k8s.io/v1beta1"
V1ALPHA2 = "multicluster.x-k8s.io/v1alpha2"  # the proposal: fields at the root
STATUS_LAYOUT = "multicluster.status.test/v1"  # tests/crds: fields under status (forks)
SLICE_API = "discovery.k8s.io/v1"
ABOUT_V1ALPHA1 = "about.k8s.io/v1alpha1"
ABOUT_V1BETA1 = "about.k8s.io/v1beta1"
SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name"
SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"
CLUSTER_ID = "cluster.clusterset.k8s.io"  # the ClusterProperty naming this cluster
LAYOUTS = ("spec", "root", "status")


def port(number: Any, protocol: str | None = None, name: str | None = None) -> Obj:
    raw: Obj = {"port": number}
    if protocol is not None:
        raw["protocol"] = protocol
    if name is not None:
        raw["name"] = name
    return raw


HTTP = port(80, "TCP", "http")


def service_import(name: str, namespace: str | None = "prod", type_: str = "ClusterSetIP",
                   ips: Sequence[Any] | None = None, ports: Sequence[Any] | None = None,
                   layout: str = "spec", api_version: str = V1BETA1,
                   traffic_distribution: str | None = None) -> Obj:
    """``layout`` is where its fields sit: "spec" (v1alpha1, v1beta1), "root" (the
    v1alpha2 proposal) or "status" (forks)."""
    fields: Obj = {"type": type_}
    if traffic_distribution is not None:
        fields["trafficDistribution"] = traffic_distribution
    if ips is not None:
        fields["ips"] = list(ips)
    if ports is not None:
        fields["ports"] = copy.deepcopy(list(ports))  # a shared HTTP stays unchanged
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    obj: Obj = {"apiVersion": api_version, "kind": "ServiceImport", "metadata": meta}
    if layout == "spec":
        obj["spec"] = fields
    elif layout == "root":
        obj.update(fields)
    elif layout == "status":
        obj["status"] = fields
    else:
        raise ValueError(f"layout {layout!r}: one of {LAYOUTS}")
    return obj


def endpoint(*addresses: str, hostname: str | None = None, ready: bool | None = None,
             zone: str | None = None, node: str | None = None,
             serving: bool | None = None, for_zones: Sequence[str] | None = None,
             for_nodes: Sequence[str] | None = None) -> Obj:
    """``for_zones`` / ``for_nodes``: the topology hints (an empty list is written)."""
    raw: Obj = {"addresses": list(addresses)}
    if zone is not None:
        raw["zone"] = zone
    if node is not None:
        raw["nodeName"] = node
    if for_zones is not None:
        raw.setdefault("hints", {})["forZones"] = [{"name": name} for name in for_zones]
    if for_nodes is not None:
        raw.setdefault("hints", {})["forNodes"] = [{"name": name} for name in for_nodes]
    if hostname is not None:
        raw["hostname"] = hostname
    if ready is not None:
        raw["conditions"] = {"ready": ready}
    if serving is not None:
        raw.setdefault("conditions", {})["serving"] = serving
    return raw


def ready_endpoints(addresses: Sequence[str], hostnames: Sequence[str | None] = (),
                    ready: Sequence[bool] = ()) -> list[Obj]:
    """One endpoint an address, each with its ready condition (True unless ``ready`` says
    otherwise) and the hostname at the same place in ``hostnames``, if any."""
    return [endpoint(address, hostname=hostnames[i] if i < len(hostnames) else None,
                     ready=ready[i] if i < len(ready) else True)
            for i, address in enumerate(addresses)]


def endpoint_slice(name: str, service: str | None, namespace: str = "prod",
                   cluster: str | None = None, address_type: str = "IPv4",
                   endpoints: Sequence[Any] = (), ports: Sequence[Any] | None = None,
                   labels: dict[str, str] | None = None,
                   resource_version: str | None = None) -> Obj:
    """A slice of ``service`` from ``cluster`` (their MCS labels); ``labels`` adds others."""
    all_labels: dict[str, str] = {}
    if service is not None:
        all_labels[SERVICE_NAME_LABEL] = service
    if cluster is not None:
        all_labels[SOURCE_CLUSTER_LABEL] = cluster
    all_labels.update(labels or {})
    meta: Obj = {"name": name, "namespace": namespace, "labels": all_labels}
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    obj: Obj = {"apiVersion": SLICE_API, "kind": "EndpointSlice", "metadata": meta,
                "addressType": address_type, "endpoints": list(endpoints)}
    if ports is not None:
        obj["ports"] = copy.deepcopy(list(ports))
    return obj


def cluster_property(value: Any, name: str = CLUSTER_ID,
                     api_version: str = ABOUT_V1BETA1) -> Obj:
    return {"apiVersion": api_version, "kind": "ClusterProperty", "metadata": {"name": name},
            "spec": {"value": value}}
