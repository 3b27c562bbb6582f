"""convert at its edges: the tables that share what objects repeat are bounded at their
size exactly (objects choose what goes in them), and each field DNS or explain reads
is cut, defaulted and refused where the API's limits say."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from clusterset_dns.sources import convert, fields
from clusterset_dns.zone.model import Hints, Port
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import


@pytest.mark.parametrize("module, table, cap, add", [
    (fields, "_shared_ports", 4096, lambda i: fields.shared((Port("", "tcp", i + 1),))),
    (convert, "_hostnames", 16384, lambda i: convert._hostname(f"h{i}")),
    (convert, "_shared_places", 4096, lambda i: convert._place(f"z{i}", None, None)),
    (convert, "_shared_hints", 4096,
     lambda i: convert._hints({"forZones": [{"name": f"z{i}"}]})),
])
def test_each_shared_table_starts_over_past_its_size(module: Any, table: str, cap: int,
                                                     add: Any) -> None:
    """Full at ``cap`` entries: the next new one empties it first."""
    shared = getattr(module, table)
    shared.clear()  # forked test runs start with what earlier tests left
    for i in range(cap):
        add(i)
    assert len(shared) == cap
    add(0)  # known: no change
    assert len(shared) == cap
    add(cap)
    assert len(shared) == 1


# --- what an Event, explain and the delta read of any object --------------------------------

@pytest.mark.parametrize("obj, found", [
    ({"apiVersion": "v1", "metadata": {"uid": "u-1"}}, ("v1", "u-1")),
    ({"apiVersion": "v1"}, ("v1", "")),
    ({"apiVersion": "v1", "metadata": "m"}, ("v1", "")),
    ({"apiVersion": 1, "metadata": {"uid": 7}}, ("", "")),
    ({"metadata": {"uid": "u-1"}}, ("", "u-1")),
])
def test_reference(obj: dict[str, Any], found: tuple[str, str]) -> None:
    assert convert.reference(obj) == found


@pytest.mark.parametrize("obj, found", [
    ({"metadata": {"resourceVersion": "42"}}, "42"),
    ({"metadata": {"resourceVersion": 42}}, ""),
    ({"metadata": ["resourceVersion"]}, ""),
    ({}, ""),
])
def test_resource_version(obj: dict[str, Any], found: str) -> None:
    assert convert.resource_version(obj) == found


def slice_meta(labels: Any) -> dict[str, Any]:
    return {"kind": "EndpointSlice", "metadata": {"name": "s-1", "namespace": "Prod",
                                                  "labels": labels}}


@pytest.mark.parametrize("obj, found", [
    ({"kind": "ServiceImport", "metadata": {"name": "Web", "namespace": "Prod"}},
     ("prod", "web")),
    ({"kind": "ServiceImport", "metadata": {"name": "web"}}, ("default", "web")),
    ({"kind": "ServiceImport", "metadata": {"name": "web", "namespace": ""}},
     ("default", "web")),
    ({"kind": "ServiceImport"}, None),
    ({"kind": "ServiceImport", "metadata": {"name": "web", "namespace": 7}}, None),
    (slice_meta({convert.SERVICE_NAME_LABEL: "Web"}), ("prod", "web")),
    (slice_meta({convert.SERVICE_NAME_LABEL: ""}), None),
    (slice_meta({convert.SERVICE_NAME_LABEL: 7}), None),
    (slice_meta({"kubernetes.io/service-name": "web"}), None),
    (slice_meta("labels"), None),
    (slice_meta(None), None),
])
def test_the_service_a_rejected_object_belongs_to(obj: dict[str, Any],
                                                  found: tuple[str, str] | None) -> None:
    assert convert.service_key(obj) == found


@pytest.mark.parametrize("obj, text", [
    ({"kind": "ServiceImport", "metadata": {"name": "web"}}, "ServiceImport default/web"),
    ({"kind": 7, "metadata": {"namespace": "p"}}, "? p/?"),
])
def test_describe_names_even_a_broken_object(obj: Any, text: str) -> None:
    assert convert.describe(obj) == text


def test_names_are_one_string_each() -> None:
    """A name already lower-case is kept as is (no copy per object); a namespace is
    interned (every object of a namespace shares it)."""
    name = "".join(["we", "b"])
    assert convert._lower(name) is name
    assert convert._lower("".join(["We", "b"])) == "web"
    namespace = "".join(["pr", "od-x"])
    key = convert.key_of({"metadata": {"name": "a", "namespace": namespace}})
    assert key[0] is convert.key_of({"metadata": {"name": "b", "namespace": "prod-x"}})[0]


# --- a ServiceImport's fields ---------------------------------------------------------------

@pytest.mark.parametrize("number, kept", [(0, False), (1, True), (65535, True), (65536, False),
                                          (-1, False), (False, False), (1.0, False)])
def test_a_port_number_is_1_to_65535(number: Any, kept: bool) -> None:
    warnings: list[str] = []
    imp = convert.service_import(service_import("web", ports=[port(number, "TCP", "p")]),
                                 warnings.append)
    assert imp.ports == ((Port("p", "tcp", number),) if kept else ())
    assert warnings == ([] if kept else
                        [f"ports[0] skipped: port {number!r} is not in 1..65535"])


@pytest.mark.parametrize("raw, message", [
    ("x", "ports[1] skipped: not an object"),
    ({"port": 80, "protocol": "QUIC"}, "ports[1] skipped: protocol 'QUIC' is not TCP, UDP or SCTP"),
    ({"port": 80, "protocol": 6}, "ports[1] skipped: protocol 6 is not TCP, UDP or SCTP"),
    ({"port": 80, "name": 7}, "ports[1] skipped: port name 7 is not a string"),
    ({"port": 80, "name": "a.b"}, "ports[1] skipped: port name: "),
])
def test_a_bad_port_is_skipped_with_what_is_wrong(raw: Any, message: str) -> None:
    warnings: list[str] = []
    imp = convert.service_import(service_import("web", ports=[port(53, "udp"), raw]),
                                 warnings.append)
    assert imp.ports == (Port("", "udp", 53),)
    assert len(warnings) == 1 and warnings[0].startswith(message)


def test_ports_that_are_not_a_list_refuse_the_import() -> None:
    raw = {**service_import("web"), "spec": {"type": "ClusterSetIP", "ports": "80"}}
    with pytest.raises(convert.InvalidObject, match=r"^ports is not a list$"):
        convert.service_import(raw)


@pytest.mark.parametrize("written, prefer, unknown", [
    ("PreferClose", "ZONE", None), ("PreferSameZone", "ZONE", None),
    ("PreferSameNode", "NODE", None), (None, "NOTHING", None),
    ("preferclose", "NOTHING", "preferclose"), ("P" * 101, "NOTHING", "P" * 100),
    ("P" * 100, "NOTHING", "P" * 100), (7, "NOTHING", "7"), (["PreferClose"] * 20, "NOTHING",
                                                            repr(["PreferClose"] * 20)[:100]),
])
def test_traffic_distribution(written: Any, prefer: str, unknown: str | None) -> None:
    raw = service_import("web", ips=["10.0.0.1"])
    if written is not None:
        raw["spec"]["trafficDistribution"] = written
    imp = convert.service_import(raw)
    assert imp.prefer.name == prefer and imp.unknown_traffic == unknown


@pytest.mark.parametrize("written, kept, absent", [
    ("Absent", "Absent", True), ("absent", "absent", False), ("A" * 257, "A" * 256, False),
    ("A" * 256, "A" * 256, False), (["Absent"], "", False)])
def test_slice_objects_is_read_and_cut(written: Any, kept: str, absent: bool) -> None:
    raw = service_import("web", type_="Headless")
    raw["status"] = {"endpointSliceObjects": written}
    imp = convert.service_import(raw)
    assert imp.slice_objects == kept and imp.slices_absent is absent


def test_conditions_keep_16_of_256_characters() -> None:
    """explain shows them: bounded to what a page can show."""
    many = [{"type": "T" * 300, "status": "S" * 257, "reason": "R" * 256, "message": 7}
            for _ in range(17)]
    raw = service_import("web", type_="Headless")
    raw["status"] = {"conditions": many}
    conditions = convert.service_import(raw).conditions
    assert len(conditions) == 16
    assert {(c.type, c.status, c.reason, c.message) for c in conditions} == {
        ("T" * 256, "S" * 256, "R" * 256, "")}
    raw["status"] = {"conditions": [{"type": ""}, {"type": 7}, {"type": "Ready"}]}
    assert [c.type for c in convert.service_import(raw).conditions] == ["Ready"]


def test_an_import_in_a_namespace_that_is_no_label_is_refused() -> None:
    with pytest.raises(convert.InvalidObject, match=r"^namespace: "):
        convert.service_import(service_import("web", namespace="a.b"))
    with pytest.raises(convert.InvalidObject, match=r"^name: "):
        convert.service_import(service_import("a.b"))


def test_the_ips_of_an_import_keep_their_order_each_once() -> None:
    warnings: list[str] = []
    imp = convert.service_import(service_import(
        "web", ips=["10.0.0.2", "10.0.0.1", "10.0.0.2", 7, "fe80::1%eth0"]), warnings.append)
    assert [str(ip) for ip in imp.ips] == ["10.0.0.2", "10.0.0.1"]
    assert warnings == ["IP 7 does not parse, dropped", "IP 'fe80::1%eth0' does not parse, "
                                                        "dropped"]


# --- an EndpointSlice's fields --------------------------------------------------------------

def one_slice(*endpoints: Any, **fields: Any) -> tuple[Any, list[str]]:
    warnings: list[str] = []
    raw = {**endpoint_slice("s", "db", endpoints=list(endpoints)), **fields}
    return convert.endpoint_slice(raw, warnings.append), warnings


@pytest.mark.parametrize("raw, message", [
    ("10.0.0.1", "endpoints[1] skipped: not an object"),
    ({"addresses": "10.0.0.1"}, "endpoints[1] skipped: addresses is not a list"),
    ({"addresses": ["10.0.0.1"], "hostname": 7}, "endpoints[1] skipped: hostname 7 is not a "
                                                 "string"),
    ({"addresses": ["10.0.0.1"], "hostname": "a.b"}, "endpoints[1] skipped: hostname: "),
    ({"addresses": ["10.0.0.1"], "hostname": ["web-0"]}, "endpoints[1] skipped: hostname "
                                                         "['web-0'] is not a string"),
    ({"addresses": ["10.0.0.300"]}, "endpoints[1]: address '10.0.0.300' does not parse, "
                                    "dropped"),
    ({"addresses": ["fd00::1"]}, "endpoints[1]: address 'fd00::1' is not IPv4 like its "
                                 "slice, dropped"),
])
def test_a_bad_endpoint_says_which_and_why(raw: Any, message: str) -> None:
    found, warnings = one_slice(endpoint("10.0.0.9"), raw)
    assert [str(e.addresses[0]) for e in found.endpoints] == ["10.0.0.9"]
    assert len(warnings) == 1 and warnings[0].startswith(message), warnings


@pytest.mark.parametrize("field, value, kept", [
    ("zone", "z-1", "z-1"), ("zone", "", None), ("zone", 7, None),
    ("nodeName", "n-1", "n-1"), ("nodeName", "", None), ("nodeName", ["n"], None),
    ("hostname", "Web-0", "web-0"), ("hostname", "", None), ("hostname", None, None),
])
def test_an_endpoints_place_and_name(field: str, value: Any, kept: str | None) -> None:
    convert._shared_places.clear()  # forked test runs start with the places earlier tests made
    found, warnings = one_slice({"addresses": ["10.0.0.1"], field: value})
    (only,) = found.endpoints
    attribute = {"nodeName": "node"}.get(field, field)
    assert getattr(only, attribute) == kept and warnings == []


def test_an_endpoints_zone_node_and_hints_are_kept_apart() -> None:
    """Each where the slice put it: places are shared by their three fields, so the
    table is emptied first (a forked run starts with the places earlier tests made)."""
    convert._shared_places.clear()
    found, warnings = one_slice({"addresses": ["10.0.0.1"], "zone": "z-1", "nodeName": "n-1",
                                 "hints": {"forZones": [{"name": "z-2"}]}})
    (only,) = found.endpoints
    assert (only.zone, only.node, only.hints) == ("z-1", "n-1", Hints(frozenset({"z-2"})))
    assert warnings == []


@pytest.mark.parametrize("bad, message", [
    ("fd00::1", "address 'fd00::1' is not IPv4 like its slice, dropped"),
    ("10.0.0.300", "address '10.0.0.300' does not parse, dropped"),
])
def test_an_address_dropped_skips_only_itself(bad: str, message: str) -> None:
    found, warnings = one_slice({"addresses": [bad, "10.0.0.1", "10.0.0.2"]})
    assert [str(a) for e in found.endpoints for a in e.addresses] == ["10.0.0.1", "10.0.0.2"]
    assert warnings == [f"endpoints[0]: {message}"]


def test_a_hostname_is_checked_once_and_shared() -> None:
    convert._hostnames.clear()
    found, _ = one_slice({"addresses": ["10.0.0.1"], "hostname": "".join(["we", "b-0"])},
                         {"addresses": ["10.0.0.2"], "hostname": "".join(["web", "-0"])})
    first, second = found.endpoints
    assert first.hostname is second.hostname
    assert list(convert._hostnames) == ["web-0"]


def test_an_endpoint_without_an_address_is_not_kept() -> None:
    found, warnings = one_slice({"addresses": []}, {"hostname": "web-1"},
                                {"addresses": None, "zone": "z"})
    assert (tuple(found.endpoints), tuple(found.serving), tuple(found.not_ready)) == ((), (), ())
    assert warnings == []


@pytest.mark.parametrize("fields, message", [
    ({"addressType": None}, "addressType None is not IPv4, IPv6 or FQDN"),
    ({"addressType": "ipv4"}, "addressType 'ipv4' is not IPv4, IPv6 or FQDN"),
    ({"endpoints": {"addresses": []}}, "endpoints is not a list"),
])
def test_a_slice_that_cannot_be_read_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(convert.InvalidObject) as refused:
        one_slice(**fields)
    assert str(refused.value) == message


@pytest.mark.parametrize("cluster, message", [
    (7, "cluster id 7 is not a string"), ("", "cluster id: "), (".", "cluster id: ")])
def test_a_cluster_id_that_is_no_name_refuses_the_slice(cluster: Any, message: str) -> None:
    raw = endpoint_slice("s", "db", endpoints=[endpoint("10.0.0.1")])
    raw["metadata"]["labels"][convert.SOURCE_CLUSTER_LABEL] = cluster
    with pytest.raises(convert.InvalidObject) as refused:
        convert.endpoint_slice(raw)
    assert str(refused.value).startswith(message)


@pytest.mark.parametrize("labels, message", [
    ("labels", "label multicluster.kubernetes.io/service-name missing or empty"),
    ({convert.SERVICE_NAME_LABEL: 7}, "label multicluster.kubernetes.io/service-name 7 is not "
                                      "a string"),
])
def test_a_slice_without_a_service_is_refused(labels: Any, message: str) -> None:
    raw = endpoint_slice("s", "db")
    raw["metadata"]["labels"] = labels
    with pytest.raises(convert.InvalidObject) as refused:
        convert.endpoint_slice(raw)
    assert str(refused.value) == message


@pytest.mark.parametrize("annotations, found", [
    ({convert.TRIGGER_TIME: "2026-01-02T03:04:05Z"}, 1767323045.0),
    ({convert.TRIGGER_TIME: "2026-01-02T03:04:05.5+00:00"}, 1767323045.5),
    ({convert.TRIGGER_TIME: 1767323045}, None),
    ({convert.TRIGGER_TIME: "soon"}, None),
    # Only as the EndpointSlice controller writes it (Go's RFC 3339: an upper-case Z).
    ({convert.TRIGGER_TIME: "2026-01-02T03:04:05z"}, None),
    # Only its Z is read as UTC, not a Z inside other text.
    ({convert.TRIGGER_TIME: "2026-01-02T03:04:05XXZXX"}, None),
    ("annotations", None),
])
def test_the_trigger_time(annotations: Any, found: float | None) -> None:
    raw = endpoint_slice("s", "db")
    raw["metadata"]["annotations"] = annotations
    assert convert.endpoint_slice(raw).trigger_time == found  # type: ignore[union-attr]


def test_an_ipv6_slice_keeps_its_addresses() -> None:
    found, warnings = one_slice({"addresses": ["FD00::1", "10.0.0.1"]}, addressType="IPv6")
    assert [str(a) for e in found.endpoints for a in e.addresses] == ["fd00::1"]
    assert warnings == ["endpoints[0]: address '10.0.0.1' is not IPv6 like its slice, dropped"]


@pytest.mark.parametrize("spec, message", [
    ({"type": "LoadBalancer"}, "type 'LoadBalancer' is neither ClusterSetIP nor Headless"),
    ({}, "type None is neither ClusterSetIP nor Headless"),
    ({"type": "ClusterSetIP", "ips": "10.0.0.1"}, "ips is not a list"),
])
def test_an_import_that_cannot_be_served_says_why(spec: dict[str, Any], message: str) -> None:
    raw = {**service_import("web"), "spec": spec}
    with pytest.raises(convert.InvalidObject) as refused:
        convert.service_import(raw)
    assert str(refused.value) == message


def test_objects_that_are_mappings_but_not_dicts_are_read_as_dicts() -> None:
    """JSON and YAML give dicts, which take a shortcut; any other mapping is read the
    same (the checks are by Mapping, the shortcut only saves time)."""
    frozen = MappingProxyType
    raw = service_import("web", ips=["10.0.0.1"], ports=[port(80)])
    raw["spec"] = frozen(raw["spec"])
    raw["status"] = frozen({"conditions": [frozen({"type": "Ready", "status": "True"})]})
    imp = convert.service_import(raw)
    assert [str(ip) for ip in imp.ips] == ["10.0.0.1"] and imp.ports == (Port("", "tcp", 80),)
    assert [c.type for c in imp.conditions] == ["Ready"]
    hints = frozen({"forZones": [frozen({"name": "z-a"})]})
    found, warnings = one_slice(frozen({"addresses": ["10.0.0.1"], "hints": hints,
                                        "conditions": frozen({"ready": False,
                                                              "serving": True})}))
    assert warnings == []
    (only,) = found.serving
    assert only.hints is not None and only.hints.zones == frozenset({"z-a"})


def test_an_object_without_a_namespace_is_in_default() -> None:
    assert convert.key_of({"metadata": {"name": "a"}}) == ("default", "a")
    assert convert.key_of({"metadata": {"name": "a", "namespace": ""}}) == ("default", "a")


def test_a_slices_bad_port_is_skipped_with_what_is_wrong() -> None:
    found, warnings = one_slice(ports=[port(53, "UDP", "dns"), port(0)])
    assert found.ports == (Port("dns", "udp", 53),)
    assert warnings == ["ports[1] skipped: port 0 is not in 1..65535"]


@pytest.mark.parametrize("obj, message", [
    ({}, "no metadata"),
    ({"metadata": "m"}, "no metadata"),
    ({"metadata": {"namespace": "p"}}, "metadata.name / metadata.namespace missing or not a "
                                       "string"),
    ({"metadata": {"name": 7}}, "metadata.name / metadata.namespace missing or not a string"),
    ({"metadata": {"name": ""}}, "metadata.name / metadata.namespace missing or not a string"),
    ({"metadata": {"name": "a", "namespace": 7}}, "metadata.name / metadata.namespace missing "
                                                  "or not a string"),
])
def test_an_object_without_a_name_is_refused(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(convert.InvalidObject) as refused:
        convert.key_of(obj)
    assert str(refused.value) == message
