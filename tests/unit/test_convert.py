"""convert: raw API dicts -> model (docs/dns-behaviour.md §1)."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

import pytest

from clusterset_dns.sources import convert
from clusterset_dns.zone.model import Endpoint, Port, ServiceType
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import


def ips(*texts: str) -> tuple[Any, ...]:
    return tuple(ip_address(t) for t in texts)


CSIP, HEADLESS = ServiceType.CLUSTER_SET_IP, ServiceType.HEADLESS

# -- ServiceImport ----------------------------------------------------------------------------

# (id, raw object, expected (namespace, name, type, ips, ports))
IMPORTS: list[tuple[str, dict[str, Any], tuple[Any, ...]]] = [
    ("v1beta1-spec", service_import("web", ips=["10.0.0.1"], ports=[port(80, "TCP", "http")]),
     ("prod", "web", CSIP, ips("10.0.0.1"), (Port("http", "tcp", 80),))),
    ("v1alpha1-spec",
     service_import("web", ips=["10.0.0.1", "fd00::1"],
                    api_version="multicluster.x-k8s.io/v1alpha1"),
     ("prod", "web", CSIP, ips("10.0.0.1", "fd00::1"), ())),
    ("v1alpha2-root",
     service_import("web", ips=["10.0.0.2"], ports=[port(53, "UDP", "dns")], layout="root",
                    api_version="multicluster.x-k8s.io/v1alpha2"),
     ("prod", "web", CSIP, ips("10.0.0.2"), (Port("dns", "udp", 53),))),
    ("status-layout",
     service_import("web", ips=["10.0.0.3"], ports=[port(443, "TCP", "https")], layout="status",
                    api_version="net.gke.io/v1"),
     ("prod", "web", CSIP, ips("10.0.0.3"), (Port("https", "tcp", 443),))),
    ("headless-spec", service_import("db", type_="Headless", ports=[port(5432, "TCP", "pg")]),
     ("prod", "db", HEADLESS, (), (Port("pg", "tcp", 5432),))),
    ("headless-ignores-ips", service_import("db", type_="Headless", ips=["10.0.0.9"]),
     ("prod", "db", HEADLESS, (), ())),
    ("precedence-status-over-root-over-spec",
     {**service_import("web", ips=["10.0.0.1"], ports=[port(1, "TCP", "spec")]),
      "ips": ["10.0.0.2"], "ports": [port(2, "TCP", "root")],
      "status": {"ips": ["10.0.0.3"]}},
     ("prod", "web", CSIP, ips("10.0.0.3"), (Port("root", "tcp", 2),))),
    ("precedence-root-over-spec-type",
     {**service_import("web", type_="Headless"), "type": "ClusterSetIP", "ips": ["10.0.0.2"]},
     ("prod", "web", CSIP, ips("10.0.0.2"), ())),
    ("precedence-status-type",
     {**service_import("web", ips=["10.0.0.1"]), "status": {"type": "Headless"}},
     ("prod", "web", HEADLESS, (), ())),
    ("names-lower-cased", service_import("Web", namespace="Prod", ips=["10.0.0.1"]),
     ("prod", "web", CSIP, ips("10.0.0.1"), ())),
    ("namespace-defaults", service_import("web", namespace=None, ips=["10.0.0.1"]),
     ("default", "web", CSIP, ips("10.0.0.1"), ())),
    ("ip-whitespace-and-duplicates",
     service_import("web", ips=[" 10.0.0.1 ", "10.0.0.1", "FD00::1"]),
     ("prod", "web", CSIP, ips("10.0.0.1", "fd00::1"), ())),
    ("no-ips", service_import("web"), ("prod", "web", CSIP, (), ())),
    ("all-ips-invalid", service_import("web", ips=["nope", "10.0.0.256", "10.0.0.1/32"]),
     ("prod", "web", CSIP, (), ())),
    ("port-protocol-defaults-to-tcp",
     service_import("web", ports=[port(80), port(81, "", "b"), port(53, "udp", "DNS"),
                                  port(3868, "SCTP", "sig")]),
     ("prod", "web", CSIP, (),
      (Port("", "tcp", 80), Port("b", "tcp", 81), Port("dns", "udp", 53),
       Port("sig", "sctp", 3868)))),
    ("bad-ports-skipped",
     service_import("web", ports=[port(0, "TCP", "zero"), port(65536, "TCP", "big"),
                                  port("80", "TCP", "text"), port(True, "TCP", "bool"),
                                  port(80, "HTTP", "proto"), port(80, "TCP", "a.b"),
                                  "not-a-port", port(8080, "TCP", "ok")]),
     ("prod", "web", CSIP, (), (Port("ok", "tcp", 8080),))),
]


@pytest.mark.parametrize(("raw", "expected"), [(r, e) for _, r, e in IMPORTS],
                         ids=[i for i, _, _ in IMPORTS])
def test_service_import(raw: dict[str, Any], expected: tuple[Any, ...]) -> None:
    imp = convert.service_import(raw)
    assert (imp.namespace, imp.name, imp.type, imp.ips, imp.ports) == expected


# (id, raw object, texts each warning must contain, in order)
IMPORT_WARNINGS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("one-bad-ip", service_import("web", ips=["10.0.0.1", "10.0.0.999"]), ["10.0.0.999"]),
    ("all-bad-ips", service_import("web", ips=["bogus", "fd00::zz"]), ["bogus", "fd00::zz"]),
    ("bad-port", service_import("web", ports=[port(70000, "TCP", "x"), port(80)]), ["70000"]),
    ("bad-protocol", service_import("web", ports=[port(80, "QUIC", "x")]), ["QUIC"]),
    ("no-warning", service_import("web", ips=["10.0.0.1"], ports=[port(80)]), []),
]


@pytest.mark.parametrize(("raw", "expected"), [(r, e) for _, r, e in IMPORT_WARNINGS],
                         ids=[i for i, _, _ in IMPORT_WARNINGS])
def test_service_import_warnings(raw: dict[str, Any], expected: list[str]) -> None:
    warnings: list[str] = []
    convert.service_import(raw, warnings.append)
    assert len(warnings) == len(expected), warnings
    for message, text in zip(warnings, expected, strict=True):
        assert text in message


def test_bad_ip_dropped_rest_served() -> None:
    warnings: list[str] = []
    raw = service_import("web", ips=["not-an-ip", "fd00::5"], ports=[port(80, "TCP", "http")])
    imp = convert.service_import(raw, warnings.append)
    assert imp.ips == ips("fd00::5")
    assert imp.ports == (Port("http", "tcp", 80),)
    assert len(warnings) == 1 and "not-an-ip" in warnings[0]


INVALID_IMPORTS: list[tuple[str, Any]] = [
    ("unknown-type", service_import("web", type_="LoadBalancer")),
    ("no-type", {"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
                 "metadata": {"name": "web", "namespace": "prod"}, "spec": {}}),
    ("missing-name", {**service_import("web"), "metadata": {"namespace": "prod"}}),
    ("empty-name", {**service_import("web"), "metadata": {"name": "", "namespace": "prod"}}),
    ("name-not-a-string", {**service_import("web"), "metadata": {"name": 7}}),
    ("no-metadata", {"kind": "ServiceImport", "spec": {"type": "ClusterSetIP"}}),
    ("name-not-a-label", service_import("a.b")),
    ("ips-not-a-list", service_import("web", ips=None) | {"spec": {"type": "ClusterSetIP",
                                                                   "ips": "10.0.0.1"}}),
    ("ports-not-a-list", {**service_import("web"), "spec": {"type": "ClusterSetIP",
                                                            "ports": {"port": 80}}}),
    ("type-not-a-string", {**service_import("web"), "spec": {"type": ["ClusterSetIP"]}}),
    ("type-an-object", {**service_import("web"), "spec": {"type": {"ClusterSetIP": 1}}}),
    ("type-a-member-name", service_import("web", type_="CLUSTER_SET_IP")),
    # 0 is a value, not an empty one: it is read, and is not a list.
    ("ports-zero", {**service_import("web"), "status": {"ports": 0},
                    "spec": {"type": "ClusterSetIP", "ports": [{"port": 80}]}}),
]


def test_empty_values_fall_through_to_the_next_layout() -> None:
    """A field that is null, "" or [] in one place (status, root, spec, in that order)
    is read from the next one."""
    raw = {**service_import("web"), "status": {"type": "", "ips": [], "ports": None},
           "ips": None, "ports": [],
           "spec": {"type": "ClusterSetIP", "ips": ["10.0.0.1"], "ports": [{"port": 80}]}}
    imp = convert.service_import(raw)
    assert (imp.type, imp.ips, imp.ports) == (CSIP, ips("10.0.0.1"), (Port("", "tcp", 80),))


@pytest.mark.parametrize("raw", [r for _, r in INVALID_IMPORTS],
                         ids=[i for i, _ in INVALID_IMPORTS])
def test_service_import_invalid(raw: Any) -> None:
    with pytest.raises(convert.InvalidObject):
        convert.service_import(raw)


# -- EndpointSlice ----------------------------------------------------------------------------

V4 = ip_address("10.1.0.1")

# (id, raw object, expected (service, cluster, endpoints, ports))
SLICES: list[tuple[str, dict[str, Any], tuple[Any, ...]]] = [
    ("ready-absent-is-ready",
     endpoint_slice("s", "db", cluster="east", endpoints=[endpoint("10.1.0.1")]),
     ("db", "east", (Endpoint(ips("10.1.0.1"), None),), ())),
    ("ready-true",
     endpoint_slice("s", "db", endpoints=[endpoint("10.1.0.1", ready=True)]),
     ("db", None, (Endpoint(ips("10.1.0.1"), None),), ())),
    ("conditions-without-ready",
     endpoint_slice("s", "db", endpoints=[{"addresses": ["10.1.0.1"],
                                           "conditions": {"serving": True}}]),
     ("db", None, (Endpoint(ips("10.1.0.1"), None),), ())),
    ("ready-false-excluded",
     endpoint_slice("s", "db", endpoints=[endpoint("10.1.0.1", ready=False),
                                          endpoint("10.1.0.2", hostname="B")]),
     ("db", None, (Endpoint(ips("10.1.0.2"), "b"),), ())),
    ("dotted-cluster-id-kept",
     endpoint_slice("s", "db", cluster="East.Prod.Example", endpoints=[endpoint("10.1.0.1")]),
     ("db", "east.prod.example", (Endpoint(ips("10.1.0.1"), None),), ())),
    ("no-source-cluster", endpoint_slice("s", "db", endpoints=[]), ("db", None, (), ())),
    ("service-label-lower-cased", endpoint_slice("s", "DB"), ("db", None, (), ())),
    ("ipv6",
     endpoint_slice("s", "db", address_type="IPv6", endpoints=[endpoint("FD00::1")]),
     ("db", None, (Endpoint(ips("fd00::1"), None),), ())),
    ("wrong-family-dropped",
     endpoint_slice("s", "db", endpoints=[endpoint("fd00::1", "10.1.0.1"), endpoint("fd00::2")]),
     ("db", None, (Endpoint(ips("10.1.0.1"), None),), ())),
    ("wrong-family-dropped-v6",
     endpoint_slice("s", "db", address_type="IPv6", endpoints=[endpoint("10.1.0.1")]),
     ("db", None, (), ())),
    ("bad-hostname-endpoint-skipped",
     endpoint_slice("s", "db", endpoints=[endpoint("10.1.0.1", hostname="a.b"),
                                          endpoint("10.1.0.2", hostname="x" * 64),
                                          endpoint("10.1.0.3", hostname="ok")]),
     ("db", None, (Endpoint(ips("10.1.0.3"), "ok"),), ())),
    ("slice-ports",
     endpoint_slice("s", "db", ports=[port(5432, "TCP", "PG"), port(53, None, None),
                                      port(-1, "TCP", "bad")]),
     ("db", None, (), (Port("pg", "tcp", 5432), Port("", "tcp", 53)))),
    ("no-endpoints-field", {**endpoint_slice("s", "db"), "endpoints": None},
     ("db", None, (), ())),
]


@pytest.mark.parametrize(("raw", "expected"), [(r, e) for _, r, e in SLICES],
                         ids=[i for i, _, _ in SLICES])
def test_endpoint_slice(raw: dict[str, Any], expected: tuple[Any, ...]) -> None:
    piece = convert.endpoint_slice(raw)
    assert piece is not None
    assert (piece.namespace, piece.name) == ("prod", "s")
    assert (piece.service, piece.cluster, tuple(piece.endpoints), piece.ports) == expected


def test_fqdn_slice_ignored() -> None:
    raw = endpoint_slice("s", "db", address_type="FQDN", endpoints=[endpoint("db.example.com")])
    assert convert.endpoint_slice(raw) is None


# (id, raw object, texts each warning must contain)
SLICE_WARNINGS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("wrong-family", endpoint_slice("s", "db", endpoints=[endpoint("fd00::7", "10.0.0.1")]),
     ["fd00::7"]),
    ("bad-address", endpoint_slice("s", "db", endpoints=[endpoint("10.0.0.300")]),
     ["10.0.0.300"]),
    ("bad-hostname", endpoint_slice("s", "db", endpoints=[endpoint("10.0.0.1", hostname="a.b"),
                                                          endpoint("10.0.0.2")]),
     ["a.b"]),
    ("not-ready-is-silent", endpoint_slice("s", "db", endpoints=[endpoint("10.0.0.1",
                                                                          ready=False)]), []),
]


@pytest.mark.parametrize(("raw", "expected"), [(r, e) for _, r, e in SLICE_WARNINGS],
                         ids=[i for i, _, _ in SLICE_WARNINGS])
def test_endpoint_slice_warnings(raw: dict[str, Any], expected: list[str]) -> None:
    warnings: list[str] = []
    convert.endpoint_slice(raw, warnings.append)
    assert len(warnings) == len(expected), warnings
    for message, text in zip(warnings, expected, strict=True):
        assert text in message


INVALID_SLICES: list[tuple[str, Any]] = [
    ("missing-service-name-label", endpoint_slice("s", None, cluster="east")),
    ("only-kubernetes-service-name-label",
     {**endpoint_slice("s", None), "metadata": {
         "name": "s", "namespace": "prod", "labels": {"kubernetes.io/service-name": "db"}}}),
    ("empty-service-name-label", endpoint_slice("s", "")),
    ("service-name-not-a-label", endpoint_slice("s", "a.b")),
    ("no-labels", {**endpoint_slice("s", "db"), "metadata": {"name": "s", "namespace": "prod"}}),
    ("cluster-id-not-a-name", endpoint_slice("s", "db", cluster="x" * 64)),
    ("cluster-id-empty-label", endpoint_slice("s", "db", cluster="a..b")),
    ("unknown-address-type", endpoint_slice("s", "db", address_type="IPv5")),
    ("missing-name", {**endpoint_slice("s", "db"), "metadata": {
        "namespace": "prod", "labels": {convert.SERVICE_NAME_LABEL: "db"}}}),
]


@pytest.mark.parametrize("raw", [r for _, r in INVALID_SLICES],
                         ids=[i for i, _ in INVALID_SLICES])
def test_endpoint_slice_invalid(raw: Any) -> None:
    with pytest.raises(convert.InvalidObject):
        convert.endpoint_slice(raw)


# -- recognising objects ----------------------------------------------------------------------

KINDS: list[tuple[str, dict[str, Any], bool, bool]] = [
    ("v1alpha1", {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport"},
     True, False),
    ("v1beta1", {"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport"},
     True, False),
    ("v1alpha2", {"apiVersion": "multicluster.x-k8s.io/v1alpha2", "kind": "ServiceImport"},
     True, False),
    ("fork-not-configured", {"apiVersion": "net.gke.io/v1", "kind": "ServiceImport"},
     False, False),
    ("slice", {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice"}, False, True),
    ("slice-v1beta1", {"apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice"},
     False, False),
    ("service", {"apiVersion": "v1", "kind": "Service"}, False, False),
]


@pytest.mark.parametrize(("obj", "is_import", "is_slice"),
                         [(o, i, s) for _, o, i, s in KINDS], ids=[k[0] for k in KINDS])
def test_kinds(obj: dict[str, Any], is_import: bool, is_slice: bool) -> None:
    assert convert.is_service_import(obj) is is_import
    assert convert.is_endpoint_slice(obj) is is_slice


def test_fork_group_when_configured() -> None:
    obj = {"apiVersion": "net.gke.io/v1", "kind": "ServiceImport"}
    assert convert.is_service_import(obj, frozenset({convert.GROUP, "net.gke.io"}))


@pytest.mark.parametrize(("obj", "text"), [
    (service_import("web"), "ServiceImport prod/web"),
    ({"kind": "EndpointSlice"}, "EndpointSlice default/?"),
    ({"metadata": "broken"}, "? default/?"),
])
def test_describe(obj: dict[str, Any], text: str) -> None:
    assert convert.describe(obj) == text


# The IPv4 fast path (inet_pton) must accept and reject exactly what ipaddress does.
ADDRESS_TEXTS = ["10.1.2.3", "0.0.0.0", "255.255.255.255", " 10.1.2.3 ", "01.2.3.4",
                 "1.2.3.04", "000.1.2.3", "256.1.1.1", "1.2.3", "1.2.3.4.5", "1..3.4",
                 "+1.2.3.4", "0x1.2.3.4", "1.2.3.4\x00", "\u0661.2.3.4", "1.2.3.4/32",
                 "fd00::1", "::ffff:1.2.3.4", "fe80::1%eth0", "", "yes", "1 .2.3.4"]


@pytest.mark.parametrize("text", ADDRESS_TEXTS)
def test_address_parsing_matches_ipaddress(text: str) -> None:
    try:
        expected: object = ip_address(text.strip())
    except ValueError:
        expected = None
    if getattr(expected, "scope_id", None):
        expected = None
    found = convert._ip(text)
    assert found == expected
    assert type(found) is type(expected)


@pytest.mark.parametrize("family", ["IPv4", "IPv6"])
def test_endpoint_addresses_are_parsed_as_the_address_parser_does(family: str) -> None:
    """An endpoint's addresses take a faster path for IPv4 text; what it keeps is exactly
    what _ip() gives, of the slice's family, whatever the text (or not text)."""
    texts: list[Any] = [*ADDRESS_TEXTS, 7, None, ["10.1.2.3"], {"ip": "10.1.2.3"}]
    raw = endpoint_slice("s", "db", address_type=family,
                         endpoints=[{"addresses": [text]} for text in texts])
    warnings: list[str] = []
    found = convert.endpoint_slice(raw, warnings.append)
    assert found is not None
    version = 4 if family == "IPv4" else 6
    expected = [convert._ip(text) for text in texts]
    kept = [(ip,) for ip in expected if ip is not None and ip.version == version]
    assert [e.addresses for e in found.endpoints] == kept
    assert all(type(a) is type(b) for e, (b,) in zip(found.endpoints, kept, strict=True)
               for a in e.addresses)
    assert len(warnings) == len(texts) - len(kept)  # each address dropped says so


