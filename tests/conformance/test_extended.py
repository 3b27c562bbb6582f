"""Cases only this server can read (objects/extended, objects/files-only):
ServiceImport layouts (v1beta1 spec, v1alpha2 root, v1alpha2 status),
invalid IP entries, cluster ids that contain dots (KEP-2149)."""

from __future__ import annotations

import pytest

from .csdns_testlib import (
    ZONE,
    Dig,
    a_records,
    aaaa_records,
    check,
    check_nodata,
    check_nxdomain,
    rr,
    svc,
)

pytestmark = pytest.mark.extended


def ext(name: str) -> str:
    return svc(name, "ext")


def ep(host: str, cluster: str, service: str) -> str:
    return f"{host}.{cluster}.{service}.ext.svc.{ZONE}."


# ---------------------------------------------------------------- layouts

LAYOUT_CLUSTERSET_IP = [
    pytest.param("v1beta1-spec", ext("beta"), ["10.43.0.1"], ["fd00:43::1"], id="v1beta1-spec"),
    pytest.param("v1alpha2-root", ext("root"), ["10.43.0.2"], [], id="v1alpha2-root"),
    pytest.param(
        "v1alpha2-status",
        ext("status"),
        ["10.43.0.3"],
        [],
        marks=pytest.mark.deviation,
        id="v1alpha2-status",
    ),
]


@pytest.mark.parametrize(("layout", "name", "v4", "v6"), LAYOUT_CLUSTERSET_IP)
def test_layout_clusterset_ip_addresses(
    dig: Dig, layout: str, name: str, v4: list[str], v6: list[str]
) -> None:
    check(dig(name, "A"), answer=a_records(name, v4))
    if v6:
        check(dig(name, "AAAA"), answer=aaaa_records(name, v6))
    else:
        check_nodata(dig(name, "AAAA"))


@pytest.mark.parametrize(("layout", "name", "v4", "v6"), LAYOUT_CLUSTERSET_IP)
def test_layout_clusterset_ip_named_port_srv(
    dig: Dig, layout: str, name: str, v4: list[str], v6: list[str]
) -> None:
    qname = f"_http._tcp.{name}"
    check(
        dig(qname, "SRV"),
        answer=[rr(qname, "SRV", f"0 100 80 {name}")],
        additional=a_records(name, v4) + aaaa_records(name, v6),
    )


LAYOUT_HEADLESS = [
    pytest.param("v1beta1-spec", "beta-hl", "b-0", "10.43.3.1", id="v1beta1-spec"),
    pytest.param("v1alpha2-root", "root-hl", "r-0", "10.43.2.1", id="v1alpha2-root"),
    pytest.param(
        "v1alpha2-status",
        "status-hl",
        "s-0",
        "10.43.1.1",
        marks=pytest.mark.deviation,
        id="v1alpha2-status",
    ),
]


@pytest.mark.parametrize(("layout", "service", "host", "addr"), LAYOUT_HEADLESS)
def test_layout_headless(dig: Dig, layout: str, service: str, host: str, addr: str) -> None:
    name = ext(service)
    target = ep(host, "east", service)
    check(dig(name, "A"), answer=a_records(name, [addr]))
    check(dig(target, "A"), answer=a_records(target, [addr]))
    check(
        dig(name, "SRV"),
        answer=[rr(name, "SRV", f"0 100 80 {target}")],
        additional=a_records(target, [addr]),
    )


# ---------------------------------------------------------------- invalid IPs


def test_invalid_import_ip_dropped_valid_one_served(dig: Dig) -> None:
    name = ext("badip")
    check(dig(name, "A"), answer=a_records(name, ["10.43.0.50"]))
    check_nodata(dig(name, "AAAA"))


@pytest.mark.parametrize("rtype", ["A", "AAAA"])
def test_import_with_only_invalid_ips_exists_without_addresses(dig: Dig, rtype: str) -> None:
    check_nodata(dig(ext("allbad"), rtype))


