"""The single-node cluster of clusterset_dns_testkit/cluster.py, once per session, with the
mcs-api v0.5.0 CRDs and the about-api ClusterProperty CRD (so the resource the RBAC grants
is served), the conformance objects `hello` and `db`, and a client pod (dig, python3 +
dnspython). Every test here is marked ``cluster`` and needs root,
``scripts/build-peers`` and ``scripts/build-images``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from clusterset_dns_testkit.cluster import Cluster, ClusterError

from .clusterlib import CONFORMANCE_OBJECTS, Client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in str(item.fspath):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0:
        raise ClusterError("the cluster tests need root (bridge, iptables, containerd)")
    c = Cluster()
    c.start()
    print(f"cluster: up in {c.start_seconds:.0f}s")
    try:
        _load_objects(c)
        yield c
    finally:
        if os.environ.get("CLUSTERSET_DNS_KEEP_CLUSTER"):
            print("cluster: left running; clean up with "
                  "`python3 -m clusterset_dns_testkit.cluster down`")
        else:
            c.close()


def _load_objects(c: Cluster) -> list[str]:
    assert c.api is not None
    c.api.install_crds(["mcs-api-v0.5.0", "about-api"])
    files = [CONFORMANCE_OBJECTS / "00-namespaces.yaml",
             CONFORMANCE_OBJECTS / "core" / "hello.yaml",
             CONFORMANCE_OBJECTS / "core" / "db.yaml"]
    for f in files:
        c.kubectl("apply", "-f", str(f))
    return [str(f) for f in files]



@pytest.fixture(scope="session")
def client(cluster: Cluster) -> Client:
    """A pod of the client image, ClusterFirst DNS (the kube-dns Service)."""
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "client", "namespace": "default", "labels": {"app": "client"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "client", "image": cluster.images["client"]["ref"],
                            "imagePullPolicy": "Never", "command": ["sleep", "infinity"]}],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    cluster.kubectl("wait", "--for=condition=Ready", "pod/client", "--timeout=120s",
                    timeout=150)
    return Client(cluster, "client")
