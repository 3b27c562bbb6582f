"""Imports and slices written to a real API server show up in DNS, in every
layout and both address families; updates and deletions follow."""

from __future__ import annotations

from clusterset_dns_testkit.dnsserver import ServerProcess, expect, wait_for
from clusterset_dns_testkit.objects import (
    HTTP,
    STATUS_LAYOUT,
    V1ALPHA1,
    V1BETA1,
    endpoint_slice,
    ready_endpoints,
    service_import,
)
from clusterset_dns_testkit.peers import KubeAPI

from .names import a, fqdn

SLICE = "discovery.k8s.io/v1"


def test_clusterset_ip_create_update_delete(api: KubeAPI, namespace: str,
                                            server_for: type[ServerProcess]) -> None:
    server = server_for().start()
    server.wait_ready()
    web = fqdn("web", namespace)
    api.apply(service_import("web", namespace, ports=[HTTP], ips=["10.10.0.1", "fd00:10::1"]))
    expect(server, web, "A", "NOERROR", a(web, "10.10.0.1"))
    expect(server, web, "AAAA", "NOERROR", a(web, "fd00:10::1"))
    api.apply(service_import("web", namespace, ports=[HTTP], ips=["10.10.0.2"]))
    expect(server, web, "A", "NOERROR", a(web, "10.10.0.2"))
    expect(server, web, "AAAA", "NOERROR", [])  # NODATA: the name stays, the family went
    api.delete(V1BETA1, "ServiceImport", namespace, "web")
    expect(server, web, "A", "NXDOMAIN", [])


