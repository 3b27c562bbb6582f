"""The test cluster is set up the way a real one is where it matters here: the kubelet's
API refuses anonymous callers, the node acts with its own certificate's identity and
only what the Node authorizer allows, and the kube-apiserver runs NodeRestriction."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

from clusterset_dns_testkit.cluster import NODE_IP, NODE_NAME, Cluster, _run, bin_path


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
