"""The peer harness works with the real binaries (run scripts/build-peers first).

    python -m pytest tests/testkit -x -q
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.rcode
import dns.rdatatype
import pytest
import yaml

from clusterset_dns_testkit import peers
from clusterset_dns_testkit.peers import ApiError, CoreDNS, KubeAPI

V1A1 = "multicluster.x-k8s.io/v1alpha1"
V1B1 = "multicluster.x-k8s.io/v1beta1"
V1A2 = "multicluster.x-k8s.io/v1alpha2"
STATUS_V1 = "multicluster.status.test/v1"
SI = "ServiceImport"


def serviceimport(api_version: str, name: str, ns: str, ips: list[str],
                  clusters: tuple[str, ...] = ("c1",)) -> dict[str, Any]:
    return {
        "apiVersion": api_version, "kind": SI,
        "metadata": {"name": name, "namespace": ns},
        "spec": {"type": "ClusterSetIP", "ips": ips,
                 "ports": [{"name": "http", "protocol": "TCP", "port": 80}]},
        "status": {"clusters": [{"cluster": c} for c in clusters]},
    }


@pytest.fixture(scope="module")
def api(request: pytest.FixtureRequest) -> Iterator[KubeAPI]:
    kube = KubeAPI()
    failed = request.session.testsfailed
    try:
        kube.start()
        kube.install_crds(["mcs-api-v0.5.0"])
        kube.ensure_namespace("prod")
        yield kube
    finally:
        if request.session.testsfailed > failed:
            kube.keep_tmp = True
            print("peer logs:", *kube.logs(), sep="\n  ", file=sys.stderr)
        kube.close()


def test_free_port_and_bind_loopback() -> None:
    a, b = peers.free_port(), peers.free_port()
    assert a != b
    text = peers._bind_loopback("a.test {\n  whoami\n}\nb.test:53 {\n  bind 127.0.0.2\n}\n")
    assert text.count("bind 127.0.0.1") == 1 and "bind 127.0.0.2" in text


def test_free_ports_lie_outside_the_ephemeral_range() -> None:
    """Why: see the next test. A listening port there is never a client's source port."""
    low, high = peers._ephemeral_range()
    ports = [peers.free_port() for _ in range(50)]
    assert all(1024 <= p < low or high < p <= 65535 for p in ports), (low, high, ports)


@pytest.mark.parametrize(("ephemeral", "expected"), [
    ((32768, 60999), [range(10000, 32768), range(61000, 65536)]),  # Linux's default
    ((1024, 65000), [range(65001, 65536)]),  # starts low: only above it
    ((1024, 64000), [range(64001, 65536)]),
    ((10500, 65535), [range(1024, 10500)]),  # too little above 10000: from 1024
    ((49152, 65535), [range(10000, 49152)]),  # the IANA range
    ((1024, 65535), []),  # nothing left: free_port says so
])
def test_server_ports_never_overlap_the_ephemeral_range(
        ephemeral: tuple[int, int], expected: list[range]) -> None:
    assert peers._server_ports(ephemeral) == expected


def test_free_port_with_a_range_that_starts_low(monkeypatch: pytest.MonkeyPatch) -> None:
    """The range of the one unexplained CI failure started low: free_port then let the
    kernel pick, that is a port from the ephemeral range itself."""
    high = max(peers._ephemeral_range()[1], 64000)  # covers the kernel's real range
    monkeypatch.setattr(peers, "_ephemeral_range", lambda: (1024, high))
    ports = [peers.free_port() for _ in range(20)]
    assert all(p > high for p in ports), ports


def test_free_port_refuses_when_the_range_leaves_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "_ephemeral_range", lambda: (1024, 65535))
    with pytest.raises(peers.PeerError, match="ip_local_port_range"):
        peers.free_port()


