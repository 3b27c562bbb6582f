"""The single-node cluster of clusterset_dns_testkit/cluster.py, dual-stack, once per
session, with the mcs-api v0.5.0 CRDs and the about-api ClusterProperty CRD (so the
resource the RBAC grants is served), the conformance objects `hello` and `db`, the
dual-stack and IPv6 imports of clusterlib.DUAL_STACK_OBJECTS, and a client pod (dig,
python3 + dnspython). Every test here is marked ``cluster`` and needs root,
``scripts/build-peers`` and ``scripts/build-images``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from clusterset_dns_testkit.cluster import FORWARDING, Cluster, ClusterError, leftovers

from .clusterlib import CONFORMANCE_OBJECTS, DUAL_STACK_OBJECTS, Client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in str(item.fspath):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0:
        raise ClusterError("the cluster tests need root (bridge, iptables, containerd)")
    # dual-stack for every test: it starts as fast as the IPv4 one (docs/testing.md), and
    # the IPv4 tests see what an IPv4 client of a dual-stack cluster sees
    c = Cluster(dual_stack=True)
    forwarding = _forwarding()
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
            t0 = time.monotonic()
            c.close()
            print(f"cluster: closed and cleaned up in {time.monotonic() - t0:.0f}s")
            # the machine as it was: no bridge, chain, rule or directory, forwarding restored
            assert (leftovers(), _forwarding()) == ([], forwarding)


def _forwarding() -> list[str]:
    return [switch.read_text() for switch, _ in FORWARDING]


def _load_objects(c: Cluster) -> list[str]:
    assert c.api is not None
    c.api.install_crds(["mcs-api-v0.5.0", "about-api"])
    files = [CONFORMANCE_OBJECTS / "00-namespaces.yaml",
             CONFORMANCE_OBJECTS / "core" / "hello.yaml",
             CONFORMANCE_OBJECTS / "core" / "db.yaml"]
    for f in files:
        c.kubectl("apply", "-f", str(f))
    c.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": DUAL_STACK_OBJECTS}))
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