# -- status fields explain reads: endpointSliceObjects and conditions (every layout) ----------

_CONDITIONS = [{"type": "Ready", "status": "False", "reason": "NoEndpoints",
                "message": "no slice yet", "lastTransitionTime": "2026-01-01T00:00:00Z"},
               {"status": "True"},  # no type: skipped
               "junk"]


@pytest.mark.parametrize("layout", ["spec", "status", "root"])
@pytest.mark.parametrize(("given", "absent"), [("Absent", True), ("Present", False),
                                               (None, False), (7, False)])
def test_status_fields_are_read_in_every_layout(layout: str, given: Any, absent: bool) -> None:
    fields: dict[str, Any] = {"type": "Headless", "ports": [{"port": 80}]}
    status: dict[str, Any] = {"conditions": _CONDITIONS}
    if given is not None:
        status["endpointSliceObjects"] = given
    obj: dict[str, Any] = {"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
                           "metadata": {"name": "web", "namespace": "prod",
                                        "resourceVersion": "42"}}
    if layout == "spec":  # v1alpha1/v1beta1: fields in spec, the rest in status
        obj["spec"], obj["status"] = fields, status
    elif layout == "status":  # the forks: everything in status
        obj["status"] = {**fields, **status}
    else:  # the v1alpha2 proposal: fields at the root, status beside them
        obj.update(fields)
        obj["status"] = status
    imp = convert.service_import(obj)
    assert imp.slices_absent is absent
    assert imp.slice_objects == (given if isinstance(given, str) else "")
    assert imp.resource_version == "42"
    assert [(c.type, c.status, c.reason, c.message) for c in imp.conditions] == [
        ("Ready", "False", "NoEndpoints", "no slice yet")]