def test_reuseport_client_on_the_server_port_hears_itself() -> None:
    """The kernel behaviour that made dig, once in a few thousand runs, print its own
    query as the answer: servers (CoreDNS, ours) and dig's client sockets all set
    SO_REUSEPORT, so a client may be given the server's port as its source port; being
    connected, it wins the look-up of its own datagram. If this ever stops holding, the
    port rule of free_port is no longer needed."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with server, client:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        client.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        client.bind(("127.0.0.1", port))
        client.connect(("127.0.0.1", port))
        client.settimeout(5)
        client.send(b"query")
        assert client.recv(100) == b"query"


@pytest.mark.kube
def test_apiserver_ready_and_kubeconfig(api: KubeAPI) -> None:
    assert api.readyz()
    assert api.last_start_seconds is not None and api.last_start_seconds < 120
    version = api.request("GET", "/version")
    assert version["gitVersion"].startswith("v1.")
    cfg = yaml.safe_load(api.kubeconfig.read_text())
    assert cfg["clusters"][0]["cluster"]["server"] == api.url == f"https://127.0.0.1:{api.port}"
    assert cfg["users"][0]["user"]["token"] == api.token
    assert "certificate-authority-data" in cfg["clusters"][0]["cluster"]
    # a wrong token is refused: authentication is really on
    with pytest.raises(ApiError) as e:
        peers.ApiClient(api.url, "wrong", api.ca_file).request("GET", "/api/v1/namespaces")
    assert e.value.status == 401


@pytest.mark.kube
def test_released_and_own_crds_install(api: KubeAPI) -> None:
    # the released set when scripts/fetch-crds got it, else our own model of it
    # (the Go module proxy refuses sigs.k8s.io/about-api on this project's machine)
    about = peers.crd_path("about-api")
    # about.k8s.io is a protected group and the released CRD has no approval annotation
    names = api.install_crds([about, "status-layout"])
    assert names == ["clusterproperties.about.k8s.io", "serviceimports.multicluster.status.test"]
    assert api.served(V1A1, "serviceimports") and api.served(V1B1, "serviceimports")
    assert api.resource_for(V1B1, SI)["has_status"]
    assert api.served(STATUS_V1, "serviceimports")


@pytest.mark.kube
def test_serviceimport_v1beta1_create_get_delete(api: KubeAPI) -> None:
    stored = api.apply(serviceimport(V1B1, "crud", "prod", ["10.42.0.1"]))
    assert stored["spec"]["ips"] == ["10.42.0.1"]
    assert stored["status"]["clusters"] == [{"cluster": "c1"}]
    got = api.get(V1B1, SI, "prod", "crud")
    assert got is not None and got["spec"]["ips"] == ["10.42.0.1"]
    # the same object through v1alpha1 (identical schema, no conversion webhook)
    old = api.get(V1A1, SI, "prod", "crud")
    assert old is not None and old["apiVersion"] == V1A1 and old["spec"]["type"] == "ClusterSetIP"
    # replace, then status through the subresource
    api.apply(serviceimport(V1B1, "crud", "prod", ["10.42.0.2", "fd00::2"]))
    api.patch_status(V1B1, SI, "prod", "crud", {"clusters": [{"cluster": "c1"}, {"cluster": "c2"}]})
    got = api.get(V1B1, SI, "prod", "crud")
    assert got is not None
    assert got["spec"]["ips"] == ["10.42.0.2", "fd00::2"]
    assert [c["cluster"] for c in got["status"]["clusters"]] == ["c1", "c2"]
    assert "crud" in [i["metadata"]["name"] for i in api.list(V1B1, SI, "prod")["items"]]
    assert api.delete(V1B1, SI, "prod", "crud")
    assert api.get(V1B1, SI, "prod", "crud") is None
    assert not api.delete(V1B1, SI, "prod", "crud")


@pytest.mark.kube
def test_status_layout_crd_keeps_status_fields(api: KubeAPI) -> None:
    api.install_crds(["status-layout"])
    obj = {"apiVersion": STATUS_V1, "kind": SI, "metadata": {"name": "web", "namespace": "prod"},
           "status": {"type": "ClusterSetIP", "ips": ["10.43.0.1"],
                      "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
                      "clusters": [{"cluster": "east.example"}]}}
    api.apply(obj)
    got = api.get(STATUS_V1, SI, "prod", "web")
    assert got is not None and got["status"] == obj["status"]
    api.delete(STATUS_V1, SI, "prod", "web")


@pytest.mark.kube
def test_restart_keeps_data_and_second_apiserver_writes_meanwhile(api: KubeAPI) -> None:
    first = api.apply(serviceimport(V1B1, "restart", "prod", ["10.44.0.1"]))
    rv = first["metadata"]["resourceVersion"]
    api.stop()
    assert not api.readyz(timeout=1)
    second = api.start_second()
    try:
        assert second.port != api.port
        second.patch(V1B1, SI, "prod", "restart", {"spec": {"ips": ["10.44.0.2"]}})
    finally:
        second.stop()
    api.start()
    assert api.url == f"https://127.0.0.1:{api.port}"
    got = api.get(V1B1, SI, "prod", "restart")
    assert got is not None and got["spec"]["ips"] == ["10.44.0.2"]
    # watch cache off: a watch resumed from the old resourceVersion replays the change
    w = api.watch(V1B1, SI, "prod", rv, timeout=3, max_events=1)
    assert w.http_status == 200 and not w.gone
    assert [(e["type"], e["object"]["spec"]["ips"]) for e in w.events] == [
        ("MODIFIED", ["10.44.0.2"])]
    api.delete(V1B1, SI, "prod", "restart")


@pytest.mark.kube
def test_compaction_makes_old_resource_version_gone(api: KubeAPI) -> None:
    stored = api.apply(serviceimport(V1B1, "compact", "prod", ["10.45.0.1"]))
    old_rv = stored["metadata"]["resourceVersion"]
    api.patch(V1B1, SI, "prod", "compact", {"spec": {"ips": ["10.45.0.2"]}})
    assert not api.watch(V1B1, SI, "prod", old_rv, timeout=2, max_events=1).gone
    rev = api.compact()
    assert rev > int(old_rv)
    w = api.watch(V1B1, SI, "prod", old_rv, timeout=5)
    assert w.gone, (w.http_status, w.events, w.body)
    # a fresh list's resourceVersion still works after the compaction
    fresh = api.list(V1B1, SI, "prod")["metadata"]["resourceVersion"]
    api.patch(V1B1, SI, "prod", "compact", {"spec": {"ips": ["10.45.0.3"]}})
    w = api.watch(V1B1, SI, "prod", fresh, timeout=3, max_events=1)
    assert not w.gone and w.events[0]["object"]["spec"]["ips"] == ["10.45.0.3"]
    api.delete(V1B1, SI, "prod", "compact")


@pytest.mark.kube
def test_reader_token_has_no_rights_until_granted(api: KubeAPI) -> None:
    reader = peers.ApiClient(api.url, api.reader_token, api.ca_file)
    path = api.path(V1B1, SI, "prod")
    with pytest.raises(ApiError) as e:
        reader.request("GET", path)
    assert e.value.status == 403
    api.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "reader-si"},
               "rules": [{"apiGroups": ["multicluster.x-k8s.io"], "resources": ["serviceimports"],
                          "verbs": ["get", "list", "watch"]}]})
    api.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "reader-si"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "reader-si"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": "reader"}]})
    peers._wait(lambda: reader.request("GET", path, ok_statuses=(403,)).get("kind")
                == "ServiceImportList", 10, "RBAC grant")
    assert yaml.safe_load(api.reader_kubeconfig.read_text())["users"][0]["user"]["token"] == (
        api.reader_token)


@pytest.mark.kube
def test_replace_serviceimport_crd_between_variants(api: KubeAPI) -> None:
    try:
        api.apply(serviceimport(V1B1, "swap", "prod", ["10.46.0.1"]))
        api.replace_serviceimport_crd("mcs-api-v0.4.1")
        assert api.served(V1A1, "serviceimports") and not api.served(V1B1, "serviceimports")
        # deleting the CRD deleted its objects
        assert api.list(V1A1, SI, "prod")["items"] == []
        api.apply(serviceimport(V1A1, "swap", "prod", ["10.46.0.2"]))

        api.replace_serviceimport_crd("mcs-api-v1alpha2-proposal")
        assert api.served(V1A1, "serviceimports") and api.served(V1A2, "serviceimports")
        assert not api.served(V1B1, "serviceimports")
        # The proposal CRD stores v1alpha1 with no conversion webhook: a v1alpha2 object
        # with the root layout is accepted, but its root fields are pruned against the
        # v1alpha1 (storage) schema, so nothing of them is kept.
        created = api.create({"apiVersion": V1A2, "kind": SI,
                              "metadata": {"name": "root", "namespace": "prod"},
                              "type": "ClusterSetIP", "ips": ["10.46.0.3"],
                              "ports": [{"port": 80}], "clusters": [{"cluster": "c1"}]})
        back = api.get(V1A2, SI, "prod", "root")
        assert back is not None
        for obj in (created, back):
            assert not {"type", "ips", "ports", "clusters"} & set(obj), json.dumps(obj)
        # and a v1alpha1 object read through v1alpha2 loses its spec (pruned on read)
        api.apply(serviceimport(V1A1, "swap", "prod", ["10.46.0.4"]))
        a1 = api.get(V1A2, SI, "prod", "swap")
        assert a1 is not None and "spec" not in a1
    finally:
        api.replace_serviceimport_crd("mcs-api-v0.5.0")
    assert api.served(V1B1, "serviceimports")


@pytest.mark.kube
@pytest.mark.coredns
def test_coredns_multicluster_answers_serviceimport(api: KubeAPI) -> None:
    # CoreDNS's multicluster mode reads v1alpha1 ServiceImports (served by v0.5.0 too)
    api.apply(serviceimport(V1A1, "web", "prod", ["10.47.0.10"]))
    corefile = peers.kubernetes_corefile(api.kubeconfig)
    with CoreDNS(corefile) as dns_server:
        assert "bind 127.0.0.1" in dns_server.corefile_path.read_text()

        def answer() -> list[str] | None:
            r = dns_server.query("web.prod.svc.clusterset.local", "A")
            if r.rcode() != dns.rcode.NOERROR or not r.answer:
                return None
            return [rd.address for rrset in r.answer for rd in rrset
                    if rrset.rdtype == dns.rdatatype.A]

        assert peers._wait(answer, 30, "CoreDNS answer", dns_server.proc, 0.3) == ["10.47.0.10"]
        r = dns_server.query("nope.prod.svc.clusterset.local", "A", tcp=True)
        assert r.rcode() == dns.rcode.NXDOMAIN
        # a change through the apiserver reaches CoreDNS's informers
        api.apply(serviceimport(V1A1, "web", "prod", ["10.47.0.11"]))
        peers._wait(lambda: answer() == ["10.47.0.11"], 30, "CoreDNS update",
                    dns_server.proc, 0.3)
    api.delete(V1A1, SI, "prod", "web")


def test_find_binaries_error_names_build_script(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setenv("CLUSTERSET_DNS_CACHE", str(tmp_path))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    with pytest.raises(peers.PeerError, match="scripts/build-peers"):
        peers.find_binaries()


def test_crd_variants_exist() -> None:
    for v in ("mcs-api-v0.5.0", "mcs-api-v0.4.1", "mcs-api-v1alpha2-proposal", "status-layout"):
        assert peers.crd_path(v).exists()


def test_released_crds_come_from_the_cache(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    """Released sets are looked up in the cache scripts/fetch-crds fills, and a
    missing one names that script; our own layouts never depend on the cache."""
    monkeypatch.delenv("CLUSTERSET_DNS_SHARED", raising=False)
    monkeypatch.setenv("CLUSTERSET_DNS_CACHE", str(tmp_path))
    with pytest.raises(peers.PeerError, match="scripts/fetch-crds"):
        peers.crd_path("mcs-api-v0.5.0")
    (tmp_path / "crds" / "mcs-api-v0.5.0").mkdir(parents=True)
    assert peers.crd_path("mcs-api-v0.5.0") == tmp_path / "crds" / "mcs-api-v0.5.0"
    assert peers.crd_path("status-layout").is_relative_to(peers.REPO_ROOT / "tests" / "crds")


def test_own_proposal_crd_serves_both_layouts() -> None:
    """The v1alpha2 proposal model: v1alpha1 stored with fields under spec, v1alpha2
    served with the same fields at the root; an empty protocol defaults to TCP."""
    [crd] = peers.load_yaml_docs(peers.crd_path("mcs-api-v1alpha2-proposal"))
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert {n: (v["served"], v["storage"]) for n, v in versions.items()} == {
        "v1alpha1": (True, True), "v1alpha2": (True, False)}
    spec = versions["v1alpha1"]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    root = versions["v1alpha2"]["schema"]["openAPIV3Schema"]
    for schema in (spec, root):
        assert {"type", "ips", "ports"} <= set(schema["properties"])
        assert schema["properties"]["ports"]["items"]["properties"]["protocol"]["default"] == "TCP"
    assert "clusters" in root["properties"]


@pytest.mark.parametrize(("group", "annotations", "approved"), [
    ("about.k8s.io", {}, "unapproved, test copy without the annotation"),
    ("k8s.io", {}, "unapproved, test copy without the annotation"),
    ("apps.kubernetes.io", {}, "unapproved, test copy without the annotation"),
    ("about.k8s.io", {"api-approved.kubernetes.io": "https://example/pr/1"},
     "https://example/pr/1"),
    ("multicluster.x-k8s.io", {}, None),
    ("multicluster.status.test", {}, None),
])
def test_protected_groups_get_the_approval_annotation(
        group: str, annotations: dict[str, str], approved: str | None) -> None:
    """The API server refuses a CRD of a *.k8s.io / *.kubernetes.io group without the
    api-approved annotation (x-k8s.io is free); the harness adds "unapproved", which
    the server accepts, and leaves the caller's CRD as it was."""
    crd = {"kind": "CustomResourceDefinition",
           "metadata": {"name": f"things.{group}", "annotations": dict(annotations)},
           "spec": {"group": group}}
    out = peers._approve_protected_group(crd)
    assert out["metadata"]["annotations"].get("api-approved.kubernetes.io") == approved
    assert crd["metadata"]["annotations"] == annotations
