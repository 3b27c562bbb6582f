"""Builders of the API objects the kube tests write (raw dicts, as a controller would)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
V1BETA1 = "multicluster.x-k8s.io/v1beta1"
V1ALPHA1 = "multicluster.x-k8s.io/v1alpha1"
V1ALPHA2 = "multicluster.x-k8s.io/v1alpha2"
STATUS_LAYOUT = "multicluster.status.test/v1"
ZONE = "svc.clusterset.local."


def service_import(name: str, namespace: str, type_: str = "ClusterSetIP",
                   ips: list[str] | None = None, ports: list[Obj] | None = None,
                   api_version: str = V1BETA1, layout: str = "spec") -> Obj:
    """``layout``: "spec" (v1alpha1/v1beta1), "root" (v1alpha2 proposal) or "status" (forks)."""
    fields: Obj = {"type": type_, "ports": ports or [{"name": "http", "protocol": "TCP",
                                                      "port": 80}]}
    if ips:
        fields["ips"] = ips
    obj: Obj = {"apiVersion": api_version, "kind": "ServiceImport",
                "metadata": {"name": name, "namespace": namespace}}
    if layout == "spec":
        obj["spec"] = fields
    elif layout == "root":
        obj.update(fields)
    else:
        obj["status"] = fields
    return obj


def endpoint_slice(name: str, namespace: str, service: str, cluster: str | None,
                   addresses: list[str], family: str = "IPv4",
                   hostnames: list[str | None] | None = None,
                   ready: list[bool] | None = None, port: int = 80,
                   labels: dict[str, str] | None = None) -> Obj:
    endpoints = []
    for i, address in enumerate(addresses):
        endpoint: Obj = {"addresses": [address],
                         "conditions": {"ready": True if ready is None else ready[i]}}
        if hostnames and hostnames[i]:
            endpoint["hostname"] = hostnames[i]
        endpoints.append(endpoint)
    all_labels = {"multicluster.kubernetes.io/service-name": service}
    if cluster is not None:
        all_labels["multicluster.kubernetes.io/source-cluster"] = cluster
    all_labels.update(labels or {})
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": namespace, "labels": all_labels},
            "addressType": family, "endpoints": endpoints,
            "ports": [{"name": "http", "protocol": "TCP", "port": port}]}


def fqdn(*labels: str) -> str:
    return ".".join(labels) + "." + ZONE


def a(name: str, *ips: str, ttl: int = 5) -> list[str]:
    kind = "AAAA" if ":" in (ips[0] if ips else "") else "A"
    return [f"{name} {ttl} IN {kind} {ip}" for ip in ips]
