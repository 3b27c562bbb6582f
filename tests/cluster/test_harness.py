"""The test cluster is set up the way a real one is where it matters here: the kubelet's
API refuses anonymous callers, the node acts with its own certificate's identity and
only what the Node authorizer allows, and the kube-apiserver runs NodeRestriction. It is
dual-stack: node, pods and the cluster DNS have an address of each family, and pods
cannot send beyond this machine over either."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from pathlib import Path

from clusterset_dns_testkit.cluster import (
    BRIDGE,
    CLUSTER_DNS_IP,
    CLUSTER_DNS_IP6,
    FORWARD_COMMENT,
    NODE_IP,
    NODE_IP6,
    NODE_NAME,
    POD_CIDR,
    POD_CIDR6,
    Cluster,
    _run,
    bin_path,
)

from .clusterlib import Client


def test_kubelet_api_needs_credentials(cluster: Cluster) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the kubelet's self-signed serving certificate
    try:
        urllib.request.urlopen(f"https://{NODE_IP}:10250/pods", context=ctx, timeout=10)
        status = 200
    except urllib.error.HTTPError as e:
        status = e.code
    assert status == 401


def test_node_identity_and_node_authorizer(cluster: Cluster) -> None:
    node_kc = cluster.component_kubeconfigs["node"]

    def kubectl(*args: str) -> str:
        return _run([bin_path("kubectl"), f"--kubeconfig={node_kc}", *args],
                    check=False).stdout.strip()

    assert f"system:node:{NODE_NAME}" in kubectl("auth", "whoami")
    assert kubectl("auth", "can-i", "get", f"nodes/{NODE_NAME}") == "yes"
    assert kubectl("auth", "can-i", "list", "secrets", "-A").startswith("no")
    assert kubectl("auth", "can-i", "delete", "namespaces").startswith("no")
    assert cluster.api is not None
    argv = " ".join(str(a) for a in cluster.api._apiserver_argv(cluster.api.port))
    assert "--enable-admission-plugins=NodeRestriction" in argv
    assert "--authorization-mode=Node,RBAC" in argv


def test_node_pods_and_cluster_dns_have_both_families(cluster: Cluster, client: Client) -> None:
    node = cluster.kubectl_json("get", "node", NODE_NAME)
    assert node["spec"]["podCIDRs"] == [POD_CIDR, POD_CIDR6]
    assert [a["address"] for a in node["status"]["addresses"]
            if a["type"] == "InternalIP"] == [NODE_IP, NODE_IP6]
    kube_dns = cluster.kubectl_json("-n", "kube-system", "get", "service", "kube-dns")
    assert kube_dns["spec"]["clusterIPs"] == [CLUSTER_DNS_IP, CLUSTER_DNS_IP6]
    [pod] = cluster.pods("default", "app=client")
    v4, v6 = pod.ips
    assert pod.ip == v4 and v4.startswith("10.244.0.") and v6.startswith("fd00:10:244::"), pod
    # the pod's own view: its IPv6 address, a default route through the node's
    out = cluster.exec("default", client.name, "python3", "-c",
                       "import socket; s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM);"
                       f" s.connect(('{CLUSTER_DNS_IP6}', 53)); print(s.getsockname()[0])")
    assert out.stdout.strip() == v6


def test_pods_cannot_send_beyond_this_machine_over_either_family(cluster: Cluster) -> None:
    for tool, cidr, switch in (("iptables", POD_CIDR, "ipv4/ip_forward"),
                               ("ip6tables", POD_CIDR6, "ipv6/conf/all/forwarding")):
        rules = _run([tool, "-S", "FORWARD"]).stdout.splitlines()
        assert (f'-A FORWARD -s {cidr} ! -o {BRIDGE} -m comment --comment {FORWARD_COMMENT} '
                "-j DROP") in rules, (tool, rules)
        # and the host routes between pods and Services of both families meanwhile
        assert Path(f"/proc/sys/net/{switch}").read_text() == "1\n"
