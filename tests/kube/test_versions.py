"""Each released CRD layout, installed for real: the server discovers the served
version and reads the fields wherever that version keeps them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from clusterset_dns_testkit.dnsserver import ServerProcess, expect, wait_for
from clusterset_dns_testkit.objects import (
    HTTP,
    V1ALPHA1,
    V1ALPHA2,
    endpoint_slice,
    ready_endpoints,
    service_import,
)
from clusterset_dns_testkit.peers import KubeAPI, crd_path

from .names import a, fqdn


@pytest.fixture
def crd_variant(api: KubeAPI) -> Iterator[object]:
    """Swaps the ServiceImport CRD; puts mcs-api v0.5.0 back afterwards."""
    yield lambda variant: api.replace_serviceimport_crd(variant)
    api.replace_serviceimport_crd("mcs-api-v0.5.0")


def test_mcs_api_v041_v1alpha1_only(api: KubeAPI, namespace: str, crd_variant: object,
                                    server_for: type[ServerProcess]) -> None:
    crd_variant("mcs-api-v0.4.1")  # type: ignore[operator]
    api.apply(service_import("web", namespace, ports=[HTTP], ips=["10.80.0.1"],
                             api_version=V1ALPHA1))
    server = server_for().start()
    server.wait_ready()
    assert "watching multicluster.x-k8s.io/v1alpha1" in server.log_text()
    web = fqdn("web", namespace)
    expect(server, web, "A", "NOERROR", a(web, "10.80.0.1"))


def test_v1alpha2_proposal_as_shipped_prunes_root_fields(
        api: KubeAPI, namespace: str, crd_variant: object,
        server_for: type[ServerProcess]) -> None:
    """The proposal's CRD stores v1alpha1 with no conversion webhook, so the API server
    prunes v1alpha2's root fields on write: such an object reaches us with no type. It is
    skipped with a warning and counted, and everything else is served."""
    crd_variant("mcs-api-v1alpha2-proposal")  # type: ignore[operator]
    server = server_for().start()
    server.wait_ready()
    api.apply(service_import("pruned", namespace, ports=[HTTP], ips=["10.82.0.1"],
                             api_version=V1ALPHA2, layout="root"))
    api.apply(service_import("spec", namespace, ports=[HTTP], ips=["10.82.0.2"],
                             api_version=V1ALPHA1))
    wait_for(lambda: server.metric("clusterset_dns_invalid_objects_total",
                                   kind="ServiceImport") >= 1, 10, "the skipped import")
    assert "pruned skipped: type None" in server.log_text()
    pruned = fqdn("pruned", namespace)
    expect(server, pruned, "A", "NXDOMAIN", [])


def test_v1alpha2_root_layout_stored_as_v1alpha2(
        api: KubeAPI, namespace: str, crd_variant: object, tmp_path: Path,
        server_for: type[ServerProcess]) -> None:
    """The proposal's CRD with v1alpha2 as the storage version (a cluster after the
    migration): root-layout objects round-trip and are served."""
    docs = list(yaml.safe_load_all(crd_path("mcs-api-v1alpha2-proposal").read_text()))
    crd = next(d for d in docs if d and d.get("kind") == "CustomResourceDefinition")
    for version in crd["spec"]["versions"]:
        version["storage"] = version["name"] == "v1alpha2"
    path = tmp_path / "serviceimports-v1alpha2-storage.yaml"
    path.write_text(yaml.safe_dump(crd))
    crd_variant(str(path))  # type: ignore[operator]
    server = server_for().start()
    server.wait_ready()
    assert "watching multicluster.x-k8s.io/v1alpha2" in server.log_text()
    api.apply(service_import("root", namespace, ports=[HTTP], ips=["10.81.0.1", "fd00:81::1"],
                             api_version=V1ALPHA2, layout="root"))
    api.apply(service_import("hl", namespace, ports=[HTTP], type_="Headless", api_version=V1ALPHA2,
                             layout="root"))
    api.apply(endpoint_slice("hl-a", "hl", namespace, "c1", ports=[HTTP],
                             endpoints=ready_endpoints(["10.81.1.1"], hostnames=["p-0"])))
    root, hl = fqdn("root", namespace), fqdn("hl", namespace)
    expect(server, root, "A", "NOERROR", a(root, "10.81.0.1"))
    expect(server, root, "AAAA", "NOERROR", a(root, "fd00:81::1"))
    p0 = fqdn("p-0", "c1", "hl", namespace)
    expect(server, p0, "A", "NOERROR", a(p0, "10.81.1.1"))
    expect(server, hl, "SRV", "NOERROR", [f"{hl} 5 IN SRV 0 100 80 {p0}"])
