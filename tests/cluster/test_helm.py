"""deploy/helm/clusterset-dns on the real cluster: `helm install` with the real Helm
(scripts/build-peers), the pods Running and Ready as hardened as the overlays', the
cluster CoreDNS forwarding clusterset.local to the chart's Service, a client pod
resolving through it, then `helm upgrade` to the DaemonSet mode and `helm uninstall`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clusterset_dns_testkit.cluster import Cluster
from clusterset_dns_testkit.helm import CHART, helm, values_file

from .clusterlib import (
    APP,
    CLUSTER_DNS_IP,
    CLUSTER_DNS_IP6,
    EXPECTED,
    EXPECTED_DUAL_STACK,
    NS,
    Client,
    answers_failing,
    patch_coredns,
    service_ip,
    service_ips,
    wait_pods,
)

RELEASE = "clusterset-dns"


def image_values(cluster: Cluster, **more: object) -> str:
    repository, tag = cluster.images["clusterset-dns"]["ref"].rsplit(":", 1)
    values = {"image": {"repository": repository, "tag": tag, "pullPolicy": "Never"}} | more
    return str(values_file(values))


@pytest.fixture(scope="module")
def release(cluster: Cluster) -> Iterator[str]:
    helm("install", RELEASE, str(CHART), "--namespace", NS, "--values", image_values(cluster),
         "--wait", "--timeout", "180s", kubeconfig=cluster.kubeconfig, timeout=240)
    try:
        ip = service_ip(cluster, "clusterset-dns")
        patch_coredns(cluster, ip)
        yield ip
    finally:
        helm("uninstall", RELEASE, "--namespace", NS, "--wait", "--timeout", "120s",
             kubeconfig=cluster.kubeconfig, timeout=180, check=False)


def resolves_everything(client: Client) -> list[str]:
    """The conformance answers through the cluster CoreDNS, UDP and TCP; the dual-stack
    and IPv6-only imports through it at both its ClusterIPs and from our Service's IPv6
    ClusterIP; what failed."""
    failed = answers_failing(client, [CLUSTER_DNS_IP], EXPECTED)
    failed += answers_failing(client, [CLUSTER_DNS_IP, CLUSTER_DNS_IP6], EXPECTED_DUAL_STACK)
    ours = service_ips(client.cluster, "clusterset-dns")
    if len(ours) != 2:
        return [*failed, f"our Service has no ClusterIP of each family: {ours}"]
    return failed + answers_failing(client, ours[1:], EXPECTED_DUAL_STACK)


def test_installed_release_runs_hardened_pods(cluster: Cluster, release: str) -> None:
    status = helm("status", RELEASE, "--namespace", NS, kubeconfig=cluster.kubeconfig)
    assert "STATUS: deployed" in status.stdout
    pods = wait_pods(cluster, APP, 2)
    assert all(p.restarts == 0 for p in pods), pods
    proc = cluster.exec(NS, pods[0].name, "cat", "/proc/1/status").stdout
    fields = dict(line.split(":", 1) for line in proc.splitlines() if ":" in line)
    assert fields["Uid"].split()[:2] == ["65532", "65532"], fields["Uid"]
    assert int(fields["CapEff"].strip(), 16) == 0, fields["CapEff"]
    touch = cluster.exec(NS, pods[0].name, "touch", "/x", check=False)
    assert touch.returncode != 0 and "Read-only file system" in touch.stderr
    pdb = cluster.kubectl_json("-n", NS, "get", "pdb", "clusterset-dns")
    assert pdb["status"]["currentHealthy"] == 2


def test_client_pod_resolves_through_cluster_coredns(client: Client, release: str) -> None:
    assert resolves_everything(client) == []
    status, got = client.dig(CLUSTER_DNS_IP, "nope.conf.svc.clusterset.local.", "A")
    assert (status, got) == ("NXDOMAIN", [])


def test_upgrade_to_daemonset_mode_keeps_answering(cluster: Cluster, client: Client,
                                                   release: str) -> None:
    helm("upgrade", RELEASE, str(CHART), "--namespace", NS,
         "--values", image_values(cluster, mode="daemonset"), "--wait", "--timeout", "180s",
         kubeconfig=cluster.kubeconfig, timeout=240)
    assert cluster.kubectl_json("-n", NS, "get", "daemonset", "clusterset-dns")
    gone = cluster.kubectl("-n", NS, "get", "deployment", "clusterset-dns", check=False)
    assert gone.returncode != 0
    [pod] = wait_pods(cluster, APP, 1)
    assert pod.restarts == 0
    service = cluster.kubectl_json("-n", NS, "get", "service", "clusterset-dns")
    assert service["spec"]["internalTrafficPolicy"] == "Local"
    assert service["spec"]["clusterIP"] == release  # CoreDNS's forward still holds
    assert resolves_everything(client) == []
