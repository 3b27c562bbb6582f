"""deploy/overlays/forward-target on the real cluster: `kubectl apply -k`, the cluster
CoreDNS forwarding clusterset.local to our Service (kube-proxy in the path), a client
pod resolving through it, API changes reaching the client, the ServiceAccount's
rights, /metrics from the pod IP, and no lost query through a rolling update and the
deletion of a replica under load."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from clusterset_dns_testkit.cluster import Cluster, write_kubeconfig
from clusterset_dns_testkit.dnsserver import metric_sum
from clusterset_dns_testkit.objects import HTTP, service_import

from .clusterlib import (
    APP,
    CLUSTER_DNS_IP,
    CLUSTER_DNS_IP6,
    EXPECTED,
    EXPECTED_DUAL_STACK,
    NS,
    TTL,
    Client,
    Overlay,
    answers_failing,
    patch_coredns,
    same_records,
    service_ip,
    service_ips,
    svc,
    wait_pods,
)


@dataclass(frozen=True, slots=True)
class Installed:
    overlay: Overlay
    service_ip: str


@pytest.fixture(scope="module")
def forward_target(cluster: Cluster) -> Iterator[Installed]:
    overlay = Overlay(cluster, "forward-target")
    overlay.apply()
    try:
        cluster.wait_rollout(NS, "deployment/clusterset-dns")
        ip = service_ip(cluster, "clusterset-dns")
        patch_coredns(cluster, ip)
        yield Installed(overlay, ip)
    finally:
        overlay.delete()


def test_apply_k_pods_running_ready_no_restarts(cluster: Cluster, forward_target: Installed
                                                ) -> None:
    pods = wait_pods(cluster, APP, 2)
    assert all(p.restarts == 0 for p in pods), pods
    # the pod really runs as the template says: uid 65532, no capabilities, :53 bound
    status = cluster.exec(NS, pods[0].name, "cat", "/proc/1/status").stdout
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert fields["Uid"].split()[:2] == ["65532", "65532"], fields["Uid"]
    assert int(fields["CapEff"].strip(), 16) == 0, fields["CapEff"]
    assert int(fields["CapPrm"].strip(), 16) == 0, fields["CapPrm"]
    assert fields["Seccomp"].strip() == "2", "seccomp RuntimeDefault is a filter (mode 2)"
    touch = cluster.exec(NS, pods[0].name, "touch", "/x", check=False)
    assert touch.returncode != 0 and "Read-only file system" in touch.stderr
    # the PDB and the spread constraint came with the overlay
    pdb = cluster.kubectl_json("-n", NS, "get", "pdb", "clusterset-dns")
    assert pdb["status"]["currentHealthy"] == 2 and pdb["status"]["disruptionsAllowed"] == 1


@pytest.mark.parametrize(("name", "rdtype", "want"), EXPECTED,
                         ids=[f"{n}{t}" for n, t, _ in EXPECTED])
def test_client_pod_resolves_through_cluster_coredns(
        client: Client, forward_target: Installed, name: str, rdtype: str, want: list[str]
) -> None:
    # the client pod's own resolver (ClusterFirst) is the kube-dns Service
    resolv = client.cluster.exec("default", client.name, "cat", "/etc/resolv.conf").stdout
    assert f"nameserver {CLUSTER_DNS_IP}" in resolv
    for tcp in (False, True):
        status, got = client.dig(CLUSTER_DNS_IP, name, rdtype, tcp=tcp)
        assert status == "NOERROR" and same_records(got, want), (tcp, status, got, want)


def test_client_pod_resolves_dual_stack_imports_over_both_families(
        client: Client, forward_target: Installed) -> None:
    """The dual-stack and IPv6-only imports, A and AAAA, asked of the cluster CoreDNS at
    its IPv4 and its IPv6 ClusterIP (an IPv6 client) and forwarded to our Service."""
    assert answers_failing(client, [CLUSTER_DNS_IP, CLUSTER_DNS_IP6], EXPECTED_DUAL_STACK) == []


def test_an_ipv6_client_reaches_the_service_at_its_ipv6_cluster_ip(
        cluster: Cluster, client: Client, forward_target: Installed) -> None:
    v4, v6 = service_ips(cluster, "clusterset-dns")
    assert v4 == forward_target.service_ip and ":" in v6 and ":" not in v4
    assert answers_failing(client, [v6], EXPECTED + EXPECTED_DUAL_STACK) == []


def test_client_pod_nxdomain_through_cluster_coredns(client: Client,
                                                     forward_target: Installed) -> None:
    status, got = client.dig(CLUSTER_DNS_IP, svc("nope"), "A")
    assert (status, got) == ("NXDOMAIN", [])
    # and cluster.local is still the cluster CoreDNS's own
    status, got = client.dig(CLUSTER_DNS_IP, "kube-dns.kube-system.svc.cluster.local.", "A")
    assert status == "NOERROR" and got[0].endswith(f"IN A {CLUSTER_DNS_IP}"), got


def test_api_changes_reach_the_client_within_ttl_plus_one_second(
        cluster: Cluster, client: Client, forward_target: Installed) -> None:
    name = svc("moving")
    imp = service_import("moving", "conf", ips=["10.42.7.1"], ports=[HTTP])
    # a negative answer first, as a real client would have cached it
    assert client.dig(CLUSTER_DNS_IP, name, "A")[0] == "NXDOMAIN"
    delays = {}
    for step, action, want in (
            ("create", lambda: cluster.kubectl("apply", "-f", "-", input=json.dumps(imp)),
             "10.42.7.1"),
            ("change", lambda: cluster.kubectl(
                "-n", "conf", "patch", "serviceimports.v1beta1.multicluster.x-k8s.io",
                "moving", "--type", "merge", "-p", '{"spec":{"ips":["10.42.7.2"]}}'),
             "10.42.7.2"),
            ("delete", lambda: cluster.kubectl(
                "-n", "conf", "delete", "serviceimports.multicluster.x-k8s.io", "moving"),
             "NXDOMAIN")):
        watcher = client.start_tool("until", CLUSTER_DNS_IP, name, "A", want, "30")
        time.sleep(1.5)  # the watcher is asking (and sees the old answer) before the write
        action()
        written = time.time()
        result = client.finish_tool(watcher, 60)
        assert result["matched"], (step, result)
        delays[step] = round(result["at"] - written, 2)
    print(f"API write -> answer in the client pod: {delays}")
    assert all(d <= TTL + 1 for d in delays.values()), delays


def test_service_account_can_only_read_the_two_resources(
        cluster: Cluster, forward_target: Installed, tmp_path: object) -> None:
    pods = wait_pods(cluster, APP, 2)
    # the pod uses its own token (the in-cluster service account), nothing else
    log = cluster.kubectl("-n", NS, "logs", pods[0].name).stdout
    assert "using the in-cluster service account" in log, log[-2000:]
    token = cluster.exec(NS, pods[0].name, "cat",
                         "/var/run/secrets/kubernetes.io/serviceaccount/token").stdout.strip()
    assert cluster.api is not None and cluster.api.ca_file is not None
    kc = write_kubeconfig(cluster.dir / "pod-sa.kubeconfig", cluster.api.url, token,
                          cluster.api.ca_file, "pod")
    from clusterset_dns_testkit.cluster import _run, bin_path

    def can(verb: str, resource: str, *extra: str) -> bool:
        out = _run([bin_path("kubectl"), f"--kubeconfig={kc}", "auth", "can-i", verb, resource,
                    *extra], check=False)
        return out.stdout.strip() == "yes"

    me = _run([bin_path("kubectl"), f"--kubeconfig={kc}", "auth", "whoami", "-o", "json"])
    assert json.loads(me.stdout)["status"]["userInfo"]["username"] == (
        "system:serviceaccount:kube-system:clusterset-dns")
    for resource in ("serviceimports.multicluster.x-k8s.io", "endpointslices.discovery.k8s.io",
                     "clusterproperties.about.k8s.io"):
        for verb in ("get", "list", "watch"):
            assert can(verb, resource, "-A"), (verb, resource)
        for verb in ("create", "update", "patch", "delete", "deletecollection"):
            assert not can(verb, resource, "-A"), (verb, resource)
    for verb, resource in (("get", "secrets"), ("list", "pods"), ("list", "services"),
                           ("get", "configmaps"), ("list", "serviceexports.multicluster.x-k8s.io"),
                           ("create", "pods"), ("list", "nodes"), ("get", "endpoints")):
        assert not can(verb, resource, "-A"), (verb, resource)
    rules = _run([bin_path("kubectl"), f"--kubeconfig={kc}", "auth", "can-i", "--list"]).stdout
    resources = {line.split()[0] for line in rules.splitlines()[1:] if line.strip()}
    # besides ours, only what every authenticated user has (self reviews)
    assert resources - {"serviceimports.multicluster.x-k8s.io",
                        "endpointslices.discovery.k8s.io", "clusterproperties.about.k8s.io"} <= {
        "selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io", "[/.well-known/openid-configuration/]",
        "[/.well-known/openid-configuration]", "[/api/*]", "[/api]", "[/apis/*]", "[/apis]",
        "[/healthz]", "[/livez]", "[/openapi/*]", "[/openapi]",
        "[/openid/v1/jwks/]", "[/openid/v1/jwks]", "[/readyz]", "[/version/]", "[/version]"}, rules


def test_metrics_scraped_from_the_pod_ip_show_the_client_queries(
        cluster: Cluster, client: Client, forward_target: Installed) -> None:
    pod = wait_pods(cluster, APP, 2)[0]
    annotations = cluster.kubectl_json("-n", NS, "get", "pod", pod.name)["metadata"][
        "annotations"]
    port = annotations["prometheus.io/port"]
    assert annotations["prometheus.io/scrape"] == "true"
    url = f"http://{pod.ip}:{port}{annotations['prometheus.io/path']}"

    def answered() -> float:
        return metric_sum(client.tool("scrape", url), "clusterset_dns_responses_total")

    before = answered()
    n = 7
    for _ in range(n):
        assert client.dig(pod.ip, svc("hello"), "A")[0] == "NOERROR"
    after = answered()
    # exactly our queries (nothing else asks this pod directly; CoreDNS is idle)
    assert n <= after - before <= n + 2, (before, after)


def test_rolling_update_and_replica_deletion_lose_no_query(
        cluster: Cluster, client: Client, forward_target: Installed) -> None:
    rate, seconds = 200, 60
    old = {p.name for p in wait_pods(cluster, APP, 2)}
    load = client.start_tool("load", forward_target.service_ip, svc("hello"), "10.42.0.10",
                             str(rate), str(seconds))
    try:
        time.sleep(5)
        cluster.kubectl("-n", NS, "rollout", "restart", "deployment/clusterset-dns")
        cluster.wait_rollout(NS, "deployment/clusterset-dns")
        new = wait_pods(cluster, APP, 2)
        assert not old & {p.name for p in new}, "the rollout replaced every pod"
        time.sleep(3)
        cluster.kubectl("-n", NS, "delete", "pod", new[0].name, "--wait=false")
    finally:
        result = client.finish_tool(load, seconds + 120)
    print(f"load {rate}/s for {seconds}s through the rollout and a deletion: {result}")
    assert result["sent"] == rate * seconds
    assert result["lost"] == 0 and result["wrong"] == 0, result
    assert result["ok"] == rate * seconds, result
    wait_pods(cluster, APP, 2)


def _ede(client: Client, server: str, name: str, rdtype: str) -> tuple[str, str | None]:
    """(status, the EDE line as dig prints it) for a query from the client pod."""
    out = client.cluster.exec(client.namespace, client.name, "dig", f"@{server}", name, rdtype,
                              "+time=3", "+tries=1", "+comments", check=False).stdout
    status = "NO ANSWER"
    ede = None
    for line in out.splitlines():
        if "status:" in line:
            status = line.split("status:")[1].split(",")[0].strip()
        elif line.startswith("; EDE:"):
            ede = line[2:].strip()
    return status, ede


def test_client_pod_reads_why_an_answer_is_empty(
        cluster: Cluster, client: Client, forward_target: Installed) -> None:
    """Extended DNS Errors from a pod: an IPv4-only import asked AAAA, and a Headless
    import whose EndpointSlices have not arrived, both written through the API, asked
    of our Service. (Through the cluster CoreDNS the option is dropped by its `cache`
    plugin: docs/dns-behaviour.md §3.8.)"""
    imports = [
        service_import("ede-v4", "conf", ips=["10.42.8.1"], ports=[HTTP]),
        service_import("ede-wait", "conf", "Headless", ports=[HTTP]),
    ]
    want = {
        (svc("ede-v4"), "AAAA"): (
            "NOERROR", "EDE: 0 (Other): (no IPv6 address: this name has IPv4 addresses only)"),
        (svc("ede-wait"), "A"): (
            "NXDOMAIN",
            "EDE: 0 (Other): (no EndpointSlice for ServiceImport conf/ede-wait has arrived)"),
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                            "items": imports}))
    try:
        got: dict[tuple[str, str], tuple[str, str | None]] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = {q: _ede(client, forward_target.service_ip, *q) for q in want}
            if got == want:
                break
            time.sleep(1)
        assert got == want
    finally:
        cluster.kubectl("-n", "conf", "delete", "serviceimports.multicluster.x-k8s.io",
                        "ede-v4", "ede-wait", "--ignore-not-found")


def test_cluster_coredns_forwarding_to_the_ipv6_cluster_ip(
        cluster: Cluster, client: Client, forward_target: Installed) -> None:
    """The README's CoreDNS edit where `.spec.clusterIP` is the IPv6 one (an IPv6-first
    or IPv6-only cluster): CoreDNS forwards (and health-checks) over IPv6, an IPv6
    client asks it. Last here: CoreDNS is left forwarding over IPv6."""
    v6 = service_ips(cluster, "clusterset-dns")[1]
    patch_coredns(cluster, v6)
    corefile = cluster.kubectl_json("-n", NS, "get", "configmap", "coredns")["data"]["Corefile"]
    assert f"forward . {v6}\n" in corefile
    assert answers_failing(client, [CLUSTER_DNS_IP6], EXPECTED + EXPECTED_DUAL_STACK) == []
