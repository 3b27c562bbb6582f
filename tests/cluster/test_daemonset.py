"""deploy/overlays/daemonset on the real cluster, behind a node-local DNS cache
configured the way node-local-dns is: the cache breaks clusterset.local until the
shipped stanza (deploy/overlays/daemonset/node-local-dns-stanza.txt) is added; with it
a client pod gets the conformance answers through the node-local path. Each pod knows
its node from the downward API: a PreferSameNode import answers a client pod with the
endpoint on its node first."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from clusterset_dns_testkit.cluster import CLUSTER_DNS_IP, CLUSTER_DNS_IP6, Cluster
from clusterset_dns_testkit.objects import (
    HTTP,
    cluster_property,
    endpoint,
    endpoint_slice,
    service_import,
)

from .clusterlib import (
    APP,
    EXPECTED,
    EXPECTED_DUAL_STACK,
    NS,
    REPO,
    ZONE,
    Client,
    Overlay,
    answers_failing,
    patch_coredns,
    restart_dns,
    same_records,
    service_ip,
    service_ips,
    svc,
    wait_pods,
)

NODE_LOCAL = REPO / "tests" / "cluster" / "manifests" / "node-local-dns.yaml"
STANZA = REPO / "deploy" / "overlays" / "daemonset" / "node-local-dns-stanza.txt"
NODE_LOCAL_SELECTOR = "k8s-app=node-local-dns"


def node_local_manifest(cluster: Cluster, extra: str) -> str:
    """The node-local-dns manifest with its placeholders filled in, as the add-on's own
    install does (`sed` over the __PILLAR__ names); ``extra`` = more Corefile blocks."""
    text = NODE_LOCAL.read_text()
    indented = "\n".join("    " + line for line in extra.splitlines())
    text = text.replace("    NODE_LOCAL_EXTRA", indented)
    # a pod (no link-local dummy interface on this node): listen on every address
    text = text.replace("bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__", "bind 0.0.0.0")
    text = text.replace("health __PILLAR__LOCAL__DNS__:8080", "health :8080")
    text = text.replace("__PILLAR__CLUSTER__DNS__", CLUSTER_DNS_IP)
    text = text.replace("__PILLAR__UPSTREAM__SERVERS__", "/etc/resolv.conf")
    text = text.replace("COREDNS_IMAGE", cluster.images["coredns"]["ref"])
    assert "__PILLAR__" not in text and "CLUSTERSET_DNS_SERVICE_IP" not in text, text
    return text


@dataclass(frozen=True, slots=True)
class NodeLocal:
    ours_ip: str
    cache_ip: str


def apply_node_local(cluster: Cluster, extra: str) -> str:
    cluster.kubectl("apply", "-f", "-", input=node_local_manifest(cluster, extra))
    ip = service_ip(cluster, "node-local-dns")
    probe = (f"hello.conf.svc.{ZONE}.", "A") if extra else (
        "kube-dns.kube-system.svc.cluster.local.", "A")
    restart_dns(cluster, "daemonset/node-local-dns", NODE_LOCAL_SELECTOR, ip, probe)
    wait_pods(cluster, NODE_LOCAL_SELECTOR, 1)
    return ip


@pytest.fixture(scope="module")
def daemonset(cluster: Cluster) -> Iterator[Overlay]:
    overlay = Overlay(cluster, "daemonset")
    overlay.apply()
    try:
        cluster.wait_rollout(NS, "daemonset/clusterset-dns")
        yield overlay
    finally:
        overlay.delete()
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", check=False,
                        input=node_local_manifest(cluster, ""))


def test_apply_k_one_pod_per_node_ready_no_restarts(cluster: Cluster, daemonset: Overlay
                                                    ) -> None:
    pods = wait_pods(cluster, APP, 1)  # one node
    assert pods[0].restarts == 0, pods
    pod = cluster.kubectl_json("-n", NS, "get", "pod", pods[0].name)
    assert pod["spec"]["dnsPolicy"] == "Default"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    service = cluster.kubectl_json("-n", NS, "get", "service", "clusterset-dns")
    assert service["spec"]["internalTrafficPolicy"] == "Local"


def test_dual_stack_imports_through_the_cluster_coredns_and_the_ipv6_cluster_ip(
        cluster: Cluster, client: Client, daemonset: Overlay) -> None:
    """The cluster CoreDNS forwarding to the DaemonSet's Service (internalTrafficPolicy
    Local: the pod on CoreDNS's node), asked at both its ClusterIPs; and our Service at
    its IPv6 ClusterIP, from the client pod."""
    ours = service_ips(cluster, "clusterset-dns")
    assert len(ours) == 2 and ":" in ours[1], ours
    patch_coredns(cluster, ours[0])
    assert answers_failing(client, [CLUSTER_DNS_IP, CLUSTER_DNS_IP6], EXPECTED_DUAL_STACK) == []
    assert answers_failing(client, ours[1:], EXPECTED + EXPECTED_DUAL_STACK) == []


def test_node_local_cache_needs_the_stanza_and_then_answers(
        cluster: Cluster, client: Client, daemonset: Overlay) -> None:
    ours = service_ip(cluster, "clusterset-dns")
    # node-local-dns as shipped upstream: cluster.local works, clusterset.local does not
    cache = apply_node_local(cluster, "")
    status, got = client.dig(cache, "kube-dns.kube-system.svc.cluster.local.", "A")
    assert status == "NOERROR" and got, got
    status, got = client.dig(cache, svc("hello"), "A")
    assert status != "NOERROR" or not got, ("clusterset.local answered without the stanza",
                                            status, got)
    # with deploy/'s stanza (and our node-local Service's IP), every conformance answer
    stanza = STANZA.read_text().replace("CLUSTERSET_DNS_SERVICE_IP", ours)
    cache = apply_node_local(cluster, stanza)
    for name, rdtype, want in EXPECTED:
        for tcp in (False, True):
            status, got = client.dig(cache, name, rdtype, tcp=tcp)
            assert status == "NOERROR" and same_records(got, want), (name, rdtype, status, got)
    status, got = client.dig(cache, svc("nope"), "A")
    assert (status, got) == ("NXDOMAIN", [])


# -- PreferSameNode: the node name from the downward API ----------------------------------------

NODE_NS, NODE_SVC = "conf", "nodepref"
PROPERTY = "cluster.clusterset.k8s.io"


def _node_objects(node: str) -> list[dict[str, Any]]:
    """A StatefulSet-like import in clusters east (a pod on this node, one on another
    node) and west (a pod on a node of the same name: other clusters never match)."""
    def piece(cluster: str, endpoints: list[dict[str, Any]]) -> dict[str, Any]:
        return endpoint_slice(f"{NODE_SVC}-{cluster}", NODE_SVC, NODE_NS, cluster,
                              endpoints=endpoints, ports=[HTTP])

    return [
        cluster_property("east", PROPERTY),
        service_import(NODE_SVC, NODE_NS, "Headless", ports=[HTTP],
                       traffic_distribution="PreferSameNode"),
        piece("east", [endpoint("10.77.0.1", hostname="app-0", node="elsewhere"),
                       endpoint("10.77.0.2", hostname="app-1", node=node)]),
        piece("west", [endpoint("10.77.1.1", hostname="app-0", node=node)]),
    ]


def test_the_node_name_comes_from_the_downward_api_and_a_client_sees_its_node_first(
        cluster: Cluster, client: Client, daemonset: Overlay) -> None:
    pod_name = wait_pods(cluster, APP, 1)[0].name
    pod = cluster.kubectl_json("-n", NS, "get", "pod", pod_name)
    container = pod["spec"]["containers"][0]
    assert "--node-name=$(NODE_NAME)" in container["args"], container["args"]
    env = {e["name"]: e.get("valueFrom") for e in container["env"]}
    assert env["NODE_NAME"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}
    node = pod["spec"]["nodeName"]
    objects = _node_objects(node)
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": objects}))
    try:
        ours = service_ip(cluster, "clusterset-dns")
        name = svc(NODE_SVC)
        base = f"{NODE_SVC}.{NODE_NS}.svc.{ZONE}."
        want_a = [f"{name} 5 IN A 10.77.0.2"]
        want_srv = [f"{name} 5 IN SRV 0 100 80 app-1.east.{base}",
                    f"{name} 5 IN SRV 1 100 80 app-0.east.{base}",
                    f"{name} 5 IN SRV 2 100 80 app-0.west.{base}"]
        deadline = time.monotonic() + 60
        got: tuple[str, list[str]] = ("", [])
        while time.monotonic() < deadline:
            got = client.dig(ours, name, "A")
            if got == ("NOERROR", want_a):
                break
            time.sleep(1)
        assert got == ("NOERROR", want_a), got
        status, records = client.dig(ours, name, "SRV")
        assert status == "NOERROR" and same_records(records, want_srv), records
        # The pods on other nodes and in the other cluster keep their names.
        for host, ip in (("app-0.east", "10.77.0.1"), ("app-0.west", "10.77.1.1")):
            status, records = client.dig(ours, f"{host}.{base}", "A")
            assert (status, records) == ("NOERROR", [f"{host}.{base} 5 IN A {ip}"])
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", check=False,
                        input=json.dumps({"apiVersion": "v1", "kind": "List",
                                          "items": objects}))
