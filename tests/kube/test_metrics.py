"""The metrics operators graph, against a real API server: the DNS programming delay
of an annotated EndpointSlice, imports by state, requests and EDE by code."""

from __future__ import annotations

import math
import time

import dns.message
import dns.query
import dns.rcode

from clusterset_dns_testkit.dnsserver import ServerProcess, expect, wait_for
from clusterset_dns_testkit.objects import HTTP, endpoint_slice, ready_endpoints, service_import
from clusterset_dns_testkit.peers import KubeAPI

from .names import a, fqdn

TRIGGER = "endpoints.kubernetes.io/last-change-trigger-time"
HISTOGRAM = "clusterset_dns_dns_programming_duration_seconds"


def test_programming_duration_from_the_trigger_time(api: KubeAPI, namespace: str,
                                                    server_for: type[ServerProcess]) -> None:
    """A slice last changed two days before the server started is not observed (not a
    delay of ours: before, a 172,801 s observation at every start); one written with a
    trigger time after the start is observed once, in the Headless kind, between its
    age when written and that plus the time the test took; a slice without the
    annotation is not observed at all."""
    db = fqdn("db", namespace)
    api.apply(service_import("db", namespace, ports=[HTTP], type_="Headless"))
    old = endpoint_slice("db-old", "db", namespace, "west",
                         endpoints=ready_endpoints(["10.30.0.8"]), ports=[HTTP])
    old["metadata"]["annotations"] = {
        TRIGGER: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 172_800))}
    api.apply(old)
    server = server_for().start()
    server.wait_ready()
    ready = time.time()  # after the server started
    plain = endpoint_slice("db-plain", "db", namespace, "east",
                           endpoints=ready_endpoints(["10.30.0.9"]), ports=[HTTP])
    api.apply(plain)
    expect(server, db, "A", "NOERROR", a(db, "10.30.0.8", "10.30.0.9"))
    assert server.metric(f"{HISTOGRAM}_count") == 0
    # The annotation has whole seconds: the next one after the server was ready.
    trigger = math.floor(ready) + 1
    time.sleep(max(0.0, trigger + 1 - time.time()))
    started = time.time()
    piece = endpoint_slice("db-east", "db", namespace, "east",
                           endpoints=ready_endpoints(["10.30.0.1"]), ports=[HTTP])
    piece["metadata"]["annotations"] = {
        TRIGGER: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(trigger))}
    api.apply(piece)
    expect(server, db, "A", "NOERROR", a(db, "10.30.0.1", "10.30.0.8", "10.30.0.9"))
    wait_for(lambda: server.metric(f"{HISTOGRAM}_count", service_kind="Headless") == 1, 10,
             "one observation")
    took = time.time() - started
    total = server.metric(f"{HISTOGRAM}_sum", service_kind="Headless")
    assert started - trigger <= total <= started - trigger + took, total
    assert server.metric(f"{HISTOGRAM}_bucket", service_kind="Headless", le="0.5") == 0
    assert server.metric(f"{HISTOGRAM}_bucket", service_kind="Headless", le="300.0") == 1
    # The same object again (a relist, an update of another field): not observed twice.
    piece["metadata"].setdefault("labels", {})["unrelated"] = "x"
    api.apply(piece)
    time.sleep(1)
    assert server.metric(f"{HISTOGRAM}_count") == 1


def test_imports_by_state_requests_and_ede(api: KubeAPI, namespace: str,
                                           server_for: type[ServerProcess]) -> None:
    server = server_for("--namespace", namespace).start()  # other tests' imports stay out
    server.wait_ready()
    api.apply(service_import("up", namespace, ports=[HTTP], ips=["10.31.0.1"]))
    api.apply(service_import("down", namespace, ports=[HTTP], type_="Headless"))
    api.apply(endpoint_slice("down-east", "down", namespace, "east",
                             endpoints=ready_endpoints(["10.31.1.1"], ready=[False]), ports=[HTTP]))
    up, down = fqdn("up", namespace), fqdn("down", namespace)
    expect(server, up, "A", "NOERROR", a(up, "10.31.0.1"))
    wait_for(lambda: server.metric("clusterset_dns_imports", state="no_endpoint") == 1, 10,
             "the headless import without a ready endpoint")
    assert server.metric("clusterset_dns_imports", state="served") == 1
    before = server.metric("clusterset_dns_answers_ede_total", code="0")
    for _ in range(3):  # the first worked out, then remembered: each one counted
        assert edns_query(server, down, "A").rcode() == dns.rcode.NXDOMAIN
    assert edns_query(server, up, "AAAA", tcp=True).rcode() == dns.rcode.NOERROR
    assert server.ask(down, "A").rcode() == dns.rcode.NXDOMAIN  # no OPT: no EDE
    assert server.metric("clusterset_dns_answers_ede_total", code="0") == before + 4
    assert server.metric("clusterset_dns_requests_total", type="A", proto="udp",
                         rcode="NXDOMAIN") >= 3
    assert server.metric("clusterset_dns_requests_total", type="AAAA", proto="tcp",
                         rcode="NOERROR") == 1
    assert server.metric("clusterset_dns_build_info") == 1


def edns_query(server: ServerProcess, name: str, rdtype: str,
               tcp: bool = False) -> dns.message.Message:
    message = dns.message.make_query(name, rdtype, use_edns=0)
    if tcp:
        return dns.query.tcp(message, server.host, port=server.port, timeout=2)
    return dns.query.udp(message, server.host, port=server.port, timeout=2)