@pytest.mark.files_only
def test_invalid_endpoint_address_dropped_rest_served(dig: Dig) -> None:
    name = ext("badep")
    check(dig(name, "A"), answer=a_records(name, ["10.44.0.1", "10.44.0.2"]))
    ok0, derived = ep("ok-0", "east", "badep"), ep("10-44-0-2", "east", "badep")
    check(dig(ok0, "A"), answer=a_records(ok0, ["10.44.0.1"]))
    check(dig(derived, "A"), answer=a_records(derived, ["10.44.0.2"]))
    check_nxdomain(dig(ep("bad-0", "east", "badep"), "A"))


# ---------------------------------------------------------------- dotted cluster ids

DOTTED = ext("dotted")
DOTTED_ENDPOINTS = [
    (ep("web-0", "east.example.com", "dotted"), "10.5.0.1"),
    (ep("10-5-0-2", "east.example.com", "dotted"), "10.5.0.2"),
    (ep("web-0", "east", "dotted"), "10.5.1.1"),
]
DOTTED_ENDPOINT_PARAMS = [
    pytest.param(*DOTTED_ENDPOINTS[0], marks=pytest.mark.deviation, id="web-0.east.example.com"),
    pytest.param(*DOTTED_ENDPOINTS[1], marks=pytest.mark.deviation, id="10-5-0-2.east.example.com"),
    pytest.param(*DOTTED_ENDPOINTS[2], id="web-0.east"),  # plain id next to a dotted one
]


@pytest.mark.parametrize(("name", "addr"), DOTTED_ENDPOINT_PARAMS)
def test_dotted_cluster_id_endpoint_names(dig: Dig, name: str, addr: str) -> None:
    check(dig(name, "A"), answer=a_records(name, [addr]))


def test_dotted_cluster_id_service_a(dig: Dig) -> None:
    check(dig(DOTTED, "A"), answer=a_records(DOTTED, ["10.5.0.1", "10.5.0.2", "10.5.1.1"]))


@pytest.mark.deviation
def test_dotted_cluster_id_srv_targets(dig: Dig) -> None:
    check(
        dig(DOTTED, "SRV"),
        answer=[rr(DOTTED, "SRV", f"0 33 80 {t}") for t, _ in DOTTED_ENDPOINTS],
        additional=[rr(t, "A", a) for t, a in DOTTED_ENDPOINTS],
    )


@pytest.mark.deviation
def test_dotted_cluster_id_case_insensitive(dig: Dig) -> None:
    qname = "WEB-0.East.Example.COM.dotted.ext.svc.clusterset.local."
    check(dig(qname, "A"), answer=a_records(qname, ["10.5.0.1"]))


DOTTED_ENT = [
    ep("", "east.example.com", "dotted").lstrip("."),  # the cluster id itself
    ep("", "east", "dotted").lstrip("."),
    # ancestors of the dotted cluster id have names below them too (RFC 8020)
    ep("", "example.com", "dotted").lstrip("."),
    ep("", "com", "dotted").lstrip("."),
]


@pytest.mark.deviation
@pytest.mark.parametrize("name", DOTTED_ENT, ids=[n.split(".dotted")[0] for n in DOTTED_ENT])
def test_dotted_cluster_id_levels_are_empty_non_terminals(dig: Dig, name: str) -> None:
    check_nodata(dig(name, "A"))


DOTTED_NX = [
    ep("web-0", "example.com", "dotted"),
    ep("web-0", "west.example.com", "dotted"),
    ep("web-1", "east.example.com", "dotted"),
    ep("10-5-0-2", "east", "dotted"),  # that endpoint is in east.example.com only
    f"x.{ep('web-0', 'east.example.com', 'dotted')}",
    f"web-0.east.example.org.dotted.ext.svc.{ZONE}.",
]


@pytest.mark.parametrize("name", DOTTED_NX, ids=[n.split(".dotted")[0] for n in DOTTED_NX])
def test_dotted_cluster_id_nonexistent_names(dig: Dig, name: str) -> None:
    check_nxdomain(dig(name, "A"))


def test_namespace_with_extended_imports_is_empty_non_terminal(dig: Dig) -> None:
    check_nodata(dig(f"ext.svc.{ZONE}.", "A"))