def test_conditions_are_bounded_and_never_fail_an_import() -> None:
    many = [{"type": f"T{i}", "status": "True", "message": "m" * 10_000} for i in range(100)]
    obj = {"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
           "metadata": {"name": "web", "namespace": "prod"},
           "spec": {"type": "ClusterSetIP", "ips": ["10.0.0.1"]},
           "status": {"conditions": many}}
    imp = convert.service_import(obj)
    assert len(imp.conditions) == convert.MAX_CONDITIONS
    assert all(len(c.message) == convert.MAX_CONDITION_TEXT for c in imp.conditions)
    for junk in ("text", 5, {"a": 1}, [None, 3]):
        assert convert.service_import({**obj, "status": {"conditions": junk}}).conditions == ()


def test_not_ready_endpoints_are_kept_apart_with_the_trigger_time() -> None:
    obj = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": "web-a", "namespace": "prod", "resourceVersion": "9",
                        "labels": {convert.SERVICE_NAME_LABEL: "web"},
                        "annotations": {convert.TRIGGER_TIME: "2026-01-02T03:04:05Z"}},
           "addressType": "IPv4",
           "endpoints": [{"addresses": ["10.0.0.1"]},
                         {"addresses": ["10.0.0.2"], "conditions": {"ready": False}}]}
    piece = convert.endpoint_slice(obj)
    assert piece is not None
    assert [str(e.addresses[0]) for e in piece.endpoints] == ["10.0.0.1"]
    assert [str(e.addresses[0]) for e in piece.not_ready] == ["10.0.0.2"]
    assert piece.resource_version == "9"
    assert piece.trigger_time == 1767323045.0
    obj["metadata"]["annotations"] = {convert.TRIGGER_TIME: "yesterday"}
    assert convert.endpoint_slice(obj).trigger_time is None  # type: ignore[union-attr]


