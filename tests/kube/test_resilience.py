"""The API server goes away and comes back: answers stay, changes made meanwhile
arrive, 410 Gone makes a real relist, and nothing is NXDOMAIN before the first sync."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from clusterset_dns_testkit.dnsserver import ServerProcess, expect, wait_for
from clusterset_dns_testkit.objects import (
    HTTP,
    V1BETA1,
    endpoint_slice,
    ready_endpoints,
    service_import,
)
from clusterset_dns_testkit.peers import KubeAPI

from .names import a, fqdn

REPO = Path(__file__).resolve().parents[2]


def _seed(api: KubeAPI, namespace: str) -> None:
    api.apply(service_import("keep", namespace, ports=[HTTP], ips=["10.70.0.1"]))
    api.apply(service_import("change", namespace, ports=[HTTP], ips=["10.70.0.2"]))
    api.apply(service_import("drop", namespace, ports=[HTTP], ips=["10.70.0.3"]))
    api.apply(service_import("hl", namespace, ports=[HTTP], type_="Headless"))
    api.apply(endpoint_slice("hl-1", "hl", namespace, "east",
                             endpoints=ready_endpoints(["10.70.1.1", "10.70.1.2"]), ports=[HTTP]))


def _changes_through(client: KubeAPI, namespace: str) -> None:
    client.apply(service_import("change", namespace, ports=[HTTP], ips=["10.70.0.22"]))
    client.delete(V1BETA1, "ServiceImport", namespace, "drop")
    client.apply(service_import("new", namespace, ports=[HTTP], ips=["10.70.0.4"]))
    client.apply(endpoint_slice("hl-1", "hl", namespace, "east",
                                endpoints=ready_endpoints(["10.70.1.1"]), ports=[HTTP]))


def _outage(api: KubeAPI, server: ServerProcess, namespace: str, compact: bool) -> None:
    keep, hl = fqdn("keep", namespace), fqdn("hl", namespace)
    expect(server, hl, "A", "NOERROR", a(hl, "10.70.1.1", "10.70.1.2"))
    api.stop()
    try:
        # While the API server is down the last known data keeps being served.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert server.answers(keep, "A") == ("NOERROR", set(a(keep, "10.70.0.1")))
            time.sleep(0.2)
        # Changes happen meanwhile, through a second API server on the same etcd.
        second = api.start_second()
        _changes_through(second, namespace)  # type: ignore[arg-type]
        second.stop()
        if compact:
            api.compact()  # the resourceVersion the server resumes from is now gone
        assert server.answers(fqdn("change", namespace), "A")[1] == set(
            a(fqdn("change", namespace), "10.70.0.2")), "changes arrived with the API down?"
    finally:
        api.start()
    change, drop, new = (fqdn(n, namespace) for n in ("change", "drop", "new"))
    expect(server, change, "A", "NOERROR", a(change, "10.70.0.22"), timeout=60)
    expect(server, drop, "A", "NXDOMAIN", [], timeout=60)
    expect(server, new, "A", "NOERROR", a(new, "10.70.0.4"), timeout=60)
    expect(server, hl, "A", "NOERROR", a(hl, "10.70.1.1"), timeout=60)
    expect(server, keep, "A", "NOERROR", a(keep, "10.70.0.1"))


def test_outage_keeps_answers_and_missed_events_arrive(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    _seed(api, namespace)
    server = server_for().start()
    server.wait_ready()
    _outage(api, server, namespace, compact=False)
    assert server.metric("clusterset_dns_watch_restarts_total") >= 1
    assert server.ready_status() == 200


def test_410_gone_relists_and_removes_what_vanished(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    _seed(api, namespace)
    server = server_for().start()
    server.wait_ready()
    relists = server.metric("clusterset_dns_relists_total")
    _outage(api, server, namespace, compact=True)
    assert server.metric("clusterset_dns_watch_restarts_total", reason="gone") >= 1
    assert server.metric("clusterset_dns_relists_total") > relists
    assert "too old" in server.log_text()


def test_servfail_and_not_ready_until_first_sync(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    api.apply(service_import("there", namespace, ports=[HTTP], ips=["10.71.0.1"]))
    api.stop()
    try:
        server = server_for("--startup-timeout", "1").start()
        server.wait_listening()  # serving after --startup-timeout, unsynced
        assert server.ready_status() == 503
        assert server.answers(fqdn("missing", namespace), "A") == ("SERVFAIL", set())
        assert server.answers("dns-version.clusterset.local", "TXT")[0] == "NOERROR"
    finally:
        api.start()
    wait_for(lambda: server.ready_status() == 200, 60, "/ready after the API came back")
    there = fqdn("there", namespace)
    expect(server, there, "A", "NOERROR", a(there, "10.71.0.1"))
    assert server.answers(fqdn("missing", namespace), "A") == ("NXDOMAIN", set())


def test_deploy_rbac_is_enough_and_errors_are_retried(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """The server runs with only deploy/base/rbac.yaml's rights: before they are granted it
    retries (never ready, never NXDOMAIN); once granted it syncs by itself."""
    api.apply(service_import("rbac", namespace, ports=[HTTP], ips=["10.72.0.1"]))
    server = server_for("--startup-timeout", "1", kubeconfig=api.reader_kubeconfig).start()
    server.wait_listening()
    time.sleep(0.5)
    assert server.ready_status() == 503
    assert server.answers(fqdn("rbac", namespace), "A") == ("SERVFAIL", set())
    rbac_yaml = (REPO / "deploy" / "base" / "rbac.yaml").read_text()
    role = next(d for d in yaml.safe_load_all(rbac_yaml)
                if d["kind"] == "ClusterRole")
    api.apply(role)
    api.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "clusterset-dns-test-reader"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": role["metadata"]["name"]},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": "reader"}]})
    wait_for(lambda: server.ready_status() == 200, 60, "/ready once RBAC allows the reads")
    rbac = fqdn("rbac", namespace)
    expect(server, rbac, "A", "NOERROR", a(rbac, "10.72.0.1"))
    assert "403" in server.log_text()