def test_v1alpha1_writes_are_seen_through_the_watched_version(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    server = server_for().start()
    server.wait_ready()
    assert "watching multicluster.x-k8s.io/v1beta1" in server.log_text()
    name = fqdn("old", namespace)
    api.apply(service_import("old", namespace, ports=[HTTP], ips=["10.11.0.1"],
                             api_version=V1ALPHA1))
    expect(server, name, "A", "NOERROR", a(name, "10.11.0.1"))


def test_headless_both_families_endpoints_and_readiness(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    server = server_for().start()
    server.wait_ready()
    db = fqdn("db", namespace)
    api.apply(service_import("db", namespace, ports=[HTTP], type_="Headless"))
    api.apply(endpoint_slice("db-east-v4", "db", namespace, "east", ports=[HTTP],
                             endpoints=ready_endpoints(["10.20.0.1", "10.20.0.2"],
                                                       hostnames=["db-0", None])))
    api.apply(endpoint_slice("db-west-v6", "db", namespace, "west.example.com", "IPv6",
                             ready_endpoints(["fd00:20::1"], hostnames=["db-1"]), [HTTP]))
    expect(server, db, "A", "NOERROR", a(db, "10.20.0.1", "10.20.0.2"))
    expect(server, db, "AAAA", "NOERROR", a(db, "fd00:20::1"))
    db0 = fqdn("db-0", "east", "db", namespace)
    expect(server, db0, "A", "NOERROR", a(db0, "10.20.0.1"))
    derived = fqdn("10-20-0-2", "east", "db", namespace)
    expect(server, derived, "A", "NOERROR", a(derived, "10.20.0.2"))
    db1 = fqdn("db-1", "west.example.com", "db", namespace)
    expect(server, db1, "AAAA", "NOERROR", a(db1, "fd00:20::1"))
    expect(server, db, "SRV", "NOERROR", [
        f"{db} 5 IN SRV 0 33 80 {db0}", f"{db} 5 IN SRV 0 33 80 {derived}",
        f"{db} 5 IN SRV 0 33 80 {db1}"])
    # db-0 stops being ready: it leaves every answer.
    api.apply(endpoint_slice("db-east-v4", "db", namespace, "east", ports=[HTTP],
                             endpoints=ready_endpoints(["10.20.0.1", "10.20.0.2"],
                                                       hostnames=["db-0", None],
                                                       ready=[False, True])))
    expect(server, db, "A", "NOERROR", a(db, "10.20.0.2"))
    expect(server, db0, "A", "NXDOMAIN", [])
    # The IPv6 slice goes: AAAA becomes NODATA, the endpoint name NXDOMAIN.
    api.delete(SLICE, "EndpointSlice", namespace, "db-west-v6")
    expect(server, db, "AAAA", "NOERROR", [])
    expect(server, db1, "AAAA", "NXDOMAIN", [])
    # No ready endpoint left at all: the service name does not exist.
    api.delete(SLICE, "EndpointSlice", namespace, "db-east-v4")
    expect(server, db, "A", "NXDOMAIN", [])


def test_only_the_mcs_label_selects_slices(api: KubeAPI, namespace: str,
                                           server_for: type[ServerProcess]) -> None:
    server = server_for().start()
    server.wait_ready()
    hl = fqdn("hl", namespace)
    api.apply(service_import("hl", namespace, ports=[HTTP], type_="Headless"))
    local = endpoint_slice("hl-local", "hl", namespace, "east",
                           endpoints=ready_endpoints(["10.30.0.9"]), ports=[HTTP])
    local["metadata"]["labels"] = {"kubernetes.io/service-name": "hl"}
    api.apply(local)
    api.apply(endpoint_slice("hl-mcs", "hl", namespace, "east",
                             endpoints=ready_endpoints(["10.30.0.1"]), ports=[HTTP]))
    expect(server, hl, "A", "NOERROR", a(hl, "10.30.0.1"))


def test_invalid_slice_is_skipped_and_counted(api: KubeAPI, namespace: str,
                                              server_for: type[ServerProcess]) -> None:
    server = server_for().start()
    server.wait_ready()
    before = server.metric("clusterset_dns_invalid_objects_total", kind="EndpointSlice")
    good = fqdn("good", namespace)
    api.apply(service_import("good", namespace, ports=[HTTP], type_="Headless"))
    bad = endpoint_slice("bad", "good", namespace, "east",
                         endpoints=ready_endpoints(["10.40.0.66"]), ports=[HTTP])
    bad["metadata"]["labels"]["multicluster.kubernetes.io/service-name"] = ""
    api.apply(bad)
    api.apply(endpoint_slice("good-1", "good", namespace, "east",
                             endpoints=ready_endpoints(["10.40.0.1"]), ports=[HTTP]))
    expect(server, good, "A", "NOERROR", a(good, "10.40.0.1"))
    wait_for(lambda: server.metric("clusterset_dns_invalid_objects_total",
                                   kind="EndpointSlice") > before, 10, "the invalid-object count")
    assert "skipped" in server.log_text()


def test_invalid_objects_of_the_first_list_are_counted_by_their_kind(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    """List items carry no kind, watch events do: the kind label says EndpointSlice
    either way (one vocabulary for the metric)."""
    api.apply(service_import("early", namespace, ports=[HTTP], type_="Headless"))
    bad = endpoint_slice("early-bad", "early", namespace, "east",
                         endpoints=ready_endpoints(["10.41.0.66"]), ports=[HTTP])
    bad["metadata"]["labels"]["multicluster.kubernetes.io/service-name"] = ""
    api.apply(bad)
    server = server_for().start()
    server.wait_ready()
    wait_for(lambda: server.metric("clusterset_dns_invalid_objects_total",
                                   kind="EndpointSlice") >= 1, 10, "the invalid-object count")
    assert server.metric("clusterset_dns_invalid_objects_total", kind="slice") == 0


def test_status_layout_fork_group(api: KubeAPI, namespace: str,
                                  server_for: type[ServerProcess]) -> None:
    server = server_for("--serviceimport-api", V1BETA1,
                        "--serviceimport-api", STATUS_LAYOUT).start()
    server.wait_ready()
    forked, real = fqdn("forked", namespace), fqdn("real", namespace)
    api.apply(service_import("forked", namespace, ports=[HTTP], ips=["10.50.0.1"],
                             api_version=STATUS_LAYOUT, layout="status"))
    api.apply(service_import("real", namespace, ports=[HTTP], ips=["10.50.0.2"]))
    expect(server, forked, "A", "NOERROR", a(forked, "10.50.0.1"))
    expect(server, real, "A", "NOERROR", a(real, "10.50.0.2"))
    # The controller moves the IP by writing the status subresource only.
    api.patch_status(STATUS_LAYOUT, "ServiceImport", namespace, "forked",
                     {"ips": ["10.50.0.3"]})
    expect(server, forked, "A", "NOERROR", a(forked, "10.50.0.3"))


def test_namespace_filter(api: KubeAPI, namespace: str,
                          server_for: type[ServerProcess]) -> None:
    other = namespace[:50] + "-x"
    api.ensure_namespace(other)
    server = server_for("--namespace", namespace).start()
    server.wait_ready()
    mine, theirs = fqdn("svc", namespace), fqdn("svc", other)
    api.apply(service_import("svc", other, ports=[HTTP], ips=["10.60.0.2"]))
    api.apply(service_import("svc", namespace, ports=[HTTP], ips=["10.60.0.1"]))
    expect(server, mine, "A", "NOERROR", a(mine, "10.60.0.1"))
    expect(server, theirs, "A", "NXDOMAIN", [])


def _watchers(api: KubeAPI, resource: str) -> float:
    """The API server's own count of open WATCH requests on ``resource``."""
    text = api.request("GET", "/metrics")
    total = 0.0
    for line in str(text).splitlines():
        if (line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line
                and f'resource="{resource}"' in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_workers_share_one_watch_and_all_get_updates(
        api: KubeAPI, namespace: str, server_for: type[ServerProcess]) -> None:
    before = {r: _watchers(api, r) for r in ("serviceimports", "endpointslices")}
    server = server_for("--workers", "2").start()
    server.wait_ready()
    web = fqdn("web", namespace)
    api.apply(service_import("web", namespace, ports=[HTTP], ips=["10.90.0.1"]))
    expect(server, web, "A", "NOERROR", a(web, "10.90.0.1"))
    # One watch per resource, whatever the number of workers.
    wait_for(lambda: all(_watchers(api, r) == before[r] + 1 for r in before), 10,
             "one WATCH per resource")
    api.apply(service_import("web", namespace, ports=[HTTP], ips=["10.90.0.2"]))
    expect(server, web, "A", "NOERROR", a(web, "10.90.0.2"))
    # SO_REUSEPORT spreads client sockets over the workers by their source port:
    # every fresh socket must see the update, whichever worker answers it.
    counted = server.metric("clusterset_dns_responses_total", rcode="NOERROR")
    for _ in range(40):
        assert server.answers(web, "A") == ("NOERROR", set(a(web, "10.90.0.2")))
    # /metrics (served by the first process) adds up every worker's answers.
    wait_for(lambda: server.metric("clusterset_dns_responses_total", rcode="NOERROR")
             >= counted + 40, 10, "both workers' answers in /metrics")