def test_objects_share_repeated_ports_and_namespaces() -> None:
    """At 100,000 imports a copy of the same ports, namespace and service name per
    object is most of what an import costs: decoded JSON gives each object its own."""
    def ports() -> list[dict[str, Any]]:
        return [port(80, "TCP", "http")]

    # Fresh strings, as two JSON documents give them.
    a = convert.service_import(service_import("a", namespace="".join(["pr", "od"]),
                                              ips=["10.0.0.1"], ports=ports()))
    b = convert.service_import(service_import("b", namespace="".join(["pro", "d"]),
                                              ips=["10.0.0.2"], ports=ports()))
    assert a.ports == b.ports and a.ports is b.ports
    assert a.namespace is b.namespace
    one = convert.endpoint_slice(endpoint_slice("a-1", "".join(["w", "eb"]), cluster="c1",
                                                endpoints=[endpoint("10.1.0.1")], ports=ports()))
    two = convert.endpoint_slice(endpoint_slice("a-2", "".join(["we", "b"]), cluster="c1",
                                                endpoints=[endpoint("10.1.0.2")], ports=ports()))
    assert one is not None and two is not None
    assert one.ports is a.ports and one.service is two.service
    assert one.namespace is a.namespace and one.cluster is two.cluster
    key = convert.key_of(service_import("c", namespace="".join(["pr", "od"])))
    assert key[0] is a.namespace
